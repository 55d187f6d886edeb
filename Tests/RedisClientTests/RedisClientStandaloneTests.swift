import EventLoop
import Foundation
import Primitives
import RedisTestSupport
import XCTest

@testable import RedisClient

/// `RedisClient` and `RedisShardedSubscriber` on one Redis (`redis://`): the same interface as on a
/// cluster, sharded pub/sub included (Redis 7 has it without cluster mode), and the subscription
/// connection's repairs: a killed connection, and one that stays up but goes deaf (only the loopback
/// probe can tell).
final class RedisClientStandaloneTests: RedisLoopTestCase {

    func readyClient(_ url: String? = nil, configure: (inout RedisClientOptions) -> Void = { _ in }) async
        -> RedisClient
    {
        let c = TopologyTesting.client(url ?? server.url, on: loop, configure: configure)
        c.startFromAnyThread()
        let ready = await TopologyTesting.eventually { c.isReady }
        XCTAssertTrue(ready)
        return c
    }

    func subscribe(_ s: RedisShardedSubscriber, _ channel: String, _ inbox: Inbox) async {
        await s.client.onLoop {
            s.ssubscribe(channel: channel, onSubscribed: { inbox.confirmed(channel) }) { inbox.add($0) }
        }
    }

    /// Subscribes `n` sharded channels `prefix:{0}` … in one loop turn; their confirmations in the inbox
    /// ("0", "1", …).
    func subscribeMany(_ s: RedisShardedSubscriber, _ n: Int, prefix: String) async -> Inbox {
        let inbox = Inbox()
        await s.client.onLoop {
            for i in 0..<n {
                s.ssubscribe(channel: "\(prefix):{\(i)}", onSubscribed: { inbox.confirmed("\(i)") }) { _ in }
            }
        }
        return inbox
    }

    func spublish(_ s: RedisShardedSubscriber, _ channel: String, _ text: String) async -> Result<RESPValue, RedisError>
    {
        await withCheckedContinuation { k in
            s.loop.execute { s.spublish(channel: channel, payload: Array(text.utf8)) { k.resume(returning: $0) } }
        }
    }

    /// `replicaAcksStrict`: a command that must reach more replicas than its master has connected is
    /// refused before it is sent (nothing written), and is sent again once the master has enough; commands
    /// that wait for none are sent as usual.
    func testStrictReplicaAcksRefuseACommandTheMasterHasTooFewReplicasFor() async throws {
        let c = await readyClient { $0.replicaAcksStrict = true }
        let named = await TopologyTesting.eventually {
            await c.problems(wantedReplicas: 1).first?.hasSuffix("its commits are refused") == true
        }
        XCTAssertTrue(named, "named once ROLE was read")
        let refused = await c.send(["SET", "strict", "1"], key: "strict", waitForReplicas: 1, replicaTimeout: 1)
        XCTAssertEqual(refused, .failure(.shortOfReplicas(connected: 0, wanted: 1)))
        let written = await c.send(["EXISTS", "strict"], key: "strict")
        XCTAssertEqual(written, .success(.integer(0)), "nothing was sent")
        let plain = await c.send(["SET", "strict", "2"], key: "strict", waitForReplicas: 0, replicaTimeout: 1)
        XCTAssertEqual(plain, .success(RedisReplicated(reply: .simpleString("OK"), replicas: 0, wanted: 0)))
        let servesNone = await c.onLoop { c.servesSomeMaster(wantedReplicas: 1) }
        XCTAssertFalse(servesNone, "strict: a master short of replicas serves nothing that needs them")
        await c.closeFromAnyThread()
    }

    func testCommandsScriptsAndReplicaWaitsOnOneRedis() async throws {
        let c = await readyClient { $0.topologyRefreshInterval = 0.2 }
        XCTAssertFalse(c.isSharded)
        let set = await c.send(["SET", "a", "1"], key: "a")
        XCTAssertEqual(set, .success(.simpleString("OK")))
        let keyless = await c.send(["ECHO", "any master"], key: nil)
        XCTAssertEqual(keyless.map(\.string), .success("any master"))
        let script = RedisScript("return redis.call('INCRBY', KEYS[1], ARGV[1])")
        _ = await c.send(["SCRIPT", "FLUSH"], key: nil)
        let ran = await c.evalScript(script, keys: ["a"], args: ["41"])
        XCTAssertEqual(ran, .success(.integer(42)), "NOSCRIPT: loaded and run once")
        let none = await c.send(["SET", "b", "1"], key: "b", waitForReplicas: 0, replicaTimeout: 1)
        XCTAssertEqual(none, .success(RedisReplicated(reply: .simpleString("OK"), replicas: 0, wanted: 0)))
        let named = await TopologyTesting.eventually {
            await c.problems(wantedReplicas: 1) == [
                "master 127.0.0.1:\(self.server.port) has 0 connected replicas, 1 wanted: its commits wait for the 0 it has"
            ]
        }
        XCTAssertTrue(named, "a master with fewer replicas than wanted is named (ROLE)")
        let fine = await c.problems(wantedReplicas: 0)
        XCTAssertEqual(fine, [])
        // A master with no replica: a command asking for one waits for the replicas it has (none), at once.
        let started = Date()
        let lonely = await c.send(["SET", "b", "2"], key: "b", waitForReplicas: 1, replicaTimeout: 1)
        XCTAssertEqual(
            lonely, .success(RedisReplicated(reply: .simpleString("OK"), replicas: 0, wanted: 0, asked: 1)))
        XCTAssertEqual(try lonely.get().isShortOfReplicas, true)
        XCTAssertLessThan(Date().timeIntervalSince(started), 0.5, "no WAIT for a replica the master does not have")
        XCTAssertEqual(c.metrics[.replicaAckTimeouts], 0)
        await c.closeFromAnyThread()
        let closed = await c.send(["PING"], key: nil)
        XCTAssertEqual(closed, .failure(.notConnected))
    }

