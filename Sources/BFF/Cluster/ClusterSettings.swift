import RedisClient

/// Cluster mode's settings (`--redis-url`, `--node-id`, `--lease-ttl`); nil in `AppConfiguration`
/// keeps the single process with in-memory sessions.
public struct ClusterSettings: Sendable {
    /// The shared Redis (the password, if any, is never logged).
    public var redis: RedisConfiguration
    /// This node's name in logs, metrics and lease holders (default `HOST:PORT`).
    public var nodeID: String
    /// Seconds a session's lease lasts without renewal (renewed every third of it).
    public var leaseTTL: Double = 10
    /// Prefix of every Redis key (tests use their own).
    public var keyPrefix = "bff"

    /// Settings from a `redis://[:password@]host:port/db` URL; nil when it is not one.
    public init?(redisURL: String, nodeID: String, leaseTTL: Double = 10) {
        guard let redis = RedisConfiguration(url: redisURL) else { return nil }
        self.init(redis: redis, nodeID: nodeID, leaseTTL: leaseTTL)
    }

    /// Settings for a node `nodeID` on `redis`.
    public init(redis: RedisConfiguration, nodeID: String, leaseTTL: Double = 10) {
        self.redis = redis
        self.nodeID = nodeID
        self.leaseTTL = leaseTTL
    }
}
