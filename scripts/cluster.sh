#!/usr/bin/env bash
# A local bff cluster from Debian's packages: redis-server, three bff nodes (cluster mode) and HAProxy
# in front, running deploy/haproxy.cfg (sessions stick to the node that created them, /readyz checks).
#   scripts/cluster.sh                     then http://127.0.0.1:8080/ ; Ctrl-C stops everything
#   scripts/cluster.sh --demo              also starts github-sim and points the nodes at it (offline),
#                                          with "Sign in with GitHub" on its authorize page
#   scripts/cluster.sh [--demo] -- FLAGS   FLAGS go to every bff node (e.g. -- --lease-ttl 2)
#   scripts/cluster.sh --tls               also HTTPS with HTTP/2 on TLS_PORT (8443): a self-signed
#                                          certificate for localhost (scripts/make-cert.sh, in var/certs)
#   scripts/cluster.sh --redis cluster     a Redis Cluster instead of one Redis: 3 masters + 3 replicas on
#                                          REDIS_PORT..+5 (redis+cluster://, one replica ack)
#   scripts/cluster.sh --redis sentinel    a master (REDIS_PORT), a replica (+1) and 3 sentinels (+2..+4)
#                                          (redis+sentinel://…/mymaster, one replica ack)
# A process that exits (a node you kill -9 to watch a failover; a Redis master to watch Redis fail over)
# is named, with its exit status and log, and the rest keep running; the logs folder is kept after the
# end (its path is printed at start).
# Env: PORT (HAProxy, 8080), STATS_PORT (HAProxy's stats page, 8404), NODE_BASE_PORT (8091: nodes on
# 8091-8093), REDIS_PORT (6390), SIM_PORT (--demo: 9090), LOGS_DIR (default: a new /tmp/bff-cluster.*),
# HAPROXY_CFG (deploy/haproxy.cfg), BFF_BIN_DIR (default: `swift build`'s debug folder, built first, with
# its progress shown), GITHUB_TOKEN (passed to the nodes, never printed), TLS_PORT (--tls: 8443),
# HAPROXY_CERT (--tls: your own PEM, key and chain, instead of the self-signed one).
set -euo pipefail
cd "$(dirname "$0")/.."
demo=0
tls=0
redis_mode=one
node_flags=()
while (($#)); do
  case "$1" in
    --demo) demo=1 ;;
    --tls) tls=1 ;;
    --redis)
      shift
      case "${1:-}" in
        one|cluster|sentinel) redis_mode=$1 ;;
        *) echo "cluster.sh: --redis takes one, cluster or sentinel" >&2; exit 64 ;;
      esac ;;
    --) shift; node_flags=("$@"); break ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "cluster.sh: unknown argument '$1' (see scripts/cluster.sh --help)" >&2; exit 64 ;;
  esac
  shift
done
port=${PORT:-8080}
stats_port=${STATS_PORT:-8404}
tls_port=${TLS_PORT:-8443}
base=${NODE_BASE_PORT:-8091}
redis_port=${REDIS_PORT:-6390}
sim_port=${SIM_PORT:-9090}
config=${HAPROXY_CFG:-deploy/haproxy.cfg}
bin=${BFF_BIN_DIR:-}
if [ -z "$bin" ]; then
  # Progress on stderr, not 80 silent seconds (a first build takes minutes; later ones, seconds).
  echo "cluster.sh: building bff (debug)…" >&2
  swift build --product bff >&2
  if ((demo)); then swift build --product github-sim >&2; fi
  bin=$(swift build --show-bin-path)
fi
# A port something else listens on would put that process in the cluster (HAProxy would route to it):
# refuse to start instead.
case $redis_mode in
  one) redis_ports=("$redis_port") ;;
  cluster) mapfile -t redis_ports < <(seq "$redis_port" $((redis_port + 5)); seq $((redis_port + 10000)) $((redis_port + 10005))) ;;
  sentinel) mapfile -t redis_ports < <(seq "$redis_port" $((redis_port + 4))) ;;
esac
ports=("$port" "$stats_port" "${redis_ports[@]}" "$base" $((base + 1)) $((base + 2)))
((demo)) && ports+=("$sim_port")
((tls)) && ports+=("$tls_port")
for p in "${ports[@]}"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    echo "cluster.sh: port $p is in use (another cluster?); choose others with PORT, STATS_PORT, REDIS_PORT," \
      "NODE_BASE_PORT, SIM_PORT" >&2
    exit 1
  fi