    /// A master whose replicas are not known yet (a client's first command, or a replica Redis has just
    /// promoted) is asked with `ROLE` before the `WAIT`: a command asking for a replica the master does not
    /// have is answered at once, not at the replica time-out. The command is sent before the client is
    /// ready, so it is written in the same loop turn as the connection's own first `ROLE`, before that
    /// one's answer.
    func testAMasterWhoseReplicasAreNotKnownIsAskedBeforeTheWait() async throws {
        for separate in [false, true] {
            let c = TopologyTesting.client(server.url, on: loop, commandTimeout: 3) {
                $0.separateWaitConnection = separate
            }
            let started = Date()
            let first = await withCheckedContinuation { k in
                loop.execute {
                    c.start()
                    c.send(["SET", "first", "1"], key: "first", waitForReplicas: 1, replicaTimeout: 2) {
                        k.resume(returning: $0)
                    }
                }
            }
            XCTAssertEqual(
                first, .success(RedisReplicated(reply: .simpleString("OK"), replicas: 0, wanted: 0, asked: 1)),
                "separate WAIT connection: \(separate)")
            XCTAssertLessThan(Date().timeIntervalSince(started), 1, "no WAIT for a replica the master does not have")
            XCTAssertEqual(c.metrics[.replicaAckTimeouts], 0)
            await c.closeFromAnyThread()
        }
    }

    /// Lease renewals take a connection of their own (`RedisLane.leases`): while the command connection
    /// is full (`maxInFlight` 2, both held by `BLPOP`s that block it in Redis for 1.5 s, nothing held
    /// beyond), a command on it is refused with `.overloaded` and a script on the lease lane is answered at once. Before, the
    /// renewal shared the command connection and was refused too (6,379 renewals refused in
    /// one 6 × 8,000-stream run, sessions lost for it).
    func testTheLeaseLaneIsNotCrowdedOutByTheCommandConnection() async throws {
        let c = TopologyTesting.client(server.url, on: loop, commandTimeout: 3, maxInFlight: 2, maxQueued: 0)
        c.startFromAnyThread()
        let ready = await TopologyTesting.eventually { c.isReady }
        XCTAssertTrue(ready)
        let started = Date()
        let crowded = await withCheckedContinuation { k in
            loop.execute {
                for _ in 0..<2 { c.send(["BLPOP", "nothing:here", "1.5"], key: "nothing:here") { _ in } }
                c.send(["INCR", "crowded"], key: "crowded") { k.resume(returning: $0) }
            }
        }
        XCTAssertEqual(crowded, .failure(.overloaded), "the command connection is full")
        let script = RedisScript("return redis.call('INCR', KEYS[1])")
        let renewed = await withCheckedContinuation { k in
            loop.execute {
                c.evalScript(script, keys: ["lease:x"], args: [], lane: .leases) { k.resume(returning: $0) }
            }
        }
        XCTAssertEqual(renewed, .success(.integer(1)), "the lease lane answered")
        XCTAssertLessThan(Date().timeIntervalSince(started), 1.2, "without waiting for the BLPOPs")
        await c.closeFromAnyThread()
    }

