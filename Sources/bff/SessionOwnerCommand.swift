import ArgumentParser
import ClusterRedis
import Dispatch
import EventHTTP
import Foundation
import Glibc
import JSON
import Logging
import RedisClient
import Synchronization

/// `bff session-owner ID`: which node runs a session in cluster mode, read from the cluster's Redis
/// (the session's lease, its stored counters and its open event streams) without changing anything:
/// the operator's answer to "where does this session live?" without the key table and `redis-cli`.
///
/// Threading: `run` (main thread) waits on one private `EventLoop` thread that owns the Redis connection.
struct SessionOwnerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bff session-owner",
        abstract: "Cluster mode: which node runs session ID (reads its lease in Redis; changes nothing).",
        discussion: """
            Prints the node holding the session's lease (the node id given by --node-id/NODE_ID), the lease's \
            holder name (node#boot-nonce#loop), fencing token and remaining time, the stored seq and inputSeq, \
            and the session's open event streams on every node. No owner means the lease expired (its node \
            died) or was released (SIGTERM): the next request, or a node streaming the session, takes it over.
            Exit status: 0 the session exists, 1 no such session (never created, expired or deleted), \
            69 Redis not reachable, 64 bad arguments. The Redis password is never printed. An id that starts \
            with "-" (one in 64 does) goes after "--": bff session-owner --redis-url URL -- -AbC….
            """)

    /// Lua: the PTTL of the liveness key (prefix ARGV[1]) of the holder named by session KEYS[1]'s lease, -2
    /// if there is no lease or no such key. Reads only.
    static let livePTTL = """
        #!lua flags=no-writes,allow-cross-slot-keys
        local v = redis.call('HGET', KEYS[1], 'lease')
        if not v then return -2 end
        return redis.call('PTTL', ARGV[1] .. string.sub(v, 1, string.find(v, '|[^|]*$') - 1))
        """

    @Argument(help: "The session id (the `id` of POST /api/sessions, or from a URL or log line).") var id: String
    @Option(help: "The cluster's Redis, redis://[:password@]host:port/db (env REDIS_URL; required).")
    var redisUrl: String?
    @Option(help: "Prefix of the cluster's Redis keys (bff unless the nodes were built with another).")
    var keyPrefix = "bff"
    @Flag(help: "Print one JSON object instead of text.") var json = false

    func validate() throws {
        guard let url = redisUrl ?? ProcessInfo.processInfo.environment["REDIS_URL"], !url.isEmpty else {
            throw ValidationError("--redis-url (or REDIS_URL) is required")
        }
        // never echo the URL: it may hold a password
        if RedisConfiguration(url: url) == nil {
            throw ValidationError("--redis-url must look like redis://[:password@]host:port/db")
        }
        if id.isEmpty || id.contains(where: { $0 == "{" || $0 == "}" || $0.isWhitespace }) {
            throw ValidationError("'\(id.prefix(80))' is not a session id")
        }
    }

    func run() throws {
        let url = redisUrl ?? ProcessInfo.processInfo.environment["REDIS_URL"] ?? ""
        guard var redis = RedisConfiguration(url: url) else { throw ExitCode(64) }
        redis.healthCheckInterval = nil
        var logger = Logger(label: "bff.session-owner")
        logger.logLevel = .critical  // failures are reported below, once, without the URL
        let loop = EventLoop(index: 0)
        pthread_detach(loop.startThread(name: "session-owner"))
        defer { loop.stop() }
        let connection = RedisConnection(loop: loop, configuration: redis, logger: logger)
        let ready = DispatchSemaphore(value: 0)
        loop.execute {
            connection.onStateChange = { if $0 == .ready { ready.signal() } }
            connection.start()
        }
        guard ready.wait(timeout: .now() + redis.connectTimeout + 1) == .success else {
            FileHandle.standardError.write(
                Data("bff session-owner: Redis at \(redis.host):\(redis.port) is not reachable\n".utf8))
            throw ExitCode(69)
        }
        let keys = ClusterKeys(prefix: keyPrefix)
        let commands: [[RedisArg]] = [
            ["HGET", RedisArg(keys.session(id)), "lease"],
            [
                "EVAL", RedisArg(Self.livePTTL), "1", RedisArg(keys.session(id)),
                RedisArg(keys.livePrefix(tag: ClusterKeys.unshardedLiveTag)),
            ],
            ["HMGET", RedisArg(keys.session(id)), "seq", "inputSeq", "fence"], ["TTL", RedisArg(keys.session(id))],
            ["ZRANGE", RedisArg(keys.streams(id)), "0", "-1", "WITHSCORES"], ["TIME"],
        ]
        let replies = Replies(count: commands.count)
        let done = DispatchGroup()
        for (i, command) in commands.enumerated() {
            done.enter()
            loop.execute {
                connection.send(command) { r in
                    replies.all.withLock { $0[i] = r }
                    done.leave()
                }
            }
        }
        done.wait()
        loop.execute { connection.close() }
        var values: [RESPValue] = []
        for reply in replies.all.withLock({ $0 }) {
            guard case .success(let v) = reply else {
                FileHandle.standardError.write(Data("bff session-owner: Redis did not answer: \(reply!)\n".utf8))
                throw ExitCode(69)
            }
            values.append(v)
        }
        let report = SessionOwnerReport(id: id, replies: values)
        print(json ? report.json : report.text)
        if !report.exists { throw ExitCode(1) }
    }
}

/// The replies of `SessionOwnerCommand.run`'s commands: written on the loop, read on the main thread.
private final class Replies: Sendable {
    let all: Mutex<[Result<RESPValue, RedisError>?]>
    init(count: Int) { all = Mutex(Array(repeating: nil, count: count)) }
}
