/// Why a search failed, in the terms the user sees (the `search` view model's `error.kind`).
public enum SearchError: Error, Sendable, Equatable {
    /// GitHub rejected the query (HTTP 422): the message says why.
    case invalidQuery(message: String)
    /// A primary or secondary rate limit is in force; no upstream call until it lifts.
    case rateLimited(retryAfterSeconds: Int, message: String)
    /// GitHub could not be reached (connection, time-out, DNS) and nothing usable is cached.
    case unavailable(message: String)
    /// GitHub answered with an unexpected status or a body that could not be decoded.
    case upstream(message: String)

    /// The contract's `kind` string.
    public var kind: String {
        switch self {
        case .invalidQuery: return "invalidQuery"
        case .rateLimited: return "rateLimited"
        case .unavailable: return "unavailable"
        case .upstream: return "upstream"
        }
    }

    /// A human sentence for the user.
    public var message: String {
        switch self {
        case .invalidQuery(let m), .rateLimited(_, let m), .unavailable(let m), .upstream(let m): return m
        }
    }

    /// Seconds until a retry can succeed, for rate limits.
    public var retryAfterSeconds: Int? {
        if case .rateLimited(let s, _) = self { return s }
        return nil
    }
}

extension SearchError {
    /// The error a search throws when its task was cancelled before GitHub was called (a superseded
    /// search, an ended session). Nobody shows it: the view model drops a cancelled effect's result.
    /// Reported as `unavailable` so that code switching over the kinds needs no new case.
    public static let cancelled = SearchError.unavailable(message: "The search was cancelled before it was sent.")
}
