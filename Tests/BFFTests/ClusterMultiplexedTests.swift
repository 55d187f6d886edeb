import JSON
import WireClient
import XCTest

@testable import BFF

/// A multiplexed stream in cluster mode: one stream on node C carries sessions run by A and by B
/// (each fed by its session's Redis channel), with the same ids, replay and end as their own streams.
class ClusterMultiplexedTests: ClusterTestCase {
    func testAStreamOnOneNodeCarriesSessionsRunByOthersAndResumesFromItsPosition() throws {
        let (a, b, c) = (try node("a"), try node("b"), try node("c"))
        let (x, y) = (try a.createSession(), try b.createSession())
        let path = "/api/events?sessions=\(x),\(y)"
        var clients = MultiplexedStreamTests.Clients()
        var position = ""
        do {
            let conn = try WireConnection(port: c.port, timeout: 10)
            defer { conn.close() }
            let (head, reader) = try conn.openEventStream(path)
            XCTAssertEqual(head.status, 200)
            let first = try reader.next(2)
            XCTAssertEqual(first.map(\.event), ["snapshot", "snapshot"])
            for e in first { try clients.apply(e) }
            XCTAssertEqual(try name(a, x, "ann").status, 202)
            XCTAssertEqual(try name(b, y, "bob").status, 202)
            for e in try reader.next(2) { try clients.apply(e) }
            XCTAssertEqual(reader.lastEventID, "\((1 << 32) + 1).\((1 << 32) + 1)", "the stored ids, per session")
            position = reader.lastEventID
        }
        // Missed while away, then a reconnect to another node with the position.
        XCTAssertEqual(try greet(a, x).status, 202)
        XCTAssertEqual(try name(b, y, "").status, 202)
        let conn = try WireConnection(port: a.port, timeout: 10)
        defer { conn.close() }
        let (_, reader) = try conn.openEventStream(path, headers: [("Last-Event-ID", position)])
        // Each session: its replay, then the current status (not part of the history in cluster mode).
        let resumed = try reader.next(4)
        XCTAssertEqual(resumed.map(\.event), ["greeting", "status", "greeting", "status"])
        for e in resumed { try clients.apply(e) }
        XCTAssertEqual(clients.sessions[x]?.snapshot, try c.state(x))
        XCTAssertEqual(clients.sessions[y]?.snapshot, try c.state(y))
        // A delete through a third node ends that session on the stream; the other goes on.
        XCTAssertEqual(try conn.requestOnOtherConnection(port: c.port, "DELETE", "/api/sessions/\(x)").status, 204)
        let end = try XCTUnwrap(reader.next(until: "end").last)
        XCTAssertEqual(try JSONValue.parse(end.data), ["session": .string(x), "reason": "deleted"])
        XCTAssertEqual(try name(b, y, "again").status, 202)
        XCTAssertEqual(try reader.next()?.event, "greeting")
    }
}
