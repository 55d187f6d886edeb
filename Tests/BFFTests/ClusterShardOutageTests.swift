import Foundation
import Glibc
import JSON
import RedisClient
import RedisTestSupport
import WireClient
import XCTest

/// "One shard's trouble is that shard's", as a browser and a load balancer see it: three real `bff` nodes
/// (`--redis-url redis+cluster://…` on the shared Redis Cluster, one replica per master, one replica ack by
/// default) behind a real `haproxy` running the shipped `deploy/haproxy.cfg`, every request through
/// HAProxy as a browser's, `/readyz` read straight from each node as HAProxy's check does. A master is
/// killed (`kill -9`) under a load of keyed inputs on sessions of every shard and is *not* started again:
/// Redis promotes its replica, which has no replica of its own.
///
/// - By default the promoted master's commits wait for the replicas it has (none): its shard acknowledges
///   again within Redis's failover time + 2 s; the other shards' sessions, the static page and the
///   stateless search never see a `503`; every node's `/readyz` stays `200`, naming the master short of
///   replicas while it lasts.
/// - With `--redis-replica-acks-strict` that shard's inputs are refused (`503`, precise detail) while the
///   rest works as above, until the killed Redis is back as a replica.
class ClusterShardOutageTests: ClusterTestCase {
    override class var deployment: RedisDeployment { .cluster }

    private static let haproxy = "/usr/sbin/haproxy"
    private var bff: String { ChildProcess.buildFolder + "/bff" }
    private var config: String { ChildProcess.packageRoot + "/deploy/haproxy.cfg" }

    /// The nodes (child processes), their ports, and HAProxy's port.
    struct Deployed {
        var nodes: [ChildProcess]
        var ports: [Int]
        var proxy: ChildProcess
        var port: Int
        var sim: SearchEndToEndTests.Simulator
    }

    /// Three nodes on this class's deployment and HAProxy in front, all serving; `extra` flags for every node.
    func deploy(_ extra: [String] = []) throws -> Deployed {
        guard FileManager.default.isExecutableFile(atPath: Self.haproxy) else {
            throw XCTSkip("haproxy is not installed (\(Self.haproxy)); apt-get install haproxy")
        }
        let sim = try SearchEndToEndTests.Simulator(token: nil)
        let ports = (0..<3).map { _ in ChildProcess.freePort() }
        var nodes: [ChildProcess] = []
        for (i, port) in ports.enumerated() {
            let p = try ChildProcess(
                bff,
                [
                    "--port", "\(port)", "--threads", "2", "--cache-file", "none", "--redis-url", redisURL,
                    "--node-id", "node\(i + 1)", "--lease-ttl", "2", "--client-session-rate", "1000",
                    "--client-session-burst", "1000",
                ] + extra,
                environment: ["GITHUB_API_URL": sim.url, "LOG_LEVEL": "warning"])
            XCTAssertNotNil(p.waitForLine(containing: "bff listening"), "node\(i + 1): \(p.stderrText)")
            nodes.append(p)
        }
        for port in ports {
            try waitUntil("node on \(port) ready", within: 15) {
                (try? WireConnection.get(port: port, path: "/readyz").status) == 200
            }
        }
        let hp = ChildProcess.freePort()
        let proxy = try ChildProcess(
            Self.haproxy, ["-f", config],
            environment: [
                "BFF_NODE1": "127.0.0.1:\(ports[0])", "BFF_NODE2": "127.0.0.1:\(ports[1])",
                "BFF_NODE3": "127.0.0.1:\(ports[2])", "HAPROXY_BIND": "127.0.0.1:\(hp)",
                "HAPROXY_STATS_BIND": "127.0.0.1:\(ChildProcess.freePort())",
            ])
        try waitUntil("HAProxy serving", within: 10) {
            XCTAssertFalse(proxy.hasExited, proxy.stderrText)
            return (try? WireConnection.get(port: hp, path: "/readyz").status) == 200
        }
        return Deployed(nodes: nodes, ports: ports, proxy: proxy, port: hp, sim: sim)
    }

