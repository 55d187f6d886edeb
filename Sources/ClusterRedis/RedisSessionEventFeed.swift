import ClusterStore
import RedisClient

/// `SessionEventFeed` on a `RedisSubscriber`: the commit script publishes "<id>\n<payload>" on
/// the session's channel in the same atomic step as the `XADD`.
///
/// Threading: bound to its subscriber's loop.
public final class RedisSessionEventFeed: SessionEventFeed, Sendable {
    /// The pub/sub connection used.
    public let subscriber: RedisSubscriber
    /// The key layout.
    public let keys: ClusterKeys

    /// A feed on `subscriber` for sessions under `keys`.
    public init(subscriber: RedisSubscriber, keys: ClusterKeys) {
        self.subscriber = subscriber
        self.keys = keys
    }

    public func subscribe(
        sessionID: String, onSubscribed: @escaping () -> Void, _ handler: @escaping (StoredEvent) -> Void
    ) {
        subscriber.subscribe(channel: keys.channel(sessionID), onSubscribed: onSubscribed) { message in
            if let event = Self.decode(message.payload) { handler(event) }
        }
    }

    public func unsubscribe(sessionID: String) {
        subscriber.unsubscribe(channel: keys.channel(sessionID))
    }

    /// Splits "<id>\n<payload>".
    static func decode(_ bytes: [UInt8]) -> StoredEvent? {
        guard let nl = bytes.firstIndex(of: UInt8(ascii: "\n")),
            let id = UInt64(String(decoding: bytes[..<nl], as: UTF8.self))
        else { return nil }
        return StoredEvent(id: id, payload: Array(bytes[(nl + 1)...]))
    }
}