    /// A `BLPOP` that blocks the command connection 0.8 s (its time-out, and the stall limit, 0.5 s) while
    /// renewals on the lease lane are answered every 50 ms: it times out alone, and the connection is kept,
    /// silent (Redis's host acknowledges). The `CLIENT ID` sent while it is silent waits in the client and is
    /// written once the connection is answered again: the same Redis client's. Before, the command
    /// connection was reset at 0.5 s (two resets in a 6 x 17,000 teardown whose lease lanes were answered).
    func testTheCommandConnectionIsNotResetWhileTheLeaseLaneHearsRedis() async throws {
        let loop: EventLoop = self.loop
        let c = TopologyTesting.client(server.url, on: loop, commandTimeout: 0.5)
        c.startFromAnyThread()
        let ready = await TopologyTesting.eventually { c.isReady }
        XCTAssertTrue(ready)
        let id = await withCheckedContinuation { k in
            loop.execute { c.send(["CLIENT", "ID"], key: "x") { k.resume(returning: $0) } }
        }
        let script = RedisScript("return redis.call('INCR', KEYS[1])")
        let renewals = Lock<LoopTimer?>(nil)
        let blpop = await withCheckedContinuation { k in
            loop.execute {
                renewals.withLock {
                    $0 = loop.scheduleRepeating(every: 0.05) {
                        c.evalScript(script, keys: ["lease:x"], args: [], lane: .leases) { _ in }
                    }
                }
                c.send(["BLPOP", "nothing:here", "0.8"], key: "nothing:here") { k.resume(returning: $0) }
            }
        }
        XCTAssertEqual(blpop, .failure(.timeout))
        let after = await withCheckedContinuation { k in
            loop.execute { c.send(["CLIENT", "ID"], key: "x") { k.resume(returning: $0) } }
        }
        loop.execute { renewals.withLock { $0?.cancel() } }
        XCTAssertEqual(after, id, "the same connection, answered once Redis reached it after the BLPOP")
        await c.closeFromAnyThread()
    }

    /// A ready client (command time-out 0.5 s) whose command connection is silent: a `BLPOP` blocking
    /// `seconds` holds it past its limit (it times out at 0.5 s). Returns the client and the master's address.
    func silentClient(blockingFor seconds: Double, maxQueued: Int? = nil) async -> (RedisClient, RedisAddress) {
        let c = TopologyTesting.client(server.url, on: loop, commandTimeout: 0.5, maxQueued: maxQueued)
        c.startFromAnyThread()
        let ready = await TopologyTesting.eventually { c.isReady }
        XCTAssertTrue(ready)
        let address = RedisAddress(host: "127.0.0.1", port: server.port)
        loop.execute { c.send(["BLPOP", "nothing:here", RedisArg(seconds)], key: "nothing:here") { _ in } }
        let silent = await TopologyTesting.eventually {
            await c.onLoop { c.connectionIfAny(to: address)?.isSilent == true }
        }
        XCTAssertTrue(silent, "the BLPOP holds the connection past its limit")
        return (c, address)
    }

    /// A command held for a silent connection fails at its own deadline even when the timer meant for it
    /// runs early (libevent's clock is coarse and cached: a few milliseconds before the deadline, nothing is
    /// due yet). Simulated by cancelling the held command's timer and running the check at once: it looks
    /// again at the deadline, and the command fails then (0.5 s), not when the connection answers again
    /// (the `BLPOP`, 3 s). Before: held until the connection changed (a stopped master's command waited
    /// 1.67 s for its 1 s time-out in `RedisSentinelTests`).
    func testACommandHeldForASilentConnectionFailsAtItsDeadlineThoughItsTimerRanEarly() async throws {
        let loop: EventLoop = self.loop
        let (c, address) = await silentClient(blockingFor: 3)
        let sent = Date()
        let result = await withCheckedContinuation { k in
            loop.execute {
                c.send(["PING"], key: "x") { k.resume(returning: ($0, Date().timeIntervalSince(sent))) }
                guard let connection = c.connectionIfAny(to: address) else { return }
                let id = ObjectIdentifier(connection)
                XCTAssertEqual(c.waiters[id]?.count, 1, "held while the connection is silent")
                c.waiters[id]?.first?.timer.cancel()  // the timer ran early: nothing was due yet
                c.expireWaiters(of: id)
            }
        }
        XCTAssertEqual(result.0, .failure(.timeout))
        XCTAssertLessThan(result.1, 1.5, "at its deadline (0.5 s), not when the BLPOP is answered (3 s)")
        XCTAssertGreaterThan(result.1, 0.45)
        await c.closeFromAnyThread()
    }

    /// The client holds no more commands for a silent connection than the connection itself would hold
    /// (`maxQueued`, 2 here): a third one fails at once with `.overloaded` (`503` + `Retry-After` above),
    /// and the two held are written once the connection is answered again.
    func testCommandsHeldForASilentConnectionAreBoundedByItsQueue() async throws {
        let loop: EventLoop = self.loop
        let (c, _) = await silentClient(blockingFor: 0.8, maxQueued: 2)
        let replies = Lock<[Int: Result<RESPValue, RedisError>]>([:])
        let sent = Date()
        let third = await withCheckedContinuation { k in
            loop.execute {
                for i in 0..<2 { c.send(["PING"], key: "x", timeout: 3) { r in replies.withLock { $0[i] = r } } }
                c.send(["PING"], key: "x", timeout: 3) { k.resume(returning: ($0, Date().timeIntervalSince(sent))) }
            }
        }
        XCTAssertEqual(third.0, .failure(.overloaded), "past the bound")
        XCTAssertLessThan(third.1, 0.1, "at once")
        let answered = await TopologyTesting.eventually { replies.withLock { $0.count } == 2 }
        XCTAssertTrue(answered)
        XCTAssertEqual(replies.withLock { $0[0] }, .success(.simpleString("PONG")), "written once answered again")
        XCTAssertEqual(replies.withLock { $0[1] }, .success(.simpleString("PONG")))
        await c.closeFromAnyThread()
    }

