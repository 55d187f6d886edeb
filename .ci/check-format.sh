#!/usr/bin/env bash
# Checks that every Swift source follows the committed formatter configuration (.swift-format:
# 4-space indent, 120 columns). Fix findings with:
#   swift format -i -r -p Sources Tests Package.swift Examples
set -euo pipefail
cd "$(dirname "$0")/.."
findings=$(swift format lint -r -p Sources Tests Package.swift Examples 2>&1 || true)
if [[ -n "$findings" ]]; then
    echo "$findings" | head -n 50 >&2
    echo "check-format: $(echo "$findings" | wc -l) findings; run: swift format -i -r -p Sources Tests Package.swift Examples" >&2
    exit 1
fi
echo "check-format: no findings ($(find Sources Tests Examples -name '*.swift' -not -path '*/.build/*' | wc -l) files)"
