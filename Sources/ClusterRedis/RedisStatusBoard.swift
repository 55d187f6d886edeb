import ClusterStore
import RedisClient

/// `StatusBoard` in Redis: the latest value in `bff:status:<name>` (expires after `ttlSeconds`
/// without a post), announced on the channel of the same name, both by one script.
///
/// Threading: bound to the loop of its connection and subscriber (the same loop).
public final class RedisStatusBoard: StatusBoard, Sendable {
    private static let post = RedisScript(
        """
        redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
        redis.call('PUBLISH', KEYS[1], ARGV[1])
        return 1
        """)

    /// The command connection.
    public let connection: RedisConnection
    /// The pub/sub connection.
    public let subscriber: RedisSubscriber
    private let key: String
    private let ttlSeconds: Int

    /// The board `name` under `keys`; a value lives `ttlSeconds` after its last post.
    public init(
        connection: RedisConnection, subscriber: RedisSubscriber, name: String, ttlSeconds: Int = 3600,
        keys: ClusterKeys
    ) {
        precondition(connection.loop === subscriber.connection.loop, "one loop for both connections")
        self.connection = connection
        self.subscriber = subscriber
        self.ttlSeconds = ttlSeconds
        key = keys.status(name)
    }

    public func post(_ value: [UInt8], completion: @escaping (Result<Void, StoreError>) -> Void) {
        connection.evalScript(
            Self.post, keys: [RedisArg(key)], args: [RedisArg(bytes: value), RedisArg(ttlSeconds)]
        ) { r in completion(r.store { _ in () }) }
    }

    public func latest(completion: @escaping (Result<[UInt8]?, StoreError>) -> Void) {
        connection.send(["GET", RedisArg(key)]) { r in
            completion(r.store { v -> [UInt8]?? in v.isNull ? .some(nil) : v.bytes.map { .some($0) } })
        }
    }

    public func observe(onSubscribed: @escaping () -> Void, _ observer: @escaping ([UInt8]) -> Void) {
        subscriber.subscribe(channel: key, onSubscribed: onSubscribed) { observer($0.payload) }
    }
}
