/// Primitives: the lowest layer, small pieces several modules share and none of them owns: the one
/// lock type (`Lock`), the monotonic clock, the token-bucket refill. Imports nothing of the project
/// but the `CTSan` header.
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Monotonic time in nanoseconds (CLOCK_MONOTONIC; vDSO, no system call). Any thread.
@inlinable
public func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

/// Monotonic time for deadlines, in seconds or nanoseconds since an arbitrary fixed point; never goes
/// backwards. The same clock as `monotonicNanos()`. Any thread.
public enum MonotonicClock {
    /// Seconds since an arbitrary fixed point.
    @inlinable
    public static func now() -> Double {
        Double(monotonicNanos()) / 1e9
    }

    /// Nanoseconds since an arbitrary fixed point (`monotonicNanos()`).
    @inlinable
    public static func nanoseconds() -> UInt64 { monotonicNanos() }
}