    /// Sessions created through HAProxy until every master serves `perMaster` of them: (id, master port).
    func sessionsOnEveryShard(through port: Int, perMaster: Int) throws -> [(id: String, master: Int)] {
        let masters = try masterPorts()
        var out: [(id: String, master: Int)] = []
        var tries = 0
        while masters.contains(where: { m in out.filter { $0.master == m }.count < perMaster }) {
            let r = try WireConnection.post(port: port, path: "/api/sessions", body: [])
            XCTAssertEqual(r.status, 201, "\(r)")
            let id = try XCTUnwrap(JSONValue.parse(r.body)["id"]?.stringValue)
            let master = try masterPort(of: "{\(id)}")
            if out.filter({ $0.master == master }).count < perMaster { out.append((id, master)) }
            tries += 1
            XCTAssertLessThan(tries, 500)
        }
        return out
    }

    /// Kills the master serving `slot`'s sessions and waits for Redis to promote its replica: the kill's
    /// time and how long Redis took (`MonotonicClock` seconds).
    func killMaster(_ port: Int, servingSlot slot: Int) throws -> (at: Double, failover: Double) {
        let cluster = try SharedRedis.cluster()
        let killedAt = MonotonicClock.now()
        try XCTUnwrap(cluster.node(port: port)).kill()
        while MonotonicClock.now() - killedAt < 20 {
            if let m = cluster.masterPort(ofSlot: slot), m != port {
                return (killedAt, MonotonicClock.now() - killedAt)
            }
            usleep(30_000)
        }
        throw DeploymentError("Redis did not fail master \(port) over")
    }

