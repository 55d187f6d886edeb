import Foundation
import Glibc
import JSON
import RedisTestSupport
import WireClient
import XCTest

/// Three real `bff` nodes (cluster mode, `--lease-ttl 1`, `--keep-alive 1`) on one real `redis-server`
/// behind a real `haproxy` running the shipped `deploy/haproxy.cfg` itself: the file reads its addresses
/// and the client/server inactivity time-out from the environment (defaults are compose's), so the test
/// changes no line of it. Every request goes through HAProxy's port, as a browser's would.
final class ClusterHAProxyTests: XCTestCase {
    private static let haproxy = "/usr/sbin/haproxy"
    private var bff: String { ChildProcess.buildFolder + "/bff" }
    private var config: String { ChildProcess.packageRoot + "/deploy/haproxy.cfg" }
    /// Every answer `input` got, in order (0: no answer), for the failover's print.
    private var retried: [Int] = []

    private func startNode(redis: RedisServerProcess, name: String, port: Int) throws -> ChildProcess {
        let p = try ChildProcess(
            bff,
            [
                "--port", "\(port)", "--threads", "1", "--cache-file", "none", "--redis-url", redis.url,
                "--node-id", name, "--lease-ttl", "1", "--keep-alive", "1",
            ],
            environment: ["GITHUB_API_URL": "http://127.0.0.1:9", "LOG_LEVEL": "warning"])
        XCTAssertNotNil(p.waitForLine(containing: "bff listening"), "\(name): \(p.stderrText)")
        return p
    }

