import EventLoop
import Foundation
import Glibc
import RedisTestSupport
import XCTest

@testable import RedisClient

/// `RedisClient` and `RedisShardedSubscriber` on a real 6-node Redis Cluster (3 masters, 3 replicas),
/// started once for the class and shared by its tests; each test looks the topology up afresh (an earlier
/// test may have moved a slot or failed a master over).
final class RedisClusterTests: XCTestCase {
    nonisolated(unsafe) static var cluster: RedisClusterProcesses?
    nonisolated(unsafe) static var setUpError: Error?
    var loop: EventLoop!

    override class func setUp() {
        do { cluster = try RedisClusterProcesses() } catch { setUpError = error }
    }

    override class func tearDown() {
        cluster?.stop()
        cluster = nil
    }

    var cluster: RedisClusterProcesses! { Self.cluster }

    override func setUp() async throws {
        guard Self.cluster != nil else { throw XCTSkip("no cluster: \(String(describing: Self.setUpError))") }
        XCTAssertTrue(cluster.waitUntilHealthy(timeout: 30), "the cluster is whole again before each test")
        loop = startedLoop()
    }

    override func tearDown() async throws { loop?.stop() }

    /// A started client on the cluster, once it knows the map and every master is connected.
    func readyClient(
        commandTimeout: Double = 1, configure: (inout RedisClientOptions) -> Void = { _ in }
    ) async -> RedisClient {
        let c = TopologyTesting.client(cluster.url, on: loop, commandTimeout: commandTimeout, configure: configure)
        c.startFromAnyThread()
        let ready = await TopologyTesting.eventually { c.isReady }
        XCTAssertTrue(ready, "the client learnt the slot map and connected to every master")
        return c
    }

    /// Every key goes to the master of its slot: written through the client, each is found by a plain
    /// `GET` on exactly the master that `CLUSTER SLOTS` names for its slot, and no redirection was needed.
    /// Keys sharing a hash tag go together in one multi-key command and one script.
    func testEachKeyGoesToTheMasterOfItsSlot() async throws {
        let c = await readyClient()
        let masters = TopologyTesting.masterPorts(cluster)
        XCTAssertEqual(masters.count, 3)
        var seen = Set<Int>()
        for i in 0..<60 {
            let key = "route:\(i)"
            let set = await c.send(["SET", RedisArg(key), RedisArg("v\(i)")], key: RedisArg(key))
            XCTAssertEqual(set, .success(.simpleString("OK")))
            let owner = try XCTUnwrap(cluster.masterPort(ofSlot: RedisSlot.of(key)))
            seen.insert(owner)
            XCTAssertEqual(cluster.node(port: owner)?.cli("GET", key), "v\(i)", "\(key) is on its slot's master")
        }
        XCTAssertEqual(seen, Set(masters), "the keys spread over every master")
        XCTAssertEqual(c.metrics[.moved], 0, "the map was right: no MOVED")

        let mset = await c.send(["MSET", "{user7}:a", "1", "{user7}:b", "2"], key: "{user7}:a")
        XCTAssertEqual(mset, .success(.simpleString("OK")))
        let script = RedisScript("return redis.call('INCRBY', KEYS[1], 1) + redis.call('INCRBY', KEYS[2], 10)")
        _ = await c.send(["SCRIPT", "FLUSH"], key: "{user7}:a")
        let summed = await c.evalScript(script, keys: ["{user7}:a", "{user7}:b"], args: [])
        XCTAssertEqual(summed, .success(.integer(2 + 12)), "loaded on NOSCRIPT at the slot's master, run once")
        let cross = await c.send(["MSET", "{user7}:a", "1", "{user8}:b", "2"], key: "{user7}:a")
        guard case .failure(let e) = cross else { return XCTFail("keys of two slots: \(cross)") }
        XCTAssertEqual(e.serverCode, "CROSSSLOT")
        await c.closeFromAnyThread()
    }

    /// A slot being migrated: a key already moved gets `ASK` and is answered by the importing node (after
    /// `ASKING`), a key not moved yet is answered by the source. Once the slot is the target's, `MOVED` is
    /// followed and patches the map: the next command goes straight there.
    func testAskDuringAMigrationAndMovedAfterIt() async throws {
        let c = await readyClient()
        let masters = TopologyTesting.masterPorts(cluster)
        let moved = TopologyTesting.key("mig", servedBy: masters[0], in: cluster)
        let slot = RedisSlot.of(moved)
        let tag = String(moved.split(separator: "{")[1].dropLast())
        let (first, second) = ("mig{\(tag)}:first", "mig{\(tag)}:second")
        for k in [first, second] { _ = await c.send(["SET", RedisArg(k), RedisArg(k)], key: RedisArg(k)) }
        let source = try XCTUnwrap(cluster.node(port: masters[0]))
        let target = try XCTUnwrap(cluster.node(port: masters[1]))
        let sourceID = source.cli("CLUSTER", "MYID")
        let targetID = target.cli("CLUSTER", "MYID")
        XCTAssertEqual(target.cli("CLUSTER", "SETSLOT", "\(slot)", "IMPORTING", sourceID), "OK")
        XCTAssertEqual(source.cli("CLUSTER", "SETSLOT", "\(slot)", "MIGRATING", targetID), "OK")
        XCTAssertEqual(source.cli("MIGRATE", "127.0.0.1", "\(target.port)", "", "0", "5000", "KEYS", first), "OK")

        let asked = await c.send(["GET", RedisArg(first)], key: RedisArg(first))
        XCTAssertEqual(asked.map(\.string), .success(first), "served by the importing node after ASK")
        XCTAssertEqual(c.metrics[.asks], 1)
        let stayed = await c.send(["GET", RedisArg(second)], key: RedisArg(second))
        XCTAssertEqual(stayed.map(\.string), .success(second), "a key not migrated yet: the source answers")
        XCTAssertEqual(c.metrics[.asks], 1)

        XCTAssertEqual(source.cli("MIGRATE", "127.0.0.1", "\(target.port)", "", "0", "5000", "KEYS", second), "OK")
        for port in [masters[1], masters[0], masters[2]] {  // the target first, then the source
            _ = cluster.node(port: port)?.cli("CLUSTER", "SETSLOT", "\(slot)", "NODE", targetID)
        }
        let movedBefore = c.metrics[.moved]
        let afterMove = await c.send(["GET", RedisArg(second)], key: RedisArg(second))
        XCTAssertEqual(afterMove.map(\.string), .success(second))
        XCTAssertEqual(c.metrics[.moved], movedBefore + 1, "one MOVED followed")
        let next = await c.send(["GET", RedisArg(first)], key: RedisArg(first))
        XCTAssertEqual(next.map(\.string), .success(first))
        XCTAssertEqual(c.metrics[.moved], movedBefore + 1, "the map was patched: no second MOVED")
        let master = await c.onLoop { c.master(forSlot: slot) }
        XCTAssertEqual(master?.port, target.port)
        await c.closeFromAnyThread()
    }

