import Features
import GitHubSearch
import JSON
import ViewModels
import XCTest

/// The app-wide rate limit (the shared upstream status's `blockedUntil`) reaches every session's `search`:
/// a session that never searched stops offering a search the app would refuse, counts down to the same
/// time, and offers searching again when the block ends, by its own timer or by the app's word.
final class SearchUpstreamBlockTests: XCTestCase {
    typealias F = SearchFixtures

    func testABlockDisablesSearchingInASessionThatNeverSearchedAndItsTimerEndsIt() async throws {
        let h = SearchHarness()
        try h.send("query", "haskell")
        XCTAssertEqual(h.events.take().last?.outputs["searchEnabled"], true)

        // 2027-01-15T08:00:00Z now; the app refuses searches for 40 s.
        h.vm.receive(UpstreamStatus(reachable: true, message: "m", blockedUntil: 1_800_000_040))
        XCTAssertEqual(
            h.events.take(),
            [
                ViewModelEvent(
                    inputSeq: nil, outputs: ["searchEnabled": false, "retryAt": "2027-01-15T08:00:40Z"])
            ])
        // Submitting does nothing (the strict fake, told nothing, would fail the test if called).
        try h.send("submit")
        XCTAssertEqual(h.events.take(), [])
        // The same block reported again changes nothing.
        h.vm.receive(UpstreamStatus(reachable: true, message: "m", blockedUntil: 1_800_000_040))
        XCTAssertEqual(h.events.take(), [])

        h.clock.advance(40)
        await h.owner.runNext()
        XCTAssertEqual(
            h.events.take(), [ViewModelEvent(inputSeq: nil, outputs: ["searchEnabled": true, "retryAt": nil])])
        XCTAssertEqual(h.vm.runningEffects, 0)
        h.verifyDone()
    }

    func testTheAppEndingTheBlockClearsTheCountdownAndCancelsItsTimer() async throws {
        let h = SearchHarness()
        try h.send("query", "swift")
        _ = h.events.take()
        h.vm.receive(UpstreamStatus(blockedUntil: 1_800_000_060))
        XCTAssertEqual(h.vm.runningEffects, 1, "the countdown's timer")
        _ = h.events.take()

        h.vm.receive(UpstreamStatus())
        XCTAssertEqual(
            h.events.take(), [ViewModelEvent(inputSeq: nil, outputs: ["searchEnabled": true, "retryAt": nil])])
        XCTAssertEqual(h.vm.runningEffects, 0, "the timer was cancelled")
        await h.owner.runNext()  // the cancelled timer's task ends; its action is dropped
        XCTAssertEqual(h.events.take(), [])
        XCTAssertEqual(h.vm.snapshot["retryAt"], .null)
        h.verifyDone()
    }

    func testABlockThatAlreadyEndedChangesNothing() {
        let h = SearchHarness()
        h.vm.receive(UpstreamStatus(blockedUntil: 1_799_999_990))
        XCTAssertEqual(h.events.take(), [])
        XCTAssertEqual(h.vm.runningEffects, 0)
        h.verifyDone()
    }
}
