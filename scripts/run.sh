#!/usr/bin/env bash
# Runs the server on a fresh Debian machine with the Swift toolchain: installs what it needs,
# builds a release binary, and starts bff (extra arguments are passed to bff; see `bff --help`).
#   scripts/run.sh                       # against api.github.com (set GITHUB_TOKEN for 30 searches/min)
#   scripts/run.sh --demo                # offline: also starts the GitHub simulator and points bff at it
#                                        # (its own cache file, var/search-cache-demo.sqlite; a later
#                                        # --cache-file wins), with "Sign in with GitHub" on the
#                                        # simulator's authorize page (approve as any name; logins in var/demo)
#   scripts/run.sh --debug [--demo]      # a debug build instead (.build/debug): its first build takes
#                                        # half the time, the server is slower; for trying it out, not
#                                        # for measuring
# A first release build takes minutes: about 1.5 on 2 idle cores, 4-5 when something else uses them
# (later builds are incremental: seconds); the script says so before it starts.
# BFF_BIN_DIR=.build/debug scripts/run.sh --demo   # use binaries built already (no install, no build; tests)
set -euo pipefail
cd "$(dirname "$0")/.."
demo=0
config=release
# Our own flags come first, in either order; everything after them goes to bff.
while [[ "${1:-}" == "--demo" || "${1:-}" == "--debug" ]]; do
  if [[ $1 == --demo ]]; then demo=1; else config=debug; fi
  shift
done
bin="${BFF_BIN_DIR:-}"
if [[ -z "$bin" ]]; then
  scripts/install-deps.sh
  # Say how long the wait is before it starts: swift build's progress does not. Measured from scratch on
  # 2 idle cores: release 100 s (bff 90, github-sim 10), debug 50 s; a first `--demo` was also seen
  # taking over 4 minutes on such a host, its cores presumably shared.
  products="bff"
  if ((demo == 1)); then products="bff and github-sim"; fi
  if [[ -x .build/$config/bff ]]; then
    echo "run.sh: building $products ($config; incremental: seconds unless sources changed)" >&2
  elif [[ $config == release ]]; then
    echo "run.sh: building $products (release); the first build takes minutes (on 2 cores about 1.5" \
      "idle, 4-5 busy; this machine has $(nproc)), later ones are incremental; scripts/run.sh --debug" \
      "builds a slower debug binary in half the time" >&2
  else
    echo "run.sh: building $products (debug); the first build takes about a minute on 2 cores" \
      "(this machine has $(nproc)), later ones are incremental" >&2
  fi
  swift build -c "$config" --product bff
  if ((demo == 1)); then swift build -c "$config" --product github-sim; fi
  bin=.build/$config
fi
if ((demo == 0)); then
  exec "$bin/bff" "$@"  # signals go straight to bff, which drains on SIGTERM/SIGINT
fi
sim_port="${SIM_PORT:-9090}"
# Ctrl-C reaches the whole process group: bff and github-sim (both take SIGINT/SIGTERM with sigwait,
# which also sees the SIGINT bash ignores for background jobs) and this script, which forwards
# SIGTERM to bff, waits for it to drain, then stops the simulator.
if curl -s -o /dev/null "http://127.0.0.1:$sim_port/" 2>/dev/null; then
  echo "run.sh: port $sim_port is in use (another github-sim?); set SIM_PORT to use another" >&2
  exit 1
fi
"$bin/github-sim" --port "$sim_port" &
sim=$!
# Ready once it answers (curl's "connection refused" while it starts is expected: not shown). A sim
# that exited (port taken) fails the demo rather than pointing bff at whatever else answers there.
for _ in $(seq 100); do curl -fs -o /dev/null "http://127.0.0.1:$sim_port/_sim/stats" 2>/dev/null && break; sleep 0.1; done
if ! kill -0 $sim 2>/dev/null; then
  wait $sim || true
  echo "run.sh: github-sim did not start on port $sim_port (set SIM_PORT to use another)" >&2
  exit 1
fi
# The simulator's pages go to a cache file of their own: never mixed with GitHub's (each file also records
# the upstream it was written for, and bff drops pages of another one).
# Sign-in works offline too: the simulator plays GitHub's authorize page and code exchange (its demo
# OAuth app's id and secret), and the demo's logins are kept apart from real ones (var/demo).
GITHUB_API_URL="http://127.0.0.1:$sim_port" GITHUB_WEB_URL="http://127.0.0.1:$sim_port" \
  GITHUB_CLIENT_ID="${GITHUB_CLIENT_ID:-sim-client-id}" GITHUB_CLIENT_SECRET="${GITHUB_CLIENT_SECRET:-sim-client-secret}" \
  "$bin/bff" --cache-file var/search-cache-demo.sqlite --state-dir var/demo "$@" &
bff=$!
stopping=0
trap 'stopping=1; kill -TERM $bff 2>/dev/null' TERM INT   # forward: bff drains, then both exit
status=0
wait $bff || status=$?
# A trapped signal interrupts that wait: wait again for bff's own exit status (0 after draining).
if ((stopping)); then status=0; wait $bff 2>/dev/null || status=$?; fi
kill $sim 2>/dev/null || true
wait $sim 2>/dev/null || true
exit "$status"  # bff's: a bff that could not start (port in use, bad flag) fails the script
