#!/usr/bin/env bash
# Shared by the benchmark scripts (bench-http.sh, bench-latency.sh, bench-cluster.sh,
# callgrind-cluster.sh); sourced, not run. The sourcing script sets BENCH_NAME (its log prefix) and OUT
# (its output folder) first. Provides: log, require_tools, cpu_ticks_of, free_ports, SERVER_PIN/CLIENT_PIN (CPU 0
# for servers, CPU 1 for load), build_c, and start_server, whose processes (PIDS) are stopped by
# stop_servers, which runs when the script exits unless the script sets a trap of its own.

log() { echo "$BENCH_NAME: $*" >&2; }

require_tools() { # tool...
    local tool
    for tool in "$@"; do
        command -v "$tool" > /dev/null 2>&1 || { log "$tool is required"; exit 1; }
    done
}

# Pin only where there are two CPUs to pin to (CLIENT_PIN is for the sourcing script).
# shellcheck disable=SC2034
if command -v taskset > /dev/null 2>&1 && [[ $(nproc) -ge 2 ]]; then
    SERVER_PIN=(taskset -c 0)
    CLIENT_PIN=(taskset -c 1)
else
    log "warning: fewer than 2 CPUs or no taskset: running unpinned"
    SERVER_PIN=()
    CLIENT_PIN=()
fi

cpu_ticks_of() { # pid: its CPU time so far, user + system, in clock ticks (getconf CLK_TCK per second)
    local fields
    read -ra fields < "/proc/$1/stat"
    echo $((fields[13] + fields[14]))
}

free_ports() { # count: prints that many free TCP ports on 127.0.0.1
    python3 - "$1" << 'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

build_c() { # program: compiles bench/PROGRAM.c to $OUT/PROGRAM
    log "building bench/$1.c"
    # shellcheck disable=SC2046  # pkg-config prints several words on purpose
    cc -O2 -o "$OUT/$1" "bench/$1.c" $(pkg-config --cflags --libs libevent)
}

PIDS=()
stop_servers() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2> /dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2> /dev/null || true; done
}
trap stop_servers EXIT

start_server() { # name ready-function command...: starts command on CPU 0 and waits (10 s at most)
    local name=$1 ready=$2 pid i
    shift 2
    "${SERVER_PIN[@]}" "$@" > "$OUT/$name-server.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    for ((i = 0; i < 100; i++)); do
        "$ready" && return 0
        kill -0 "$pid" 2> /dev/null || { cat "$OUT/$name-server.log" >&2; log "$name exited"; exit 1; }
        sleep 0.1
    done
    log "$name did not become ready within 10 s"
    exit 1
}
