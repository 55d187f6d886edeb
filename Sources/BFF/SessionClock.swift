import EventHTTP

/// The session layer's time: idle expiry, input token buckets and idempotency windows read `now()` from
/// it, so tests move time by hand instead of waiting. Given to `Application.init`; defaults to `monotonic`.
///
/// A struct of closures (as swift-composable-architecture's clients) rather than a protocol: one
/// function, no generic parameter on `Application`. Seconds on a monotonic scale: only differences mean
/// anything. Any thread.
public struct SessionClock: Sendable {
    /// The current time in seconds; never goes backwards.
    public var now: @Sendable () -> Double

    /// A clock reading `now`.
    public init(now: @escaping @Sendable () -> Double) {
        self.now = now
    }

    /// `CLOCK_MONOTONIC`, in seconds.
    public static var monotonic: SessionClock {
        SessionClock { Double(monotonicNanos()) / 1e9 }
    }
}
