#!/usr/bin/env bash
# Shows that ThreadSanitizer sees `Primitives.Lock` and does not see a bare `Synchronization.Mutex`:
# the same 8-thread program (each thread appends 20,000 times to an array under the lock, the main
# thread joins them and reads the count) is compiled with `-sanitize=thread` twice, once guarding the array with
# `Mutex`, once with `Lock` (Sources/Primitives/Lock.swift and its CTSan header, compiled in). The
# Mutex build must report a race (else this check proves nothing on this toolchain) and the Lock
# build must report none. Why Mutex alone is not enough: its uncontended lock and unlock are atomics
# inlined into the (instrumented) program, but a contended lock is taken in the runtime's
# `_MutexHandle._lockSlow`, which ThreadSanitizer does not see, so the program needs contention (hence
# 8 threads on a 2-core machine; the Mutex run is tried up to 3 times). scripts/tsan.sh runs it first. Prints "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
work="$(mktemp -d /tmp/bff-tsan-lock.XXXXXX)"
trap 'rm -rf "$work"' EXIT

program() {  # $1: the lock's type (Mutex or Lock); $2: its access method
    cat <<SWIFT
import Glibc
import Synchronization

let guarded = $1<[Int]>([])
var threads: [pthread_t] = []
for t in 0..<8 {
    var thread = pthread_t()
    let box = Unmanaged.passRetained(Box(t)).toOpaque()
    pthread_create(&thread, nil, { raw in
        let t = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue().n
        for i in 0..<20000 { guarded.$2 { \$0.append(t * 1000 + i) } }
        return nil
    }, box)
    threads.append(thread)
}
for thread in threads { pthread_join(thread, nil) }
let count = guarded.$2 { \$0.count }
precondition(count == 160000, "lost appends: \(count)")
print("count \(count)")

final class Box { let n: Int; init(_ n: Int) { self.n = n } }
SWIFT
}

passed=0
failed=0
check() {  # $1: name, $2: expect "race" or "clean", $3...: sources
    local name=$1 expect=$2
    shift 2
    # -Onone, as `swift build` and `swift test` under scripts/tsan.sh compile: Mutex's lock and unlock
    # then run in the precompiled runtime. (Optimised, they may be inlined into the instrumented program.)
    swiftc -sanitize=thread -Onone -module-name Check -I Sources/CTSan "$@" -o "$work/$name" \
        > "$work/$name.build.log" 2>&1 || { cat "$work/$name.build.log" >&2; failed=$((failed + 1)); return; }
    local races
    for _ in 1 2 3; do
        TSAN_OPTIONS="halt_on_error=0 exitcode=0" "$work/$name" > "$work/$name.log" 2>&1
        races=$(grep -c "WARNING: ThreadSanitizer" "$work/$name.log")
        [[ $expect == race && $races -eq 0 ]] || break
    done
    if [[ $expect == race && $races -gt 0 ]] || [[ $expect == clean && $races -eq 0 ]] && grep -q "count 160000" "$work/$name.log"; then
        echo "ok   $name: $races ThreadSanitizer report(s), expected $expect"
        passed=$((passed + 1))
    else
        echo "FAIL $name: $races ThreadSanitizer report(s), expected $expect" >&2
        head -30 "$work/$name.log" >&2
        failed=$((failed + 1))
    fi
}

program Mutex withLock > "$work/main.swift"
mkdir -p "$work/mutex" "$work/lock"
mv "$work/main.swift" "$work/mutex/main.swift"
check mutex-only race "$work/mutex/main.swift"
program Lock withLock > "$work/lock/main.swift"
check primitives-lock clean "$work/lock/main.swift" Sources/Primitives/Lock.swift
echo "$passed passed, $failed failed"
((failed == 0))
