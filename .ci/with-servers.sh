#!/usr/bin/env bash
# Starts the GitHub simulator and bff (the debug builds scripts/test.sh made; free loopback ports,
# test hooks on), waits until bff is ready, exports BFF_URL and SIM_URL, runs the given command,
# and stops both servers. Prints the servers' logs when the command fails.
#   .ci/with-servers.sh .ci/fuzz-contract.sh        # fuzz-contract.sh reads $BFF_URL
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(swift build --show-bin-path)
for product in bff github-sim; do
  [[ -x "$bin/$product" ]] || swift build --product "$product" >/dev/null
done
logs=$(mktemp -d)
"$bin/github-sim" --port 0 --rate-limit 10000 >"$logs/sim.log" 2>&1 &
sim=$!
trap 'kill $sim ${bff:-} 2>/dev/null || true; wait 2>/dev/null || true' EXIT
port_of() {  # the port from a server's "… listening on http://127.0.0.1:PORT" line
  for _ in $(seq 100); do
    p=$(grep -oE 'http://127.0.0.1:[0-9]+' "$1" | head -1 | sed 's/.*://')
    [[ -n "$p" ]] && { echo "$p"; return; }
    sleep 0.1
  done
  echo "no port in $1" >&2; cat "$1" >&2; exit 1
}
SIM_URL="http://127.0.0.1:$(port_of "$logs/sim.log")"
GITHUB_API_URL="$SIM_URL" "$bin/bff" --port 0 --cache-file none --test-hooks --log-level warning >"$logs/bff.log" 2>&1 &
bff=$!
BFF_URL="http://127.0.0.1:$(port_of "$logs/bff.log")"
for _ in $(seq 100); do curl -fsS -o /dev/null "$BFF_URL/readyz" && break; sleep 0.1; done
export BFF_URL SIM_URL
if ! "$@"; then
  echo "--- bff log"; tail -50 "$logs/bff.log"; echo "--- sim log"; tail -20 "$logs/sim.log"
  exit 1
fi
