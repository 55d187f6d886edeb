/// How a `RedisClient` (and its `RedisShardedSubscriber`) follows the topology. A value; any thread.
/// Command, connect and reconnect times are the topology's `node` configuration.
public struct RedisClientOptions: Sendable, Equatable {
    /// Seconds between two slot-map refreshes (cluster) or master look-ups (sentinel) while all is well.
    public var topologyRefreshInterval: Double = 5
    /// Seconds between two refreshes while a master is down, a `MOVED` came, or a `READONLY`: how soon
    /// a failover that Redis completed is noticed.
    public var failoverPollInterval: Double = 0.1
    /// Redirections (`MOVED`/`ASK`) followed for one command before it fails.
    public var maxRedirects = 5
    /// Follow sentinels' `+switch-master` announcements (off only in tests of the `READONLY` path).
    public var watchSentinels = true
    /// Run the commands that wait for replicas (`send(…, waitForReplicas:)`) and their `WAIT` on a
    /// connection of their own per master, so a `WAIT` that blocks for its time-out (a replica that
    /// lags or stopped) never delays the other commands of the loop.
    public var separateWaitConnection = true
    /// What a command that wants N replicas (`send(…, waitForReplicas:)`) does at a master with fewer than
    /// N connected (`ROLE`): false (the default), it waits for every replica the master has (none, after
    /// Redis replaced a dead master by its only replica); true, it is refused with `.unavailable` before
    /// it is sent (`--redis-replica-acks-strict`).
    public var replicaAcksStrict = false
    /// Seconds between two loopback probes of each subscription connection (nil: no probe).
    public var probeInterval: Double? = 1
    /// The prefix of the probe channels (one per subscription connection, in a slot of its master).
    public var probeChannelPrefix = "redisclient:probe:"

    /// The defaults.
    public init() {}
}
