import Foundation
import GitHubSearch
import XCTest

@_spi(Testing) @testable import GitHubLive

/// The cache decorator with a manual clock and a scripted upstream.
final class SearchCacheTests: XCTestCase {
    let swift = SearchRequest(query: "swift")

    func makeCache(
        _ fake: FakeSearch, _ clock: ManualClock, _ configuration: SearchCache<FakeSearch>.Configuration = .init()
    )
        -> SearchCache<FakeSearch>
    {
        SearchCache(upstream: fake, configuration: configuration, clock: clock)
    }

    func testFreshWithinTTLIsAHitWithoutUpstream() async throws {
        let clock = ManualClock()
        let fake = FakeSearch([.success(.modified(samplePage("a"), etag: nil))])
        let cache = makeCache(fake, clock)
        let first = try await cache.search(swift)
        XCTAssertEqual(first.cache, .miss)
        XCTAssertEqual(first.page, samplePage("a"))
        clock.advance(59)
        let second = try await cache.search(swift)
        XCTAssertEqual(second, SearchResponse(page: samplePage("a"), cache: .hit, isStale: false))
        let calls = await fake.callCount
        XCTAssertEqual(calls, 1)
        await fake.push(.success(.modified(samplePage("a2", page: 2), etag: nil)))
        let other = try await cache.search(SearchRequest(query: "swift", page: 2))
        XCTAssertEqual(other.cache, .miss, "a different page is a different key")
        let total = await fake.callCount
        XCTAssertEqual(total, 2)
    }

    func testStaleWhileRevalidateThenFresh() async throws {
        let clock = ManualClock()
        let fake = FakeSearch([
            .success(.modified(samplePage("old"), etag: nil)), .success(.modified(samplePage("new"), etag: nil)),
        ])
        let cache = makeCache(fake, clock)
        _ = try await cache.search(swift)
        clock.advance(61)
        let stale = try await cache.search(swift)
        XCTAssertEqual(stale, SearchResponse(page: samplePage("old"), cache: .stale, isStale: false))
        await cache.waitForRevalidations()
        let fresh = try await cache.search(swift)
        XCTAssertEqual(fresh, SearchResponse(page: samplePage("new"), cache: .hit))
        let calls = await fake.callCount
        XCTAssertEqual(calls, 2)
    }

    func testStaleWithIsStaleWhenUpstreamFails() async throws {
        let clock = ManualClock()
        let fake = FakeSearch([
            .success(.modified(samplePage("old"), etag: nil)), .failure(.unavailable(message: "down")),
            .failure(.unavailable(message: "down")),
        ])
        let cache = makeCache(fake, clock)
        _ = try await cache.search(swift)
        clock.advance(120)
        _ = try await cache.search(swift)
        await cache.waitForRevalidations()
        let afterFailure = try await cache.search(swift)
        XCTAssertEqual(afterFailure, SearchResponse(page: samplePage("old"), cache: .stale, isStale: true))
        await cache.waitForRevalidations()
        await fake.push(.failure(.rateLimited(retryAfterSeconds: 5, message: "limited")))
        let forced = try await cache.search(swift, policy: .revalidate)
        XCTAssertEqual(forced, SearchResponse(page: samplePage("old"), cache: .stale, isStale: true))
    }

    func testRevalidateFetchesEvenWhenFresh() async throws {
        let clock = ManualClock()
        let fake = FakeSearch([
            .success(.modified(samplePage("old"), etag: nil)), .success(.modified(samplePage("new"), etag: nil)),
        ])
        let cache = makeCache(fake, clock)
        _ = try await cache.search(swift)
        let r = try await cache.search(swift, policy: .revalidate)
        XCTAssertEqual(r, SearchResponse(page: samplePage("new"), cache: .revalidated))
        let hit = try await cache.search(swift)
        XCTAssertEqual(hit.page, samplePage("new"))
        XCTAssertEqual(hit.cache, .hit)
    }

    func testInvalidQueryIsNeverServedStale() async throws {
        let clock = ManualClock()
        let fake = FakeSearch([
            .success(.modified(samplePage("old"), etag: nil)), .failure(.invalidQuery(message: "bad")),
        ])
        let cache = makeCache(fake, clock)
        _ = try await cache.search(swift)
        do {
            _ = try await cache.search(swift, policy: .revalidate)
            XCTFail("expected invalidQuery")
        } catch {
            XCTAssertEqual(error, .invalidQuery(message: "bad"))
        }
    }

