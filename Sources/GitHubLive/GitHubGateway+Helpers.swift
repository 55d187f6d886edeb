import Foundation
import GitHubSearch

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The result of a conditional fetch.
public enum ConditionalFetch: Sendable, Equatable {
    /// A new page, with the `ETag` GitHub sent for it, if any.
    case modified(SearchPage, etag: String?)
    /// GitHub answered `304 Not Modified` to `If-None-Match`.
    case notModified
}

/// A search that can revalidate with an `ETag` (the live gateway). `SearchCache` uses it when
/// the wrapped search conforms; other searches are simply called again.
public protocol ConditionalRepositorySearching: RepositorySearching {
    /// Fetches `request` from upstream, sending `If-None-Match: etag` when `etag` is non-nil.
    func fetch(_ request: SearchRequest, ifNoneMatch etag: String?) async throws(SearchError) -> ConditionalFetch
}

/// The system's wall clock.
public struct SystemWallClock: WallClock {
    /// Creates the clock.
    public init() {}
    /// Seconds since 1970.
    public func now() -> Double { Date().timeIntervalSince1970 }
}

extension GitHubGateway {
    /// RFC 3986 unreserved characters pass; everything else (including `+`, `&`, `=`, `:`) is encoded,
    /// as UTF-8 bytes with upper-case hex (Foundation's `addingPercentEncoding`).
    static func percentEncode(_ s: String) -> String {
        s.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    /// RFC 3986 §2.3's unreserved characters.
    private static let unreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    static func lowercasedHeaders(_ response: HTTPURLResponse) -> [String: String] {
        var headers: [String: String] = [:]
        for (key, value) in response.allHeaderFields {
            guard let k = key as? String, let v = value as? String else { continue }
            headers[k.lowercased()] = v
        }
        return headers
    }

    /// A human sentence for a transport failure (never includes the URL or headers).
    static func unreachableMessage(_ error: any Error, timeout: Double) -> String {
        guard let urlError = error as? URLError else {
            if error is CancellationError { return "The GitHub request was cancelled." }
            return "GitHub could not be reached."
        }
        switch urlError.code {
        case .timedOut:
            return "GitHub did not answer in time (\(Int(timeout)) s)."
        case .cannotFindHost, .dnsLookupFailed:
            return "GitHub could not be reached (host not found)."
        case .cannotConnectToHost:
            return "GitHub could not be reached (connection refused)."
        case .networkConnectionLost:
            return "The connection to GitHub was lost."
        case .notConnectedToInternet:
            return "GitHub could not be reached (no network)."
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
            .serverCertificateNotYetValid, .serverCertificateHasUnknownRoot, .clientCertificateRejected:
            return "GitHub could not be reached securely (TLS failure)."
        case .cancelled:
            return "The GitHub request was cancelled."
        default:
            return "GitHub could not be reached (error \(urlError.code.rawValue))."
        }
    }
}