    /// Subscribing a channel costs the subscriber O(1), not O(channels it has): 3,000 channels subscribed in
    /// one go and confirmed look at each subscription a bounded number of times. Before, each new channel
    /// walked every subscription (`reconcile`) and each addition and confirmation recomputed the health over
    /// all of them: ~22 million visits for 3,000 channels, and with 11,615 channels on a reconnect a node's
    /// loop was busy for 103 s (every lease of that loop lost).
    func testSubscribingManyChannelsIsLinear() async throws {
        let c = await readyClient()
        let s = RedisShardedSubscriber(client: c)
        await c.onLoop { s.start() }
        let n = 3_000
        let inbox = await subscribeMany(s, n, prefix: "many")
        let all = await TopologyTesting.eventually { inbox.confirmedCount >= n }
        XCTAssertTrue(all, "every channel confirmed")
        let healthy = await TopologyTesting.eventually { s.isHealthy }
        XCTAssertTrue(healthy)
        let visited = await c.onLoop { s.subscriptionsVisited }
        XCTAssertLessThan(visited, n * n / 10, "O(n) placements and a bounded number of health scans")
        await c.onLoop { s.close() }
        await c.closeFromAnyThread()
    }

    /// The health reading looks at the channels not confirmed, not at every channel: with 500 confirmed,
    /// twenty readings of `problems` visit none of them (before: 500 each; a node reads it up to 14 times a
    /// second per loop, with a channel per streamed session). A channel whose confirmation does not come
    /// (its connection frozen by a proxy, the probe off) is still named once it waited a command time-out;
    /// once every channel is confirmed again on a new connection, readings visit none again.
    func testHealthReadingsVisitOnlyTheChannelsNotConfirmed() async throws {
        let proxy = try FreezingProxy(targetPort: server.port)
        defer { proxy.stop() }
        let c = await readyClient("redis://127.0.0.1:\(proxy.port)") { $0.probeInterval = nil }
        let s = RedisShardedSubscriber(client: c)
        await c.onLoop { s.start() }
        let n = 500
        let inbox = await subscribeMany(s, n, prefix: "h")
        var ok = await TopologyTesting.eventually { inbox.confirmedCount >= n && s.isHealthy }
        XCTAssertTrue(ok, "every channel confirmed")
        let (before, after, problems) = await c.onLoop {
            let before = s.subscriptionsVisited
            var problems: [String] = []
            for _ in 0..<20 { problems += s.problems }
            return (before, s.subscriptionsVisited, problems)
        }
        XCTAssertEqual(problems, [])
        XCTAssertEqual(after - before, 0, "confirmed channels are not visited by health readings")

        // One more, on the connection frozen before its confirmation comes back.
        XCTAssertEqual(
            proxy.freeze { FreezingProxy.contains($0, "SSUBSCRIBE") && FreezingProxy.contains($0, "h:{0}") }, 1)
        await c.onLoop { s.ssubscribe(channel: "late:{1}", onSubscribed: nil) { _ in } }
        ok = await TopologyTesting.eventually(within: 5) {
            await c.onLoop { s.problems.contains { $0.hasPrefix("1 channels not subscribed for over") } }
        }
        XCTAssertTrue(ok, "the channel left waiting is named")
        // Its time-out gives the connection up: every channel waits again (each is visited while it does),
        // until a new connection confirms them all.
        // Every channel confirmed again (an empty `problems` only says none waited a whole time-out).
        ok = await TopologyTesting.eventually {
            await c.onLoop { s.problems.isEmpty && s.state.value.waiting.subscriptions.isEmpty } && s.isHealthy
        }
        XCTAssertTrue(ok, "subscribed again on a new connection")
        let visits = await c.onLoop {
            let before = s.subscriptionsVisited
            for _ in 0..<20 { _ = s.problems }
            return s.subscriptionsVisited - before
        }
        XCTAssertEqual(visits, 0, "all confirmed again: nothing to visit")
        await c.onLoop { s.close() }
        let left = await c.onLoop { s.problems.filter { $0.contains("not subscribed") } }
        XCTAssertEqual(left, [], "closed: nothing waits")
        await c.closeFromAnyThread()
    }

