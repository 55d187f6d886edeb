import BFF
import EventHTTP
import Foundation
import GitHubSimulator
import JSON
import Logging
import SearchApp
import WireClient
import XCTest

/// "Sign in with GitHub" on real sockets, one process, against the GitHub simulator: the whole flow
/// (login → the simulator's authorize form → callback → cookie), sessions that belong to their login,
/// the cross-site rule, searches on the person's own token, sign-out ending the person's streams, a
/// token GitHub stops accepting, bad input on every step, and no secret in a file or a log line.
final class SignInEndToEndTests: XCTestCase {
    static let appToken = "ghp_APP_SECRET_TOKEN_0123456789"
    static let clientSecret = "sim-client-secret"

    struct Harness {
        let sim: SearchEndToEndTests.Simulator
        let app: LiveApp
        let logs: LogCollector
        let directory: String
        var port: Int { app.port }
    }

    func makeHarness(directory: String? = nil, sim: SearchEndToEndTests.Simulator? = nil, rateLimit: Int = 1000)
        throws -> Harness
    {
        let sim = try sim ?? SearchEndToEndTests.Simulator(token: nil, rateLimit: rateLimit)
        let dir = directory ?? NSTemporaryDirectory() + "bff-signin-\(UUID().uuidString)"
        let logs = LogCollector()
        var c = AppConfiguration()
        c.http.port = 0
        c.http.threads = 2
        var g = GitHubSettings()
        g.baseURL = sim.url
        g.token = Self.appToken
        g.cachePath = nil
        var s = SignInOptions(clientID: "sim-client-id", clientSecret: Self.clientSecret)
        s.webURL = sim.url
        s.stateDirectory = dir
        g.signIn = s
        let app = try LiveApp(app: Application.live(configuration: c, github: g, logger: logs.logger()))
        return Harness(sim: sim, app: app, logs: logs, directory: dir)
    }

