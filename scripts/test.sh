#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this):
# unit, in-process and live tests (swift test), then the contract, Dockerfile and browser checks.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
if ! swift build --build-tests > /tmp/bff-build.log 2>&1; then
  grep -E "error:" /tmp/bff-build.log | head -40 >&2
  tail -n 40 /tmp/bff-build.log >&2
  echo "build failed; the full log is /tmp/bff-build.log" >&2
  exit 1
fi
tail -n 1 /tmp/bff-build.log
swift test 2>&1 | tee /tmp/bff-swift-test.log | grep -E "error:|failed|Executed|passed after|failed after" | grep -v "' passed (" || true
if ! grep -qE "Executed [0-9]+ tests?, with 0 failures" /tmp/bff-swift-test.log || grep -qE "with [1-9][0-9]* failures?" /tmp/bff-swift-test.log; then
  echo "swift test failed; the full log is /tmp/bff-swift-test.log" >&2
  grep -E "error:|XCTAssert|failed" /tmp/bff-swift-test.log | head -50 >&2
  exit 1
fi
for check in scripts/check-openapi.sh scripts/check-dockerfile.sh Tests/browser/run.sh scripts/fuzz-contract-live.sh; do
  if [[ -x "$check" ]]; then echo "== $check"; "$check"; fi
done
echo "all checks passed"