    /// Sharded and classic channels and patterns on one subscription connection; an unsubscribe is
    /// confirmed, after which a publish reaches nobody.
    func testShardedClassicAndPatternSubscriptions() async throws {
        let c = await readyClient()
        let s = RedisShardedSubscriber(client: c)
        let inbox = Inbox()
        await c.onLoop {
            s.start()
            s.ssubscribe(channel: "sh:1", onSubscribed: { inbox.confirmed("sh:1") }) { inbox.add($0) }
            s.subscribe(channel: "cl:1", onSubscribed: { inbox.confirmed("cl:1") }) { inbox.add($0) }
            s.psubscribe(pattern: "pat:*", onSubscribed: { inbox.confirmed("pat:*") }) { inbox.add($0) }
        }
        let all = await TopologyTesting.eventually {
            ["sh:1", "cl:1", "pat:*"].allSatisfy { inbox.confirmations(of: $0) == 1 }
        }
        XCTAssertTrue(all)
        let whileSubscribing = await c.onLoop { () -> Bool in
            s.ssubscribe(channel: "sh:new") { inbox.add($0) }
            return s.isHealthy
        }
        XCTAssertTrue(whileSubscribing, "a channel being subscribed is no problem yet (no /readyz flapping)")
        let n = await spublish(s, "sh:1", "one")
        XCTAssertEqual(n, .success(.integer(1)))
        _ = await c.send(["PUBLISH", "cl:1", "two"], key: nil)
        _ = await c.send(["PUBLISH", "pat:x", "three"], key: nil)
        let got = await TopologyTesting.eventually {
            inbox.payloads(on: "sh:1") == ["one"] && inbox.payloads(on: "cl:1") == ["two"]
                && inbox.payloads(on: "pat:x") == ["three"]
        }
        XCTAssertTrue(got)
        let done = await withCheckedContinuation { k in
            c.loop.execute { s.sunsubscribe(channel: "sh:1") { k.resume(returning: true) } }
        }
        XCTAssertTrue(done)
        let nobody = await spublish(s, "sh:1", "late")
        XCTAssertEqual(nobody, .success(.integer(0)), "nobody receives once the unsubscribe is confirmed")
        let healthy = await TopologyTesting.eventually { s.isHealthy }
        XCTAssertTrue(healthy)
        await c.onLoop { s.close() }
        await c.closeFromAnyThread()
    }

    /// Subscribing a channel again while its unsubscribe is in flight (same loop turn): Redis confirms both
    /// in order, the unsubscribe completes, and the new subscription delivers.
    func testSubscribingAgainWhileTheUnsubscribeIsInFlight() async throws {
        let c = await readyClient()
        let s = RedisShardedSubscriber(client: c)
        let inbox = Inbox()
        let unsubscribed = Inbox()
        await c.onLoop { s.start() }
        await subscribe(s, "again", inbox)
        var ok = await TopologyTesting.eventually { inbox.confirmations(of: "again") == 1 }
        XCTAssertTrue(ok)
        await c.onLoop {
            s.sunsubscribe(channel: "again") { unsubscribed.confirmed("again") }
            s.ssubscribe(channel: "again", onSubscribed: { inbox.confirmed("again") }) { inbox.add($0) }
        }
        ok = await TopologyTesting.eventually {
            unsubscribed.confirmations(of: "again") == 1 && inbox.confirmations(of: "again") == 2
        }
        XCTAssertTrue(ok, "both confirmed")
        let n = await spublish(s, "again", "still here")
        XCTAssertEqual(n, .success(.integer(1)))
        ok = await TopologyTesting.eventually { inbox.payloads(on: "again") == ["still here"] }
        XCTAssertTrue(ok)
        await c.onLoop { s.close() }
        await c.closeFromAnyThread()
    }

    /// `CLIENT KILL TYPE pubsub`: the subscription connection is made again, every channel subscribed
    /// again (`onSubscribed` runs again, counted), and a message published afterwards arrives.
    func testAKilledSubscriptionConnectionIsSubscribedAgain() async throws {
        let c = await readyClient()
        let s = RedisShardedSubscriber(client: c)
        let inbox = Inbox()
        await c.onLoop { s.start() }
        await subscribe(s, "k:1", inbox)
        var ok = await TopologyTesting.eventually { inbox.confirmations(of: "k:1") == 1 }
        XCTAssertTrue(ok)
        XCTAssertNotEqual(server.cli("CLIENT", "KILL", "TYPE", "pubsub"), "0")
        ok = await TopologyTesting.eventually { inbox.confirmations(of: "k:1") == 2 }
        XCTAssertTrue(ok, "subscribed again")
        XCTAssertEqual(c.metrics[.resubscribes], 1)
        _ = await spublish(s, "k:1", "after")
        ok = await TopologyTesting.eventually { inbox.payloads(on: "k:1") == ["after"] }
        XCTAssertTrue(ok)
        await c.onLoop { s.close() }
        await c.closeFromAnyThread()
    }

