import EventHTTP
import Foundation
import RedisTestSupport
import XCTest

@testable import BFF

/// `SlicedTimers`: work due in one slice runs in one callback, in order, at most a slice late; a
/// cancelled one does not run, and a slice left empty gives its timer back.
final class SlicedTimersTests: XCTestCase {
    /// Runs `body` on `loop` and waits for it.
    func onLoop(_ loop: EventLoop, _ body: @escaping @Sendable () -> Void) {
        let done = DispatchSemaphore(value: 0)
        loop.execute {
            body()
            done.signal()
        }
        done.wait()
    }

    func testWorkDueInOneSliceRunsInOneLoopIterationInOrderAndCancelledWorkDoesNot() throws {
        let loop = startedLoop()
        defer { loop.stop() }
        nonisolated(unsafe) var timers: SlicedTimers!
        nonisolated(unsafe) var log: [String] = []
        let ran = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var scheduledAt = 0.0
        nonisolated(unsafe) var ranAt = 0.0
        onLoop(loop) {
            timers = SlicedTimers(loop: loop, width: 0.5)
            scheduledAt = Date().timeIntervalSince1970
            // Deadlines 0.01 s apart, all in the slice that ends at the next multiple of 0.5 s at the
            // latest (unless one crosses a boundary: then two slices; the test allows for it below).
            _ = timers.schedule(after: 0.00) {
                log.append("a")
                // A job for later in this iteration: it runs after every work of this slice.
                loop.runSoon { log.append("soon") }
            }
            let cancel = timers.schedule(after: 0.01) { log.append("cancelled") }
            _ = timers.schedule(after: 0.02) { log.append("b") }
            _ = timers.schedule(after: 0.03) {
                log.append("c")
                ranAt = Date().timeIntervalSince1970
                ran.signal()
            }
            cancel()
        }
        XCTAssertEqual(ran.wait(timeout: .now() + 5), .success)
        onLoop(loop) {}  // the runSoon job has run by now (same iteration as "c", or before it)
        if log.first(where: { $0 == "soon" }) != nil, log.last == "soon" {
            XCTAssertEqual(
                log, ["a", "b", "c", "soon"], "one slice: one callback, in order, then the iteration's jobs")
        } else {
            // The four deadlines straddled a slice boundary: "a" ran in an earlier slice than "c".
            XCTAssertEqual(log.filter { $0 != "soon" }, ["a", "b", "c"])
        }
        XCTAssertFalse(log.contains("cancelled"))
        XCTAssertLessThanOrEqual(ranAt - scheduledAt, 0.03 + 0.5 + 0.1, "at most a slice late (plus scheduling)")
        nonisolated(unsafe) var pending = -1
        onLoop(loop) { pending = timers.pendingSlices }
        XCTAssertEqual(pending, 0)
    }

    func testCancellingEveryWorkOfASliceGivesItsTimerBack() throws {
        let loop = startedLoop()
        defer { loop.stop() }
        nonisolated(unsafe) var pending: [Int] = []
        nonisolated(unsafe) var timers: SlicedTimers!
        onLoop(loop) {
            timers = SlicedTimers(loop: loop, width: 0.1)
            let c1 = timers.schedule(after: 5) { XCTFail("cancelled") }
            let c2 = timers.schedule(after: 5) { XCTFail("cancelled") }
            pending.append(timers.pendingSlices)
            c1()
            pending.append(timers.pendingSlices)
            c2()
            c2()  // twice: harmless
            pending.append(timers.pendingSlices)
        }
        XCTAssertEqual(pending, [1, 1, 0])
    }
}
