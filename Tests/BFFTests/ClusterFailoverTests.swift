import EventHTTP
import Foundation
import Glibc
import JSON
import RedisClient
import RedisTestSupport
import WireClient
import XCTest

@testable import BFF

/// "Redis that fails over and shards", on the shared real Redis Cluster (3 masters, 3 replicas,
/// `cluster-node-timeout 1000`) with three in-process nodes (`Application`s on 127.0.0.1:0,
/// `redis+cluster://`, one replica ack): a master's `kill -9` under a steady input load, a paused
/// replica, a slot moved by `redis-cli --cluster reshard` while streams are open.
final class ClusterFailoverTests: ClusterTestCase {
    override class var deployment: RedisDeployment { .cluster }

    /// Sessions created round robin on `nodes` until every master serves at least `perMaster` of them:
    /// (id, the node that created and runs it, the port of its master).
    func sessionsOnEveryShard(_ nodes: [LiveApp], perMaster: Int) throws -> [(id: String, node: Int, master: Int)] {
        let masters = try masterPorts()
        var out: [(id: String, node: Int, master: Int)] = []
        var i = 0
        while masters.contains(where: { m in out.filter { $0.master == m }.count < perMaster }) {
            let id = try nodes[i % nodes.count].createSession()
            let master = try masterPort(of: "{\(id)}")
            if out.filter({ $0.master == master }).count < perMaster { out.append((id, i % nodes.count, master)) }
            i += 1
            XCTAssertLessThan(i, 500)
        }
        return out
    }

    /// `kill -9` of a master under a steady load of keyed inputs on sessions of every shard (each client
    /// posts to the node that runs its session, as sticky routing does): every `202` is applied exactly
    /// once (the k-th acknowledged input of a session has `inputSeq` k), sessions on the other shards see
    /// no `503`, the failed shard serves again within Redis's own failover time + 2 s, and every open
    /// stream (on the owner, and on another node) delivers again. The killed Redis stays dead: with one
    /// replica ack and one replica per master, the promoted master has none, and its commits wait for the
    /// replicas it has (docs/CLUSTER.md). The next test's set-up starts it again, as a replica.
    func testAKilledMasterUnderLoadLosesNoAcknowledgedInputAndItsShardServesAgain() throws {
        let cluster = try SharedRedis.cluster()
        let nodes = try (0..<3).map { try node("n\($0)", leaseTTL: 2) }
        let sessions = try sessionsOnEveryShard(nodes, perMaster: 2)
        let victim = sessions[0].master
        let onVictim = Set(sessions.filter { $0.master == victim }.map(\.id))
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

        let victimSlot = RedisSlot.of(sessions[0].id)
        let killedAt = MonotonicClock.now()
        try XCTUnwrap(cluster.node(port: victim)).kill()
        var failedOverAt: Double?
        while MonotonicClock.now() - killedAt < 20 {
            if let m = cluster.masterPort(ofSlot: victimSlot), m != victim {
                failedOverAt = MonotonicClock.now()
                break
            }
            usleep(30_000)
        }
        let redisFailover = try XCTUnwrap(failedOverAt, "Redis failed the master over") - killedAt
        usleep(UInt32((redisFailover + 3) * 1e6))
        load.stop()

        for s in sessions {
            let acked = load.acknowledged(s.id)
            XCTAssertEqual(acked.map(\.inputSeq), Array(1...acked.count), "\(s.id): the k-th 202 has inputSeq k")
            XCTAssertEqual(acked.map(\.k), Array(1...acked.count), "\(s.id): one 202 per input")
            let errors = load.answers(of: s.id).filter { $0.status != 202 }
            if onVictim.contains(s.id) {
                // Served again: the first 202 after its last error, measured from the kill.
                let lastError = errors.map(\.at).max() ?? killedAt
                let servedAgain = try XCTUnwrap(load.answers(of: s.id).first { $0.status == 202 && $0.at > lastError })
                XCTAssertLessThanOrEqual(
                    servedAgain.at - killedAt, redisFailover + 2,
                    "\(s.id): served again \(servedAgain.at - killedAt) s after the kill (Redis: \(redisFailover) s)")
                XCTAssertTrue(errors.allSatisfy { $0.status == 503 || $0.status == 0 }, "\(errors.map(\.status))")
            } else {
                XCTAssertEqual(
                    errors.map(\.status), [],
                    "\(s.id) on another shard is not disturbed: "
                        + errors.map { "\($0.at - killedAt) s: \($0.detail ?? "")" }.joined(separator: "; "))
            }
        }
        // Every stream delivers again: the next input of each session reaches both of its streams, and
        // each stream's ids only grow.
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
        print(
            "kill -9 of master \(victim): Redis failed over in \(redisFailover) s; sessions on it: "
                + onVictim.map { id in
                    let e = load.answers(of: id).filter { $0.status != 202 }
                    return "\(e.count) errors, last \(((e.map(\.at).max() ?? killedAt) - killedAt)) s after the kill"
                }.joined(separator: "; "))

    }