    /// A subscription connection that stays up but delivers nothing (a proxy stops forwarding Redis's
    /// bytes on it): the loopback probe does not come back within the command time-out, so the
    /// subscriber says it is unhealthy (and why), counts it, makes the connection again and subscribes
    /// again; then it is healthy and a message published afterwards arrives. The control: without the
    /// probe the same connection stays silently deaf and "healthy".
    func testTheProbeFindsADeafSubscriptionAndRepairsIt() async throws {
        let proxy = try FreezingProxy(targetPort: server.port)
        defer { proxy.stop() }
        for probing in [false, true] {
            let c = await readyClient("redis://127.0.0.1:\(proxy.port)") { $0.probeInterval = probing ? 0.25 : nil }
            let s = RedisShardedSubscriber(client: c)
            let inbox = Inbox()
            let events = EventLog()
            let channel = "deaf:\(probing)"
            await c.onLoop {
                c.onEvent = { events.add($0) }
                s.start()
            }
            await subscribe(s, channel, inbox)
            var ok = await TopologyTesting.eventually { inbox.confirmations(of: channel) == 1 && s.isHealthy }
            XCTAssertTrue(ok)
            XCTAssertEqual(
                proxy.freeze { FreezingProxy.contains($0, "SSUBSCRIBE") && FreezingProxy.contains($0, channel) }, 1)
            let frozenAt = Date()
            if !probing {
                _ = await spublish(s, channel, "lost")
                try await Task.sleep(nanoseconds: 1_500_000_000)
                XCTAssertEqual(inbox.payloads(on: channel), [], "deaf: nothing arrives")
                XCTAssertTrue(s.isHealthy, "without the probe nothing notices")
                await c.onLoop { s.close() }
                await c.closeFromAnyThread()
                continue
            }
            ok = await TopologyTesting.eventually(within: 5) { !s.isHealthy }
            XCTAssertTrue(ok, "reported unhealthy")
            let problems = await c.onLoop { s.problems }
            XCTAssertTrue(problems.contains { $0.contains("deaf") }, "\(problems)")
            ok = await TopologyTesting.eventually(within: 5) { inbox.confirmations(of: channel) == 2 && s.isHealthy }
            XCTAssertTrue(ok, "repaired: subscribed again on a new connection and healthy")
            print(
                String(
                    format: "deaf subscription found and repaired %.2f s after it went deaf",
                    Date().timeIntervalSince(frozenAt)))
            XCTAssertEqual(c.metrics[.probeFailures], 1)
            XCTAssertTrue(events.all.contains { if case .subscriptionDeaf = $0 { true } else { false } })
            XCTAssertTrue(events.all.contains { if case .subscriptionRecovered = $0 { true } else { false } })
            _ = await spublish(s, channel, "after")
            ok = await TopologyTesting.eventually { inbox.payloads(on: channel) == ["after"] }
            XCTAssertTrue(ok)
            await c.onLoop { s.close() }
            await c.closeFromAnyThread()
        }
    }

    /// A client whose subscriber probes every 0.25 s (time-out `commandTimeout`), subscribed to `channel` and
    /// healthy, its events logged: the set-up of the probe's verdict tests.
    private func probedSubscription(_ channel: String, commandTimeout: Double) async
        -> (RedisClient, RedisShardedSubscriber, Inbox, EventLog)
    {
        let c = TopologyTesting.client(server.url, on: loop, commandTimeout: commandTimeout) { $0.probeInterval = 0.25 }
        c.startFromAnyThread()
        var ok = await TopologyTesting.eventually { c.isReady }
        XCTAssertTrue(ok)
        let s = RedisShardedSubscriber(client: c)
        let inbox = Inbox()
        let events = EventLog()
        await c.onLoop {
            c.onEvent = { events.add($0) }
            s.start()
        }
        await subscribe(s, channel, inbox)
        ok = await TopologyTesting.eventually { inbox.confirmations(of: channel) == 1 && s.isHealthy }
        XCTAssertTrue(ok)
        return (c, s, inbox, events)
    }

    /// A probe whose publish Redis has not run yet does not call the subscription deaf: a 1.2 s script holds
    /// Redis (limit 0.4 s), so the probe's `SPUBLISH` waits behind it and times out unanswered, which says
    /// nothing of the subscription. Nothing is subscribed again, and a message published after the script
    /// arrives on the same subscription. Before: "probe not back within 0.4 s", and the connection was made
    /// again with every channel (a starved Redis in the 6 x 17,000 run: 13-26 times per node).
    func testAProbeWhosePublishRedisHasNotRunDoesNotCallTheSubscriptionDeaf() async throws {
        let (c, s, inbox, events) = await probedSubscription("slow-publish", commandTimeout: 0.4)
        var ok = await TopologyTesting.eventually {  // a probe has come back: the next one is due within 0.25 s
            await c.onLoop { s.links.values.contains { $0.pendingProbe == nil } }
        }
        XCTAssertTrue(ok)
        let script = RedisScript(RedisCommandTimeoutTests.slowScript)
        let done = await withCheckedContinuation { k in
            loop.execute {
                c.evalScript(script, keys: ["slow"], args: [1_200_000], timeout: 5) { k.resume(returning: $0) }
            }
        }
        XCTAssertEqual(done, .success(.bulkString(Array("slow".utf8))))
        _ = await spublish(s, "slow-publish", "after")
        ok = await TopologyTesting.eventually { inbox.payloads(on: "slow-publish") == ["after"] }
        XCTAssertTrue(ok)
        XCTAssertFalse(events.all.contains { if case .subscriptionDeaf = $0 { true } else { false } }, "\(events.all)")
        XCTAssertEqual(c.metrics[.probeFailures], 0)
        XCTAssertEqual(inbox.confirmations(of: "slow-publish"), 1, "never subscribed again")
        await c.onLoop { s.close() }
        await c.closeFromAnyThread()
    }

