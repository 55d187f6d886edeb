import ClusterRedis
import ClusterStore
import EventLoop
import Foundation
import RedisClient
import RedisTestSupport
import XCTest

final class RedisUpstreamBudgetTests: TwoClientRedisTestCase {
    func budgets(_ shape: TokenBucketShape) -> [RedisUpstreamBudget] {
        connections.map {
            RedisUpstreamBudget(client: $0, name: "gh", shape: shape, keys: ClusterKeys(prefix: "t"))
        }
    }

    func testTwoNodesShareOneBucket() async throws {
        let nodes = budgets(TokenBucketShape(capacity: 3, refillPerSecond: 0.01))
        var allowed = 0
        for i in 0..<6 where try await nodes[i % 2].take(cost: 1).get().allowed { allowed += 1 }
        XCTAssertEqual(allowed, 3, "two nodes together get one bucket's burst")
        let denied = try await nodes[0].take(cost: 1).get()
        XCTAssertFalse(denied.allowed)
        XCTAssertGreaterThan(denied.retryAfter, 90)
        XCTAssertLessThanOrEqual(denied.retryAfter, 100)
        let ttl = try await connections[0].send(["PTTL", "t:rl:{gh}"]).get().int ?? -1
        XCTAssertGreaterThan(ttl, 0, "the bucket expires once it would be full again")
        XCTAssertLessThanOrEqual(ttl, 301_000)
    }

    func testRefillsWithRedisTime() async throws {
        let node = budgets(TokenBucketShape(capacity: 2, refillPerSecond: 20))[0]
        _ = try await node.take(cost: 2).get()
        let empty = try await node.take(cost: 1).get()
        XCTAssertFalse(empty.allowed)
        XCTAssertLessThanOrEqual(empty.retryAfter, 0.05)
        // Waiting for time itself (the refill), not for an event.
        try await Task.sleep(nanoseconds: UInt64((empty.retryAfter + 0.01) * 1e9))
        let refilled = try await node.take(cost: 1).get()
        XCTAssertTrue(refilled.allowed)
    }

    func testGitHubsAnswersCorrectEveryNode() async throws {
        let nodes = budgets(TokenBucketShape(capacity: 10, refillPerSecond: 0.01))
        _ = try await nodes[0].correct(remaining: 2, blockedUntil: nil).get()
        let first = try await nodes[1].take(cost: 1).get()
        let second = try await nodes[0].take(cost: 1).get()
        let third = try await nodes[1].take(cost: 1).get()
        XCTAssertEqual([first.allowed, second.allowed, third.allowed], [true, true, false])
        // A rate limit seen by node 0 stops node 1 until the reset.
        _ = try await nodes[0].correct(remaining: 0, blockedUntil: Date().timeIntervalSince1970 + 5).get()
        let blocked = try await nodes[1].take(cost: 0).get()
        XCTAssertFalse(blocked.allowed)
        XCTAssertGreaterThan(blocked.retryAfter, 4)
        XCTAssertLessThanOrEqual(blocked.retryAfter, 5.1)
    }
}

final class InMemoryUpstreamBudgetTests: XCTestCase {
    func testBucketRefillAndCorrections() async throws {
        let clock = TestClock()
        let budget = InMemoryUpstreamBudget(shape: TokenBucketShape(capacity: 2, refillPerSecond: 0.5)) {
            Double(clock.now) / 1000
        }
        let a = try await budget.take(cost: 1).get()
        let b = try await budget.take(cost: 1).get()
        let c = try await budget.take(cost: 1).get()
        XCTAssertEqual([a.allowed, b.allowed, c.allowed], [true, true, false])
        XCTAssertEqual(c.retryAfter, 2, accuracy: 1e-9)
        clock.advance(2000)
        let d = try await budget.take(cost: 1).get()
        XCTAssertTrue(d.allowed)
        _ = await budget.correct(remaining: 0, blockedUntil: Double(clock.now) / 1000 + 30)
        clock.advance(10_000)
        let e = try await budget.take(cost: 1).get()
        XCTAssertFalse(e.allowed)
        XCTAssertEqual(e.retryAfter, 20, accuracy: 1e-9)
    }
}

extension RedisUpstreamBudgetTests {
    /// The tokens the bucket holds in Redis now (refill not counted: read right after a script wrote it).
    func tokensInRedis() async throws -> Double {
        let v = try await connections[0].send(["HGET", "t:rl:{gh}", "tokens"]).get()
        return try XCTUnwrap(v.bytes.flatMap { Double(String(decoding: $0, as: UTF8.self)) })
    }

    /// A refund (a `304`) gives the token back to every node's bucket, and never fills it past its capacity.
    func testARefundGivesTheTokenBackUpToTheCapacity() async throws {
        let nodes = budgets(TokenBucketShape(capacity: 3, refillPerSecond: 0.0001))
        var allowed = 0
        for _ in 0..<4 where try await nodes[0].take(cost: 1).get().allowed { allowed += 1 }
        XCTAssertEqual(allowed, 3, "the bucket is empty")
        _ = try await nodes[0].refund(cost: 1).get()
        let afterRefund = try await tokensInRedis()
        XCTAssertEqual(afterRefund, 1, accuracy: 0.01)
        let refunded = try await nodes[1].take(cost: 1).get()
        XCTAssertTrue(refunded.allowed, "the refunded token is there for any node")
        let next = try await nodes[1].take(cost: 1).get()
        XCTAssertFalse(next.allowed)
        for _ in 0..<5 { _ = try await nodes[1].refund(cost: 1).get() }
        let full = try await tokensInRedis()
        XCTAssertEqual(full, 3, accuracy: 0.01, "bounded by the capacity")
        allowed = 0
        for _ in 0..<5 where try await nodes[0].take(cost: 1).get().allowed { allowed += 1 }
        XCTAssertEqual(allowed, 3)
    }
}

extension InMemoryUpstreamBudgetTests {
    func testARefundGivesTheTokenBackUpToTheCapacity() async throws {
        let clock = TestClock()
        let budget = InMemoryUpstreamBudget(shape: TokenBucketShape(capacity: 2, refillPerSecond: 0.5)) {
            Double(clock.now) / 1000
        }
        var allowed: [Bool] = []
        for _ in 0..<3 { allowed.append(try await budget.take(cost: 1).get().allowed) }
        XCTAssertEqual(allowed, [true, true, false])
        _ = await budget.refund(cost: 1)
        allowed = []
        for _ in 0..<2 { allowed.append(try await budget.take(cost: 1).get().allowed) }
        XCTAssertEqual(allowed, [true, false], "the refunded token, and no more")
        for _ in 0..<5 { _ = await budget.refund(cost: 1) }
        let full = try await budget.take(cost: 2).get()
        XCTAssertTrue(full.allowed)
        XCTAssertEqual(full.remaining, 0, "bounded by the capacity (2)")
    }
}
