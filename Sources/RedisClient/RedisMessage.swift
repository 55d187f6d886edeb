/// A message received by a `RedisSubscriber`.
public struct RedisMessage: Sendable, Equatable {
    /// The channel it was published on.
    public var channel: String
    /// The pattern it matched, for `PSUBSCRIBE` subscriptions.
    public var pattern: String?
    /// The published bytes.
    public var payload: [UInt8]

    /// A message on `channel` (matched by `pattern`, if any) carrying `payload`.
    public init(channel: String, pattern: String? = nil, payload: [UInt8]) {
        self.channel = channel
        self.pattern = pattern
        self.payload = payload
    }
}
