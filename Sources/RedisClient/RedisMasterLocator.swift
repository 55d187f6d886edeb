import EventLoop
import Logging

/// How a `RedisClient` learns which master serves each slot: one implementation per topology
/// (`RedisStandaloneLocator`, `RedisSentinelLocator`, `RedisClusterLocator`), chosen once when the
/// client is made, so nothing else branches on the topology.
///
/// Threading: loop-bound like its client; `changed` and `report` are called on the loop.
protocol RedisMasterLocator: AnyObject {
    /// True for a Redis Cluster: keys of different slots live on different masters.
    var isSharded: Bool { get }
    /// The master serving `slot` now; nil while unknown (not learnt yet, or none serves it).
    func master(forSlot slot: Int) -> RedisAddress?
    /// Every master known now.
    var masters: [RedisAddress] { get }
    /// Starts learning the topology.
    func start(_ context: RedisLocatorContext)
    /// Something suggests the answer is stale (a master down, `READONLY`, `CLUSTERDOWN`, `MOVED`):
    /// learn it again soon (coalesced, at most once per `failoverPollInterval`).
    func suspect(_ reason: String)
    /// A `MOVED`: `slot` lives at `address` now (cluster only; others ignore it).
    func moved(slot: Int, to address: RedisAddress)
    /// Why the topology is not fully known, for `/readyz` (empty when it is).
    var problems: [String] { get }
    /// Stops every connection and timer.
    func close()
}

/// What a locator gets from its client.
struct RedisLocatorContext {
    let loop: EventLoop
    let topology: RedisTopology
    let options: RedisClientOptions
    let logger: Logger
    /// The answer of `master(forSlot:)` or `masters` may have changed.
    let changed: () -> Void
    /// Reports an event (counted and logged by the client).
    let report: (RedisClientEvent) -> Void
}

/// One Redis: its address never changes.
final class RedisStandaloneLocator: RedisMasterLocator {
    private let address: RedisAddress

    init(address: RedisAddress) { self.address = address }

    var isSharded: Bool { false }
    func master(forSlot slot: Int) -> RedisAddress? { address }
    var masters: [RedisAddress] { [address] }
    func start(_ context: RedisLocatorContext) { context.changed() }
    func suspect(_ reason: String) {}
    func moved(slot: Int, to address: RedisAddress) {}
    var problems: [String] { [] }
    func close() {}
}