    /// `WAIT` after a write: acknowledged by the shard's replica; with the replica stopped (`SIGSTOP`) the
    /// write still runs but is not acknowledged (counted), and a plain command sent meanwhile to the same
    /// master is not held behind the blocked `WAIT`. After `SIGCONT` writes are acknowledged again.
    func testWaitForReplicasAndAStoppedReplica() async throws {
        let c = await readyClient { $0.topologyRefreshInterval = 0.2 }
        let counted = await TopologyTesting.eventually {
            await c.onLoop {
                c.masterStatus.count == 3 && c.masterStatus.allSatisfy { $0.connected && $0.replicas == 1 }
            }
        }
        XCTAssertTrue(counted, "each master reports its one replica (ROLE)")
        let short = await c.problems(wantedReplicas: 2)
        XCTAssertEqual(short.count, 3, "every master named: 1 connected replica, 2 wanted: \(short)")
        let masters = TopologyTesting.masterPorts(cluster)
        let key = TopologyTesting.key("wait", servedBy: masters[2], in: cluster)
        let acked = await c.send(
            ["SET", RedisArg(key), "1"], key: RedisArg(key), waitForReplicas: 1, replicaTimeout: 1)
        XCTAssertEqual(acked, .success(RedisReplicated(reply: .simpleString("OK"), replicas: 1, wanted: 1)))
        let view = cluster.view()
        let masterID = try XCTUnwrap(view.first { $0.port == masters[2] }?.id)
        let replica = try XCTUnwrap(view.first { $0.masterID == masterID }.flatMap { cluster.node(port: $0.port) })
        replica.signal(SIGSTOP)
        let started = Date()
        async let replicated = c.send(
            ["SET", RedisArg(key), "2"], key: RedisArg(key), waitForReplicas: 1, replicaTimeout: 0.4)
        try await Task.sleep(nanoseconds: 50_000_000)
        let plain = await c.send(["GET", RedisArg(key)], key: RedisArg(key))
        let plainTook = Date().timeIntervalSince(started)
        let r = await replicated
        let tookWait = Date().timeIntervalSince(started)
        replica.signal(SIGCONT)
        XCTAssertEqual(r, .success(RedisReplicated(reply: .simpleString("OK"), replicas: 0, wanted: 1)))
        XCTAssertFalse((try? r.get())?.isAcknowledged ?? true)
        XCTAssertEqual(c.metrics[.replicaAckTimeouts], 1)
        XCTAssertGreaterThanOrEqual(tookWait, 0.35, "WAIT waited for its time-out")
        XCTAssertEqual(plain.map(\.string), .success("2"), "the write ran on the master")
        XCTAssertLessThan(plainTook, 0.3, "a plain command is not queued behind the blocked WAIT")
        let back = await TopologyTesting.eventually(within: 5) {
            let again = await c.send(
                ["SET", RedisArg(key), "3"], key: RedisArg(key), waitForReplicas: 1, replicaTimeout: 0.3)
            return (try? again.get())?.isAcknowledged == true
        }
        XCTAssertTrue(back, "acknowledged again once the replica runs")
        await c.closeFromAnyThread()
    }

    /// The shape the session layer needs: a script that writes a key and `SPUBLISH`es on a channel of the
    /// same slot (hash tag) reaches a sharded subscriber of that channel; nothing crosses to other shards.
    func testAScriptSpublishesToAShardedSubscriber() async throws {
        let c = await readyClient()
        let s = RedisShardedSubscriber(client: c)
        let inbox = Inbox()
        let channel = "s:{sess42}:ch"
        await c.onLoop {
            s.start()
            s.ssubscribe(channel: channel, onSubscribed: { inbox.confirmed(channel) }) { inbox.add($0) }
        }
        let subscribed = await TopologyTesting.eventually { inbox.confirmations(of: channel) == 1 }
        XCTAssertTrue(subscribed)
        let script = RedisScript("redis.call('SET', KEYS[1], ARGV[1]) return redis.call('SPUBLISH', KEYS[2], ARGV[1])")
        let r = await c.evalScript(script, keys: ["s:{sess42}", RedisArg(channel)], args: ["e1"])
        XCTAssertEqual(r, .success(.integer(1)), "one subscriber in the shard")
        let got = await TopologyTesting.eventually { inbox.payloads(on: channel) == ["e1"] }
        XCTAssertTrue(got)
        await c.onLoop { s.close() }
        await c.closeFromAnyThread()
    }
}
