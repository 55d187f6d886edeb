import BFF
import EventHTTP
import GitHubSimulator
import JSON
import Logging
import SearchApp
import WireClient
import XCTest

/// The search flow through real POSTs and a real event stream, against the GitHub simulator
/// over real HTTP, with a token that must never leak.
final class SearchEndToEndTests: XCTestCase {
    static let token = "ghp_TEST_SECRET_TOKEN_0123456789"

    final class Simulator {
        let sim: GitHubSimulator
        let server: HTTPServer
        init(token: String?, rateLimit: Int = 1000) throws {
            var c = GitHubSimulator.Configuration()
            c.repositories = 2000
            c.rateLimit = rateLimit
            c.token = token
            sim = GitHubSimulator(configuration: c)
            var h = HTTPServer.Configuration()
            h.port = 0
            h.threads = 1
            var quiet = Logger(label: "sim")
            quiet.logLevel = .error
            server = HTTPServer(configuration: h, logger: quiet)
            sim.install(on: server.router)
            try server.start()
        }
        deinit { server.shutdown(gracePeriod: 1) }
        var url: String { "http://127.0.0.1:\(server.port)" }
    }

    func makeApp(sim: Simulator, logs: LogCollector) throws -> LiveApp {
        var c = AppConfiguration()
        c.http.port = 0
        c.http.threads = 2
        var g = GitHubSettings()
        g.baseURL = sim.url
        g.token = SearchEndToEndTests.token
        g.cachePath = nil
        return try LiveApp(app: Application.live(configuration: c, github: g, logger: logs.logger()))
    }

    func testSearchLoadMoreAndSelectThroughTheStream() throws {
        let sim = try Simulator(token: SearchEndToEndTests.token)
        let logs = LogCollector()
        let t = try makeApp(sim: sim, logs: logs)
        let id = try t.createSession()
        let (_, reader) = try t.stream(id)
        var client = ClientState()
        try client.apply(XCTUnwrap(reader.next()))

        XCTAssertEqual(try t.post(id, "search", "query", #"{"value":"language:swift"}"#).status, 202)
        let submit = try t.post(id, "search", "submit")
        let submitSeq = try XCTUnwrap(submit.json?["inputSeq"]?.intValue)
        func applyUntil(_ done: (ClientState) -> Bool) throws {
            while !done(client) {
                guard let e = try reader.next(timeout: 10) else { return XCTFail("stream ended") }
                if e.event == "search", let seq = try JSONValue.parse(e.data)["inputSeq"]?.intValue {
                    XCTAssertLessThanOrEqual(seq, submitSeq + 2)
                }
                try client.apply(e)
            }
        }
        try applyUntil { $0.viewModels["search"]?["repositories"]?.arrayValue?.count == 30 }
        var search = try XCTUnwrap(client.viewModels["search"]?.objectValue)
        XCTAssertEqual(search["isLoading"], false)
        XCTAssertEqual(search["searchEnabled"], true)
        XCTAssertEqual(search["hasMore"], true)
        XCTAssertGreaterThan(search["totalCount"]?.intValue ?? 0, 30)
        let first = try XCTUnwrap(search["repositories"]?.arrayValue?.first)
        XCTAssertEqual(first["language"], "Swift")

        _ = try t.post(id, "search", "loadMore")
        try applyUntil { $0.viewModels["search"]?["repositories"]?.arrayValue?.count == 60 }
        search = try XCTUnwrap(client.viewModels["search"]?.objectValue)
        let ids = search["repositories"]?.arrayValue?.compactMap { $0["id"]?.intValue } ?? []
        XCTAssertEqual(Set(ids).count, 60, "load more appends without duplicates")

        let repoID = try XCTUnwrap(first["id"]?.intValue)
        _ = try t.post(id, "search", "select", #"{"value":\#(repoID)}"#)
        try applyUntil { !$0.signals.isEmpty }
        XCTAssertEqual(client.signals.first?.1["openURL"], first["url"])
        XCTAssertEqual(client.signals.first?.1["deselect"], .int(repoID))
        XCTAssertEqual(client.snapshot["viewModels"]?["search"], try t.state(id)["viewModels"]?["search"])
        XCTAssertEqual(sim.sim.stats.authenticated, sim.sim.stats.requests, "the token was sent upstream")

        // the view model's pages of 30 were cut from one page of 100, and the stateless endpoint shares the
        // cache: that page is a hit now
        XCTAssertEqual(sim.sim.stats.requests, 1, "the first page and the load-more cost one call")
        let rest = try WireConnection.get(port: t.port, path: "/api/search/repositories?q=language:swift&per_page=100")
        XCTAssertEqual(rest.status, 200)
        XCTAssertEqual(rest.header("X-Cache"), "hit")
        XCTAssertEqual(rest.json?["items"]?.arrayValue?.count, min(100, rest.json?["totalCount"]?.intValue ?? 0))
        XCTAssertEqual(rest.json?["page"], 1)

        let everything = logs.all + rest.text + (try t.state(id)).text
        XCTAssertFalse(everything.contains(SearchEndToEndTests.token), "the token leaked")
        XCTAssertFalse(everything.contains("TEST_SECRET"), "part of the token leaked")
    }

    func testUpstreamFailuresBecomeStateAndProblemsWithoutTheToken() throws {
        let sim = try Simulator(token: SearchEndToEndTests.token)
        let logs = LogCollector()
        let t = try makeApp(sim: sim, logs: logs)
        sim.sim.faults.primaryRateLimit = true
        let limited = try WireConnection.get(port: t.port, path: "/api/search/repositories?q=rust")
        XCTAssertTrue(limited.problem(503).contains("rate limit"))
        XCTAssertNotNil(limited.header("Retry-After").flatMap(Int.init))
        let id = try t.createSession()
        _ = try t.post(id, "search", "query", #"{"value":"other"}"#)
        _ = try t.post(id, "search", "submit")
        // The stateless search above made the app's limiter block searching, and every session follows
        // it: the session shows the block (searchEnabled false, a retryAt to count down to) whether its
        // submit came before the block reached it (then its search fails with a rateLimited error) or
        // after (then submit is a no-op).
        let (_, reader) = try t.stream(id)
        var client = ClientState()
        while client.viewModels["search"]?["retryAt"]?.stringValue == nil {
            guard let e = try reader.next(timeout: 10) else { break }
            try client.apply(e)
        }
        let search = try XCTUnwrap(client.viewModels["search"])
        XCTAssertNotNil(search["retryAt"]?.stringValue, "\(search)")
        XCTAssertEqual(search["searchEnabled"], false)
        XCTAssertEqual(search["isLoading"], false)
        if let error = search["error"], error != .null {
            XCTAssertEqual(error["kind"], "rateLimited")
            XCTAssertNotNil(error["retryAfterSeconds"]?.intValue)
        }
        XCTAssertEqual(client.viewModels["status"]?["reachable"], true)
        let bad = try WireConnection.get(port: t.port, path: "/api/search/repositories?q=x&sort=weird")
        XCTAssertTrue(bad.problem(400).contains("sort"))
        try WireConnection.get(port: t.port, path: "/api/search/repositories").problem(400)
        XCTAssertFalse((logs.all + limited.text).contains(SearchEndToEndTests.token))
    }
}
