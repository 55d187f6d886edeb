import EventLoop
import Foundation
import RedisTestSupport
import XCTest

@testable import RedisClient

/// `RedisClient` and `RedisShardedSubscriber` on a real Sentinel set (master, replica, 3 sentinels),
/// started once for the class; each test finds the current master afresh.
final class RedisSentinelTests: XCTestCase {
    nonisolated(unsafe) static var set: RedisSentinelProcesses?
    nonisolated(unsafe) static var setUpError: Error?
    var loop: EventLoop!

    override class func setUp() {
        do { set = try RedisSentinelProcesses() } catch { setUpError = error }
    }

    override class func tearDown() {
        set?.stop()
        set = nil
    }

    var sentinels: RedisSentinelProcesses! { Self.set }

    override func setUp() async throws {
        guard Self.set != nil else { throw XCTSkip("no sentinel set: \(String(describing: Self.setUpError))") }
        XCTAssertTrue(sentinels.waitUntilReady(timeout: 30), "master, replica and sentinels ready before each test")
        loop = startedLoop()
    }

    override func tearDown() async throws { loop?.stop() }

    func readyClient(configure: (inout RedisClientOptions) -> Void = { _ in }) async -> RedisClient {
        let c = TopologyTesting.client(sentinels.url, on: loop, configure: configure)
        c.startFromAnyThread()
        let ready = await TopologyTesting.eventually { c.isReady }
        XCTAssertTrue(ready, "the sentinels named the master and the client connected")
        return c
    }

    func spublish(_ s: RedisShardedSubscriber, _ channel: String, _ text: String) async {
        await s.client.onLoop { s.spublish(channel: channel, payload: Array(text.utf8)) { _ in } }
    }

    /// `kill -9` of the master: commands fail fast as unavailable while the sentinels replace it; the
    /// client follows `+switch-master` to the promoted replica within the sentinels' failover time + 2 s;
    /// a sharded subscription moves with it (a message published afterwards arrives). Times printed;
    /// `REDIS_FAILOVER_TRIALS=20` repeats the trial (the killed node comes back as a replica).
    func testAKilledMasterIsReplacedAndTheClientAndSubscriptionsFollow() async throws {
        let trials = Int(ProcessInfo.processInfo.environment["REDIS_FAILOVER_TRIALS"] ?? "") ?? 1
        var sentinelTimes: [Double] = []
        var clientTimes: [Double] = []
        for _ in 0..<trials {
            let (sentinel, client) = try await failoverTrial()
            sentinelTimes.append(sentinel)
            clientTimes.append(client)
        }
        func summary(_ t: [Double]) -> String {
            let s = t.sorted()
            return String(format: "min %.2f median %.2f max %.2f s", s.first ?? 0, s[s.count / 2], s.last ?? 0)
        }
        print(
            "sentinel failover (\(trials) trials, kill -9 of the master, down-after-milliseconds 1000): the "
                + "sentinels switched after \(summary(sentinelTimes)); the client served again after "
                + "\(summary(clientTimes)); client minus sentinels: "
                + summary(zip(clientTimes, sentinelTimes).map { $0 - $1 }))
    }

