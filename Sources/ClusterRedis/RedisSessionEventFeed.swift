import ClusterStore
import RedisClient

/// `SessionEventFeed` on a `RedisShardedSubscriber`: a session's committed events arrive as
/// "<id>\n<payload>" on its sharded channel (`SSUBSCRIBE`, at the master of the session's slot: on a
/// cluster a message crosses only its own shard), published by the commit script in the same atomic
/// step as the `XADD`, or — with replica acks — by the committing node once the replicas confirmed it.
/// After a reconnect, a failover or a slot move the subscriber subscribes again where the slot lives
/// and `onSubscribed` runs again (the stream catches up from the history).
///
/// Threading: bound to its subscriber's loop.
public final class RedisSessionEventFeed: SessionEventFeed, Sendable {
    /// The subscriber used (one subscription connection per master, shared by every session of its loop).
    public let subscriber: RedisShardedSubscriber
    /// The key layout.
    public let keys: ClusterKeys

    /// A feed on `subscriber` for sessions under `keys`.
    public init(subscriber: RedisShardedSubscriber, keys: ClusterKeys) {
        self.subscriber = subscriber
        self.keys = keys
    }

    public func subscribe(
        sessionID: String, onSubscribed: @escaping () -> Void, _ handler: @escaping (StoredEvent) -> Void
    ) {
        subscriber.ssubscribe(channel: keys.channel(sessionID), onSubscribed: onSubscribed) { message in
            if let event = Self.decode(message.payload) { handler(event) }
        }
    }

    public func unsubscribe(sessionID: String) {
        subscriber.sunsubscribe(channel: keys.channel(sessionID))
    }

    /// "<id>\n<payload>", as the commit script publishes it.
    static func encode(_ event: StoredEvent) -> [UInt8] {
        var out = Array(String(event.id).utf8)
        out.append(UInt8(ascii: "\n"))
        out += event.payload
        return out
    }

    /// Splits "<id>\n<payload>".
    static func decode(_ bytes: [UInt8]) -> StoredEvent? {
        guard let nl = bytes.firstIndex(of: UInt8(ascii: "\n")),
            let id = UInt64(String(decoding: bytes[..<nl], as: UTF8.self))
        else { return nil }
        return StoredEvent(id: id, payload: Array(bytes[(nl + 1)...]))
    }
}
