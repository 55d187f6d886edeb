import BFF
import Foundation
import GitHubSimulator
import JSON
import Logging
import SearchApp
import WireClient
import XCTest

/// "Sign in with GitHub" on a 3-node cluster (one Redis, the nodes composed as `bff` composes them,
/// the simulator playing GitHub): a login made on one node is honoured by every node; a session of that
/// login answers only its cookie on every node, forwarded inputs included; the person's searches spend
/// their own token; a sign-out on a third node ends the stream held on another; Redis holds neither the
/// token nor the cookie.
final class ClusterSignInTests: ClusterTestCase {
    static let secretKey = Data(repeating: 42, count: 32).base64EncodedString()
    static let appToken = "ghp_CLUSTER_APP_TOKEN_0123456789"

    /// The public origin every node is configured with (`--public-url`), as behind one load balancer.
    static let publicURL = "http://bff.test"

    func signInNode(
        _ name: String, sim: SearchEndToEndTests.Simulator, logs: LogCollector, publicURL: String? = nil
    ) throws -> LiveApp {
        var c = AppConfiguration()
        c.http.port = 0
        c.http.threads = 2
        c.clientSessionRate = 1_000_000
        c.clientSessionBurst = 1_000_000
        c.maxSessionsPerClient = 1_000_000
        c.cluster = ClusterSettings(redisURL: redisURL, nodeID: name, leaseTTL: 10)
        var github = GitHubSettings()
        github.baseURL = sim.url
        github.token = Self.appToken
        github.cachePath = nil
        var signIn = SignInOptions(clientID: "sim-client-id", clientSecret: SignInEndToEndTests.clientSecret)
        signIn.webURL = sim.url
        signIn.secretKey = Self.secretKey
        signIn.stateDirectory = nil
        signIn.publicURL = publicURL
        github.signIn = signIn
        let app = try LiveApp(app: Application.live(configuration: c, github: github, logger: logs.logger()))
        try waitUntil("\(name) ready", within: 10) {
            (try? WireConnection.get(port: app.port, path: "/readyz").status) == 200
        }
        return app
    }

