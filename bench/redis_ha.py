"""Driver of bench/redis-ha.sh (see there): Redis deployments, bff nodes, latency runs with Redis
CPU per input, and failover trials. Every process it starts is stopped when it ends (or is interrupted)."""

import json, os, signal, socket, statistics, subprocess, sys, tempfile, threading, time

BIN, OUT = os.environ["HA_BIN"], os.environ["HA_OUT"]
SERVER_PIN = os.environ.get("HA_SERVER_PIN", "").split()
CLIENT_PIN = os.environ.get("HA_CLIENT_PIN", "").split()
ROUNDS = int(os.environ.get("HA_ROUNDS", "2"))
SESSIONS = int(os.environ.get("HA_SESSIONS", "200"))
RATE = float(os.environ.get("HA_RATE", "1000"))
DURATION = float(os.environ.get("HA_DURATION", "10"))
TRIALS = int(os.environ.get("HA_TRIALS", "20"))
FAILOVER_SESSIONS = int(os.environ.get("HA_FAILOVER_SESSIONS", "30"))
SKIP = os.environ.get("HA_SKIP", "").split()
WORK = tempfile.mkdtemp(prefix="bench-redis-ha-")
PROCS = []
SUMMARY = []


def log(*a):
    print("bench-redis-ha:", *a, file=sys.stderr, flush=True)


def say(line=""):
    SUMMARY.append(line)
    print(line, flush=True)


def free_ports(n):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def cli(port, *args, timeout=5):
    r = subprocess.run(["redis-cli", "-p", str(port), *map(str, args)], capture_output=True, text=True,
                       timeout=timeout)
    return r.stdout.strip()


def start(args, log_name):
    p = subprocess.Popen(SERVER_PIN + args, stdout=open(f"{OUT}/ha-{log_name}.log", "w"), stderr=subprocess.STDOUT)
    PROCS.append(p)
    return p


class Redis:
    """One redis-server (data node or sentinel) on a port, restartable."""

    def __init__(self, port, extra, sentinel_conf=None):
        self.port, self.extra, self.sentinel_conf, self.proc = port, extra, sentinel_conf, None
        self.start()

    def start(self, more=()):
        if self.sentinel_conf:
            args = ["redis-server", self.sentinel_conf, "--sentinel"]
        else:
            args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                    "no", "--maxmemory-policy", "noeviction", "--repl-diskless-sync-delay", "0", "--dir", WORK,
                    *self.extra, *more]
        self.proc = start(args, f"redis-{self.port}")
        for _ in range(200):
            if cli(self.port, "ping") == "PONG":
                return
            time.sleep(0.05)
        raise SystemExit(f"redis-server on {self.port} did not start")

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def cpu(self):
        fields = dict(l.split(":", 1) for l in cli(self.port, "info", "cpu").splitlines() if ":" in l)
        return float(fields["used_cpu_sys"]) + float(fields["used_cpu_user"])


class One:
    name = "one"

    def __init__(self):
        m, r = free_ports(2)
        self.data = [Redis(m, []), Redis(r, ["--replicaof", "127.0.0.1", str(m)])]
        self.url = f"redis://127.0.0.1:{m}"
        wait_until(lambda: "master_link_status:up" in cli(r, "info", "replication"), 30, "the replica")

    def masters(self):
        return [self.data[0].port]


class Cluster:
    name = "cluster"

    def __init__(self):
        ports = free_ports(12)
        self.data = [Redis(p, ["--cluster-enabled", "yes", "--cluster-config-file", f"{WORK}/nodes-{p}.conf",
                               "--cluster-node-timeout", "1000", "--cluster-port", str(ports[6 + i]),
                               "--cluster-require-full-coverage", "no"]) for i, p in enumerate(ports[:6])]
        subprocess.run(["redis-cli", "--cluster", "create", *[f"127.0.0.1:{p}" for p in ports[:6]],
                        "--cluster-replicas", "1", "--cluster-yes"], capture_output=True, check=True)
        self.url = "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in ports[:6])
        wait_until(self.healthy, 60, "the cluster")

    def live(self):
        return next(n for n in self.data if n.running)

    def nodes(self):
        out = []
        for line in cli(self.live().port, "cluster", "nodes").splitlines():
            f = line.split()
            port = int(f[1].split("@")[0].split(":")[-1])
            out.append({"port": port, "id": f[0], "master": "master" in f[2], "fail": "fail" in f[2],
                        "of": f[3], "slots": f[8:]})
        return out

    def masters(self):
        return sorted(n["port"] for n in self.nodes() if n["master"] and not n["fail"] and n["slots"])

    def slot_map(self):
        lines = cli(self.live().port, "cluster", "slots").splitlines()
        out, i = [], 0
        while i + 3 < len(lines):
            if lines[i].isdigit() and lines[i + 1].isdigit() and lines[i + 2] == "127.0.0.1" and lines[i + 3].isdigit():
                out.append((int(lines[i]), int(lines[i + 1]), int(lines[i + 3])))
                i += 4
            else:
                i += 1
        return out

    def master_of(self, slot):
        return next((p for a, b, p in self.slot_map() if a <= slot <= b), None)

    def healthy(self):
        if not all(n.running for n in self.data):
            return False
        if not all("cluster_state:ok" in cli(n.port, "cluster", "info") for n in self.data):
            return False
        nodes = self.nodes()
        if any(n["fail"] for n in nodes):
            return False
        masters = [n for n in nodes if n["master"] and n["slots"]]
        replicas = [n for n in nodes if not n["master"]]
        return len(masters) == 3 and len(replicas) == 3 and all(
            "master_link_status:up" in cli(r["port"], "info", "replication") for r in replicas)


