import ClusterStore
import EventLoop
import RedisClient

/// `SharedSearchCache` in Redis: entries with Redis-clock ages, a `SET NX PX` single-flight lock,
/// and wake-ups through one `PSUBSCRIBE` per node on the cache's wake channels (see
/// `CacheScripts`, `ClusterKeys`). An entry and its lock share a hash tag (`{key}`: one slot, so the
/// fill script may touch both on a cluster). Wake-ups stay classic pub/sub: they are rare (at most one
/// per upstream call, which GitHub caps at 30 a minute), a waiter needs no subscription of its own
/// before it waits (one pattern covers every key), and sharded pub/sub has no patterns; on a cluster
/// every Redis node relays them, which at that rate costs nothing.
///
/// Entries are scoped by `upstream` (an `UpstreamIdentity.key` in cluster mode: GitHub's base URL and
/// token, digested): the key `k` of `get`/`fill`/`lock`/`unlock`/`waitForUnlock` is stored as
/// `<prefix>:c:{<upstream>|k}`, so nodes asking another upstream (the simulator, another token) neither
/// read nor wait for each other's pages.
///
/// Threading: `Sendable`; the async methods hop to the loop of `client` and `subscriber`
/// (both must be on the same loop), where all of this object's state lives.
/// While the subscriber is down, `waitForUnlock` returns false at once (callers then fetch
/// themselves after a few rounds: single flight degrades, nothing hangs).
public final class RedisSearchCache: SharedSearchCache, Sendable {
    /// Bounds and time-outs of the cache.
    public struct Limits: Sendable, Equatable {
        /// Entries expire this many seconds after being stored (`--cache-max-age`).
        public var maxAge: Double = 86_400
        /// A lock expires after this many seconds (a holder that died releases it this way).
        public var lockTTL: Double = 15
        /// Largest entry stored, in bytes.
        public var maxEntryBytes: Int = 1 << 20

        /// The defaults, overridden where given.
        public init(maxAge: Double = 86_400, lockTTL: Double = 15) {
            self.maxAge = maxAge
            self.lockTTL = lockTTL
        }
    }

    /// The command client.
    public let client: RedisClient
    /// The subscriber receiving wake-ups.
    public let subscriber: RedisShardedSubscriber
    /// The bounds applied.
    public let limits: Limits
    /// The upstream every entry here belongs to ("" for none).
    public let upstream: String
    private let keys: ClusterKeys
    private var loop: EventLoop { client.loop }
    /// The callers waiting for a wake-up (the loop's only).
    private struct Waiting {
        var waiters: [String: [UInt: (Bool) -> Void]] = [:]
        var nextWaiter: UInt = 0
    }
    private let waiting: LoopBound<Waiting>

    /// A cache on `client` and `subscriber` (same loop) under `keys`, for pages of `upstream`.
    public init(
        client: RedisClient, subscriber: RedisShardedSubscriber, limits: Limits = Limits(), keys: ClusterKeys,
        upstream: String = ""
    ) {
        precondition(client.loop === subscriber.loop, "one loop for both")
        self.client = client
        self.subscriber = subscriber
        self.limits = limits
        self.keys = keys
        self.upstream = upstream
        waiting = LoopBound(Waiting(), loop: client.loop)
    }

    /// The key `key` of this cache's upstream, as stored in Redis (and in its wake channel).
    private func scoped(_ key: String) -> String { upstream.isEmpty ? key : "\(upstream)|\(key)" }

    /// Subscribes to the wake channels (call once, on the loop, before using the cache);
    /// `onSubscribed` runs each time the subscription becomes active.
    public func start(onSubscribed: (() -> Void)? = nil) {
        let prefix = keys.cacheWake("")
        let confirmed: () -> Void = { onSubscribed?() }
        let received: (RedisMessage) -> Void = { [weak self] message in
            self?.wake(String(message.channel.dropFirst(prefix.count)), released: true)
        }
        subscriber.psubscribe(pattern: keys.cacheWakePattern, onSubscribed: confirmed, received)
    }

