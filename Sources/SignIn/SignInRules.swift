/// SignIn: the rules of "Sign in with GitHub" that need no socket and no store: where a login may
/// send the browser back to (`ReturnTo`), PKCE (`PKCE`), the login cookie (`LoginCookie`), the
/// cross-site rule for unsafe requests (`CrossSiteRule`), the table of pending sign-ins
/// (`PendingSignIns`), and the token at rest (`TokenSealer`: AES-GCM under `BFF_SECRET_KEY`). Values
/// and pure functions, plus one lock-guarded table; any thread.
import Crypto
import Foundation
import Primitives

/// Where `returnTo` may send the browser after sign-in: a path of this origin only.
public enum ReturnTo {
    /// `raw` when it is a path of this origin (`/…`, not `//…`, not `/\…`, no scheme, no control
    /// character, at most 2,048 bytes); otherwise `/`.
    public static func sanitize(_ raw: String?) -> String {
        guard let raw, raw.utf8.count <= 2048, raw.utf8.first == UInt8(ascii: "/") else { return "/" }
        let bytes = Array(raw.utf8)
        // `//host` and `/\host` are other origins to a browser (a scheme-relative URL, backslash as slash).
        if bytes.count > 1, bytes[1] == UInt8(ascii: "/") || bytes[1] == UInt8(ascii: "\\") { return "/" }
        // Control characters (tab and newline included: browsers strip them, so `/\t/evil` is `//evil`)
        // and a backslash anywhere (browsers read it as `/`) are refused outright.
        if bytes.contains(where: { $0 < 0x20 || $0 == 0x7f || $0 == UInt8(ascii: "\\") }) { return "/" }
        return raw
    }
}

/// PKCE (RFC 7636) with S256.
public enum PKCE {
    /// A fresh code verifier: 32 random bytes, base64url (43 characters).
    public static func verifier() -> String { base64URL(randomBytes(32)) }

    /// Its challenge: base64url (no padding) of its SHA-256.
    public static func challenge(for verifier: String) -> String {
        base64URL(Array(SHA256.hash(data: Array(verifier.utf8))))
    }
}

/// The login cookie: opaque, `HttpOnly; SameSite=Lax; Path=/`, `Secure` and `__Host-` prefixed on an
/// https origin.
public struct LoginCookie: Sendable, Equatable {
    /// `__Host-bff-login` on https, `bff-login` on plain http (local development).
    public let name: String
    public let secure: Bool

    /// The cookie of an origin whose scheme is `https` or not.
    public init(https: Bool) {
        secure = https
        name = https ? "__Host-bff-login" : "bff-login"
    }

    /// The `Set-Cookie` value that stores `value` for `maxAge` seconds.
    public func set(_ value: String, maxAge: Int) -> String {
        "\(name)=\(value); Max-Age=\(maxAge); Path=/; HttpOnly; SameSite=Lax" + (secure ? "; Secure" : "")
    }

    /// The `Set-Cookie` value that clears it.
    public var clear: String {
        "\(name)=; Max-Age=0; Path=/; HttpOnly; SameSite=Lax" + (secure ? "; Secure" : "")
    }

    /// Its value in a request's `Cookie` headers (nil: absent, empty, or not of the token's shape).
    public func value(inCookieHeaders headers: [String]) -> String? {
        // On every request that carries cookies: read over the bytes, no substring per pair.
        let name = Array(self.name.utf8)
        for var header in headers {
            let found: String?? = header.withUTF8 { b -> String?? in
                var i = 0
                while i < b.count {
                    while i < b.count && (b[i] == 0x20 || b[i] == 0x09) { i += 1 }  // a pair starts here
                    var end = i
                    while end < b.count && b[end] != UInt8(ascii: ";") { end += 1 }
                    if end - i > name.count, b[i + name.count] == UInt8(ascii: "="),
                        (0..<name.count).allSatisfy({ b[i + $0] == name[$0] })
                    {
                        var last = end
                        while last > i + name.count + 1 && (b[last - 1] == 0x20 || b[last - 1] == 0x09) { last -= 1 }
                        let value = String(
                            decoding: UnsafeBufferPointer(rebasing: b[(i + name.count + 1)..<last]), as: UTF8.self)
                        return .some(LoginCookie.isToken(value) ? value : nil)
                    }
                    i = end + 1
                }
                return .none
            }
            if let found { return found }
        }
        return nil
    }

    /// A fresh login id: 32 random bytes, base64url (256 bits; not derived from any token).
    public static func newValue() -> String { base64URL(randomBytes(32)) }