class Sentinel:
    name = "sentinel"

    def __init__(self):
        m, r, *s = free_ports(5)
        self.data = [Redis(m, []), Redis(r, ["--replicaof", "127.0.0.1", str(m)])]
        self.sentinels = []
        for port in s:
            conf = f"{WORK}/sentinel-{port}.conf"
            open(conf, "w").write(
                f"port {port}\nbind 127.0.0.1\ndir {WORK}\nsentinel monitor mymaster 127.0.0.1 {m} 2\n"
                "sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 2000\n")
            self.sentinels.append(Redis(port, [], sentinel_conf=conf))
        self.url = "redis+sentinel://" + ",".join(f"127.0.0.1:{p}" for p in s) + "/mymaster"
        wait_until(self.healthy, 60, "the sentinel set")

    def master(self):
        for s in self.sentinels:
            lines = cli(s.port, "sentinel", "get-master-addr-by-name", "mymaster").splitlines()
            if len(lines) == 2:
                return int(lines[1])
        return None

    def masters(self):
        return [self.master()]

    def healthy(self):
        m = self.master()
        if m is None or not all(n.running for n in self.data):
            return False
        if not cli(m, "role").startswith("master"):
            return False
        for n in self.data:
            if n.port != m and "master_link_status:up" not in cli(n.port, "info", "replication"):
                return False
        for s in self.sentinels:
            f = cli(s.port, "sentinel", "master", "mymaster").splitlines()
            d = dict(zip(f[::2], f[1::2]))
            if d.get("port") != str(m) or d.get("num-other-sentinels") != "2" or d.get("flags") != "master":
                return False
            if cli(s.port, "sentinel", "replicas", "mymaster").split("\n").count("slave") < 1:
                return False
            if "s_down" in cli(s.port, "sentinel", "replicas", "mymaster"):
                return False
        return True


def wait_until(cond, seconds, what):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if cond():
                return
        except Exception:
            pass
        time.sleep(0.05)
    raise SystemExit(f"{what} not ready within {seconds} s")


def http(port, method, path, body=b"", headers=(), timeout=5):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {len(body)}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers) + "Content-Type: application/json\r\n\r\n"
        s.sendall(head.encode() + body)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        status = int(data.split(b" ", 2)[1])
        return status, data.split(b"\r\n\r\n", 1)[1]
    except Exception as e:
        return None, str(e).encode()


def bff_nodes(url, acks, count=2):
    ports = free_ports(count)
    procs = []
    for i, port in enumerate(ports):
        p = start([f"{BIN}/bff", "--port", str(port), "--threads", "1", "--cache-file", "none", "--log-level",
                   os.environ.get("HA_LOG_LEVEL", "warning"), "--redis-url", url, "--redis-replica-acks", str(acks), "--node-id", f"node{i + 1}",
                   # one client (this driver) makes every session
                   "--client-session-rate", "10000", "--client-session-burst", "10000"],
                  f"bff-{port}")
        procs.append(p)
        wait_until(lambda: http(port, "GET", "/readyz")[0] == 200, 20, f"bff node {i + 1}")
    return ports, procs


def stop(procs):
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()


# ---------------------------------------------------------------------------------------------------
# 1. Latency and Redis CPU per input


