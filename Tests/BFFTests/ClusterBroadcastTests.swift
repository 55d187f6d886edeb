import JSON
import RedisTestSupport
import WireClient
import XCTest

/// The shared `status` in cluster mode is one value for the cluster: a change reaches every stream
/// of every node, and costs Redis one message for the cluster, nothing per session (no commit in each
/// session).
final class ClusterBroadcastTests: ClusterTestCase {
    /// Streams `count` sessions run by node `b` (multiplexed, 32 a stream), posts a status change to node
    /// `a` (composed as `bff` is: the change goes through the cluster's status board, as one GitHub caused
    /// would), and counts the Redis `XADD`s (every commit appends its events with one) and `SPUBLISH`es
    /// the broadcast cost once every stream has received it. The subscription connections' loopback probes
    /// are off: each is an `SPUBLISH` a second, and one falling in the window counted as the broadcast's
    /// (a CI run saw 2).
    private func broadcastCost(sessions count: Int) throws -> (xadds: Int, publishes: Int, received: Int) {
        let a = try composedNode("a", probing: false)
        let b = try composedNode("b", probing: false)
        var ids: [String] = []
        for _ in 0..<count { ids.append(try b.createSession()) }
        var readers: [(WireConnection, EventStreamReader, sessions: Int)] = []
        for chunk in stride(from: 0, to: ids.count, by: 32).map({ Array(ids[$0..<min($0 + 32, ids.count)]) }) {
            let c = try WireConnection(port: b.port, timeout: 10)
            let (_, r) = try c.openEventStream("/api/events?sessions=" + chunk.joined(separator: ","))
            XCTAssertEqual(try r.next(chunk.count).filter { $0.event == "snapshot" }.count, chunk.count)
            readers.append((c, r, chunk.count))
        }
        defer { for (c, _, _) in readers { c.close() } }
        let before = (xadds: try calls("xadd"), publishes: try calls("spublish"))
        let status = #"{"reachable": false, "message": "GitHub cannot be reached"}"#
        XCTAssertEqual(
            try WireConnection(port: a.port).request(
                "POST", "/api/_test/status", headers: [("Content-Type", "application/json")],
                body: Array(status.utf8)
            ).status, 202)
        var received = 0
        for (_, r, sessions) in readers {
            // Each session of the stream gets the status (one event each, nothing else is going on).
            for e in try r.next(sessions, timeout: 10) {
                XCTAssertEqual(e.event, "status")
                XCTAssertEqual(try JSONValue.parse(e.data)["outputs"]?["reachable"], false)
                received += 1
            }
        }
        return (try calls("xadd") - before.xadds, try calls("spublish") - before.publishes, received)
    }

    func testABroadcastCostsRedisTheSameForTenSessionsAsForAThousand() throws {
        let ten = try broadcastCost(sessions: 10)
        redis.kill()
        redis = try RedisServerProcess()
        let thousand = try broadcastCost(sessions: 1000)
        XCTAssertEqual(ten.received, 10, "every session's stream on the other node got the status")
        XCTAssertEqual(thousand.received, 1000, "every session's stream on the other node got the status")
        XCTAssertEqual(ten.xadds, thousand.xadds, "a broadcast's Redis work does not grow with the sessions")
        XCTAssertEqual(thousand.xadds, 0, "no per-session commit")
        XCTAssertEqual(ten.publishes, 1, "one message for the cluster")
        XCTAssertEqual(thousand.publishes, 1, "one message for the cluster")
    }

    /// The test hook changes the status of the whole cluster, as a status GitHub caused would: a change
    /// posted to one node shows on the streams and in `GET /state` of another node's sessions. (Before,
    /// the hook applied the status on its own node only.)
    func testAStatusPostedToOneNodeReachesEveryNode() throws {
        let a = try composedNode("a")
        let b = try composedNode("b")
        let id = try b.createSession()
        let (c, r) = try b.stream(id)
        defer { c.close() }
        XCTAssertEqual(try r.next()?.event, "snapshot")
        let status = #"{"reachable": false, "message": "posted to a"}"#
        _ = try WireConnection(port: a.port).request(
            "POST", "/api/_test/status", headers: [("Content-Type", "application/json")], body: Array(status.utf8))
        let e = try XCTUnwrap(r.next(until: "status").last)
        XCTAssertEqual(try JSONValue.parse(e.data)["outputs"]?["message"], "posted to a")
        XCTAssertEqual(try b.state(id)["viewModels"]?["status"]?["message"], "posted to a")
    }

    /// A client that comes back with `Last-Event-ID` after a status change it missed converges: the
    /// replay comes first, then the current status (the status is not in the sessions' history).
    func testAResumedStreamGetsTheCurrentStatusAfterItsReplay() throws {
        let a = try node("a")
        let id = try a.createSession()
        let (c, r) = try a.stream(id)
        _ = try r.next()
        XCTAssertEqual(try name(a, id, "ann").status, 202)
        let last = try XCTUnwrap(r.next(until: "greeting").last?.id)
        c.close()
        try postStatus("down for a while", to: a, session: id)
        XCTAssertEqual(try greet(a, id).status, 202)
        let (_, resumed) = try a.stream(id, lastEventID: last)
        let replayed = try XCTUnwrap(resumed.next())
        XCTAssertEqual(replayed.event, "greeting", "the replay is the stream's first event")
        XCTAssertEqual(try JSONValue.parse(replayed.data)["outputs"]?["label"], "Hello, ANN!")
        let e = try XCTUnwrap(resumed.next())
        XCTAssertEqual(e.event, "status")
        XCTAssertEqual(try JSONValue.parse(e.data)["outputs"]?["message"], "down for a while")
    }

    /// Resumed with nothing to replay, a stream's first event is still the session's next event, never a
    /// status: the status it missed follows that event.
    func testAResumedStreamWithNothingToReplayGetsTheStatusAfterItsFirstEvent() throws {
        let a = try node("a")
        let id = try a.createSession()
        let (c, r) = try a.stream(id)
        _ = try r.next()
        XCTAssertEqual(try name(a, id, "ann").status, 202)
        let last = try XCTUnwrap(r.next(until: "greeting").last?.id)
        c.close()
        try postStatus("down for a while", to: a, session: id)
        let (_, resumed) = try a.stream(id, lastEventID: last)
        XCTAssertEqual(try greet(a, id).status, 202)
        let first = try XCTUnwrap(resumed.next())
        XCTAssertEqual(first.event, "greeting")
        XCTAssertEqual(try JSONValue.parse(first.data)["outputs"]?["label"], "Hello, ANN!")
        let e = try XCTUnwrap(resumed.next())
        XCTAssertEqual(e.event, "status")
        XCTAssertEqual(try JSONValue.parse(e.data)["outputs"]?["message"], "down for a while")
    }

    /// Posts a status through the test hook and waits until `node` applied it (the hook answers once the
    /// status is posted to Redis; the node applies it when Redis announces it).
    private func postStatus(_ message: String, to node: LiveApp, session id: String) throws {
        let status = #"{"reachable": false, "message": "\#(message)"}"#
        _ = try WireConnection(port: node.port).request(
            "POST", "/api/_test/status", headers: [("Content-Type", "application/json")], body: Array(status.utf8))
        try waitUntil("the status applied on the node", within: 5) {
            try node.state(id)["viewModels"]?["status"]?["message"] == .string(message)
        }
    }
}
