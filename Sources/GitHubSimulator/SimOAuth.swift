import Crypto
import EventHTTP
import Foundation
import JSON
import Primitives

/// GitHub's side of "Sign in with GitHub" (an OAuth app's web flow, with PKCE), for tests and the
/// offline demo: the authorize page (`GET /login/oauth/authorize`, an "Authorize" button), its form
/// (`POST /login/oauth/authorize`: approve as a named user, or cancel), the code exchange
/// (`POST /login/oauth/access_token`: client secret, one-time code, redirect URI and PKCE S256 checked),
/// `GET /user`, and token revocation (`DELETE /applications/{client_id}/token`).
///
/// Tokens it issues start with `gho_sim_`; a search with one spends that token's own budget (see
/// `GitHubSimulator.search`), and one no longer issued (revoked, or from another run) gets `401`.
/// Bounded: at most `maxCodes` pending codes (10 minutes each) and `maxTokens` tokens, the oldest
/// dropped first. Thread-safe (one lock, held for bookkeeping only).
final class SimOAuth: Sendable {
    /// The OAuth app the simulator knows.
    let clientID: String
    let clientSecret: String
    static let tokenPrefix = "gho_sim_"
    static let codeLifetime = 600.0
    static let maxCodes = 10_000
    static let maxTokens = 100_000

    struct Grant: Sendable {
        let login: String
        let redirectURI: String?
        let challenge: String?
        let expires: Double
    }

    /// A table that forgets its oldest entries past `capacity`.
    struct Bounded<Value> {
        let capacity: Int
        private(set) var entries: [String: Value] = [:]
        /// Keys in insertion order (keys are random: each once); a removed key stays until swept.
        private var order: [String] = []

        init(capacity: Int) { self.capacity = capacity }

        subscript(key: String) -> Value? { entries[key] }
        var count: Int { entries.count }

        mutating func insert(_ value: Value, for key: String) {
            entries[key] = value
            order.append(key)
            while entries.count > capacity, !order.isEmpty { entries[order.removeFirst()] = nil }
            if order.count > 2 * capacity { order = order.filter { entries[$0] != nil } }
        }

        mutating func remove(_ key: String) -> Value? { entries.removeValue(forKey: key) }
    }

    struct State {
        var codes = Bounded<Grant>(capacity: SimOAuth.maxCodes)
        /// token → login
        var tokens = Bounded<String>(capacity: SimOAuth.maxTokens)
        var authorized = 0
        var denied = 0
        var issued = 0
        var revoked = 0
        var refusedExchanges = 0
    }
    let state = Lock(State())

    init(clientID: String, clientSecret: String) {
        self.clientID = clientID
        self.clientSecret = clientSecret
    }

    /// The login a token issued here belongs to (nil: not issued, or revoked).
    func login(ofToken token: String) -> String? { state.withLock { $0.tokens[token] } }

    var statsJSON: JSONValue {
        state.withLock { s in
            [
                "authorized": .int(s.authorized), "denied": .int(s.denied), "tokensIssued": .int(s.issued),
                "tokensRevoked": .int(s.revoked), "tokensLive": .int(s.tokens.count),
                "refusedExchanges": .int(s.refusedExchanges),
            ]
        }
    }

    // MARK: the authorize page and its form

