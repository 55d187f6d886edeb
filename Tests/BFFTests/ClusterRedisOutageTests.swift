import Foundation
import Glibc
import JSON
import RedisTestSupport
import WireClient
import XCTest

/// The contract's "Redis unavailable" with real `bff` processes on one real `redis-server`: Redis is
/// killed (`SIGKILL`) or stopped (`SIGSTOP`) while three nodes serve sessions with open streams. While
/// it is away every node answers `/readyz` `503`, refuses inputs (and every other request that needs
/// Redis) with `503` + `Retry-After` problem JSON, never `202`, and keeps its streams open; once it is
/// back (same port) they reconnect by themselves, `/readyz` is `200` again, inputs are accepted, the
/// streams catch up, and every acknowledged input was applied exactly once (`inputSeq` gapless).
/// Every wait polls an observable state with a deadline.
final class ClusterRedisOutageTests: XCTestCase {
    private var bff: String { ChildProcess.buildFolder + "/bff" }

    private func startNode(redis: RedisServerProcess, name: String, threads: Int) throws -> (ChildProcess, Int) {
        let p = try ChildProcess(
            bff,
            [
                "--port", "0", "--threads", "\(threads)", "--cache-file", "none", "--redis-url", redis.url,
                "--node-id", name, "--lease-ttl", "1", "--keep-alive", "1",
            ],
            environment: ["GITHUB_API_URL": "http://127.0.0.1:9", "LOG_LEVEL": "error"])
        let port = try XCTUnwrap(p.waitForPort(marker: "bff listening"), "bff printed no port: \(p.stderrText)")
        try poll("\(name) ready", within: 10) { Self.ready(port) == 200 }
        return (p, port)
    }

    private static func ready(_ port: Int) -> Int? { try? WireConnection.get(port: port, path: "/readyz").status }

    /// Polls `condition` every 20 ms until it holds; throws after `seconds`.
    private func poll(_ what: String, within seconds: Double, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while try !condition() {
            if Date() > deadline { throw Failure("not within \(seconds) s: \(what)") }
            usleep(20_000)
        }
    }

    private struct Failure: Error, CustomStringConvertible {
        var description: String
        init(_ d: String) { description = d }
    }