    /// One kill; returns (the sentinels' switch time, the client's time to serve again), from the kill.
    private func failoverTrial() async throws -> (Double, Double) {
        let c = await readyClient()
        let s = RedisShardedSubscriber(client: c)
        let inbox = Inbox()
        let oldPort = try XCTUnwrap(sentinels.masterPort)
        let master = await c.onLoop { c.masters }
        XCTAssertEqual(master.map(\.port), [oldPort])
        await c.onLoop {
            s.start()
            s.ssubscribe(channel: "sn:ch", onSubscribed: { inbox.confirmed("sn:ch") }) { inbox.add($0) }
        }
        var ok = await TopologyTesting.eventually { inbox.confirmations(of: "sn:ch") == 1 }
        XCTAssertTrue(ok)
        let old = try XCTUnwrap(sentinels.node(port: oldPort))
        let killedAt = Date()
        old.kill()
        var sentinelDone: Double?
        var served: Double?
        var failures: [RedisError] = []
        var longest = 0.0
        while Date().timeIntervalSince(killedAt) < 20 {
            let t0 = Date()
            let r = await c.send(["INCR", "sn:n"], key: "sn:n")
            longest = max(longest, Date().timeIntervalSince(t0))
            if case .failure(let e) = r { failures.append(e) } else { served = Date().timeIntervalSince(killedAt) }
            if sentinelDone == nil, let now = sentinels.masterPort, now != oldPort {
                sentinelDone = Date().timeIntervalSince(killedAt)
            }
            if served != nil { break }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        let clientTime = try XCTUnwrap(served, "served again")
        let sentinelTime = sentinelDone ?? clientTime
        XCTAssertLessThan(clientTime - sentinelTime, 2, "within the sentinels' failover time + 2 s")
        XCTAssertLessThan(longest, 1.3, "no command waited longer than its time-out (1 s)")
        let fast = failures.filter { if case .unavailable = $0 { return true } else { return false } }
        XCTAssertGreaterThanOrEqual(fast.count, failures.count - 2, "failed fast as unavailable: \(Set(failures))")
        let now = await c.onLoop { c.masters }
        XCTAssertEqual(now.map(\.port), [sentinels.masterPort ?? -1])
        XCTAssertEqual(c.metrics[.failovers], 1)

        ok = await TopologyTesting.eventually(within: 3) { inbox.confirmations(of: "sn:ch") == 2 }
        XCTAssertTrue(ok, "the subscription moved to the new master")
        await spublish(s, "sn:ch", "after failover")
        ok = await TopologyTesting.eventually { inbox.payloads(on: "sn:ch") == ["after failover"] }
        XCTAssertTrue(ok)
        await c.onLoop { s.close() }
        await c.closeFromAnyThread()
        try old.start()
        // What the sentinels would do some seconds later (they wait for the old master to report itself).
        // ("OK Already connected to specified master" when the sentinels were quicker.)
        XCTAssertTrue(old.cli("REPLICAOF", "127.0.0.1", "\(sentinels.masterPort ?? 0)").hasPrefix("OK"))
        XCTAssertTrue(sentinels.waitUntilReady(timeout: 30))
        return (sentinelTime, clientTime)
    }

    /// `SIGSTOP` of the master (it takes every byte and answers nothing): the client's connection to it
    /// falls silent and is kept (Redis's host acknowledges), yet the client still follows the
    /// sentinels to the promoted replica within their failover time + 2 s: the silence makes the locator
    /// look again, and the switch retires the silent connection. No command waits past its time-out (1 s).
    func testAStoppedMasterIsReplacedAndTheClientFollowsThoughItsConnectionIsSilent() async throws {
        let c = await readyClient()
        let oldPort = try XCTUnwrap(sentinels.masterPort)
        let old = try XCTUnwrap(sentinels.node(port: oldPort))
        let stoppedAt = Date()
        old.signal(SIGSTOP)
        var continued = false
        defer { if !continued { old.signal(SIGCONT) } }
        var sentinelDone: Double?
        var served: Double?
        var longest = 0.0
        var sawSilent = false
        while Date().timeIntervalSince(stoppedAt) < 25 {
            let t0 = Date()
            let r = await c.send(["INCR", "sn:stopped"], key: "sn:stopped")
            longest = max(longest, Date().timeIntervalSince(t0))
            if case .success = r, sentinels.masterPort != oldPort { served = Date().timeIntervalSince(stoppedAt) }
            if !sawSilent {
                sawSilent = await c.onLoop {
                    c.connectionIfAny(to: RedisAddress(host: "127.0.0.1", port: oldPort))?.isSilent == true
                }
            }
            if sentinelDone == nil, let now = sentinels.masterPort, now != oldPort {
                sentinelDone = Date().timeIntervalSince(stoppedAt)
            }
            if served != nil { break }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        let clientTime = try XCTUnwrap(served, "served again by the promoted replica")
        let sentinelTime = sentinelDone ?? clientTime
        print("sentinel failover, SIGSTOP of the master: sentinels \(sentinelTime) s, client \(clientTime) s")
        XCTAssertTrue(sawSilent, "the stopped master's connection was silent, not reset")
        XCTAssertLessThan(clientTime - sentinelTime, 2, "within the sentinels' failover time + 2 s")
        XCTAssertLessThan(longest, 1.3, "no command waited longer than its time-out (1 s)")
        let now = await c.onLoop { c.masters }
        XCTAssertEqual(now.map(\.port), [sentinels.masterPort ?? -1])
        await c.closeFromAnyThread()
        old.signal(SIGCONT)
        continued = true
        // The sentinels turn the old master into a replica of the new one once it reports itself again.
        _ = old.cli("REPLICAOF", "127.0.0.1", "\(sentinels.masterPort ?? 0)")
        XCTAssertTrue(sentinels.waitUntilReady(timeout: 30))
    }

    /// A sentinel that stops answering (`SIGSTOP`) while the client is connected to it: the connection's
    /// health check is not answered, so the connection falls silent (the sentinel's host still
    /// acknowledges), and the client moves on to the next sentinel at once. It does not wait ten limits
    /// for a reset. The master keeps serving.
    func testAStoppedSentinelIsLeftForTheNextOne() async throws {
        let c = await readyClient()
        func asked() async -> Int? { await c.onLoop { (c.locator as? RedisSentinelLocator)?.sentinelAddress?.port } }
        let current = await asked()
        let port = try XCTUnwrap(current)
        let stopped = try XCTUnwrap(sentinels.sentinels.first { $0.port == port })
        stopped.signal(SIGSTOP)
        defer { stopped.signal(SIGCONT) }
        let started = Date()
        let moved = await TopologyTesting.eventually(within: 5) { await asked() != port }
        XCTAssertTrue(moved, "left the stopped sentinel within 5 s (a reset would take ten 1 s limits)")
        print("sentinel stopped: the client asked another after \(Date().timeIntervalSince(started)) s")
        let r = await c.send(["SET", "sentinel-stopped", "1"], key: "sentinel-stopped")
        XCTAssertEqual(r, .success(.simpleString("OK")))
        await c.closeFromAnyThread()
    }

    /// The first sentinel of the URL is down: the client asks the next one and serves.
    func testASentinelThatIsDownIsSkipped() async throws {
        let first = sentinels.sentinels[0]
        first.kill()
        defer { try? first.start() }
        let c = await readyClient()
        let r = await c.send(["SET", "skip", "1"], key: "skip")
        XCTAssertEqual(r, .success(.simpleString("OK")))
        let master = await c.onLoop { c.masters.map(\.port) }
        XCTAssertEqual(master, [sentinels.masterPort ?? -1])
        await c.closeFromAnyThread()
    }

    /// A master demoted under a client that does not hear `+switch-master` (watch off, no periodic look-up
    /// in time) and whose connection is not killed (an operator's `REPLICAOF`; Redis 7.0's sentinels kill
    /// normal clients of a demoted master, but only seconds after the switch): its next write gets
    /// `READONLY`, which fails fast as unavailable (the write did not run) and sends the client to the
    /// sentinels, which name the new master; the subscription moves there too.
    func testReadOnlyFromADemotedMasterSendsTheClientToTheNewMaster() async throws {
        let c = await readyClient {
            $0.watchSentinels = false
            $0.topologyRefreshInterval = 60
        }
        let events = EventLog()
        let s = RedisShardedSubscriber(client: c)
        let inbox = Inbox()
        await c.onLoop {
            c.onEvent = { events.add($0) }
            s.start()
            s.ssubscribe(channel: "ro:ch", onSubscribed: { inbox.confirmed("ro:ch") }) { inbox.add($0) }
        }
        var ok = await TopologyTesting.eventually { inbox.confirmations(of: "ro:ch") == 1 }
        XCTAssertTrue(ok)
        let oldPort = try XCTUnwrap(sentinels.masterPort)
        XCTAssertEqual(sentinels.sentinels[0].cli("SENTINEL", "FAILOVER", sentinels.masterName), "OK")
        ok = await TopologyTesting.eventually { (self.sentinels.masterPort ?? oldPort) != oldPort }
        XCTAssertTrue(ok, "the sentinels switched")
        let newPort = try XCTUnwrap(sentinels.masterPort)
        let old = try XCTUnwrap(sentinels.node(port: oldPort))
        XCTAssertEqual(old.cli("REPLICAOF", "127.0.0.1", "\(newPort)"), "OK")
        let first = await c.send(["SET", "ro:k", "v"], key: "ro:k")
        guard case .failure(.unavailable(let why)) = first else { return XCTFail("\(first)") }
        XCTAssertTrue(why.hasPrefix("READONLY"), why)
        let started = Date()
        ok = await TopologyTesting.eventually(within: 3) {
            let r = await c.send(["SET", "ro:k", "v"], key: "ro:k")
            return (try? r.get()) != nil
        }
        XCTAssertTrue(ok, "writes succeed again")
        print(String(format: "READONLY to serving on the new master: %.2f s", Date().timeIntervalSince(started)))
        let at = await c.onLoop { c.masters.map(\.port) }
        XCTAssertEqual(at, [newPort])
        XCTAssertEqual(sentinels.node(port: newPort)?.cli("GET", "ro:k"), "v")
        XCTAssertEqual(c.metrics[.failovers], 1)
        ok = await TopologyTesting.eventually(within: 3) { inbox.confirmations(of: "ro:ch") == 2 }
        XCTAssertTrue(ok, "the subscription moved to the new master")
        await spublish(s, "ro:ch", "on the new master")
        ok = await TopologyTesting.eventually { inbox.payloads(on: "ro:ch") == ["on the new master"] }
        XCTAssertTrue(ok)
        await c.onLoop { s.close() }
        await c.closeFromAnyThread()
    }
}
