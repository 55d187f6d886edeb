#!/usr/bin/env bash
# Runs the operations tests: scripts/cluster.sh itself (redis-server, github-sim, three bff nodes and
# HAProxy), with the binaries built in .build/debug (or BFF_BIN_DIR). Its last line counts ("N passed").
# Usage: Tests/ops/run.sh [pytest arguments]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../.."
python="${PYTHON:-python3}"
if ! "$python" -c 'import pytest' 2>/dev/null; then
    echo "ops tests: installing pytest" >&2
    "$python" -m pip install -q pytest
fi
if ! "$python" -c 'import yaml' 2>/dev/null; then
    echo "ops tests: installing PyYAML" >&2
    "$python" -m pip install -q pyyaml
fi
for binary in bff github-sim; do
    if [ ! -x "${BFF_BIN_DIR:-.build/debug}/$binary" ]; then
        echo "ops tests: ${BFF_BIN_DIR:-.build/debug}/$binary is missing; build it with 'swift build --product $binary'" >&2
        exit 1
    fi
done
export BFF_BIN_DIR="${BFF_BIN_DIR:-$PWD/.build/debug}"
exec "$python" -m pytest -p no:cacheprovider -q -rs "$here" "$@"
