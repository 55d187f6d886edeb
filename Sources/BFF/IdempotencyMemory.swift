/// The `Idempotency-Key`s one session saw within its window: each with the `inputSeq` it got and when.
///
/// Keys leave when their window passes, not only when room is needed: a session that took a thousand
/// keyed inputs held every one of them (~130 bytes each for the browser's 32-character keys) until it
/// ended, long after the contract's five minutes. Keys arrive in time order (one session clock), so the
/// oldest are at the front of `order` and expire from there: on each new key, and on the loop's periodic
/// sweep (`LoopSessions.expireIdleSessions`), which frees the whole object once the last key expired.
/// At most `Session.rememberedKeys` are kept; past that the oldest is forgotten early, and `forgottenUntil`
/// says until when a forgotten key could still be within its window (cluster mode then asks the store).
///
/// Threading: the session's loop, like `Session`.
final class IdempotencyMemory {
    private var entries: [String: (inputSeq: Int, at: Double)] = [:]
    /// Every key as it was remembered, oldest first from `head`; a key remembered again after it expired
    /// appears twice, and its older place is skipped (its entry's time is newer).
    private var order: [(key: String, at: Double)] = []
    private var head = 0
    /// The session-clock time until which a key forgotten to make room could still be within its window.
    private(set) var forgottenUntil = -Double.infinity

    /// Keys kept now.
    var count: Int { entries.count }

    /// The `inputSeq` `key` got, if it was seen less than `window` seconds before `now`.
    func inputSeq(of key: String, now: Double, window: Double) -> Int? {
        guard let seen = entries[key], now - seen.at < window else { return nil }
        return seen.inputSeq
    }

    /// Keeps `key` (seen at `now`, given `inputSeq`), dropping the expired keys first and, with `cap` kept
    /// still, the oldest.
    func remember(_ key: String, inputSeq: Int, now: Double, window: Double, cap: Int) {
        dropExpired(now: now, window: window)
        while entries.count >= cap, let (oldest, at) = popFront() {
            entries[oldest] = nil
            forgottenUntil = max(forgottenUntil, at + window)
        }
        entries[key] = (inputSeq, now)
        order.append((key, now))
    }

    /// Drops the keys whose window passed by `now`.
    func dropExpired(now: Double, window: Double) {
        while head < order.count, now - order[head].at >= window {
            let front = order[head]
            advanceHead()
            if isCurrent(front) { entries[front.key] = nil }
        }
    }

    /// The oldest place in `order` that is its key's current one, taken off the front (stale places of keys
    /// remembered again are skipped); nil when none is left.
    private func popFront() -> (key: String, at: Double)? {
        while head < order.count {
            let front = order[head]
            advanceHead()
            if isCurrent(front) { return front }
        }
        return nil
    }

    /// A place in `order` is current when its key was last remembered then (not again since).
    private func isCurrent(_ place: (key: String, at: Double)) -> Bool { entries[place.key]?.at == place.at }

    /// Past the front place; the array is compacted once half of it is behind `head`.
    private func advanceHead() {
        head += 1
        if head == order.count {
            order.removeAll(keepingCapacity: false)
            head = 0
        } else if head >= 64 && head * 2 >= order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}
