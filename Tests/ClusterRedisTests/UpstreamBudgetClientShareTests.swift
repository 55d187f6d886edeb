import ClusterRedis
import ClusterStore
import Foundation
import RedisClient
import XCTest

/// The fair share every `UpstreamBudget` keeps, run on the Redis one (two nodes, one Redis) and on its
/// in-memory twin with the same numbers: a client's cap binds only while another client has asked within
/// the last window; alone it may take the whole bucket; a refusal for the share takes no token.
enum BudgetShareContract {
    /// A bucket of 12 refilled over 1000 s (time barely moves during the test: Redis's clock is real).
    static let shape = TokenBucketShape(capacity: 12, refillPerSecond: 0.012)
    static let heavy = BudgetClient(key: "127.0.0.2", share: 0.5, of: shape)  // cap 6
    static let other = BudgetClient(key: "127.0.0.1", share: 0.5, of: shape)

    /// `nodes` share one budget (one node or several); takes are spread over them.
    static func aloneThenShared(_ nodes: [any UpstreamBudget]) async throws {
        XCTAssertEqual(heavy.cap, 6)
        var n = 0
        func take(_ client: BudgetClient?) async throws -> BudgetDecision {
            n += 1
            return try await nodes[n % nodes.count].take(cost: 1, client: client).get()
        }
        let nobody = try await take(nil)
        XCTAssertTrue(nobody.allowed, "a call charged to nobody")
        for i in 0..<8 {
            let d = try await take(heavy)
            XCTAssertTrue(
                d.allowed, "alone, call \(i + 1) (past its cap of 6): a call charged to nobody is not another client")
        }
        let newcomer = try await take(other)
        XCTAssertTrue(newcomer.allowed)
        let refused = try await take(heavy)
        XCTAssertEqual(refused.refusal, .clientShare, "8 of 12 is past its share once someone else asks")
        XCTAssertEqual(refused.remaining, 2, "a refusal for the share takes no token")
        XCTAssertGreaterThan(refused.retryAfter, 990, "until its window ends (it began before the other asked)")
        XCTAssertLessThanOrEqual(refused.retryAfter, 1000)
        for i in 0..<2 {
            let d = try await take(other)
            XCTAssertTrue(d.allowed, "what is left is the other's (\(i))")
        }
        let empty = try await take(other)
        XCTAssertEqual(empty.refusal, .budget, "the bucket is empty, for everyone")
        let still = try await take(heavy)
        XCTAssertEqual(still.refusal, .clientShare, "the share is checked before the bucket")
    }
}

/// A client's fair share of the cluster-wide bucket (`BudgetClient`): counted across every node, binding
/// only while others ask, refused before any token is taken, forgotten when its window ends.
extension RedisUpstreamBudgetTests {
    /// The client's counter key in Redis (the bucket is `t:rl:{gh}`).
    func counterKey(_ client: String) -> RedisArg { RedisArg(ClusterKeys(prefix: "t").rateLimitClient("gh", client)) }
    var askersKey: RedisArg { RedisArg("t:rl:{gh}:askers") }

    /// Redis's clock, in ms (what the scripts read).
    func redisNow() async throws -> Int {
        let t = try await connections[0].send(["TIME"]).get().array ?? []
        let parts = t.compactMap { $0.bytes.flatMap { Int(String(decoding: $0, as: UTF8.self)) } }
        XCTAssertEqual(parts.count, 2)
        return parts[0] * 1000 + parts[1] / 1000
    }

    func testTheShareContractOnTwoNodes() async throws {
        let nodes = budgets(BudgetShareContract.shape)
        try await BudgetShareContract.aloneThenShared(nodes)
        let count = try await connections[1].send(["GET", counterKey("127.0.0.2")]).get().int
        XCTAssertEqual(count, 8, "refused calls are not counted")
        let ttl = try await connections[0].send(["PTTL", counterKey("127.0.0.2")]).get().int ?? -1
        XCTAssertGreaterThan(ttl, 990_000, "the counter expires with the client's window")
        XCTAssertLessThanOrEqual(ttl, 1_000_000)
        let askers = try await connections[0].send(["HMGET", askersKey, "k1", "k2"]).get().array ?? []
        XCTAssertEqual(
            askers.map { $0.bytes.map { String(decoding: $0, as: UTF8.self) } }, ["127.0.0.2", "127.0.0.1"],
            "the latest asker, and the latest other one")
        let askersTTL = try await connections[0].send(["PTTL", askersKey]).get().int ?? -1
        XCTAssertGreaterThan(askersTTL, 990_000, "the askers go a window after the latest ask")
        XCTAssertLessThanOrEqual(askersTTL, 1_000_000)
    }

