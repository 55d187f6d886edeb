/// Something a `RedisConnection` reports through `onEvent` (on its loop), for metrics.
public enum RedisConnectionEvent: Sendable, Equatable {
    /// One command timed out; the connection was kept (unless `stalled` follows).
    case timedOut
    /// A command was refused at once with `.overloaded`: `maxInFlight` commands were outstanding.
    case refused
    /// No reply to anything for a whole stall time-out while commands waited, on a path whose host still
    /// acknowledges (`RedisPath`): the connection is kept, silent, until Redis answers it.
    case silent
    /// No reply to anything for a whole stall time-out while commands waited, and the path is gone (or the
    /// silence lasted `RedisPath.keptSilenceLimits` limits): the connection is reset.
    case stalled
}
