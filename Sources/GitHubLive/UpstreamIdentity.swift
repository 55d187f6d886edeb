import Crypto
import Foundation

/// Which upstream a cached search page came from: GitHub's base URL and the token it was asked with
/// (GitHub answers differently with a token, and a token sees private repositories). A cached page is
/// valid only for the identity it was fetched for: the SQLite file records it and is not read by a
/// process with another one, and the shared Redis cache keys its entries by it. So a page from the
/// simulator (`run.sh --demo`) is never served as GitHub's, nor an anonymous page as a token's.
///
/// The token itself is never stored or shown: `key` is a digest of the base URL and the token, and
/// `description` only says whether a token is used. A value; any thread.
public struct UpstreamIdentity: Sendable, Equatable, CustomStringConvertible {
    /// 16 hex digits of SHA-256("bff-upstream-v1\n<base URL without trailing slashes>\n<token or nothing>").
    public let key: String
    /// For logs: "https://api.github.com (token: yes)".
    public let description: String

    /// The identity of `baseURL` asked with `token` (nil or empty: no token).
    public init(baseURL: String, token: String?) {
        var url = Substring(baseURL)
        while url.hasSuffix("/") { url = url.dropLast() }
        let token = token ?? ""
        let digest = SHA256.hash(data: Array("bff-upstream-v1\n\(url)\n\(token)".utf8))
        key = String(digest.map { String(format: "%02x", $0) }.joined().prefix(16))
        description = "\(UpstreamIdentity.withoutUserinfo(url)) (token: \(token.isEmpty ? "no" : "yes"))"
    }

    /// `scheme://user:password@host/…` shown as `scheme://…@host/…` (a base URL may carry credentials too).
    private static func withoutUserinfo(_ url: Substring) -> Substring {
        guard let scheme = url.range(of: "://") else { return url }
        let authority = url[scheme.upperBound...].prefix { $0 != "/" }
        guard let at = authority.lastIndex(of: "@") else { return url }
        return url[..<scheme.upperBound] + "…" + url[at...]
    }
}
