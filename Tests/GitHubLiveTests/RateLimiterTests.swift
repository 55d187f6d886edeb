import Foundation
import GitHubSearch
import XCTest

@testable import GitHubLive

/// Rate-limit bookkeeping with a manual clock, and the gateway's refusal to call while limited.
final class RateLimiterTests: XCTestCase {
    func headers(remaining: Int, reset: Double, extra: [String: String] = [:]) -> [String: String] {
        [
            "x-ratelimit-limit": "30", "x-ratelimit-remaining": "\(remaining)", "x-ratelimit-reset": "\(Int(reset))",
            "x-ratelimit-resource": "search",
        ].merging(extra) { $1 }
    }

    func testPrimaryLimitBlocksUntilReset() async throws {
        let clock = ManualClock()
        let statuses = Recorder<UpstreamStatus>()
        let limiter = RateLimiter(
            configuration: .init(minimumSpacing: .zero), clock: clock, onStatus: { statuses.append($0) })
        let error = await limiter.observe(status: 403, headers: headers(remaining: 0, reset: clock.now() + 100))
        XCTAssertEqual(error?.retryAfterSeconds, 100)
        do {
            try await limiter.acquire()
            XCTFail("must not call upstream while limited")
        } catch {
            XCTAssertEqual(error.kind, "rateLimited")
        }
        clock.advance(40)
        let left = await limiter.blockedError()?.retryAfterSeconds
        XCTAssertEqual(left, 60)
        clock.advance(61)
        try await limiter.acquire()
        await limiter.release()
        let last = try XCTUnwrap(statuses.all.last)
        XCTAssertTrue(last.reachable)
        XCTAssertEqual(
            last.rateLimit,
            RateLimit(limit: 30, remaining: 0, resetAt: Int(clock.now()) - 101 + 100, resource: "search"))
        XCTAssertNotNil(last.message)
    }

    func testSecondaryLimitUsesRetryAfterOrBacksOff() async throws {
        let clock = ManualClock()
        let limiter = RateLimiter(configuration: .init(minimumSpacing: .zero), clock: clock)
        let e1 = await limiter.observe(status: 429, headers: ["retry-after": "30"])
        XCTAssertEqual(e1?.retryAfterSeconds, 30)
        clock.advance(31)
        let cleared = await limiter.blockedError()
        XCTAssertNil(cleared)
        let e2 = await limiter.observe(status: 403, headers: [:], bodyMentionsRateLimit: true)
        XCTAssertEqual(e2?.retryAfterSeconds, 60, "no hint: back off a minute")
        clock.advance(61)
        let plain403 = await limiter.observe(status: 403, headers: headers(remaining: 12, reset: clock.now() + 10))
        XCTAssertNil(plain403, "a 403 without rate-limit signals is not a rate limit")
    }

    func testSpentBudgetOnSuccessBlocksWithoutAnotherCall() async {
        let clock = ManualClock()
        let statuses = Recorder<UpstreamStatus>()
        let limiter = RateLimiter(clock: clock, onStatus: { statuses.append($0) })
        let e = await limiter.observe(status: 200, headers: headers(remaining: 0, reset: clock.now() + 20))
        XCTAssertNil(e, "the response itself is fine")
        let blocked = await limiter.blockedError()
        XCTAssertEqual(blocked?.retryAfterSeconds, 20)
        XCTAssertEqual(statuses.all.last?.rateLimit?.remaining, 0)
    }

    func testPublishedStatusCarriesTheBlockEvenWhenGitHubIsUnreachableAndDropsItWhenItEnds() async throws {
        let clock = ManualClock()
        let statuses = Recorder<UpstreamStatus>()
        let limiter = RateLimiter(
            configuration: .init(minimumSpacing: .zero), clock: clock, onStatus: { statuses.append($0) })
        let reset = clock.now() + 100
        _ = await limiter.observe(status: 403, headers: headers(remaining: 0, reset: reset))
        XCTAssertEqual(statuses.all.last?.blockedUntil, Int(reset.rounded(.up)), "every session counts down to it")
        await limiter.observeUnreachable(message: "down")
        XCTAssertEqual(statuses.all.last?.reachable, false)
        XCTAssertEqual(statuses.all.last?.blockedUntil, Int(reset.rounded(.up)), "still blocked while unreachable")
        clock.advance(101)
        _ = await limiter.observe(status: 200, headers: headers(remaining: 29, reset: clock.now() + 60))
        let last = try XCTUnwrap(statuses.all.last)
        XCTAssertNil(last.blockedUntil, "the block is over: sessions offer searching again")
        XCTAssertNil(last.message)
    }

    func testStatusIsPublishedOnlyOnChange() async {
        let clock = ManualClock()
        let statuses = Recorder<UpstreamStatus>()
        let limiter = RateLimiter(clock: clock, onStatus: { statuses.append($0) })
        let h = headers(remaining: 5, reset: clock.now() + 50)
        _ = await limiter.observe(status: 200, headers: h)
        _ = await limiter.observe(status: 200, headers: h)
        await limiter.observeUnreachable(message: "down")
        await limiter.observeUnreachable(message: "down")
        XCTAssertEqual(statuses.all.count, 2)
        XCTAssertEqual(
            statuses.all.last,
            UpstreamStatus(
                reachable: false, message: "down",
                rateLimit: RateLimit(limit: 30, remaining: 5, resetAt: Int(clock.now() + 50), resource: "search")))
    }

