import ClusterRedis
import ClusterStore
import Foundation
import RedisClient
import XCTest

/// A client's fair share of the cluster-wide bucket (`BudgetClient`): counted across every node, refused
/// before any token is taken, forgotten when its window ends.
extension RedisUpstreamBudgetTests {
    /// The client's counter key in Redis (the bucket is `t:rl:{gh}`).
    func counterKey(_ client: String) -> RedisArg { RedisArg(ClusterKeys(prefix: "t").rateLimitClient("gh", client)) }

    func testTwoNodesShareOneClientsCapAndTheOthersStillGetTokens() async throws {
        let shape = TokenBucketShape(capacity: 10, refillPerSecond: 0.01)  // a window of 1000 s
        let nodes = budgets(shape)
        let flooder = BudgetClient(key: "127.0.0.2", share: 0.3, of: shape)
        XCTAssertEqual(flooder.cap, 3)
        var decisions: [BudgetDecision] = []
        for i in 0..<8 { decisions.append(try await nodes[i % 2].take(cost: 1, client: flooder).get()) }
        XCTAssertEqual(decisions.filter(\.allowed).count, 3, "its cap across both nodes, not 3 on each")
        let refused = try XCTUnwrap(decisions.last)
        XCTAssertEqual(refused.refusal, .clientShare)
        XCTAssertEqual(refused.remaining, 7, "a refusal for the share takes no token")
        XCTAssertGreaterThan(refused.retryAfter, 990, "until the client's window ends")
        XCTAssertLessThanOrEqual(refused.retryAfter, 1000)
        let other = BudgetClient(key: "127.0.0.3", share: 0.3, of: shape)
        for i in 0..<3 {
            let d = try await nodes[i % 2].take(cost: 1, client: other).get()
            XCTAssertTrue(d.allowed, "another client, call \(i)")
        }
        let noClient = try await nodes[0].take(cost: 1).get()
        XCTAssertTrue(noClient.allowed, "a call charged to nobody has no cap")
        XCTAssertEqual(noClient.remaining, 3)
        let count = try await connections[1].send(["GET", counterKey("127.0.0.2")]).get().int
        XCTAssertEqual(count, 3, "refused calls are not counted")
        let ttl = try await connections[0].send(["PTTL", counterKey("127.0.0.2")]).get().int ?? -1
        XCTAssertGreaterThan(ttl, 990_000, "the counter expires with the client's window")
        XCTAssertLessThanOrEqual(ttl, 1_000_000)
    }

    func testTheCounterExpiresWithItsWindowAndTheClientCallsAgain() async throws {
        let nodes = budgets(TokenBucketShape(capacity: 10, refillPerSecond: 0.01))
        let client = BudgetClient(key: "203.0.113.9", cap: 2, windowSeconds: 0.3)
        for i in 0..<2 {
            let d = try await nodes[i].take(cost: 1, client: client).get()
            XCTAssertTrue(d.allowed)
        }
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
    }
}

extension InMemoryUpstreamBudgetTests {
    func testAClientsCapHoldsItsWindowWhileOthersGetTokensAndEndedWindowsAreForgotten() async throws {
        let clock = TestClock()
        let shape = TokenBucketShape(capacity: 10, refillPerSecond: 0.1)  // a window of 100 s
        let budget = InMemoryUpstreamBudget(shape: shape) { Double(clock.now) / 1000 }
        let flooder = BudgetClient(key: "127.0.0.2", share: 0.5, of: shape)
        var decisions: [BudgetDecision] = []
        for _ in 0..<7 { decisions.append(try await budget.take(cost: 1, client: flooder).get()) }
        XCTAssertEqual(decisions.map(\.allowed), [true, true, true, true, true, false, false])
        XCTAssertEqual(decisions.last?.refusal, .clientShare)
        XCTAssertEqual(decisions.last?.remaining, 5, "no token taken by a refusal")
        XCTAssertEqual(decisions.last?.retryAfter ?? 0, 100, accuracy: 1e-9)
        clock.advance(40_000)
        let later = try await budget.take(cost: 1, client: flooder).get()
        XCTAssertEqual(later.refusal, .clientShare)
        XCTAssertEqual(later.retryAfter, 60, accuracy: 1e-9, "a fixed window from its first call")
        let other = try await budget.take(cost: 1, client: BudgetClient(key: "127.0.0.3", share: 0.5, of: shape)).get()
        XCTAssertTrue(other.allowed)
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
        XCTAssertEqual(budget.trackedClients, 302, "300 live windows, the flooder's and the other's")
        clock.advance(2000)
        try await rotate("192.0.2.")
        XCTAssertLessThanOrEqual(budget.trackedClients, 302, "the first 300 ended and were swept (else 602)")
    }
}

extension ClusterKeysTests {
    /// A client's counter shares the bucket's slot (one script reads both, on Redis Cluster too), whatever
    /// its address holds (an IPv6 address's colons included).
    func testAClientsCounterSharesItsBucketsSlot() {
        let k = ClusterKeys(prefix: "p")
        XCTAssertEqual(k.rateLimitClient("gh", "127.0.0.2"), "p:rl:{gh}:c:127.0.0.2")
        for client in ["127.0.0.2", "2001:db8::1", "a{b}c"] {
            XCTAssertEqual(
                RedisClient.slot(of: RedisArg(k.rateLimitClient("gh", client))),
                RedisClient.slot(of: RedisArg(k.rateLimit("gh"))), client)
        }
    }
}
