import EventHTTP
import GitHubSearch
import JSON
import Logging
import SearchApp
import WireClient
import XCTest

@testable import BFF

/// "Fair use: one client cannot lock out the others", live, with clients on different loopback
/// addresses (all of 127/8 is loopback): session creations, live sessions, unused sessions, proxies,
/// and GitHub's budget.
final class FairUseTests: XCTestCase {
    private func create(_ t: LiveApp, from source: String, headers: [(String, String)] = []) throws -> WireResponse {
        let c = try WireConnection(port: t.port, source: source)
        defer { c.close() }
        return try c.request("POST", "/api/sessions", headers: headers)
    }

    private func metric(_ t: LiveApp, _ line: String) throws -> Double? {
        let text = try WireConnection.get(port: t.port, path: "/metrics").text
        return text.split(separator: "\n").first { $0.hasPrefix(line + " ") }.flatMap {
            Double($0.split(separator: " ").last ?? "")
        }
    }

    func testAFloodOfCreationsFromOneClientIsRefusedAtItsRateWhileAnotherCreatesThroughout() throws {
        let t = try LiveApp {
            $0.clientSessionRate = 2
            $0.clientSessionBurst = 5
        }
        var created = 0
        var refused: WireResponse?
        for i in 0..<40 {
            let r = try create(t, from: "127.0.0.2")
            if r.status == 201 { created += 1 } else if refused == nil { refused = r }
            // The other client, in between, within its own burst: never refused.
            if i % 8 == 0 { XCTAssertEqual(try create(t, from: "127.0.0.3").status, 201, "round \(i)") }
        }
        XCTAssertGreaterThanOrEqual(created, 5, "the burst")
        XCTAssertLessThan(created, 20, "then the rate")
        let r = try XCTUnwrap(refused)
        XCTAssertTrue(r.problem(429).contains("--client-session-rate"), "the problem names the limit")
        XCTAssertGreaterThanOrEqual(Int(r.header("Retry-After") ?? "") ?? 0, 1)
        XCTAssertEqual(try metric(t, #"bff_client_session_refusals_total{limit="rate"}"#), Double(40 - created))
    }

    func testAClientHoldsAtMostItsLiveSessionsAndGetsOneBackWhenOneEnds() throws {
        let t = try LiveApp { $0.maxSessionsPerClient = 3 }
        var ids: [String] = []
        for _ in 0..<3 {
            let r = try create(t, from: "127.0.0.2")
            XCTAssertEqual(r.status, 201)
            ids.append(try XCTUnwrap(r.json?["id"]?.stringValue))
        }
        XCTAssertTrue(try create(t, from: "127.0.0.2").problem(429).contains("maximum of 3 live sessions"))
        XCTAssertEqual(try create(t, from: "127.0.0.3").status, 201, "another client is not affected")
        XCTAssertEqual(try WireConnection(port: t.port).request("DELETE", "/api/sessions/\(ids[0])").status, 204)
        XCTAssertEqual(try create(t, from: "127.0.0.2").status, 201, "a deleted session frees its place")
    }

    func testUnusedSessionsExpireEarlyAndUsedOnesStay() throws {
        let time = SessionClockTests.ManualTime()
        let t = try LiveApp(clock: time.clock) {
            $0.unusedSessionTimeout = 60
            $0.sessionIdleTimeout = 1800
        }
        let (unused, withInput, withStream) = (try t.createSession(), try t.createSession(), try t.createSession())
        XCTAssertEqual(try t.post(withInput, "greeting", "name", #"{"value":"a"}"#).status, 202)
        let (c, reader) = try t.stream(withStream)
        _ = try reader.next()
        c.close()
        try waitUntil("the stream's close reached the session", within: 5) {
            (try? self.metric(t, "bff_open_event_streams")) == 0
        }
        // Polled with `GET /state` all along: reads are no use (only inputs and streams are).
        for _ in 0..<5 {
            time.advance(10)
            XCTAssertEqual(try WireConnection.get(port: t.port, path: "/api/sessions/\(unused)/state").status, 200)
        }
        time.advance(11)
        let done = expectation(description: "expiry ran on every loop")
        t.app.expireIdleSessionsNow { done.fulfill() }
        wait(for: [done], timeout: 5)
        try WireConnection.get(port: t.port, path: "/api/sessions/\(unused)/state").problem(404)
        XCTAssertEqual(try WireConnection.get(port: t.port, path: "/api/sessions/\(withInput)/state").status, 200)
        XCTAssertEqual(try WireConnection.get(port: t.port, path: "/api/sessions/\(withStream)/state").status, 200)
        XCTAssertEqual(try metric(t, #"bff_sessions_ended_total{reason="unused"}"#), 1)
    }

    func testATrustedProxyTellsClientsApartAndAnUntrustedPeerRotatingTheHeaderStaysOne() throws {
        let t = try LiveApp {
            $0.maxSessionsPerClient = 2
            $0.http.trustedProxies = try! TrustedProxies.parse("127.0.0.4").get()
        }
        // Behind the proxy: three users, two sessions each.
        for user in ["203.0.113.1", "203.0.113.2", "203.0.113.3"] {
            for _ in 0..<2 {
                XCTAssertEqual(try create(t, from: "127.0.0.4", headers: [("X-Forwarded-For", user)]).status, 201)
            }
        }
        XCTAssertEqual(try create(t, from: "127.0.0.4", headers: [("X-Forwarded-For", "203.0.113.1")]).status, 429)
        // An untrusted peer writing a new address each time is still one client.
        var statuses: [Int] = []
        for i in 0..<4 {
            statuses.append(try create(t, from: "127.0.0.2", headers: [("X-Forwarded-For", "198.51.100.\(i)")]).status)
        }
        XCTAssertEqual(statuses, [201, 201, 429, 429])
    }

    /// The app over the GitHub simulator with GitHub's real 30 searches a minute, no cache file.
    private func searchApp() throws -> (SearchEndToEndTests.Simulator, LiveApp) {
        let sim = try SearchEndToEndTests.Simulator(token: nil, rateLimit: 30)
        var c = AppConfiguration()
        c.http.port = 0
        c.http.threads = 2
        var g = GitHubSettings()
        g.baseURL = sim.url
        g.cachePath = nil
        var quiet = Logger(label: "test")
        quiet.logLevel = .error
        return (sim, try LiveApp(app: Application.live(configuration: c, github: g, logger: quiet)))
    }

    /// A stateless search of `q` from `source`.
    private func search(_ t: LiveApp, _ q: String, from source: String) throws -> WireResponse {
        let conn = try WireConnection(port: t.port, timeout: 15, source: source)
        defer { conn.close() }
        return try conn.request("GET", "/api/search/repositories?q=\(q)&per_page=5")
    }

    /// A person using the app by themselves is never told to leave room for others who are not there: one
    /// client's uncached searches are served up to GitHub's own 30 of the window, and then it is GitHub's
    /// limit that answers, not the fair share.
    func testALoneClientsUncachedSearchesAreServedUpToGitHubsOwnLimit() throws {
        let (sim, t) = try searchApp()
        for i in 0..<30 {
            let r = try search(t, "alone\(i)", from: "127.0.0.2")
            XCTAssertEqual(r.status, 200, "search \(i + 1) of GitHub's 30: \(r.text)")
            XCTAssertEqual(r.header("X-Cache"), "miss")
        }
        let past = try search(t, "alone30", from: "127.0.0.2")
        let detail = past.problem(503)
        XCTAssertTrue(detail.contains("GitHub's search rate limit is exhausted"), detail)
        XCTAssertEqual(sim.sim.stats.served, 30)
        XCTAssertEqual(try metric(t, "bff_upstream_client_share_refusals_total"), 0)
    }

    /// The same through a session (its searches are charged to the client that created it): more than
    /// half of the window's searches, each showing its results.
    func testALoneClientsSessionSearchesAreServedPastHalfTheWindow() throws {
        let (sim, t) = try searchApp()
        let created = try create(t, from: "127.0.0.2")
        XCTAssertEqual(created.status, 201)
        let id = try XCTUnwrap(created.json?["id"]?.stringValue)
        let (stream, reader) = try t.stream(id)
        defer { stream.close() }
        var client = ClientState()
        try client.apply(XCTUnwrap(reader.next()))
        // Twenty different queries, each with repositories in the simulator's corpus.
        let queries = [
            "parser", "router", "cache", "server", "client", "logger", "editor", "compiler", "search", "engine",
            "queue", "database", "framework", "toolkit", "bot", "dashboard", "scheduler", "proxy", "crawler", "game",
        ]
        for (i, q) in queries.enumerated() {
            XCTAssertEqual(try t.post(id, "search", "query", #"{"value":"\#(q)"}"#).status, 202)
            let submitSeq = try XCTUnwrap(t.post(id, "search", "submit").json?["inputSeq"]?.intValue)
            // The answer is the search event of that input that is no longer loading.
            while true {
                let e = try XCTUnwrap(reader.next(timeout: 15), "search \(i): stream ended")
                try client.apply(e)
                let seq = try JSONValue.parse(e.data)["inputSeq"]?.intValue
                if e.event == "search", seq == submitSeq, client.viewModels["search"]?["isLoading"] == false { break }
            }
            let search = try XCTUnwrap(client.viewModels["search"]?.objectValue)
            XCTAssertEqual(search["error"], .null, "search \(i + 1) of 20 (\(q))")
            XCTAssertFalse(search["repositories"]?.arrayValue?.isEmpty ?? true, "search \(i + 1) of 20 (\(q))")
        }
        XCTAssertEqual(sim.sim.stats.served, 20)
        XCTAssertEqual(try metric(t, "bff_upstream_client_share_refusals_total"), 0)
    }

    /// Once another client asks, the one sending uncached searches as fast as it can gets its share (15 of
    /// the 30) and the other's uncached searches still reach GitHub in the same window.
    func testOneClientsUncachedSearchesLeaveTheOthersTheirShareOfGitHub() throws {
        let (sim, t) = try searchApp()
        XCTAssertEqual(try search(t, "other", from: "127.0.0.1").status, 200, "the other client asks first")
        // The flooder asks for 30 uncached pages (GitHub's whole minute) as fast as it can.
        var flooderServed = 0
        var share: WireResponse?
        for i in 0..<30 {
            let r = try search(t, "flood\(i)", from: "127.0.0.2")
            if r.status == 200 { flooderServed += 1 } else if share == nil { share = r }
        }
        XCTAssertEqual(flooderServed, 15, "half of the window")
        let refusal = try XCTUnwrap(share)
        XCTAssertTrue(refusal.problem(503).contains("your share"), "\(refusal.text)")
        XCTAssertGreaterThanOrEqual(Int(refusal.header("Retry-After") ?? "") ?? 0, 1)
        // The other still reaches GitHub within the same window.
        for i in 0..<6 {
            let r = try search(t, "other\(i)", from: "127.0.0.1")
            XCTAssertEqual(r.status, 200, r.text)
            XCTAssertEqual(r.header("X-Cache"), "miss")
        }
        // Cached answers are never limited: the flooder's own earlier pages.
        let cached = try search(t, "flood0", from: "127.0.0.2")
        XCTAssertEqual(cached.status, 200)
        XCTAssertEqual(cached.header("X-Cache"), "hit")
        XCTAssertEqual(sim.sim.stats.served, 22, "1 + 15 + 6 upstream calls, no more")
        XCTAssertEqual(try metric(t, "bff_upstream_client_share_refusals_total"), 15, "each refusal counted")
    }

    /// The flooder spent two thirds of the window alone; from the other client's first search on, it is
    /// past its share and everything left of the window is the other's.
    func testAClientThatSpentMostOfTheWindowAloneLeavesTheRestToTheNewcomer() throws {
        let (sim, t) = try searchApp()
        for i in 0..<20 {
            XCTAssertEqual(try search(t, "flood\(i)", from: "127.0.0.2").status, 200, "alone, search \(i + 1)")
        }
        XCTAssertEqual(try search(t, "other0", from: "127.0.0.1").status, 200, "the newcomer")
        XCTAssertTrue(try search(t, "flood20", from: "127.0.0.2").problem(503).contains("your share"))
        for i in 1..<10 {
            XCTAssertTrue(try search(t, "flood2\(i)", from: "127.0.0.2").problem(503).contains("your share"))
            let r = try search(t, "other\(i)", from: "127.0.0.1")
            XCTAssertEqual(r.status, 200, "the newcomer's search \(i + 1): \(r.text)")
        }
        XCTAssertEqual(sim.sim.stats.served, 30, "GitHub's whole window: 20 before the newcomer, 10 to it")
    }
}