done
dir=${LOGS_DIR:-$(mktemp -d /tmp/bff-cluster.XXXXXX)}
mkdir -p "$dir"
pids=()
names=()
stopping=0
cleanup() {
  stopping=1
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done  # SIGTERM: nodes drain (≤ --shutdown-grace)
  wait 2>/dev/null || true
  echo "cluster.sh: stopped; logs kept in $dir" >&2
}
trap cleanup EXIT
trap 'exit 0' INT TERM
# bash itself reports a background job killed by a signal, on stderr, when it reaps it ("cluster.sh: line
# N: 12345 Killed  redis-server …"), unless the shell traps that signal. This script names every exit in
# its own words (the watch loop below), so it traps the signals a child dies of with a no-op: kill -9 and
# the crashes (segfault, abort, a Swift runtime trap…). That changes nothing else: KILL cannot be caught
# (bash only records the trap, which is all this needs), the others are never sent to this script, and
# children start with them at their defaults. Any other signal is quiet too once the script watches
# (`wait -n` below, its stderr discarded).
# shellcheck disable=SC2173 # trapping KILL on purpose: it only tells bash not to report it
trap : KILL SEGV ABRT ILL TRAP BUS FPE

started() {  # name, pid, what
  pids+=("$2")
  names+=("$1")
  echo "cluster.sh: started $1 (pid $2, $3, log $dir/$1.log)"
}

# Every Redis here: no persistence (a local toy; docs/CLUSTER.md says what production needs), noeviction,
# and a replica that (re)joins is sent its data at once (repl-diskless-sync-delay 0).
redis_flags=(--bind 127.0.0.1 --save '' --appendonly no --maxmemory-policy noeviction --repl-diskless-sync-delay 0
  --daemonize no)
redis_ready() { for _ in $(seq 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.05; done; return 1; }
case $redis_mode in
  one)
    redis-server --port "$redis_port" "${redis_flags[@]}" >"$dir/redis.log" 2>&1 &
    started redis $! "redis://127.0.0.1:$redis_port"
    redis_url="redis://127.0.0.1:$redis_port"
    ;;
  cluster)
    # cluster-node-timeout 1000: a dead master is replaced in ~2.5 s; cluster-require-full-coverage no:
    # the other shards serve meanwhile.
    for i in 0 1 2 3 4 5; do
      p=$((redis_port + i))
      redis-server --port "$p" "${redis_flags[@]}" --cluster-enabled yes --cluster-config-file "$dir/nodes-$p.conf" \
        --cluster-node-timeout 1000 --cluster-require-full-coverage no --dir "$dir" >"$dir/redis$((i + 1)).log" 2>&1 &
      started "redis$((i + 1))" $! "redis://127.0.0.1:$p"
    done
    for i in 0 1 2 3 4 5; do redis_ready $((redis_port + i)); done
    redis_nodes=()
    for i in 0 1 2 3 4 5; do redis_nodes+=("127.0.0.1:$((redis_port + i))"); done
    redis-cli --cluster create "${redis_nodes[@]}" \
      --cluster-replicas 1 --cluster-yes >"$dir/cluster-create.log" 2>&1 \
      || { echo "cluster.sh: redis-cli --cluster create failed; see $dir/cluster-create.log" >&2; exit 1; }
    redis_url="redis+cluster://127.0.0.1:$redis_port,127.0.0.1:$((redis_port + 1)),127.0.0.1:$((redis_port + 2))"
    ;;
  sentinel)
    redis-server --port "$redis_port" "${redis_flags[@]}" --dir "$dir" >"$dir/redis1.log" 2>&1 &
    started redis1 $! "redis://127.0.0.1:$redis_port (master)"
    redis-server --port $((redis_port + 1)) "${redis_flags[@]}" --dir "$dir" --replicaof 127.0.0.1 "$redis_port" \
      >"$dir/redis2.log" 2>&1 &
    started redis2 $! "redis://127.0.0.1:$((redis_port + 1)) (replica)"
    redis_ready "$redis_port"
    for i in 2 3 4; do
      p=$((redis_port + i))
      # down-after-milliseconds 1000: a dead master is replaced in ~2.5 s.
      printf 'port %s\nbind 127.0.0.1\ndir %s\nsentinel monitor mymaster 127.0.0.1 %s 2\nsentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 5000\n' \
        "$p" "$dir" "$redis_port" >"$dir/sentinel-$p.conf"
      redis-server "$dir/sentinel-$p.conf" --sentinel >"$dir/sentinel$((i - 1)).log" 2>&1 &
      started "sentinel$((i - 1))" $! "127.0.0.1:$p"
    done
    redis_url="redis+sentinel://127.0.0.1:$((redis_port + 2)),127.0.0.1:$((redis_port + 3)),127.0.0.1:$((redis_port + 4))/mymaster"
    ;;
