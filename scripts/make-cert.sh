#!/usr/bin/env bash
# A self-signed certificate for HAProxy's TLS frontend (HTTP/2 to browsers), for local use:
#   scripts/make-cert.sh [DIR]      writes DIR/bff.pem (key + certificate, HAProxy's format), default var/certs
# valid for localhost, 127.0.0.1 and ::1, for 30 days. It is not trusted by browsers: accept it once, or
# run Chromium with --ignore-certificate-errors for tests. In production put your own certificate (key and
# chain concatenated in one PEM file) where HAPROXY_CERT points (deploy/haproxy.cfg, README "HTTP/2").
set -euo pipefail
dir=${1:-var/certs}
mkdir -p "$dir"
# "valid until 2027-01-01 19:52 UTC (30 days)", from the certificate's notAfter: what is left of it (a
# certificate reused from an earlier run has less than its 30 days), to the nearest day, or in hours once
# under two days.
validity() {
  local end left
  end=$(date -u -d "$(openssl x509 -enddate -noout -in "$1" | cut -d= -f2-)" +%s)
  left=$((end - $(date -u +%s)))
  if ((left < 2 * 86400)); then left="$(((left + 1800) / 3600)) hours"; else left="$(((left + 43200) / 86400)) days"; fi
  echo "valid until $(date -u -d "@$end" '+%F %R UTC') ($left)"
}
# Reused while it is valid for more than another day; regenerated otherwise (or when unreadable).
if [[ -s "$dir/bff.pem" ]] && openssl x509 -checkend 86400 -noout -in "$dir/bff.pem" >/dev/null 2>&1; then
  echo "$dir/bff.pem is there and $(validity "$dir/bff.pem")"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=localhost" \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1" \
  -keyout "$tmp/key.pem" -out "$tmp/cert.pem" >/dev/null 2>&1
cat "$tmp/cert.pem" "$tmp/key.pem" > "$dir/bff.pem"
chmod 600 "$dir/bff.pem"
echo "wrote $dir/bff.pem (self-signed, localhost, $(validity "$dir/bff.pem"))"
