/// The search cache shared by the cluster: pages by request key with their age, and a single-flight
/// lock so that identical concurrent misses on different nodes cost one upstream call (the
/// others wait for a wake-up, not by polling). Entries expire after `maxAge` (the stale-if-error
/// limit); whether an entry is fresh (age < TTL) is the caller's decision.
///
/// Threading: `Sendable`; call from any task.
public protocol SharedSearchCache: Sendable {
    /// The entry and its age in seconds, or nil.
    func get(_ key: String) async -> Result<CachedPage?, StoreError>
    /// Stores `payload` for `key` (age 0), releases `holder`'s lock on it, and wakes its waiters,
    /// in one step.
    func fill(_ key: String, payload: [UInt8], holder: String) async -> Result<Void, StoreError>
    /// Takes the single-flight lock of `key` for `holder` (expires by itself); false if held.
    func lock(_ key: String, holder: String) async -> Result<Bool, StoreError>
    /// Releases `holder`'s lock without a value (the upstream call failed) and wakes the waiters.
    func unlock(_ key: String, holder: String) async -> Result<Void, StoreError>
    /// Waits until `key`'s lock is released (filled or not) or `timeout` seconds pass; true when
    /// released. Returns at once when the lock is not held.
    func waitForUnlock(_ key: String, timeout: Double) async -> Bool
}

/// A cached page and its age.
public struct CachedPage: Sendable, Equatable {
    /// The stored bytes.
    public var payload: [UInt8]
    /// Seconds since it was stored.
    public var age: Double

    /// A page with these values.
    public init(payload: [UInt8], age: Double) {
        self.payload = payload
        self.age = age
    }
}

/// What `getOrFill` did.
public enum CacheOutcome: Sendable, Equatable {
    /// A fresh entry was found.
    case hit
    /// This caller called upstream and stored the answer.
    case filled
    /// Another caller (maybe on another node) filled it while this one waited.
    case filledByOther
    /// Upstream failed; this stale entry (younger than the max age) is served instead.
    case stale
    /// A wait for another caller's fill ran out (its holder died or was too slow): this caller
    /// called upstream itself and stored the answer.
    case lockTimedOut
}

extension SharedSearchCache {
    /// The fresh page of `key`, or exactly one `fetch` cluster-wide for it: the caller that takes
    /// the lock fetches and fills; the others wait for its wake-up and read the result. If the
    /// fetch fails, a stale entry is returned when there is one, else the error is thrown.
    /// After `attempts` rounds without a result (a lock holder that died: its lock expires), the
    /// caller fetches itself.
    public func getOrFill(
        _ key: String, holder: String, freshFor ttl: Double, waitTimeout: Double, attempts: Int = 3,
        fetch: @Sendable () async throws -> [UInt8]
    ) async throws -> (CachedPage, CacheOutcome) {
        try await getOrFill(key, holder: holder, freshFor: ttl, waitTimeout: waitTimeout, attempts: attempts) {
            (_: CachedPage?) async throws -> [UInt8] in try await fetch()
        }
    }

    /// `getOrFill` whose `fetch` is handed the expired entry, if any (to revalidate it upstream with
    /// its `ETag` and store it again when it has not changed).
    public func getOrFill(
        _ key: String, holder: String, freshFor ttl: Double, waitTimeout: Double, attempts: Int = 3,
        revalidating fetch: @Sendable (_ stale: CachedPage?) async throws -> [UInt8]
    ) async throws -> (CachedPage, CacheOutcome) {
        var stale: CachedPage?
        var waited = false
        var timedOut = false
        for _ in 0..<attempts {
            let entry = try await get(key).get()
            if let entry, entry.age < ttl { return (entry, waited ? .filledByOther : .hit) }
            stale = entry ?? stale
            if try await lock(key, holder: holder).get() {
                do {
                    let payload = try await fetch(stale)
                    _ = await fill(key, payload: payload, holder: holder)
                    return (CachedPage(payload: payload, age: 0), timedOut ? .lockTimedOut : .filled)
                } catch {
                    _ = await unlock(key, holder: holder)
                    if let stale { return (stale, .stale) }
                    throw error
                }
            }
            waited = true
            if !(await waitForUnlock(key, timeout: waitTimeout)) { timedOut = true }
        }
        let payload = try await fetch(stale)
        _ = await fill(key, payload: payload, holder: holder)
        return (CachedPage(payload: payload, age: 0), .lockTimedOut)
    }
}
