#!/usr/bin/env bash
# Validates the OpenAPI document against the OpenAPI 3.1 specification (openapi-spec-validator),
# and checks that it is the 3.1 document every path of the contract expects.
# Usage: .ci/check-openapi.sh [path/to/openapi.yaml]
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

# The view models' part of the document follows the code: `bff view-models` says what the server hosts.
BFF_BIN="${BFF_BIN:-.build/debug/bff}"
if [[ ! -x $BFF_BIN ]]; then
    echo "check-openapi: building bff (swift build --product bff) to ask it for its view models"
    swift build --product bff > /dev/null
fi
VIEW_MODELS="$("$BFF_BIN" view-models)"
export VIEW_MODELS

"$PYTHON" - "$SPEC" <<'PY'
import json
import os
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
            # The sign-in callback is a browser's navigation: it may answer its errors as a page too.
            allowed = [["application/problem+json"]]
            if route == "/auth/callback":
                allowed.append(["application/problem+json", "text/html"])
            if list(content) not in allowed:
                problems.append(f"{method.upper()} {route} {status} is not only application/problem+json")

# The view models: the snapshot lists every one the server hosts, each one's state schema requires its
# outputs (`<Name>State`) and allows nothing else (`<Name>Outputs`), and the input route's examples
# name every view model that takes inputs and every input (as `bff view-models` reports them).
hosted = json.loads(os.environ["VIEW_MODELS"])["viewModels"]
names = [vm["name"] for vm in hosted]
snapshot_vms = resolve(spec["components"]["schemas"]["Snapshot"])["properties"]["viewModels"]
if snapshot_vms.get("required") != names:
    problems.append(f"Snapshot.viewModels requires {snapshot_vms.get('required')}, the server hosts {names}")
if list(snapshot_vms.get("properties", {})) != names:
    problems.append(f"Snapshot.viewModels has {list(snapshot_vms.get('properties', {}))}, the server hosts {names}")
schemas = spec["components"]["schemas"]
for vm in hosted:
    title = vm["name"][0].upper() + vm["name"][1:]
    state, outputs = schemas.get(f"{title}State"), schemas.get(f"{title}Outputs")
    if state is None or outputs is None:
        problems.append(f"view model {vm['name']}: no {title}State or {title}Outputs schema")
        continue
    required = next((part["required"] for part in state.get("allOf", []) if "required" in part), None)
    if required != vm["outputs"]:
        problems.append(f"{title}State requires {required}, {vm['name']}'s outputs are {vm['outputs']}")
    if list(outputs.get("properties", {})) != vm["outputs"]:
        problems.append(
            f"{title}Outputs has {list(outputs.get('properties', {}))}, {vm['name']}'s outputs are {vm['outputs']}")
parameters = {p.get("name"): p for p in paths["/api/sessions/{id}/{viewModel}/{input}"].get("parameters", [])}
with_inputs = [vm["name"] for vm in hosted if vm["inputs"]]
inputs = [i for vm in hosted for i in vm["inputs"]]
if parameters.get("viewModel", {}).get("schema", {}).get("examples") != with_inputs:
    problems.append(f"the input route's viewModel examples are not {with_inputs}")
if parameters.get("input", {}).get("schema", {}).get("examples") != inputs:
    problems.append(f"the input route's input examples are not {inputs}")

if problems:
    print("\n".join(f"check-openapi: {p}" for p in problems), file=sys.stderr)
    sys.exit(1)
count = sum(1 for item in paths.values() for m in item if m in {"get", "post", "delete", "put", "patch"})
print(f"check-openapi: {path} is valid OpenAPI {spec['openapi']} ({count} operations, view models {', '.join(names)})")
PY
