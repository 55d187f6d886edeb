import Foundation
import Glibc

/// A real Redis Sentinel set for tests: a master, a replica, and three `redis-server --sentinel`
/// (quorum 2, `down-after-milliseconds 1000`: a master's `kill -9` is replaced within seconds), all on free
/// loopback ports; the data nodes with `repl-diskless-sync-delay 0` (a restarted node is a working
/// replica again at once). `init` returns once the replica's link is up and every sentinel knows the other
/// two and the replica (a failover needs both). Config files live in a temporary directory removed by
/// `stop()`.
///
/// Threading: for one test class (set up in `class setUp`, stopped in `class tearDown`); blocking calls.
package final class RedisSentinelProcesses: Sendable {
    /// The name the sentinels monitor.
    package let masterName: String
    /// The two data nodes: `data[0]` started as the master, `data[1]` as its replica.
    package let data: [RedisServerProcess]
    /// The three sentinels.
    package let sentinels: [RedisServerProcess]
    /// Where the sentinels' config files are.
    package let directory: URL

    /// Starts the set; throws when it is not ready within `timeout` seconds.
    package init(masterName: String = "mymaster", timeout: Double = 30) throws {
        self.masterName = masterName
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("redis-sentinel-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // Their own directory: a replica's full resync writes the RDB it receives there (not in the cwd).
        let dir = ["--dir", directory.path, "--repl-diskless-sync-delay", "0"]
        let master = try RedisServerProcess(extraArguments: dir)
        let replica = try RedisServerProcess(extraArguments: dir + ["--replicaof", "127.0.0.1", "\(master.port)"])
        data = [master, replica]
        var started: [RedisServerProcess] = []
        for _ in 0..<3 {
            let port = try RedisServerProcess.freePort()
            let file = directory.appendingPathComponent("sentinel-\(port).conf")
            let conf = """
                port \(port)
                bind 127.0.0.1
                dir \(directory.path)
                sentinel monitor \(masterName) 127.0.0.1 \(master.port) 2
                sentinel down-after-milliseconds \(masterName) 1000
                sentinel failover-timeout \(masterName) 10000
                sentinel parallel-syncs \(masterName) 1

                """
            try conf.write(to: file, atomically: true, encoding: .utf8)
            started.append(
                try RedisServerProcess(
                    port: port, arguments: [file.path, "--sentinel"], readyLine: "+monitor master \(masterName)"))
        }
        sentinels = started
        guard waitUntilReady(timeout: timeout) else {
            stop()
            throw NSError(domain: "the sentinel set did not become ready", code: 1)
        }
    }

    /// `redis+sentinel://s1,s2,s3/<name>`.
    package var url: String {
        "redis+sentinel://" + sentinels.map { "127.0.0.1:\($0.port)" }.joined(separator: ",") + "/\(masterName)"
    }

    /// The master's port as the first running sentinel reports it.
    package var masterPort: Int? {
        guard let s = sentinels.first(where: \.isRunning) else { return nil }
        let lines = s.cli("SENTINEL", "get-master-addr-by-name", masterName).split(separator: "\n")
        return lines.count == 2 ? Int(lines[1]) : nil
    }

    /// The data node on `port`.
    package func node(port: Int) -> RedisServerProcess? { data.first { $0.port == port } }

    /// Waits until the master (as the sentinels report it) has a replica whose link is up and every
    /// sentinel counts the two other sentinels and that replica as healthy.
    @discardableResult
    package func waitUntilReady(timeout: Double = 30) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if isReady { return true }
            usleep(50_000)
        }
        return false
    }

    private var isReady: Bool {
        guard let port = masterPort, let master = node(port: port), master.isRunning,
            master.cli("ROLE").hasPrefix("master")
        else { return false }
        for r in data where r.port != port {
            guard r.isRunning, r.cli("INFO", "replication").contains("master_link_status:up"),
                r.cli("INFO", "replication").contains("master_port:\(port)")
            else { return false }
        }
        for s in sentinels {
            let fields = s.cli("SENTINEL", "MASTER", masterName).split(separator: "\n").map(String.init)
            func field(_ name: String) -> String? { fields.firstIndex(of: name).map { fields[$0 + 1] } }
            guard field("port") == "\(port)", field("num-other-sentinels") == "2",
                field("flags") == "master"
            else { return false }
            // A healthy replica's flags are exactly "slave" (else "s_down,slave", "slave,disconnected", …).
            let healthy = s.cli("SENTINEL", "REPLICAS", masterName).components(separatedBy: "flags\nslave\n").count - 1
            guard healthy >= data.filter(\.isRunning).count - 1 else { return false }
        }
        return true
    }

    /// Kills every sentinel and data node and removes the directory.
    package func stop() {
        for s in sentinels { s.kill() }
        for n in data { n.kill() }
        try? FileManager.default.removeItem(at: directory)
    }
}
