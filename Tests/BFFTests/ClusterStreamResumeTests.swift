import JSON
import WireClient
import XCTest

@testable import BFF

/// A stream resumed with `Last-Event-ID` in cluster mode, on the node that runs the session and on another:
/// its first event is its replay (or a snapshot), never the shared `status` (which is not in a session's
/// history and follows the replay). With nothing missed, the status waits for the stream's first event.
final class ClusterStreamResumeTests: ClusterTestCase {
    func testAResumedStreamStartsWithItsReplayAndTheStatusFollowsIt() throws {
        let a = try node("a")
        let b = try node("b")
        let id = try a.createSession()
        XCTAssertEqual(try name(a, id, "ann").status, 202)
        let (first, events) = try b.stream(id)
        XCTAssertEqual(try events.next()?.event, "snapshot")
        first.close()
        XCTAssertEqual(try greet(a, id).status, 202)  // missed
        for node in [a, b] {
            let (c, resumed) = try node.stream(id, lastEventID: events.lastEventID)
            defer { c.close() }
            let replay = try XCTUnwrap(resumed.next())
            XCTAssertEqual(replay.event, "greeting", "the replay first, on \(node.port)")
            XCTAssertEqual(try JSONValue.parse(replay.data)["inputSeq"], 2)
            XCTAssertEqual(try resumed.next()?.event, "status", "then the current status")
        }
    }

    func testAStreamResumedWithNothingMissedGetsTheStatusOnlyAfterItsFirstEvent() throws {
        let a = try node("a")
        let b = try node("b")
        let id = try a.createSession()
        XCTAssertEqual(try name(a, id, "ann").status, 202)
        let lastID = try XCTUnwrap(a.state(id)["seq"]?.intValue)
        for (i, node) in [a, b].enumerated() {
            let (c, resumed) = try node.stream(id, lastEventID: String(lastID + i))
            defer { c.close() }
            XCTAssertThrowsError(try resumed.next(timeout: 0.5), "nothing to replay: no status before an event")
            XCTAssertEqual(try a.post(id, "search", "query", #"{"value":"q\#(i)"}"#).status, 202)
            let next = try XCTUnwrap(resumed.next())
            XCTAssertEqual(next.event, "search", "the first event is the next one")
            XCTAssertEqual(next.id, String(lastID + i + 1))
            XCTAssertEqual(try resumed.next()?.event, "status", "the status follows it")
        }
    }
}
