/// The reply of a command that waited for replicas (`RedisClient.send(_:key:timeout:waitForReplicas:…)`):
/// the command ran on the master (`reply`), and `replicas` replicas acknowledged it (`WAIT`).
public struct RedisReplicated: Sendable, Equatable {
    /// The command's own reply.
    public var reply: RESPValue
    /// Replicas that acknowledged the command within the replica time-out.
    public var replicas: Int
    /// Replicas asked for.
    public var wanted: Int

    /// A reply acknowledged by `replicas` of the `wanted`.
    public init(reply: RESPValue, replicas: Int, wanted: Int) {
        self.reply = reply
        self.replicas = replicas
        self.wanted = wanted
    }

    /// True when at least `wanted` replicas hold the command: it survives the loss of its master. When
    /// false the command ran but may be lost in a failover: the caller must not acknowledge it (`503`;
    /// a retry must be idempotent, e.g. by an `Idempotency-Key` the command itself checks).
    public var isAcknowledged: Bool { replicas >= wanted }
}