    private func nameInput(_ port: Int, _ id: String, key: String, value: String) throws -> WireResponse {
        let c = try WireConnection(port: port, timeout: 10)
        defer { c.close() }
        return try c.request(
            "POST", "/api/sessions/\(id)/greeting/name",
            headers: [("Content-Type", "application/json"), ("Idempotency-Key", key)],
            body: Array(#"{"value":"\#(value)"}"#.utf8))
    }

    /// Sends the keyed input until it is acknowledged (only `503` in between); its `inputSeq`.
    private func acknowledged(_ port: Int, _ id: String, key: String, value: String, within seconds: Double = 10)
        throws -> Int?
    {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            let r = try nameInput(port, id, key: key, value: value)
            if r.status == 202 { return try JSONValue.parse(r.body)["inputSeq"]?.intValue }
            XCTAssertEqual(r.status, 503, "only 503 until Redis answers again: \(r)")
            usleep(50_000)
        }
        return nil
    }

    /// A `503` problem document with `Retry-After`: what every request needing Redis gets while it is away.
    private func assertUnavailable(
        _ r: WireResponse, _ what: String, file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertEqual(r.status, 503, "\(what): \(r)", file: file, line: line)
        XCTAssertEqual(r.header("Content-Type"), "application/problem+json", what, file: file, line: line)
        XCTAssertNotNil(r.header("Retry-After").flatMap { Int($0) }, "\(what): Retry-After", file: file, line: line)
        let problem = try? JSONValue.parse(r.body)
        XCTAssertEqual(problem?["status"]?.intValue, 503, what, file: file, line: line)
    }

    /// One open stream and the ids it delivered.
    private final class Watch {
        let connection: WireConnection
        let events: EventStreamReader
        let session: String
        let node: String
        var ids: [Int] = []
        var last: [String: String] = [:]

        init(port: Int, node: String, session: String) throws {
            connection = try WireConnection(port: port, timeout: 10)
            let (head, events) = try connection.openEventStream("/api/sessions/\(session)/events")
            guard head.status == 200 else { throw Failure("stream on \(node): \(head)") }
            self.events = events
            self.session = session
            self.node = node
        }

        /// Reads events until the stream has delivered event id `seq` (or a snapshot at it); 0: the first event.
        func read(upTo seq: Int, within seconds: Double) throws {
            let deadline = Date().addingTimeInterval(seconds)
            while (ids.last ?? -1) < seq {
                let left = deadline.timeIntervalSinceNow
                guard left > 0 else {
                    throw Failure("stream of \(session) on \(node) stopped at \(ids.last ?? 0) < \(seq)")
                }
                let event: SSEEvent?
                do { event = try events.next(timeout: left) } catch {
                    throw Failure("stream of \(session) on \(node) at \(ids.last ?? -1), waiting for \(seq): \(error)")
                }
                guard let e = event else { throw Failure("stream on \(node) ended") }
                if let id = e.id.flatMap({ Int($0) }) {
                    if let previous = ids.last, id <= previous {
                        throw Failure("stream on \(node): id \(id) after \(previous)")
                    }
                    ids.append(id)
                }
                last[e.event] = e.data
            }
        }

        /// True when the stream carried a keep-alive comment within `seconds` and no event or end.
        func staysOpen(for seconds: Double) -> Bool {
            let comments = events.commentCount
            do {
                _ = try events.next(timeout: seconds)
                return false  // an event or the end: neither is expected while Redis is away
            } catch {
                return events.commentCount > comments
            }
        }
    }

    private func state(_ port: Int, _ id: String) throws -> JSONValue {
        let r = try WireConnection.get(port: port, path: "/api/sessions/\(id)/state")
        guard r.status == 200 else { throw Failure("state of \(id): \(r)") }
        return try JSONValue.parse(r.body)
    }

    /// Redis is killed while three nodes serve two sessions, each streamed on the other nodes, and
    /// started again on the same port with its append-only file (`appendfsync always`, what
    /// docs/CLUSTER.md asks for "an acknowledged input is never lost" across a Redis crash).
    func testRedisKilledAndRestartedWithItsDataLosesNoAcknowledgedInputAndStreamsResume() throws {
        let dir = NSTemporaryDirectory() + "redis-aof-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let redis = try RedisServerProcess(extraArguments: [
            "--appendonly", "yes", "--appendfsync", "always", "--dir", dir,
        ])
        defer { redis.kill() }
        let (a, portA) = try startNode(redis: redis, name: "a", threads: 2)
        let (b, portB) = try startNode(redis: redis, name: "b", threads: 1)
        let (c, portC) = try startNode(redis: redis, name: "c", threads: 1)
        defer { for n in [a, b, c] { n.send(SIGKILL) } }
        let ports = [portA, portB, portC]

        let s1 = try XCTUnwrap(
            JSONValue.parse(try WireConnection.post(port: portA, path: "/api/sessions", body: []).body)["id"]?
                .stringValue)
        let s2 = try XCTUnwrap(
            JSONValue.parse(try WireConnection.post(port: portB, path: "/api/sessions", body: []).body)["id"]?
                .stringValue)
        let watches = [
            try Watch(port: portB, node: "b", session: s1), try Watch(port: portC, node: "c", session: s1),
            try Watch(port: portA, node: "a", session: s2), try Watch(port: portC, node: "c", session: s2),
        ]
        for w in watches { try w.read(upTo: 0, within: 10) }  // the first snapshot

        // Three inputs each, at the owner and elsewhere (forwarded).
        for i in 1...3 {
            XCTAssertEqual(try acknowledged(ports[i % 3], s1, key: "k\(i)", value: "one\(i)"), i)
            XCTAssertEqual(try acknowledged(ports[(i + 1) % 3], s2, key: "k\(i)", value: "two\(i)"), i)
        }
        for w in watches {
            try w.read(upTo: try state(portA, w.session)["seq"]?.intValue ?? 0, within: 10)
        }