    func testTheWholeFlowOnePersonsSessionsTheirOwnBudgetAndSignOut() throws {
        let h = try makeHarness()
        let browser = SignInBrowser(port: h.port)
        let done = try signIn(browser, sim: h.sim, port: h.port, as: "octocat", returnTo: "/?q=swift")
        XCTAssertEqual(done.header("Location"), "/?q=swift")
        let setCookie = done.headers.filter { $0.0.lowercased() == "set-cookie" }.map(\.1)
        let login = try XCTUnwrap(setCookie.first { $0.hasPrefix("bff-login=") })
        XCTAssertTrue(login.contains("; HttpOnly"), login)
        XCTAssertTrue(login.contains("; SameSite=Lax"), login)
        XCTAssertTrue(login.contains("; Path=/"), login)
        XCTAssertTrue(login.contains("Max-Age=\(14 * 86400)"), login)
        XCTAssertFalse(login.contains("Secure"), "plain http: no Secure")
        let cookie = try XCTUnwrap(browser.cookies["bff-login"])
        XCTAssertEqual(cookie.count, 43)
        XCTAssertNil(browser.cookies["bff-signin"], "the sign-in's binding cookie is cleared")
        let tokens = h.sim.sim.issuedTokens
        XCTAssertEqual(tokens.count, 1)
        XCTAssertFalse(cookie.contains(tokens[0]) || tokens[0].contains(cookie), "the cookie is not the token")

        // The session belongs to the login: its account shows the person.
        let id = try browser.createSession()
        let state = try browser.state(id)
        XCTAssertEqual(state.status, 200)
        let account = try XCTUnwrap(state.json?["viewModels"]?["account"])
        XCTAssertEqual(account["signInEnabled"], true)
        XCTAssertEqual(account["signedIn"], true)
        XCTAssertEqual(account["login"], "octocat")
        XCTAssertEqual(account["name"], "Octocat")
        XCTAssertTrue(account["avatarUrl"]?.stringValue?.hasPrefix("https://") ?? false)

        // Without that cookie, or with another, the session is not there.
        let stranger = SignInBrowser(port: h.port)
        try stranger.state(id).problem(404)
        try stranger.input(id, "greeting", "greet").problem(404)
        try stranger.send("DELETE", "/api/sessions/\(id)").problem(404)
        let (_, _, refusedStream) = try stranger.stream(id)
        XCTAssertEqual(refusedStream.status, 404)
        let multiplexed = try stranger.send(
            "GET", "/api/events?sessions=\(id)", headers: [("Accept", "text/event-stream")])
        XCTAssertEqual(multiplexed.status, 404)
        stranger.cookies["bff-login"] = String(repeating: "A", count: 43)
        try stranger.state(id).problem(404)
        // An anonymous session answers everyone, signed in or not.
        let anonymous = try stranger.createSession()
        XCTAssertEqual(stranger.cookies["bff-login"], nil, "a cookie naming no login is cleared")
        XCTAssertEqual(try browser.state(anonymous).status, 200)
        XCTAssertEqual(try stranger.state(anonymous).json?["viewModels"]?["account"]?["signedIn"], false)

        // The person's uncached search goes out with their token, not the app's.
        let (conn, reader, head) = try browser.stream(id)
        defer { conn.close() }
        XCTAssertEqual(head.status, 200)
        var client = ClientState()
        try client.apply(XCTUnwrap(reader.next()))
        let before = h.sim.sim.stats
        XCTAssertEqual(try browser.input(id, "search", "query", #"{"value":"language:swift"}"#).status, 202)
        XCTAssertEqual(try browser.input(id, "search", "submit").status, 202)
        while client.viewModels["search"]?["repositories"]?.arrayValue?.isEmpty ?? true {
            try client.apply(XCTUnwrap(reader.next(timeout: 10), "stream ended"))
        }
        let after = h.sim.sim.stats
        XCTAssertEqual(after.signedIn - before.signedIn, 1, "the search spent the person's token")
        XCTAssertEqual(after.requests - before.requests, 1, "and only that one: nothing on the app's token")
        // Their own budget reaches their account.
        while client.viewModels["account"]?["rateLimit"]?.objectValue == nil {
            try client.apply(XCTUnwrap(reader.next(timeout: 10), "stream ended"))
        }
        XCTAssertEqual(client.viewModels["account"]?["rateLimit"]?["limit"], .int(1000))

        // A cross-site POST that carries the cookie is refused and uses no inputSeq.
        let seqBefore = try XCTUnwrap(
            browser.input(id, "greeting", "name", #"{"value":"a"}"#).json?["inputSeq"]?.intValue)
        try browser.input(id, "greeting", "name", #"{"value":"b"}"#, headers: [("Origin", "https://evil.example")])
            .problem(403)
        try browser.input(id, "greeting", "name", #"{"value":"b"}"#, headers: [("Sec-Fetch-Site", "cross-site")])
            .problem(403)
        try browser.send("DELETE", "/api/sessions/\(id)", headers: [("Origin", "http://evil.example")]).problem(403)
        try browser.send("POST", "/auth/logout", headers: [("Sec-Fetch-Site", "same-site")]).problem(403)
        let sameOrigin = try browser.input(
            id, "greeting", "name", #"{"value":"c"}"#,
            headers: [("Origin", "http://127.0.0.1:\(h.port)"), ("Sec-Fetch-Site", "same-origin")])
        XCTAssertEqual(sameOrigin.json?["inputSeq"]?.intValue, seqBefore + 1)
        XCTAssertNil(sameOrigin.header("Access-Control-Allow-Origin"))

        // Sign-out: 204, the cookie cleared, the token revoked, the person's stream ended.
        let out = try browser.send("POST", "/auth/logout")
        XCTAssertEqual(out.status, 204)
        XCTAssertNil(browser.cookies["bff-login"])
        var ended: SSEEvent?
        while ended == nil, let e = try reader.next(timeout: 10) { if e.event == "end" { ended = e } }
        XCTAssertEqual(try JSONValue.parse(XCTUnwrap(ended).data)["reason"], "signed-out")
        // The revocation is GitHub's call, made after the answer: no event of ours marks it.
        try waitUntil("the token is revoked at GitHub", within: 5) { h.sim.sim.signInStats["tokensRevoked"] == 1 }
        browser.cookies["bff-login"] = cookie  // a copy of the old cookie gets nothing
        try browser.state(id).problem(404)
        _ = try browser.createSession()
        XCTAssertNil(browser.cookies["bff-login"], "an ended login's cookie is cleared")
        XCTAssertEqual(try browser.send("POST", "/auth/logout").status, 204, "without a login, still 204")

        // No secret anywhere: not in the log, not in the files under the state directory.
        let files = try FileManager.default.contentsOfDirectory(atPath: h.directory)
        XCTAssertTrue(files.contains("secret.key"), "\(files)")
        let mode = try FileManager.default.attributesOfItem(atPath: h.directory + "/secret.key")[.posixPermissions]
        XCTAssertEqual((mode as? NSNumber)?.intValue, 0o600)
        var written = ""
        for f in files { written += (try? String(contentsOfFile: h.directory + "/" + f, encoding: .utf8)) ?? "" }
        let log = h.logs.all
        for secret in tokens + [Self.appToken, Self.clientSecret, cookie] {
            XCTAssertFalse(written.contains(secret), "a secret in the state files")
            XCTAssertFalse(log.contains(secret), "a secret in the log")
        }
    }

    func testLoginsOutliveARestartSealedAndTheCookieStillWorks() throws {
        let dir = NSTemporaryDirectory() + "bff-signin-\(UUID().uuidString)"
        let sim = try SearchEndToEndTests.Simulator(token: nil, rateLimit: 1000)
        var h: Harness? = try makeHarness(directory: dir, sim: sim)
        let browser = SignInBrowser(port: h!.port)
        _ = try signIn(browser, sim: h!.sim, port: h!.port, as: "hubot")
        let logins = try String(contentsOfFile: dir + "/logins.json", encoding: .utf8)
        XCTAssertTrue(logins.contains("hubot"))
        XCTAssertTrue(logins.contains("\"sealedToken\":\"v1."), "the token is stored sealed")
        XCTAssertFalse(logins.contains(try XCTUnwrap(browser.cookies["bff-login"])), "the file holds no cookie")
        for token in sim.sim.issuedTokens { XCTAssertFalse(logins.contains(token)) }
        let mode = try FileManager.default.attributesOfItem(atPath: dir + "/logins.json")[.posixPermissions]
        XCTAssertEqual((mode as? NSNumber)?.intValue, 0o600)

        h = nil  // shut down
        let again = try makeHarness(directory: dir, sim: sim)
        let revisit = SignInBrowser(port: again.port)
        revisit.cookies = browser.cookies
        let id = try revisit.createSession()
        XCTAssertEqual(try revisit.state(id).json?["viewModels"]?["account"]?["login"], "hubot")
    }

    func testATokenGitHubStopsAcceptingEndsTheLogin() throws {
        let h = try makeHarness()
        let browser = SignInBrowser(port: h.port)
        _ = try signIn(browser, sim: h.sim, port: h.port, as: "mona")
        let id = try browser.createSession()
        let (conn, reader, _) = try browser.stream(id)
        defer { conn.close() }
        _ = try reader.next()
        // Revoked in GitHub's settings, behind the server's back.
        let token = try XCTUnwrap(h.sim.sim.issuedTokens.first)
        let basic = Data("sim-client-id:\(Self.clientSecret)".utf8).base64EncodedString()
        let revoked = try WireConnection(port: h.sim.server.port).request(
            "DELETE", "/applications/sim-client-id/token",
            headers: [("Authorization", "Basic \(basic)"), ("Content-Type", "application/json")],
            body: Array(#"{"access_token":"\#(token)"}"#.utf8))
        XCTAssertEqual(revoked.status, 204)
        XCTAssertEqual(try browser.input(id, "search", "query", #"{"value":"revoked-token-query"}"#).status, 202)
        XCTAssertEqual(try browser.input(id, "search", "submit").status, 202)
        var ended: SSEEvent?
        while ended == nil, let e = try reader.next(timeout: 10) { if e.event == "end" { ended = e } }
        XCTAssertEqual(try JSONValue.parse(XCTUnwrap(ended).data)["reason"], "signed-out")
        try browser.state(id).problem(404)
    }

    func testBadStatesDeniedAndRefusedCodesGetPreciseAnswersAndNoCookie() throws {
        let h = try makeHarness()
        let browser = SignInBrowser(port: h.port)
        // No state, an unknown one.
        XCTAssertTrue(try browser.send("GET", "/auth/callback?code=x").problem(400).contains("state"))
        try browser.send("GET", "/auth/callback?code=x&state=forged").problem(400)
        // A good state from another browser (no binding cookie).
        let callback = try authorize(browser, sim: h.sim, port: h.port, as: "octocat")
        let thief = SignInBrowser(port: h.port)
        try thief.send("GET", callback).problem(400)
        XCTAssertTrue(thief.cookies.isEmpty)
        // That state is spent now: the rightful browser gets 400 too (each state is good once).
        try browser.send("GET", callback).problem(400)
        XCTAssertNil(browser.cookies["bff-login"])
        // A replay of a completed callback.
        let second = try authorize(browser, sim: h.sim, port: h.port, as: "octocat")
        XCTAssertEqual(try browser.send("GET", second).status, 302)
        let cookie = browser.cookies["bff-login"]
        browser.cookies["bff-signin"] = "replayed"
        try browser.send("GET", second).problem(400)
        XCTAssertEqual(browser.cookies["bff-login"], cookie, "a refused callback sets no login cookie")
        // Denied at GitHub: 403; as HTML when the browser asks for it.
        let denied = try authorize(browser, sim: h.sim, port: h.port, as: "octocat", decision: "deny")
        let page = try browser.send("GET", denied, headers: [("Accept", "text/html,application/xhtml+xml")])
        XCTAssertEqual(page.status, 403)
        XCTAssertTrue(page.header("Content-Type")?.hasPrefix("text/html") ?? false)
        XCTAssertTrue(String(decoding: page.body, as: UTF8.self).contains("did not authorize"))
        // A code GitHub refuses (tampered): 502.
        let good = try authorize(browser, sim: h.sim, port: h.port, as: "octocat")
        let tampered = good.replacingOccurrences(of: "code=", with: "code=x")
        try browser.send("GET", tampered).problem(502)
        // returnTo can only point into this origin.
        for hostile in ["https://evil.example", "//evil.example", "/\\evil.example", "javascript:alert(1)"] {
            let r = try signIn(browser, sim: h.sim, port: h.port, as: "octocat", returnTo: hostile)
            XCTAssertEqual(r.header("Location"), "/", hostile)
        }
        XCTAssertEqual(h.sim.sim.signInStats["denied"], 1)
    }

    func testWithoutAClientIDSignInIsOffAndSaysSo() throws {
        let t = try LiveApp()
        let r = try WireConnection.get(port: t.port, path: "/auth/login")
        XCTAssertTrue(r.problem(404).contains("not configured"))
        let logout = try WireConnection.post(port: t.port, path: "/auth/logout", body: [])
        logout.problem(404)
        let id = try t.createSession()
        let account = try t.state(id)["viewModels"]?["account"]
        XCTAssertEqual(account?["signInEnabled"], false)
        XCTAssertEqual(account?["signedIn"], false)
        // A cookie means nothing while sign-in is off: no cross-site refusal, no ownership.
        let c = try WireConnection(port: t.port)
        defer { c.close() }
        let r2 = try c.request(
            "POST", "/api/sessions/\(id)/greeting/greet",
            headers: [("Cookie", "bff-login=\(String(repeating: "A", count: 43))"), ("Origin", "https://evil.example")])
        XCTAssertEqual(r2.status, 202)
    }
}
