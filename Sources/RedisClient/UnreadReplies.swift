import CHiredis
import EventHTTP

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

    /// For a check due `late` seconds ago with a limit of `limit`: how long to wait before judging, or nil
    /// to judge now (the check ran less than a grace late).
    static func pauseGrace(late: Double, limit: Double) -> Double? {
        let grace = max(recheckDelay(limit), limit / 4)
        return late >= grace ? grace : nil
    }

    /// A passed `deadline` (monotonic ns) of something with time-out `limit`, judged `now`: moved a pause's
    /// grace on when the check runs a grace or more late and no grace was given yet (`graced`, then set).
    /// True if it was moved. Commands in flight and held for room keep their deadlines this way.
    /// `starved`: how long the loop could not run while it waited (`EventLoop.lateness(since:)`), which counts
    /// as a pause too.
    static func deferPastPause(
        _ deadline: inout UInt64, graced: inout Bool, limit: Double, now: UInt64, starved: Double = 0
    ) -> Bool {
        guard !graced, let grace = pauseGrace(late: max(secondsLate(deadline, now: now), starved), limit: limit)
        else { return false }
        deadline = now &+ UInt64(grace * 1e9)
        graced = true
        return true
    }

    /// How late a verdict on `quiet` seconds of silence is, as a pause counts it: the check's own lateness
    /// (it was due at `due`) or how long `loop` could not run within the silence, whichever is longer.
    static func pauseLateness(due: UInt64, now: UInt64, quiet: Double, loop: EventLoop) -> Double {
        max(secondsLate(due, now: now), loop.lateness(since: now &- UInt64(max(0, quiet) * 1e9)))
    }

    /// Seconds from `due` to `now` (monotonic ns), 0 if not yet due.
    static func secondsLate(_ due: UInt64, now: UInt64) -> Double { now > due ? Double(now - due) / 1e9 : 0 }
}
