import CHiredis
import EventLoop

/// A connection's time-outs are judged on what Redis answered, not on what the loop has read or on time the
/// loop did not look:
/// - While bytes wait unread in the socket (one read event reads 16 KB; after a long loop iteration the timers
///   run in the same iteration as that one read), a command's time-out, a stall reset, a subscription's overdue
///   confirmation and a probe are looked at again after `recheckDelay`, once the read events had their turn.
/// - A check that runs long after it was due ran after a pause: of this process, or of the whole host (a
///   stalled VM pauses Redis with it). So did a check whose loop was found late by its lag probe during the
///   wait (`EventLoop.lateness(since:)`: a host whose cores are saturated starves the loop and delays the
///   packets alike, though this one check ran on time). Redis then had no time to answer, so the verdict waits
///   `pauseGrace` once (each caller keeps that it gave one: a command in flight or held for room, the stall
///   check until the connection makes progress, a confirmation, a probe). The check after the grace
///   judges as usual: a Redis still silent then is stuck, and a pause delays that verdict by one grace.
enum UnreadReplies {
    /// True when `context`'s socket holds bytes the loop has not read yet.
    static func waiting(on context: UnsafeMutablePointer<redisAsyncContext>?) -> Bool {
        context.map { chiredis_unread_bytes($0) > 0 } ?? false
    }

    /// How soon a check postponed because of unread replies runs again, for a time-out of `limit` seconds.
    static func recheckDelay(_ limit: Double) -> Double { max(0.005, limit / 20) }

    /// For a check due `late` seconds ago with a limit of `limit`, on a wait that began at `since` (monotonic
    /// ns) on `loop`: how long to wait before judging, or nil to judge now. A grace is given when the check ran
    /// a grace or more late, or when the loop's lag probe found it that late within the wait
    /// (`EventLoop.lateness(since:)`): either way Redis had no time to answer.
    static func pauseGrace(late: Double, since: UInt64, loop: EventLoop, limit: Double) -> Double? {
        let grace = max(recheckDelay(limit), limit / 4)
        return max(late, loop.lateness(since: since)) >= grace ? grace : nil
    }

    /// A passed `deadline` (monotonic ns) of something with time-out `limit`, waited for since `since` on
    /// `loop`, judged `now`: moved a pause's grace on (`pauseGrace`) when no grace was given yet (`graced`,
    /// then set). True if it was moved. Commands in flight and held for room keep their deadlines this way.
    static func deferPastPause(
        _ deadline: inout UInt64, graced: inout Bool, limit: Double, now: UInt64, since: UInt64, loop: EventLoop
    ) -> Bool {
        guard !graced,
            let grace = pauseGrace(late: secondsLate(deadline, now: now), since: since, loop: loop, limit: limit)
        else { return false }
        deadline = now &+ UInt64(grace * 1e9)
        graced = true
        return true
    }

    /// The monotonic instant `quiet` seconds before `now`: where a silence measured in seconds began.
    static func start(ofQuiet quiet: Double, now: UInt64) -> UInt64 { now &- UInt64(max(0, quiet) * 1e9) }

    /// Seconds from `due` to `now` (monotonic ns), 0 if not yet due.
    static func secondsLate(_ due: UInt64, now: UInt64) -> Double { now > due ? Double(now - due) / 1e9 : 0 }
}
