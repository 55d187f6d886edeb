import Foundation
import JSON
import WireClient
import XCTest

/// A browser's cookie jar over `WireConnection`s: keeps what `Set-Cookie` sets, sends it back.
final class SignInBrowser {
    var cookies: [String: String] = [:]
    let port: Int
    init(port: Int) { self.port = port }

    var cookieHeader: [(String, String)] {
        cookies.isEmpty
            ? [] : [("Cookie", cookies.sorted { $0.key < $1.key }.map { "\($0)=\($1)" }.joined(separator: "; "))]
    }

    func keep(_ r: WireResponse) {
        for (name, value) in r.headers where name.lowercased() == "set-cookie" {
            let pair = value.split(separator: ";")[0]
            guard let eq = pair.firstIndex(of: "=") else { continue }
            let (n, v) = (String(pair[..<eq]), String(pair[pair.index(after: eq)...]))
            if value.contains("Max-Age=0") || v.isEmpty { cookies[n] = nil } else { cookies[n] = v }
        }
    }

    @discardableResult
    func send(
        _ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
        port: Int? = nil
    ) throws -> WireResponse {
        let c = try WireConnection(port: port ?? self.port)
        defer { c.close() }
        let r = try c.request(method, path, headers: cookieHeader + headers, body: body)
        keep(r)
        return r
    }

    func createSession() throws -> String {
        let r = try send("POST", "/api/sessions")
        XCTAssertEqual(r.status, 201, "\(r)")
        return try XCTUnwrap(r.json?["id"]?.stringValue)
    }

    func state(_ id: String) throws -> WireResponse { try send("GET", "/api/sessions/\(id)/state") }

    func input(_ id: String, _ vm: String, _ input: String, _ json: String? = nil, headers: [(String, String)] = [])
        throws -> WireResponse
    {
        try send(
            "POST", "/api/sessions/\(id)/\(vm)/\(input)",
            headers: (json == nil ? [] : [("Content-Type", "application/json")]) + headers,
            body: json.map { Array($0.utf8) })
    }

    func stream(_ id: String) throws -> (WireConnection, EventStreamReader, WireResponse) {
        let c = try WireConnection(port: port, timeout: 10)
        let (head, reader) = try c.openEventStream("/api/sessions/\(id)/events", headers: cookieHeader)
        return (c, reader, head)
    }
}

/// The browser's side of "Sign in with GitHub" against the simulator: `GET /auth/login`, the simulator's
/// form approved (or denied) as a named person, the callback.
extension XCTestCase {
    /// Query items of a URL.
    func items(_ url: String) -> [String: String] {
        Dictionary(
            (URLComponents(string: url)?.queryItems ?? []).map { ($0.name, $0.value ?? "") },
            uniquingKeysWith: { a, _ in a })
    }

    func encode(_ s: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s
    }

    /// `GET /auth/login`, then the simulator's form with `decision` as `login`: the callback's path and
    /// query (not yet followed).
    func authorize(
        _ browser: SignInBrowser, sim: SearchEndToEndTests.Simulator, port: Int, as login: String,
        returnTo: String? = nil, decision: String = "approve", origin: String? = nil
    )
        throws -> String
    {
        let origin = origin ?? "http://127.0.0.1:\(port)"
        let start = try browser.send("GET", "/auth/login" + (returnTo.map { "?returnTo=\(encode($0))" } ?? ""))
        XCTAssertEqual(start.status, 302, "\(start)")
        let location = try XCTUnwrap(start.header("Location"))
        XCTAssertTrue(location.hasPrefix(sim.url + "/login/oauth/authorize?"), location)
        var form = items(location)
        XCTAssertEqual(form["client_id"], "sim-client-id")
        XCTAssertEqual(form["redirect_uri"], origin + "/auth/callback")
        XCTAssertEqual(form["code_challenge_method"], "S256")
        XCTAssertEqual(form["code_challenge"]?.count, 43)
        XCTAssertGreaterThanOrEqual(form["state"]?.count ?? 0, 22, "state carries at least 128 bits")
        XCTAssertNil(form["scope"], "no scope: public data only")
        form["login"] = login
        form["decision"] = decision
        let body = form.map { "\($0)=\(encode($1))" }.joined(separator: "&")
        let approved = try WireConnection.post(
            port: sim.server.port, path: "/login/oauth/authorize", body: Array(body.utf8),
            headers: [("Content-Type", "application/x-www-form-urlencoded")])
        XCTAssertEqual(approved.status, 302)
        let back = try XCTUnwrap(approved.header("Location"))
        XCTAssertTrue(back.hasPrefix(origin + "/auth/callback?"), back)
        return String(back.dropFirst(origin.count))
    }

    /// The whole sign-in as `login`: the browser ends with the login cookie.
    func signIn(
        _ browser: SignInBrowser, sim: SearchEndToEndTests.Simulator, port: Int, as login: String,
        returnTo: String? = nil
    ) throws -> WireResponse {
        let callback = try authorize(browser, sim: sim, port: port, as: login, returnTo: returnTo)
        let r = try browser.send("GET", callback)
        XCTAssertEqual(r.status, 302, "\(r)")
        return r
    }
}