    /// Inputs forwarded (posted to a node that does not run their sessions) to sessions on the other shards
    /// are answered as usual while a master is replaced: the answer comes back on a reply channel of the
    /// session's own shard, not on one channel per loop that may sit on the failed shard (with one, each
    /// such input waited 2 s for its answer and got `503`: found by the failover benchmark).
    func testForwardedInputsToOtherShardsAreAnsweredWhileAMasterIsReplaced() throws {
        let cluster = try SharedRedis.cluster()
        let owner = try node("owner")
        let sender = try node("sender", threads: 1)  // one loop: every forwarded input uses its channels
        let backend = try XCTUnwrap(sender.app.backend as? ClusterNode)
        // The master of the sender's first reply channel (`<prefix>:reply:{<holder>}`) is the one killed.
        let victim = try masterPort(of: backend.keys.replies(backend.holders[0]))
        var sessions: [String] = []
        while sessions.count < 4 {
            let id = try owner.createSession()
            if try masterPort(of: "{\(id)}") != victim { sessions.append(id) }
        }
        let load = InputLoad(sessions: sessions.map { ($0, "127.0.0.1", sender.port) })
        load.start()
        usleep(800_000)
        let killedAt = MonotonicClock.now()
        try XCTUnwrap(cluster.node(port: victim)).kill()
        while MonotonicClock.now() - killedAt < 20, cluster.masterPorts.contains(victim) { usleep(30_000) }
        try XCTUnwrap(cluster.node(port: victim)).start()
        usleep(1_000_000)
        load.stop()
        for id in sessions {
            let acked = load.acknowledged(id)
            XCTAssertGreaterThan(acked.count, 10)
            XCTAssertEqual(acked.map(\.inputSeq), Array(1...acked.count), "\(id): every input once")
            let errors = load.answers(of: id).filter { $0.status != 202 }
            XCTAssertEqual(
                errors.map(\.status), [],
                "\(id): forwarded while another shard fails over: "
                    + errors.map { "\($0.at - killedAt) s: \($0.detail ?? "")" }.joined(separator: "; "))
        }
    }

    /// A replica stopped (`SIGSTOP`): an input whose master cannot get its commit confirmed within the
    /// command time-out is answered `503` (never `202`); its retry with the same `Idempotency-Key` is
    /// `503` too while the replica is stopped, and once it continues, `202` with the number the input
    /// got, applied once (the next input gets the next number). A session on another shard is not
    /// disturbed meanwhile.
    func testAStoppedReplicaMeans503AndTheRetryWithTheSameKeyIsAppliedOnce() throws {
        let cluster = try SharedRedis.cluster()
        let nodes = try (0..<2).map { try node("n\($0)", commandTimeout: 1) }
        let sessions = try sessionsOnEveryShard(nodes, perMaster: 1)
        let (target, other) = (sessions[0], sessions[1])
        let replica = try XCTUnwrap(cluster.replicaPort(of: target.master).flatMap { cluster.node(port: $0) })
        let query = { (id: String, node: Int, value: String, key: String) throws -> WireResponse in
            try nodes[node].post(id, "search", "query", #"{"value":"\#(value)"}"#, headers: [("Idempotency-Key", key)])
        }
        XCTAssertEqual(try query(target.id, target.node, "one", "k1").status, 202)
        replica.signal(SIGSTOP)
        defer { replica.signal(SIGCONT) }
        let started = Date()
        let refused = try query(target.id, target.node, "two", "k2")
        XCTAssertTrue(refused.problem(503).contains("replicas did not confirm"), refused.problem(503))
        XCTAssertNotNil(refused.header("Retry-After"))
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.9, "it waited for the replica (1 s)")
        let again = try query(target.id, (target.node + 1) % 2, "two", "k2")
        XCTAssertEqual(again.status, 503, "not acknowledged while the replica is stopped, on any node")
        XCTAssertEqual(try query(other.id, other.node, "x", "o1").status, 202, "another shard is not disturbed")
        let timeouts = sample(try metrics(nodes[target.node]), "bff_redis_replica_ack_timeouts_total")
        XCTAssertGreaterThanOrEqual(timeouts, 1)
        replica.signal(SIGCONT)
        var retried: WireResponse?
        try waitUntil("the retry is acknowledged", within: 10) {
            retried = try query(target.id, target.node, "two", "k2")
            return retried?.status == 202
        }
        XCTAssertEqual(inputSeq(try XCTUnwrap(retried)), 2, "the number the input got, once")
        XCTAssertEqual(inputSeq(try query(target.id, target.node, "three", "k3")), 3, "applied once")
        XCTAssertEqual(try nodes[1].state(target.id)["viewModels"]?["search"]?["query"], "three")
    }

