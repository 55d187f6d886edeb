import ClusterRedis
import ClusterStore
import EventLoop
import Foundation
import RedisClient
import RedisTestSupport
import XCTest

/// Counts upstream calls from concurrent tasks.
actor CallCounter {
    private(set) var calls = 0
    func increment() { calls += 1 }
}

struct UpstreamFailed: Error {}

final class RedisSearchCacheTests: XCTestCase {
    var server: RedisServerProcess!
    var loops: [EventLoop] = []
    var nodes: [RedisSearchCache] = []

    /// Three "nodes": each a loop with its own command connection, subscriber and cache.
    override func setUp() async throws {
        server = try RedisServerProcess()
    }

    func startNodes(_ limits: RedisSearchCache.Limits = RedisSearchCache.Limits()) async {
        for _ in 0..<3 {
            let loop = startedLoop()
            let (c, s) = await startedClient(server.url, on: loop)
            let cache = RedisSearchCache(client: c, subscriber: s, limits: limits, keys: ClusterKeys(prefix: "t"))
            let (subscribed, done) = AsyncStream<Void>.makeStream()
            loop.execute { cache.start(onSubscribed: { done.yield() }) }
            var it = subscribed.makeAsyncIterator()
            _ = await it.next()
            loops.append(loop)
            nodes.append(cache)
        }
    }

    override func tearDown() async throws {
        for (loop, node) in zip(loops, nodes) {
            await close(node.client, node.subscriber)
            loop.stop()
        }
        server.kill()
    }

    func testThreeNodesOneUpstreamCall() async throws {
        await startNodes()
        let counter = CallCounter()
        let started = Date()
        let results = try await withThrowingTaskGroup(of: (CachedPage, CacheOutcome).self) { group in
            for (i, node) in nodes.enumerated() {
                group.addTask {
                    try await node.getOrFill("q=swift", holder: "node\(i)", freshFor: 60, waitTimeout: 30) {
                        await counter.increment()
                        try await Task.sleep(nanoseconds: 200_000_000)  // the upstream call's latency
                        return Array("page".utf8)
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let calls = await counter.calls
        XCTAssertEqual(calls, 1, "identical concurrent searches on three nodes cost one upstream call")
        XCTAssertEqual(Set(results.map(\.0.payload)), [Array("page".utf8)])
        XCTAssertEqual(results.map(\.1).filter { $0 == .filled }.count, 1)
        // The others waited for the wake-up (or, on a very slow machine, arrived after the fill: a hit).
        XCTAssertEqual(results.map(\.1).filter { $0 == .filledByOther || $0 == .hit }.count, 2)
        // Woken by the fill's PUBLISH, not by their 30 s wait running out (which would also end in a hit).
        XCTAssertLessThan(Date().timeIntervalSince(started), 15, "waiters were not woken by the fill")
        let hit = try await nodes[2].getOrFill("q=swift", holder: "node2", freshFor: 60, waitTimeout: 5) {
            XCTFail("a fresh entry is served without an upstream call")
            return []
        }
        XCTAssertEqual(hit.1, .hit)
        XCTAssertLessThan(hit.0.age, 5)
    }

    /// The caller that fetches is handed the expired entry (to revalidate it with its ETag).
    func testTheFetchIsHandedTheExpiredEntryToRevalidate() async throws {
        await startNodes()
        _ = await nodes[0].fill("q=etag", payload: Array("v1".utf8), holder: "x")
        let (page, outcome) = try await nodes[1].getOrFill(
            "q=etag", holder: "n1", freshFor: 0, waitTimeout: 1
        ) { (expired: CachedPage?) async throws -> [UInt8] in
            XCTAssertEqual(expired?.payload, Array("v1".utf8))
            return expired?.payload ?? []  // "304": the same page again
        }
        XCTAssertEqual(outcome, .filled)
        XCTAssertEqual(page.payload, Array("v1".utf8))
    }

    func testStaleEntryIsServedWhenUpstreamFails() async throws {
        await startNodes()
        _ = await nodes[0].fill("q=old", payload: Array("old".utf8), holder: "x")
        let (page, outcome) = try await nodes[1].getOrFill("q=old", holder: "n1", freshFor: 0, waitTimeout: 1) {
            throw UpstreamFailed()
        }
        XCTAssertEqual(outcome, .stale)
        XCTAssertEqual(page.payload, Array("old".utf8))
        let locked = try await nodes[2].lock("q=old", holder: "n2").get()
        XCTAssertTrue(locked, "the failed fetch released its lock")
    }

    func testADeadLockHolderDelaysButDoesNotBlock() async throws {
        await startNodes(RedisSearchCache.Limits(maxAge: 60, lockTTL: 0.3))
        let taken = try await nodes[0].lock("q=dead", holder: "dead-node").get()
        XCTAssertTrue(taken)
        let started = Date()
        let (page, outcome) = try await nodes[1].getOrFill("q=dead", holder: "n1", freshFor: 60, waitTimeout: 0.5) {
            Array("mine".utf8)
        }
        XCTAssertEqual(outcome, .lockTimedOut, "the wait for the dead holder's fill ran out")
        XCTAssertEqual(page.payload, Array("mine".utf8))
        XCTAssertLessThan(Date().timeIntervalSince(started), 2)
    }

    func testEntriesAndLocksExpire() async throws {
        await startNodes(RedisSearchCache.Limits(maxAge: 120, lockTTL: 15))
        _ = try await nodes[0].lock("k", holder: "a").get()
        _ = await nodes[0].fill("k2", payload: [1], holder: "a")
        let c = nodes[0].client
        for key in ["t:c:{k}:lock", "t:c:{k2}"] {
            let ttl = try await c.send(["PTTL", RedisArg(key)]).get().int ?? -1
            XCTAssertGreaterThan(ttl, 0, key)
            XCTAssertLessThanOrEqual(ttl, 120_000, key)
        }
    }
}
