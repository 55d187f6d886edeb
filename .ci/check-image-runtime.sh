#!/usr/bin/env bash
# Proves the Dockerfile's runtime stage without a Docker engine: builds a Debian root file system
# with debootstrap (minbase), installs exactly the packages the runtime stage names, replays the
# stage's WORKDIR/COPY/RUN/ENV/USER instructions on it, and runs the image's CMD (plus github-sim)
# in it with chroot as the stage's user until
#   - the HEALTHCHECK command answers (run inside, as that user, like Docker does),
#   - a search through bff against github-sim works (and writes the cache in /app/var),
#   - SIGTERM drains bff with exit code 0.
# Everything it needs is parsed from the Dockerfile, so the two cannot drift apart.
#
# The bootstrapped root file system (with the packages) is cached under
#   ${XDG_CACHE_HOME:-$HOME/.cache}/bff-image-rootfs/<key>   (key: release, mirror, package list)
# and each run works on an overlay of it (a copy without overlayfs); a cold run bootstraps from
# nothing. The release binaries are built with --static-swift-stdlib like the Dockerfile's build
# stage, in .build-image (kept between runs).
#
# Needs root (chroot, mounts); runs in a private mount namespace, so nothing stays mounted.
# Usage: .ci/check-image-runtime.sh [Dockerfile]
# Environment: DEBIAN_MIRROR (default http://deb.debian.org/debian), BFF_IMAGE_CACHE (cache folder),
# BFF_IMAGE_SCRATCH_PATH (the release build's folder; one outside a fresh clone keeps CI runs warm).
set -euo pipefail
cd "$(dirname "$0")/.."
DOCKERFILE="${1:-Dockerfile}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CACHE_ROOT="${BFF_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bff-image-rootfs}"
SCRATCH_PATH="${BFF_IMAGE_SCRATCH_PATH:-.build-image}"
START=$SECONDS

log() { echo "check-image-runtime: [$((SECONDS - START))s] $*"; }
fail() {
    echo "check-image-runtime: FAILED: $*" >&2
    exit 1
}

if [[ $(id -u) -ne 0 ]]; then fail "needs root (debootstrap, chroot, mounts): run it with sudo"; fi
for tool in debootstrap chroot unshare python3 curl swift; do
    command -v "$tool" > /dev/null || fail "'$tool' is not installed (scripts/install-deps.sh --test installs debootstrap)"
done
# A private mount namespace: /proc and /dev mounted into the root file system vanish with us.
if [[ -z "${BFF_IMAGE_CHECK_IN_NAMESPACE:-}" ]]; then
    exec unshare --mount --propagation private env BFF_IMAGE_CHECK_IN_NAMESPACE=1 bash "$0" "$@"
fi

# ---------------------------------------------------------------------------------------------
# 1. What the Dockerfile says: the runtime stage's base release, packages and instructions.
# ---------------------------------------------------------------------------------------------
PLAN="$(mktemp)"
python3 - "$DOCKERFILE" > "$PLAN" << 'PY' || fail "could not read the runtime stage of $DOCKERFILE"
import json, re, shlex, sys

lines, current = [], ""
for raw in open(sys.argv[1], encoding="utf-8"):
    s = raw.strip()
    if s.startswith("#") and not current.strip():
        continue
    if s.endswith("\\"):
        current += s[:-1] + " "
        continue
    current += s
    if current.strip():
        lines.append(current.strip())
    current = ""

args, stages = {}, []
for line in lines:
    word, _, rest = line.partition(" ")
    word, rest = word.upper(), rest.strip()
    if word == "ARG" and not stages and "=" in rest:
        k, _, v = rest.partition("=")
        args[k] = v
    elif word == "FROM":
        image = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), ""), rest.split()[0])
        stages.append({"image": image, "lines": []})
    elif stages:
        stages[-1]["lines"].append((word, rest))

def out(key, *values):
    for v in values:
        if "\x1f" in v or "\n" in v:
            sys.exit(f"unsupported character in {key}: {v!r}")
    print("\x1f".join((key,) + values))  # a separator that is not IFS white space: empty fields stay

build, runtime = stages[0], stages[-1]
m = re.fullmatch(r"debian:([a-z]+)(-slim)?", runtime["image"])
if not m:
    sys.exit(f"the runtime stage's base image {runtime['image']!r} is not debian:<release>[-slim]")
