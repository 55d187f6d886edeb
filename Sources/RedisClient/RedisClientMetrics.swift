import EventLoop

/// Counters of what the clients and subscribers of a node saw (`RedisClientEvent`), shared by every
/// loop's. Events are rare (not one per command), so one lock guards them all.
/// Threading: `Sendable`; counted from any loop, read from any thread (`/metrics`).
public final class RedisClientMetrics: Sendable {
    /// What is counted; `rawValue` is a metric-friendly name.
    public enum Counter: String, Sendable, CaseIterable {
        /// Masters replaced (cluster failovers, sentinel switches).
        case failovers
        /// `MOVED` redirections followed.
        case moved
        /// `ASK` redirections followed.
        case asks
        /// Slot-map refreshes (cluster) and master look-ups (sentinel) that answered.
        case topologyRefreshes = "topology_refreshes"
        /// Commands failed fast as unavailable (a master down or being replaced).
        case unavailable
        /// Channels subscribed again after a reconnect, failover or slot move.
        case resubscribes
        /// Loopback probes that did not come back (a deaf subscription connection).
        case probeFailures = "probe_failures"
        /// Commands whose `WAIT` saw fewer replicas than wanted.
        case replicaAckTimeouts = "replica_ack_timeouts"
        /// Commands that timed out (each alone: the others on its connection keep waiting).
        case commandTimeouts = "command_timeouts"
        /// Commands refused at once because their connection had `maxInFlight` outstanding.
        case refused
        /// Connections reset because nothing at all was answered for a whole time-out and the path was gone.
        case stalls
        /// Connections that answered nothing for a whole time-out while Redis's host acknowledged: kept.
        case silences
    }

    private let counts = Lock<[Counter: Int]>([:])

    /// Zeroed counters.
    public init() {}

    /// The counter's value. Any thread.
    public subscript(_ counter: Counter) -> Int { counts.withLock { $0[counter] ?? 0 } }

    /// Every counter's value. Any thread.
    public var snapshot: [Counter: Int] {
        counts.withLock { c in Dictionary(uniqueKeysWithValues: Counter.allCases.map { ($0, c[$0] ?? 0) }) }
    }

    /// Counts `event`. Any thread.
    public func record(_ event: RedisClientEvent) {
        guard let counter = Self.counter(of: event) else { return }
        counts.withLock { $0[counter, default: 0] += 1 }
    }

    /// The counter `event` counts in, if any.
    public static func counter(of event: RedisClientEvent) -> Counter? {
        switch event {
        case .failover: return .failovers
        case .moved: return .moved
        case .ask: return .asks
        case .topologyRefreshed: return .topologyRefreshes
        case .unavailable: return .unavailable
        case .resubscribed: return .resubscribes
        case .subscriptionDeaf: return .probeFailures
        case .subscriptionRecovered: return nil
        case .replicaAckTimeout: return .replicaAckTimeouts
        case .connection(_, .timedOut): return .commandTimeouts
        case .connection(_, .refused): return .refused
        case .connection(_, .stalled): return .stalls
        case .connection(_, .silent): return .silences
        }
    }
}
