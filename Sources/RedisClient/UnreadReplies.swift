import CHiredis

/// A connection's time-outs are judged on what Redis answered, not on what the loop has read: while bytes
/// wait unread in the socket (one read event reads 16 KB; after a long loop iteration the timers run in the
/// same iteration as that one read), a command's time-out, a stall reset, a subscription's overdue
/// confirmation and a probe are looked at again after `recheckDelay`, once the read events had their turn.
enum UnreadReplies {
    /// True when `context`'s socket holds bytes the loop has not read yet.
    static func waiting(on context: UnsafeMutablePointer<redisAsyncContext>?) -> Bool {
        context.map { chiredis_unread_bytes($0) > 0 } ?? false
    }

    /// How soon a check postponed because of unread replies runs again, for a time-out of `limit` seconds.
    static func recheckDelay(_ limit: Double) -> Double { max(0.005, limit / 20) }
}
