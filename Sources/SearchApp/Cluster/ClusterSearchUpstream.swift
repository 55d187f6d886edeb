import BFF
import ClusterStore
import EventHTTP
import Foundation
import GitHubLive
import GitHubSearch
import Logging
import Primitives

/// Cluster mode's shared search cache, layered *under* each node's `SearchCache` (which keeps its
/// memory/SQLite entries, single flight within the node, stale-while-revalidate and stale-if-error):
/// the node's cache calls this instead of the gateway, and this asks the cluster's
/// `SharedSearchCache` (`getOrFill`: a fresh entry any node stored is returned without calling
/// GitHub; otherwise one caller cluster-wide takes the lock and calls the gateway, the others wait
/// for its wake-up and read its answer). Identical concurrent misses on N nodes cost one call.
///
/// - Pages are stored as JSON `{page, etag}`; a shared entry is fresh for the node cache's `ttl`.
/// - Revalidation: an expired shared entry is fetched with its own `ETag` (`If-None-Match`); GitHub's
///   `304` stores it again as fresh. The node's own `ETag` is compared with the shared entry's: equal
///   means `notModified` for the node (its page is the shared one), so nothing is decoded or sent twice.
/// - A failed call is thrown as is (the node's cache serves its own stale entry); the shared stale
///   entry is not returned as if fresh.
/// - Redis unreachable: the gateway is called directly (single flight degrades to per node).
/// - Whether GitHub was called for an answer is remembered per key (`answeredFromSharedEntry`), so the
///   node's `X-Cache` can say `hit` for a page another node fetched (`ClusterCacheLabel`).
final class ClusterSearchUpstream: ConditionalRepositorySearching, UpstreamBudgetReporting {
    struct Stored: Codable {
        var page: SearchPage
        var etag: String?
    }

    /// The application's gateway, or a signed-in person's (`PersonalGateways` picks by the task's person).
    let gateway: PersonalGateways
    let ttl: Double
    let waitTimeout: Double
    let logger: Logger
    /// The shared cache and this node's lock-holder name, set once the application (which owns the
    /// Redis connections) exists; until then the gateway is called directly.
    private let target = Lock<(cache: any SharedSearchCache, holder: String, metrics: ClusterMetrics?)?>(nil)
    /// Per key (the node cache's): true when the latest fetch was answered by a fresh shared entry that
    /// another node (or an earlier call) stored — GitHub was not called for it; false when it was.
    private let fromSharedEntry = Lock<[String: Bool]>([:])

    init(gateway: PersonalGateways, ttl: Double, logger: Logger) {
        self.gateway = gateway
        self.ttl = ttl
        self.logger = logger
        waitTimeout = gateway.app.configuration.requestTimeout + 2
    }

    func connect(_ cache: any SharedSearchCache, holder: String, metrics: ClusterMetrics? = nil) {
        target.withLock { $0 = (cache, holder, metrics) }
    }

    func limitedNow() async -> SearchError? { await gateway.limitedNow() }

    func search(_ request: SearchRequest, policy: CachePolicy) async throws(SearchError) -> SearchResponse {
        switch try await fetch(request, ifNoneMatch: nil) {
        case .modified(let page, _): return SearchResponse(page: page, cache: .miss)
        case .notModified: throw SearchError.upstream(message: "GitHub answered 304 to an unconditional request.")
        }
    }

    /// True when the latest fetch of `request` was answered by an entry already in the shared cache, with
    /// no call to GitHub for it (any thread; `ClusterCacheLabel` asks once the node cache answered).
    func answeredFromSharedEntry(_ request: SearchRequest) -> Bool {
        fromSharedEntry.withLock { $0[Self.key(request)] ?? false }
    }

    private func remember(_ key: String, fromSharedEntry: Bool) {
        self.fromSharedEntry.withLock { all in
            if all.count >= 4096 { all.removeAll(keepingCapacity: true) }  // bounded; a lost entry reads as a call
            all[key] = fromSharedEntry
        }
    }

    func fetch(_ request: SearchRequest, ifNoneMatch etag: String?) async throws(SearchError) -> ConditionalFetch {
        let key = Self.key(request)
        guard !request.isPastResultCap, let (shared, holder, metrics) = target.withLock({ $0 }) else {
            remember(key, fromSharedEntry: false)
            return try await gateway.fetch(request, ifNoneMatch: etag)
        }
        let failure = Lock<SearchError?>(nil)
        let gateway = self.gateway
        do {
            let (entry, outcome) = try await shared.getOrFill(
                key, holder: holder, freshFor: ttl, waitTimeout: waitTimeout
            ) { (expired: CachedPage?) async throws -> [UInt8] in
                // The expired shared entry is revalidated with its own ETag: a 304 stores it again.
                let old = expired.flatMap { try? JSONDecoder().decode(Stored.self, from: Data($0.payload)) }
                let fetched: ConditionalFetch
                do throws(SearchError) {
                    fetched = try await gateway.fetch(request, ifNoneMatch: old?.etag)
                } catch {
                    failure.withLock { $0 = error }
                    throw error
                }
                switch fetched {
                case .modified(let page, let etag):
                    return Array(try JSONEncoder().encode(Stored(page: page, etag: etag)))
                case .notModified:
                    guard let expired, old?.etag != nil else {
                        let error = SearchError.upstream(message: "GitHub answered 304 to an unconditional request.")
                        failure.withLock { $0 = error }
                        throw error
                    }
                    return expired.payload
                }
            }
            metrics?.searchCache(Self.label(outcome))
            // `filledByOther`: an identical request in flight (on any node) called GitHub and this one
            // waited for it — a `miss`, as the contract says; `hit`: stored earlier, GitHub not called.
            remember(key, fromSharedEntry: outcome == .hit)
            if outcome == .stale, let error = failure.withLock({ $0 }) { throw error }
            let stored = try JSONDecoder().decode(Stored.self, from: Data(entry.payload))
            // The node revalidates the page the shared entry holds: nothing to send again.
            if let etag, stored.etag == etag { return .notModified }
            return .modified(stored.page, etag: stored.etag)
        } catch {
            remember(key, fromSharedEntry: false)
            if let error = failure.withLock({ $0 }) {
                metrics?.searchCache("miss")  // called upstream, which failed, and nothing stale to serve
                throw error
            }
            if let error = error as? SearchError { throw error }
            metrics?.searchCache("unavailable")
            // The shared cache failed (Redis), not GitHub: fall back to this node's own call.
            logger.warning("shared search cache unavailable; calling GitHub directly", metadata: ["error": "\(error)"])
            return try await gateway.fetch(request, ifNoneMatch: etag)
        }
    }

    /// The `outcome` label of `bff_cluster_search_cache_total` for a `getOrFill` outcome.
    static func label(_ o: ClusterStore.CacheOutcome) -> String {
        switch o {
        case .hit: return "hit"
        case .filled: return "miss"
        case .filledByOther: return "waited"
        case .lockTimedOut: return "lock_timeout"
        case .stale: return "stale"
        }
    }

    /// The shared key: the node cache's own key (the request's normalized form, the same on every node).
    static func key(_ r: SearchRequest) -> String { SearchCache<GitHubGateway>.key(r) }
}
