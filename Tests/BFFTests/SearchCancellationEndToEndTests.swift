import BFF
import GitHubLive
import GitHubSearch
import JSON
import Logging
import WireClient
import XCTest

/// Superseded and ended searches spend none of GitHub's budget: real POSTs and event stream, the real
/// `GitHubGateway` + `SearchCache`, and the GitHub simulator over HTTP counting what it receives. The
/// gateway's rate limiter spaces calls `spacing` apart, so searches made right after a call wait in its
/// queue; that is where a superseded one must leave without being sent.
final class SearchCancellationEndToEndTests: XCTestCase {
    static let spacing = Duration.seconds(2)

    func makeApp(sim: SearchEndToEndTests.Simulator) throws -> LiveApp {
        var quiet = Logger(label: "test")
        quiet.logLevel = .error
        let gateway = try GitHubGateway(
            configuration: .init(baseURL: sim.url, rateLimiter: .init(minimumSpacing: Self.spacing)), logger: quiet)
        return try LiveApp(search: SearchCache(upstream: gateway, logger: quiet), logger: quiet)
    }

    /// One call now, so that the next one has to wait for the spacing.
    func spendOneCall(_ t: LiveApp, query: String) throws {
        let r = try WireConnection.get(port: t.port, path: "/api/search/repositories?q=\(query)&per_page=5")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.header("X-Cache"), "miss")
    }

    func testThreeQuickSearchesInOneSessionSpendOneUpstreamCall() throws {
        let sim = try SearchEndToEndTests.Simulator(token: nil)
        let t = try makeApp(sim: sim)
        let id = try t.createSession()
        let (_, reader) = try t.stream(id)
        var client = ClientState()
        try client.apply(XCTUnwrap(reader.next()))
        try spendOneCall(t, query: "warmup")
        XCTAssertEqual(sim.sim.stats.requests, 1)

        // Three different searches in quick succession: each supersedes the one before while it still
        // waits for the rate limiter. (A submit while loading is a no-op by contract, so the newer
        // searches are sort changes, which re-run the search shown.)
        XCTAssertEqual(try t.post(id, "search", "query", #"{"value":"language:swift"}"#).status, 202)
        XCTAssertEqual(try t.post(id, "search", "submit").status, 202)
        XCTAssertEqual(try t.post(id, "search", "sort", #"{"value":"stars"}"#).status, 202)
        let last = try t.post(id, "search", "sort", #"{"value":"forks"}"#)
        let lastSeq = try XCTUnwrap(last.json?["inputSeq"]?.intValue)

        while !(client.lastInputSeq == lastSeq && client.viewModels["search"]?["isLoading"] == false) {
            guard let e = try reader.next(timeout: 10) else { return XCTFail("stream ended") }
            try client.apply(e)
        }
        let search = try XCTUnwrap(client.viewModels["search"]?.objectValue)
        XCTAssertEqual(search["sort"], "forks")
        XCTAssertEqual(search["error"], .null)
        XCTAssertEqual(search["repositories"]?.arrayValue?.isEmpty, false)
        XCTAssertEqual(sim.sim.stats.requests, 2, "the warm-up and the last search only")
    }

    func testASearchOfAnEndedSessionLeavesTheQueueUnsent() throws {
        let sim = try SearchEndToEndTests.Simulator(token: nil)
        let t = try makeApp(sim: sim)
        let id = try t.createSession()
        try spendOneCall(t, query: "warmup")
        XCTAssertEqual(try t.post(id, "search", "query", #"{"value":"language:rust"}"#).status, 202)
        XCTAssertEqual(try t.post(id, "search", "submit").status, 202)
        XCTAssertEqual(try WireConnection(port: t.port).request("DELETE", "/api/sessions/\(id)").status, 204)

        // The next call waits for the spacing too; had the ended session's search stayed queued, it
        // would have gone first (FIFO). Its answer arriving means the queue has drained.
        try spendOneCall(t, query: "after")
        XCTAssertEqual(sim.sim.stats.requests, 2, "the warm-up and the call after; not the ended session's search")
    }
}
