import ClusterRedis
import ClusterStore
import EventLoop
import Foundation
import RedisClient
import RedisTestSupport
import XCTest

/// `RedisClientLedger` on a real Redis, two clients playing two nodes: a client's limits are counted once
/// across them, its sessions stop counting when released or when their deadline passes unrefreshed.
final class RedisClientLedgerTests: TwoClientRedisTestCase {
    func ledgers(rate: Double = 1000, burst: Double = 1000, maxLive: Int = 1000, countedMs: Int = 60_000)
        -> [RedisClientLedger]
    {
        let limits = RedisClientLedger.Limits(
            ratePerSecond: rate, burst: burst, maxLive: maxLive, countedMilliseconds: countedMs)
        return connections.map { RedisClientLedger(client: $0, keys: ClusterKeys(prefix: "t"), limits: limits) }
    }

    func reserve(_ l: RedisClientLedger, _ client: String, _ session: String) async throws
        -> RedisClientLedger.Decision
    {
        try await withCheckedContinuation { k in
            l.client.loop.execute { l.reserve(client: client, session: session) { k.resume(returning: $0) } }
        }.get()
    }

    func release(_ l: RedisClientLedger, _ client: String, _ session: String) async throws {
        try await withCheckedContinuation { k in
            l.client.loop.execute { l.release(client: client, session: session) { k.resume(returning: $0) } }
        }.get()
    }

    func refresh(_ l: RedisClientLedger, _ entries: [(client: String, sessions: [String])]) async throws {
        try await withCheckedContinuation { k in
            l.client.loop.execute { l.refresh(entries) { k.resume(returning: $0) } }
        }.get()
    }

    func counted(_ client: String) async throws -> Int {
        try await connections[0].send(["ZCARD", RedisArg(ClusterKeys(prefix: "t").clientSessions(client))]).get().int
            .map(Int.init) ?? -1
    }

    func testLiveSessionsAreCountedOnceAcrossNodes() async throws {
        let nodes = ledgers(maxLive: 3)
        var answers: [RedisClientLedger.Decision] = []
        for i in 0..<4 { answers.append(try await reserve(nodes[i % 2], "127.0.0.2", "s\(i)")) }
        XCTAssertEqual(answers, [.allowed(live: 1), .allowed(live: 2), .allowed(live: 3), .live(max: 3)])
        let other = try await reserve(nodes[1], "127.0.0.3", "o1")
        XCTAssertEqual(other, .allowed(live: 1), "another client keeps its own count")
        try await release(nodes[1], "127.0.0.2", "s1")  // released by another node than the one that counted it
        let again = try await reserve(nodes[0], "127.0.0.2", "s4")
        XCTAssertEqual(again, .allowed(live: 3))
    }

    func testCreationRateIsOneBucketAcrossNodes() async throws {
        let nodes = ledgers(rate: 0.1, burst: 3)
        var allowed = 0
        var refusal: RedisClientLedger.Decision?
        for i in 0..<6 {
            let d = try await reserve(nodes[i % 2], "10.0.0.1", "s\(i)")
            if case .allowed = d { allowed += 1 } else { refusal = d }
        }
        XCTAssertEqual(allowed, 3, "two nodes together grant one burst")
        guard case .rate(let ms) = refusal else { return XCTFail("refused for \(String(describing: refusal))") }
        XCTAssertGreaterThan(ms, 5_000)
        XCTAssertLessThanOrEqual(ms, 10_000)
        let ttl =
            try await connections[0].send(["PTTL", RedisArg(ClusterKeys(prefix: "t").clientBucket("10.0.0.1"))])
            .get().int ?? -1
        XCTAssertGreaterThan(ttl, 0, "the bucket expires once full again")
        XCTAssertLessThanOrEqual(ttl, 31_000)
    }

    func testUnrefreshedSessionsStopCountingRefreshedOnesStay() async throws {
        let node = ledgers(countedMs: 1000)[0]
        _ = try await reserve(node, "c", "kept")
        _ = try await reserve(node, "c", "dropped")
        _ = try await reserve(node, "c", "released")
        try await release(node, "c", "released")
        let countedNow = try await counted("c")
        XCTAssertEqual(countedNow, 2)
        // Refresh "kept" (and "released", which must not come back) until "dropped"'s deadline has passed.
        let start = Date()
        var reservedAfter: RedisClientLedger.Decision?
        while Date().timeIntervalSince(start) < 5 {
            try await refresh(node, [(client: "c", sessions: ["kept", "released"])])
            // A reservation drops the entries whose time is up before counting.
            let d = try await reserve(node, "c", "probe")
            try await release(node, "c", "probe")
            if d == .allowed(live: 2) {
                reservedAfter = d
                break
            }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        XCTAssertEqual(reservedAfter, .allowed(live: 2), "'dropped' stopped counting, 'kept' did not")
        let members = try await connections[0].send([
            "ZRANGE", RedisArg(ClusterKeys(prefix: "t").clientSessions("c")), "0", "-1",
        ]).get().array?.compactMap(\.string)
        XCTAssertEqual(members, ["kept"], "a released session is not brought back by a refresh")
        let ttl =
            try await connections[0].send(["PTTL", RedisArg(ClusterKeys(prefix: "t").clientSessions("c"))])
            .get().int ?? -1
        XCTAssertGreaterThan(ttl, 0)
        XCTAssertLessThanOrEqual(ttl, 2_000, "the key lives no longer than its latest deadline")
    }

    func testRefreshOfManyClientsIsOneCall() async throws {
        let node = ledgers()[0]
        for i in 0..<50 { _ = try await reserve(node, "client-\(i)", "s\(i)") }
        func evalsha() async throws -> Int {
            let info = try await connections[0].send(["INFO", "commandstats"]).get().string ?? ""
            let line = info.split(whereSeparator: \.isNewline).first { $0.hasPrefix("cmdstat_evalsha:calls=") } ?? ""
            return Int(line.dropFirst("cmdstat_evalsha:calls=".count).prefix { $0.isNumber }) ?? 0
        }
        let before = try await evalsha()
        try await refresh(node, (0..<50).map { (client: "client-\($0)", sessions: ["s\($0)"]) })
        let after = try await evalsha()
        XCTAssertEqual(after - before, 1, "50 clients on one Redis: one script call")
    }
}
