import EventLoop
import Foundation
import RedisTestSupport
import XCTest

@testable import RedisClient

extension RedisClusterTests {
    /// `kill -9` of a master: while Redis replaces it, commands for its slots fail fast as unavailable
    /// (none waits longer than its time-out), the other shards are not disturbed, and within Redis's own
    /// failover time + 2 s the client serves those slots again and a sharded subscription of the shard
    /// is subscribed again on the promoted replica (a message published then arrives). The times are
    /// printed; `REDIS_FAILOVER_TRIALS=20` repeats the trial (the killed node rejoins as a replica).
    func testAMasterKilledIsReplacedAndServedAgain() async throws {
        let trials = Int(ProcessInfo.processInfo.environment["REDIS_FAILOVER_TRIALS"] ?? "") ?? 1
        var redisTimes: [Double] = []
        var clientTimes: [Double] = []
        for trial in 0..<trials {
            let (redis, client) = try await failoverTrial(victimIndex: trial % 3)
            redisTimes.append(redis)
            clientTimes.append(client)
            XCTAssertTrue(cluster.waitUntilHealthy(timeout: 30), "the killed master rejoined as a replica")
        }
        func summary(_ t: [Double]) -> String {
            let s = t.sorted()
            return String(
                format: "min %.2f median %.2f max %.2f s", s.first ?? 0, s[s.count / 2], s.last ?? 0)
        }
        print(
            "cluster failover (\(trials) trials, kill -9 of a master, cluster-node-timeout 1000): "
                + "Redis promoted a replica after \(summary(redisTimes)); the client served the slot again after "
                + "\(summary(clientTimes)); client minus Redis: "
                + summary(zip(clientTimes, redisTimes).map { $0 - $1 }))
    }

