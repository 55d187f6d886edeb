import EventLoop
import Logging

/// One `RedisConnection` per event loop, made and started together: what a node needs so that
/// every loop talks to Redis on its own `event_base` and no call crosses threads. Their health checks
/// (`RedisConfiguration.healthCheckInterval`) are on, so `isReady` turns false within that plus the
/// command time-out of Redis stopping to answer, even on an idle node.
///
/// Threading: the group is immutable and `Sendable`; `connection(for:)` may be called anywhere,
/// but each connection is used on its own loop only. `isReady` may be read from any thread.
public final class RedisConnectionGroup: Sendable {
    /// The connections, index = loop index.
    public let connections: [RedisConnection]

    /// A connection per loop of `loops` (loop `i` at index `i`), not yet started.
    public init(loops: [EventLoop], configuration: RedisConfiguration, logger: Logger = Logger(label: "redis")) {
        connections = loops.map {
            let c = RedisConnection(loop: $0, configuration: configuration, logger: logger)
            c.healthCheckInterval = configuration.healthCheckInterval
            return c
        }
    }

    /// The connection of `loop`.
    public func connection(for loop: EventLoop) -> RedisConnection {
        connections.first { $0.loop === loop } ?? connections[loop.index % connections.count]
    }

    /// Starts every connection on its loop. Safe from any thread.
    public func start() {
        for c in connections { c.startFromAnyThread() }
    }

    /// True when every connection is `ready` and not silent (for `/readyz`). Safe from any thread.
    public var isReady: Bool { connections.allSatisfy { $0.isAnswering } }

    /// Closes every connection, each on its loop, and waits. Safe from any thread.
    public func close() async {
        for c in connections { await c.closeFromAnyThread() }
    }
}