    /// The other client's ask binds the heavy one for one window: just inside it the refusal's wait is the
    /// rest of that window (not the counter's, much longer); just past it the heavy client is alone again.
    /// The ask's age is written into the askers hash (Redis's clock cannot be moved).
    func testAnotherClientsAskBindsForOneWindow() async throws {
        let nodes = budgets(TokenBucketShape(capacity: 10, refillPerSecond: 0.01))  // a window of 1000 s
        let heavy = BudgetClient(key: "127.0.0.2", cap: 2, windowSeconds: 1000)
        let other = try await nodes[1].take(
            cost: 1, client: BudgetClient(key: "127.0.0.1", cap: 2, windowSeconds: 1000)
        ).get()
        XCTAssertTrue(other.allowed)
        for _ in 0..<2 {
            let d = try await nodes[0].take(cost: 1, client: heavy).get()
            XCTAssertTrue(d.allowed)
        }
        let capped = try await nodes[1].take(cost: 1, client: heavy).get()
        XCTAssertEqual(capped.refusal, .clientShare)
        _ = try await connections[0].send([
            "HSET", askersKey, "k2", "127.0.0.1", "t2", RedisArg(try await redisNow() - 999_500),
        ]).get()
        let soon = try await nodes[0].take(cost: 1, client: heavy).get()
        XCTAssertEqual(soon.refusal, .clientShare)
        XCTAssertGreaterThan(soon.retryAfter, 0)
        XCTAssertLessThanOrEqual(soon.retryAfter, 0.5, "until the other's ask is a window old")
        _ = try await connections[0].send([
            "HSET", askersKey, "k2", "127.0.0.1", "t2", RedisArg(try await redisNow() - 1_000_001),
        ]).get()
        let alone = try await nodes[1].take(cost: 1, client: heavy).get()
        XCTAssertTrue(alone.allowed, "nobody else asked within a window: not capped")
        let count = try await connections[0].send(["GET", counterKey("127.0.0.2")]).get().int
        XCTAssertEqual(count, 3, "counted all the same")
    }

    func testTheCounterExpiresWithItsWindowAndTheClientCallsAgain() async throws {
        let nodes = budgets(TokenBucketShape(capacity: 10, refillPerSecond: 0.01))
        let client = BudgetClient(key: "203.0.113.9", cap: 2, windowSeconds: 0.3)
        for i in 0..<2 {
            let d = try await nodes[i].take(cost: 1, client: client).get()
            XCTAssertTrue(d.allowed)
        }
        // Another client asks, so the cap binds (for the client's window, 0.3 s, from that ask).
        _ = try await nodes[1].take(cost: 1, client: BudgetClient(key: "203.0.113.10", cap: 5, windowSeconds: 1000))
            .get()
        let refused = try await nodes[0].take(cost: 1, client: client).get()
        XCTAssertEqual(refused.refusal, .clientShare)
        XCTAssertLessThanOrEqual(refused.retryAfter, 0.3)
        // Waiting for Redis to expire the key (the event), polled with a deadline.
        let deadline = Date().addingTimeInterval(5)
        while try await connections[0].send(["EXISTS", counterKey("203.0.113.9")]).get().int == 1 {
            XCTAssertLessThan(Date(), deadline, "the counter key never expired")
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        let again = try await nodes[1].take(cost: 1, client: client).get()
        XCTAssertTrue(again.allowed, "a new window")
        let count = try await connections[0].send(["GET", counterKey("203.0.113.9")]).get().int
        XCTAssertEqual(count, 1)
    }

    func testABlockOrAnEmptyBucketIsRefusedForEveryoneAndCountsNothingAgainstTheClient() async throws {
        let nodes = budgets(TokenBucketShape(capacity: 2, refillPerSecond: 0.01))
        let client = BudgetClient(key: "127.0.0.2", cap: 5, windowSeconds: 100)
        for _ in 0..<2 {
            let d = try await nodes[0].take(cost: 1, client: client).get()
            XCTAssertTrue(d.allowed)
        }
        let empty = try await nodes[1].take(cost: 1, client: client).get()
        XCTAssertEqual(empty.refusal, .budget, "under its cap: the bucket refused, for everyone")
        XCTAssertGreaterThan(empty.retryAfter, 90)
        _ = try await nodes[0].correct(remaining: nil, blockedUntil: Date().timeIntervalSince1970 + 5).get()
        let blocked = try await nodes[1].take(cost: 1, client: client).get()
        XCTAssertEqual(blocked.refusal, .budget)
        XCTAssertLessThanOrEqual(blocked.retryAfter, 5.1)
        let count = try await connections[0].send(["GET", counterKey("127.0.0.2")]).get().int
        XCTAssertEqual(count, 2, "only the allowed calls")
        // An ask refused by the block is still an ask: it makes the share bind for the heavy client.
        let newcomer = try await nodes[0].take(
            cost: 1, client: BudgetClient(key: "127.0.0.1", cap: 5, windowSeconds: 100)
        ).get()
        XCTAssertEqual(newcomer.refusal, .budget)
        let latest = try await connections[0].send(["HGET", askersKey, "k1"]).get().bytes
        XCTAssertEqual(latest.map { String(decoding: $0, as: UTF8.self) }, "127.0.0.1")
    }
}

extension InMemoryUpstreamBudgetTests {
    func testTheShareContract() async throws {
        let clock = TestClock()
        let budget = InMemoryUpstreamBudget(shape: BudgetShareContract.shape) { Double(clock.now) / 1000 }
        try await BudgetShareContract.aloneThenShared([budget])
    }