    /// Sends one keyed input through HAProxy until it is acknowledged; `502`/`503`/`504` (a node died,
    /// or ownership is moving) and refused connections are retried with the same `Idempotency-Key`.
    private func input(
        _ port: Int, _ id: String, _ path: String, key: String, body: String?, within seconds: Double = 8
    ) throws -> Int? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let c = try? WireConnection(port: port),
                let r = try? c.request(
                    "POST", "/api/sessions/\(id)/\(path)",
                    headers: [("Content-Type", "application/json"), ("Idempotency-Key", key)],
                    body: body.map { Array($0.utf8) })
            {
                c.close()
                retried.append(r.status)
                if r.status == 202 { return try JSONValue.parse(r.body)["inputSeq"]?.intValue }
                XCTAssertTrue([502, 503, 504].contains(r.status), "only retryable answers while a node dies: \(r)")
            } else {
                retried.append(0)
            }
            usleep(50_000)
        }
        return nil
    }

    /// The client's copy of the view models: a snapshot replaces it, an event merges its outputs.
    private func apply(_ event: SSEEvent, to state: inout JSONObject) throws {
        let data = try JSONValue.parse(event.data)
        if event.event == "snapshot" {
            state = data["viewModels"]?.objectValue ?? JSONObject()
        } else if let outputs = data["outputs"]?.objectValue {
            var vm = state[event.event]?.objectValue ?? JSONObject()
            vm.merge(outputs)
            state[event.event] = .object(vm)
        }
    }

    /// Reads events until the greeting's label is `label`, applying each to `state`.
    private func read(_ events: EventStreamReader, untilLabel label: String, into state: inout JSONObject) throws {
        let deadline = Date().addingTimeInterval(8)
        while state["greeting"]?["label"]?.stringValue != label {
            guard let e = try events.next(timeout: max(0.01, deadline.timeIntervalSinceNow)) else {
                throw WireError.closed
            }
            try apply(e, to: &state)
        }
    }

    /// `GET /state` through HAProxy equals the client's copy (polled briefly: the status view model may
    /// still be settling), and its `seq` is the stream's last event id.
    private func assertStateEquals(_ state: JSONObject, lastID: String, _ port: Int, _ id: String) throws {
        let deadline = Date().addingTimeInterval(3)
        var server: JSONValue = .null
        repeat {
            let r = try WireConnection.get(port: port, path: "/api/sessions/\(id)/state")
            if r.status == 200 {
                server = try JSONValue.parse(r.body)
                if server["viewModels"]?.objectValue == state { break }
            }
            usleep(50_000)
        } while Date() < deadline
        XCTAssertEqual(server["viewModels"]?.objectValue, state, "GET /state equals the client's copy")
        XCTAssertEqual(server["seq"]?.intValue.map(String.init), lastID, "the stream is at the stored seq")
    }

    func testFailoverAndIdleStreamsThroughTheShippedHAProxyConfig() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.haproxy) else {
            throw XCTSkip("haproxy is not installed (\(Self.haproxy)); apt-get install haproxy")
        }
        let started = Date()
        let shipped = try String(contentsOfFile: config, encoding: .utf8)
        XCTAssertTrue(shipped.contains("timeout tunnel 1h"))
        XCTAssertTrue(shipped.contains(#"timeout client "${HAPROXY_TIMEOUT_CLIENT_SERVER-75s}""#))
        XCTAssertTrue(shipped.contains(#"timeout server "${HAPROXY_TIMEOUT_CLIENT_SERVER-75s}""#))

        let redis = try RedisServerProcess()
        defer { redis.kill() }
        let ports = (0..<3).map { _ in ChildProcess.freePort() }
        var nodes: [String: ChildProcess] = [:]
        for (i, port) in ports.enumerated() {
            nodes["node\(i + 1)"] = try startNode(redis: redis, name: "node\(i + 1)", port: port)
        }
        defer { for n in nodes.values where !n.hasExited { n.send(SIGTERM) } }
        let hp = ChildProcess.freePort()
        // The inactivity time-out is 2 s here (75 s shipped) so that an idle stream outliving it is quick to see.
        let inactivity = 2.0
        let proxy = try ChildProcess(
            Self.haproxy, ["-f", config],
            environment: [
                "BFF_NODE1": "127.0.0.1:\(ports[0])", "BFF_NODE2": "127.0.0.1:\(ports[1])",
                "BFF_NODE3": "127.0.0.1:\(ports[2])", "HAPROXY_BIND": "127.0.0.1:\(hp)",
                "HAPROXY_STATS_BIND": "127.0.0.1:\(ChildProcess.freePort())",
                "HAPROXY_TIMEOUT_CLIENT_SERVER": "\(Int(inactivity))s",
            ])
        defer { proxy.send(SIGKILL) }
        let readyBy = Date().addingTimeInterval(10)
        while (try? WireConnection.get(port: hp, path: "/readyz").status) != 200 {
            if Date() > readyBy || proxy.hasExited { return XCTFail("HAProxy not serving: \(proxy.stderrText)") }
            usleep(20_000)
        }

        // Create (least busy node), stream and inputs (the session's hash node), all through HAProxy.
        let created = try WireConnection.post(port: hp, path: "/api/sessions", body: [])
        XCTAssertEqual(created.status, 201)
        let id = try XCTUnwrap(JSONValue.parse(created.body)["id"]?.stringValue)
        let s1 = try WireConnection(port: hp, timeout: 10)
        let (head, events1) = try s1.openEventStream("/api/sessions/\(id)/events")
        XCTAssertEqual(head.status, 200)
        var state = JSONObject()
        try apply(try XCTUnwrap(events1.next()), to: &state)
        var acknowledged: [Int] = []
        func step(_ i: Int) throws {
            acknowledged.append(
                try XCTUnwrap(input(hp, id, "greeting/name", key: "name-\(i)", body: #"{"value":"n\#(i)"}"#)))
            acknowledged.append(try XCTUnwrap(input(hp, id, "greeting/greet", key: "greet-\(i)", body: nil)))
        }
        for i in 1...5 {
            try step(i)
            try read(events1, untilLabel: "Hello, N\(i)!", into: &state)
        }
        // A retry of an acknowledged input is answered with its number, not applied again.
        XCTAssertEqual(try input(hp, id, "greeting/greet", key: "greet-5", body: nil), 10)
        try assertStateEquals(state, lastID: events1.lastEventID, hp, id)

        // The node the session's hash lands on, from HAProxy's log (`bff_sessions/nodeN`), and the owner
        // per its Redis lease (`nodeN#nonce#loop|token`): the creator, which may be another node.
        let logLine = try XCTUnwrap(proxy.waitForLine(containing: "bff_sessions/node"), "no HAProxy log line")
        let hashNode = try XCTUnwrap(logLine.range(of: #"bff_sessions/node\d"#, options: .regularExpression))
            .upperBound
        let hashName = "node" + String(logLine[logLine.index(before: hashNode)])
        let lease = try redisLease(port: redis.port, session: "bff:s:{\(id)}")
        let ownerName = String(lease.prefix { $0 != "#" })
        print("haproxy: session hash on \(hashName), lease held by \(ownerName) (\(lease))")
        XCTAssertNotNil(nodes[ownerName], "lease \(lease)")

        // kill -9 the hash node (its stream and HAProxy's route die) and the owner if that is another node.
        let killed = Set([hashName, ownerName])
        for name in killed {
            nodes[name]?.send(SIGKILL)
            _ = nodes[name]?.waitForExit(timeout: 5)
        }
        let killedAt = Date()
        retried = []
        for i in 6...10 {
            try step(i)
            if i == 6 {
                print(
                    "haproxy: first input acknowledged \(Date().timeIntervalSince(killedAt)) s after kill -9 "
                        + "(answers to its attempts: \(retried.prefix { $0 != 202 } + [202]))")
            }
        }
        XCTAssertEqual(acknowledged, Array(1...20), "every acknowledged input applied exactly once, in order")
        XCTAssertEqual(try input(hp, id, "greeting/name", key: "name-10", body: #"{"value":"n10"}"#), 19)
        XCTAssertTrue(s1.waitForClose(timeout: 5), "the stream on the killed node ended")

        // Reconnect through HAProxy with Last-Event-ID (a dead node may still be in rotation for a moment).
        var s2: WireConnection?
        var events2: EventStreamReader?
        let reconnectBy = Date().addingTimeInterval(8)
        while events2 == nil && Date() < reconnectBy {
            if let c = try? WireConnection(port: hp, timeout: 10),
                let (h, e) = try? c.openEventStream(
                    "/api/sessions/\(id)/events", headers: [("Last-Event-ID", events1.lastEventID)]),
                h.status == 200
            {
                (s2, events2) = (c, e)
            } else {
                usleep(100_000)
            }
        }
        let stream = try XCTUnwrap(events2, "no stream through HAProxy after the kill")
        defer { s2?.close() }
        try read(stream, untilLabel: "Hello, N10!", into: &state)
        try assertStateEquals(state, lastID: stream.lastEventID, hp, id)
        XCTAssertGreaterThanOrEqual(Int(stream.lastEventID) ?? 0, 2 << 32, "ids in the new owner's range")

        // Idle: no event for longer than HAProxy's client/server time-out; keep-alive comments pass through
        // and keep the stream open.
        // The control: a request whose body never comes is cut by the same time-out meanwhile.
        let stalled = try WireConnection(port: hp)
        defer { stalled.close() }
        try stalled.send(
            raw: "POST /api/sessions/\(id)/greeting/name HTTP/1.1\r\nHost: bff\r\n"
                + "Content-Type: application/json\r\nContent-Length: 20\r\n\r\n")
        let comments = stream.commentCount
        XCTAssertFalse(
            s2?.waitForClose(timeout: inactivity + 1.5) ?? true,
            "the idle stream outlived HAProxy's inactivity time-out")
        XCTAssertGreaterThanOrEqual(stream.commentCount - comments, 2, "keep-alive comments came through HAProxy")
        XCTAssertTrue(stalled.waitForClose(timeout: 0.1), "HAProxy's \(inactivity) s inactivity time-out is in force")
        XCTAssertEqual(try input(hp, id, "greeting/name", key: "idle-name", body: #"{"value":"idle"}"#), 21)
        XCTAssertEqual(try input(hp, id, "greeting/greet", key: "idle-greet", body: nil), 22)
        try read(stream, untilLabel: "Hello, IDLE!", into: &state)
        try assertStateEquals(state, lastID: stream.lastEventID, hp, id)
        print("haproxy: test took \(Date().timeIntervalSince(started)) s")
    }

    /// The lease ("holder|token") of session hash `session`.
    private func redisLease(port: Int, session: String) throws -> String {
        try Spawn.run("/usr/bin/redis-cli", ["-p", "\(port)", "HGET", session, "lease"]).output
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