out("release", m.group(1))
for word, rest in build["lines"]:
    for product in re.findall(r"--product[ =]([A-Za-z0-9_-]+)", rest):
        out("product", product)

env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
expand = lambda s: re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), ""), s)
packages = []
for word, rest in runtime["lines"]:
    if word == "RUN":
        # apt-get update/install and the list clean-up are what the cached root file system did;
        # every other command of the stage is replayed as root in the chroot, in order.
        for part in re.split(r"\s*&&\s*", rest):
            w = shlex.split(part)
            if w[:1] == ["apt-get"] and "install" in w:
                packages += [p for p in w[w.index("install") + 1 :] if not p.startswith("-")]
            elif w[:1] == ["apt-get"] or w[:3] == ["rm", "-rf", "/var/lib/apt/lists/*"]:
                pass
            else:
                out("run", part)
    elif word == "WORKDIR":
        out("workdir", rest)
    elif word == "COPY":
        w = shlex.split(rest)
        origin = next((x.split("=", 1)[1] for x in w if x.startswith("--from=")), "")
        w = [x for x in w if not x.startswith("--")]
        for src in w[:-1]:
            out("copy", origin, src, w[-1])
    elif word == "ENV":
        for kv in shlex.split(rest):
            k, _, v = kv.partition("=")
            env[k] = expand(v)
    elif word == "USER":
        out("user", rest)
    elif word == "HEALTHCHECK":
        out("healthcheck", *json.loads(rest[rest.index("CMD") + 3 :].strip()))
    elif word == "CMD":
        out("cmd", *json.loads(rest))
if not packages:
    sys.exit("the runtime stage installs no packages")
out("packages", *sorted(set(packages)))
for k, v in env.items():
    out("env", f"{k}={v}")
PY

release="" user="" products=() packages=() steps=() image_env=() healthcheck=() cmd=()
while IFS=$'\x1f' read -r -a f; do
    case "${f[0]}" in
    release) release="${f[1]}" ;;
    product) products+=("${f[1]}") ;;
    packages) packages=("${f[@]:1}") ;;
    run | workdir | copy) steps+=("$(printf '%s\x1f' "${f[@]}")") ;;
    env) image_env+=("${f[1]}") ;;
    user) user="${f[1]}" ;;
    healthcheck) healthcheck=("${f[@]:1}") ;;
    cmd) cmd=("${f[@]:1}") ;;
    esac