    /// The key a login is stored and its sessions are marked under: a digest of the cookie's value (32 hex
    /// characters), so neither a store nor a session record holds what a browser would present.
    public static func key(of value: String) -> String {
        let digest = SHA256.hash(data: Array(("bff-login\u{0}" + value).utf8))
        let hex: [UInt8] = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for b in digest.prefix(16) {
            out.append(hex[Int(b >> 4)])
            out.append(hex[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The shape `newValue` makes: 43 base64url characters.
    static func isToken(_ s: String) -> Bool {
        s.utf8.count == 43
            && s.utf8.allSatisfy { c in
                (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c == 45 || c == 95
            }
    }
}

/// Which unsafe requests that carry the login cookie are refused as cross-site: an `Origin` present
/// and not the server's, or a `Sec-Fetch-Site` present and neither `same-origin` nor `none`. Requests
/// with neither header (curl, scripts) are judged by the cookie alone.
public enum CrossSiteRule {
    /// True when the request must be refused (`403`). `serverOrigin` is `scheme://host[:port]`, lower
    /// case, without a trailing slash.
    public static func refuses(
        method: String, carriesLoginCookie: Bool, origin: String?, secFetchSite: String?, serverOrigin: String
    ) -> Bool {
        guard carriesLoginCookie, method != "GET", method != "HEAD", method != "OPTIONS" else { return false }
        if let origin, origin.lowercased() != serverOrigin.lowercased() { return true }
        if let site = secFetchSite?.lowercased(), site != "same-origin", site != "none" { return true }
        return false
    }
}

/// One sign-in under way: what the callback needs, bound to the browser that started it.
public struct PendingSignIn: Sendable, Equatable {
    public let verifier: String
    public let returnTo: String
    /// The digest of the browser's binding cookie (the callback must present the cookie itself).
    let browserDigest: [UInt8]
    let expires: Double
}

/// The sign-ins under way, by `state`: each good once, for `lifetime` seconds, and only for the
/// browser that started it. Bounded: at most `capacity`; a new one past it is refused (nil) rather
/// than pushing out one a person is completing. Thread-safe.
public final class PendingSignIns: Sendable {
    public let capacity: Int
    public let lifetime: Double
    private let table = Lock<[String: PendingSignIn]>([:])

    public init(capacity: Int = 10_000, lifetime: Double = 600) {
        self.capacity = capacity
        self.lifetime = lifetime
    }

    /// Starts a sign-in at `now`; returns its `state` (≥ 128 random bits) and the browser binding to
    /// set as a cookie, or nil when the table is full of sign-ins not yet expired.
    public func start(returnTo: String, verifier: String, now: Double) -> (state: String, browser: String)? {
        let state = base64URL(randomBytes(24))
        let browser = base64URL(randomBytes(24))
        let entry = PendingSignIn(
            verifier: verifier, returnTo: returnTo, browserDigest: Array(SHA256.hash(data: Array(browser.utf8))),
            expires: now + lifetime)
        let stored = table.withLock { t -> Bool in
            if t.count >= capacity { t = t.filter { $0.value.expires > now } }
            guard t.count < capacity else { return false }
            t[state] = entry
            return true
        }
        return stored ? (state, browser) : nil
    }

    /// Takes the sign-in `state` names, if it is still good and `browser` is the binding it was given;
    /// it is gone afterwards either way (a replay finds nothing).
    public func take(state: String, browser: String?, now: Double) -> PendingSignIn? {
        guard let entry = table.withLock({ $0.removeValue(forKey: state) }) else { return nil }
        guard entry.expires > now, let browser,
            Array(SHA256.hash(data: Array(browser.utf8))) == entry.browserDigest
        else { return nil }
        return entry
    }

    /// Sign-ins under way (expired ones included until the table is swept).
    public var count: Int { table.withLock { $0.count } }

    /// A fresh `state` and browser binding, for a table kept elsewhere (a cluster's Redis) by the same
    /// rules: each at least 128 random bits.
    public static func freshPair() -> (state: String, browser: String) {
        (base64URL(randomBytes(24)), base64URL(randomBytes(24)))
    }

    /// The digest a browser binding is kept as (hex), never the binding itself.
    public static func digest(ofBrowser browser: String) -> String {
        Array(SHA256.hash(data: Array(browser.utf8))).map { b in
            let h = Array("0123456789abcdef".utf8)
            return String(decoding: [h[Int(b >> 4)], h[Int(b & 15)]], as: UTF8.self)
        }.joined()
    }
}

func randomBytes(_ n: Int) -> [UInt8] {
    var g = SystemRandomNumberGenerator()
    return (0..<n).map { _ in UInt8.random(in: 0...255, using: &g) }
}

func base64URL(_ bytes: [UInt8]) -> String {
    Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
        .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
}
