import BFF
import CoreMetrics
import EventHTTP
import Foundation
import GitHubLive
import GitHubSearch
import JSON
import Logging
import Primitives
import SignIn
import ViewModels

/// How "Sign in with GitHub" is configured (`GITHUB_CLIENT_ID`, `GITHUB_CLIENT_SECRET` and the flags of
/// `bff serve`); sign-in is off without it.
public struct SignInOptions: Sendable {
    /// The GitHub OAuth app's client id and secret. The secret never appears in a response or a log line.
    public var clientID: String
    public var clientSecret: String
    /// `GITHUB_WEB_URL`: where `/login/oauth/authorize` and `/login/oauth/access_token` are.
    public var webURL = "https://github.com"
    /// `--public-url` (`PUBLIC_URL`): the server's origin for `redirect_uri` and the cookie; nil: each
    /// request's own.
    public var publicURL: String?
    /// `BFF_SECRET_KEY` (32 bytes, base64) that seals tokens at rest; nil: a key file under `stateDirectory`.
    public var secretKey: String?
    /// Where the logins file (`logins.json`) and the key file (`secret.key`) live; nil keeps logins in
    /// memory only (tests) and needs `secretKey`, or makes a key for this run.
    public var stateDirectory: String? = "var"
    /// A login lasts this long from its last use (`--login-ttl`, seconds).
    public var loginTTL: Double = 14 * 86400
    /// Most logins kept (`--max-logins`), sign-ins under way (`--max-pending-sign-ins`), and persons'
    /// GitHub clients (their own rate limiters) kept at once (`--max-personal-clients`).
    public var maxLogins = 100_000
    public var maxPendingSignIns = 10_000
    public var maxPersonalClients = 1000

    public init(clientID: String, clientSecret: String) {
        self.clientID = clientID
        self.clientSecret = clientSecret
    }
}

/// Why sign-in could not be set up; the sentence names no secret.
public struct SignInSetupError: Error, CustomStringConvertible {
    public let description: String
}

/// What the callback needs of a sign-in it completes.
struct StartedSignIn: Sendable {
    let verifier: String
    let returnTo: String
}

/// The sign-ins under way, by `state`: each good once, for ten minutes, for the browser that started it
/// (one process: `PendingSignIns` in memory; a cluster: `RedisSignIns`, so the callback may reach any node).
protocol SignInsUnderWay: Sendable {
    /// Starts one; its `state` and the browser binding to set as a cookie, or nil when none can be kept.
    func start(returnTo: String, verifier: String) async -> (state: String, browser: String)?
    /// Takes the sign-in `state` names if it is good and `browser` is its binding; gone afterwards.
    func take(state: String, browser: String?) async -> StartedSignIn?
}

extension PendingSignIns: SignInsUnderWay {
    func start(returnTo: String, verifier: String) async -> (state: String, browser: String)? {
        start(returnTo: returnTo, verifier: verifier, now: Date().timeIntervalSince1970)
    }
    func take(state: String, browser: String?) async -> StartedSignIn? {
        take(state: state, browser: browser, now: Date().timeIntervalSince1970).map {
            StartedSignIn(verifier: $0.verifier, returnTo: $0.returnTo)
        }
    }
}

/// The sign-in's server side: the `/auth/…` routes (login, callback, logout), the logins (`LoginStore`),
/// the sign-ins under way (`PendingSignIns`), GitHub's OAuth endpoints (`GitHubOAuthClient`), and what a
/// login's end does everywhere (its sessions end `signed-out`, its token is revoked, its GitHub client
/// forgotten). Thread-safe.
final class SignInService: Sendable {
    let options: SignInOptions
    let store: any Logins
    let oauth: GitHubOAuthClient
    let pending: any SignInsUnderWay
    /// The application, set once it is built (the service is made before it).
    let app = Lock<Application?>(nil)
    /// The persons' GitHub clients (set by the live composition; nil over an injected search model).
    let personal = Lock<PersonalGateways?>(nil)
    private let logger: Logger
    private let signIns: [String: CoreMetrics.Counter]
    private let signOuts: [String: CoreMetrics.Counter]

    init(
        options: SignInOptions, apiURL: String, store: any Logins, pending: (any SignInsUnderWay)? = nil,
        logger: Logger, factory: any MetricsFactory
    ) {
        self.options = options
        self.store = store
        self.logger = logger
        self.pending = pending ?? PendingSignIns(capacity: options.maxPendingSignIns, lifetime: 600)
        oauth = GitHubOAuthClient(
            configuration: .init(
                webURL: options.webURL, apiURL: apiURL, clientID: options.clientID, clientSecret: options.clientSecret),
            logger: logger)
        var ins: [String: CoreMetrics.Counter] = [:]
        for outcome in ["signed-in", "bad-state", "denied", "failed", "full"] {
            ins[outcome] = CoreMetrics.Counter(
                label: "bff_signins_total", dimensions: [("outcome", outcome)], factory: factory)
        }
        signIns = ins
        var outs: [String: CoreMetrics.Counter] = [:]
        for reason in ["logout", "token-rejected"] {
            outs[reason] = CoreMetrics.Counter(
                label: "bff_signouts_total", dimensions: [("reason", reason)], factory: factory)
        }
        signOuts = outs
    }

