import ClusterRedis
import ClusterStore
import EventHTTP
import Foundation
import RedisClient
import RedisTestSupport
import XCTest

final class RedisSessionStoreTests: XCTestCase {
    var server: RedisServerProcess!
    var loop: EventLoop!
    var connection: RedisConnection!
    let keys = ClusterKeys(prefix: "t")

    override func setUp() async throws {
        server = try RedisServerProcess()
        loop = startedLoop()
        connection = RedisConnection(loop: loop, configuration: RedisConfiguration(url: server.url)!)
        connection.startFromAnyThread()
        let ready = await waitForState(connection, .ready)
        XCTAssertTrue(ready)
    }

    override func tearDown() async throws {
        await connection.closeFromAnyThread()
        loop.stop()
        server.kill()
    }

    func harness(history: Int = 256) -> SessionStoreHarness {
        let store = RedisSessionStore(
            connection: connection, limits: SessionStoreLimits(historyEvents: history), keys: keys)
        let connection = self.connection!
        let keys = self.keys
        return SessionStoreHarness(loop: loop, store: store) { id in
            _ = await connection.send(["DEL", RedisArg(keys.lease(id))])
        }
    }

    func testCreateCommitReplay() async throws { try await SessionStoreContract.createCommitReplay(harness()) }
    func testLeaseFencingAndTakeover() async throws {
        try await SessionStoreContract.leaseFencingAndTakeover(harness())
    }

    func testHistoryIsBounded() async throws {
        try await SessionStoreContract.historyIsBounded(harness(history: 10), history: 10)
        let len = await connection.send(["XLEN", RedisArg(keys.events("c"))])
        let n = try len.get().int ?? 0
        XCTAssertEqual(n, 10, "exact MAXLEN: the history is the last 10 events")
    }

    func testEveryKeyHasAnExpiry() async throws {
        let h = harness()
        let lease = try await h.create("x", "n").get()
        _ = try await h.commit(lease, ["e"], state: "s", input: true, key: "k").get()
        let all = try await connection.send(["KEYS", "t:*"]).get().array ?? []
        XCTAssertEqual(all.count, 4, "session, lease, events, idempotency key: \(all)")
        for key in all {
            let ttl = try await connection.send(["PTTL", RedisArg(bytes: key.bytes ?? [])]).get().int ?? -1
            XCTAssertGreaterThan(ttl, 0, "\(key.string ?? "") must expire")
            XCTAssertLessThanOrEqual(ttl, 1800 * 1000)
        }
    }

    func testCommitPublishesTheSameEventItAppends() async throws {
        let h = harness()
        let lease = try await h.create("p", "n").get()
        let subscriber = RedisSubscriber(loop: loop, configuration: RedisConfiguration(url: server.url)!)
        let feed = RedisSessionEventFeed(subscriber: subscriber, keys: keys)
        let (stream, out) = AsyncStream<StoredEvent?>.makeStream()
        var seen = stream.makeAsyncIterator()
        loop.execute {
            subscriber.start()
            feed.subscribe(sessionID: "p", onSubscribed: { out.yield(nil) }) { out.yield($0) }
        }
        let subscribed = await seen.next()
        XCTAssertEqual(subscribed, .some(nil))
        let c = try await h.commit(lease, ["one", "two"], state: "s").get()
        let live1 = await seen.next()
        let live2 = await seen.next()
        XCTAssertEqual(live1, StoredEvent(id: c.eventIDs[0], payload: Array("one".utf8)))
        XCTAssertEqual(live2, StoredEvent(id: c.eventIDs[1], payload: Array("two".utf8)))
        let fromFirst = try await h.replay("p", after: c.eventIDs[0]).get()
        XCTAssertEqual(fromFirst, .events([live2!!]))
        loop.execute { subscriber.close() }
    }

    func testUnreachableRedisIsUnavailable() async throws {
        let h = harness()
        server.kill()
        _ = await waitForState(connection, .disconnected)
        let r = await h.load("x")
        guard case .failure(.unavailable) = r else { return XCTFail("\(r)") }
    }

