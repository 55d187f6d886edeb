/// Continuations waiting for a count (queued callers, a flight's waiters) under a key to reach an
/// exact value: how tests await a queue forming or emptying without sleeping. Test support: only the
/// `@_spi(Testing)` waits (`RateLimiter.waitForQueue`, `SearchCache.waitForWaiters`) add to it.
///
/// Threading: a value owned by one actor (`RateLimiter`, `SearchCache`); used only on it.
struct CountWatchers<Key: Equatable> {
    private var watchers: [(key: Key, count: Int, continuation: CheckedContinuation<Void, Never>)] = []

    /// Parks the caller until `changed(key, to: count)` reports exactly `count`.
    mutating func add(_ key: Key, _ count: Int, _ continuation: CheckedContinuation<Void, Never>) {
        watchers.append((key, count, continuation))
    }

    /// Resumes (and forgets) those waiting for `key` to reach `count`.
    mutating func changed(_ key: Key, to count: Int) {
        let ready = watchers.filter { $0.key == key && $0.count == count }
        watchers.removeAll { $0.key == key && $0.count == count }
        for watcher in ready { watcher.continuation.resume() }
    }
}
