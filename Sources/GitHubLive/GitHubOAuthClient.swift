import Foundation
import Logging

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// GitHub's side of "Sign in with GitHub", as the server calls it: the authorize URL a browser is sent
/// to, the code exchange (with the client secret and the PKCE verifier), `GET /user`, and revoking a
/// token (`DELETE /applications/{client_id}/token`). No scope is ever asked: the token reads public data.
///
/// The client secret and every token stay out of errors and log lines. Redirects are refused (a token
/// or the secret must not travel to wherever one points). Immutable; any thread.
public final class GitHubOAuthClient: Sendable {
    /// Where GitHub is and who this application is there.
    public struct Configuration: Sendable {
        /// `GITHUB_WEB_URL`: `https://github.com` (the authorize page and the code exchange).
        public var webURL: String
        /// `GITHUB_API_URL`: `https://api.github.com` (`/user`, revocation).
        public var apiURL: String
        /// The OAuth app's client id and secret (`GITHUB_CLIENT_ID`, `GITHUB_CLIENT_SECRET`).
        public var clientID: String
        public var clientSecret: String
        public var userAgent: String
        /// Seconds a call may take.
        public var timeout: Double

        public init(
            webURL: String = "https://github.com", apiURL: String = "https://api.github.com", clientID: String,
            clientSecret: String, userAgent: String = "bff/1.0", timeout: Double = 10
        ) {
            self.webURL = webURL
            self.apiURL = apiURL
            self.clientID = clientID
            self.clientSecret = clientSecret
            self.userAgent = userAgent
            self.timeout = timeout
        }
    }

    /// Who a token belongs to (`GET /user`).
    public struct User: Sendable, Equatable {
        public let id: Int
        public let login: String
        public let name: String?
        public let avatarURL: String?
    }

    /// Why a step of the sign-in failed, in a sentence that names neither secret nor token.
    public enum Failure: Error, Equatable, Sendable {
        /// GitHub refused the exchange (`error` field: a bad or used code, a PKCE mismatch, wrong
        /// credentials) or the token (`401` from `/user`).
        case refused(String)
        /// GitHub could not be reached, or answered something unreadable.
        case unavailable(String)

        public var message: String {
            switch self {
            case .refused(let m), .unavailable(let m): return m
            }
        }
    }

    public let configuration: Configuration
    private let session: URLSession
    private let logger: Logger

    public init(configuration: Configuration, logger: Logger) {
        var c = configuration
        while c.webURL.hasSuffix("/") { c.webURL.removeLast() }
        while c.apiURL.hasSuffix("/") { c.apiURL.removeLast() }
        self.configuration = c
        self.logger = logger
        let s = URLSessionConfiguration.ephemeral
        s.timeoutIntervalForRequest = c.timeout
        s.timeoutIntervalForResource = c.timeout * 2
        s.requestCachePolicy = .reloadIgnoringLocalCacheData
        s.urlCache = nil
        s.httpCookieStorage = nil
        session = URLSession(configuration: s, delegate: RefuseRedirects(), delegateQueue: nil)
    }

    deinit { session.invalidateAndCancel() }

    /// The authorize URL for one sign-in: `client_id`, `redirect_uri`, `state`, the PKCE challenge
    /// (`S256`), and no `scope`.
    public func authorizeURL(redirectURI: String, state: String, codeChallenge: String) -> String {
        let items = [
            ("client_id", configuration.clientID), ("redirect_uri", redirectURI), ("state", state),
            ("code_challenge", codeChallenge), ("code_challenge_method", "S256"),
        ]
        return configuration.webURL + "/login/oauth/authorize?" + Self.form(items)
    }

    /// Exchanges an authorization code for the person's token.
    public func exchange(code: String, verifier: String, redirectURI: String) async -> Result<String, Failure> {
        var request = URLRequest(url: URL(string: configuration.webURL + "/login/oauth/access_token")!)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(
            Self.form([
                ("client_id", configuration.clientID), ("client_secret", configuration.clientSecret), ("code", code),
                ("redirect_uri", redirectURI), ("code_verifier", verifier),
            ]).utf8)
        switch await send(request, what: "the code exchange") {
        case .failure(let f): return .failure(f)
        case .success(let (status, body)):
            let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
            if let token = object?["access_token"] as? String, !token.isEmpty, status == 200 { return .success(token) }
            if let error = object?["error"] as? String {
                // GitHub's own codes (`bad_verification_code`, `incorrect_client_credentials`, …) carry no secret.
                return .failure(.refused("GitHub refused the sign-in code (\(error.prefix(64)))"))
            }
            return .failure(.unavailable("GitHub answered the code exchange with HTTP \(status) and no token"))
        }
    }

    /// Who `token` belongs to.
    public func user(token: String) async -> Result<User, Failure> {
        var request = URLRequest(url: URL(string: configuration.apiURL + "/user")!)
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.setValue("application/vnd.github+json", forHTTPHeaderField: "Accept")
        switch await send(request, what: "GET /user") {
        case .failure(let f): return .failure(f)
        case .success(let (status, body)):
            if status == 401 { return .failure(.refused("GitHub refused the token (HTTP 401)")) }
            guard status == 200, let o = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any],
                let id = (o["id"] as? NSNumber)?.intValue, let login = o["login"] as? String
            else { return .failure(.unavailable("GitHub answered GET /user with HTTP \(status)")) }
            let avatar = (o["avatar_url"] as? String).flatMap { $0.hasPrefix("https://") ? $0 : nil }
            return .success(User(id: id, login: login, name: o["name"] as? String, avatarURL: avatar))
        }
    }

    /// Revokes `token` at GitHub (sign-out); true when GitHub confirmed it or no longer knew it.
    @discardableResult
    public func revoke(token: String) async -> Bool {
        var request = URLRequest(
            url: URL(string: configuration.apiURL + "/applications/\(configuration.clientID)/token")!)
        request.httpMethod = "DELETE"
        let basic = Data("\(configuration.clientID):\(configuration.clientSecret)".utf8).base64EncodedString()
        request.setValue("Basic \(basic)", forHTTPHeaderField: "Authorization")
        request.setValue("application/vnd.github+json", forHTTPHeaderField: "Accept")
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try? JSONSerialization.data(withJSONObject: ["access_token": token])
        switch await send(request, what: "the token revocation") {
        case .failure: return false
        case .success(let (status, _)):
            if status != 204 && status != 404 {
                logger.warning("github token revocation refused", metadata: ["status": "\(status)"])
            }
            return status == 204 || status == 404
        }
    }

    private func send(_ request: URLRequest, what: String) async -> Result<(Int, Data), Failure> {
        var request = request
        request.setValue(configuration.userAgent, forHTTPHeaderField: "User-Agent")
        let session = self.session
        do {
            let (data, response) = try await session.data(for: request)
            guard let http = response as? HTTPURLResponse else {
                return .failure(.unavailable("GitHub answered \(what) with something other than HTTP"))
            }
            return .success((http.statusCode, data))
        } catch {
            // The error names the URL at most (never a body, where the secret and tokens travel).
            logger.warning("github sign-in call failed", metadata: ["call": "\(what)"])
            return .failure(.unavailable("GitHub could not be reached for \(what)"))
        }
    }

    static func form(_ items: [(String, String)]) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return items.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }
            .joined(separator: "&")
    }
}
