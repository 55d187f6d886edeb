import EventHTTP
import Foundation
import GitHubSearch
import GitHubSimulator
import Logging
import XCTest

@_spi(Testing) @testable import GitHubLive

/// The live gateway against the simulator over real HTTP on 127.0.0.1 (an ephemeral port).
final class GatewaySimulatorTests: XCTestCase {
    var server: HTTPServer?
    var simulator: GitHubSimulator!
    var baseURL = ""

    func startSimulator(repositories: Int = 1500, rateLimit: Int = 1000, token: String? = nil) throws {
        var config = GitHubSimulator.Configuration()
        config.repositories = repositories
        config.rateLimit = rateLimit
        config.token = token
        simulator = GitHubSimulator(configuration: config)
        var serverConfig = HTTPServer.Configuration()
        serverConfig.port = 0
        serverConfig.threads = 1
        let server = HTTPServer(
            configuration: serverConfig, logger: Logger(label: "sim") { _ in SwiftLogNoOpLogHandler() })
        simulator.install(on: server.router)
        try server.start()
        self.server = server
        baseURL = "http://127.0.0.1:\(server.port)"
    }

    override func tearDown() {
        server?.shutdown(gracePeriod: 0.5)
        server = nil
    }

    func gateway(
        token: String? = nil, timeout: Double = 10, statuses: Recorder<UpstreamStatus>? = nil, logger: Logger? = nil
    ) throws -> GitHubGateway {
        try GitHubGateway(
            configuration: .init(
                baseURL: baseURL, token: token, requestTimeout: timeout, resourceTimeout: timeout * 2,
                rateLimiter: .init(minimumSpacing: .zero)),
            logger: logger ?? Logger(label: "gw") { _ in SwiftLogNoOpLogHandler() },
            onStatus: { statuses?.append($0) })
    }

