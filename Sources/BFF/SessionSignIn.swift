import EventHTTP
import Primitives
import SignIn
import ViewModels

/// Where the host finds the person a login cookie names. The product keeps the logins (and their
/// tokens); the host only asks who a login is when a session is created, and marks the session with
/// the login's key, so later requests are checked against the cookie without asking again.
public protocol LoginDirectory: Sendable {
    /// The person of the login `key` names (`LoginCookie.key(of:)`), renewing its sliding lifetime; nil
    /// when there is no such login (never made, signed out, expired). `reply` once, on any thread.
    func person(forLoginKey key: String, reply: @escaping @Sendable (SignedInPerson?) -> Void)
}

/// Sign-in as the host applies it: how to reach the logins and the server's public origin.
public struct SignInSettings: Sendable {
    /// The logins (the product's store).
    public var logins: any LoginDirectory
    /// `https://bff.example.com` (`--public-url`): the origin the cookie and the cross-site rule are for;
    /// nil: each request's own (`Host`, and `X-Forwarded-Proto` from a trusted proxy).
    public var publicURL: String?

    public init(logins: any LoginDirectory, publicURL: String?) {
        self.logins = logins
        self.publicURL = publicURL
    }
}

/// The host's half of sign-in, on every session route: which login a request carries (the key of its
/// cookie), whether an unsafe request that carries it is cross-site (`CrossSiteRule`), and the cookie
/// to set or clear. Sessions of a login answer only requests that carry that login's cookie.
///
/// Threading: immutable; any loop.
package final class SignInGate: Sendable {
    let logins: any LoginDirectory
    /// `--public-url`'s origin (`scheme://host[:port]`, lower case), or nil: each request's.
    let fixedOrigin: String?

    /// The two cookies, made once.
    private static let httpsCookie = LoginCookie(https: true)
    private static let httpCookie = LoginCookie(https: false)
    /// Recent cookie values and their keys (a digest each): a browser's requests present the same
    /// cookie again and again. Bounded: emptied when full.
    private let keys = Lock<[String: String]>([:])
    private static let maxRememberedKeys = 4096

    init(_ settings: SignInSettings) {
        logins = settings.logins
        fixedOrigin = settings.publicURL.map(SignInGate.origin(ofURL:))
    }

    /// `scheme://host[:port]` of a URL, lower case, no path or trailing slash.
    static func origin(ofURL url: String) -> String {
        var s = url.lowercased()
        if let r = s.range(of: "://") {
            let rest = s[r.upperBound...]
            if let slash = rest.firstIndex(of: "/") { s = String(s[..<slash]) }
        }
        while s.hasSuffix("/") { s.removeLast() }
        return s
    }

    /// The server's origin as `req` reached it: `--public-url`, else `http(s)://` and its `Host`, https
    /// when a trusted proxy says `X-Forwarded-Proto: https`.
    package func origin(of req: HTTPRequest) -> String {
        if let fixedOrigin { return fixedOrigin }
        let host = (req.header("Host") ?? "localhost").lowercased()
        return (isHTTPS(req) ? "https://" : "http://") + host
    }

    /// True when `req` reached the server over https: `--public-url`'s scheme, else a trusted proxy's
    /// `X-Forwarded-Proto` (without building the origin).
    private func isHTTPS(_ req: HTTPRequest) -> Bool {
        if let fixedOrigin { return fixedOrigin.hasPrefix("https:") }
        return req.viaTrustedProxy && req.header("X-Forwarded-Proto")?.lowercased().hasPrefix("https") == true
    }

    /// The login cookie of the origin `req` reached (`__Host-bff-login` on https, `bff-login` on http).
    package func cookie(for req: HTTPRequest) -> LoginCookie { isHTTPS(req) ? Self.httpsCookie : Self.httpCookie }

    /// The login cookie's value `req` carries, if any (of the token's shape).
    package func cookieValue(of req: HTTPRequest) -> String? {
        let headers = req.headers(named: "Cookie")
        if headers.isEmpty { return nil }
        return cookie(for: req).value(inCookieHeaders: headers)
    }

    /// The key of the login `req` carries a cookie of, if any.
    package func loginKey(of req: HTTPRequest) -> String? { cookieValue(of: req).map(key(ofCookie:)) }

    /// The key of a login cookie's value (`LoginCookie.key(of:)`), remembered for the cookies seen lately.
    package func key(ofCookie value: String) -> String {
        if let known = keys.withLock({ $0[value] }) { return known }
        let key = LoginCookie.key(of: value)
        keys.withLock { k in
            if k.count >= Self.maxRememberedKeys { k.removeAll(keepingCapacity: true) }
            k[value] = key
        }
        return key
    }

    /// True when `req` is unsafe, carries a login cookie and is cross-site (`CrossSiteRule`): it is refused
    /// with `403` before anything is applied.
    package func refusesCrossSite(_ req: HTTPRequest) -> Bool {
        guard req.method != .GET, req.method != .HEAD, cookieValue(of: req) != nil else { return false }
        return CrossSiteRule.refuses(
            method: req.method.rawValue, carriesLoginCookie: true, origin: req.header("Origin"),
            secFetchSite: req.header("Sec-Fetch-Site"), serverOrigin: origin(of: req))
    }

    /// The problem document of a refused cross-site request.
    static let crossSiteRefusal = HTTPResponse.problem(
        status: 403,
        detail: "a cross-site request that carries the login cookie is refused (its Origin or Sec-Fetch-Site "
            + "is not this server's); nothing was applied")
}
