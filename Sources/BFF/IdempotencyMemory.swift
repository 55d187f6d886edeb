/// The `Idempotency-Key`s one session saw within its window: each with the `inputSeq` it got and when.
///
/// Keys leave when their window passes, not only when room is needed: a session that took a thousand
/// keyed inputs held every one of them (each a string and its bookkeeping) until it
/// ended, long after the contract's five minutes. Keys arrive in time order (one session clock), so the
/// oldest are at the front of `order` and expire from there: on each new key, and on the loop's periodic
/// sweep (`LoopSessions.expireIdleSessions`), which frees the whole object once the last key expired.
/// At most `Session.rememberedKeys` are kept; past that the oldest is forgotten early, and `forgottenUntil`
/// says until when a forgotten key could still be within its window (cluster mode then asks the store).
///
/// Threading: the session's loop, like `Session`.
final class IdempotencyMemory {
    private var entries: [String: (inputSeq: Int, at: Double)] = [:]
    /// The keys kept, oldest first from `head` (their times are in `entries`; a key is in `order` exactly
    /// while it is in `entries`).
    private var order: [String] = []
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
    /// still, the oldest. A session remembers only a key `inputSeq(of:)` did not find, so an expired one has
    /// just been dropped; one still kept (no caller does that) is given the new answer in its old place.
    func remember(_ key: String, inputSeq: Int, now: Double, window: Double, cap: Int) {
        dropExpired(now: now, window: window)
        if entries[key] != nil {
            entries[key] = (inputSeq, now)
            return
        }
        while entries.count >= cap {
            let at = dropFront()
            forgottenUntil = max(forgottenUntil, at + window)
        }
        entries[key] = (inputSeq, now)
        order.append(key)
    }

    /// Drops the keys whose window passed by `now`.
    func dropExpired(now: Double, window: Double) {
        while head < order.count, let at = entries[order[head]]?.at, now - at >= window { _ = dropFront() }
    }

    /// Drops the oldest key; its time.
    private func dropFront() -> Double {
        let at = entries.removeValue(forKey: order[head])!.at
        head += 1
        if head == order.count {
            order.removeAll(keepingCapacity: false)
            head = 0
        } else if head >= 64 && head * 2 >= order.count {
            order.removeFirst(head)  // compacted once half of it is behind `head`
            head = 0
        }
        return at
    }
}
