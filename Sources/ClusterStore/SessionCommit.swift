/// One fenced, atomic write of a session: events appended to its history and published to its
/// channel, its state replaced, and (for an input) `inputSeq` incremented, all or nothing.
public struct SessionCommit: Sendable, Equatable {
    /// The writer's lease; the commit fails with `.fenced` unless its token is current.
    public var lease: Lease
    /// Encoded events, in order; each gets the next event id.
    public var events: [[UInt8]]
    /// The state after these events.
    public var state: [UInt8]
    /// True when this commit acknowledges an input: `inputSeq` is incremented and returned.
    public var isInput: Bool
    /// An `Idempotency-Key` to record with the new `inputSeq` (5 minutes), for inputs.
    public var idempotencyKey: String?
    /// False when the writer renewed the session's expiry less than `SessionStoreLimits.expiryRenewalSeconds`
    /// ago (a commit or its acquisition): the expiry is left as it is.
    public var renewsExpiry: Bool

    /// A commit under `lease`.
    public init(
        lease: Lease, events: [[UInt8]], state: [UInt8], isInput: Bool, idempotencyKey: String? = nil,
        renewsExpiry: Bool = true
    ) {
        self.lease = lease
        self.events = events
        self.state = state
        self.isInput = isInput
        self.idempotencyKey = idempotencyKey
        self.renewsExpiry = renewsExpiry
    }
}

/// What a successful commit assigned.
public struct CommitResult: Sendable, Equatable {
    /// The ids of the commit's events, in order (strictly increasing, above every earlier id).
    public var eventIDs: [UInt64]
    /// The input's number, for input commits.
    public var inputSeq: UInt64?

    /// A result with these values.
    public init(eventIDs: [UInt64], inputSeq: UInt64?) {
        self.eventIDs = eventIDs
        self.inputSeq = inputSeq
    }
}
