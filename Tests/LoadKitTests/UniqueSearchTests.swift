import BFF
import Features
import Foundation
import GitHubSearch
import LoadKit
import Logging
import SearchApp
import XCTest

/// A search that records every query it is asked (the application in these tests has no cache in
/// front of it, so it sees every stateless search the load sent) and answers one empty page.
private final class RecordingSearch: RepositorySearching, @unchecked Sendable {
    private let lock = NSLock()
    private var asked: [String] = []
    var queries: [String] { lock.withLock { asked } }
    func search(_ request: SearchRequest, policy: CachePolicy) async throws(SearchError) -> SearchResponse {
        lock.withLock { asked.append(request.query) }
        let page = SearchPage(totalCount: 0, incompleteResults: false, repositories: [], page: 1, hasMore: false)
        return SearchResponse(page: page, cache: .hit)
    }
}

/// `rest --search-unique`: every search asks a query never asked before (in the run and in earlier
/// runs), so a cache in front of GitHub cannot serve any of them: the abusive client of the fair-share
/// benchmark (`bench/fair-share.sh`).
final class UniqueSearchTests: XCTestCase {
    private func server(_ search: RecordingSearch) throws -> Target {
        var configuration = AppConfiguration()
        configuration.http.port = 0
        configuration.http.threads = 1
        configuration.shutdownGracePeriod = 0.2
        var quiet = Logger(label: "loadkit-unique-test")
        quiet.logLevel = .error
        let app = Application.searchApp(
            configuration: configuration, search: search, logger: quiet)
        try app.start()
        addTeardownBlock { app.shutdown() }
        return try Target(url: "http://127.0.0.1:\(app.port)")
    }

    private func run(_ target: Target, unique: Bool) throws -> LoadReport {
        var o = RestScenario.Options()
        o.connections = 2
        o.duration = 0.3
        o.progress = false
        o.searchShare = 1
        o.searchUnique = unique
        return try RestScenario.run(target: target, options: o)
    }

    func testEverySearchAsksADistinctQueryAndRepeatedRunsDoNotMeet() throws {
        let search = RecordingSearch()
        let target = try server(search)
        let first = try run(target, unique: true)
        let firstQueries = search.queries
        XCTAssertGreaterThan(firstQueries.count, 10, first.table)
        XCTAssertEqual(first.int("searchRequests"), firstQueries.count, first.table)
        XCTAssertEqual(first.int("non2xx"), 0, first.table)
        XCTAssertEqual(Set(firstQueries).count, firstQueries.count, "a query was asked twice: \(firstQueries)")
        XCTAssertTrue(firstQueries.allSatisfy { $0.hasPrefix("unique-") }, "\(firstQueries.prefix(5))")
        guard case .text(let kind)? = first["searchQueries"] else { return XCTFail("no searchQueries: \(first.table)") }
        XCTAssertTrue(kind.contains("unique"), kind)

        _ = try run(target, unique: true)
        let secondQueries = search.queries.dropFirst(firstQueries.count)
        XCTAssertGreaterThan(secondQueries.count, 10)
        XCTAssertTrue(Set(firstQueries).isDisjoint(with: secondQueries), "a second run repeated the first's queries")
    }

    /// Without the flag the 50-word Zipf mix repeats its popular words (which a cache would serve).
    func testTheDefaultMixRepeatsQueries() throws {
        let search = RecordingSearch()
        let report = try run(try server(search), unique: false)
        let queries = search.queries
        XCTAssertGreaterThan(queries.count, 50, report.table)
        XCTAssertLessThanOrEqual(Set(queries).count, QueryMix.vocabulary.count)
        XCTAssertNil(report["searchQueries"], report.table)
    }
}
