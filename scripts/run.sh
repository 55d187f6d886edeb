#!/usr/bin/env bash
# Runs the server on a fresh Debian machine with the Swift toolchain: installs what it needs,
# builds a release binary, and starts bff (extra arguments are passed to bff; see `bff --help`).
#   scripts/run.sh                       # against api.github.com (set GITHUB_TOKEN for 30 searches/min)
#   scripts/run.sh --demo                # offline: also starts the GitHub simulator and points bff at it
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
demo=0
if [[ "${1:-}" == "--demo" ]]; then demo=1; shift; fi
swift build -c release --product bff
if ((demo)); then
  swift build -c release --product github-sim
  .build/release/github-sim --port "${SIM_PORT:-9090}" &
  sim=$!
  trap 'kill $sim 2>/dev/null' EXIT
  export GITHUB_API_URL="http://127.0.0.1:${SIM_PORT:-9090}"
fi
.build/release/bff "$@"