def latency_part(deployments):
    idle = {}
    for d in deployments:  # each data node's CPU rate when nothing happens (cluster bus, replication pings)
        t0, c0 = time.time(), {n.port: n.cpu() for n in d.data}
        time.sleep(5)
        idle.update({n.port: (n.cpu() - c0[n.port]) / (time.time() - t0) for n in d.data})
    results = {}
    for r in range(1, ROUNDS + 1):
        for d in deployments:
            for acks in (0, 1):
                ports, procs = bff_nodes(d.url, acks)
                masters = d.masters()
                t0, c0 = time.time(), {n.port: n.cpu() for n in d.data}
                file = f"{OUT}/ha-lat-r{r}-{d.name}-n{acks}.json"
                cmd = CLIENT_PIN + [f"{BIN}/bff-load", "latency", "--url", f"http://127.0.0.1:{ports[0]}",
                                    "--stream-url", f"http://127.0.0.1:{ports[1]}", "--sessions", str(SESSIONS),
                                    "--rate", str(RATE), "--duration", str(DURATION), "--quiet", "--json"]
                with open(file, "w") as f:
                    subprocess.run(cmd, stdout=f, check=True)
                dt = time.time() - t0
                cpu = {n.port: n.cpu() - c0[n.port] - idle[n.port] * dt for n in d.data}
                stop(procs)
                j = json.load(open(file))
                l = j["latency"]
                bad = j["lost"] or j["errors"] or j["streamErrors"] or j["accepted"] != j["sent"]
                inputs = j["accepted"]
                per_master = [cpu[m] / inputs * 1e6 for m in masters]
                replicas = sum(v for p, v in cpu.items() if p not in masters) / inputs * 1e6
                results.setdefault((d.name, acks), []).append(
                    {"p50": l["p50Us"], "p90": l["p90Us"], "p99": l["p99Us"], "masters": per_master,
                     "replicas": replicas, "inputs": inputs})
                log(f"round {r} {d.name:8s} N={acks}: p50 {l['p50Us']:.0f} us p99 {l['p99Us']:.0f} us, Redis "
                    f"{sum(per_master):.1f} us/input (per master {', '.join(f'{x:.1f}' for x in per_master)}), "
                    f"replicas {replicas:.1f}; sent {j['sent']} lost {j['lost']} errors {j['errors']}")
                if bad:
                    raise SystemExit(f"inputs lost or failed: {file}")
    say(f"latency: {ROUNDS} rounds x {DURATION:.0f} s, {SESSIONS} sessions, {RATE:.0f} inputs/s, created and posted "
        "on node 1, streamed on node 2 (--threads 1 each)")
    say("deployment  N  p50 us  p90 us  p99 us   Redis us/input: masters (per master)        replicas")
    med = lambda rows, k: statistics.median(x[k] for x in rows)
    for (name, acks), rows in results.items():
        per = [statistics.median(x["masters"][i] for x in rows) for i in range(len(rows[0]["masters"]))]
        say(f"{name:10s} {acks:2d} {med(rows, 'p50'):7.0f} {med(rows, 'p90'):7.0f} {med(rows, 'p99'):7.0f}   "
            f"{sum(per):6.1f} ({', '.join(f'{x:.1f}' for x in per):22s}) {med(rows, 'replicas'):8.1f}")
    say("(medians over the rounds; Redis CPU = INFO cpu user+sys of the data nodes, their idle rate taken out)")


# ---------------------------------------------------------------------------------------------------
# 2. Failover trials


