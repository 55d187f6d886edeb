#!/usr/bin/env bash
# Contract fuzzing: runs schemathesis (4.x) against a live server, loading the server's own
# /openapi.yaml, and fails on any 5xx the contract does not allow, any undocumented status, content
# type or header, and any body that does not match its schema.
#
# Usage: .ci/fuzz-contract.sh URL        e.g. .ci/fuzz-contract.sh http://127.0.0.1:8080
# Environment (all optional):
#   FUZZ_MAX_EXAMPLES  test cases per operation and phase (default 25)
#   FUZZ_MAX_TIME      seconds for the whole run, hard-stopped at +30 s (default 120; keep <= 150)
#   FUZZ_CHECKS        schemathesis checks (default below)
#   FUZZ_PHASES        schemathesis phases (default examples,coverage,fuzzing,stateful)
#   FUZZ_SEED          a seed, to replay a run
#   FUZZ_REPORT_DIR    where a JUnit report goes (default artifacts/fuzz)
set -euo pipefail

URL="${1:-${BFF_URL:-}}"
if [[ -z "$URL" || $# -gt 1 ]]; then
    echo "usage: $0 [URL]   (the base URL of a running bff, e.g. http://127.0.0.1:8080; default \$BFF_URL)" >&2
    exit 2
fi
BASE="${URL%/}"
case "$BASE" in
    http://127.*|http://localhost*|http://\[::1\]*) ;;
    *) echo "fuzz-contract: refusing $BASE: only loopback servers are fuzzed" >&2; exit 2 ;;
esac

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
MAX_EXAMPLES="${FUZZ_MAX_EXAMPLES:-25}"
MAX_TIME="${FUZZ_MAX_TIME:-120}"
CHECKS="${FUZZ_CHECKS:-not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance}"
PHASES="${FUZZ_PHASES:-examples,coverage,fuzzing,stateful}"
REPORT_DIR="${FUZZ_REPORT_DIR:-$ROOT/artifacts/fuzz}"

# The CLI changed incompatibly between 3.x and 4.x: this script speaks 4.x, and needs 4.32 or later
# for event streams (max-stream-events) and --max-time.
SCHEMATHESIS_OK='import schemathesis, sys
major, minor = (int(p) for p in schemathesis.__version__.split(".")[:2])
sys.exit(0 if major == 4 and minor >= 32 else 1)'
if ! "$PYTHON" -c "$SCHEMATHESIS_OK" 2> /dev/null; then
    echo "fuzz-contract: installing schemathesis 4.x (pip)"
    "$PYTHON" -m pip install --quiet --disable-pip-version-check 'schemathesis>=4.32,<5'
fi
ST=("$PYTHON" -m schemathesis.cli)
"$PYTHON" -c 'import schemathesis.cli.__main__' 2>/dev/null || ST=(schemathesis)

if ! curl -fsS -o /dev/null --max-time 5 "$BASE/openapi.yaml"; then
    echo "fuzz-contract: $BASE/openapi.yaml is not reachable" >&2
    exit 1
fi

SEED_ARGS=()
[[ -n "${FUZZ_SEED:-}" ]] && SEED_ARGS=(--seed "$FUZZ_SEED")
mkdir -p "$REPORT_DIR"
LOG="$REPORT_DIR/schemathesis.log"

echo "fuzz-contract: $BASE (checks: $CHECKS; phases: $PHASES; <= $MAX_EXAMPLES examples; <= ${MAX_TIME}s)"
set +e
# Run inside the report folder: schemathesis and Hypothesis keep their state in the working directory.
cd "$REPORT_DIR"
# `timeout` is the hard bound; --max-time lets schemathesis stop on its own first and still report.
timeout --kill-after=10 "$((MAX_TIME + 30))" \
    "${ST[@]}" --config-file "$ROOT/.ci/fuzz-contract.toml" run "$BASE/openapi.yaml" \
    --url "$BASE" \
    --checks "$CHECKS" \
    --phases "$PHASES" \
    --max-examples "$MAX_EXAMPLES" \
    --max-time "$MAX_TIME" \
    --workers 1 \
    --no-shrink \
    --report junit --report-junit-path "$REPORT_DIR/schemathesis-junit.xml" \
    "${SEED_ARGS[@]}" > "$LOG" 2>&1
status=$?
set -e
# schemathesis closes with a pytest-style footer ("=== 1 warning in 120s ===") that counts no test;
# CI reads such footers as "ran no test", so the report stays in its file and we print one line.
cases=$(grep -oE '[0-9]+ generated, [0-9]+ passed[^\n]*' "$LOG" | tail -n 1 || true)

if [[ $status -eq 124 || $status -eq 137 ]]; then
    tail -n 60 "$LOG" >&2
    echo "fuzz-contract: FAILED: did not finish within $((MAX_TIME + 30)) s; full report $LOG" >&2
    exit 1
elif [[ $status -ne 0 ]]; then
    grep -vE '^=+ .* in [0-9.]+s =+$' "$LOG" | tail -n 80 >&2
    echo "fuzz-contract: FAILED (schemathesis exit $status); report $LOG, JUnit in $REPORT_DIR" >&2
    exit "$status"
fi
echo "fuzz-contract: passed (${cases:-no case count found}; report $LOG)"
