import GitHubSearch
import Logging
import Primitives

/// Whose token a call to GitHub goes out with: the application's gateway (`GITHUB_TOKEN`, shared fairly
/// between clients) for anonymous work, or, when the task works for a signed-in person
/// (`UpstreamPerson.current`), that person's own gateway: their token, their own rate limiter, so their
/// rate limit holds back only them. It sits under the search cache, so a cached answer, or one joined
/// in flight, costs nobody's budget and everyone shares the cache (sign-in asks for no scope: every
/// result is public).
///
/// A person's gateway is made on their first uncached search from the token `tokens` gives for their
/// login key, and kept in a bounded table (`capacity`; the least recently used goes first: it only loses
/// what its limiter had learnt, which GitHub's next answer teaches again). It shares the application
/// gateway's connections. A `401` for a person's token (revoked at GitHub) is reported to `onRejected`
/// and the gateway forgotten. Thread-safe.
public final class PersonalGateways: ConditionalRepositorySearching {
    /// The application's gateway, for everything not done for a signed-in person.
    public let app: GitHubGateway
    /// Most persons' gateways kept at once.
    public let capacity: Int
    private let tokens: @Sendable (String) async -> String?
    private let onStatus: @Sendable (String, UpstreamStatus) -> Void
    private let onRejected: @Sendable (String) -> Void
    private let logger: Logger
    private struct Entry {
        let gateway: GitHubGateway
        var lastUse: UInt64
    }
    private let table = Lock<(entries: [String: Entry], clock: UInt64)>(([:], 0))

    /// - Parameters:
    ///   - tokens: the token of the login a key names (nil: no such login any more).
    ///   - onStatus: a person's budget as GitHub reports it (to show it in their sessions only).
    ///   - onRejected: GitHub refused a person's token (`401`): their login should end.
    public init(
        app: GitHubGateway, capacity: Int = 1000, logger: Logger,
        tokens: @escaping @Sendable (String) async -> String? = { _ in nil },
        onStatus: @escaping @Sendable (String, UpstreamStatus) -> Void = { _, _ in },
        onRejected: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.app = app
        self.capacity = max(1, capacity)
        self.tokens = tokens
        self.onStatus = onStatus
        self.onRejected = onRejected
        self.logger = logger
    }

    public func search(_ request: SearchRequest, policy: CachePolicy) async throws(SearchError) -> SearchResponse {
        guard let key = UpstreamPerson.current else { return try await app.search(request, policy: policy) }
        return try await gateway(for: key).search(request, policy: policy)
    }

    public func fetch(_ request: SearchRequest, ifNoneMatch etag: String?) async throws(SearchError) -> ConditionalFetch
    {
        guard let key = UpstreamPerson.current else { return try await app.fetch(request, ifNoneMatch: etag) }
        return try await gateway(for: key).fetch(request, ifNoneMatch: etag)
    }

    /// Forgets a person's gateway (they signed out).
    public func forget(_ key: String) { _ = table.withLock { $0.entries.removeValue(forKey: key) } }

    /// Persons' gateways kept now.
    public var count: Int { table.withLock { $0.entries.count } }

    /// The person's gateway, made from their token on first use.
    private func gateway(for key: String) async throws(SearchError) -> GitHubGateway {
        if let gw = table.withLock({ t -> GitHubGateway? in
            t.clock &+= 1
            guard t.entries[key] != nil else { return nil }
            t.entries[key]!.lastUse = t.clock
            return t.entries[key]!.gateway
        }) {
            return gw
        }
        guard let token = await tokens(key) else {
            throw SearchError.upstream(message: "Your sign-in has ended; sign in again to search.")
        }
        var c = app.configuration
        c.token = token
        c.unauthorizedHint = "sign in again"
        // The person alone spends their budget: no share to keep for other clients.
        c.rateLimiter.clientShare = 1
        c.rateLimiter.publishesRepeats = false
        let (onStatus, onRejected) = (self.onStatus, self.onRejected)
        let made: GitHubGateway
        do {
            made = try GitHubGateway(
                configuration: c, logger: logger, onStatus: { onStatus(key, $0) },
                onUnauthorized: { [weak self] in
                    self?.forget(key)
                    onRejected(key)
                }, sharingConnectionsOf: app)
        } catch {
            throw SearchError.upstream(message: "GitHub's URL is invalid.")  // the app's own URL: not reached
        }
        return table.withLock { t in
            if let raced = t.entries[key] { return raced.gateway }
            if t.entries.count >= capacity, let oldest = t.entries.min(by: { $0.value.lastUse < $1.value.lastUse }) {
                t.entries.removeValue(forKey: oldest.key)
            }
            t.entries[key] = Entry(gateway: made, lastUse: t.clock)
            return made
        }
    }
}

extension PersonalGateways: UpstreamBudgetReporting {
    /// The limit in force for whoever the current task works for: a signed-in person's own, else the
    /// application's (the cache serves a stale page at once while it holds).
    public func limitedNow() async -> SearchError? {
        if let key = UpstreamPerson.current {
            guard let gw = table.withLock({ $0.entries[key]?.gateway }) else { return nil }
            return await gw.limitedNow()
        }
        return await app.limitedNow()
    }
}
