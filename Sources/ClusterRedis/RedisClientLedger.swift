import ClusterStore
import RedisClient

/// Per-client session limits counted across the cluster (the contract's "Fair use" in cluster mode):
/// each client's creations a second (a token bucket) and live sessions (a sorted set of its sessions, each
/// counted until a deadline its node keeps pushing forward) in Redis, so a client whose requests a load
/// balancer spreads over N nodes gets its limits once, not N times. Keys in `ClusterKeys.clientBucket`
/// and `clientSessions` (one hash tag per client: one slot); scripts in `ClientLedgerScripts`.
///
/// A session is counted from its creation until it ends where it was created (`release`), or until its
/// deadline passes without a `refresh` — its node died, or it moved to another node, which does not count
/// it (the client was charged where it was created). So a dead node's sessions stop counting within
/// `Limits.countedMilliseconds`, and nothing a client did stays in Redis longer than that.
///
/// Threading: bound to its client's loop; call it there, completions run there. One round trip per
/// creation and per end; refreshes one call per master per batch of clients.
public final class RedisClientLedger: Sendable {
    /// The limits, the same on every node.
    public struct Limits: Sendable, Equatable {
        public var ratePerSecond: Double
        public var burst: Double
        public var maxLive: Int
        /// How long a session counts after its creation or last refresh (refresh well within it).
        public var countedMilliseconds: Int

        public init(ratePerSecond: Double, burst: Double, maxLive: Int, countedMilliseconds: Int) {
            self.ratePerSecond = max(0.001, ratePerSecond)
            self.burst = max(1, burst)
            self.maxLive = max(1, maxLive)
            self.countedMilliseconds = max(1000, countedMilliseconds)
        }
    }

    /// The answer to `reserve`.
    public enum Decision: Sendable, Equatable {
        /// Counted: the client now has `live` sessions across the cluster.
        case allowed(live: Int)
        /// The client's creations came faster than its rate: one more is possible in this many ms.
        case rate(retryAfterMilliseconds: Int)
        /// The client holds its maximum of live sessions across the cluster.
        case live(max: Int)
    }

    /// The loop-bound client used.
    public let client: RedisClient
    public let keys: ClusterKeys
    public let limits: Limits

    /// Clients one `refresh` call carries at most.
    static let refreshBatch = 128

    public init(client: RedisClient, keys: ClusterKeys, limits: Limits) {
        self.client = client
        self.keys = keys
        self.limits = limits
        client.preload(ClientLedgerScripts.all)
    }

    /// Takes one creation of `clientID` for session `sessionID` and counts the session, if the client's
    /// limits allow it.
    public func reserve(
        client clientID: String, session sessionID: String,
        _ completion: @escaping (Result<Decision, StoreError>) -> Void
    ) {
        let args = [
            RedisArg(limits.ratePerSecond), RedisArg(limits.burst), RedisArg(limits.maxLive), RedisArg(sessionID),
            RedisArg(limits.countedMilliseconds),
        ]
        client.evalScript(
            ClientLedgerScripts.reserve,
            keys: [RedisArg(keys.clientBucket(clientID)), RedisArg(keys.clientSessions(clientID))], args: args
        ) { r in
            completion(
                r.store { v -> Decision? in
                    guard let a = v.array, a.count == 2, let code = a[0].int, let n = a[1].int else { return nil }
                    switch code {
                    case 0: return .allowed(live: Int(n))
                    case 1: return .rate(retryAfterMilliseconds: Int(n))
                    case 2: return .live(max: Int(n))
                    default: return nil
                    }
                })
        }
    }

    /// Session `sessionID` of `clientID` ended: it no longer counts.
    public func release(
        client clientID: String, session sessionID: String,
        _ completion: @escaping (Result<Void, StoreError>) -> Void = { _ in }
    ) {
        let key = RedisArg(keys.clientSessions(clientID))
        client.send(["ZREM", key, RedisArg(sessionID)], key: key) { r in
            completion(r.store { _ in () })
        }
    }

    /// Keeps counting the sessions still live here, per client: one call per master (on a Redis Cluster the
    /// clients are grouped by the master of their slot), at most `refreshBatch` clients each; a batch Redis
    /// redirects (the map was out of date) is sent again one client at a time.
    public func refresh(
        _ sessions: [(client: String, sessions: [String])], _ completion: @escaping (Result<Void, StoreError>) -> Void
    ) {
        let live = sessions.filter { !$0.sessions.isEmpty }
        let groups = client.groupedByMaster(live) { RedisArg(keys.clientSessions($0.client)) }
        var calls: [[(client: String, sessions: [String])]] = []
        for g in groups {
            for start in stride(from: 0, to: g.count, by: Self.refreshBatch) {
                calls.append(Array(g[start..<min(start + Self.refreshBatch, g.count)]))
            }
        }
        guard !calls.isEmpty else { return completion(.success(())) }
        var left = calls.count
        var failure: StoreError?
        for batch in calls {
            refreshNow(batch, splitOnRedirect: true) { r in
                if case .failure(let e) = r { failure = e }
                left -= 1
                if left == 0 { completion(failure.map { .failure($0) } ?? .success(())) }
            }
        }
    }

    private func refreshNow(
        _ batch: [(client: String, sessions: [String])], splitOnRedirect: Bool,
        _ completion: @escaping (Result<Void, StoreError>) -> Void
    ) {
        var args = [RedisArg(limits.countedMilliseconds)]
        for entry in batch {
            args.append(RedisArg(entry.sessions.count))
            args += entry.sessions.map { RedisArg($0) }
        }
        client.evalScript(
            ClientLedgerScripts.refresh, keys: batch.map { RedisArg(keys.clientSessions($0.client)) }, args: args
        ) { [self] r in
            if splitOnRedirect, batch.count > 1, case .failure(let e) = r, e.isSlotRedirect {
                var left = batch.count
                var failure: StoreError?
                for entry in batch {
                    refreshNow([entry], splitOnRedirect: false) { r in
                        if case .failure(let e) = r { failure = e }
                        left -= 1
                        if left == 0 { completion(failure.map { .failure($0) } ?? .success(())) }
                    }
                }
                return
            }
            completion(r.store { _ in () })
        }
    }
}