    /// `GET /login/oauth/authorize`: the page a person sees, or GitHub's error page for a bad request.
    func authorizePage(_ request: SimRequest) -> SimResponse {
        let p = Dictionary(request.query, uniquingKeysWith: { first, _ in first })
        if let problem = checkAuthorize(p) { return problem }
        var hidden = ""
        for name in ["client_id", "redirect_uri", "state", "code_challenge", "code_challenge_method"] {
            if let v = p[name] { hidden += #"<input type="hidden" name="\#(name)" value="\#(Self.html(v))">"# }
        }
        let page = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>Authorize application</title></head>
            <body><main>
            <h1>Authorize the application</h1>
            <p>The application <code>\(Self.html(clientID))</code> asks to know who you are (public data only).</p>
            <form method="post" action="/login/oauth/authorize">
            \(hidden)
            <label>Sign in as <input name="login" value="octocat" autocomplete="off" required pattern="[A-Za-z0-9-]{1,39}"></label>
            <button type="submit" name="decision" value="approve" id="authorize">Authorize</button>
            <button type="submit" name="decision" value="deny" id="cancel">Cancel</button>
            </form>
            </main></body></html>
            """
        return SimResponse(
            status: 200, headers: [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store")],
            body: Array(page.utf8))
    }

    /// `POST /login/oauth/authorize` (form): `decision=approve` with `login=NAME` redirects back with a
    /// code, `decision=deny` with `error=access_denied` (GitHub's), both with the `state` given.
    func authorize(_ request: SimRequest, now: Double) -> SimResponse {
        let p = Dictionary(Self.formItems(request.body) + request.query, uniquingKeysWith: { first, _ in first })
        if let problem = checkAuthorize(p) { return problem }
        guard let redirect = p["redirect_uri"] else {
            return Self.errorPage(400, "redirect_uri is required by this simulator")
        }
        var back: [(String, String)] = []
        if p["decision"] == "deny" {
            state.withLock { $0.denied += 1 }
            back = [
                ("error", "access_denied"),
                ("error_description", "The user has denied your application access."),
                (
                    "error_uri",
                    "https://docs.github.com/apps/troubleshooting-authorization-request-errors/#access-denied"
                ),
            ]
        } else {
            guard let login = p["login"], Self.isLogin(login) else {
                return Self.errorPage(400, "login must be 1 to 39 letters, digits or hyphens")
            }
            let code = Self.random(20)
            let grant = Grant(
                login: login, redirectURI: redirect, challenge: p["code_challenge"], expires: now + Self.codeLifetime)
            state.withLock { s in
                s.codes.insert(grant, for: code)
                s.authorized += 1
            }
            back = [("code", code)]
        }
        if let st = p["state"] { back.append(("state", st)) }
        let separator = redirect.contains("?") ? "&" : "?"
        return SimResponse(
            status: 302, headers: [("Location", redirect + separator + Self.formEncode(back))], body: [])
    }

    private func checkAuthorize(_ p: [String: String]) -> SimResponse? {
        guard p["client_id"] == clientID else {
            return Self.errorPage(404, "no OAuth application has client_id '\(p["client_id"] ?? "")'")
        }
        if let method = p["code_challenge_method"], method != "S256" {
            return Self.errorPage(400, "code_challenge_method must be S256")
        }
        if let redirect = p["redirect_uri"], !(redirect.hasPrefix("http://") || redirect.hasPrefix("https://")) {
            return Self.errorPage(400, "redirect_uri must be an http(s) URL")
        }
        return nil
    }

    // MARK: the code exchange

    /// `POST /login/oauth/access_token`: as GitHub, a refusal is a `200` with an `error` field; JSON when
    /// the request accepts it, else form-encoded.
    func exchange(_ request: SimRequest, now: Double) -> SimResponse {
        var items = Self.formItems(request.body) + request.query
        if let json = (try? JSONValue.parse(request.body))?.objectValue {
            items = json.keys.compactMap { k in json[k]?.stringValue.map { (k, $0) } } + items
        }
        let p = Dictionary(items, uniquingKeysWith: { first, _ in first })
        let wantsJSON = request.header("Accept")?.contains("json") ?? false
        func answer(_ fields: [(String, String)]) -> SimResponse {
            if wantsJSON {
                return .json(200, .object(JSONObject(fields.map { ($0.0, .string($0.1)) })))
            }
            return SimResponse(
                status: 200, headers: [("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")],
                body: Array(Self.formEncode(fields).utf8))
        }
        func refuse(_ error: String, _ description: String) -> SimResponse {
            state.withLock { $0.refusedExchanges += 1 }
            return answer([("error", error), ("error_description", description)])
        }
        guard p["client_id"] == clientID, p["client_secret"] == clientSecret else {
            return refuse("incorrect_client_credentials", "The client_id and/or client_secret passed are incorrect.")
        }
        // The code is spent by any attempt to use it, good or bad (a replay finds it gone).
        guard let code = p["code"], let grant = state.withLock({ $0.codes.remove(code) }),
            grant.expires > now
        else {
            return refuse("bad_verification_code", "The code passed is incorrect or expired.")
        }
        if let expected = grant.redirectURI, let given = p["redirect_uri"], given != expected {
            return refuse("redirect_uri_mismatch", "The redirect_uri MUST match the registered callback URL.")
        }
        if let challenge = grant.challenge {
            guard let verifier = p["code_verifier"], Self.s256(verifier) == challenge else {
                return refuse("bad_verification_code", "The code_verifier does not match the code_challenge.")
            }
        }
        let token = Self.tokenPrefix + Self.random(24)
        state.withLock { s in
            s.tokens.insert(grant.login, for: token)
            s.issued += 1
        }
        return answer([("access_token", token), ("token_type", "bearer"), ("scope", "")])
    }

    // MARK: the user and revocation

    /// `GET /user` with a token issued here: who it belongs to; otherwise GitHub's `401`.
    func user(_ request: SimRequest) -> SimResponse {
        guard let token = Self.bearer(request), let login = login(ofToken: token) else {
            return .json(
                401, ["message": "Requires authentication", "documentation_url": "https://docs.github.com/rest"])
        }
        return .json(200, Self.userJSON(login))
    }

    /// `DELETE /applications/{client_id}/token`: Basic auth with the app's id and secret, body
    /// `{"access_token": …}`; `204` once revoked, `404` for a token not issued (or already revoked).
    func revoke(_ request: SimRequest, clientIDInPath: String) -> SimResponse {
        let expected = "Basic " + Data("\(clientID):\(clientSecret)".utf8).base64EncodedString()
        guard clientIDInPath == clientID, request.header("Authorization") == expected else {
            return .json(401, ["message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"])
        }
        guard let token = (try? JSONValue.parse(request.body))?["access_token"]?.stringValue else {
            return .json(422, ["message": "Invalid request. \"access_token\" wasn't supplied."])
        }
        let removed = state.withLock { s in
            guard s.tokens.remove(token) != nil else { return false }
            s.revoked += 1
            return true
        }
        return removed ? SimResponse(status: 204) : .json(404, ["message": "Not Found"])
    }

    /// The user a login names: its id is stable (the same person in every run), its name and avatar
    /// derived from it.
    static func userJSON(_ login: String) -> JSONValue {
        let digest = Array(SHA256.hash(data: Array(login.lowercased().utf8)))
        let id = digest.prefix(4).reduce(0) { $0 << 8 | Int($1) } & 0x3fff_ffff
        return [
            "login": .string(login), "id": .int(id), "name": .string(login.capitalized), "type": "User",
            "avatar_url": .string("https://avatars.githubusercontent.com/u/\(id)?v=4"),
        ]
    }

    // MARK: helpers

    /// The bearer token of a request's `Authorization` header.
    static func bearer(_ request: SimRequest) -> String? {
        guard let a = request.header("Authorization") else { return nil }
        for scheme in ["Bearer ", "bearer ", "token "] where a.hasPrefix(scheme) {
            return String(a.dropFirst(scheme.count))
        }
        return nil
    }

    /// PKCE S256: base64url (no padding) of the SHA-256 of the verifier.
    static func s256(_ verifier: String) -> String {
        base64URL(Array(SHA256.hash(data: Array(verifier.utf8))))
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// `n` random bytes, base64url.
    static func random(_ n: Int) -> String {
        var g = SystemRandomNumberGenerator()
        return base64URL((0..<n).map { _ in UInt8.random(in: 0...255, using: &g) })
    }

    static func isLogin(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 39
            && s.utf8.allSatisfy { c in
                (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c == 45
            }
    }

    /// `application/x-www-form-urlencoded` items (decoded as a query string is).
    static func formItems(_ body: [UInt8]) -> [(String, String)] {
        guard !body.isEmpty, let text = String(validating: body, as: UTF8.self) else { return [] }
        return text.split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = PercentDecoding.decode(parts[0], plusIsSpace: true) ?? String(parts[0])
            let value = parts.count > 1 ? (PercentDecoding.decode(parts[1], plusIsSpace: true) ?? String(parts[1])) : ""
            return (name, value)
        }
    }

    static func formEncode(_ items: [(String, String)]) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        func e(_ s: String) -> String { s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s }
        return items.map { "\(e($0.0))=\(e($0.1))" }.joined(separator: "&")
    }

    static func html(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    static func errorPage(_ status: Int, _ sentence: String) -> SimResponse {
        let page =
            "<!doctype html><html lang=\"en\"><meta charset=\"utf-8\"><title>Error</title><p>\(html(sentence))</p></html>"
        return SimResponse(
            status: status, headers: [("Content-Type", "text/html; charset=utf-8")], body: Array(page.utf8))
    }
}