    /// The slot of a session with open streams (one on its owner, one on another node) is moved to another
    /// master by `redis-cli --cluster reshard` while inputs keep coming: every input is acknowledged once
    /// (retried on `503`), both streams deliver every acknowledged input's event in order, the session's
    /// keys and its channel's subscription are at the new master afterwards.
    func testASlotMovedByReshardWhileStreamsAreOpen() throws {
        _ = try SharedRedis.cluster()  // up and shared before the nodes start
        let nodes = try (0..<2).map { try node("n\($0)", commandTimeout: 1) }
        // A session near the start of its master's first slot range: `reshard` moves a master's lowest slots.
        var chosen: (id: String, master: Int, slots: Int)?
        for _ in 0..<400 where chosen == nil {
            let id = try nodes[0].createSession()
            let slot = RedisSlot.of(id)
            let master = try masterPort(of: "{\(id)}")
            let first = try firstSlot(of: master)
            if slot >= first, slot - first < 150 { chosen = (id, master, slot - first + 1) }
        }
        let (id, source, count) = try XCTUnwrap(chosen, "a session in the first 150 slots of a master")
        let destination = try XCTUnwrap(try masterPorts().first { $0 != source })
        let streams = [try StreamCollector(id, port: nodes[0].port), try StreamCollector(id, port: nodes[1].port)]
        defer { for s in streams { s.stop() } }
        let load = InputLoad(sessions: [(id, "127.0.0.1", nodes[0].port)], interval: 0.02)
        load.start()
        usleep(300_000)
        let reshard = try reshardSlots(count, from: source, to: destination)
        usleep(500_000)
        load.stop()
        XCTAssertEqual(reshard, 0, "redis-cli --cluster reshard succeeded")
        XCTAssertEqual(try masterPort(of: "{\(id)}"), destination, "the slot moved")
        let acked = load.acknowledged(id)
        XCTAssertGreaterThan(acked.count, 5)
        XCTAssertEqual(acked.map(\.inputSeq), Array(1...acked.count), "every input once, in order")
        for s in streams {
            XCTAssertTrue(s.delivers(inputSeq: acked.count, within: 5), "the stream delivers after the move")
            XCTAssertEqual(s.inputSeqs, Array(1...acked.count), "every event once, in order")
        }
        XCTAssertEqual(try runCLI(port: destination, ["EXISTS", "bff:s:{\(id)}"]), "1\n", "the keys moved")
        // The other node's subscription moved with the slot (the owner's stream is fed by its commits, unless
        // a commit refused during the move made the session leave it: then it subscribes too).
        let channel = "bff:s:{\(id)}:ch"
        let subscribers = { (port: Int) throws -> Int in
            Int(try self.runCLI(port: port, ["PUBSUB", "SHARDNUMSUB", channel]).split(separator: "\n").last ?? "") ?? -1
        }
        XCTAssertTrue((1...2).contains(try subscribers(destination)), "subscribed at the new master")
        XCTAssertEqual(try subscribers(source), 0, "and no longer at the old one")
        // Balanced again for the suites that follow.
        XCTAssertEqual(try reshardSlots(count, from: destination, to: source), 0)
    }

    /// The lowest slot `port` serves.
    func firstSlot(of port: Int) throws -> Int {
        let v = try SharedRedis.cluster().view().first { $0.port == port }
        let first = v?.slots.split(separator: " ").first?.split(separator: "-").first
        return try XCTUnwrap(first.flatMap { Int($0) })
    }

    /// `redis-cli --cluster reshard`: `count` slots from the master on `from` to the one on `to` (the
    /// lowest slots of `from`, as `redis-cli` picks them); its exit status.
    func reshardSlots(_ count: Int, from: Int, to: Int) throws -> Int32 {
        let cluster = try SharedRedis.cluster()
        return try Spawn.run(
            "/usr/bin/redis-cli",
            [
                "--cluster", "reshard", "127.0.0.1:\(from)", "--cluster-from",
                try XCTUnwrap(cluster.nodeID(port: from)), "--cluster-to", try XCTUnwrap(cluster.nodeID(port: to)),
                "--cluster-slots", "\(count)", "--cluster-yes",
            ]
        ).status
    }

    func sample(_ text: String, _ name: String) -> Double {
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.dropFirst(name.count + 1)) ?? -1
        }
        return 0
    }
}
