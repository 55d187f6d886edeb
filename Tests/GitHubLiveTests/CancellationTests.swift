import EventHTTP
import Foundation
import GitHubSearch
import GitHubSimulator
import Logging
import XCTest

@_spi(Testing) @testable import GitHubLive

/// A cancelled search leaves the rate limiter's queue without a slot and leaves the single flight
/// without taking the other waiters' answer away; only an unwanted, unsent upstream call is cancelled.
/// Against the real gateway and the GitHub simulator over HTTP, counting the requests it received.
final class CancellationTests: XCTestCase {
    var server: HTTPServer?
    var simulator: GitHubSimulator!

    func startSimulator() throws {
        simulator = GitHubSimulator(configuration: GitHubSimulator.Configuration())
        var serverConfig = HTTPServer.Configuration()
        serverConfig.port = 0
        serverConfig.threads = 1
        let server = HTTPServer(
            configuration: serverConfig, logger: Logger(label: "sim") { _ in SwiftLogNoOpLogHandler() })
        simulator.install(on: server.router)
        try server.start()
        self.server = server
    }

    override func tearDown() {
        server?.shutdown(gracePeriod: 0.5)
        server = nil
    }

    /// The gateway (one call in flight, no spacing) against the simulator.
    func gateway() throws -> GitHubGateway {
        try GitHubGateway(
            configuration: .init(
                baseURL: "http://127.0.0.1:\(server!.port)", rateLimiter: .init(minimumSpacing: .zero)),
            logger: Logger(label: "gw") { _ in SwiftLogNoOpLogHandler() })
    }

    func testCancelledCallerLeavesTheRateLimiterQueueWithoutTakingASlot() async throws {
        let limiter = RateLimiter(configuration: .init(minimumSpacing: .zero), clock: ManualClock())
        try await limiter.acquire()  // the one slot is taken: callers queue
        let a = Task { try await limiter.acquire() }
        await limiter.waitForQueue(1)
        let b = Task { try await limiter.acquire() }
        await limiter.waitForQueue(2)

        a.cancel()
        do {
            try await a.value
            XCTFail("a cancelled caller must not get a slot")
        } catch {
            XCTAssertEqual(error as? SearchError, .cancelled)
        }
        await limiter.waitForQueue(1)

        await limiter.release()  // the slot goes to b, not to the cancelled a
        try await b.value
        let queued = await limiter.queued
        XCTAssertEqual(queued, 0)
        await limiter.release()
        try await limiter.acquire()  // one slot again, free: no slot was lost or leaked
        await limiter.release()
    }

    func testCancelledSearchWaitingForASlotSpendsNoUpstreamCall() async throws {
        try startSimulator()
        let gw = try gateway()
        let cache = SearchCache(upstream: gw)
        try await gw.rateLimiter.acquire()  // hold the slot: the search below queues
        let swift = SearchRequest(query: "swift", perPage: 5)
        let search = Task { try await cache.search(swift) }
        await gw.rateLimiter.waitForQueue(1)

        search.cancel()
        do {
            _ = try await search.value
            XCTFail("a cancelled search must not answer")
        } catch {
            XCTAssertEqual(error as? SearchError, .cancelled)
        }
        await gw.rateLimiter.waitForQueue(0)  // it left the queue
        await gw.rateLimiter.release()

        let rust = try await cache.search(SearchRequest(query: "rust", perPage: 5))
        XCTAssertEqual(rust.cache, .miss)
        await cache.waitForRevalidations()
        XCTAssertEqual(simulator.stats.requests, 1, "only the search nobody cancelled reached GitHub")
        let cached = await cache.count
        XCTAssertEqual(cached, 1)
    }