    func testAKilledMasterIsItsShardsTroubleOnlyAndItAcknowledgesAgainWithoutItsReplica() throws {
        let d = try deploy()
        defer { stop(d) }
        let sessions = try sessionsOnEveryShard(through: d.port, perMaster: 2)
        let victim = sessions[0].master
        let onVictim = Set(sessions.filter { $0.master == victim }.map(\.id))
        let load = InputLoad(sessions: sessions.map { ($0.id, "127.0.0.1", d.port) })
        let page = Poller(port: d.port, path: "/")
        let search = Poller(port: d.port, path: "/api/search/repositories?q=language:swift&per_page=5")
        let ready = d.ports.map { Poller(port: $0, path: "/readyz") }
        let pollers = [page, search] + ready
        load.start()
        for p in pollers { p.start() }
        usleep(1_000_000)

        let (killedAt, failover) = try killMaster(victim, servingSlot: RedisSlot.of(sessions[0].id))
        usleep(UInt32((failover + 3) * 1e6))
        load.stop()
        for p in pollers { p.stop() }

        for s in sessions {
            let acked = load.acknowledged(s.id)
            XCTAssertEqual(acked.map(\.inputSeq), Array(1...acked.count), "\(s.id): the k-th 202 has inputSeq k")
            let errors = load.answers(of: s.id).filter { $0.status != 202 }
            if onVictim.contains(s.id) {
                let lastError = errors.map(\.at).max() ?? killedAt
                let servedAgain = try XCTUnwrap(
                    load.answers(of: s.id).first { $0.status == 202 && $0.at > lastError },
                    "\(s.id) on the failed shard is served again")
                XCTAssertLessThanOrEqual(
                    servedAgain.at - killedAt, failover + 2,
                    "\(s.id): served again \(servedAgain.at - killedAt) s after the kill (Redis: \(failover) s)")
                XCTAssertTrue(errors.allSatisfy { [0, 503].contains($0.status) }, "\(errors.map(\.status))")
            } else {
                XCTAssertEqual(
                    errors.map(\.status), [],
                    "\(s.id) on another shard is not disturbed: "
                        + errors.map { "\($0.at - killedAt) s: \($0.detail ?? "")" }.joined(separator: "; "))
            }
        }
        XCTAssertEqual(page.statuses.filter { $0 != 200 }, [], "the page through HAProxy")
        XCTAssertEqual(search.statuses.filter { $0 != 200 }, [], "the stateless search through HAProxy")
        for (i, r) in ready.enumerated() {
            XCTAssertEqual(r.statuses.filter { $0 != 200 }, [], "node\(i + 1)'s /readyz")
        }
        // The promoted master has no replica: named by every node's /readyz and /metrics while it lasts.
        let promoted = try XCTUnwrap(SharedRedis.cluster().masterPort(ofSlot: RedisSlot.of(sessions[0].id)))
        for port in d.ports {
            let r = try WireConnection.get(port: port, path: "/readyz")
            XCTAssertEqual(r.status, 200)
            let body = String(decoding: r.body, as: UTF8.self)
            XCTAssertTrue(body.contains(#""status":"degraded""#), body)
            XCTAssertTrue(body.contains("127.0.0.1:\(promoted) has 0 connected replicas"), body)
            let metrics = String(decoding: try WireConnection.get(port: port, path: "/metrics").body, as: UTF8.self)
            XCTAssertTrue(
                metrics.contains(#"bff_redis_master_missing_replicas{master="127.0.0.1:\#(promoted)"} 1"#), metrics)
        }
        // New sessions go to the shards that acknowledge as usual, and every one is served.
        for _ in 0..<10 {
            let r = try WireConnection.post(port: d.port, path: "/api/sessions", body: [])
            XCTAssertEqual(r.status, 201, "\(r)")
        }
        print(
            "shard outage: Redis failed over in \(failover) s; the failed shard's sessions: "
                + onVictim.map { id in
                    let e = load.answers(of: id).filter { $0.status != 202 }
                    return "\(e.count) errors, last \(((e.map(\.at).max() ?? killedAt) - killedAt)) s after the kill"
                }.joined(separator: "; "))
    }

    func testWithStrictAcksTheShardShortOfReplicasRefusesAndTheRestWorks() throws {
        let d = try deploy(["--redis-replica-acks-strict"])
        defer { stop(d) }
        let sessions = try sessionsOnEveryShard(through: d.port, perMaster: 1)
        let victim = sessions[0].master
        let (_, _) = try killMaster(victim, servingSlot: RedisSlot.of(sessions[0].id))
        // Once the nodes follow the promotion, the short shard refuses with a precise answer, the rest works.
        var refused: WireResponse?
        try waitUntil("the short shard refuses", within: 10) {
            let c = try WireConnection(port: d.port)
            defer { c.close() }
            refused = try c.request(
                "POST", "/api/sessions/\(sessions[0].id)/search/query",
                headers: [("Content-Type", "application/json")], body: Array(#"{"value":"strict"}"#.utf8))
            return refused?.status == 503
                && String(decoding: refused?.body ?? [], as: UTF8.self).contains("--redis-replica-acks-strict")
        }
        XCTAssertNotNil(refused?.header("Retry-After"))
        for s in sessions.dropFirst() where s.master != victim {
            let c = try WireConnection(port: d.port)
            defer { c.close() }
            let r = try c.request(
                "POST", "/api/sessions/\(s.id)/search/query", headers: [("Content-Type", "application/json")],
                body: Array(#"{"value":"other"}"#.utf8))
            XCTAssertEqual(r.status, 202, "another shard: \(r)")
        }
        XCTAssertEqual(try WireConnection.get(port: d.port, path: "/").status, 200, "the page")
        for port in d.ports {
            var body = ""
            try waitUntil("node on \(port) names the refusing master", within: 5) {
                let r = try WireConnection.get(port: port, path: "/readyz")
                XCTAssertEqual(r.status, 200, "ready: other shards serve")
                body = String(decoding: r.body, as: UTF8.self)
                return body.contains("127.0.0.1:") && body.contains("its commits are refused")
            }
        }
        // The killed Redis back as the promoted master's replica: the shard acknowledges again.
        try SharedRedis.restore(.cluster)
        try waitUntil("the shard acknowledges again", within: 15) {
            let c = try WireConnection(port: d.port)
            defer { c.close() }
            return try c.request(
                "POST", "/api/sessions/\(sessions[0].id)/search/query",
                headers: [("Content-Type", "application/json")], body: Array(#"{"value":"back"}"#.utf8)
            ).status == 202
        }
    }

    func stop(_ d: Deployed) {
        d.proxy.send(SIGKILL)
        for n in d.nodes where !n.hasExited { n.send(SIGTERM) }
        for n in d.nodes { _ = n.waitForExit(timeout: 10) }
    }
}

/// The same on the shared Sentinel set (one master, one replica): a single shard, so the node can serve no
/// session while the sentinels replace the master (`/readyz` `503` then), but the page, served whatever
/// Redis does, never sees a `503` through HAProxy, and the promoted master (no replica) acknowledges within
/// the failover time + 2 s.
final class ClusterShardOutageOnSentinelTests: ClusterShardOutageTests {
    override class var deployment: RedisDeployment { .sentinel }

    override func testAKilledMasterIsItsShardsTroubleOnlyAndItAcknowledgesAgainWithoutItsReplica() throws {
        let d = try deploy()
        defer { stop(d) }
        let set = try SharedRedis.sentinel()
        let sessions = try (0..<4).map { _ in
            try XCTUnwrap(
                JSONValue.parse(WireConnection.post(port: d.port, path: "/api/sessions", body: []).body)["id"]?
                    .stringValue)
        }
        let load = InputLoad(sessions: sessions.map { ($0, "127.0.0.1", d.port) })
        let page = Poller(port: d.port, path: "/")
        load.start()
        page.start()
        usleep(1_000_000)
        let victim = try XCTUnwrap(set.masterPort)
        let killedAt = MonotonicClock.now()
        try XCTUnwrap(set.node(port: victim)).kill()
        var failover: Double?
        while MonotonicClock.now() - killedAt < 30 {
            if let m = set.masterPort, m != victim {
                failover = MonotonicClock.now() - killedAt
                break
            }
            usleep(30_000)
        }
        let switched = try XCTUnwrap(failover, "the sentinels promoted the replica")
        usleep(UInt32((switched + 3) * 1e6))
        load.stop()
        page.stop()
        for id in sessions {
            let acked = load.acknowledged(id)
            XCTAssertEqual(acked.map(\.inputSeq), Array(1...acked.count), "\(id): the k-th 202 has inputSeq k")
            let errors = load.answers(of: id).filter { $0.status != 202 }
            let lastError = errors.map(\.at).max() ?? killedAt
            let servedAgain = try XCTUnwrap(load.answers(of: id).first { $0.status == 202 && $0.at > lastError })
            XCTAssertLessThanOrEqual(
                servedAgain.at - killedAt, switched + 2,
                "\(id): served again \(servedAgain.at - killedAt) s after the kill (sentinels: \(switched) s)")
        }
        XCTAssertEqual(page.statuses.filter { $0 != 200 }, [], "the page through HAProxy")
        for port in d.ports {
            let r = try WireConnection.get(port: port, path: "/readyz")
            XCTAssertEqual(r.status, 200, String(decoding: r.body, as: UTF8.self))
        }
    }

    /// One shard, refused while short of replicas: the node can serve no session, so `/readyz` is `503`
    /// (naming why) until the killed Redis is back as a replica; the page is served all along.
    override func testWithStrictAcksTheShardShortOfReplicasRefusesAndTheRestWorks() throws {
        let d = try deploy(["--redis-replica-acks-strict"])
        defer { stop(d) }
        let set = try SharedRedis.sentinel()
        let victim = try XCTUnwrap(set.masterPort)
        try XCTUnwrap(set.node(port: victim)).kill()
        for port in d.ports {
            try waitUntil("node on \(port) can serve no session", within: 15) {
                let r = try WireConnection.get(port: port, path: "/readyz")
                return r.status == 503 && String(decoding: r.body, as: UTF8.self).contains("its commits are refused")
            }
        }
        XCTAssertEqual(try WireConnection.get(port: d.port, path: "/").status, 200, "the page")
        try SharedRedis.restore(.sentinel)
        for port in d.ports {
            try waitUntil("node on \(port) ready again", within: 15) {
                try WireConnection.get(port: port, path: "/readyz").status == 200
            }
        }
        try waitUntil("HAProxy sends sessions to the nodes again", within: 10) {
            try WireConnection.post(port: d.port, path: "/api/sessions", body: []).status == 201
        }
    }
}

/// GETs `path` at `port` again and again on a thread of its own until stopped, keeping each answer's
/// status (0: no answer).
final class Poller: Sendable {
    let port: Int
    let path: String
    private let answers = Lock<[Int]>([])
    private let stopping = Lock(false)
    private let done = DispatchGroup()

    init(port: Int, path: String) {
        self.port = port
        self.path = path
    }

    func start() {
        done.enter()
        Thread.detachNewThread { [self] in
            while !stopping.withLock({ $0 }) {
                let status = (try? WireConnection.get(port: port, path: path).status) ?? 0
                answers.withLock { $0.append(status) }
                usleep(50_000)
            }
            done.leave()
        }
    }

    func stop() {
        stopping.withLock { $0 = true }
        _ = done.wait(timeout: .now() + 10)
    }

    var statuses: [Int] { answers.withLock { $0 } }
}