    func expectError(_ body: () async throws -> Void, file: StaticString = #filePath, line: UInt = #line) async
        -> SearchError?
    {
        do {
            try await body()
            XCTFail("expected a SearchError", file: file, line: line)
            return nil
        } catch {
            guard let e = error as? SearchError else {
                XCTFail("not a SearchError: \(error)", file: file, line: line)
                return nil
            }
            return e
        }
    }

    func testDecodesAndPagesThroughLink() async throws {
        try startSimulator()
        let gw = try gateway()
        let expected = simulator.corpus.repositories.filter { $0.language == "Python" }
        var request = SearchRequest(query: "language:python", sort: .stars, page: 1, perPage: 100)
        var seen: [Repository] = []
        var pages = 0
        while true {
            let r = try await gw.search(request)
            XCTAssertEqual(r.cache, .miss)
            XCTAssertEqual(r.page.totalCount, expected.count)
            XCTAssertEqual(r.page.page, request.page)
            seen += r.page.repositories
            pages += 1
            guard r.page.hasMore else { break }
            request = request.nextPage
        }
        XCTAssertEqual(pages, (expected.count + 99) / 100)
        XCTAssertEqual(seen.count, expected.count)
        XCTAssertEqual(Set(seen.map(\.id)), Set(expected.map(\.id)))
        XCTAssertEqual(seen.map(\.stars), seen.map(\.stars).sorted(by: >))
        let top = try XCTUnwrap(expected.max { ($0.stars, -$0.id) < ($1.stars, -$1.id) })
        XCTAssertEqual(seen.first?.fullName, top.fullName)
        XCTAssertEqual(seen.first?.htmlURL, "https://github.com/\(top.fullName)")
        XCTAssertEqual(seen.first?.description, top.description)
        XCTAssertEqual(seen.first?.topics, top.topics ?? [])
        XCTAssertEqual(seen.first?.updatedAt, top.updatedAt)
    }

    func testHostileAndUnicodeTextSurvivesTheRoundTrip() async throws {
        try startSimulator(repositories: 5000)
        let gw = try gateway()
        let r = try await gw.search(SearchRequest(query: "script in:description", perPage: 100))
        let byID = Dictionary(uniqueKeysWithValues: simulator.corpus.repositories.map { ($0.id, $0) })
        XCTAssertTrue(r.page.repositories.contains { $0.description?.contains("<script>") == true })
        for repo in r.page.repositories { XCTAssertEqual(repo.description, byID[repo.id]?.description) }
        let all = try await gw.search(SearchRequest(query: "stars:<100000", page: 3, perPage: 100))
        for repo in all.page.repositories {
            XCTAssertEqual(repo.description, byID[repo.id]?.description)
            XCTAssertEqual(repo.language, byID[repo.id]?.language)
        }
    }

    func testResultCapAndInvalidQueries() async throws {
        try startSimulator(repositories: 5000)
        let gw = try gateway()
        let last = try await gw.search(SearchRequest(query: "a", page: 10, perPage: 100))
        XCTAssertEqual(last.page.repositories.count, 100)
        XCTAssertFalse(last.page.hasMore)
        let before = simulator.stats.requests
        let past = try await gw.search(SearchRequest(query: "a", page: 11, perPage: 100))
        XCTAssertEqual(past.page.repositories, [])
        XCTAssertEqual(simulator.stats.requests, before, "a page past the cap is never requested")

        let empty = await expectError { _ = try await gw.search(SearchRequest(query: "")) }
        XCTAssertEqual(empty, .invalidQuery(message: "Validation Failed: q missing"))
        let ghost = await expectError { _ = try await gw.search(SearchRequest(query: "user:ghost-user-xyz")) }
        XCTAssertEqual(ghost?.kind, "invalidQuery")
        XCTAssertTrue(ghost?.message.contains("cannot be searched") == true)
    }

    func testServerErrorAndMalformedJSON() async throws {
        try startSimulator()
        let statuses = Recorder<UpstreamStatus>()
        let gw = try gateway(statuses: statuses)
        simulator.faults.serverError = true
        let e5xx = await expectError { _ = try await gw.search(SearchRequest(query: "a")) }
        XCTAssertEqual(e5xx, .upstream(message: "GitHub answered HTTP 502: Server Error."))
        XCTAssertEqual(statuses.all.last?.reachable, false)
        simulator.faults = SimFaults()
        simulator.faults.malformedJSON = true
        let bad = await expectError { _ = try await gw.search(SearchRequest(query: "a")) }
        XCTAssertEqual(bad?.kind, "upstream")
        simulator.faults = SimFaults()
        _ = try await gw.search(SearchRequest(query: "a"))
        XCTAssertEqual(statuses.all.last?.reachable, true)
        XCTAssertNil(statuses.all.last?.message)
    }

    func testPrimaryRateLimitStopsCallsAndPublishesStatus() async throws {
        try startSimulator()
        let statuses = Recorder<UpstreamStatus>()
        let gw = try gateway(statuses: statuses)
        _ = try await gw.search(SearchRequest(query: "a"))
        XCTAssertEqual(statuses.all.last?.rateLimit?.limit, 1000)
        XCTAssertEqual(statuses.all.last?.rateLimit?.remaining, 999)
        XCTAssertEqual(statuses.all.last?.rateLimit?.resource, "search")
        simulator.faults.primaryRateLimit = true
        let limited = await expectError { _ = try await gw.search(SearchRequest(query: "b")) }
        XCTAssertEqual(limited?.kind, "rateLimited")
        XCTAssertTrue((1...61).contains(limited?.retryAfterSeconds ?? 0), "\(String(describing: limited))")
        XCTAssertEqual(statuses.all.last?.rateLimit?.remaining, 0)
        XCTAssertNotNil(statuses.all.last?.message)
        let calls = simulator.stats.requests
        simulator.faults = SimFaults()
        let again = await expectError { _ = try await gw.search(SearchRequest(query: "c")) }
        XCTAssertEqual(again?.kind, "rateLimited")
        XCTAssertEqual(simulator.stats.requests, calls, "no upstream call until the reset")
    }

    func testSecondaryRateLimitHonoursRetryAfter() async throws {
        try startSimulator()
        let gw = try gateway()
        simulator.faults.secondaryRateLimit = true
        simulator.faults.retryAfterSeconds = 7
        let limited = await expectError { _ = try await gw.search(SearchRequest(query: "a")) }
        XCTAssertEqual(limited?.retryAfterSeconds, 7)
        let calls = simulator.stats.requests
        let again = await expectError { _ = try await gw.search(SearchRequest(query: "a")) }
        XCTAssertEqual(again?.kind, "rateLimited")
        XCTAssertEqual(simulator.stats.requests, calls)
    }

    func testRealBudgetIsNeverOverspent() async throws {
        try startSimulator(rateLimit: 2)
        let gw = try gateway()
        _ = try await gw.search(SearchRequest(query: "a"))
        _ = try await gw.search(SearchRequest(query: "b"))  // remaining 0 now
        let third = await expectError { _ = try await gw.search(SearchRequest(query: "c")) }
        XCTAssertEqual(third?.kind, "rateLimited")
        XCTAssertEqual(simulator.stats.requests, 2, "the spent budget is known from the headers; no 403 needed")
        XCTAssertEqual(simulator.stats.rateLimited, 0)
    }

    func testLatencyIsWaitedFor() async throws {
        try startSimulator()
        let gw = try gateway()
        simulator.faults.latencyMs = 300
        let start = ContinuousClock.now
        _ = try await gw.search(SearchRequest(query: "a"))
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(300))
    }

    func testHangTimesOutAsUnavailable() async throws {
        try startSimulator()
        let statuses = Recorder<UpstreamStatus>()
        let gw = try gateway(timeout: 1, statuses: statuses)
        simulator.faults.hang = true
        let start = ContinuousClock.now
        let error = await expectError { _ = try await gw.search(SearchRequest(query: "a")) }
        let elapsed = ContinuousClock.now - start
        XCTAssertEqual(error?.kind, "unavailable")
        XCTAssertGreaterThanOrEqual(elapsed, .milliseconds(900))
        XCTAssertLessThan(elapsed, .seconds(5))
        XCTAssertEqual(statuses.all.last?.reachable, false)
    }

