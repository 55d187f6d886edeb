/// Round-trip times of one connection's commands (send to reply, on its loop). Loop thread only.
public struct RedisLatency: Sendable, Equatable {
    /// Replies timed.
    public var count = 0
    /// Sum of their round-trip times, in seconds.
    public var total = 0.0
    /// Largest round-trip time seen, in seconds.
    public var max = 0.0
    /// The last round-trip time, in seconds.
    public var last = 0.0

    /// Mean round-trip time in seconds (0 before the first reply).
    public var mean: Double { count == 0 ? 0 : total / Double(count) }

    mutating func record(_ seconds: Double) {
        count += 1
        total += seconds
        last = seconds
        if seconds > max { max = seconds }
    }
}
