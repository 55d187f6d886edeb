import EventHTTP
import GitHubSimulator
import XCTest

@testable import BFF

/// `ClusterLoopState`'s streamed sessions by slice: the periodic check of a slice visits exactly the
/// sessions streamed on the loop in that slice, however sessions come and go (the last of a slice takes a
/// removed one's place).
final class StreamedSlicesTests: XCTestCase {
    func testEachSliceHoldsExactlyItsStreamedSessionsThroughAddsAndRemoves() {
        // Never run: the state only needs a loop to make its timers with.
        var state = ClusterLoopState(loop: EventLoop(index: 0))
        let slices = 7
        var live: [String: StreamedSession] = [:]
        var rng = SplitMix64(seed: 20)
        for step in 0..<2_000 {
            if live.isEmpty || rng.next() % 3 != 0 {
                let id = "s\(step)"
                let session = StreamedSession(slot: state.takeSlot(of: slices))
                state.addFed(session, id: id)
                live[id] = session
            } else {
                let victim = live.keys.sorted()[Int(rng.next() % UInt64(live.count))]
                state.removeFed(live.removeValue(forKey: victim)!, id: victim)
            }
            if step % 97 == 0 || step == 1_999 { check(state, live: live, slices: slices) }
        }
        // Removing one twice, or one never added, changes nothing.
        state.removeFed(StreamedSession(slot: 3), id: "gone")
        if let (id, some) = live.first {
            state.removeFed(some, id: id)
            live[id] = nil
            state.removeFed(some, id: id)
        }
        // A stale session under an id that another one holds now leaves that other one in place.
        if let (id, current) = live.first {
            state.removeFed(StreamedSession(slot: current.slot), id: id)
            XCTAssertTrue(state.fed[id] === current)
        }
        check(state, live: live, slices: slices)
    }

    private func check(_ state: ClusterLoopState, live: [String: StreamedSession], slices: Int) {
        XCTAssertEqual(Set(state.fed.keys), Set(live.keys))
        var seen = 0
        for slice in 0..<slices {
            let listed = state.fedSessions(inSlice: slice).map(ObjectIdentifier.init)
            XCTAssertEqual(listed.count, Set(listed).count, "slice \(slice) lists a session twice")
            let expected = live.values.filter { $0.slot == slice }.map(ObjectIdentifier.init)
            XCTAssertEqual(Set(listed), Set(expected), "slice \(slice)")
            for (i, session) in state.fedSessions(inSlice: slice).enumerated() {
                XCTAssertEqual(Int(session.sliceIndex), i, "a session's place in slice \(slice)")
            }
            seen += listed.count
        }
        XCTAssertEqual(seen, live.count)
        XCTAssertTrue(state.fedSessions(inSlice: slices + 5).isEmpty)
    }
}