    /// One kill; returns (Redis's failover time, the client's time to serve again), from the kill.
    private func failoverTrial(victimIndex: Int) async throws -> (Double, Double) {
        let c = await readyClient(commandTimeout: 1)
        let s = RedisShardedSubscriber(client: c)
        let masters = TopologyTesting.masterPorts(cluster)
        let victimPort = masters[victimIndex]
        let victim = try XCTUnwrap(cluster.node(port: victimPort))
        let key = TopologyTesting.key("fo", servedBy: victimPort, in: cluster)
        let other = TopologyTesting.key("calm", servedBy: masters[(victimIndex + 1) % 3], in: cluster)
        let channel = TopologyTesting.key("ch", servedBy: victimPort, in: cluster)
        let quiet = TopologyTesting.key("qch", servedBy: masters[(victimIndex + 1) % 3], in: cluster)
        let inbox = Inbox()
        await c.onLoop {
            s.start()
            for ch in [channel, quiet] {
                s.ssubscribe(channel: ch, onSubscribed: { inbox.confirmed(ch) }) { inbox.add($0) }
            }
        }
        let subscribed = await TopologyTesting.eventually { inbox.confirmations(of: channel) == 1 }
        XCTAssertTrue(subscribed)

        let killedAt = Date()
        victim.kill()
        var redisDone: Double?
        var served: Double?
        var failures: [RedisError] = []
        var longest = 0.0
        var otherFailures: [RedisError] = []
        while Date().timeIntervalSince(killedAt) < 20 {
            let t0 = Date()
            let r = await c.send(["SET", RedisArg(key), "x"], key: RedisArg(key))
            longest = max(longest, Date().timeIntervalSince(t0))
            if case .failure(let e) = r { failures.append(e) } else { served = Date().timeIntervalSince(killedAt) }
            if case .failure(let e) = await c.send(["INCR", RedisArg(other)], key: RedisArg(other)) {
                otherFailures.append(e)
            }
            if redisDone == nil, let owner = cluster.masterPort(ofSlot: RedisSlot.of(key)), owner != victimPort {
                redisDone = Date().timeIntervalSince(killedAt)  // the cluster names a new master for the slot
            }
            if served != nil { break }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        let redisTime = try XCTUnwrap(redisDone ?? served, "Redis replaced the master")
        let clientTime = try XCTUnwrap(served, "the client served the slot again")
        XCTAssertLessThan(clientTime - redisTime, 2, "served again within Redis's failover time + 2 s")
        XCTAssertLessThan(longest, 1.3, "no command waited longer than its time-out (1 s)")
        let fast = failures.filter { if case .unavailable = $0 { return true } else { return false } }
        XCTAssertGreaterThanOrEqual(fast.count, failures.count - 2, "failed fast as unavailable: \(Set(failures))")
        XCTAssertEqual(otherFailures, [], "the other shards were not disturbed")
        XCTAssertGreaterThanOrEqual(c.metrics[.failovers], 1)

        let resubscribed = await TopologyTesting.eventually(within: 3) { inbox.confirmations(of: channel) >= 2 }
        XCTAssertTrue(resubscribed, "the shard's channel is subscribed again on the promoted replica")
        await c.onLoop { s.spublish(channel: channel, payload: Array("after failover".utf8)) { _ in } }
        let arrived = await TopologyTesting.eventually(within: 3) { inbox.payloads(on: channel) == ["after failover"] }
        XCTAssertTrue(arrived, "a message published after recovery arrives")
        XCTAssertEqual(inbox.confirmations(of: quiet), 1, "the other shard's channel was left alone")
        XCTAssertGreaterThanOrEqual(c.metrics[.resubscribes], 1)
        await c.onLoop { s.close() }
        await c.closeFromAnyThread()
        try victim.start()  // rejoins as a replica of its replacement
        return (redisTime, clientTime)
    }

    /// A slot moved to another master while a sharded channel of it is subscribed: Redis drops the
    /// subscription (`sunsubscribe`), the subscriber subscribes it again at the new master, and a message
    /// published after the move arrives; a probe of each connection keeps coming back.
    func testAShardedSubscriptionFollowsItsSlotToAnotherMaster() async throws {
        let c = await readyClient()
        let s = RedisShardedSubscriber(client: c)
        let masters = TopologyTesting.masterPorts(cluster)
        let channel = TopologyTesting.key("mv", servedBy: masters[1], in: cluster)
        let slot = RedisSlot.of(channel)
        let inbox = Inbox()
        await c.onLoop {
            s.start()
            s.ssubscribe(channel: channel, onSubscribed: { inbox.confirmed(channel) }) { inbox.add($0) }
        }
        var ok = await TopologyTesting.eventually { inbox.confirmations(of: channel) == 1 }
        XCTAssertTrue(ok)
        await c.onLoop { s.spublish(channel: channel, payload: Array("before".utf8)) { _ in } }
        ok = await TopologyTesting.eventually { inbox.payloads(on: channel) == ["before"] }
        XCTAssertTrue(ok)

        let source = try XCTUnwrap(cluster.node(port: masters[1]))
        let target = try XCTUnwrap(cluster.node(port: masters[2]))
        let targetID = target.cli("CLUSTER", "MYID")
        _ = target.cli("CLUSTER", "SETSLOT", "\(slot)", "IMPORTING", source.cli("CLUSTER", "MYID"))
        _ = source.cli("CLUSTER", "SETSLOT", "\(slot)", "MIGRATING", targetID)
        for k in source.cli("CLUSTER", "GETKEYSINSLOT", "\(slot)", "1000").split(separator: "\n") {
            _ = source.cli("MIGRATE", "127.0.0.1", "\(target.port)", "", "0", "5000", "KEYS", String(k))
        }
        for port in [masters[2], masters[1], masters[0]] {
            _ = cluster.node(port: port)?.cli("CLUSTER", "SETSLOT", "\(slot)", "NODE", targetID)
        }
        ok = await TopologyTesting.eventually(within: 5) { inbox.confirmations(of: channel) == 2 }
        XCTAssertTrue(ok, "subscribed again, at the slot's new master")
        let placed = await c.onLoop { c.master(forSlot: slot) }
        XCTAssertEqual(placed?.port, target.port)
        await c.onLoop { s.spublish(channel: channel, payload: Array("after".utf8)) { _ in } }
        ok = await TopologyTesting.eventually { inbox.payloads(on: channel) == ["before", "after"] }
        XCTAssertTrue(ok, "a message published after the move arrives")
        XCTAssertGreaterThanOrEqual(c.metrics[.resubscribes], 1)
        let healthy = await TopologyTesting.eventually { s.isHealthy }
        XCTAssertTrue(healthy)
        XCTAssertEqual(c.metrics[.probeFailures], 0, "every probe came back")
        await c.onLoop { s.close() }
        await c.closeFromAnyThread()
    }
}
