import EventHTTP
import Foundation
import Glibc
import RedisClient
import RedisTestSupport
import XCTest

/// The Redis deployments the cluster-mode suites run on: one `redis-server` per test (`redis://`), or a
/// real Redis Cluster (3 masters, 3 replicas) or Sentinel set (master, replica, 3 sentinels) that every
/// suite of the test process shares (started at first use, stopped when the process exits), so each
/// topology's start-up is paid once.
enum RedisDeployment: String, Sendable {
    case standalone, cluster, sentinel
}

/// The shared Redis Cluster and Sentinel set. A test that kills or stops one of their nodes puts it back
/// before it ends (`restore`); every test waits until the deployment is healthy and empties it first.
enum SharedRedis {
    private static let started = Lock<(cluster: RedisClusterProcesses?, sentinel: RedisSentinelProcesses?)>((nil, nil))

    /// The shared Redis Cluster (started now if it is not yet).
    static func cluster() throws -> RedisClusterProcesses {
        try started.withLock { s in
            if let c = s.cluster { return c }
            let c = try RedisClusterProcesses(masters: 3, replicasPerMaster: 1)
            s.cluster = c
            registerStop()
            return c
        }
    }

    /// The shared Sentinel set (started now if it is not yet).
    static func sentinel() throws -> RedisSentinelProcesses {
        try started.withLock { s in
            if let set = s.sentinel { return set }
            let set = try RedisSentinelProcesses()
            s.sentinel = set
            registerStop()
            return set
        }
    }

    private static let stopRegistered = Lock(false)

    private static func registerStop() {
        let first = stopRegistered.withLock { r -> Bool in
            defer { r = true }
            return !r
        }
        if first { atexit { SharedRedis.stopAll() } }
    }

    /// Kills every shared node (at exit).
    static func stopAll() {
        let (c, s) = started.withLock { ($0.cluster, $0.sentinel) }
        c?.stop()
        s?.stop()
    }

    /// Every killed node of the shared deployments started again, and each healthy (after a failover
    /// test; the restarted node joins as a replica).
    static func restore(_ deployment: RedisDeployment) throws {
        switch deployment {
        case .standalone: return
        case .cluster:
            let c = try cluster()
            for n in c.nodes where !n.isRunning { try n.start() }
            for n in c.nodes { n.signal(SIGCONT) }
            guard c.waitUntilHealthy(timeout: 30) else { throw DeploymentError("the cluster is not healthy") }
        case .sentinel:
            let s = try sentinel()
            for n in s.sentinels where !n.isRunning { try n.start() }
            // A data node killed by a failover test comes back as the new master's replica (as itself it
            // would come back an empty master until the sentinels demote it).
            let master = s.masterPort.map { ["--replicaof", "127.0.0.1", "\($0)"] } ?? []
            for n in s.data where !n.isRunning { try n.start(adding: master) }
            for n in s.data { n.signal(SIGCONT) }
            guard s.waitUntilReady(timeout: 30) else { throw DeploymentError("the sentinel set is not ready") }
        }
    }
}

struct DeploymentError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

extension ClusterTestCase {
    /// The `--redis-url` of this class's deployment.
    var redisURL: String {
        switch Self.deployment {
        case .standalone: return redis.url
        case .cluster: return (try? SharedRedis.cluster().url) ?? ""
        case .sentinel: return (try? SharedRedis.sentinel().url) ?? ""
        }
    }

    /// The ports of the data nodes that are masters now.
    func masterPorts() throws -> [Int] {
        switch Self.deployment {
        case .standalone: return [redis.port]
        case .cluster: return try SharedRedis.cluster().masterPorts
        case .sentinel: return [try XCTUnwrap(SharedRedis.sentinel().masterPort)]
        }
    }

    /// The port of the master serving `key` (or channel) now.
    func masterPort(of key: String) throws -> Int {
        switch Self.deployment {
        case .standalone, .sentinel: return try masterPorts()[0]
        case .cluster: return try XCTUnwrap(SharedRedis.cluster().masterPort(ofSlot: RedisSlot.of(key)))
        }
    }

    /// Prepares the shared deployment for a test: healthy, empty, its command counters zeroed.
    func prepareSharedDeployment() throws {
        // Every channel allowed again first (a test that restricts them and fails midway would otherwise
        // leave the sentinels unable to greet each other, and the set never ready).
        let data: [RedisServerProcess] =
            Self.deployment == .cluster ? try SharedRedis.cluster().nodes : try SharedRedis.sentinel().data
        for n in data where n.isRunning { n.cli("ACL", "SETUSER", "default", "allchannels") }
        try SharedRedis.restore(Self.deployment)
        for port in try masterPorts() {
            _ = try runCLI(port: port, [], input: "FLUSHALL\nCONFIG RESETSTAT\nACL SETUSER default allchannels\n")
        }
    }

    /// `redis-cli -p port args…` (commands from `input` when given, one a line): its output (exit status 0
    /// asserted).
    func runCLI(port: Int, _ args: [String], cluster: Bool = false, input: String? = nil) throws -> String {
        let r = try Spawn.run("/usr/bin/redis-cli", (cluster ? ["-c"] : []) + ["-p", "\(port)"] + args, input: input)
        XCTAssertEqual(r.status, 0, r.errorOutput)
        return r.output
    }

    /// `redis-cli args…` against the deployment, sent where it applies: node-wide commands (`KEYS`,
    /// `ACL`, `CONFIG`, `INFO`, `FLUSHALL`) to every master (outputs joined), `PUBSUB SHARD…` and
    /// `SPUBLISH` to the master of the channel's slot, anything else following `MOVED` (`-c`).
    func deploymentCLI(_ args: [String]) throws -> String {
        let name = args.first { !$0.hasPrefix("-") }?.uppercased() ?? ""
        if Self.deployment == .standalone { return try runCLI(port: redis.port, args) }
        let nodeWide = ["KEYS", "ACL", "CONFIG", "INFO", "FLUSHALL"]
        if nodeWide.contains(name) {
            return try masterPorts().map { try runCLI(port: $0, args) }.joined()
        }
        let words = args.filter { !$0.hasPrefix("-") }
        if name == "PUBSUB", words.count >= 3, words[1].uppercased().hasPrefix("SHARDNUMSUB") {
            return try runCLI(port: masterPort(of: words[2]), args)
        }
        if name == "SPUBLISH", words.count >= 2 { return try runCLI(port: masterPort(of: words[1]), args) }
        return try runCLI(port: masterPorts()[0], args, cluster: Self.deployment == .cluster)
    }
}
