import Foundation
import Glibc

/// A real Redis Cluster for tests: `masters` × (1 + `replicasPerMaster`) `redis-server --cluster-enabled
/// yes` on free loopback ports (bus ports chosen too: `--cluster-port`), `--cluster-node-timeout 1000`
/// (a master's `kill -9` is replaced within seconds), `cluster-require-full-coverage no` (the other shards
/// serve while one is replaced), `repl-diskless-sync-delay 0` (a restarted node is a working replica again
/// in a fraction of a second, not after Redis's default 5 s wait for more replicas), joined with
/// `redis-cli --cluster create … --cluster-replicas N`.
/// `init` returns once every node reports `cluster_state:ok` and every master has its replicas
/// connected. Its files (nodes.conf) live in a temporary directory removed by `stop()`.
///
/// Threading: for one test class (set up in `class setUp`, stopped in `class tearDown`); blocking calls.
package final class RedisClusterProcesses: Sendable {
    /// Every node, in creation order (`redis-cli` made the first `masters` nodes masters).
    package let nodes: [RedisServerProcess]
    /// The directory of their nodes.conf files.
    package let directory: URL

    /// Starts and joins the cluster; throws when it does not come up within `timeout` seconds.
    package init(masters: Int = 3, replicasPerMaster: Int = 1, timeout: Double = 30) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("redis-cluster-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var ports = Set<Int>()
        while ports.count < 2 * masters * (1 + replicasPerMaster) { ports.insert(try RedisServerProcess.freePort()) }
        let all = Array(ports)
        let count = masters * (1 + replicasPerMaster)
        var started: [RedisServerProcess] = []
        for i in 0..<count {
            let port = all[i]
            started.append(
                try RedisServerProcess(
                    port: port,
                    extraArguments: [
                        "--cluster-enabled", "yes", "--cluster-config-file", directory.path + "/nodes-\(port).conf",
                        "--cluster-node-timeout", "1000", "--cluster-port", "\(all[count + i])",
                        "--cluster-require-full-coverage", "no", "--repl-diskless-sync-delay", "0",
                        "--dir", directory.path,
                    ]))
        }
        nodes = started
        let create = try Spawn.run(
            "/usr/bin/redis-cli",
            ["--cluster", "create"] + nodes.map { "127.0.0.1:\($0.port)" } + [
                "--cluster-replicas", "\(replicasPerMaster)", "--cluster-yes",
            ])
        guard create.status == 0 else {
            stop()
            throw NSError(domain: "redis-cli --cluster create failed: \(create.errorOutput)", code: Int(create.status))
        }
        guard waitUntilHealthy(timeout: timeout) else {
            stop()
            throw NSError(domain: "the cluster did not become healthy", code: 1)
        }
    }

    /// `redis+cluster://` with every node as a seed.
    package var url: String { "redis+cluster://" + nodes.map { "127.0.0.1:\($0.port)" }.joined(separator: ",") }

    /// The node listening on `port`.
    package func node(port: Int) -> RedisServerProcess? { nodes.first { $0.port == port } }

    /// The ports of the masters that serve slots now (`CLUSTER NODES` of a running node), sorted.
    package var masterPorts: [Int] {
        view().filter { $0.master && !$0.failed && !$0.slots.isEmpty }.map(\.port).sorted()
    }

    /// The node id of the node on `port` (`CLUSTER NODES`).
    package func nodeID(port: Int) -> String? { view().first { $0.port == port }?.id }

    /// The port of the replica of the master on `port` (the first one `CLUSTER NODES` lists).
    package func replicaPort(of masterPort: Int) -> Int? {
        let v = view()
        guard let id = v.first(where: { $0.port == masterPort })?.id else { return nil }
        return v.first { !$0.master && $0.masterID == id }?.port
    }

    /// `CLUSTER NODES` as seen by a running node: per node its port, id, role, master id, slots text.
    package func view() -> [(port: Int, id: String, master: Bool, failed: Bool, masterID: String, slots: String)] {
        guard let n = nodes.first(where: { $0.isRunning }) else { return [] }
        return n.cli("CLUSTER", "NODES").split(separator: "\n").compactMap { line in
            let f = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
            guard f.count >= 8, let portText = f[1].split(separator: "@").first?.split(separator: ":").last,
                let port = Int(portText)
            else { return nil }
            let flags = f[2]
            return (
                port, f[0], flags.contains("master"), flags.contains("fail") && !flags.contains("fail?"), f[3],
                f.count > 8 ? f[8...].joined(separator: " ") : ""
            )
        }
    }

    /// The port of the master that serves `slot` (by `CLUSTER SLOTS` of a running node).
    package func masterPort(ofSlot slot: Int) -> Int? {
        slotMap().first { $0.slots.contains(slot) }?.port
    }

    /// Every slot range and the port of its master (`CLUSTER SLOTS` of a running node, read once).
    package func slotMap() -> [(slots: ClosedRange<Int>, port: Int)] {
        guard let n = nodes.first(where: { $0.isRunning }) else { return [] }
        let lines = n.cli("CLUSTER", "SLOTS").split(separator: "\n").map(String.init)
        var out: [(slots: ClosedRange<Int>, port: Int)] = []
        var i = 0
        while i + 3 < lines.count {
            if let start = Int(lines[i]), let end = Int(lines[i + 1]), start <= end, lines[i + 2] == "127.0.0.1",
                let port = Int(lines[i + 3])
            {
                out.append((start...end, port))
                i += 4
            } else {
                i += 1
            }
        }
        return out
    }

    /// Waits until every running node says `cluster_state:ok` and every master has its replicas
    /// connected with their links up (a restarted node has rejoined as a replica).
    @discardableResult
    package func waitUntilHealthy(timeout: Double = 30) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if isHealthy { return true }
            usleep(50_000)
        }
        return false
    }

    private var isHealthy: Bool {
        let running = nodes.filter(\.isRunning)
        guard running.allSatisfy({ $0.cli("CLUSTER", "INFO").contains("cluster_state:ok") }) else { return false }
        let view = self.view()
        let masters = view.filter { $0.master && !$0.failed && !$0.slots.isEmpty }
        let replicas = view.filter { !$0.master && !$0.failed }
        guard replicas.count == running.count - masters.count else { return false }
        for r in replicas {
            guard r.masterID != "-", masters.contains(where: { $0.id == r.masterID }) else { return false }
            guard RedisServerProcess.cli(port: r.port, ["INFO", "replication"]).contains("master_link_status:up")
            else { return false }
        }
        return true
    }

    /// Kills every node and removes the directory.
    package func stop() {
        for n in nodes { n.kill() }
        try? FileManager.default.removeItem(at: directory)
    }
}
