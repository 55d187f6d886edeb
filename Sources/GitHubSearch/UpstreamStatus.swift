/// GitHub's rate limit as last reported by its `X-RateLimit-*` headers.
public struct RateLimit: Sendable, Equatable, Codable {
    public var limit: Int
    public var remaining: Int
    /// When the window resets, in seconds since 1970 (UTC).
    public var resetAt: Int
    /// `X-RateLimit-Resource`, e.g. `search`.
    public var resource: String?

    /// The stored names; explicit so a rename cannot change them.
    enum CodingKeys: String, CodingKey {
        case limit, remaining, resetAt, resource
    }

    public init(limit: Int, remaining: Int, resetAt: Int, resource: String? = nil) {
        self.limit = limit
        self.remaining = remaining
        self.resetAt = resetAt
        self.resource = resource
    }
}

/// What the app knows about GitHub's reachability: feeds the shared `status` view model.
/// `Codable` for the `status` view model's durable state.
public struct UpstreamStatus: Sendable, Equatable, Codable {
    public var reachable: Bool
    /// A human sentence when GitHub cannot be reached or the rate limit is exhausted, else nil.
    public var message: String?
    public var rateLimit: RateLimit?
    /// When set, the app refuses to search GitHub until this time (seconds since 1970, UTC) because a
    /// rate limit is in force; every session's `search` view model follows it (`searchEnabled` false,
    /// `retryAt`). Not an output of the `status` view model.
    public var blockedUntil: Int?

    /// The stored names; explicit so a rename cannot change them.
    enum CodingKeys: String, CodingKey {
        case reachable, message, rateLimit, blockedUntil
    }

    public init(reachable: Bool = true, message: String? = nil, rateLimit: RateLimit? = nil, blockedUntil: Int? = nil) {
        self.reachable = reachable
        self.message = message
        self.rateLimit = rateLimit
        self.blockedUntil = blockedUntil
    }
}

/// Wall-clock time in seconds since 1970, injected so cache and rate-limit logic can be tested
/// with a manual clock.
public protocol WallClock: Sendable {
    /// The current time, seconds since 1970 (UTC).
    func now() -> Double
}
