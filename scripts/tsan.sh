#!/usr/bin/env bash
# Builds and runs the concurrent test suites under ThreadSanitizer (a separate build folder,
# .build-tsan; a first build takes a few minutes). Not part of scripts/test.sh: run it after
# changing anything that crosses threads (event loops, sessions, streams, the cache).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# First, that ThreadSanitizer sees the project's lock (Primitives.Lock) and not a bare Mutex.
scripts/tsan-lock-check.sh
swift build --build-tests --sanitize=thread --scratch-path .build-tsan 2>&1 | grep -E "error:|Compiling|Build complete" | grep -v fds_bits | tail -n 3
# One log per run: several checkouts may run this at once, and a fixed /tmp path let one run's
# log overwrite another's (a race report read from the wrong checkout, or lost).
log="$(mktemp /tmp/bff-tsan.XXXXXX.log)"
set +e
# Every suite that runs event loops or tasks; the Redis ones need a redis-server (install-deps.sh --test).
filter="PrimitivesTests|EventLoopTests|EventHTTPTests|BFFTests|ViewModelsTests|GitHubLiveTests|LoadKitTests|JSONTests"
if [[ -x /usr/bin/redis-server ]]; then
  filter+="|RedisClientTests|ClusterRedisTests"
else
  echo "tsan: no /usr/bin/redis-server: RedisClientTests and ClusterRedisTests not run" >&2
fi
swift test --sanitize=thread --scratch-path .build-tsan --skip-build --filter "$filter" > "$log" 2>&1
status=$?
set -e
grep -E "Executed [0-9]+ tests|error:" "$log" | tail -n 5
echo "tsan log: $log"
if grep -q "WARNING: ThreadSanitizer" "$log"; then echo "ThreadSanitizer reported races: $log" >&2; exit 1; fi
exit "$status"
