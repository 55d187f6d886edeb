/// The right to run one session's view models, held by one holder until it expires.
public struct Lease: Sendable, Hashable {
    /// The session.
    public var sessionID: String
    /// Who holds it: unique per process incarnation (node id + boot nonce + loop index).
    public var holder: String
    /// The fencing token: grows with every acquisition of this session; every write checks it.
    public var token: UInt64

    /// A lease on `sessionID` held by `holder` with fencing token `token`.
    public init(sessionID: String, holder: String, token: UInt64) {
        self.sessionID = sessionID
        self.holder = holder
        self.token = token
    }

    /// The first event id this holder may use: ids of a holder live in `[token << 32 + 1, …]`,
    /// above every id any earlier holder (a smaller token) could have produced.
    public var firstEventID: UInt64 { token << 32 + 1 }
}
