import GitHubSearch
import JSON
import XCTest

/// Pages of 30 cut from GitHub's pages of 100: the first three pages cost one call, a page straddling
/// two wide pages reads both, `hasMore` and the cache outcome are the page's own, and a short or final
/// wide page ends the paging.
final class WidePagesTests: XCTestCase {
    typealias F = SearchFixtures

    func wide(
        _ page: Int, _ ids: ClosedRange<Int>, total: Int = 1000, hasMore: Bool = true, cache: CacheOutcome = .miss
    )
        -> Result<SearchResponse, SearchError>
    {
        .success(
            SearchResponse(
                page: SearchPage(
                    totalCount: total, incompleteResults: false, repositories: ids.map(F.repo), page: page,
                    hasMore: hasMore),
                cache: cache, isStale: cache == .stale))
    }

    func ids(_ r: SearchResponse) -> [Int] { r.page.repositories.map(\.id) }

    func testTheFirstThreePagesAreCutFromOneWidePage() async throws {
        let fake = FakeSearch()
        let search = WidePages(base: fake)
        fake.stub(F.request("swift", perPage: 100), wide(1, 1...100))
        let p1 = try await search.search(F.request("swift", page: 1), policy: .useCache)
        XCTAssertEqual(ids(p1), Array(1...30))
        XCTAssertEqual(p1.page.page, 1)
        XCTAssertTrue(p1.page.hasMore)
        XCTAssertEqual(p1.page.totalCount, 1000)
        XCTAssertEqual(p1.cache, .miss)
        // Pages 2 and 3: the same wide page (the cache below answers it; here the fake is asked again).
        fake.stub(F.request("swift", perPage: 100), wide(1, 1...100, cache: .hit))
        let p3 = try await search.search(F.request("swift", page: 3), policy: .useCache)
        XCTAssertEqual(ids(p3), Array(61...90))
        XCTAssertEqual(p3.cache, .hit)
        XCTAssertEqual(fake.calls.map(\.request.perPage), [100, 100])
        XCTAssertEqual(fake.calls.map(\.request.page), [1, 1])
    }

    func testAPageAcrossTwoWidePagesReadsBoth() async throws {
        let fake = FakeSearch()
        let search = WidePages(base: fake)
        fake.stub(F.request("swift", perPage: 100), policy: .revalidate, wide(1, 1...100, cache: .hit))
        fake.stub(F.request("swift", page: 2, perPage: 100), policy: .revalidate, wide(2, 101...200))
        let p4 = try await search.search(F.request("swift", page: 4), policy: .revalidate)
        XCTAssertEqual(ids(p4), Array(91...120))
        XCTAssertEqual(p4.page.page, 4)
        XCTAssertTrue(p4.page.hasMore)
        XCTAssertEqual(p4.cache, .miss, "one of the two called GitHub")
        XCTAssertEqual(fake.calls.map(\.policy), [.revalidate, .revalidate])
    }

    func testAShortWidePageEndsThePaging() async throws {
        let fake = FakeSearch()
        let search = WidePages(base: fake)
        fake.stub(F.request("rare", perPage: 100), wide(1, 1...45, total: 45, hasMore: false))
        let p1 = try await search.search(F.request("rare", page: 1), policy: .useCache)
        XCTAssertTrue(p1.page.hasMore, "15 more on page 2")
        fake.stub(F.request("rare", perPage: 100), wide(1, 1...45, total: 45, hasMore: false))
        let p2 = try await search.search(F.request("rare", page: 2), policy: .useCache)
        XCTAssertEqual(ids(p2), Array(31...45))
        XCTAssertFalse(p2.page.hasMore)
        // Exactly 60: page 2 ends where the results end.
        fake.stub(F.request("even", perPage: 100), wide(1, 1...60, total: 60, hasMore: false))
        let even = try await search.search(F.request("even", page: 2), policy: .useCache)
        XCTAssertEqual(ids(even).count, 30)
        XCTAssertFalse(even.page.hasMore)
        XCTAssertTrue(fake.unusedStubs.isEmpty)
    }

    func testTheLastPageBeforeTheCapHasNoMoreAndPagesPastItAreNotWidened() async throws {
        let fake = FakeSearch()
        let search = WidePages(base: fake)
        // Results 991–1000 are page 34 of 30 (991–1020, cut at the cap), in wide page 10.
        fake.stub(F.request("swift", page: 10, perPage: 100), wide(10, 901...1000, hasMore: false))
        let last = try await search.search(F.request("swift", page: 34), policy: .useCache)
        XCTAssertEqual(ids(last), Array(991...1000))
        XCTAssertFalse(last.page.hasMore)
        // Page 35 lies past the cap: asked as it is (the gateway answers it empty without a call).
        fake.stub(F.request("swift", page: 35), wide(35, 1...1, hasMore: false))
        _ = try await search.search(F.request("swift", page: 35), policy: .useCache)
        XCTAssertEqual(fake.calls.last?.request.perPage, 30)
    }

    func testAStalePartMakesThePageStale() async throws {
        let fake = FakeSearch()
        let search = WidePages(base: fake)
        fake.stub(F.request("swift", perPage: 100), wide(1, 1...100, cache: .stale))
        fake.stub(F.request("swift", page: 2, perPage: 100), wide(2, 101...200, cache: .hit))
        let p4 = try await search.search(F.request("swift", page: 4), policy: .useCache)
        XCTAssertEqual(p4.cache, .stale)
        XCTAssertTrue(p4.isStale)
    }
}