class Stream:
    def __init__(self, port, sid):
        self.buf, self.lock = b"", threading.Lock()
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.sendall(f"GET /api/sessions/{sid}/events HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        while True:
            try:
                chunk = self.sock.recv(65536)
            except Exception:
                return
            if not chunk:
                return
            with self.lock:
                self.buf = (self.buf + chunk)[-200000:]

    def has(self, value):
        """The stream showed the query `value`: in the input's event, or in a snapshot (a stream whose
        position the history no longer holds, or that had no event yet, gets a fresh snapshot)."""
        with self.lock:
            return f'"query":"{value}"'.encode() in self.buf


def failover_part(d):
    ports, procs = bff_nodes(d.url, 1)
    sessions = []
    for _ in range(FAILOVER_SESSIONS):
        status, body = http(ports[0], "POST", "/api/sessions")
        sessions.append(json.loads(body)["id"])
    streams = {sid: Stream(ports[1], sid) for sid in sessions}
    last_seq = {sid: 0 for sid in sessions}
    slots = {sid: int(cli(d.live().port, "cluster", "keyslot", sid)) if d.name == "cluster" else 0 for sid in sessions}
    rows = []
    last_failover = 0
    for trial in range(1, TRIALS + 1):
        wait_until(d.healthy, 60, "a healthy deployment")
        time.sleep(max(0, last_failover + 4.5 - time.time()))  # sentinels: 2 x failover-timeout
        if d.name == "cluster":
            victim = d.master_of(slots[sessions[trial % len(sessions)]])
            on_victim = [s for s in sessions if d.master_of(slots[s]) == victim]
        else:
            victim = d.master()
            on_victim = list(sessions)
        others = [s for s in sessions if s not in on_victim]
        node = next(n for n in d.data if n.port == victim)
        served, delivered, errors, other_errors = {}, {}, [0], [0]
        stop_others = threading.Event()
        failures = []

        other_details = []

        def post(sid, key, other=False):  # a new value each time: every input emits an event
            status, body = http(ports[0], "POST", f"/api/sessions/{sid}/search/query",
                                json.dumps({"value": key}).encode(), [("Idempotency-Key", key)])
            if other and status != 202:
                other_details.append(f"{time.time() - killed:.2f} s: {status} {body[:160]!r}")
            if status == 202:
                seq = json.loads(body)["inputSeq"]
                if seq != last_seq[sid] + 1:
                    failures.append(f"{sid}: inputSeq {seq} after {last_seq[sid]}")
                last_seq[sid] = seq
                return seq
            return None

        def victim_client(sid):
            deadline = time.time() + 60
            value = f"t{trial}-{sid}"
            while time.time() < deadline:
                seq = post(sid, value)
                if seq is not None:
                    served[sid] = time.time()
                    break
                errors[0] += 1
                time.sleep(0.02)
            while sid in served and time.time() < deadline:
                if streams[sid].has(value):
                    delivered[sid] = time.time()
                    break
                time.sleep(0.005)

        def other_client(sid):
            k = 0
            while not stop_others.is_set():
                k += 1
                while post(sid, f"t{trial}-o{k}-{sid}", other=True) is None:
                    other_errors[0] += 1
                    time.sleep(0.02)
                time.sleep(0.05)

        killed = time.time() + 3600  # set at the kill
        oth = [threading.Thread(target=other_client, args=(s,), daemon=True) for s in others]
        for t in oth:
            t.start()
        killed = time.time()
        node.kill()
        vic = [threading.Thread(target=victim_client, args=(s,), daemon=True) for s in on_victim]
        for t in vic:
            t.start()
        switched, now = None, None
        while time.time() - killed < 60:
            now = d.master_of(slots[on_victim[0]]) if d.name == "cluster" else d.master()
            if now is not None and now != victim:
                switched = time.time()
                break
            time.sleep(0.03)
        if switched is None:
            raise SystemExit("Redis did not fail over")
        last_failover = killed
        node.start(["--replicaof", "127.0.0.1", str(now)] if d.name == "sentinel" else [])
        for t in vic:
            t.join(60)
        stop_others.set()
        for t in oth:
            t.join(30)
        if failures:
            raise SystemExit("; ".join(failures))
        missing = [s for s in on_victim if s not in delivered]
        if missing:
            raise SystemExit(f"{d.name} trial {trial}: not served again or not delivered within 60 s: " + ", ".join(
                f"{s} (served {s in served}, last inputSeq {last_seq[s]})" for s in missing))
        row = {"redis": switched - killed, "served": max(served.values()) - killed,
               "delivered": max(delivered.values()) - killed, "sessions": len(on_victim),
               "errors": errors[0], "otherErrors": other_errors[0]}
        rows.append(row)
        log(f"{d.name} trial {trial}: Redis {row['redis']:.2f} s, every session served {row['served']:.2f} s, "
            f"every stream delivered {row['delivered']:.2f} s ({len(on_victim)} sessions, {errors[0]} 503s; "
            f"other shards: {other_errors[0]} errors{': ' + '; '.join(other_details[:4]) if other_details else ''})")
    stop(procs)
    json.dump(rows, open(f"{OUT}/ha-failover-{d.name}.json", "w"))
    q = lambda k: sorted(r[k] for r in rows)
    fmt = lambda v: f"{v[0]:.2f} / {statistics.median(v):.2f} / {v[-1]:.2f}"
    say(f"{d.name:8s} Redis {fmt(q('redis'))} s; every session serves again {fmt(q('served'))} s "
        f"(− Redis: {fmt(sorted(r['served'] - r['redis'] for r in rows))}); every stream delivers again "
        f"{fmt(q('delivered'))} s; other shards' errors: {sum(r['otherErrors'] for r in rows)}")


def main():
    try:
        deployments = [One(), Cluster(), Sentinel()]
        log("deployments up: " + ", ".join(d.url for d in deployments))
        if "latency" not in SKIP:
            latency_part(deployments)
        if "failover" not in SKIP:
            say(f"failover: {TRIALS} trials of kill -9 of a master, {FAILOVER_SESSIONS} sessions on node 1 streamed "
                "on node 2, --redis-replica-acks 1 (min / median / max)")
            for d in deployments[1:]:
                if d.name in os.environ.get("HA_FAILOVER", "cluster sentinel").split():
                    failover_part(d)
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.kill()
        for p in PROCS:
            p.wait()
        subprocess.run(["rm", "-rf", WORK])
        open(f"{OUT}/ha-summary.txt", "w").write("\n".join(SUMMARY) + "\n")


signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
main()