    func testTokenIsSentAsBearerButNeverLeaks() async throws {
        let token = "ghp_s3cretTOKENvalue123"
        try startSimulator(token: token)
        let (logger, lines) = capturingLogger()
        let good = try gateway(token: token, logger: logger)
        _ = try await good.search(SearchRequest(query: "a"))
        XCTAssertEqual(simulator.stats.authenticated, 1, "the simulator accepted Bearer <token>")
        let wrongToken = "ghp_WRONGtokenValue999"
        let bad = try gateway(token: wrongToken, logger: logger)
        let e401 = await expectError { _ = try await bad.search(SearchRequest(query: "a")) }
        XCTAssertEqual(e401?.kind, "upstream")
        simulator.faults.hang = true
        let slow = try gateway(token: token, timeout: 0.5, logger: logger)
        let timeout = await expectError { _ = try await slow.search(SearchRequest(query: "a")) }
        XCTAssertEqual(timeout?.kind, "unavailable")
        for error in [e401, timeout].compactMap({ $0 }) {
            XCTAssertFalse(
                error.message.contains(token) || error.message.contains(wrongToken) || error.message.contains("ghp_"))
        }
        XCTAssertFalse(lines.all.isEmpty)
        XCTAssertFalse(lines.all.contains { $0.contains("ghp_") }, "\(lines.all)")
    }

    func testCacheOverGatewaySharesOneUpstreamCall() async throws {
        try startSimulator()
        simulator.faults.latencyMs = 100
        let cache = SearchCache(upstream: try gateway())
        let results = try await withThrowingTaskGroup(of: SearchResponse.self) { group in
            for _ in 0..<25 { group.addTask { try await cache.search(SearchRequest(query: "language:go")) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        XCTAssertEqual(results.count, 25)
        XCTAssertTrue(results.allSatisfy { $0.page == results[0].page })
        XCTAssertEqual(simulator.stats.requests, 1)
        let hit = try await cache.search(SearchRequest(query: "language:go"))
        XCTAssertEqual(hit.cache, .hit)
        XCTAssertEqual(simulator.stats.requests, 1)
    }

    func testETagRevalidationGets304FromTheSimulator() async throws {
        try startSimulator()
        let clock = ManualClock()
        let cache = SearchCache(upstream: try gateway(), clock: clock)
        let first = try await cache.search(SearchRequest(query: "language:rust"))
        XCTAssertEqual(first.cache, .miss)
        clock.advance(120)
        let second = try await cache.search(SearchRequest(query: "language:rust"), policy: .revalidate)
        XCTAssertEqual(second, SearchResponse(page: first.page, cache: .revalidated))
        XCTAssertEqual(simulator.stats.notModified, 1)
        XCTAssertEqual(simulator.stats.requests, 2)
        let third = try await cache.search(SearchRequest(query: "language:rust"))
        XCTAssertEqual(third.cache, .hit)
    }

    func testQueryVariantsCostOneCallToTheSimulator() async throws {
        try startSimulator()
        let cache = SearchCache(upstream: try gateway())
        _ = try await cache.search(SearchRequest(query: "Language:Go"))
        for variant in ["language:go", "  LANGUAGE:GO "] {
            // Qualifiers are kept as typed (GitHub need not fold their case): each is a key of its own.
            _ = try await cache.search(SearchRequest(query: variant))
        }
        XCTAssertEqual(simulator.stats.requests, 3)
        let swift = try await cache.search(SearchRequest(query: "Swift"))
        for variant in ["swift", " SWIFT ", "sWiFt"] {
            let r = try await cache.search(SearchRequest(query: variant))
            XCTAssertEqual(r.cache, .hit, variant)
            XCTAssertEqual(r.page, swift.page)
        }
        XCTAssertEqual(simulator.stats.requests, 4)
    }

    func testRateLimitedSimulatorStillShowsTheLastGoodPageMarkedStale() async throws {
        try startSimulator(rateLimit: 2)
        let clock = ManualClock()
        let gw = try GitHubGateway(
            configuration: .init(baseURL: baseURL, rateLimiter: .init(minimumSpacing: .zero)), clock: clock,
            logger: Logger(label: "gw") { _ in SwiftLogNoOpLogHandler() })
        let cache = SearchCache(upstream: gw, clock: clock)
        let first = try await cache.search(SearchRequest(query: "swift"))
        _ = try await cache.search(SearchRequest(query: "rust"))  // the window's budget is spent now
        clock.advance(61)  // past the TTL, still inside the simulator's real minute
        let served = try await cache.search(SearchRequest(query: "Swift"))
        XCTAssertEqual(served, SearchResponse(page: first.page, cache: .stale, isStale: true))
        await cache.waitForRevalidations()
        XCTAssertEqual(simulator.stats.requests, 2, "no call was spent on a revalidation that would be refused")
    }
}