    /// Makes the logins' store: the sealing key from `BFF_SECRET_KEY` or the key file.
    static func makeStore(options: SignInOptions, logger: Logger) throws(SignInSetupError) -> LoginStore {
        let sealer: TokenSealer
        do {
            if let directory = options.stateDirectory {
                sealer = try SecretKeySource.sealer(environment: options.secretKey, keyFile: directory + "/secret.key")
            } else {
                sealer = try TokenSealer(base64Key: options.secretKey ?? TokenSealer.newBase64Key())
            }
        } catch {
            throw SignInSetupError(description: error.description)
        }
        return LoginStore(
            path: options.stateDirectory.map { $0 + "/logins.json" }, sealer: sealer, ttl: options.loginTTL,
            capacity: options.maxLogins, logger: logger)
    }

    /// Ends a login everywhere: forgets it, ends its sessions (`signed-out`), forgets its GitHub client,
    /// and revokes its token at GitHub unless GitHub already refused it.
    func end(_ key: String, reason: String) async {
        let token = await store.remove(key)
        app.withLock { $0 }?.endSessions(ofLogin: key)
        personal.withLock { $0 }?.forget(key)
        guard let token else { return }  // not a login (any more): nothing to count or revoke
        signOuts[reason]?.increment()
        if reason == "logout" {
            let oauth = self.oauth
            Task { await oauth.revoke(token: token) }
        }
    }

    // MARK: routes

    /// Adds `/auth/login`, `/auth/callback` and `/auth/logout` to `app`.
    func register(on app: Application) {
        let router = app.server.router
        router.add(.GET, "/auth/login") { [self] req, res in self.login(req, res, app: app) }
        router.add(.GET, "/auth/callback") { [self] req, res in self.callback(req, res, app: app) }
        router.add(.POST, "/auth/logout") { [self] req, res in self.logout(req, res, app: app) }
    }

    /// Without sign-in, the same paths answer `404` with a sentence.
    static func registerDisabled(on app: Application) {
        let off = HTTPResponse.problem(status: 404, detail: "sign-in is not configured on this server")
        for (method, path) in [(HTTPMethod.GET, "/auth/login"), (.GET, "/auth/callback"), (.POST, "/auth/logout")] {
            app.server.router.add(method, path) { _, res in res.send(off) }
        }
    }

    /// The cookie that binds a sign-in's `state` to the browser that started it.
    private func bindingCookie(https: Bool) -> String { https ? "__Host-bff-signin" : "bff-signin" }

    private func login(_ req: HTTPRequest, _ res: HTTPResponder, app: Application) {
        guard let gate = app.signIn else { return res.send(.problem(status: 404, detail: "sign-in is not configured")) }
        let returnTo = ReturnTo.sanitize(req.query["returnTo"])
        let verifier = PKCE.verifier()
        let origin = gate.origin(of: req)
        let https = origin.hasPrefix("https:")
        let loop = req.loop
        Task {
            guard let started = await pending.start(returnTo: returnTo, verifier: verifier) else {
                signIns["full"]?.increment()
                let refused = HTTPResponse.problem(
                    status: 503,
                    detail: "too many sign-ins are under way (--max-pending-sign-ins), or they cannot be kept now; "
                        + "retry in a minute", headers: [("Retry-After", "60")])
                return loop.execute { res.send(refused) }
            }
            let location = oauth.authorizeURL(
                redirectURI: origin + "/auth/callback", state: started.state,
                codeChallenge: PKCE.challenge(for: verifier))
            let response = HTTPResponse(
                status: 302,
                headers: [
                    ("Location", location), ("Cache-Control", "no-store"),
                    (
                        "Set-Cookie",
                        Self.cookie(bindingCookie(https: https), started.browser, maxAge: 600, https: https)
                    ),
                ])
            loop.execute { res.send(response) }
        }
    }

    private func callback(_ req: HTTPRequest, _ res: HTTPResponder, app: Application) {
        guard let gate = app.signIn else { return res.send(.problem(status: 404, detail: "sign-in is not configured")) }
        let query = req.query
        let origin = gate.origin(of: req)
        let https = origin.hasPrefix("https:")
        let binding = bindingCookie(https: https)
        let html = (req.header("Accept") ?? "").contains("text/html")
        let clearBinding = ("Set-Cookie", Self.cookie(binding, "", maxAge: 0, https: https))
        func fail(_ status: Int, _ outcome: String, _ sentence: String) -> HTTPResponse {
            signIns[outcome]?.increment()
            return Self.failure(status, sentence, html: html, headers: [clearBinding])
        }
        let browser = Self.cookieValue(binding, in: req.headers(named: "Cookie"))
        let loop = req.loop
        let previous = gate.loginKey(of: req)
        let cookie = gate.cookie(for: req)
        Task {
            let response: HTTPResponse
            if let state = query["state"], !state.isEmpty,
                let started = await pending.take(state: state, browser: browser)
            {
                if let error = query["error"] {
                    let sentence =
                        error == "access_denied"
                        ? "you did not authorize the sign-in at GitHub"
                        : "GitHub refused the sign-in (\(error.prefix(64)))"
                    response = fail(403, "denied", sentence)
                } else if let code = query["code"], !code.isEmpty {
                    response = await self.complete(
                        code: code, started: started, redirectURI: origin + "/auth/callback", cookie: cookie,
                        previous: previous, html: html, clearBinding: clearBinding)
                } else {
                    response = fail(400, "bad-state", "the callback carries no code")
                }
            } else {
                response = fail(
                    400, "bad-state",
                    "the sign-in's state is missing, unknown, already used, expired or from another browser; "
                        + "sign in again")
            }
            loop.execute { res.send(response) }
        }
    }

