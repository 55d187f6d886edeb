import EventHTTP
import Foundation
import Glibc
import JSON
import RedisClient
import RedisTestSupport
import WireClient
import XCTest

@testable import BFF

/// "No silent stalls", on the shared real Redis Cluster: a master with fewer connected replicas than
/// `--redis-replica-acks` is named in `/readyz` (still `200`: the other masters serve, and this one too),
/// in the log and in `/metrics`; its commits wait for the replicas it has (none) instead of timing out,
/// or, with `--redis-replica-acks-strict`, its inputs are refused before anything is written. The
/// counters of what the Redis clients saw reach `/metrics`.
final class ClusterReplicaHealthTests: ClusterTestCase {
    override class var deployment: RedisDeployment { .cluster }

    /// A session on the first master, whose replica is killed; `/readyz` waited for until it names it.
    private func sessionWithoutReplica(
        _ a: LiveApp, _ logs: LogCollector, naming expected: String
    ) throws -> (id: String, master: Int, replica: RedisServerProcess) {
        let cluster = try SharedRedis.cluster()
        var id = try a.createSession()
        while try masterPort(of: "{\(id)}") != masterPorts()[0] { id = try a.createSession() }
        let master = try masterPorts()[0]
        let replica = try XCTUnwrap(cluster.replicaPort(of: master).flatMap { cluster.node(port: $0) })
        replica.kill()
        var readyz = ""
        try waitUntil("/readyz names the master without its replica", within: 10) {
            let r = try WireConnection.get(port: a.port, path: "/readyz")
            readyz = String(decoding: r.body, as: UTF8.self)
            XCTAssertEqual(r.status, 200, "one master short of replicas leaves the node ready: \(readyz)")
            return readyz.contains("master 127.0.0.1:\(master) has 0 connected replicas, 1 wanted: \(expected)")
        }
        XCTAssertTrue(readyz.contains(#""status":"degraded""#), readyz)
        XCTAssertTrue(logs.all.contains("has 0 connected replicas, 1 wanted"), "and the log")
        let metrics = String(decoding: try WireConnection.get(port: a.port, path: "/metrics").body, as: UTF8.self)
        XCTAssertTrue(
            metrics.contains(#"bff_redis_master_missing_replicas{master="127.0.0.1:\#(master)"} 1"#), metrics)
        XCTAssertTrue(metrics.contains("\nbff_redis_masters_short_of_replicas 1"), "and /metrics")
        return (id, master, replica)
    }

    func testAMasterWithoutItsReplicaIsNamedAndItsCommitsWaitForTheReplicasItHas() throws {
        let logs = LogCollector()
        let a = try node("a", commandTimeout: 1, logger: logs.logger(level: .warning)) {
            $0.clientOptions.topologyRefreshInterval = 0.5
        }
        let (id, master, replica) = try sessionWithoutReplica(a, logs, naming: "its commits wait for the 0 it has")
        let started = Date()
        let r = try a.post(id, "search", "query", #"{"value":"x"}"#, headers: [("Idempotency-Key", "k")])
        XCTAssertEqual(r.status, 202, "\(r)")
        XCTAssertEqual(inputSeq(r), 1)
        XCTAssertLessThan(Date().timeIntervalSince(started), 0.9, "not held for the replica time-out (1 s)")
        try replica.start()
        try waitUntil("named no more once the replica is back", within: 15) {
            let r = try WireConnection.get(port: a.port, path: "/readyz")
            return r.status == 200 && String(decoding: r.body, as: UTF8.self).contains(#""status":"ready""#)
        }
        let next = try a.post(id, "search", "query", #"{"value":"y"}"#, headers: [("Idempotency-Key", "k2")])
        XCTAssertEqual(inputSeq(next), 2, "acknowledged by its replica again")
        let metrics = String(decoding: try WireConnection.get(port: a.port, path: "/metrics").body, as: UTF8.self)
        XCTAssertTrue(metrics.contains(#"bff_redis_master_missing_replicas{master="127.0.0.1:\#(master)"} 0"#))
        for name in RedisClientMetrics.Counter.allCases.map({ "bff_redis_\($0.rawValue)_total" }) + [
            "bff_redis_problems", "bff_redis_masters_short_of_replicas",
        ] {
            XCTAssertTrue(metrics.contains("\n\(name) "), "\(name) in /metrics")
        }
        XCTAssertFalse(metrics.contains("\nbff_redis_topology_refreshes_total 0\n"), "map refreshes counted")
    }

    func testWithStrictAcksAMasterWithoutItsReplicaRefusesItsInputsAndChangesNothing() throws {
        let logs = LogCollector()
        let a = try node("a", commandTimeout: 1, logger: logs.logger(level: .warning)) {
            $0.clientOptions.topologyRefreshInterval = 0.5
            $0.replicaAcksStrict = true
        }
        let (id, _, replica) = try sessionWithoutReplica(a, logs, naming: "its commits are refused")
        let before = try a.state(id)
        let r = try a.post(id, "search", "query", #"{"value":"x"}"#, headers: [("Idempotency-Key", "k")])
        XCTAssertTrue(r.problem(503).contains("--redis-replica-acks-strict"), r.problem(503))
        XCTAssertTrue(r.problem(503).contains("nothing was applied"), r.problem(503))
        XCTAssertEqual(try a.state(id), before, "nothing changed")
        try replica.start()
        var retried: WireResponse?
        try waitUntil("acknowledged once the replica is back", within: 15) {
            retried = try a.post(id, "search", "query", #"{"value":"x"}"#, headers: [("Idempotency-Key", "k")])
            return retried?.status == 202
        }
        XCTAssertEqual(inputSeq(try XCTUnwrap(retried)), 1, "the refused input used no inputSeq")
    }
}

/// "No silent stalls", with one `redis-server` behind a `FreezingProxy`: a node's subscription connection
/// that stays up but delivers nothing (frozen) is found by its loopback probe, counted
/// (`bff_redis_probe_failures_total`), made again, and the stream it fed catches up and delivers again.
final class ClusterDeafSubscriptionTests: ClusterTestCase {
    func testADeafSubscriptionIsFoundRepairedAndItsStreamDeliversAgain() throws {
        let proxy = try FreezingProxy(targetPort: redis.port)
        defer { proxy.stop() }
        let a = try node("a")
        let b = try node("b", url: "redis://127.0.0.1:\(proxy.port)") { $0.clientOptions.probeInterval = 0.25 }
        let id = try a.createSession()
        let (conn, events) = try b.stream(id)
        defer { conn.close() }
        XCTAssertEqual(try XCTUnwrap(events.next()).event, "snapshot")
        XCTAssertEqual(try a.post(id, "search", "query", #"{"value":"one"}"#).status, 202)
        XCTAssertEqual(try JSONValue.parse(try XCTUnwrap(events.next(until: "search").last).data)["inputSeq"], 1)
        XCTAssertGreaterThan(proxy.freeze { FreezingProxy.contains($0, "SSUBSCRIBE") }, 0)
        XCTAssertEqual(try a.post(id, "search", "query", #"{"value":"two"}"#).status, 202)  // lost on the frozen link
        let second = try XCTUnwrap(events.next(until: "search", timeout: 10).last, "delivered after the repair")
        XCTAssertEqual(try JSONValue.parse(second.data)["inputSeq"], 2)
        let metrics = String(decoding: try WireConnection.get(port: b.port, path: "/metrics").body, as: UTF8.self)
        XCTAssertFalse(metrics.contains("\nbff_redis_probe_failures_total 0\n"), "the deaf connection counted")
        XCTAssertFalse(metrics.contains("\nbff_redis_resubscribes_total 0\n"), "and its channels subscribed again")
    }
}

/// The backstop of "no silent stalls", with one `redis-server`: an event stored in a session's history
/// whose publication never came (with replica acks the runner publishes after the `WAIT`; a runner that
/// dies in between publishes nothing) reaches a stream on another node at its periodic check — its last
/// written id stayed below the session's `seq` over two checks — from the history. With replica acks every
/// pass reads `seq`; without them (one Redis, as here) the passes that renew the session's expiry do (once a
/// minute by default; every pass at this idle time-out), since the commit's script publishes the event.
final class ClusterLostPublicationTests: ClusterTestCase {
    func testAnEventWhosePublicationWasLostReachesTheStreamFromTheHistory() throws {
        let a = try node("a", leaseTTL: 1)
        // A pass over its streamed sessions every second, each renewing their expiry (idle time-out 4 s:
        // renewal interval 0): each checked one by one, `seq` read.
        let b = try node("b", leaseTTL: 1, idleTimeout: 4)
        let id = try a.createSession()
        let (conn, events) = try b.stream(id)
        defer { conn.close() }
        XCTAssertEqual(try XCTUnwrap(events.next()).event, "snapshot")
        XCTAssertEqual(try a.post(id, "search", "query", #"{"value":"one"}"#).status, 202)
        let first = try XCTUnwrap(events.next(until: "search").last)
        let next = try XCTUnwrap(UInt64(XCTUnwrap(first.id))) + 1
        // A commit as the script writes it, without its publication.
        let data = #"{"inputSeq":2,"outputs":{"query":"unpublished"}}"#
        _ = try redisCLI("XADD", "bff:s:{\(id)}:ev", "\(next)-0", "d", "osearch\n" + data)
        _ = try redisCLI("HSET", "bff:s:{\(id)}", "seq", "\(next)")
        let started = Date()
        let caughtUp = try XCTUnwrap(events.next(until: "search", timeout: 10).last, "the stream catches up")
        XCTAssertEqual(caughtUp.id, "\(next)")
        XCTAssertEqual(caughtUp.data, data)
        XCTAssertLessThan(Date().timeIntervalSince(started), 4, "within two or three check intervals")
    }
}
