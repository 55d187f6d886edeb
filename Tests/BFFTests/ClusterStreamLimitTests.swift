import Foundation
import Glibc
import JSON
import RedisTestSupport
import WireClient
import XCTest

/// The per-session stream limit (`--max-streams-per-session`, default 4) is cluster-wide: real `bff`
/// processes on one real `redis-server` (`--lease-ttl 1`: each node's stream-liveness key is renewed every
/// 1 s, and its streams count 3 s past its last renewal). The fifth stream of a session on any node is refused with `429`;
/// closing one lets a new one in on another node at once; the streams of a node killed with `kill -9`
/// stop counting once their deadline passed.
final class ClusterStreamLimitTests: XCTestCase {
    private var bff: String { ChildProcess.buildFolder + "/bff" }

    private func startNode(redis: RedisServerProcess, name: String, threads: Int) throws -> (ChildProcess, Int) {
        let p = try ChildProcess(
            bff,
            [
                "--port", "0", "--threads", "\(threads)", "--cache-file", "none", "--redis-url", redis.url,
                "--node-id", name, "--lease-ttl", "1",
            ],
            environment: ["GITHUB_API_URL": "http://127.0.0.1:9", "LOG_LEVEL": "warning"])
        let port = try XCTUnwrap(p.waitForPort(marker: "bff listening"), "bff printed no port: \(p.stderrText)")
        try waitUntil("\(name) ready", within: 10) {
            (try? WireConnection.get(port: port, path: "/readyz").status) == 200
        }
        return (p, port)
    }

    /// Opens a stream of `id` on `port`: the answer's head (`200`: the stream's connection stays open,
    /// its snapshot read) or the refusal (its connection closed).
    private func openStream(_ id: String, port: Int) throws -> (status: WireResponse, connection: WireConnection?) {
        let c = try WireConnection(port: port, timeout: 10)
        let (head, events) = try c.openEventStream("/api/sessions/\(id)/events")
        guard head.status == 200 else {
            c.close()
            return (head, nil)
        }
        XCTAssertEqual(try events.next()?.event, "snapshot")
        return (head, c)
    }

    /// Opens a stream of `id` on `port`, retrying on `429` every 20 ms: the seconds it took.
    private func openWhenAdmitted(_ id: String, port: Int, within seconds: Double) throws -> (Double, WireConnection?) {
        let started = Date()
        while Date().timeIntervalSince(started) < seconds {
            let (r, c) = try openStream(id, port: port)
            if let c { return (Date().timeIntervalSince(started), c) }
            r.problem(429)
            usleep(20_000)
        }
        return (seconds, nil)
    }

    func testTheStreamLimitIsClusterWideAndAKilledNodesStreamsStopCountingAfterTheirDeadline() throws {
        let redis = try RedisServerProcess()
        defer { redis.kill() }
        let (a, portA) = try startNode(redis: redis, name: "a", threads: 1)
        let (b, portB) = try startNode(redis: redis, name: "b", threads: 2)
        let (c, portC) = try startNode(redis: redis, name: "c", threads: 1)
        defer {
            a.send(SIGTERM)
            b.send(SIGTERM)
            c.send(SIGKILL)
        }
        let created = try WireConnection.post(port: portA, path: "/api/sessions", body: [])
        XCTAssertEqual(created.status, 201)
        let id = try XCTUnwrap(JSONValue.parse(created.body)["id"]?.stringValue)

        // Four streams over three nodes (the default limit): each node alone is under it.
        var open: [WireConnection] = []
        for port in [portA, portB, portC, portC] {
            let (head, connection) = try openStream(id, port: port)
            XCTAssertEqual(head.status, 200, "\(head)")
            open += connection.map { [$0] } ?? []
        }
        XCTAssertEqual(open.count, 4)
        // The fifth is refused on every node, the one with a single stream included.
        for port in [portA, portB, portC] {
            let (over, connection) = try openStream(id, port: port)
            XCTAssertNil(connection)
            XCTAssertTrue(
                over.problem(429).contains("already has 4 open event streams"), "node on \(port): \(over)")
            XCTAssertEqual(over.header("Retry-After"), "5")
        }

        // Closing A's stream frees its place at once (well before its 3 s deadline) for a stream on B.
        open[0].close()
        let (afterClose, onB) = try openWhenAdmitted(id, port: portB, within: 10)
        let streamOnB = try XCTUnwrap(onB, "a closed stream kept counting")
        print("cluster: stream admitted on B \(afterClose) s after one on A closed")
        XCTAssertLessThan(afterClose, 1.5, "released on close, not left to its deadline")
        let (full, _) = try openStream(id, port: portA)
        full.problem(429)

        // kill -9 of C: its two streams count until their deadline (3 s after C's last renewal), then
        // two new ones are admitted on A and the next one is refused again.
        c.send(SIGKILL)
        _ = c.waitForExit(timeout: 5)
        XCTAssertTrue(c.hasExited)
        let killedAt = Date()
        let (stillCounted, _) = try openStream(id, port: portA)
        stillCounted.problem(429)
        let (afterKill, first) = try openWhenAdmitted(id, port: portA, within: 3 + 5)
        let firstOnA = try XCTUnwrap(first, "the dead node's streams never stopped counting")
        print("cluster: stream admitted \(Date().timeIntervalSince(killedAt)) s after kill -9 of a streaming node")
        XCTAssertGreaterThan(afterKill, 0.5, "a dead node's streams count until their deadline")
        // C's two streams were renewed together, or opened a few ms apart and not renewed yet.
        let (_, second) = try openWhenAdmitted(id, port: portA, within: 2)
        let secondOnA = try XCTUnwrap(second, "both of the dead node's places are free")
        let (third, _) = try openStream(id, port: portB)
        third.problem(429)
        // Open streams are renewed by their nodes' periodic checks: past a whole deadline (3 s) they
        // still count. (Nothing marks that moment: the passing time is what is tested.)
        usleep(3_500_000)
        let (later, _) = try openStream(id, port: portB)
        later.problem(429)
        withExtendedLifetime((open, streamOnB, firstOnA, secondOnA)) {}
    }
}