    func testALoginOnOneNodeAStreamOnAnotherAndASignOutOnAThird() throws {
        let sim = try SearchEndToEndTests.Simulator(token: nil)
        let logs = LogCollector()
        let a = try signInNode("a", sim: sim, logs: logs)
        let b = try signInNode("b", sim: sim, logs: logs)
        let c = try signInNode("c", sim: sim, logs: logs)

        // Signed in at node a.
        let atA = SignInBrowser(port: a.port)
        _ = try signIn(atA, sim: sim, port: a.port, as: "octocat")
        let cookie = try XCTUnwrap(atA.cookies["bff-login"])

        // The same browser's session, created at node b, is the person's.
        let atB = SignInBrowser(port: b.port)
        atB.cookies = atA.cookies
        let id = try atB.createSession()
        let account = try atB.state(id).json?["viewModels"]?["account"]
        XCTAssertEqual(account?["login"], "octocat")
        XCTAssertEqual(account?["signedIn"], true)

        // Its stream at node c.
        let atC = SignInBrowser(port: c.port)
        atC.cookies = atA.cookies
        let (conn, reader, head) = try atC.stream(id)
        defer { conn.close() }
        XCTAssertEqual(head.status, 200)
        var client = ClientState()
        try client.apply(XCTUnwrap(reader.next(timeout: 10)))
        XCTAssertEqual(client.viewModels["account"]?["login"], "octocat")

        // Without the cookie, at every node, the session is not there: state, stream, input, delete.
        for node in [a, b, c] {
            let stranger = SignInBrowser(port: node.port)
            try stranger.state(id).problem(404)
            let (_, _, refused) = try stranger.stream(id)
            XCTAssertEqual(refused.status, 404)
            try stranger.input(id, "greeting", "name", #"{"value":"x"}"#).problem(404)
            try stranger.send("DELETE", "/api/sessions/\(id)").problem(404)
        }

        // An input through node a (which does not run the session) reaches the stream at node c.
        XCTAssertEqual(try atA.input(id, "greeting", "name", #"{"value":"mona"}"#).status, 202)
        while client.viewModels["greeting"]?["buttonEnabled"] != true {
            try client.apply(XCTUnwrap(reader.next(timeout: 10), "stream ended"))
        }
        // The person's uncached search goes out with their own token.
        let before = sim.sim.stats
        XCTAssertEqual(try atA.input(id, "search", "query", #"{"value":"language:swift"}"#).status, 202)
        XCTAssertEqual(try atA.input(id, "search", "submit").status, 202)
        while client.viewModels["search"]?["repositories"]?.arrayValue?.isEmpty ?? true {
            try client.apply(XCTUnwrap(reader.next(timeout: 10), "stream ended"))
        }
        XCTAssertEqual(sim.sim.stats.signedIn - before.signedIn, 1)
        XCTAssertEqual(sim.sim.stats.requests - before.requests, 1)

        // Redis holds the login under the cookie's digest, never the token nor the cookie.
        let tokens = sim.sim.issuedTokens
        let dump = try redisDump()
        XCTAssertTrue(dump.contains("octocat"), "the login is in Redis")
        for secret in tokens + [cookie, Self.appToken, SignInEndToEndTests.clientSecret, Self.secretKey] {
            XCTAssertFalse(dump.contains(secret), "a secret in Redis")
            XCTAssertFalse(logs.all.contains(secret), "a secret in a node's log")
        }

        // Signed out at node b: the stream at node c ends, the session is gone on every node.
        let out = try atB.send("POST", "/auth/logout")
        XCTAssertEqual(out.status, 204)
        var ended: SSEEvent?
        while ended == nil, let e = try reader.next(timeout: 10) { if e.event == "end" { ended = e } }
        XCTAssertEqual(try JSONValue.parse(XCTUnwrap(ended, "no end event").data)["reason"], "signed-out")
        for node in [a, b, c] {
            let old = SignInBrowser(port: node.port)
            old.cookies["bff-login"] = cookie
            try old.state(id).problem(404)
        }
        // The old cookie makes an anonymous session anywhere, and is cleared.
        let old = SignInBrowser(port: c.port)
        old.cookies["bff-login"] = cookie
        let fresh = try old.createSession()
        XCTAssertNil(old.cookies["bff-login"])
        XCTAssertEqual(try old.state(fresh).json?["viewModels"]?["account"]?["signedIn"], false)
        try waitUntil("the token is revoked at GitHub", within: 5) { sim.sim.signInStats["tokensRevoked"] == 1 }
    }

    func testASessionTakenOverByAnotherNodeIsStillThePersons() throws {
        let sim = try SearchEndToEndTests.Simulator(token: nil)
        let logs = LogCollector()
        var b: LiveApp? = try signInNode("b", sim: sim, logs: logs)
        let a = try signInNode("a", sim: sim, logs: logs)
        let browser = SignInBrowser(port: b!.port)
        _ = try signIn(browser, sim: sim, port: b!.port, as: "hubot")
        let id = try browser.createSession()
        XCTAssertEqual(try browser.input(id, "greeting", "name", #"{"value":"ann"}"#).status, 202)
        b = nil  // node b shuts down and hands its sessions over

        // Node a takes the session over on the next input: whose it is came with its stored form.
        let atA = SignInBrowser(port: a.port)
        atA.cookies = browser.cookies
        try SignInBrowser(port: a.port).input(id, "greeting", "greet").problem(404)
        XCTAssertEqual(try atA.input(id, "greeting", "greet").status, 202)
        let state = try XCTUnwrap(atA.state(id).json)
        XCTAssertEqual(state["viewModels"]?["account"]?["login"], "hubot")
        XCTAssertEqual(state["viewModels"]?["greeting"]?["label"], "Hello, ANN!")
        try SignInBrowser(port: a.port).state(id).problem(404)
        // Its searches still spend the person's token.
        let (conn, reader, _) = try atA.stream(id)
        defer { conn.close() }
        var client = ClientState()
        try client.apply(XCTUnwrap(reader.next(timeout: 10)))
        let before = sim.sim.stats
        XCTAssertEqual(try atA.input(id, "search", "query", #"{"value":"taken-over"}"#).status, 202)
        XCTAssertEqual(try atA.input(id, "search", "submit").status, 202)
        while client.viewModels["search"]?["isLoading"] != false
            || client.viewModels["search"]?["totalCount"]?.intValue == nil
        {
            try client.apply(XCTUnwrap(reader.next(timeout: 10), "stream ended"))
        }
        XCTAssertEqual(sim.sim.stats.signedIn - before.signedIn, 1, "the taken-over session spends the person's token")
    }

    /// Behind one origin, GitHub's redirect back may reach any node: the sign-in started on one is
    /// completed on another, and its `state` is still good once only.
    func testASignInStartedOnOneNodeCompletesOnAnother() throws {
        let sim = try SearchEndToEndTests.Simulator(token: nil)
        let logs = LogCollector()
        let a = try signInNode("a", sim: sim, logs: logs, publicURL: Self.publicURL)
        let b = try signInNode("b", sim: sim, logs: logs, publicURL: Self.publicURL)
        let atA = SignInBrowser(port: a.port)
        let callback = try authorize(atA, sim: sim, port: a.port, as: "octocat", origin: Self.publicURL)
        let atB = SignInBrowser(port: b.port)
        atB.cookies = atA.cookies
        let done = try atB.send("GET", callback)
        XCTAssertEqual(done.status, 302, "\(done)")
        XCTAssertNotNil(atB.cookies["bff-login"])
        // The same callback again, at either node: the state was used.
        let replay = SignInBrowser(port: a.port)
        replay.cookies = atA.cookies
        try replay.send("GET", callback).problem(400)
        // Same-origin requests carry the public origin (the cross-site rule judges by it).
        let id = try atB.createSession()
        XCTAssertEqual(
            try atB.input(id, "greeting", "name", #"{"value":"x"}"#, headers: [("Origin", Self.publicURL)]).status, 202)
        try atB.input(id, "greeting", "name", #"{"value":"x"}"#, headers: [("Origin", "http://127.0.0.1:\(b.port)")])
            .problem(403)
    }

    func testClusterModeWithSignInNeedsTheSecretKey() throws {
        var c = AppConfiguration()
        c.http.port = 0
        c.cluster = ClusterSettings(redisURL: redisURL, nodeID: "a", leaseTTL: 10)
        var github = GitHubSettings()
        github.cachePath = nil
        github.signIn = SignInOptions(clientID: "id", clientSecret: "secret")
        XCTAssertThrowsError(try Application.live(configuration: c, github: github, logger: Logger(label: "t"))) {
            XCTAssertTrue(String(describing: $0).contains("BFF_SECRET_KEY"), "\($0)")
        }
        github.signIn?.secretKey = Data(repeating: 1, count: 16).base64EncodedString()
        XCTAssertThrowsError(try Application.live(configuration: c, github: github, logger: Logger(label: "t"))) {
            XCTAssertTrue(String(describing: $0).contains("16 bytes"), "\($0)")
        }
    }

    /// Every key of the test's Redis with every value it holds, as text.
    func redisDump() throws -> String {
        var out = ""
        let keys = try redisCLI("--scan").split(whereSeparator: \.isNewline).map(String.init)
        for key in keys {
            out += key + "\n"
            switch try redisCLI("TYPE", key).trimmingCharacters(in: .whitespacesAndNewlines) {
            case "string": out += try redisCLI("GET", key)
            case "hash": out += try redisCLI("HGETALL", key)
            case "set": out += try redisCLI("SMEMBERS", key)
            case "zset": out += try redisCLI("ZRANGE", key, "0", "-1", "WITHSCORES")
            case "list": out += try redisCLI("LRANGE", key, "0", "-1")
            case "stream": out += try redisCLI("XRANGE", key, "-", "+")
            default: break
            }
        }
        return out
    }
}
