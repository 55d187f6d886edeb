import JSON
import RedisTestSupport
import WireClient
import XCTest

/// The shared `status` in cluster mode is one value for the cluster: a change reaches every stream
/// from the node hosting it, and costs Redis nothing per session (no commit in each session).
final class ClusterBroadcastTests: ClusterTestCase {
    /// Streams `count` sessions run by `a` (multiplexed, 32 a stream) and counts the Redis `XADD`s (every
    /// commit appends its events with one) a status broadcast costs once every stream has received it.
    private func broadcastCost(sessions count: Int) throws -> (xadds: Int, received: Int) {
        let a = try node("a", threads: 1)
        var ids: [String] = []
        for _ in 0..<count { ids.append(try a.createSession()) }
        var readers: [(WireConnection, EventStreamReader, sessions: Int)] = []
        for chunk in stride(from: 0, to: ids.count, by: 32).map({ Array(ids[$0..<min($0 + 32, ids.count)]) }) {
            let c = try WireConnection(port: a.port, timeout: 10)
            let (_, r) = try c.openEventStream("/api/events?sessions=" + chunk.joined(separator: ","))
            XCTAssertEqual(try r.next(chunk.count).filter { $0.event == "snapshot" }.count, chunk.count)
            readers.append((c, r, chunk.count))
        }
        defer { for (c, _, _) in readers { c.close() } }
        let before = try calls("xadd")
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
        return (try calls("xadd") - before, received)
    }

    func testABroadcastCostsRedisTheSameForTenSessionsAsForAThousand() throws {
        let ten = try broadcastCost(sessions: 10)
        redis.kill()
        redis = try RedisServerProcess()
        let thousand = try broadcastCost(sessions: 1000)
        XCTAssertEqual(ten.received, 10, "every session's stream got the status")
        XCTAssertEqual(thousand.received, 1000, "every session's stream got the status")
        XCTAssertEqual(ten.xadds, thousand.xadds, "a broadcast's Redis work does not grow with the sessions")
        XCTAssertEqual(thousand.xadds, 0, "no per-session commit")
    }

    /// A client that comes back with `Last-Event-ID` after a status change it missed converges: the
    /// replay is followed by the current status (the status is not in the sessions' history).
    func testAResumedStreamGetsTheCurrentStatusAfterItsReplay() throws {
        let a = try node("a")
        let id = try a.createSession()
        let (c, r) = try a.stream(id)
        _ = try r.next()
        XCTAssertEqual(try name(a, id, "ann").status, 202)
        let last = try XCTUnwrap(r.next(until: "greeting").last?.id)
        c.close()
        let status = #"{"reachable": false, "message": "down for a while"}"#
        _ = try WireConnection(port: a.port).request(
            "POST", "/api/_test/status", headers: [("Content-Type", "application/json")], body: Array(status.utf8))
        let (_, resumed) = try a.stream(id, lastEventID: last)
        let e = try XCTUnwrap(resumed.next())
        XCTAssertEqual(e.event, "status")
        XCTAssertEqual(try JSONValue.parse(e.data)["outputs"]?["message"], "down for a while")
        XCTAssertEqual(try a.state(id)["viewModels"]?["status"]?["message"], "down for a while")
    }
}
