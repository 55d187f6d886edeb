#!/usr/bin/env bash
# Validates the OpenAPI document against the OpenAPI 3.1 specification (openapi-spec-validator),
# and checks that it is the 3.1 document every path of the contract expects.
# Usage: scripts/check-openapi.sh [path/to/openapi.yaml]
set -euo pipefail

cd "$(dirname "$0")/.."
# docs/API.md is the repository's copy of the product contract (shared/API.md beside the clone).
# Its own additions follow a marker line and are not compared.
if [[ -f ../shared/API.md ]] && ! tail -n +4 docs/API.md | sed '/^<!-- additions:/,$d' | sed '$d' \
    | cmp -s - ../shared/API.md; then
    echo "check-openapi: WARNING: docs/API.md differs from ../shared/API.md: the contract changed; update the copy" \
         "(and the implementation)" >&2
fi
SPEC="${1:-Public/openapi.yaml}"
PYTHON="${PYTHON:-python3}"

if ! "$PYTHON" -c 'import openapi_spec_validator, yaml' 2>/dev/null; then
    echo "check-openapi: installing openapi-spec-validator (pip)"
    "$PYTHON" -m pip install --quiet --disable-pip-version-check 'openapi-spec-validator>=0.7,<1' PyYAML
fi

"$PYTHON" - "$SPEC" <<'PY'
import sys

import yaml
from openapi_spec_validator import validate
from openapi_spec_validator.readers import read_from_filename

path = sys.argv[1]
spec, _ = read_from_filename(path)
validate(spec)  # raises with the failing rule on an invalid document

problems = []
if not str(spec.get("openapi", "")).startswith("3.1"):
    problems.append(f"openapi is {spec.get('openapi')!r}, expected 3.1.x")

# The operations the contract (shared/API.md) names: a missing one is a drifted document.
expected = {
    ("post", "/api/sessions"): {"201", "503"},
    ("get", "/api/sessions/{id}/state"): {"200", "404"},
    ("get", "/api/sessions/{id}/events"): {"200", "404", "429"},
    ("post", "/api/sessions/{id}/{viewModel}/{input}"): {"202", "400", "404", "405", "413", "415", "429"},
    ("delete", "/api/sessions/{id}"): {"204", "404"},
    ("get", "/api/search/repositories"): {"200", "400", "422", "503"},
    ("get", "/healthz"): {"200"},
    ("get", "/readyz"): {"200", "503"},
    ("get", "/metrics"): {"200"},
    ("get", "/openapi.yaml"): {"200"},
}
paths = spec.get("paths", {})
for (method, route), statuses in expected.items():
    operation = paths.get(route, {}).get(method)
    if operation is None:
        problems.append(f"missing operation {method.upper()} {route}")
        continue
    declared = set(operation.get("responses", {}))
    if "default" in declared:
        problems.append(f"{method.upper()} {route} declares 'default': list explicit statuses instead")
    for status in sorted(statuses - declared):
        problems.append(f"{method.upper()} {route} does not declare {status}")

# Every error response must be a problem document.
def resolve(node):
    while isinstance(node, dict) and "$ref" in node:
        target = spec
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = target
    return node

for route, item in paths.items():
    for method, operation in item.items():
        if method not in {"get", "post", "put", "delete", "patch", "head", "options"}:
            continue
        for status, response in operation.get("responses", {}).items():
            if not status.startswith(("4", "5")):
                continue
            content = resolve(response).get("content", {})
            if list(content) != ["application/problem+json"]:
                problems.append(f"{method.upper()} {route} {status} is not only application/problem+json")

if problems:
    print("\n".join(f"check-openapi: {p}" for p in problems), file=sys.stderr)
    sys.exit(1)
count = sum(1 for item in paths.values() for m in item if m in {"get", "post", "delete", "put", "patch"})
print(f"check-openapi: {path} is valid OpenAPI {spec['openapi']} ({count} operations)")
PY
