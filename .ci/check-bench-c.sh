#!/usr/bin/env bash
# Compiles the C programs the benchmarks build (bench/*.c) with warnings as errors, so that a
# benchmark script never discovers a broken baseline on the day it is needed.
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
count=0
for source in bench/*.c; do
    # shellcheck disable=SC2046  # pkg-config prints several words on purpose
    cc -O2 -Wall -Wextra -Werror -o "$out/$(basename "$source" .c)" "$source" $(pkg-config --cflags --libs libevent)
    count=$((count + 1))
done
echo "check-bench-c: $count benchmark programs compile cleanly (-Wall -Wextra -Werror)"