    /// A loop starved while a probe waits (blocked 0.5 s in a callback, its lag probe running) does not call
    /// the subscription deaf: the probe's verdict, due 0.8 s after it was sent, sees the starved loop and
    /// waits a grace (0.2 s); Redis, stopped meanwhile and continued ~0.82 s after the probe was sent,
    /// answers it within the grace. Nothing is subscribed again.
    func testALoopStarvedWhileAProbeWaitsDoesNotCallTheSubscriptionDeaf() async throws {
        let (c, s, inbox, events) = await probedSubscription("starved", commandTimeout: 0.8)
        let loop: EventLoop = self.loop
        startLagProbe(every: 0.02)

        server.stop()
        var ok = await TopologyTesting.eventually {  // the next probe is sent to the stopped Redis
            await c.onLoop { s.links.values.contains { $0.pendingProbe != nil } }
        }
        XCTAssertTrue(ok, "a probe waits")
        let seen = Date()
        loop.execute { usleep(500_000) }  // the loop starved while the probe waits
        try await Task.sleep(nanoseconds: UInt64(max(0, 0.82 - Date().timeIntervalSince(seen)) * 1e9))
        server.signal(SIGCONT)
        _ = await spublish(s, "starved", "after")
        ok = await TopologyTesting.eventually { inbox.payloads(on: "starved") == ["after"] }
        XCTAssertTrue(ok)
        XCTAssertFalse(events.all.contains { if case .subscriptionDeaf = $0 { true } else { false } }, "\(events.all)")
        XCTAssertEqual(c.metrics[.probeFailures], 0)
        XCTAssertEqual(inbox.confirmations(of: "starved"), 1, "never subscribed again")
        await c.onLoop { s.close() }
        await c.closeFromAnyThread()
    }

    /// A stall of the whole host (this process and Redis paused together for 0.6 s, longer than the probe's
    /// 0.4 s time-out) does not call a subscription deaf: a probe sent to the stopped Redis is overdue when
    /// the loop looks again, and nothing came on the connection for longer than the limit, but Redis,
    /// paused too, had no time to answer (a 50 ms script another connection sent first holds it). The
    /// verdict waits a grace and the probe comes back in it. Before: "probe not back within 0.4 s", the
    /// connection made again and every channel on it subscribed again.
    func testAStallOfTheWholeHostDoesNotCallASubscriptionDeaf() async throws {
        let (c, s, inbox, events) = await probedSubscription("stall", commandTimeout: 0.4)
        var config = RedisConfiguration(url: server.url)!
        config.commandTimeout = 5
        let slow = RedisConnection(loop: loop, configuration: config)
        slow.startFromAnyThread()
        var ok = await waitForState(slow, .ready)
        XCTAssertTrue(ok)

        server.stop()
        ok = await TopologyTesting.eventually {  // the next probe is sent to the stopped Redis
            await c.onLoop { s.links.values.contains { $0.pendingProbe != nil } }
        }
        XCTAssertTrue(ok, "a probe waits")
        try await sendThenStall(for: 0.6) {
            slow.send(["EVAL", RedisArg(RedisCommandTimeoutTests.slowScript), 0, 50_000]) { _ in }
        }
        _ = await slow.send(["PING"])  // Redis runs again; the next probes go round
        _ = await spublish(s, "stall", "after")
        ok = await TopologyTesting.eventually { inbox.payloads(on: "stall") == ["after"] }
        XCTAssertTrue(ok)
        XCTAssertFalse(events.all.contains { if case .subscriptionDeaf = $0 { true } else { false } }, "\(events.all)")
        XCTAssertEqual(c.metrics[.probeFailures], 0)
        XCTAssertEqual(inbox.confirmations(of: "stall"), 1, "never subscribed again")
        await c.onLoop { s.close() }
        await slow.closeFromAnyThread()
        await c.closeFromAnyThread()
    }

    /// A client through `proxy` (command time-out 1 s, probe every 0.25 s) whose subscriber has subscribed to
    /// `channel` and is healthy; the events it reports are collected.
    func subscribedThrough(_ proxy: FreezingProxy, channel: String) async -> (
        RedisClient, RedisShardedSubscriber, Inbox, EventLog
    ) {
        let c = TopologyTesting.client("redis://127.0.0.1:\(proxy.port)", on: loop, commandTimeout: 1) {
            $0.probeInterval = 0.25
        }
        c.startFromAnyThread()
        let ready = await TopologyTesting.eventually { c.isReady }
        XCTAssertTrue(ready)
        let s = RedisShardedSubscriber(client: c)
        let (inbox, events) = (Inbox(), EventLog())
        await c.onLoop {
            c.onEvent = { events.add($0) }
            s.start()
        }
        await subscribe(s, channel, inbox)
        let subscribed = await TopologyTesting.eventually { inbox.confirmations(of: channel) == 1 && s.isHealthy }
        XCTAssertTrue(subscribed)
        return (c, s, inbox, events)
    }

