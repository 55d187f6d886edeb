#!/usr/bin/env bash
# What a login cookie costs a request: instructions per `GET /api/sessions/{id}/state` and per greeting
# input POST (no stream open), counted exactly under callgrind for a fixed number of requests (wrk -c4,
# a Lua script stopping after N responses), on the release `bff` in three set-ups, each its own process:
#   off        sign-in not configured (today's anonymous server)
#   anonymous  sign-in on (the simulator plays GitHub), an anonymous session, no cookie
#   signed-in  sign-in on, a session of a login, every request carrying its cookie
# Prints one line per set-up and the ratios to `off` (the bar: a cookie costs <= 5 % more per request).
# Needs valgrind, wrk, curl, python3 and release builds of bff and github-sim (BIN).
# Usage: bench/callgrind-signin.sh     Environment: BIN (.build/release), REQUESTS (5000),
#                                                    OUT (artifacts/callgrind-signin)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
BIN="${BIN:-$ROOT/.build/release}"
REQUESTS="${REQUESTS:-5000}"
OUT="${OUT:-$ROOT/artifacts/callgrind-signin}"
BENCH_NAME=callgrind-signin
mkdir -p "$OUT"
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
require_tools valgrind wrk curl python3 callgrind_control
[[ -x "$BIN/bff" && -x "$BIN/github-sim" ]] || { log "no release build in $BIN: swift build -c release"; exit 1; }
objcopy --strip-debug "$BIN/bff" "$OUT/bff-nodebug"
read -r PORT SIM_PORT < <(free_ports 2)
BASE="http://127.0.0.1:$PORT"
SIM="http://127.0.0.1:$SIM_PORT"

"$BIN/github-sim" --port "$SIM_PORT" > "$OUT/sim.log" 2>&1 &
PIDS+=("$!")
for ((i = 0; i < 100; i++)); do curl -fsS "$SIM/_sim/stats" > /dev/null 2>&1 && break; sleep 0.1; done

cat > "$OUT/stop.lua" << LUA
local n = 0
response = function() n = n + 1; if n >= $REQUESTS then wrk.thread:stop() end end
LUA
cat > "$OUT/input.lua" << LUA
wrk.method = "POST"
wrk.body = '{"value":"ann"}'
local n = 0
response = function(status) n = n + 1; if n >= $REQUESTS then wrk.thread:stop() end end
LUA

# Signs in as "bench" through the simulator's authorize form; prints the login cookie's value.
sign_in() {
    local jar="$OUT/jar" location back
    rm -f "$jar"
    location="$(curl -fsS -o /dev/null -w '%{redirect_url}' -c "$jar" "$BASE/auth/login")"
    back="$(curl -fsS -o /dev/null -w '%{redirect_url}' -X POST "$SIM/login/oauth/authorize" \
        --data "${location#*\?}&login=bench&decision=approve")"
    curl -fsS -o /dev/null -b "$jar" -c "$jar" "$back"
    awk '$6 == "bff-login" { print $7 }' "$jar"
}

# name signin(0|1) cookie(0|1): prints "state-instructions input-instructions"
measure() {
    local name=$1 signin=$2 with_cookie=$3 env=() headers=() id vpid ir_state ir_input cookie=""
    if ((signin)); then
        env=(GITHUB_CLIENT_ID=sim-client-id GITHUB_CLIENT_SECRET=sim-client-secret GITHUB_WEB_URL="$SIM"
            GITHUB_API_URL="$SIM")
    fi
    rm -rf "$OUT/state-$name" "$OUT/cg-$name".*
    env "${env[@]}" "${SERVER_PIN[@]}" valgrind --tool=callgrind --instr-atstart=no \
        --callgrind-out-file="$OUT/cg-$name.out" "$OUT/bff-nodebug" --port "$PORT" --threads 1 --cache-file none \
        --state-dir "$OUT/state-$name" --log-level warning --input-rate 100000 --input-burst 100000 \
        > "$OUT/server-$name.log" 2>&1 &
    vpid=$!
    PIDS+=("$vpid")
    for ((i = 0; i < 300; i++)); do curl -fsS "$BASE/readyz" > /dev/null 2>&1 && break; sleep 0.1; done
    if ((with_cookie)); then
        cookie="$(sign_in)"
        [[ -n $cookie ]] || { log "$name: the sign-in gave no cookie"; exit 1; }
        headers=(-H "Cookie: bff-login=$cookie")
    fi
    id="$(curl -fsS -XPOST "${headers[@]}" "$BASE/api/sessions" | sed -E 's/.*"id":"([^"]+)".*/\1/')"
    if ((with_cookie)); then
        curl -fsS "${headers[@]}" "$BASE/api/sessions/$id/state" | grep -q '"signedIn":true' \
            || { log "$name: the session is not signed in"; exit 1; }
    fi
    "${CLIENT_PIN[@]}" wrk -t1 -c4 -d2s "${headers[@]}" "$BASE/api/sessions/$id/state" > /dev/null # warm-up
    count() { # script path [header]: the total Ir of one dump over REQUESTS requests (headers on the command
        # line: wrk drops a script's own headers once -H gives any)
        callgrind_control -z "$vpid" > /dev/null 2>&1
        callgrind_control -i on "$vpid" > /dev/null 2>&1
        local extra=()
        [[ -n ${3:-} ]] && extra=(-H "$3")
        "${CLIENT_PIN[@]}" wrk -t1 -c4 -d60s "${headers[@]}" "${extra[@]}" -s "$OUT/$1" "$BASE$2" \
            > "$OUT/wrk-$name-$1.txt"
        callgrind_control -i off "$vpid" > /dev/null 2>&1
        grep -q "Non-2xx" "$OUT/wrk-$name-$1.txt" && { log "$name: errors in $1"; cat "$OUT/wrk-$name-$1.txt" >&2; exit 1; }
        callgrind_control -d "$vpid" > /dev/null 2>&1
        python3 - "$OUT/cg-$name.out" "$REQUESTS" << 'PY'
import glob, sys
parts = sorted(glob.glob(sys.argv[1] + ".*"), key=lambda p: int(p.rsplit(".", 1)[1]))
total = 0
for line in open(parts[-1]):
    if line.startswith(("summary:", "totals:")):
        total = int(line.split()[1])
print(round(total / int(sys.argv[2])))
PY
    }
    ir_state="$(count stop.lua "/api/sessions/$id/state")"
    ir_input="$(count input.lua "/api/sessions/$id/greeting/name" "Content-Type: application/json")"
    kill "$vpid" 2> /dev/null || true
    wait "$vpid" 2> /dev/null || true
    echo "$ir_state $ir_input"
}

read -r off_s off_i < <(measure off 0 0)
read -r anon_s anon_i < <(measure anonymous 1 0)
read -r in_s in_i < <(measure signed-in 1 1)
python3 - "$off_s" "$off_i" "$anon_s" "$anon_i" "$in_s" "$in_i" << 'PY'
import sys
o_s, o_i, a_s, a_i, s_s, s_i = map(int, sys.argv[1:])
print("instructions per request (callgrind, user space, fixed count of wrk -c4 requests)")
print(f"{'set-up':<12}{'GET /state':>12}{'ratio':>8}{'POST input':>12}{'ratio':>8}")
for name, s, i in (("off", o_s, o_i), ("anonymous", a_s, a_i), ("signed-in", s_s, s_i)):
    print(f"{name:<12}{s:>12,}{s / o_s:>8.3f}{i:>12,}{i / o_i:>8.3f}")
PY
