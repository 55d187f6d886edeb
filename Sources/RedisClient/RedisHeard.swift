import Primitives

/// When one loop's connections to one Redis last heard it: a reply read on any of them (monotonic
/// nanoseconds). A connection silent for its whole stall limit while a sibling heard Redis in that time is
/// not facing a dead Redis or a host pause but a queue of its own that Redis has not reached (a burst of
/// heavy scripts): `RedisConnection` then waits up to a second limit before it resets, and its commands
/// still time out one by one (issue 20, round 19). It does not cover a Redis silent to every connection of
/// the loop, which is what the 6 × 17,000 teardown resets turned out to be (BENCHMARKS, round 19).
///
/// Threading: the loop of the connections that share it (`RedisClient` makes one per master and loop).
public final class RedisHeard {
    /// The last reply on any of the connections that share this (0: none yet).
    public internal(set) var lastReplyAt: UInt64 = 0

    public init() {}
}
