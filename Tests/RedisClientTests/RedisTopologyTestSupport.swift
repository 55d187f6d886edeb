import EventLoop
import Foundation
import RedisClient
import RedisTestSupport
import XCTest

/// What the live topology suites share: a client and a subscriber on a loop of the test, and ways to
/// wait for what they report.
enum TopologyTesting {
    /// A client (not started) for `url` with short time-outs, so a failover test runs in seconds.
    static func client(
        _ url: String, on loop: EventLoop, commandTimeout: Double = 1,
        maxInFlight: Int? = nil, maxQueued: Int? = nil, configure: (inout RedisClientOptions) -> Void = { _ in }
    ) -> RedisClient {
        var topology = RedisTopology(url: url)!
        topology.node.commandTimeout = commandTimeout
        topology.node.connectTimeout = 0.5
        topology.node.reconnectBase = 0.02
        topology.node.reconnectMax = 0.2
        topology.node.healthCheckInterval = 0.25
        if let maxInFlight { topology.node.maxInFlight = maxInFlight }
        if let maxQueued { topology.node.maxQueued = maxQueued }
        var options = RedisClientOptions()
        options.failoverPollInterval = 0.1
        options.probeInterval = 0.25
        configure(&options)
        return RedisClient(loop: loop, topology: topology, options: options)
    }

    /// Polls `condition` every 10 ms until it holds or `seconds` pass; true if it held.
    static func eventually(within seconds: Double = 10, _ condition: () async -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if await condition() { return true }
            try? await Task.sleep(nanoseconds: 10_000_000)
        }
        return await condition()
    }

    /// A key (`prefix{n}`) whose slot `cluster` serves at `port`.
    static func key(_ prefix: String, servedBy port: Int, in cluster: RedisClusterProcesses) -> String {
        var owners: [Int: Int] = [:]
        for n in 0..<10_000 {
            let k = "\(prefix){\(n)}"
            let slot = RedisSlot.of(k)
            let owner = owners[slot] ?? cluster.masterPort(ofSlot: slot) ?? -1
            owners[slot] = owner
            if owner == port { return k }
        }
        return "\(prefix)-none"
    }

    /// The masters' ports by `CLUSTER NODES` (not failed, with slots).
    static func masterPorts(_ cluster: RedisClusterProcesses) -> [Int] {
        cluster.view().filter { $0.master && !$0.failed && !$0.slots.isEmpty }.map(\.port).sorted()
    }
}

/// Messages and confirmations seen by a subscriber's handlers (on its loop), read by the test.
final class Inbox: @unchecked Sendable {
    private let lock = NSLock()
    private var messages: [RedisMessage] = []
    private var confirmations: [String: Int] = [:]

    func add(_ m: RedisMessage) { lock.withLock { messages.append(m) } }
    func confirmed(_ channel: String) { lock.withLock { confirmations[channel, default: 0] += 1 } }
    func confirmations(of channel: String) -> Int { lock.withLock { confirmations[channel] ?? 0 } }
    /// Channels confirmed at least once.
    var confirmedCount: Int { lock.withLock { confirmations.count } }
    func payloads(on channel: String) -> [String] {
        lock.withLock { messages.filter { $0.channel == channel }.map { String(decoding: $0.payload, as: UTF8.self) } }
    }
}

/// Events a client reported (on its loop), read by the test.
final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [RedisClientEvent] = []
    func add(_ e: RedisClientEvent) { lock.withLock { events.append(e) } }
    var all: [RedisClientEvent] { lock.withLock { events } }
}

extension RedisClient {
    /// Runs `body` on the loop and waits for it.
    func onLoop<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { k in loop.execute { k.resume(returning: body()) } }
    }
}
