import EventHTTP
import Foundation
import Glibc
import JSON
import RedisClient
import RedisTestSupport
import WireClient
import XCTest

@testable import BFF

/// "Redis that fails over", on the shared real Sentinel set (master, replica, 3 sentinels,
/// `down-after-milliseconds 1000`) with three in-process nodes (`redis+sentinel://`, one replica ack):
/// the master's `kill -9` under a steady input load, and a stopped replica.
final class ClusterSentinelFailoverTests: ClusterTestCase {
    override class var deployment: RedisDeployment { .sentinel }

    /// `kill -9` of the master under a steady load of keyed inputs, the killed Redis left dead: every `202`
    /// applied exactly once, every session served again within 2 s of the sentinels' switch (the promoted
    /// master has no replica: commits wait for the replicas it has, none), every open stream delivers
    /// again. The next test's set-up starts the killed node again, as the new master's replica.
    func testAKilledMasterUnderLoadLosesNoAcknowledgedInputAndEverySessionServesAgain() throws {
        let set = try SharedRedis.sentinel()
        let nodes = try (0..<3).map { try node("n\($0)", leaseTTL: 2) }
        let sessions = try (0..<6).map { (id: try nodes[$0 % 3].createSession(), node: $0 % 3) }
        let streams = try sessions.flatMap { s in
            [
                try StreamCollector(s.id, port: nodes[s.node].port),
                try StreamCollector(s.id, port: nodes[(s.node + 1) % 3].port),
            ]
        }
        defer { for s in streams { s.stop() } }
        let load = InputLoad(sessions: sessions.map { ($0.id, "127.0.0.1", nodes[$0.node].port) })
        load.start()
        usleep(1_500_000)

        let victim = try XCTUnwrap(set.masterPort)
        let killedAt = MonotonicClock.now()
        try XCTUnwrap(set.node(port: victim)).kill()
        var switchedAt: Double?
        while MonotonicClock.now() - killedAt < 40, switchedAt == nil {
            if let m = set.masterPort, m != victim { switchedAt = MonotonicClock.now() }
            usleep(30_000)
        }
        let redisFailover = try XCTUnwrap(switchedAt, "the sentinels switched the master") - killedAt
        usleep(UInt32((redisFailover + 3) * 1e6))
        load.stop()

        for s in sessions {
            let acked = load.acknowledged(s.id)
            XCTAssertEqual(acked.map(\.inputSeq), Array(1...acked.count), "\(s.id): the k-th 202 has inputSeq k")
            XCTAssertEqual(acked.map(\.k), Array(1...acked.count), "\(s.id): one 202 per input")
            let errors = load.answers(of: s.id).filter { $0.status != 202 }
            XCTAssertTrue(errors.allSatisfy { $0.status == 503 || $0.status == 0 }, "\(errors.map(\.status))")
            let lastError = errors.map(\.at).max() ?? killedAt
            let servedAgain = try XCTUnwrap(load.answers(of: s.id).first { $0.status == 202 && $0.at > lastError })
            XCTAssertLessThanOrEqual(
                servedAgain.at - killedAt, redisFailover + 2,
                "\(s.id): served again \(servedAgain.at - killedAt) s after the kill (Redis switched at "
                    + "\(redisFailover) s)")
        }
        for s in sessions {
            let r = try nodes[s.node].post(s.id, "search", "query", #"{"value":"after"}"#)
            XCTAssertEqual(r.status, 202, "\(r)")
            let n = try XCTUnwrap(inputSeq(r))
            for c in streams where c.id == s.id {
                XCTAssertTrue(c.delivers(inputSeq: n, within: 5), "\(s.id): a stream delivers again")
                XCTAssertEqual(c.ids, c.ids.sorted(), "ids never go backwards")
                XCTAssertEqual(Set(c.ids).count, c.ids.count, "no id twice")
            }
        }
        let last = sessions.map { id in
            (load.answers(of: id.id).filter { $0.status != 202 }.map(\.at).max() ?? killedAt) - killedAt
        }
        print(
            "sentinel kill -9: switched in \(redisFailover) s; last error per session \(last.map { "\($0)" })")
    }

    /// The replica stopped (`SIGSTOP`): `503`, never `202`, on every node; `/readyz` stays honest about
    /// it in the metrics (`bff_redis_replica_ack_timeouts_total`); once it continues, the retry with the
    /// same `Idempotency-Key` is acknowledged with the input's number, applied once.
    func testAStoppedReplicaMeans503AndTheRetryWithTheSameKeyIsAppliedOnce() throws {
        let set = try SharedRedis.sentinel()
        let nodes = try (0..<2).map { try node("n\($0)", commandTimeout: 1) }
        let id = try nodes[0].createSession()
        let master = try XCTUnwrap(set.masterPort)
        let replica = try XCTUnwrap(set.data.first { $0.port != master })
        let query = { (node: Int, value: String, key: String) throws -> WireResponse in
            try nodes[node].post(id, "search", "query", #"{"value":"\#(value)"}"#, headers: [("Idempotency-Key", key)])
        }
        XCTAssertEqual(try query(0, "one", "k1").status, 202)
        replica.signal(SIGSTOP)
        defer { replica.signal(SIGCONT) }
        let refused = try query(0, "two", "k2")
        XCTAssertTrue(refused.problem(503).contains("replicas did not confirm"), refused.problem(503))
        XCTAssertEqual(try query(1, "two", "k2").status, 503, "not acknowledged while the replica is stopped")
        replica.signal(SIGCONT)
        var retried: WireResponse?
        try waitUntil("the retry is acknowledged", within: 10) {
            retried = try query(1, "two", "k2")
            return retried?.status == 202
        }
        XCTAssertEqual(inputSeq(try XCTUnwrap(retried)), 2, "the number the input got, once")
        XCTAssertEqual(inputSeq(try query(0, "three", "k3")), 3, "applied once")
        XCTAssertEqual(try nodes[1].state(id)["viewModels"]?["search"]?["query"], "three")
    }
}
