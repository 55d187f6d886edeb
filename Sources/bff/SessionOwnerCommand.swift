import ArgumentParser
import ClusterRedis
import Dispatch
import EventLoop
import Foundation
import Glibc
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
            69 Redis not reachable or answering with an error, 64 bad arguments. The Redis password is never printed. An id that starts \
            with "-" (one in 64 does) goes after "--": bff session-owner --redis-url URL -- -AbC….
            """)

    @Argument(help: "The session id (the `id` of POST /api/sessions, or from a URL or log line).") var id: String
    @Option(
        help: """
            The cluster's Redis as the nodes take it: redis://…, redis+sentinel://… or redis+cluster://… \
            (env REDIS_URL; required).
            """)
    var redisUrl: String?
    @Option(help: "Prefix of the cluster's Redis keys (bff unless the nodes were built with another).")
    var keyPrefix = "bff"
    @Flag(help: "Print one JSON object instead of text.") var json = false

    func validate() throws {
        guard let url = redisUrl ?? ProcessInfo.processInfo.environment["REDIS_URL"], !url.isEmpty else {
            throw ValidationError("--redis-url (or REDIS_URL) is required")
        }
        // never echo the URL: it may hold a password
        if RedisTopology(url: url) == nil {
            throw ValidationError(
                "--redis-url must look like redis://[:password@]host:port/db, redis+sentinel://… or redis+cluster://…")
        }
        if id.isEmpty || id.contains(where: { $0 == "{" || $0 == "}" || $0.isWhitespace }) {
            throw ValidationError("'\(id.prefix(80))' is not a session id")
        }
    }

    func run() throws {
        let url = redisUrl ?? ProcessInfo.processInfo.environment["REDIS_URL"] ?? ""
        guard var topology = RedisTopology(url: url) else { throw ExitCode(64) }
        topology.node.healthCheckInterval = nil
        var logger = Logger(label: "bff.session-owner")
        logger.logLevel = .critical  // failures are reported below, once, without the URL
        let loop = EventLoop(index: 0)
        pthread_detach(loop.startThread(name: "session-owner"))
        defer { loop.stop() }
        // The client the nodes use: it finds the master of the session's slot on any topology (a Redis
        // Cluster's MOVED, a Sentinel's current master) and waits for it until its command time-out.
        let client = RedisClient(loop: loop, topology: topology, logger: logger)
        loop.execute { client.start() }
        // Until it knows the topology and reached every master, or for a few seconds: a Redis that is not
        // there is then reported by the first command, with the client's reason.
        let connecting = Date().addingTimeInterval(3)
        while !client.isReady && Date() < connecting { usleep(10_000) }
        let keys = ClusterKeys(prefix: keyPrefix)
        let key = RedisArg(keys.session(id))
        let lease = client.sendBlocking(["HGET", key, "lease"], key: key)
        guard case .success(let leaseValue) = lease else { throw Self.failure(lease, topology: topology) }
        // The liveness keys of the session's master carry a hash tag of a slot that master serves.
        let tag = loop.runBlocking {
            guard client.isSharded, let master = client.master(forSlot: RedisClient.slot(of: key)) else {
                return ClusterKeys.unshardedLiveTag
            }
            return ClusterKeys.liveTag { client.master(forSlot: $0) == master } ?? ClusterKeys.unshardedLiveTag
        }
        let commands: [[RedisArg]] = [
            [
                "EVAL", RedisArg(SessionInspectionScripts.leaseHolderLivenessPTTL), "1", key,
                RedisArg(keys.livePrefix(tag: tag)),
            ],
            ["HMGET", key, "seq", "inputSeq", "fence"], ["TTL", key],
            ["ZRANGE", RedisArg(keys.streams(id)), "0", "-1", "WITHSCORES"], ["TIME"],
        ]
        var values: [RESPValue] = [leaseValue]
        for command in commands {
            let reply = client.sendBlocking(command, key: key)
            guard case .success(let v) = reply else { throw Self.failure(reply, topology: topology) }
            values.append(v)
        }
        loop.runBlocking { client.close() }
        let report = SessionOwnerReport(id: id, replies: values)
        print(json ? report.json : report.text)
        if !report.exists { throw ExitCode(1) }
    }

    /// Reports a failed command on standard error (never the URL: it may hold a password): Redis not
    /// reachable, or what Redis answered. Exit status 69.
    private static func failure(_ reply: Result<RESPValue, RedisError>, topology: RedisTopology) -> ExitCode {
        let seeds = topology.seeds.map { "\($0)" }.joined(separator: ",")
        let message: String
        switch reply {
        case .failure(.server(let text)): message = "Redis at \(seeds) answered with an error: \(text)"
        case .failure(let error): message = "Redis at \(seeds) is not reachable: \(error)"
        case .success: message = "Redis at \(seeds): unexpected reply"
        }
        FileHandle.standardError.write(Data("bff session-owner: \(message)\n".utf8))
        return ExitCode(69)
    }
}

extension RedisClient {
    /// `send` from the main thread, waiting for the reply.
    fileprivate func sendBlocking(_ args: [RedisArg], key: RedisArg) -> Result<RESPValue, RedisError> {
        let reply = Mutex<Result<RESPValue, RedisError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        loop.execute {
            self.send(args, key: key) { r in
                reply.withLock { $0 = r }
                done.signal()
            }
        }
        done.wait()
        return reply.withLock { $0! }
    }
}

extension EventLoop {
    /// Runs `body` on the loop and returns its result (main thread).
    fileprivate func runBlocking<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        let result = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        execute {
            result.withLock { $0 = body() }
            done.signal()
        }
        done.wait()
        return result.withLock { $0! }
    }
}
