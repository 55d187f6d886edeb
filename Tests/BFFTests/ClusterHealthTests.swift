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
/// `--redis-replica-acks` is named in `/readyz`'s `503` and in the log, and its inputs are answered `503`
/// (never silently accepted, never silently refused); the counters of what the Redis clients saw reach
/// `/metrics`.
final class ClusterReplicaHealthTests: ClusterTestCase {
    override class var deployment: RedisDeployment { .cluster }

    func testAMasterWithoutItsReplicaIsNamedInReadyzAndItsInputsAre503() throws {
        let cluster = try SharedRedis.cluster()
        let logs = LogCollector()
        let a = try node("a", commandTimeout: 1, logger: logs.logger(level: .warning)) {
            $0.clientOptions.topologyRefreshInterval = 0.5
        }
        var id = try a.createSession()
        while try masterPort(of: "{\(id)}") != masterPorts()[0] { id = try a.createSession() }
        let master = try masterPorts()[0]
        let replica = try XCTUnwrap(cluster.replicaPort(of: master).flatMap { cluster.node(port: $0) })
        replica.kill()
        var readyz = ""
        try waitUntil("/readyz names the master without its replica", within: 10) {
            let r = try WireConnection.get(port: a.port, path: "/readyz")
            readyz = String(decoding: r.body, as: UTF8.self)
            return r.status == 503 && readyz.contains("master 127.0.0.1:\(master) has 0 connected replicas, 1 wanted")
        }
        XCTAssertTrue(logs.all.contains("has 0 connected replicas, 1 wanted"), "and the log")
        let r = try a.post(id, "search", "query", #"{"value":"x"}"#, headers: [("Idempotency-Key", "k")])
        XCTAssertTrue(r.problem(503).contains("replicas did not confirm"), r.problem(503) + logs.all)
        try replica.start()
        try waitUntil("ready again once the replica is back", within: 15) {
            (try? WireConnection.get(port: a.port, path: "/readyz").status) == 200
        }
        let retried = try a.post(id, "search", "query", #"{"value":"x"}"#, headers: [("Idempotency-Key", "k")])
        XCTAssertEqual(retried.status, 202)
        XCTAssertEqual(inputSeq(retried), 1, "the refused input, applied once")
        let metrics = String(decoding: try WireConnection.get(port: a.port, path: "/metrics").body, as: UTF8.self)
        for name in RedisClientMetrics.Counter.allCases.map({ "bff_redis_\($0.rawValue)_total" }) + [
            "bff_redis_problems"
        ] {
            XCTAssertTrue(metrics.contains("\n\(name) "), "\(name) in /metrics")
        }
        XCTAssertFalse(metrics.contains("\nbff_redis_replica_ack_timeouts_total 0\n"), "the refusal counted")
        XCTAssertFalse(metrics.contains("\nbff_redis_topology_refreshes_total 0\n"), "map refreshes counted")
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
