import Foundation
import GitHubSearch
import XCTest

@testable import GitHubLive

/// The limiter's use of a `SharedRateBudget` (cluster mode): asked before every call, told every answer.
final class SharedRateBudgetTests: XCTestCase {
    final class FakeBudget: SharedRateBudget, @unchecked Sendable {
        let lock = NSLock()
        var answer = SharedBudgetAnswer.admitted
        var admits = 0
        var clients: [String?] = []
        var reports: [(remaining: Int?, blockedUntil: Double?)] = []
        var refunds = 0

        func admit(client: String?) async -> SharedBudgetAnswer {
            lock.withLock {
                admits += 1
                clients.append(client)
                return answer
            }
        }

        func report(remaining: Int?, blockedUntil: Double?) async {
            lock.withLock { reports.append((remaining, blockedUntil)) }
        }

        func refund() async {
            lock.withLock { refunds += 1 }
        }
    }

    func testARefusalOfTheSharedBudgetBlocksAndPublishesTheLimit() async throws {
        let clock = ManualClock()
        let statuses = Recorder<UpstreamStatus>()
        let shared = FakeBudget()
        let limiter = RateLimiter(
            configuration: .init(minimumSpacing: .zero), clock: clock, onStatus: { statuses.append($0) },
            shared: shared)
        try await limiter.acquire()
        await limiter.release()
        shared.lock.withLock { shared.answer = .blocked(seconds: 20) }
        do {
            try await limiter.acquire()
            XCTFail("the shared budget refused")
        } catch {
            XCTAssertEqual(error.retryAfterSeconds, 20)
        }
        XCTAssertEqual(shared.lock.withLock { shared.admits }, 2)
        let blocked = await limiter.blockedError()?.retryAfterSeconds
        XCTAssertEqual(blocked, 20, "blocked locally too: no further call asks Redis")
        let last = try XCTUnwrap(statuses.all.last)
        XCTAssertEqual(last.blockedUntil, Int((clock.now() + 20).rounded(.up)))
        XCTAssertNotNil(last.message)
        let queued = await limiter.queued
        XCTAssertEqual(queued, 0)
        let inFlight = await limiter.inFlight
        XCTAssertEqual(inFlight, 0, "the slot was given back")
    }

    /// Over the client's share of the cluster: only that client is refused ("your share", the cluster's
    /// numbers), nothing is blocked or published, and the next client's call still goes ahead.
    func testAnOverShareAnswerRefusesOnlyThatClientAndBlocksNobody() async throws {
        let clock = ManualClock()
        let statuses = Recorder<UpstreamStatus>()
        let shared = FakeBudget()
        let limiter = RateLimiter(
            configuration: .init(minimumSpacing: .zero), clock: clock, onStatus: { statuses.append($0) },
            shared: shared)
        shared.lock.withLock { shared.answer = .overShare(seconds: 41.2, cap: 15, limit: 30) }
        do {
            try await UpstreamClient.$current.withValue("127.0.0.2") { try await limiter.acquire() }
            XCTFail("the shared budget refused the client's share")
        } catch let error as SearchError {
            XCTAssertEqual(error.retryAfterSeconds, 42)
            guard case .rateLimited(_, let message) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(
                message.hasPrefix(
                    "You have used your share of GitHub's search budget while others are searching too (15 of the 30"),
                message)
        } catch {
            XCTFail("\(error)")
        }
        let blocked = await limiter.blockedError()
        XCTAssertNil(blocked, "nobody else is blocked")
        XCTAssertTrue(statuses.all.isEmpty, "nothing published: GitHub is not limited")
        let inFlight = await limiter.inFlight
        XCTAssertEqual(inFlight, 0, "the slot was given back")
        let counted = await limiter.calls(of: "127.0.0.2")
        XCTAssertEqual(counted, 0, "a refused call is not counted")
        shared.lock.withLock { shared.answer = .admitted }
        try await UpstreamClient.$current.withValue("127.0.0.3") { try await limiter.acquire() }
        await limiter.release()
        try await limiter.acquire()  // charged to nobody
        await limiter.release()
        XCTAssertEqual(shared.lock.withLock { shared.clients }, ["127.0.0.2", "127.0.0.3", nil])
    }

    func testWhatGitHubAnsweredIsReported() async throws {
        let clock = ManualClock()
        let shared = FakeBudget()
        let limiter = RateLimiter(configuration: .init(minimumSpacing: .zero), clock: clock, shared: shared)
        let reset = clock.now() + 50
        let ok = await limiter.observe(
            status: 200,
            headers: ["x-ratelimit-limit": "30", "x-ratelimit-remaining": "7", "x-ratelimit-reset": "\(Int(reset))"])
        XCTAssertNil(ok)
        await limiter.reportShared()
        await limiter.reportShared()  // reported once
        _ = await limiter.observe(status: 429, headers: ["retry-after": "30"])
        await limiter.reportShared()
        let reports = shared.lock.withLock { shared.reports }
        XCTAssertEqual(reports.count, 2)
        XCTAssertEqual(reports.first?.remaining, 7)
        XCTAssertNil(reports.first?.blockedUntil)
        XCTAssertNil(reports.last?.remaining)
        XCTAssertEqual(reports.last?.blockedUntil, clock.now() + 30)
    }

    /// GitHub does not count a `304` against its limit: its share goes back to the shared budget, once;
    /// any other answer keeps it.
    func testA304GivesItsShareBackAndOtherAnswersDoNot() async throws {
        let clock = ManualClock()
        let shared = FakeBudget()
        let limiter = RateLimiter(configuration: .init(minimumSpacing: .zero), clock: clock, shared: shared)
        let h = [
            "x-ratelimit-limit": "30", "x-ratelimit-remaining": "20", "x-ratelimit-reset": "\(Int(clock.now() + 60))",
        ]
        for status in [200, 422, 502] {
            try await limiter.acquire()
            _ = await limiter.observe(status: status, headers: h)
            await limiter.reportShared()
            await limiter.release()
        }
        XCTAssertEqual(shared.lock.withLock { shared.refunds }, 0, "a counted answer keeps its share")
        try await limiter.acquire()
        _ = await limiter.observe(status: 304, headers: h)
        await limiter.reportShared()
        await limiter.reportShared()  // given back once
        await limiter.release()
        XCTAssertEqual(shared.lock.withLock { shared.refunds }, 1)
        XCTAssertEqual(shared.lock.withLock { shared.reports.last?.remaining }, 20, "the 304's headers still correct")
        XCTAssertEqual(shared.lock.withLock { shared.admits }, 4)
        try await limiter.acquire()
        await limiter.observeUnreachable(message: "down")
        await limiter.reportShared()
        await limiter.release()
        XCTAssertEqual(shared.lock.withLock { shared.refunds }, 1, "a call that got no answer is not refunded")
    }
}