        let errorsBefore = try ports.map { try Self.sample($0, "bff_redis_errors_total") }
        redis.kill()
        for (n, port) in ports.enumerated() {
            try poll("node \(n): /readyz 503 while Redis is down", within: 10) { Self.ready(port) == 503 }
        }
        let readyz = try WireConnection.get(port: portA, path: "/readyz")
        assertUnavailable(readyz, "/readyz")
        for port in ports {
            for id in [s1, s2] {
                assertUnavailable(try nameInput(port, id, key: "k4", value: "down"), "input while Redis is down")
                assertUnavailable(
                    try WireConnection.get(port: port, path: "/api/sessions/\(id)/state"), "state while Redis is down")
                let opening = try WireConnection(port: port)
                let (head, _) = try opening.openEventStream("/api/sessions/\(id)/events")
                opening.close()
                assertUnavailable(head, "a new stream while Redis is down")
            }
            assertUnavailable(
                try WireConnection.post(port: port, path: "/api/sessions", body: []), "create while Redis is down")
        }
        for (n, port) in ports.enumerated() {
            XCTAssertGreaterThan(try Self.sample(port, "bff_redis_errors_total"), errorsBefore[n], "node \(n) counted")
        }
        // Longer than the lease TTL (1 s): the owners' keepers give their sessions up meanwhile.
        for w in watches { XCTAssertTrue(w.staysOpen(for: 2.5), "stream of \(w.session) on \(w.node) open") }

