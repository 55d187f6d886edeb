import ClusterStore
import RedisClient

/// `StatusBoard` in Redis: the latest value in `<prefix>:status:{<name>}` (expires after `ttlSeconds`
/// without a post), announced on the sharded channel of the same name (`SPUBLISH`, in the key's slot),
/// both by one script. Every node subscribes to that one channel (`SSUBSCRIBE`, at the master of its
/// slot): on a cluster the announcement crosses one shard, not every Redis node.
///
/// Threading: bound to the loop of its client and subscriber (the same loop).
public final class RedisStatusBoard: StatusBoard, Sendable {
    private static let post = RedisScript(
        """
        redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
        redis.call('SPUBLISH', KEYS[1], ARGV[1])
        return 1
        """)

    /// The command client.
    public let client: RedisClient
    /// The subscriber.
    public let subscriber: RedisShardedSubscriber
    private let key: String
    private let ttlSeconds: Int

    /// The board `name` under `keys`; a value lives `ttlSeconds` after its last post.
    public init(
        client: RedisClient, subscriber: RedisShardedSubscriber, name: String, ttlSeconds: Int = 3600,
        keys: ClusterKeys
    ) {
        precondition(client.loop === subscriber.loop, "one loop for both")
        self.client = client
        self.subscriber = subscriber
        self.ttlSeconds = ttlSeconds
        key = keys.status(name)
    }

    public func post(_ value: [UInt8], completion: @escaping (Result<Void, StoreError>) -> Void) {
        client.evalScript(
            Self.post, keys: [RedisArg(key)], args: [RedisArg(bytes: value), RedisArg(ttlSeconds)]
        ) { r in completion(r.store { _ in () }) }
    }

    public func latest(completion: @escaping (Result<[UInt8]?, StoreError>) -> Void) {
        client.send(["GET", RedisArg(key)], key: RedisArg(key)) { r in
            completion(r.store { v -> [UInt8]?? in v.isNull ? .some(nil) : v.bytes.map { .some($0) } })
        }
    }

    public func observe(onSubscribed: @escaping () -> Void, _ observer: @escaping ([UInt8]) -> Void) {
        subscriber.ssubscribe(channel: key, onSubscribed: onSubscribed) { observer($0.payload) }
    }
}
