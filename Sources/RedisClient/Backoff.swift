/// Exponential back-off with jitter for reconnects: attempt `n` waits a random time in
/// `[d/2, d]` where `d = min(max, base * 2^n)` ("equal jitter": never zero, so a fleet of nodes that
/// lost Redis together does not reconnect in lock-step, and never more than `max`).
public struct Backoff: Sendable {
    /// First delay, in seconds.
    public var base: Double
    /// Largest delay, in seconds.
    public var max: Double

    /// A back-off from `base` doubling up to `max`.
    public init(base: Double, max: Double) {
        self.base = base
        self.max = max
    }

    /// The delay before reconnect attempt `attempt` (0-based); `unit` is a random number in [0, 1].
    public func delay(attempt: Int, unit: Double = Double.random(in: 0...1)) -> Double {
        let d = Swift.min(max, base * Double(1 << Swift.min(attempt, 30)))
        return d / 2 + d / 2 * unit
    }
}