    /// The exchange, `/user`, and the new login: its cookie and the way back.
    private func complete(
        code: String, started: StartedSignIn, redirectURI: String, cookie: LoginCookie, previous: String?,
        html: Bool, clearBinding: (String, String)
    ) async -> HTTPResponse {
        func fail(_ status: Int, _ outcome: String, _ sentence: String) -> HTTPResponse {
            signIns[outcome]?.increment()
            return Self.failure(status, sentence, html: html, headers: [clearBinding])
        }
        let token: String
        switch await oauth.exchange(code: code, verifier: started.verifier, redirectURI: redirectURI) {
        case .failure(let f): return fail(502, "failed", f.message)
        case .success(let t): token = t
        }
        let user: GitHubOAuthClient.User
        switch await oauth.user(token: token) {
        case .failure(let f): return fail(502, "failed", f.message)
        case .success(let u): user = u
        }
        let value = LoginCookie.newValue()
        let person = SignedInPerson(
            loginKey: LoginCookie.key(of: value), userID: user.id, login: user.login, name: user.name,
            avatarURL: user.avatarURL)
        do {
            try await store.add(person, token: token)
        } catch {
            await oauth.revoke(token: token)
            switch error {
            case .full(let max):
                return fail(503, "full", "the server holds its maximum of \(max) logins (--max-logins); retry later")
            case .unavailable:
                return fail(
                    503, "failed", "the logins cannot be stored now (the cluster's Redis is unavailable); retry")
            }
        }
        // A browser that signs in again leaves its former login behind: it ends.
        if let previous, previous != person.loginKey { await end(previous, reason: "logout") }
        signIns["signed-in"]?.increment()
        logger.info("signed in", metadata: ["user_id": "\(user.id)"])
        return HTTPResponse(
            status: 302,
            headers: [
                ("Location", started.returnTo), ("Cache-Control", "no-store"),
                ("Set-Cookie", cookie.set(value, maxAge: Int(options.loginTTL))), clearBinding,
            ])
    }

    private func logout(_ req: HTTPRequest, _ res: HTTPResponder, app: Application) {
        guard let gate = app.signIn else { return res.send(.problem(status: 404, detail: "sign-in is not configured")) }
        if app.refusedCrossSite(req, res) { return }
        let cookie = gate.cookie(for: req)
        let done = HTTPResponse(status: 204, headers: [("Set-Cookie", cookie.clear), ("Cache-Control", "no-store")])
        guard let key = gate.loginKey(of: req) else { return res.send(done) }
        let loop = req.loop
        Task {
            // Answered once the login is gone from the store: no node honours the cookie after the 204.
            await self.end(key, reason: "logout")
            self.logger.info("signed out")
            loop.execute { res.send(done) }
        }
    }

    // MARK: helpers

    static func cookie(_ name: String, _ value: String, maxAge: Int, https: Bool) -> String {
        "\(name)=\(value); Max-Age=\(maxAge); Path=/; HttpOnly; SameSite=Lax" + (https ? "; Secure" : "")
    }

    static func cookieValue(_ name: String, in headers: [String]) -> String? {
        for header in headers {
            for pair in header.split(separator: ";") {
                let trimmed = pair.drop { $0 == " " }
                guard let eq = trimmed.firstIndex(of: "="), trimmed[..<eq] == name else { continue }
                return String(trimmed[trimmed.index(after: eq)...])
            }
        }
        return nil
    }

    /// A failed sign-in: problem JSON, or a small page with the same sentence and a link back when the
    /// browser asked for HTML.
    static func failure(_ status: Int, _ sentence: String, html: Bool, headers: [(String, String)]) -> HTTPResponse {
        guard html else { return .problem(status: status, detail: sentence, headers: headers) }
        let escaped = sentence.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
        let page = """
            <!doctype html><html lang="en"><head><meta charset="utf-8"><title>Sign-in failed</title></head>
            <body><main><h1>Sign-in failed</h1><p>\(escaped).</p><p><a href="/">Back to the search</a></p></main></body></html>
            """
        return HTTPResponse(
            status: status,
            headers: [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store")] + headers,
            body: Array(page.utf8))
    }
}
