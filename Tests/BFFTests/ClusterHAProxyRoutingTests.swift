import Foundation
import Glibc
import JSON
import RedisTestSupport
import WireClient
import XCTest

/// The shipped `deploy/haproxy.cfg`, run unchanged by a real `haproxy` in front of real `bff` nodes on
/// one real `redis-server` (its addresses from the environment, as in `ClusterHAProxyTests`):
/// - every request of a session reaches the node that created it (no input forwarded between nodes), and
///   after that node's `kill -9` the session sticks to the node that took it over, also once the dead
///   node is back;
/// - with no node available (Redis down: every node unready) an `/api/` request gets HAProxy's answer
///   as the contract's problem JSON with `Retry-After`, not HAProxy's HTML; with no node running at all,
///   the page gets the shipped HTML error page (`deploy/errors/503-page.http`) and `/api/` still problem JSON.
final class ClusterHAProxyRoutingTests: XCTestCase {
    private static let haproxy = "/usr/sbin/haproxy"
    private var bff: String { ChildProcess.buildFolder + "/bff" }
    private var config: String { ChildProcess.packageRoot + "/deploy/haproxy.cfg" }

    override func setUpWithError() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.haproxy) else {
            throw XCTSkip("haproxy is not installed (\(Self.haproxy)); apt-get install haproxy")
        }
    }

    private func startNode(redis: RedisServerProcess, name: String, port: Int) throws -> ChildProcess {
        let p = try ChildProcess(
            bff,
            [
                "--port", "\(port)", "--threads", "1", "--cache-file", "none", "--redis-url", redis.url,
                "--node-id", name, "--lease-ttl", "1",
            ],
            environment: ["GITHUB_API_URL": "http://127.0.0.1:9", "LOG_LEVEL": "warning"])
        XCTAssertNotNil(p.waitForLine(containing: "bff listening"), "\(name): \(p.stderrText)")
        addTeardownBlock { if !p.hasExited { p.send(SIGKILL) } }
        return p
    }

    /// HAProxy on the shipped file, for nodes at `ports`; returns it with its port and its stats port.
    private func startHAProxy(nodes ports: [Int]) throws -> (ChildProcess, Int, Int) {
        let hp = ChildProcess.freePort()
        let stats = ChildProcess.freePort()
        let proxy = try ChildProcess(
            Self.haproxy, ["-f", config],
            environment: [
                "BFF_NODE1": "127.0.0.1:\(ports[0])", "BFF_NODE2": "127.0.0.1:\(ports[1])",
                "BFF_NODE3": "127.0.0.1:\(ports[2])", "HAPROXY_BIND": "127.0.0.1:\(hp)",
                "HAPROXY_STATS_BIND": "127.0.0.1:\(stats)",
            ])
        addTeardownBlock { proxy.send(SIGKILL) }
        try waitFor("HAProxy serving", within: 10) {
            XCTAssertFalse(proxy.hasExited, proxy.stderrText)
            return (try? WireConnection.get(port: hp, path: "/readyz").status) == 200
        }
        return (proxy, hp, stats)
    }

    private func waitFor(_ what: String, within seconds: Double, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while try !condition() {
            guard Date() < deadline else {
                XCTFail("not within \(seconds) s: \(what)")
                throw WireError.timeout
            }
            usleep(50_000)
        }
    }

    /// HAProxy's view of `server` in `backend` ("UP", "DOWN", "UP 1/2" while going down…), from its
    /// stats CSV.
    private func serverStatus(stats: Int, _ server: String, backend: String = "bff_sessions") -> String? {
        guard let csv = try? WireConnection.get(port: stats, path: "/;csv").text else { return nil }
        for line in csv.split(separator: "\n") where line.hasPrefix("\(backend),\(server),") {
            return String(line.split(separator: ",", omittingEmptySubsequences: false)[17])
        }
        return nil
    }

    /// A counter of `node`'s /metrics (0 when absent).
    private func counter(_ port: Int, _ name: String) throws -> Int {
        let text = try WireConnection.get(port: port, path: "/metrics").text
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Int(Double(line.dropFirst(name.count + 1)) ?? -1)
        }
        return 0
    }

    /// One keyed input through HAProxy, retried with the same key on 502/503/504 and refused connections
    /// (a node dying, ownership moving); its inputSeq.
    private func input(_ port: Int, _ id: String, _ path: String, key: String, body: String? = nil) throws -> Int {
        let deadline = Date().addingTimeInterval(8)
        while Date() < deadline {
            if let c = try? WireConnection(port: port),
                let r = try? c.request(
                    "POST", "/api/sessions/\(id)/\(path)",
                    headers: [("Content-Type", "application/json"), ("Idempotency-Key", key)],
                    body: body.map { Array($0.utf8) })
            {
                if r.status == 202 { return try XCTUnwrap(JSONValue.parse(r.body)["inputSeq"]?.intValue) }
                XCTAssertTrue([502, 503, 504].contains(r.status), "\(r.status): \(r.text)")
            }
            usleep(50_000)
        }
        throw WireError.timeout
    }

    private func owner(of id: String, redis: RedisServerProcess) throws -> String {
        let out = try Spawn.run("/usr/bin/redis-cli", ["-p", "\(redis.port)", "HGET", "bff:s:{\(id)}", "lease"]).output
        return String(out.prefix { $0 != "#" })
    }

    func testEveryRequestOfASessionReachesTheNodeThatCreatedItAndStaysWithItsTakerAfterAKill() throws {
        let redis = try RedisServerProcess()
        defer { redis.kill() }
        let ports = (0..<3).map { _ in ChildProcess.freePort() }
        var nodes = try (0..<3).map { try startNode(redis: redis, name: "node\($0 + 1)", port: ports[$0]) }
        let (_, hp, stats) = try startHAProxy(nodes: ports)
        func forwarded() throws -> Int {
            try ports.indices.filter { !nodes[$0].hasExited }.map {
                try counter(ports[$0], "bff_cluster_inputs_owned_elsewhere_total")
            }.reduce(0, +)
        }

        // Every node in rotation first (HAProxy serves once one is): else all creations go to the first up.
        try waitFor("every node in rotation", within: 10) {
            ["node1", "node2", "node3"].allSatisfy { serverStatus(stats: stats, $0) == "UP" }
        }
        // Sessions created through HAProxy (least busy node), each with a stream and inputs through it.
        var sessions: [String] = []
        var streams: [(WireConnection, EventStreamReader)] = []
        for _ in 0..<9 {
            let created = try WireConnection.post(port: hp, path: "/api/sessions", body: [])
            XCTAssertEqual(created.status, 201)
            let id = try XCTUnwrap(JSONValue.parse(created.body)["id"]?.stringValue)
            sessions.append(id)
            let s = try WireConnection(port: hp)
            let (head, events) = try s.openEventStream("/api/sessions/\(id)/events")
            XCTAssertEqual(head.status, 200)
            XCTAssertEqual(try events.next()?.event, "snapshot")
            streams.append((s, events))
        }
        for (i, id) in sessions.enumerated() {
            XCTAssertEqual(try input(hp, id, "greeting/name", key: "n\(i)", body: #"{"value":"v\#(i)"}"#), 1)
            XCTAssertEqual(try input(hp, id, "greeting/greet", key: "g\(i)"), 2)
            XCTAssertEqual(try streams[i].1.next()?.event, "greeting")
        }
        let owners = try Set(sessions.map { try owner(of: $0, redis: redis) })
        print("haproxy routing: 9 sessions created on \(owners.sorted())")
        XCTAssertGreaterThan(owners.count, 1, "creations spread over the nodes (leastconn)")
        let inputs = try ports.map { try counter($0, "bff_inputs_total") }.reduce(0, +)
        XCTAssertEqual(inputs, 18)
        XCTAssertEqual(try forwarded(), 0, "inputs forwarded between nodes: routed away from the creating node")

        // kill -9 the owner of the first session: its inputs go on (the next node takes it over), and
        // once they do, no input of it is forwarded: the table learned the node that took it.
        let id = sessions[0]
        let victim = try XCTUnwrap(Int(owner(of: id, redis: redis).dropFirst(4))) - 1
        nodes[victim].send(SIGKILL)
        _ = nodes[victim].waitForExit(timeout: 5)
        XCTAssertEqual(try input(hp, id, "greeting/name", key: "after-kill", body: #"{"value":"k"}"#), 3)
        let taker = try owner(of: id, redis: redis)
        XCTAssertNotEqual(taker, "node\(victim + 1)")
        let before = try forwarded()
        for i in 0..<10 {
            XCTAssertEqual(try input(hp, id, "greeting/name", key: "k\(i)", body: "{\"value\":\"\(i)\"}"), 4 + i)
        }
        XCTAssertEqual(try forwarded() - before, 0, "inputs after the takeover went to another node than \(taker)")

        // The killed node comes back (same address): the session stays with the node that runs it.
        nodes[victim] = try startNode(redis: redis, name: "node\(victim + 1)", port: ports[victim])
        try waitFor("node\(victim + 1) back in rotation", within: 10) {
            serverStatus(stats: stats, "node\(victim + 1)") == "UP"
        }
        let back = try forwarded()
        for i in 0..<10 {
            XCTAssertEqual(try input(hp, id, "greeting/name", key: "b\(i)", body: "{\"value\":\"b\(i)\"}"), 14 + i)
        }
        XCTAssertEqual(try forwarded() - back, 0, "inputs went back to the restarted node, which does not own it")
        XCTAssertEqual(try owner(of: id, redis: redis), taker)
        for (c, _) in streams { c.close() }
    }

    func testWithNoNodeAvailableAnAPIRequestGetsProblemJSONWithRetryAfter() throws {
        let redis = try RedisServerProcess()
        defer { redis.kill() }
        let port = ChildProcess.freePort()
        let node = try startNode(redis: redis, name: "only", port: port)
        let (_, hp, stats) = try startHAProxy(nodes: [port, port, port])
        redis.kill()  // every node turns unready (/readyz 503); HAProxy takes them out of rotation
        try waitFor("every node out of rotation", within: 10) {
            ["node1", "node2", "node3"].allSatisfy { serverStatus(stats: stats, $0) == "DOWN" }
        }
        func assertAPIProblems(_ when: String) throws {
            for (method, path) in [
                ("GET", "/api/sessions/abc/state"), ("POST", "/api/sessions"), ("GET", "/api/search/repositories?q=x"),
                ("POST", "/api/sessions/abc/greeting/greet"),
            ] {
                let what = "\(when): \(method) \(path)"
                let r = try WireConnection(port: hp).request(method, path, body: method == "POST" ? [] : nil)
                XCTAssertEqual(r.status, 503, "\(what): \(r.text)")
                XCTAssertEqual(r.header("Content-Type"), "application/problem+json", "\(what): \(r.text)")
                XCTAssertEqual(r.header("Retry-After"), "1", what)
                XCTAssertEqual(r.header("Content-Length"), "\(r.body.count)", what)
                let problem = try JSONValue.parse(r.body)
                XCTAssertEqual(problem["type"], "about:blank", what)
                XCTAssertEqual(problem["title"], "Service Unavailable", what)
                XCTAssertEqual(problem["status"], 503, what)
                XCTAssertEqual(problem["detail"]?.stringValue?.hasPrefix("no bff node is available"), true, what)
            }
        }
        try assertAPIProblems("every node unready")
        // The page needs no Redis: a running node serves it all the same.
        let served = try WireConnection.get(port: hp, path: "/")
        XCTAssertEqual(served.status, 200, "the page while Redis is gone")
        XCTAssertEqual(served.header("Content-Type")?.hasPrefix("text/html"), true)
        // With no node running at all, paths outside /api/ get the shipped HTML page (deploy/errors/503-page.http,
        // instead of HAProxy's bare one); /api/ keeps its problem JSON.
        node.send(SIGKILL)
        _ = node.waitForExit(timeout: 5)
        try waitFor("the node out of rotation for the page", within: 10) {
            ["node1", "node2", "node3"].allSatisfy { serverStatus(stats: stats, $0, backend: "bff_any") == "DOWN" }
        }
        for path in ["/", "/greeting.html"] {
            let page = try WireConnection.get(port: hp, path: path)
            XCTAssertEqual(page.status, 503, path)
            XCTAssertEqual(page.header("Content-Type"), "text/html; charset=utf-8", "\(path): \(page.text)")
            XCTAssertEqual(page.header("Cache-Control"), "no-store", path)
            XCTAssertEqual(page.header("Content-Length"), "\(page.body.count)", path)
            XCTAssertTrue(page.text.contains("The service is unavailable for a moment"), "\(path): \(page.text)")
            XCTAssertTrue(page.text.contains("prefers-color-scheme: dark"), path)
        }
        try assertAPIProblems("no node running")
    }
}
