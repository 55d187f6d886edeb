import ClusterStore
import XCTest

final class StreamCatchUpTests: XCTestCase {
    func e(_ id: UInt64) -> StoredEvent { StoredEvent(id: id, payload: Array("\(id)".utf8)) }

    func testLiveEventsDuringTheReplayAreWrittenOnceAndInOrder() {
        var c = StreamCatchUp(lastEventID: 10)
        XCTAssertEqual(c.live(e(12)), [], "held back while catching up")
        XCTAssertEqual(c.live(e(13)), [])
        // The history was read after 12 was published, before 13.
        XCTAssertEqual(c.replayed(.events([e(11), e(12)])), .write([e(11), e(12), e(13)]))
        XCTAssertEqual(c.live(e(13)), [], "a duplicate is dropped")
        XCTAssertEqual(c.live(e(14)), [e(14)])
        XCTAssertEqual(c.lastWritten, 14)
    }

    func testUpToDateFlushesWhatArrivedMeanwhile() {
        var c = StreamCatchUp(lastEventID: 5)
        _ = c.live(e(6))
        XCTAssertEqual(c.replayed(.upToDate), .write([e(6)]))
        XCTAssertFalse(c.isCatchingUp)
    }

    func testSnapshotThenNewerHeldEvents() {
        var c = StreamCatchUp(lastEventID: 3)
        _ = c.live(e(1 << 32 + 7))
        _ = c.live(e(1 << 32 + 8))
        XCTAssertEqual(c.replayed(.snapshotNeeded), .snapshot)
        XCTAssertEqual(c.snapshotWritten(seq: 1 << 32 + 7), [e(1 << 32 + 8)])
        XCTAssertEqual(c.live(e(1 << 32 + 9)), [e(1 << 32 + 9)])
    }

    func testAfterAFeedReconnectLiveEventsWaitForTheNextReplay() {
        var c = StreamCatchUp(lastEventID: 0)
        XCTAssertEqual(c.replayed(.upToDate), .write([]))
        XCTAssertEqual(c.live(e(1)), [e(1)])
        c.restart()
        XCTAssertEqual(c.live(e(4)), [])
        XCTAssertEqual(c.replayed(.events([e(2), e(3), e(4)])), .write([e(2), e(3), e(4)]))
    }
}