    func testAClientsCapBindsWhileOthersAskAndEndedWindowsAreForgotten() async throws {
        let clock = TestClock()
        let shape = TokenBucketShape(capacity: 10, refillPerSecond: 0.1)  // a window of 100 s
        let budget = InMemoryUpstreamBudget(shape: shape) { Double(clock.now) / 1000 }
        let flooder = BudgetClient(key: "127.0.0.2", share: 0.5, of: shape)
        let other = BudgetClient(key: "127.0.0.3", share: 0.5, of: shape)
        let first = try await budget.take(cost: 1, client: other).get()
        XCTAssertTrue(first.allowed)
        clock.advance(10_000)
        var decisions: [BudgetDecision] = []
        for _ in 0..<7 { decisions.append(try await budget.take(cost: 1, client: flooder).get()) }
        XCTAssertEqual(decisions.map(\.allowed), [true, true, true, true, true, false, false])
        XCTAssertEqual(decisions.last?.refusal, .clientShare)
        XCTAssertEqual(decisions.last?.remaining, 5, "no token taken by a refusal")
        XCTAssertEqual(decisions.last?.retryAfter ?? 0, 90, accuracy: 1e-9, "until the other's ask is 100 s old")
        clock.advance(40_000)
        let again = try await budget.take(cost: 1, client: other).get()
        XCTAssertTrue(again.allowed, "the other still gets tokens")
        let later = try await budget.take(cost: 1, client: flooder).get()
        XCTAssertEqual(later.refusal, .clientShare)
        XCTAssertEqual(later.retryAfter, 60, accuracy: 1e-9, "its fixed window from its first call ends first")
        clock.advance(60_000)
        let next = try await budget.take(cost: 1, client: flooder).get()
        XCTAssertTrue(next.allowed, "its window ended")
        // Rotating addresses: windows that ended are swept (at most twice the live ones are held).
        func rotate(_ prefix: String) async throws {
            for i in 0..<300 {
                _ = await budget.refund(cost: 1)
                let client = BudgetClient(key: "\(prefix)\(i)", cap: 1, windowSeconds: 1)
                let d = try await budget.take(cost: 1, client: client).get()
                XCTAssertTrue(d.allowed)
            }
        }
        try await rotate("198.51.100.")
        XCTAssertEqual(budget.trackedClients, 301, "300 live windows and the flooder's (the other's ended: swept)")
        clock.advance(2000)
        try await rotate("192.0.2.")
        XCTAssertLessThanOrEqual(budget.trackedClients, 301, "the first 300 ended and were swept (else 601)")
    }

    /// The horizon with the injected clock: one window after the other's last ask, the heavy client is alone.
    func testAnotherClientsAskBindsForOneWindow() async throws {
        let clock = TestClock()
        let budget = InMemoryUpstreamBudget(shape: TokenBucketShape(capacity: 10, refillPerSecond: 0.01)) {
            Double(clock.now) / 1000
        }
        let heavy = BudgetClient(key: "127.0.0.2", cap: 2, windowSeconds: 1000)
        let other = try await budget.take(cost: 1, client: BudgetClient(key: "127.0.0.1", cap: 2, windowSeconds: 1000))
            .get()
        XCTAssertTrue(other.allowed)
        clock.advance(100_000)
        for _ in 0..<2 {
            let d = try await budget.take(cost: 1, client: heavy).get()
            XCTAssertTrue(d.allowed)
        }
        clock.advance(899_500)
        let soon = try await budget.take(cost: 1, client: heavy).get()
        XCTAssertEqual(soon.refusal, .clientShare)
        XCTAssertEqual(soon.retryAfter, 0.5, accuracy: 1e-9, "until the other's ask is a window old, not 100.5 s")
        clock.advance(501)
        let alone = try await budget.take(cost: 1, client: heavy).get()
        XCTAssertTrue(alone.allowed, "nobody else asked within a window: not capped, though its window still runs")
    }
}

extension ClusterKeysTests {
    /// A client's counter and the askers share the bucket's slot (one script reads them all, on Redis
    /// Cluster too), whatever the client's address holds (an IPv6 address's colons included).
    func testAClientsCounterSharesItsBucketsSlot() {
        let k = ClusterKeys(prefix: "p")
        XCTAssertEqual(k.rateLimitClient("gh", "127.0.0.2"), "p:rl:{gh}:c:127.0.0.2")
        XCTAssertEqual(k.rateLimitAskers("gh"), "p:rl:{gh}:askers")
        XCTAssertEqual(
            RedisClient.slot(of: RedisArg(k.rateLimitAskers("gh"))), RedisClient.slot(of: RedisArg(k.rateLimit("gh"))))
        for client in ["127.0.0.2", "2001:db8::1", "a{b}c"] {
            XCTAssertEqual(
                RedisClient.slot(of: RedisArg(k.rateLimitClient("gh", client))),
                RedisClient.slot(of: RedisArg(k.rateLimit("gh"))), client)
        }
    }
}
