/// Something a `RedisClient` or `RedisShardedSubscriber` saw, reported on its loop through
/// `onEvent` (for logs) and counted in `RedisClientMetrics` (for `/metrics`).
public enum RedisClientEvent: Sendable, Equatable {
    /// A master was replaced: its slots (cluster) or the sentinel's master moved to `to`.
    case failover(from: RedisAddress, to: RedisAddress)
    /// A `MOVED` was followed: `slot` lives at `to` now.
    case moved(slot: Int, to: RedisAddress)
    /// An `ASK` was followed (a slot being migrated).
    case ask(slot: Int, to: RedisAddress)
    /// The slot map (cluster) or the master's address (sentinel) was read again.
    case topologyRefreshed(masters: Int)
    /// A command failed fast because the master of its slot is down or being replaced.
    case unavailable(RedisAddress?, reason: String)
    /// A channel was subscribed again after a reconnect, a failover or a slot move.
    case resubscribed(channel: String, at: RedisAddress)
    /// A subscription connection's loopback probe did not come back: it is up but deaf; it is being
    /// made again.
    case subscriptionDeaf(RedisAddress, reason: String)
    /// A subscription connection's probe came back again after it was found deaf.
    case subscriptionRecovered(RedisAddress)
    /// A command ran but fewer replicas than wanted acknowledged it within the replica time-out.
    case replicaAckTimeout(master: RedisAddress, acknowledged: Int, wanted: Int)
    /// A connection's own event (a command's time-out, a refusal past `maxInFlight`, a stall reset).
    case connection(RedisAddress, RedisConnectionEvent)
}