    private func onLoop<T: Sendable>(_ body: @escaping @Sendable (@escaping (T) -> Void) -> Void) async -> T {
        await withCheckedContinuation { k in
            loop.execute { body { k.resume(returning: $0) } }
        }
    }

    private func eval(_ script: RedisScript, _ keys: [String], _ args: [RedisArg]) async -> Result<
        RESPValue, RedisError
    > {
        await client.evalScript(script, keys: keys.map { RedisArg($0) }, args: args)
    }

    public func get(_ key: String) async -> Result<CachedPage?, StoreError> {
        let key = scoped(key)
        return await eval(CacheScripts.get, [keys.cacheEntry(key)], []).store { v -> CachedPage?? in
            if v.isNull { return .some(nil) }
            guard let a = v.array, a.count == 2, let payload = a[0].bytes, let age = a[1].int else { return nil }
            return .some(CachedPage(payload: payload, age: Double(age) / 1000))
        }
    }

    public func fill(_ key: String, payload: [UInt8], holder: String) async -> Result<Void, StoreError> {
        guard payload.count <= limits.maxEntryBytes else {
            _ = await unlock(key, holder: holder)
            return .failure(.tooLarge(payload.count))
        }
        let key = scoped(key)
        let args = [
            RedisArg(bytes: payload), RedisArg(Int(limits.maxAge * 1000)), RedisArg(holder),
            RedisArg(keys.cacheWake(key)),
        ]
        return await eval(CacheScripts.fill, [keys.cacheEntry(key), keys.cacheLock(key)], args).store { _ in () }
    }

    public func lock(_ key: String, holder: String) async -> Result<Bool, StoreError> {
        let key = scoped(key)
        let command: [RedisArg] = [
            "SET", RedisArg(keys.cacheLock(key)), RedisArg(holder), "NX", "PX", RedisArg(Int(limits.lockTTL * 1000)),
        ]
        return await client.send(command, key: RedisArg(keys.cacheLock(key))).store { v in v.isNull ? false : true }
    }

    public func unlock(_ key: String, holder: String) async -> Result<Void, StoreError> {
        let key = scoped(key)
        return await eval(
            CacheScripts.unlock, [keys.cacheLock(key)], [RedisArg(holder), RedisArg(keys.cacheWake(key))]
        )
        .store { _ in () }
    }

    public func waitForUnlock(_ key: String, timeout: Double) async -> Bool {
        let key = scoped(key)  // as the wake channel names it
        return await onLoop { [self] done in
            guard subscriber.isConfirmed(pattern: keys.cacheWakePattern) else { return done(false) }
            let id = waiting.value.nextWaiter
            waiting.value.nextWaiter &+= 1
            waiting.value.waiters[key, default: [:]][id] = done
            // Registered first, then checked: a release after this check publishes a wake-up we
            // receive; a release before it shows here as a missing lock.
            let lock = RedisArg(keys.cacheLock(key))
            client.send(["EXISTS", lock], key: lock) { [self] r in
                if case .success(.integer(0)) = r { resolve(key, id, true) }
                if case .failure = r { resolve(key, id, false) }
            }
            loop.schedule(after: timeout) { [self] in resolve(key, id, false) }
        }
    }

    private func resolve(_ key: String, _ id: UInt, _ released: Bool) {
        guard let done = waiting.value.waiters[key]?.removeValue(forKey: id) else { return }
        if waiting.value.waiters[key]?.isEmpty == true { waiting.value.waiters[key] = nil }
        done(released)
    }

    private func wake(_ key: String, released: Bool) {
        guard let all = waiting.value.waiters.removeValue(forKey: key) else { return }
        for (_, done) in all.sorted(by: { $0.key < $1.key }) { done(released) }
    }
}