    /// A Redis that answers, but slowly (its confirmations trickle in over twice the command time-out):
    /// the subscription connection is kept and every confirmation comes on it. Dropping it at the first
    /// late confirmation subscribed every channel again on a Redis already behind: a cascade
    /// (117 subscription connections dropped this way in the 6 x 17,000-stream run).
    func testASlowButAnsweringRedisKeepsTheSubscriptionConnection() async throws {
        let proxy = try FreezingProxy(targetPort: server.port)
        defer { proxy.stop() }
        // The probe, too, must tell a busy connection from a deaf one.
        let (c, s, inbox, events) = await subscribedThrough(proxy, channel: "slow:0")
        XCTAssertEqual(proxy.slowDown(toBytesPerTick: 200) { FreezingProxy.contains($0, "SSUBSCRIBE") }, 1)
        var ok: Bool
        // 100 confirmations of ~40 bytes: ~4,000 bytes at 200 per 0.1 s, about twice the command time-out.
        let channels = (1...100).map { "slow:\($0)" }
        let sentAt = Date()
        for channel in channels { await subscribe(s, channel, inbox) }
        ok = await TopologyTesting.eventually(within: 15) {
            channels.allSatisfy { inbox.confirmations(of: $0) == 1 }
        }
        XCTAssertTrue(ok, "every confirmation came")
        let took = Date().timeIntervalSince(sentAt)
        XCTAssertGreaterThan(took, 1.2, "slower than the command time-out, or the test shows nothing")
        XCTAssertEqual(inbox.confirmations(of: "slow:0"), 1, "never subscribed again: the connection was kept")
        XCTAssertFalse(events.all.contains { if case .subscriptionDeaf = $0 { true } else { false } })
        XCTAssertEqual(c.metrics[.probeFailures], 0)
        await c.onLoop { s.close() }
        await c.closeFromAnyThread()
    }

    /// A probe whose publish times out (it reaches Redis late: the command connection is slow) while the
    /// subscription keeps delivering other messages is no verdict on the subscription: it is not called
    /// deaf nor made again. (Under load, publish time-outs called busy subscriptions deaf, and each was made
    /// again with all its channels.)
    func testAProbeWhosePublishTimesOutDoesNotCallABusySubscriptionDeaf() async throws {
        let proxy = try FreezingProxy(targetPort: server.port)
        defer { proxy.stop() }
        let (c, s, inbox, events) = await subscribedThrough(proxy, channel: "busy")
        // Another client (straight to Redis) keeps the subscription busy: a message every 50 ms.
        let publisher = await readyClient()
        var ok: Bool
        let publishing = Task {
            var n = 0
            while !Task.isCancelled {
                n += 1
                _ = await publisher.send(["SPUBLISH", "busy", RedisArg("m\(n)")], key: RedisArg("busy"))
                try? await Task.sleep(nanoseconds: 50_000_000)
            }
        }
        ok = await TopologyTesting.eventually { inbox.payloads(on: "busy").count >= 3 }
        XCTAssertTrue(ok)
        // The command connection's commands now reach Redis late: 3 bytes every 0.1 s, so a probe's publish
        // (~60 bytes) times out before Redis runs it, while its replies keep coming (no stall).
        ok = await TopologyTesting.eventually {
            proxy.slowDown(toBytesPerTick: 3, clientBytes: true) {
                FreezingProxy.contains($0, "SPUBLISH") && !FreezingProxy.contains($0, "SSUBSCRIBE")
            } == 1
        }
        XCTAssertTrue(ok, "the command connection slowed")
        ok = await TopologyTesting.eventually(within: 15) {
            events.all.contains { if case .connection(_, .timedOut) = $0 { true } else { false } }
        }
        XCTAssertTrue(ok, "a probe's publish timed out")
        let received = inbox.payloads(on: "busy").count
        ok = await TopologyTesting.eventually(within: 5) { inbox.payloads(on: "busy").count >= received + 20 }
        XCTAssertTrue(ok, "the subscription kept delivering")
        publishing.cancel()
        XCTAssertFalse(events.all.contains { if case .subscriptionDeaf = $0 { true } else { false } })
        XCTAssertEqual(inbox.confirmations(of: "busy"), 1, "never subscribed again")
        await c.onLoop { s.close() }
        await c.closeFromAnyThread()
        await publisher.closeFromAnyThread()
    }
}

/// A count any thread may add to (test callbacks run on the client's loop).
final class Counter: Sendable {
    private let count = Lock(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
