#!/usr/bin/env bash
# Starts the GitHub simulator and bff (debug builds, free loopback ports, test hooks on), exports
# BFF_URL and SIM_URL, runs the given command, and stops both servers. Used by CI steps that need
# a live server (contract fuzzing); prints the servers' logs when the command fails.
#   scripts/with-servers.sh scripts/fuzz-contract.sh '$BFF_URL'
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --product bff >/dev/null
swift build --product github-sim >/dev/null
bin=$(swift build --show-bin-path)
logs=$(mktemp -d)
"$bin/github-sim" --port 0 --rate-limit 10000 >"$logs/sim.log" 2>&1 &
sim=$!
trap 'kill $sim ${bff:-} 2>/dev/null || true; wait 2>/dev/null || true' EXIT
port_of() { for _ in $(seq 100); do p=$(grep -oE 'http://127.0.0.1:[0-9]+' "$1" | head -1 | sed 's/.*://'); [[ -n "$p" ]] && { echo "$p"; return; }; sleep 0.1; done; echo "no port in $1" >&2; cat "$1" >&2; exit 1; }
SIM_URL="http://127.0.0.1:$(port_of "$logs/sim.log")"
GITHUB_API_URL="$SIM_URL" "$bin/bff" --port 0 --cache-file none --test-hooks --log-level warning >"$logs/bff.log" 2>&1 &
bff=$!
BFF_URL="http://127.0.0.1:$(port_of "$logs/bff.log")"
export BFF_URL SIM_URL
cmd=("$@")
for i in "${!cmd[@]}"; do cmd[$i]=$(eval echo "${cmd[$i]}"); done
if ! "${cmd[@]}"; then
  echo "--- bff log"; tail -50 "$logs/bff.log"; echo "--- sim log"; tail -20 "$logs/sim.log"
  exit 1
fi
