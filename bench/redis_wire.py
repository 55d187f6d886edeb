"""The few pieces of Redis's wire protocol the Python benchmarks need (`callgrind-redis-commit.py`,
`bench-redis-floor.py`): RESP commands and replies on a plain socket, a free loopback port, and the
commit script read from a SessionScripts.swift, so the benchmarks run the script `bff` runs."""
import re
import socket
import textwrap


def encode(*args):
    """One command in RESP: an array of bulk strings."""
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def reply(f):
    """One reply read from `f` (a socket's `makefile("rb")`); an error reply raises RuntimeError."""
    line = f.readline()
    kind, rest = line[:1], line[1:-2]
    if kind == b"-":
        raise RuntimeError(rest.decode())
    if kind in (b"+", b":"):
        return rest
    if kind == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2]
    if kind == b"*":
        return [reply(f) for _ in range(max(int(rest), 0))]
    raise RuntimeError(f"unexpected reply {line!r}")


def free_port():
    """A loopback TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def commit_script(source):
    """The `commitMany` Lua script in a SessionScripts.swift, or None."""
    match = re.search(r'static let commitMany = RedisScript\(\n\s*#"""\n(.*?)"""#\)', open(source).read(), re.S)
    return textwrap.dedent(match.group(1)) if match else None