    func testMaxAgeExpiryGoesUpstreamAndThrows() async throws {
        let clock = ManualClock()
        let fake = FakeSearch([
            .success(.modified(samplePage("old"), etag: nil)), .failure(.unavailable(message: "down")),
        ])
        let cache = makeCache(fake, clock, .init(ttl: 60, maxAge: 300))
        _ = try await cache.search(swift)
        clock.advance(301)
        do {
            _ = try await cache.search(swift)
            XCTFail("an entry past maxAge must not be served")
        } catch {
            XCTAssertEqual(error, .unavailable(message: "down"))
        }
        let count = await cache.count
        XCTAssertEqual(count, 0)
    }

    func testMissFailureThrows() async {
        let fake = FakeSearch([.failure(.rateLimited(retryAfterSeconds: 9, message: "m"))])
        let cache = makeCache(fake, ManualClock())
        do {
            _ = try await cache.search(swift)
            XCTFail("expected an error")
        } catch {
            XCTAssertEqual(error.retryAfterSeconds, 9)
        }
    }

    func testLRUBoundByEntries() async throws {
        let clock = ManualClock()
        let fake = FakeSearch((0..<4).map { .success(.modified(samplePage("p\($0)"), etag: nil)) })
        let cache = makeCache(fake, clock, .init(maxEntries: 2))
        let a = SearchRequest(query: "a")
        let b = SearchRequest(query: "b")
        let c = SearchRequest(query: "c")
        _ = try await cache.search(a)
        _ = try await cache.search(b)
        _ = try await cache.search(a)  // a is now more recent than b
        _ = try await cache.search(c)  // evicts b
        let count = await cache.count
        XCTAssertEqual(count, 2)
        let aAgain = try await cache.search(a)
        XCTAssertEqual(aAgain.cache, .hit)
        let bAgain = try await cache.search(b)
        XCTAssertEqual(bAgain.cache, .miss, "b was least recently used")
        let calls = await fake.callCount
        XCTAssertEqual(calls, 4)
    }

    func testLRUBoundByBytes() async throws {
        let clock = ManualClock()
        let size = try JSONEncoder().encode(samplePage("p0", descriptionBytes: 1000)).count
        let fake = FakeSearch(
            (0..<3).map { .success(.modified(samplePage("p\($0)", descriptionBytes: 1000), etag: nil)) })
        let cache = makeCache(fake, clock, .init(maxEntries: 100, maxBytes: size * 2 + size / 2))
        for q in ["a", "b", "c"] { _ = try await cache.search(SearchRequest(query: q)) }
        let count = await cache.count
        let bytes = await cache.totalBytes
        XCTAssertEqual(count, 2)
        XCTAssertLessThanOrEqual(bytes, size * 2 + size / 2)
        let c = try await cache.search(SearchRequest(query: "c"))
        XCTAssertEqual(c.cache, .hit)
    }

    func testSingleFlightSharesOneUpstreamCall() async throws {
        let fake = FakeSearch([.success(.modified(samplePage("one"), etag: nil))])
        await fake.hold()
        let cache = makeCache(fake, ManualClock())
        let n = 20
        let results = Recorder<SearchResponse>()
        let request = swift
        let tasks = (0..<n).map { _ in
            Task { if let r = try? await cache.search(request) { results.append(r) } }
        }
        await fake.waitForCalls(1)
        // Every caller must have joined the flight before it is released.
        var joined = 0
        for _ in 0..<100_000 {
            joined = await cache.lookups
            if joined == n { break }
            await Task.yield()
        }
        XCTAssertEqual(joined, n)
        await fake.release()
        for t in tasks { await t.value }
        XCTAssertEqual(results.all.count, n)
        XCTAssertTrue(results.all.allSatisfy { $0.page == samplePage("one") && $0.cache == .miss })
        let calls = await fake.callCount
        XCTAssertEqual(calls, 1)
    }

    func testETagRevalidationUsesNotModified() async throws {
        let clock = ManualClock()
        let fake = FakeSearch(
            [.success(.modified(samplePage("e"), etag: "\"abc\"")), .success(.notModified)], conditional: true)
        let cache = makeCache(fake, clock)
        _ = try await cache.search(swift)
        clock.advance(61)
        let r = try await cache.search(swift, policy: .revalidate)
        XCTAssertEqual(r, SearchResponse(page: samplePage("e"), cache: .revalidated))
        let calls = await fake.calls
        XCTAssertEqual(calls.map(\.1), [nil, "\"abc\""])
        let hit = try await cache.search(swift)
        XCTAssertEqual(hit.cache, .hit, "a 304 makes the entry fresh again")
    }

    func testPlainUpstreamWorks() async throws {
        let fake = FakeSearch([.success(.modified(samplePage("plain"), etag: "ignored"))])
        let cache = SearchCache(upstream: PlainSearch(fake: fake), clock: ManualClock())
        let r = try await cache.search(swift)
        XCTAssertEqual(r.page, samplePage("plain"))
        XCTAssertEqual(r.cache, .miss)
    }

