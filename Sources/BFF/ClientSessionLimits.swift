import EventHTTP
import Primitives

/// Per-client limits on sessions (the contract's "Fair use"): how fast a client may create them (a token
/// bucket: `--client-session-rate` a second, `--client-session-burst` at once) and how many it may hold
/// (`--max-sessions-per-client`). A client is `HTTPRequest.client`: its address, or the one a trusted
/// proxy forwarded for.
///
/// Bounded: at most `maxClients` entries. An entry with no live session whose bucket has refilled is
/// idle and may be dropped (it would be recreated as it is). When the table is full of entries that are
/// not idle, a client it does not hold yet is counted under one shared overflow entry: a flood of
/// rotating addresses then limits itself (it shares one bucket and one count), while every client
/// already in the table keeps its own limits. Entries with live sessions are at most `--max-sessions`.
///
/// Threading: any thread; sixteen locks, picked by the address's hash.
final class ClientSessionLimits: Sendable {
    /// Creations a second, the burst on top, live sessions; per client.
    struct Limits: Sendable {
        var ratePerSecond: Double
        var burst: Double
        var maxLive: Int
        var maxClients: Int
    }

    /// Why a creation was refused.
    enum Refusal: Error, Equatable, Sendable {
        /// The client's creations came faster than the rate: retry after this many whole seconds.
        case rate(retryAfterSeconds: Int)
        /// The client holds its maximum of live sessions.
        case live(Int)
    }

    private struct Entry {
        var bucket: TokenBucketLevel
        var live: Int
    }

    /// The key untracked clients share once the table is full.
    static let overflow = ClientAddress(high: ~0, low: ~0)

    let limits: Limits
    private let shards: [Lock<[ClientAddress: Entry]>] = (0..<16).map { _ in Lock([:]) }

    init(limits: Limits) { self.limits = limits }

    private func shard(_ a: ClientAddress) -> Lock<[ClientAddress: Entry]> {
        shards[Int(truncatingIfNeeded: ((a.low ^ a.high) &* 0x9E37_79B9_7F4A_7C15) >> 60)]
    }

    /// Takes one creation of `client` at `now` (seconds): nil when allowed (its live count is then one
    /// more, until `released`), else why not. Returns the key the session is counted under (the client,
    /// or the overflow entry).
    func reserve(_ client: ClientAddress, now: Double) -> Result<ClientAddress, Refusal> {
        var key = client
        if !isTracked(client) && !makeRoom(for: client, now: now) { key = Self.overflow }
        return shard(key).withLock { table in
            var e = table[key] ?? Entry(bucket: TokenBucketLevel(tokens: limits.burst, at: now), live: 0)
            e.bucket.refill(to: now, capacity: limits.burst, ratePerUnit: limits.ratePerSecond)
            guard e.live < limits.maxLive else {
                table[key] = e
                return .failure(.live(limits.maxLive))
            }
            guard e.bucket.tokens >= 1 else {
                table[key] = e
                let wait = (1 - e.bucket.tokens) / limits.ratePerSecond
                return .failure(.rate(retryAfterSeconds: max(1, Int(wait.rounded(.up)))))
            }
            e.bucket.tokens -= 1
            e.live += 1
            table[key] = e
            return .success(key)
        }
    }

    /// A session counted under `key` (what `reserve` returned) ended.
    func released(_ key: ClientAddress) {
        shard(key).withLock { table in
            guard var e = table[key] else { return }
            e.live = max(0, e.live - 1)
            table[key] = e
        }
    }

    /// Live sessions counted under `client` now.
    func live(_ client: ClientAddress) -> Int { shard(client).withLock { $0[client]?.live ?? 0 } }

    /// Entries held (overflow included).
    var count: Int { shards.reduce(0) { n, s in n + s.withLock { $0.count } } }

    private func isTracked(_ a: ClientAddress) -> Bool { shard(a).withLock { $0[a] != nil } }

    /// True when `client`'s shard may take one more entry, dropping its idle entries if it must.
    private func makeRoom(for client: ClientAddress, now: Double) -> Bool {
        let perShard = max(1, limits.maxClients / shards.count)
        return shard(client).withLock { table in
            if table.count < perShard { return true }
            let (burst, rate) = (limits.burst, limits.ratePerSecond)
            table = table.filter { key, e in
                guard e.live == 0, key != Self.overflow else { return true }
                var b = e.bucket
                b.refill(to: now, capacity: burst, ratePerUnit: rate)
                return b.tokens < burst  // still refilling: keep (dropping it would forgive its creations)
            }
            return table.count < perShard
        }
    }
}