done < "$PLAN"
rm -f "$PLAN"
[[ -n "$user" ]] || fail "the runtime stage sets no USER"
((${#cmd[@]})) || fail "the runtime stage has no CMD"
((${#healthcheck[@]})) || fail "the runtime stage has no HEALTHCHECK CMD"
((${#products[@]})) || fail "the build stage builds no --product"
log "Dockerfile: debian $release, packages: ${packages[*]}; user $user; CMD: ${cmd[*]}"

# ---------------------------------------------------------------------------------------------
# 2. The release binaries (in the background: the bootstrap below mostly waits for the network).
# ---------------------------------------------------------------------------------------------
BUILD_LOG="$(mktemp)"
build_pid="" WORK="" ROOT="" pids=()
cleanup() {
    # A build still running (this run failed early): SIGINT makes swift-build stop its compilers
    # (they run in process groups of their own; SIGTERM would leave them running).
    if [[ -n "$build_pid" ]] && kill -0 "$build_pid" 2> /dev/null; then
        pkill -INT -P "$build_pid" 2> /dev/null || true
        wait "$build_pid" 2> /dev/null || true
    fi
    # (github-sim is killed: its SIGTERM handling is not what this checks.)
    for p in "${pids[@]}"; do { kill -KILL "$p" && wait "$p"; } > /dev/null 2>&1 || true; done
    if [[ -n "$WORK" ]]; then
        # Our mount namespace is private: unmount before deleting so nothing of the host is touched.
        for m in dev/shm dev/pts dev/null dev/zero dev/full dev/random dev/urandom dev/tty dev proc ""; do
            umount -l "$ROOT/$m" 2> /dev/null || true
        done
        rm -rf --one-file-system "$WORK"
    fi
    rm -f "$BUILD_LOG"
}
trap cleanup EXIT
(
    for product in "${products[@]}"; do
        swift build -c release --static-swift-stdlib --scratch-path "$SCRATCH_PATH" --product "$product" || exit 1
    done
) > "$BUILD_LOG" 2>&1 &
build_pid=$!
log "building ${products[*]} (release, --static-swift-stdlib, --scratch-path $SCRATCH_PATH) in the background"

# ---------------------------------------------------------------------------------------------
# 3. The root file system: debootstrap minbase + the packages, cached by release/mirror/packages.
# ---------------------------------------------------------------------------------------------
key="$(printf '%s\n' v1 "$release" "$MIRROR" "${packages[@]}" | sha256sum | cut -c1-16)"
base="$CACHE_ROOT/$release-$key"
# Root file systems of other package lists that no run used for a week go (about 150 MB each).
# So do partial trees of runs that died more than a day ago.
find "$CACHE_ROOT" -mindepth 1 -maxdepth 1 -name "$release-*" ! -name "${base##*/}" -mtime +7 \
    -exec rm -rf --one-file-system {} + 2> /dev/null || true
find "$CACHE_ROOT" -mindepth 1 -maxdepth 1 -name ".partial-*" -mtime +1 -exec rm -rf --one-file-system {} + \
    2> /dev/null || true
if [[ -f "$base/complete" ]]; then
    touch "$base"
    log "root file system: cached in $base"
else
    log "root file system: not cached; debootstrap --variant=minbase $release from $MIRROR"
    mkdir -p "$CACHE_ROOT"
    tmp="$CACHE_ROOT/.partial-$key-$$"
    rm -rf --one-file-system "$tmp"
    mkdir -p "$tmp"
    if ! debootstrap --variant=minbase "$release" "$tmp/rootfs" "$MIRROR" > "$tmp/debootstrap.log" 2>&1; then
        tail -n 30 "$tmp/debootstrap.log" >&2
        rm -rf --one-file-system "$tmp"
        fail "debootstrap failed (log above)"
    fi
    log "debootstrap done; installing ${packages[*]}"
    # The same suites as the debian:<release>-slim image (security updates included).
    cat > "$tmp/rootfs/etc/apt/sources.list" << EOF
deb $MIRROR $release main
deb $MIRROR $release-updates main
deb ${MIRROR%/debian}/debian-security $release-security main
EOF
    cp /etc/resolv.conf "$tmp/rootfs/etc/resolv.conf"
    if ! chroot "$tmp/rootfs" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
        sh -c "apt-get update -qq && apt-get install -y -qq --no-install-recommends $(printf '%q ' "${packages[@]}") \
                && apt-get clean && rm -rf /var/lib/apt/lists/*" > "$tmp/apt.log" 2>&1; then
        tail -n 30 "$tmp/apt.log" >&2
        rm -rf --one-file-system "$tmp"
        fail "installing the runtime packages failed (log above)"
    fi
    touch "$tmp/complete"
    # (A run in parallel may have cached the same tree meanwhile: keep that one.)
    if [[ -e "$base" ]]; then rm -rf --one-file-system "$tmp"; else mv "$tmp" "$base"; fi
    log "root file system cached in $base ($(du -sh "$base" | cut -f1))"
fi

if ! wait "$build_pid"; then
    grep -E "error:" "$BUILD_LOG" | head -20 >&2 || true
    tail -n 20 "$BUILD_LOG" >&2
    fail "the release build failed (log above)"
fi
build_pid=""
bin_path="$(swift build -c release --scratch-path "$SCRATCH_PATH" --show-bin-path)"
log "release build done ($bin_path)"

# ---------------------------------------------------------------------------------------------
# 4. The image: a copy of the cached root file system with the stage's instructions replayed.
# ---------------------------------------------------------------------------------------------
WORK="$(mktemp -d /tmp/bff-image.XXXXXX)"
ROOT="$WORK/rootfs"
# The cached tree stays untouched: an overlay on it takes this run's changes (a copy if the
# kernel has no overlayfs).
mkdir -p "$ROOT" "$WORK/upper" "$WORK/overlay-work"
if ! mount -t overlay overlay -o "lowerdir=$base/rootfs,upperdir=$WORK/upper,workdir=$WORK/overlay-work" "$ROOT" \
    2> /dev/null; then
    cp -a "$base/rootfs/." "$ROOT/"
fi
# What Docker provides to every container: /proc, a small /dev, /etc/hosts, /etc/resolv.conf.
mount -t proc proc "$ROOT/proc"
mount -t tmpfs -o mode=755,nosuid tmpfs "$ROOT/dev"
for d in null zero full random urandom tty; do
    touch "$ROOT/dev/$d"
    mount --bind "/dev/$d" "$ROOT/dev/$d"
done
mkdir -p "$ROOT/dev/shm" "$ROOT/dev/pts"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$ROOT/dev/shm"
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' > "$ROOT/etc/hosts"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"

in_root() { chroot "$ROOT" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
workdir=/
for step in "${steps[@]}"; do
    IFS=$'\x1f' read -r -a f <<< "$step"
    case "${f[0]}" in
    workdir)
        workdir="${f[1]}"
        mkdir -p "$ROOT$workdir"
        ;;
    run)
        log "RUN ${f[1]}"
        if ! out="$(in_root /bin/sh -c "cd '$workdir' && ${f[1]}" 2>&1)"; then
            echo "$out" >&2
            fail "RUN ${f[1]} failed in the image (output above)"
        fi
        ;;
    copy)
        origin="${f[1]}" src="${f[2]}" dest="${f[3]}"
        [[ "$dest" == /* ]] || dest="$workdir/$dest"
        if [[ -n "$origin" ]]; then
            # The build stage stages each product beside its resource bundles (Bundle.module).
            [[ "$src" == /staging/bin/ ]] || fail "COPY --from=$origin $src: only /staging/bin/ is understood"
            src="$WORK/staging"
            mkdir -p "$src"
            for product in "${products[@]}"; do cp "$bin_path/$product" "$src/"; done
            find "$bin_path" -maxdepth 1 -name '*.resources' -exec cp -R {} "$src/" \;
        fi
        mkdir -p "$ROOT$dest"
        if [[ -d "$src" ]]; then cp -R "$src/." "$ROOT$dest/"; else cp "$src" "$ROOT$dest/"; fi
        log "COPY ${origin:+--from=$origin }${f[2]} $dest"
        ;;
    esac
done

# Every shared library the binaries load must be in the image.
for product in "${products[@]}"; do
    exe="$(chroot "$ROOT" /usr/bin/env -i "${image_env[@]}" /bin/sh -c "command -v $product")" ||
        fail "$product is not on the image's PATH (its ENV: ${image_env[*]})"
    libs="$(in_root ldd "$exe" 2>&1)" || true
    if grep -q "not found" <<< "$libs"; then
        echo "$libs" >&2
        missing="$(grep "not found" <<< "$libs" | awk '{ print $1 }' | tr '\n' ' ')"
        fail "$exe in the image misses shared libraries: ${missing}(ldd above): add their packages to the runtime stage"
    fi
done
log "ldd: every shared library of ${products[*]} is in the image"

# ---------------------------------------------------------------------------------------------
# 5. Run it as the image's user: health check, a search through github-sim, SIGTERM drain.
# ---------------------------------------------------------------------------------------------
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port="$(free_port)" sim_port="$(free_port)"
uid="${user%%:*}" gid="${user#*:}"
[[ "$user" == *:* ]] || gid="$uid"
home="$(awk -F: -v u="$uid" '$3 == u { print $6 }' "$ROOT/etc/passwd")"
[[ -n "$home" ]] || fail "the image has no user with uid $uid (the stage's USER $user)"
# As Docker runs a container: the stage's ENV (PORT set like `docker run -e PORT=…`), its user,
# its WORKDIR; GITHUB_API_URL points at the simulator. Exec'd, so a background call's $! is the
# server's own pid (signals reach it, its exit status is ours to check).
exec_as_user() {
    exec chroot --userspec="$uid:$gid" --groups="$gid" "$ROOT" /usr/bin/env -i HOME="$home" "${image_env[@]}" \
        PORT="$port" GITHUB_API_URL="http://127.0.0.1:$sim_port" /bin/sh -c "cd '$workdir' && exec \"\$@\"" sh "$@"
}
exec_as_user github-sim --port "$sim_port" > "$WORK/sim.log" 2>&1 &
pids+=($!)
exec_as_user "${cmd[@]}" > "$WORK/bff.log" 2>&1 &
bff_pid=$!
pids+=("$bff_pid")
log "started github-sim (:$sim_port) and '${cmd[*]}' (PORT=$port) as uid $uid:$gid in the image"

show_logs() {
    echo "--- bff output:" >&2
    tail -n 40 "$WORK/bff.log" >&2
    echo "--- github-sim output:" >&2
    tail -n 10 "$WORK/sim.log" >&2
}
# github-sim prints its banner once it listens.
sim_pid="${pids[0]}"
for _ in $(seq 1 150); do
    grep -q "repositories on http" "$WORK/sim.log" && break
    kill -0 "$sim_pid" 2> /dev/null || break
    sleep 0.2
done
grep -q "repositories on http" "$WORK/sim.log" || {
    show_logs
    fail "github-sim did not start in the image within 30 s (its output is above)"
}
healthy=""
for _ in $(seq 1 150); do
    if ! kill -0 "$bff_pid" 2> /dev/null; then
        show_logs
        wait "$bff_pid" && status=0 || status=$?
        fail "bff exited with status $status before answering its health check (its output is above)"
    fi
    if (exec_as_user "${healthcheck[@]}") > /dev/null 2>&1; then
        healthy=1
        break
    fi
    sleep 0.2
done
[[ -n "$healthy" ]] || {
    show_logs
    fail "the HEALTHCHECK (${healthcheck[*]}) did not pass within 30 s"
}
log "HEALTHCHECK passed inside the image: ${healthcheck[*]}"

code="$(curl -sS -o "$WORK/search.json" -D "$WORK/search.headers" -w '%{http_code}' \
    "http://127.0.0.1:$port/api/search/repositories?q=swift&per_page=5")" || true
summary="$(python3 - "$WORK/search.json" 2>&1 << 'PY'
import json, sys
r = json.load(open(sys.argv[1]))
items = r["items"]
assert items and all(i["fullName"] for i in items), "no repositories in the answer"
print("totalCount %d, %d items, first %s" % (r["totalCount"], len(items), items[0]["fullName"]))
PY
)" || code="$code (body: $summary)"
if [[ "$code" != 200 ]]; then
    show_logs
    echo "--- response:" >&2
    cat "$WORK/search.headers" "$WORK/search.json" >&2 || true
    fail "GET /api/search/repositories?q=swift through bff did not answer 200 with repositories: $code"
fi
cache_header="$(grep -i '^x-cache:' "$WORK/search.headers" | tr -d '\r' || true)"
log "search through github-sim: 200, $summary, $cache_header"
# The one folder the server writes: the cache file must be there, owned by the image's user.
cache_file="$(find "$ROOT/app/var" -maxdepth 1 -name '*.sqlite' -user "$uid" | head -1)"
[[ -n "$cache_file" ]] || {
    show_logs
    fail "no search cache file owned by uid $uid in /app/var"
}
log "search cache written: ${cache_file#"$ROOT"}"

# A browser's event stream is open when SIGTERM comes: draining must end it with reason shutdown.
session="$(curl -sS -X POST "http://127.0.0.1:$port/api/sessions" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')" || fail "POST /api/sessions failed"
curl -sN "http://127.0.0.1:$port/api/sessions/$session/events" > "$WORK/stream.txt" 2>&1 &
stream_pid=$!
pids+=("$stream_pid")
for _ in $(seq 1 50); do
    grep -q "event: snapshot" "$WORK/stream.txt" && break
    sleep 0.1
done
grep -q "event: snapshot" "$WORK/stream.txt" || fail "the event stream sent no snapshot: $(cat "$WORK/stream.txt")"
log "event stream of session $session open"

kill -TERM "$bff_pid"
sleep 30 &
timer=$!
wait -n -p exited "$bff_pid" "$timer" && status=0 || status=$?
if [[ "$exited" == "$timer" ]]; then
    show_logs
    fail "bff did not exit within 30 s of SIGTERM"
fi
kill "$timer" 2> /dev/null || true
if ((status != 0)); then
    show_logs
    fail "bff exited with status $status after SIGTERM (expected 0)"
fi
wait "$stream_pid" || true
grep -A1 "event: end" "$WORK/stream.txt" | grep -q '"reason":"shutdown"' || {
    show_logs
    fail "the open event stream did not get event: end with reason shutdown; it got: $(cat "$WORK/stream.txt")"
}
log "SIGTERM: bff drained (the open stream got event: end, reason shutdown) and exited 0"
log "passed in $((SECONDS - START)) s"
