import EventLoop
import Logging

/// One `RedisClient` and one `RedisShardedSubscriber` per event loop, on one topology, with shared
/// metrics: what a node needs so that every loop talks to Redis on its own `event_base` and nothing
/// crosses threads. The counterpart of `RedisConnectionGroup` for every topology.
///
/// Threading: immutable and `Sendable`; `client(for:)`/`subscriber(for:)` anywhere, each used on its own
/// loop; `isReady`, `metrics` anywhere; `problems` and `close` hop to the loops.
public final class RedisClientGroup: Sendable {
    /// The clients, index = loop index.
    public let clients: [RedisClient]
    /// The subscribers, index = loop index (each on its loop's client).
    public let subscribers: [RedisShardedSubscriber]
    /// Counters of every loop's client and subscriber.
    public let metrics: RedisClientMetrics

    /// A client and a subscriber per loop of `loops`, not yet started.
    public init(
        loops: [EventLoop], topology: RedisTopology, options: RedisClientOptions = RedisClientOptions(),
        logger: Logger = Logger(label: "redis")
    ) {
        let metrics = RedisClientMetrics()
        self.metrics = metrics
        clients = loops.map {
            RedisClient(loop: $0, topology: topology, options: options, metrics: metrics, logger: logger)
        }
        subscribers = clients.map { RedisShardedSubscriber(client: $0) }
    }

    /// The client of `loop`.
    public func client(for loop: EventLoop) -> RedisClient {
        clients.first { $0.loop === loop } ?? clients[loop.index % clients.count]
    }

    /// The subscriber of `loop`.
    public func subscriber(for loop: EventLoop) -> RedisShardedSubscriber {
        subscribers.first { $0.loop === loop } ?? subscribers[loop.index % subscribers.count]
    }

    /// Starts every client and subscriber on its loop. Safe from any thread.
    public func start() {
        for (c, s) in zip(clients, subscribers) {
            c.loop.execute {
                c.start()
                s.start()
            }
        }
    }

    /// True when every loop's client is ready and every subscriber healthy (`/readyz`). Any thread.
    public var isReady: Bool { clients.allSatisfy(\.isReady) && subscribers.allSatisfy(\.isHealthy) }

    /// What is wrong on each loop, one sentence each, prefixed by the loop (`/readyz`'s body). Any thread.
    public func problems(wantedReplicas: Int = 0) async -> [String] {
        var out: [String] = []
        for (c, s) in zip(clients, subscribers) {
            let found = await withCheckedContinuation { k in
                c.loop.execute { k.resume(returning: c.problems(wantedReplicas: wantedReplicas) + s.problems) }
            }
            out += found.map { "loop \(c.loop.index): \($0)" }
        }
        return out
    }

    /// Closes every subscriber and client, each on its loop, and waits. Any thread.
    public func close() async {
        for (c, s) in zip(clients, subscribers) {
            await withCheckedContinuation { (k: CheckedContinuation<Void, Never>) in
                c.loop.execute {
                    s.close()
                    c.close()
                    k.resume()
                }
            }
        }
    }
}
