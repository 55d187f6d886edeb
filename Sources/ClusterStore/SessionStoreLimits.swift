/// The bounds and expiries of a `SessionStore`.
public struct SessionStoreLimits: Sendable, Equatable {
    /// Events kept per session for replay (`--history-events`); Redis trims exactly (`MAXLEN N`,
    /// one entry removed per append once full), so replay covers what single-process mode covers.
    public var historyEvents: Int = 256
    /// Seconds without a commit after which a session and everything of it expire.
    public var idleTimeout: Int = 1800
    /// Lease time-to-live in milliseconds (`--lease-ttl`).
    public var leaseMilliseconds: Int = 10_000
    /// How long an `Idempotency-Key` is remembered, in seconds.
    public var idempotencySeconds: Int = 300
    /// Largest state blob accepted, in bytes.
    public var maxStateBytes: Int = 1 << 20
    /// Largest event accepted, in bytes.
    public var maxEventBytes: Int = 1 << 20

    /// The defaults, overridden where given.
    public init(historyEvents: Int = 256, idleTimeout: Int = 1800, leaseMilliseconds: Int = 10_000) {
        self.historyEvents = historyEvents
        self.idleTimeout = idleTimeout
        self.leaseMilliseconds = leaseMilliseconds
    }

    /// `.tooLarge` if a commit's state or one of its events is over its bound.
    public func check(_ commit: SessionCommit) -> StoreError? {
        if commit.state.count > maxStateBytes { return .tooLarge(commit.state.count) }
        if let big = commit.events.first(where: { $0.count > maxEventBytes }) { return .tooLarge(big.count) }
        return nil
    }
}
