#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The time the `search` view model's effects read and wait for (rate-limit ends), injected so tests
/// move it by hand. The transition itself never reads it: effects put the time into their actions.
public protocol SearchClock: Sendable {
    /// The current wall-clock time, seconds since 1970 (UTC).
    func now() -> Double
    /// Returns at `deadline` (seconds since 1970), at once when it has passed, or early when the
    /// task is cancelled (the store then drops the effect's action).
    func sleep(until deadline: Double) async
}

/// The system clock: `CLOCK_REALTIME` for the time, `Task.sleep` for waiting. Any thread.
public struct SystemSearchClock: SearchClock {
    /// The clock.
    public init() {}

    /// Seconds since 1970.
    public func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// Sleeps until `deadline` (wall time, re-checked after each wake so a clock step cannot end it early).
    public func sleep(until deadline: Double) async {
        while !Task.isCancelled {
            let left = deadline - now()
            guard left > 0 else { return }
            try? await Task.sleep(for: .milliseconds(Int((left * 1000).rounded(.up))))
        }
    }
}
