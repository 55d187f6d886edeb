/// The bounds and expiries of a `SessionStore`.
public struct SessionStoreLimits: Sendable, Equatable {
    /// Events kept per session for replay (`--history-events`). Redis trims whole stream nodes
    /// (`MAXLEN ~ N`: at least N kept, at most a node more), and its replay answers as if exactly N were
    /// kept, so replay covers what single-process mode covers.
    public var historyEvents: Int = 256
    /// Seconds without a commit after which a session and everything of it may expire: they expire between
    /// `idleTimeout` and `expirySeconds` after the session was last used.
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
    public init(
        historyEvents: Int = 256, idleTimeout: Int = 1800, leaseMilliseconds: Int = 10_000,
        idempotencySeconds: Int = 300
    ) {
        self.historyEvents = historyEvents
        self.idleTimeout = idleTimeout
        self.leaseMilliseconds = leaseMilliseconds
        self.idempotencySeconds = idempotencySeconds
    }

    /// How long a commit may leave the expiry as it is, in seconds: a tenth of the idle time-out, at most
    /// a minute, and 0 (every commit renews) below 10 s. A session's keys get `expirySeconds` from every
    /// renewal (a commit that renews, an acquisition, a stream check), so a commit within this many seconds
    /// of the last renewal is covered by it: `SessionCommit.renewsExpiry` false saves the store two writes
    /// per commit (`EXPIRE` of the hash and of the history), a third of what a commit costs Redis.
    public var expiryRenewalSeconds: Int { min(60, idleTimeout / 10) }

    /// The expiry every renewal gives a session's keys: the idle time-out plus `expiryRenewalSeconds`.
    public var expirySeconds: Int { idleTimeout + expiryRenewalSeconds }

    /// `.tooLarge` if a commit's state or one of its events is over its bound.
    public func check(_ commit: SessionCommit) -> StoreError? {
        if commit.state.count > maxStateBytes { return .tooLarge(commit.state.count) }
        if let big = commit.events.first(where: { $0.count > maxEventBytes }) { return .tooLarge(big.count) }
        return nil
    }
}
