#!/usr/bin/env bash
# Contract fuzzing (schemathesis) against a live bff backed by the GitHub simulator.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .ci/with-servers.sh .ci/fuzz-contract.sh