    /// Cluster mode: a repeat is published too (the board's last post may be another node's since).
    func testRepeatsArePublishedWhenAskedTo() async {
        let clock = ManualClock()
        let statuses = Recorder<UpstreamStatus>()
        let limiter = RateLimiter(
            configuration: .init(publishesRepeats: true), clock: clock, onStatus: { statuses.append($0) })
        let h = headers(remaining: 5, reset: clock.now() + 50)
        _ = await limiter.observe(status: 200, headers: h)
        _ = await limiter.observe(status: 200, headers: h)
        await limiter.observeUnreachable(message: "down")
        await limiter.observeUnreachable(message: "down")
        XCTAssertEqual(statuses.all.map(\.reachable), [true, true, false, false])
    }

    func testConcurrencyIsCapped() async throws {
        let limiter = RateLimiter(
            configuration: .init(maxConcurrentRequests: 1, minimumSpacing: .zero), clock: ManualClock())
        try await limiter.acquire()
        let acquiredSecond = Recorder<Bool>()
        let second = Task {
            try await limiter.acquire()
            acquiredSecond.append(true)
            return true
        }
        // The second caller is queued behind the first: give it every chance to run, it must not get in.
        for _ in 0..<50 { await Task.yield() }
        XCTAssertEqual(acquiredSecond.all, [], "a second request got a slot while the only one was taken")
        await limiter.release()
        let acquired = try await second.value
        XCTAssertTrue(acquired)
        await limiter.release()
    }

    /// Loopback port 1 refuses connections: any call made would be `unavailable`.
    func testGatewayAnswersRateLimitedWithoutCalling() async throws {
        let clock = ManualClock()
        let gateway = try GitHubGateway(
            configuration: .init(baseURL: "http://127.0.0.1:1", token: "sekrit-token"), clock: clock)
        _ = await gateway.rateLimiter.observe(status: 403, headers: headers(remaining: 0, reset: clock.now() + 30))
        do {
            _ = try await gateway.search(SearchRequest(query: "swift"))
            XCTFail("expected rateLimited")
        } catch {
            XCTAssertEqual(error.retryAfterSeconds, 30)
        }
    }

    func testPastCapIsAnsweredWithoutCalling() async throws {
        let gateway = try GitHubGateway(configuration: .init(baseURL: "http://127.0.0.1:1"), clock: ManualClock())
        let r = try await gateway.search(SearchRequest(query: "swift", page: 11, perPage: 100))
        XCTAssertEqual(
            r.page, SearchPage(totalCount: 0, incompleteResults: false, repositories: [], page: 11, hasMore: false))
    }

    func testConnectionRefusedIsUnavailableAndUnreachable() async throws {
        let statuses = Recorder<UpstreamStatus>()
        let gateway = try GitHubGateway(
            configuration: .init(baseURL: "http://127.0.0.1:1", token: "sekrit-token"), clock: ManualClock(),
            onStatus: { statuses.append($0) })
        do {
            _ = try await gateway.search(SearchRequest(query: "swift"))
            XCTFail("expected unavailable")
        } catch {
            XCTAssertEqual(error.kind, "unavailable")
            XCTAssertFalse(error.message.contains("sekrit"))
        }
        XCTAssertEqual(statuses.all.last?.reachable, false)
    }

    func testInvalidBaseURLIsRejected() {
        XCTAssertThrowsError(try GitHubGateway(configuration: .init(baseURL: "ftp://x")))
        XCTAssertThrowsError(try GitHubGateway(configuration: .init(baseURL: "api.github.com")))
    }

    func testRequestCarriesGitHubHeaders() throws {
        let gateway = try GitHubGateway(configuration: .init(baseURL: "https://api.github.com/", token: "t0k"))
        let r = gateway.makeURLRequest(
            SearchRequest(query: "c++ language:C&x", sort: .bestMatch, page: 2, perPage: 50), ifNoneMatch: nil)
        XCTAssertEqual(
            r.url?.absoluteString,
            "https://api.github.com/search/repositories?q=c%2B%2B%20language%3AC%26x&per_page=50&page=2")
        XCTAssertEqual(r.value(forHTTPHeaderField: "Accept"), "application/vnd.github+json")
        XCTAssertEqual(r.value(forHTTPHeaderField: "X-GitHub-Api-Version"), "2022-11-28")
        XCTAssertEqual(r.value(forHTTPHeaderField: "User-Agent"), "bff/1.0")
        XCTAssertEqual(r.value(forHTTPHeaderField: "Authorization"), "Bearer t0k")
        let sorted = gateway.makeURLRequest(SearchRequest(query: "a", sort: .stars, order: .asc), ifNoneMatch: "\"e\"")
        XCTAssertEqual(sorted.url?.query, "q=a&sort=stars&order=asc&per_page=30&page=1")
        XCTAssertEqual(sorted.value(forHTTPHeaderField: "If-None-Match"), "\"e\"")
        let anonymous = try GitHubGateway(configuration: .init(token: nil))
        XCTAssertNil(
            anonymous.makeURLRequest(SearchRequest(query: "a"), ifNoneMatch: nil).value(
                forHTTPHeaderField: "Authorization"))
    }
}