        try redis.start()
        for (n, port) in ports.enumerated() {
            try poll("node \(n): /readyz 200 once Redis is back", within: 15) { Self.ready(port) == 200 }
        }
        // The refused input is applied now, once; the acknowledged ones were kept and are not re-applied.
        for (n, id) in [s1, s2].enumerated() {
            XCTAssertEqual(try acknowledged(ports[n + 1], id, key: "k4", value: "back\(n)"), 4)
            XCTAssertEqual(try acknowledged(ports[n], id, key: "k2", value: "again"), 2, "a retry is not re-applied")
            XCTAssertEqual(try acknowledged(ports[2], id, key: "k5", value: "last\(n)"), 5)
        }
        for id in [s1, s2] {
            let greet = try WireConnection.post(port: portB, path: "/api/sessions/\(id)/greeting/greet", body: [])
            XCTAssertEqual(greet.status, 202)
            XCTAssertEqual(try JSONValue.parse(greet.body)["inputSeq"]?.intValue, 6, "inputSeq gapless")
        }
        for w in watches {
            let final = try state(portC, w.session)
            try w.read(upTo: final["seq"]?.intValue ?? 0, within: 15)
            XCTAssertEqual(w.ids.last, final["seq"]?.intValue, "stream of \(w.session) on \(w.node) caught up")
        }
        for port in ports {
            XCTAssertEqual(try state(port, s1)["viewModels"]?["greeting"]?["label"], "Hello, LAST0!")
            XCTAssertEqual(try state(port, s2)["viewModels"]?["greeting"]?["label"], "Hello, LAST1!")
        }
    }

    /// Redis is stopped (`SIGSTOP`: its connections stay up, nothing answers) while a session is run on
    /// A and streamed on B, and a third node C has nothing to do: every node reports `503` on `/readyz`
    /// (C only through its connections' health checks), an input sent just as Redis stopped is refused
    /// after its commit's time-out (it may still be applied when Redis continues: its retry with the same
    /// key gets the same number either way), later ones at once; after `SIGCONT` service resumes.
    func testRedisStoppedAndContinuedIsNoticedByEveryNodeAndNoAcknowledgedInputIsLostOrRepeated() throws {
        let redis = try RedisServerProcess()
        defer { redis.kill() }
        let (a, portA) = try startNode(redis: redis, name: "a", threads: 1)
        let (b, portB) = try startNode(redis: redis, name: "b", threads: 1)
        let (c, portC) = try startNode(redis: redis, name: "c", threads: 1)
        defer {
            redis.signal(SIGCONT)
            for n in [a, b, c] { n.send(SIGKILL) }
        }
        let id = try XCTUnwrap(
            JSONValue.parse(try WireConnection.post(port: portA, path: "/api/sessions", body: []).body)["id"]?
                .stringValue)
        let watch = try Watch(port: portB, node: "b", session: id)
        try watch.read(upTo: 0, within: 10)
        XCTAssertEqual(try acknowledged(portA, id, key: "k1", value: "one"), 1)
        XCTAssertEqual(try acknowledged(portB, id, key: "k2", value: "two"), 2)
        try watch.read(upTo: try state(portA, id)["seq"]?.intValue ?? 0, within: 10)

        redis.signal(SIGSTOP)
        try poll("redis-server stopped", within: 5) { redis.isStopped }
        let sentAt = Date()
        let early = try nameInput(portA, id, key: "k3", value: "three")
        assertUnavailable(early, "an input whose commit Redis does not answer")
        print("cluster: an input while Redis is stopped: 503 after \(Date().timeIntervalSince(sentAt)) s")
        for (n, port) in [portA, portB, portC].enumerated() {
            try poll("node \(n): /readyz 503 while Redis is stopped", within: 15) { Self.ready(port) == 503 }
        }
        for port in [portA, portB] {
            assertUnavailable(try nameInput(port, id, key: "k3", value: "three"), "input while Redis is stopped")
        }
        XCTAssertTrue(watch.staysOpen(for: 2.5), "the stream stays open")

        redis.signal(SIGCONT)
        for (n, port) in [portA, portB, portC].enumerated() {
            try poll("node \(n): /readyz 200 once Redis answers", within: 15) { Self.ready(port) == 200 }
        }
        XCTAssertEqual(try acknowledged(portB, id, key: "k3", value: "three"), 3, "applied once")
        XCTAssertEqual(try acknowledged(portC, id, key: "k1", value: "again"), 1, "a retry is not re-applied")
        XCTAssertEqual(try acknowledged(portA, id, key: "k4", value: "four"), 4)
        let greet = try WireConnection.post(port: portC, path: "/api/sessions/\(id)/greeting/greet", body: [])
        XCTAssertEqual(try JSONValue.parse(greet.body)["inputSeq"]?.intValue, 5, "inputSeq gapless: \(greet)")
        let final = try state(portB, id)
        XCTAssertEqual(final["viewModels"]?["greeting"]?["label"], "Hello, FOUR!")
        try watch.read(upTo: final["seq"]?.intValue ?? 0, within: 15)
        XCTAssertEqual(watch.ids.last, final["seq"]?.intValue, "the stream caught up")
        XCTAssertTrue(watch.last["greeting"]?.contains("Hello, FOUR!") ?? false, "\(watch.last)")
    }

    /// Without persistence (the default of `RedisServerProcess`) a restarted Redis is empty: the session is
    /// gone on every node (`404`), its stream ends, and an input is never applied to a rewound session.
    func testRedisRestartedEmptyEndsTheSessionsInsteadOfRewindingThem() throws {
        let redis = try RedisServerProcess()
        defer { redis.kill() }
        let (a, portA) = try startNode(redis: redis, name: "a", threads: 1)
        let (b, portB) = try startNode(redis: redis, name: "b", threads: 1)
        defer { for n in [a, b] { n.send(SIGKILL) } }
        let id = try XCTUnwrap(
            JSONValue.parse(try WireConnection.post(port: portA, path: "/api/sessions", body: []).body)["id"]?
                .stringValue)
        let watch = try Watch(port: portB, node: "b", session: id)
        try watch.read(upTo: 0, within: 10)
        XCTAssertEqual(try acknowledged(portA, id, key: "k1", value: "one"), 1)
        redis.kill()
        try poll("A: /readyz 503", within: 10) { Self.ready(portA) == 503 }
        try redis.start()
        for port in [portA, portB] { try poll("/readyz 200", within: 15) { Self.ready(port) == 200 } }
        for port in [portA, portB] {
            XCTAssertEqual(
                try nameInput(port, id, key: "k2", value: "two").status, 404, "not applied to a rewound session")
            XCTAssertEqual(try WireConnection.get(port: port, path: "/api/sessions/\(id)/state").status, 404)
        }
        let rest = try watch.events.next(until: "end", timeout: 15)
        XCTAssertEqual(rest.last?.event, "end", "the stream ends: \(rest)")
        XCTAssertNil(try watch.events.next(timeout: 5), "and closes")
    }

    /// The value of the sample `name` in the node's `/metrics`; 0 when absent.
    private static func sample(_ port: Int, _ name: String) throws -> Double {
        let text = String(decoding: try WireConnection.get(port: port, path: "/metrics").body, as: UTF8.self)
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.dropFirst(name.count + 1)) ?? -1
        }
        return 0
    }
}
