/// The reply of a command that waited for replicas (`RedisClient.send(_:key:timeout:waitForReplicas:…)`):
/// the command ran on the master (`reply`), and `replicas` replicas acknowledged it (`WAIT`).
public struct RedisReplicated: Sendable, Equatable {
    /// The command's own reply.
    public var reply: RESPValue
    /// Replicas that acknowledged the command within the replica time-out.
    public var replicas: Int
    /// Replicas that had to acknowledge it: those asked for, or every replica the master had connected when
    /// it had fewer (`RedisClientOptions.replicaAcksStrict` off).
    public var wanted: Int
    /// Replicas asked for.
    public var asked: Int

    /// A reply acknowledged by `replicas` of the `wanted` (of the `asked`; default: as many as wanted).
    public init(reply: RESPValue, replicas: Int, wanted: Int, asked: Int? = nil) {
        self.reply = reply
        self.replicas = replicas
        self.wanted = wanted
        self.asked = asked ?? wanted
    }

    /// True when at least `wanted` replicas hold the command: it survives the loss of its master when
    /// `wanted` is at least 1. When false the command ran but may be lost in a failover: the caller must
    /// not acknowledge it (`503`; a retry must be idempotent, e.g. by an `Idempotency-Key` the command
    /// itself checks).
    public var isAcknowledged: Bool { replicas >= wanted }

    /// True when the master had fewer replicas connected than asked for, so fewer had to acknowledge.
    public var isShortOfReplicas: Bool { wanted < asked }
}

/// What a replicated command's `WAIT` found: how many replicas acknowledged it, of how many that had to.
struct ReplicaAcks {
    var acknowledged: Int
    var wanted: Int
}
