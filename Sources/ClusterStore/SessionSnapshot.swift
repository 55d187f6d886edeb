/// A session's durable state as last committed.
public struct SessionSnapshot: Sendable, Equatable {
    /// The view models' encoded state (opaque to the store).
    public var state: [UInt8]
    /// The id of the last committed event (0 before the first).
    public var seq: UInt64
    /// The last acknowledged input's number (0 before the first).
    public var inputSeq: UInt64

    /// A snapshot with these values.
    public init(state: [UInt8], seq: UInt64, inputSeq: UInt64) {
        self.state = state
        self.seq = seq
        self.inputSeq = inputSeq
    }
}
