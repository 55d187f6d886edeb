/// How late a loop runs its timers, measured by one probe per loop, and how long it could not run over a
/// span: a verdict on a peer's silence (a Redis connection that answered nothing for its time-out) should
/// not count time in which this loop itself was starved of CPU or stopped (on a host whose cores are
/// saturated, loops ran their timers late by more than a time-out just before such verdicts).
extension EventLoop {
    /// Starts a timer due every `seconds` that measures how long after its time it runs; hands each reading
    /// (seconds late, ≥ 0) to `report` (metrics, logs) and keeps the late ones for `lateness(since:)`. Loop
    /// thread only; one probe per loop.
    public func startLagProbe(every seconds: Double, report: @escaping (Double) -> Void) -> LoopTimer {
        var due = monotonicNanos() &+ UInt64(seconds * 1e9)
        return scheduleRepeating(every: seconds) { [unowned self] in
            let now = monotonicNanos()
            let late = now > due ? Double(now - due) / 1e9 : 0
            due = now &+ UInt64(seconds * 1e9)
            self.lateReadings.record(at: now, late: late)
            report(late)
        }
    }

    /// The longest this loop could not run, as its lag probe saw it, within the span from `mark` (monotonic
    /// nanoseconds) to now: the largest reading taken after `mark`, cut to the part after `mark`. 0 without a
    /// probe or when it was on time. Loop thread only.
    public func lateness(since mark: UInt64) -> Double { lateReadings.longest(since: mark) }
}

/// The last late readings of a loop's lag probe: a ring of 8 (a few seconds of stalls at the probe's 0.5 s).
struct LateReadings {
    /// Readings below this are the loop's normal jitter, not a stall.
    static let threshold = 0.05
    private var at = [UInt64](repeating: 0, count: 8)
    private var late = [Double](repeating: 0, count: 8)
    private var next = 0

    mutating func record(at now: UInt64, late seconds: Double) {
        guard seconds >= Self.threshold else { return }
        at[next] = now
        late[next] = seconds
        next = (next + 1) % at.count
    }

    func longest(since mark: UInt64) -> Double {
        var longest = 0.0
        // A reading at t, `late` seconds late: the loop did not run from t - late to t.
        for i in at.indices where at[i] > mark { longest = max(longest, min(late[i], Double(at[i] - mark) / 1e9)) }
        return longest
    }
}
