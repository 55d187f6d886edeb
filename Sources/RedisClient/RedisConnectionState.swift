/// The state of a `RedisConnection`, readable from any thread (for `/readyz`).
public enum RedisConnectionState: UInt8, Sendable, Equatable {
    /// Connecting, or connected and running the `AUTH`/`SELECT`/`PING` hand-shake.
    case connecting
    /// The hand-shake answered: commands are being served.
    case ready
    /// Down; a reconnect is scheduled (commands fail at once with `notConnected`).
    case disconnected
    /// Closed by `close()`; it will not reconnect.
    case closed
}