    func testCommitCost() async throws {
        let h = harness()
        let lease = try await h.create("bench", "n").get()
        let state = String(repeating: "x", count: 2000)
        let n = 2000
        let started = Date()
        for i in 0..<n {
            _ = try await h.commit(lease, ["{\"event\":\(i)}"], state: state, input: true, key: "k\(i)").get()
        }
        let elapsed = Date().timeIntervalSince(started)
        let stats = try await connection.send(["INFO", "commandstats"]).get().string ?? ""
        let line = stats.split(separator: "\r\n").first { $0.hasPrefix("cmdstat_evalsha:") } ?? ""
        print(
            "commit (1 event, 2 KB state, idempotency key): \(elapsed / Double(n) * 1e6) µs per call from a task; "
                + "redis \(line)")
    }

    /// A streamed session's check is one round trip: an acquisition, granted or refused, renews the
    /// idle expiry of the session and its history; `touch` does the same for the node running it.
    func testEveryAcquisitionAttemptAndTouchRenewTheIdleExpiry() async throws {
        let h = harness()
        let lease = try await h.create("w", "node-a").get()
        _ = try await h.commit(lease, ["e"], state: "s").get()
        func shorten() async throws {
            for key in [keys.session("w"), keys.events("w")] {
                let set = try await connection.send(["EXPIRE", RedisArg(key), "5"]).get().int
                XCTAssertEqual(set, 1)
            }
        }
        func assertRenewed(_ why: String) async throws {
            for key in [keys.session("w"), keys.events("w")] {
                let ttl = try await connection.send(["TTL", RedisArg(key)]).get().int ?? -1
                XCTAssertGreaterThan(ttl, 1000, "\(why): \(key)")
            }
        }
        try await shorten()
        guard case .heldBy = try await h.acquire("w", "node-b").get() else { return XCTFail("A holds it") }
        try await assertRenewed("a refused acquisition")
        try await shorten()
        let touched: Result<Bool, StoreError> = await h.call { s, done in
            (s as! RedisSessionStore).touch(sessionID: "w", completion: done)
        }
        XCTAssertEqual(touched, .success(true))
        try await assertRenewed("touch")
        let gone: Result<Bool, StoreError> = await h.call { s, done in
            (s as! RedisSessionStore).touch(sessionID: "nobody", completion: done)
        }
        XCTAssertEqual(gone, .success(false))
    }
}

final class RedisLeaseExpiryTests: XCTestCase {
    /// The lease really expires in Redis (PX), with no help from the test: node A stops renewing
    /// (as if SIGSTOPped), B takes over after the TTL, A's later commit is fenced.
    func testAnUnrenewedLeaseExpiresAndItsHolderIsFenced() async throws {
        let server = try RedisServerProcess()
        let loop = startedLoop()
        let connection = RedisConnection(loop: loop, configuration: RedisConfiguration(url: server.url)!)
        defer {
            loop.stop()
            server.kill()
        }
        connection.startFromAnyThread()
        _ = await waitForState(connection, .ready)
        let store = RedisSessionStore(
            connection: connection, limits: SessionStoreLimits(leaseMilliseconds: 150), keys: ClusterKeys(prefix: "t"))
        let h = SessionStoreHarness(loop: loop, store: store) { _ in }
        let a = try await h.create("z", "node-a").get()
        let early = try await h.acquire("z", "node-b").get()
        guard case .heldBy = early else { return XCTFail("\(early)") }
        try await Task.sleep(nanoseconds: 200_000_000)  // waiting for the TTL itself
        let late = try await h.acquire("z", "node-b").get()
        guard case .acquired(let b, _) = late else { return XCTFail("\(late)") }
        XCTAssertEqual(b.token, 2)
        let zombie = await h.commit(a, ["late"], state: "zombie")
        XCTAssertEqual(zombie, .failure(.fenced))
        await connection.closeFromAnyThread()
    }
}