    func testCancelledWaiterLeavesTheSingleFlightAndTheOtherStillGetsTheAnswer() async throws {
        try startSimulator()
        let gw = try gateway()
        let cache = SearchCache(upstream: gw)
        try await gw.rateLimiter.acquire()
        let swift = SearchRequest(query: "swift", perPage: 5)
        let leaving = Task { try await cache.search(swift) }
        let staying = Task { try await cache.search(swift) }
        await cache.waitForWaiters(2, request: swift)
        await gw.rateLimiter.waitForQueue(1)  // one upstream call for both, queued

        leaving.cancel()
        do {
            _ = try await leaving.value
            XCTFail("a cancelled search must not answer")
        } catch {
            XCTAssertEqual(error as? SearchError, .cancelled)
        }
        await cache.waitForWaiters(1, request: swift)
        let queued = await gw.rateLimiter.queued
        XCTAssertEqual(queued, 1, "the upstream call stays: another caller needs it")

        await gw.rateLimiter.release()
        let answer = try await staying.value
        XCTAssertEqual(answer.cache, .miss)
        XCTAssertEqual(answer.page.repositories.count, 5)
        XCTAssertEqual(simulator.stats.requests, 1)
    }

    func testACallerJoiningAfterTheLastOneLeftGetsAFreshCall() async throws {
        try startSimulator()
        let gw = try gateway()
        let cache = SearchCache(upstream: gw)
        try await gw.rateLimiter.acquire()
        let swift = SearchRequest(query: "swift", perPage: 5)
        let first = Task { try await cache.search(swift) }
        await gw.rateLimiter.waitForQueue(1)
        first.cancel()
        _ = try? await first.value
        // The cancelled upstream call may still be leaving the queue when the next caller joins its
        // flight: that caller must get an answer, from a call of its own.
        let second = Task { try await cache.search(swift) }
        await gw.rateLimiter.waitForQueue(1)
        await gw.rateLimiter.release()
        let answer = try await second.value
        XCTAssertEqual(answer.page.repositories.count, 5)
        XCTAssertEqual(simulator.stats.requests, 1)
    }

    func testAnUpstreamCallAlreadyUnderWayIsKeptAndCachedWhenItsOnlyCallerLeaves() async throws {
        let fake = FakeSearch([.success(.modified(samplePage("sent"), etag: nil))])
        await fake.hold()  // the call reaches upstream and stays there, like a request already sent
        let cache = SearchCache(upstream: fake, clock: ManualClock())
        let swift = SearchRequest(query: "swift")
        let caller = Task { try await cache.search(swift) }
        await fake.waitForCalls(1)

        caller.cancel()
        do {
            _ = try await caller.value
            XCTFail("a cancelled search must not answer")
        } catch {
            XCTAssertEqual(error as? SearchError, .cancelled)
        }
        await fake.release()  // the upstream answer arrives after its caller left
        await cache.waitForRevalidations()
        let later = try await cache.search(swift)
        XCTAssertEqual(later, SearchResponse(page: samplePage("sent"), cache: .hit, isStale: false))
        let calls = await fake.callCount
        XCTAssertEqual(calls, 1, "the spent call's answer was cached, not fetched again")
    }

    func testTheRateLimitMessageIsWithdrawnWhenTheBlockEnds() async throws {
        let (stream, continuation) = AsyncStream.makeStream(of: UpstreamStatus.self)
        let limiter = RateLimiter(
            configuration: .init(minimumSpacing: .zero), clock: SystemWallClock(),
            onStatus: { continuation.yield($0) })
        let error = await limiter.observe(status: 429, headers: ["retry-after": "1"])
        XCTAssertEqual(error?.retryAfterSeconds, 1)
        var statuses = stream.makeAsyncIterator()
        let limited = await statuses.next()
        XCTAssertEqual(limited?.message, RateLimiter.limitedStatusMessage, "shared state names no seconds")
        XCTAssertEqual(error?.message, "GitHub's search rate limit is exhausted; try again in 1 second.")
        // No response arrives to clear it: the limiter withdraws the sentence itself when the block ends,
        // so the page's banner does not keep saying "exhausted".
        let cleared = await statuses.next()
        XCTAssertEqual(cleared, UpstreamStatus(reachable: true, message: nil, rateLimit: nil))
        try await limiter.acquire()
        await limiter.release()
    }
}
