import BFF
import Features
import Foundation
import GitHubSearch
import LoadKit
import Logging
import SearchApp
import XCTest

/// A search that is always rate limited, counting its calls: the server's GitHub budget is spent.
private final class SpentBudget: RepositorySearching, @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    var calls: Int { lock.withLock { count } }
    func search(_ request: SearchRequest, policy: CachePolicy) async throws(SearchError) -> SearchResponse {
        lock.withLock { count += 1 }
        throw .rateLimited(retryAfterSeconds: 37, message: "GitHub's search rate limit is exhausted.")
    }
}

/// What an operator reads in `bff-load`'s reports: `rest` leaves the server's GitHub budget alone
/// unless told otherwise (and then says so, and why its `503`s happened), and `streams` says the
/// broadcast was skipped when the server has no test hook, whatever an older server answered.
final class OperatorReportTests: XCTestCase {
    private func server(testHooks: Bool, search: SpentBudget) throws -> (Application, Target) {
        var configuration = AppConfiguration()
        configuration.http.port = 0
        configuration.http.threads = 1
        configuration.testHooks = testHooks
        configuration.shutdownGracePeriod = 0.2
        // static files, as bff serves the browser UI (unknown paths used to reach them)
        let files = FileManager.default.temporaryDirectory.appendingPathComponent("loadkit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
        try "<!doctype html>".write(to: files.appendingPathComponent("index.html"), atomically: true, encoding: .utf8)
        addTeardownBlock { try? FileManager.default.removeItem(at: files) }
        configuration.http.publicDirectory = files.path
        var quiet = Logger(label: "loadkit-report-test")
        quiet.logLevel = .error
        let app = Application.searchApp(
            configuration: configuration, search: search, logger: quiet)
        try app.start()
        addTeardownBlock { app.shutdown() }
        return (app, try Target(url: "http://127.0.0.1:\(app.port)"))
    }

    func testRestSendsNoSearchesByDefault() throws {
        let search = SpentBudget()
        let (_, target) = try server(testHooks: false, search: search)
        var o = RestScenario.Options()
        o.connections = 2
        o.duration = 0.3
        o.progress = false
        XCTAssertEqual(o.searchShare, 0)
        let report = try RestScenario.run(target: target, options: o)
        XCTAssertGreaterThan(report.int("requests") ?? 0, 10, report.table)
        XCTAssertEqual(report.int("searchRequests"), 0, report.table)
        XCTAssertEqual(report.int("non2xx"), 0, report.table)
        XCTAssertNil(report["warning"], report.table)
        XCTAssertNil(report["non2xxReasons"], report.table)
        XCTAssertEqual(search.calls, 0, "the default run reached the server's GitHub budget")
    }

    func testRestWithASearchShareWarnsAndSaysWhyItsAnswersWere503() throws {
        let search = SpentBudget()
        let (_, target) = try server(testHooks: false, search: search)
        var o = RestScenario.Options()
        o.connections = 2
        o.duration = 0.3
        o.progress = false
        o.searchShare = 0.5
        let report = try RestScenario.run(target: target, options: o)
        guard case .text(let warning)? = report["warning"] else { return XCTFail("no warning row: \(report.table)") }
        XCTAssertTrue(warning.contains("GitHub budget"), warning)
        XCTAssertTrue(warning.contains("50 %"), warning)
        XCTAssertGreaterThan(report.int("searchRequests") ?? 0, 0, report.table)
        XCTAssertEqual(report.int("non2xx"), report.int("searchRequests"), report.table)
        guard case .text(let reasons)? = report["non2xxReasons"] else { return XCTFail("no reasons: \(report.table)") }
        // One reason (the digits of its retry time folded), counted once per refused search.
        XCTAssertEqual(reasons.components(separatedBy: "; ").count, 1, reasons)
        XCTAssertTrue(reasons.hasPrefix("\(report.int("non2xx") ?? -1)× search 503: "), reasons)
        XCTAssertTrue(reasons.contains("rate limit"), reasons)
    }

    func testStreamsSaysTheBroadcastWasSkippedOnAServerWithoutTestHooks() throws {
        let (_, target) = try server(testHooks: false, search: SpentBudget())
        var o = StreamsScenario.Options()
        o.streams = 3
        o.hold = 0
        o.progress = false
        let report = try StreamsScenario.run(target: target, options: o)
        guard case .text(let text)? = report["broadcast"] else { return XCTFail(report.table) }
        XCTAssertEqual(text, "broadcast skipped: server has no test hook")
        XCTAssertEqual(report.int("succeeded"), 3, report.table)
    }

    /// An older bff answered the hook's POST from its static files: `405` (GET, HEAD).
    func testStreamsSaysTheBroadcastWasSkippedWhenTheHookIsAnswered405() throws {
        let server = try GreetingTestServer()
        server.hasStatusHook = false
        server.noHookStatus = "405 Method Not Allowed"
        defer { server.stop() }
        var o = StreamsScenario.Options()
        o.streams = 3
        o.hold = 0
        o.progress = false
        let report = try StreamsScenario.run(target: Target(url: "http://127.0.0.1:\(server.port)"), options: o)
        guard case .text(let text)? = report["broadcast"] else { return XCTFail(report.table) }
        XCTAssertEqual(text, "broadcast skipped: server has no test hook")
    }
}
