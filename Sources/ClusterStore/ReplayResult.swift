/// What a client reconnecting with `Last-Event-ID` gets.
public enum ReplayResult: Sendable, Equatable {
    /// Nothing was missed: the id is the last committed event.
    case upToDate
    /// The committed events after the id, oldest first (gapless).
    case events([StoredEvent])
    /// The id is not in the history (trimmed, or never committed: shown by a fenced-off owner):
    /// the client needs a fresh snapshot.
    case snapshotNeeded
}

/// One event of a session's history.
public struct StoredEvent: Sendable, Equatable {
    /// Its id (the SSE `id:`).
    public var id: UInt64
    /// Its encoded bytes as committed.
    public var payload: [UInt8]

    /// An event with this id and payload.
    public init(id: UInt64, payload: [UInt8]) {
        self.id = id
        self.payload = payload
    }
}
