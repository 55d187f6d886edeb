#!/usr/bin/env bash
# Runs the browser tests: headless Chromium (Debian packages) driven by selenium against the real
# `bff` and `github-sim` built in .build/debug (or BFF_BIN / SIM_BIN). Installs what is missing.
# Usage: Tests/browser/run.sh [pytest arguments]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

# CI installs chromium with `scripts/install-deps.sh --test`; this is only the fallback for a machine
# that lacks it (same packages and flags: no recommends, sudo when not root).
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    echo "browser tests: chromium or chromedriver missing; installing chromium and chromium-driver" >&2
    sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
fi

python="${PYTHON:-python3}"
if ! "$python" -c 'import selenium, pytest' 2>/dev/null; then
    echo "browser tests: installing selenium and pytest" >&2
    "$python" -m pip install -q selenium pytest
fi

for binary in "${BFF_BIN:-.build/debug/bff}" "${SIM_BIN:-.build/debug/github-sim}"; do
    if [ ! -x "$binary" ]; then
        # Two commands: given several --product options, SwiftPM builds only the last one.
        echo "browser tests: $binary is missing; build it with" \
             "'swift build --product bff && swift build --product github-sim'" >&2
        exit 1
    fi
done

mkdir -p artifacts/screenshots
# No network: selenium must not try to download a driver (SE_OFFLINE), chromedriver is Debian's.
export SE_OFFLINE=true
exec "$python" -m pytest -p no:cacheprovider -q -rs "$here" "$@"
