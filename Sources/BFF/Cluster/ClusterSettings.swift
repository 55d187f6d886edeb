import RedisClient

/// Cluster mode's settings (`--redis-url`, `--redis-replica-acks`, `--node-id`, `--lease-ttl`); nil in
/// `AppConfiguration` keeps the single process with in-memory sessions.
public struct ClusterSettings: Sendable {
    /// The shared Redis: one Redis (`redis://`), a Sentinel's master (`redis+sentinel://`) or a Redis
    /// Cluster (`redis+cluster://`). The password, if any, is never logged.
    public var topology: RedisTopology
    /// Replicas that must confirm a commit (and a lease acquisition, a deletion) before it is acknowledged
    /// (`WAIT`, `--redis-replica-acks`): 0 for `redis://`, 1 for the two others unless set.
    public var replicaAcks: Int
    /// How the node's Redis clients follow the topology (failover polling, the subscriptions' probe).
    public var clientOptions = RedisClientOptions()
    /// While a master has fewer connected replicas than `replicaAcks`: false, its commits wait for the
    /// replicas it has; true, they are refused (`503`, `--redis-replica-acks-strict`).
    public var replicaAcksStrict: Bool {
        get { clientOptions.replicaAcksStrict }
        set { clientOptions.replicaAcksStrict = newValue }
    }
    /// This node's name in logs, metrics and lease holders (default `HOST:PORT`).
    public var nodeID: String
    /// Seconds a session's lease lasts without renewal (renewed every third of it).
    public var leaseTTL: Double = 10
    /// Prefix of every Redis key (tests use their own).
    public var keyPrefix = "bff"
    /// New work (a session created, a stream opened) is refused at once with `503` + `Retry-After` while
    /// this many commands wait on the loop's connection to the master it needs: half of what a connection
    /// takes (`maxInFlight`), so the work already admitted (lease renewals, commits, stream renewals)
    /// keeps room and does not time out behind a flood of new work.
    public var admissionInFlight = RedisConfiguration().maxInFlight / 2
    /// Seconds a commit may wait for others of its loop to the same master, to go to Redis in one call
    /// (`--redis-commit-window`; 0: never). Only while the loop commits there more often than once per
    /// window: a commit after a quiet spell goes at once. See "Commit window" in `RedisSessionStore+Commits.swift`.
    public var commitWindow = 0.0

    /// The settings of every data node (password, database, command and connect time-outs, back-off).
    public var redis: RedisConfiguration {
        get { topology.node }
        set { topology.node = newValue }
    }

    /// Settings from a `redis://`, `redis+sentinel://` or `redis+cluster://` URL (`RedisTopology(url:)`),
    /// with `replicaAcks` replica acknowledgements (nil: the URL's default); nil when the URL is not one.
    public init?(redisURL: String, nodeID: String, leaseTTL: Double = 10, replicaAcks: Int? = nil) {
        guard let topology = RedisTopology(url: redisURL) else { return nil }
        self.init(topology: topology, nodeID: nodeID, leaseTTL: leaseTTL, replicaAcks: replicaAcks)
    }

    /// Settings for a node `nodeID` on one Redis (`redis`).
    public init(redis: RedisConfiguration, nodeID: String, leaseTTL: Double = 10) {
        self.init(topology: RedisTopology(standalone: redis), nodeID: nodeID, leaseTTL: leaseTTL)
    }

    /// Settings for a node `nodeID` on `topology`, with `replicaAcks` (nil: `defaultReplicaAcks`).
    public init(topology: RedisTopology, nodeID: String, leaseTTL: Double = 10, replicaAcks: Int? = nil) {
        self.topology = topology
        self.nodeID = nodeID
        self.leaseTTL = leaseTTL
        self.replicaAcks = replicaAcks ?? Self.defaultReplicaAcks(for: topology)
    }

    /// `--redis-replica-acks`'s default: 0 on one Redis (it has no replica to wait for), 1 on Sentinel and
    /// on a Redis Cluster (an acknowledged input survives the death of its master).
    public static func defaultReplicaAcks(for topology: RedisTopology) -> Int {
        topology.kind == .standalone ? 0 : 1
    }
}