    // MARK: query normalisation

    func testNormalizedQueryFoldsCaseAndSpacesOfTermsOnly() {
        let n = SearchRequest.normalizedQuery
        XCTAssertEqual(n("Swift"), "swift")
        XCTAssertEqual(n("  swift \t "), "swift")
        XCTAssertEqual(n("SWIFT   Vapor"), "swift vapor")
        XCTAssertEqual(n("swift OR rust"), "swift OR rust", "operators only work upper-case: kept")
        XCTAssertEqual(n("swift or rust"), "swift or rust")
        XCTAssertEqual(n("Swift NOT Vapor"), "swift NOT vapor")
        XCTAssertEqual(n("Web  language:Swift user:Apple"), "web language:Swift user:Apple", "qualifiers kept")
        XCTAssertEqual(n("\"Hello  World\"  Swift"), "\"Hello  World\" swift", "quoted phrases kept as typed")
        XCTAssertEqual(n("rust swift"), "rust swift", "order kept")
        XCTAssertEqual(n("   "), "")
    }

    func testVariantsOfOneQueryShareOneEntryAndOneUpstreamCall() async throws {
        let clock = ManualClock()
        let fake = FakeSearch([.success(.modified(samplePage("a"), etag: nil))])
        let cache = makeCache(fake, clock)
        let first = try await cache.search(SearchRequest(query: "Swift  Vapor"))
        XCTAssertEqual(first.cache, .miss)
        for variant in ["swift vapor", " SWIFT vapor ", "swift\tVAPOR"] {
            let r = try await cache.search(SearchRequest(query: variant))
            XCTAssertEqual(r, SearchResponse(page: samplePage("a"), cache: .hit), variant)
        }
        let calls = await fake.callCount
        XCTAssertEqual(calls, 1)
        let count = await cache.count
        XCTAssertEqual(count, 1)
    }

    // MARK: stale while rate-limited, and the revalidation reserve

    func testRateLimitedServesTheLastGoodPageMarkedStaleWithoutCalling() async throws {
        let clock = ManualClock()
        let fake = FakeSearch([.success(.modified(samplePage("old"), etag: nil))])
        let budget = BudgetedSearch(fake: fake)
        let cache = SearchCache(upstream: budget, clock: clock)
        _ = try await cache.search(swift)
        clock.advance(61)
        budget.set(limited: .rateLimited(retryAfterSeconds: 30, message: "limited"))
        let served = try await cache.search(swift)
        XCTAssertEqual(served, SearchResponse(page: samplePage("old"), cache: .stale, isStale: true))
        await cache.waitForRevalidations()
        let calls = await fake.callCount
        XCTAssertEqual(calls, 1, "no revalidation was attempted while rate-limited")
        XCTAssertEqual(budget.fetches, 1, "not even one the limiter would refuse")
        // Nothing cached for another query: the error, as before.
        do {
            _ = try await cache.search(SearchRequest(query: "rust"))
            XCTFail("expected rateLimited")
        } catch {
            XCTAssertEqual(error.kind, "rateLimited")
        }
        // The limit lifts: stale-while-revalidate as usual (not marked: no revalidation failed).
        budget.set(limited: nil)
        await fake.push(.success(.modified(samplePage("new"), etag: nil)))
        let again = try await cache.search(swift)
        XCTAssertEqual(again, SearchResponse(page: samplePage("old"), cache: .stale, isStale: false))
        await cache.waitForRevalidations()
        let fresh = try await cache.search(swift)
        XCTAssertEqual(fresh, SearchResponse(page: samplePage("new"), cache: .hit))
    }
}

/// A scripted upstream that also reports a settable rate-limit state (and honours it).
final class BudgetedSearch: ConditionalRepositorySearching, UpstreamBudgetReporting, @unchecked Sendable {
    let fake: FakeSearch
    private let lock = NSLock()
    private var limited: SearchError?
    init(fake: FakeSearch) { self.fake = fake }

    func set(limited: SearchError?) { lock.withLock { self.limited = limited } }
    func limitedNow() async -> SearchError? { lock.withLock { limited } }
    /// Calls that reached this upstream, refused or not (the cache must not even try while limited).
    var fetches: Int { lock.withLock { fetchCount } }
    private var fetchCount = 0
    func fetch(_ request: SearchRequest, ifNoneMatch etag: String?) async throws(SearchError) -> ConditionalFetch {
        if let error = lock.withLock({ () -> SearchError? in
            fetchCount += 1
            return limited
        }) {
            throw error
        }
        return try await fake.fetch(request, ifNoneMatch: etag)
    }
    func search(_ request: SearchRequest, policy: CachePolicy) async throws(SearchError) -> SearchResponse {
        try await fake.search(request, policy: policy)
    }
}
