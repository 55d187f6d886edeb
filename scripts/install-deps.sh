#!/usr/bin/env bash
# Installs the Debian packages the project needs, only if missing.
#   scripts/install-deps.sh            build + run deps (libevent, hiredis, sqlite, curl)
#   scripts/install-deps.sh --test     also test deps (chromium + driver, python3-venv for the Python tools,
#                                      gcc for the benchmarks' C programs, redis-server and haproxy for the
#                                      cluster tests, debootstrap for the image runtime check)
set -euo pipefail
pkgs=(libevent-dev libhiredis-dev libsqlite3-dev pkg-config libcurl4-openssl-dev ca-certificates)
# (wrk is installed by bench/http.sh, which alone uses it)
if [[ "${1:-}" == "--test" ]]; then pkgs+=(chromium chromium-driver python3-venv gcc redis-server haproxy debootstrap); fi
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}" >&2
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