esac
upstream=()
if ((demo)); then
  "$bin/github-sim" --port "$sim_port" >"$dir/github-sim.log" 2>&1 &
  started github-sim $! "http://127.0.0.1:$sim_port"
  # Sign-in works offline too: the simulator plays GitHub's authorize page and code exchange, and the
  # nodes share one key (fresh for this run) that seals the tokens in Redis.
  upstream=(GITHUB_API_URL="http://127.0.0.1:$sim_port" GITHUB_WEB_URL="http://127.0.0.1:$sim_port"
    GITHUB_CLIENT_ID="${GITHUB_CLIENT_ID:-sim-client-id}" GITHUB_CLIENT_SECRET="${GITHUB_CLIENT_SECRET:-sim-client-secret}"
    BFF_SECRET_KEY="${BFF_SECRET_KEY:-$(head -c 32 /dev/urandom | base64)}")
  for _ in $(seq 100); do curl -fs -o /dev/null "http://127.0.0.1:$sim_port/_sim/stats" 2>/dev/null && break; sleep 0.1; done
fi
for i in 1 2 3; do
  env -u PORT "${upstream[@]}" "$bin/bff" --port $((base + i - 1)) --redis-url "$redis_url" \
    --node-id "node$i" --cache-file none "${node_flags[@]}" >"$dir/node$i.log" 2>&1 &
  started "node$i" $! "http://127.0.0.1:$((base + i - 1))"
done

# The shipped deploy/haproxy.cfg itself, its addresses from the environment (see its header). Not -q:
# that would also silence its request log (one line per request, in haproxy.log).
tls_env=()
tls_what=""
if ((tls)); then
  cert=${HAPROXY_CERT:-}
  if [ -z "$cert" ]; then
    scripts/make-cert.sh var/certs >&2
    cert=$PWD/var/certs/bff.pem
  fi
  tls_env=(HAPROXY_CERT="$cert" HAPROXY_TLS_BIND="127.0.0.1:$tls_port")
  tls_what=", https://127.0.0.1:$tls_port (HTTP/2)"
fi
env BFF_NODE1="127.0.0.1:$base" BFF_NODE2="127.0.0.1:$((base + 1))" BFF_NODE3="127.0.0.1:$((base + 2))" \
  HAPROXY_BIND="127.0.0.1:$port" HAPROXY_STATS_BIND="127.0.0.1:$stats_port" "${tls_env[@]}" \
  haproxy -f "$config" >"$dir/haproxy.log" 2>&1 &
started haproxy $! "http://127.0.0.1:$port$tls_what, stats http://127.0.0.1:$stats_port"

for _ in $(seq 300); do  # up to 30 s: the nodes connect to Redis, HAProxy's checks see them ready
  curl -fs -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null && break
  sleep 0.1
done
if curl -fs -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null; then
  if [ "$redis_mode" = one ]; then
    echo "cluster.sh: ready: http://127.0.0.1:$port/ (logs in $dir; $bin/bff session-owner ID --redis-url $redis_url names the node of session ID)"
  else
    echo "cluster.sh: ready: http://127.0.0.1:$port/ (logs in $dir; nodes on $redis_url)"
  fi
else
  echo "cluster.sh: not ready after 30 s; see the logs in $dir" >&2
fi

# Watch: name each process that exits and keep the others running, until none is left or Ctrl-C.
gone() {  # index in pids, exit status: says so and forgets the process
  local how
  if (($2 > 128)); then how="killed by signal $(($2 - 128))"; else how="exit status $2"; fi
  echo "cluster.sh: ${names[$1]} (pid ${pids[$1]}) exited ($how); the others keep running; its log: $dir/${names[$1]}.log" >&2
  unset 'pids[$1]' 'names[$1]'
}
while ((${#pids[@]} > 0)); do
  # A process that died of a signal while a foreground command ran (start-up: curl, sleep, redis-cli) was
  # reaped then and is no longer a job for `wait -n`; `wait PID` still has its status.
  for i in "${!pids[@]}"; do
    kill -0 "${pids[$i]}" 2>/dev/null && continue
    status=0
    wait "${pids[$i]}" 2>/dev/null || status=$?
    gone "$i" "$status"
  done
  pids=("${pids[@]}")
  names=("${names[@]}")
  ((${#pids[@]} > 0)) || break
  exited=""
  status=0
  # Its stderr discarded: a child killed by a signal not trapped above gets bash's notice in here.
  wait -n -p exited "${pids[@]}" 2>/dev/null || status=$?
  ((stopping)) && break
  [ -n "$exited" ] || continue
  for i in "${!pids[@]}"; do
    if [ "${pids[$i]}" = "$exited" ]; then gone "$i" "$status"; fi
  done
  pids=("${pids[@]}")
  names=("${names[@]}")
done
