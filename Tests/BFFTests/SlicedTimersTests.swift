import ClusterStore
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
            // The clock reads just past a slice's start (100.0 s, slices of 0.5 s): deadlines 0 to
            // 0.03 s from now all fall in the slice that ends at 100.5 s, 0.499 s from now.
            timers = SlicedTimers(loop: loop, width: 0.5, now: { 100.001 })
            scheduledAt = Date().timeIntervalSince1970
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
        onLoop(loop) {}  // the runSoon job queued by "a" has run by now
        // One callback for the slice (separate timers would let "soon" run between "a" and "b"), in
        // the order scheduled, then the iteration's jobs.
        XCTAssertEqual(log, ["a", "b", "c", "soon"])
        XCTAssertFalse(log.contains("cancelled"))
        XCTAssertGreaterThanOrEqual(ranAt - scheduledAt, 0.45, "at the slice's end, not at the deadline")
        XCTAssertLessThan(ranAt - scheduledAt, 0.9, "at this slice's end, not the next one's (0.999 s)")
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
    /// Lease keepers on the slices (`LeaseTimers`): an armed keeper renews when its slice runs, even when the
    /// only work in that slice was cancelled; one stopped does not; one dropped without `stop` is not kept
    /// alive by its timer (it would renew forever).
    func testLeaseKeepersRenewWhenTheirSliceRunsAndStoppedOrDroppedOnesDoNot() throws {
        let loop = startedLoop()
        defer { loop.stop() }
        nonisolated(unsafe) var timers: SlicedTimers!
        nonisolated(unsafe) var running: LeaseKeeper!
        nonisolated(unsafe) var stopped: LeaseKeeper!
        nonisolated(unsafe) weak var dropped: LeaseKeeper?
        let renewed = DispatchSemaphore(value: 0)
        nonisolated(unsafe) let neverLost = ClosureLeaseHolder { _ in XCTFail("lost") }
        onLoop(loop) {
            timers = SlicedTimers(loop: loop, width: 0.05)
            let store = InMemorySessionStore { Int64(Date().timeIntervalSince1970 * 1000) }
            var leases: [Lease] = []
            for id in ["a", "b", "c"] {
                store.create(sessionID: id, holder: "n", state: []) { leases.append(try! $0.get()) }
            }
            let keeping = LeaseKeeping(store: store, ttlSeconds: 30, interval: 0.1, timers: timers)
            running = LeaseKeeper(lease: leases[0], keeping: keeping, holder: neverLost)
            stopped = LeaseKeeper(lease: leases[1], keeping: keeping, holder: neverLost)
            var gone: LeaseKeeper? = LeaseKeeper(lease: leases[2], keeping: keeping, holder: neverLost)
            for k in [running!, stopped!, gone!] { k.start(firstDelay: 0.01) }
            // A work in the keepers' slice, cancelled: the slice stays for the keepers.
            let cancel = timers.schedule(after: 0.01) { XCTFail("cancelled") }
            cancel()
            stopped.stop()
            dropped = gone
            gone = nil
            // Two slices later the running keeper has renewed (its answer came: `lastRoundTrip`).
            _ = timers.schedule(after: 0.12) { renewed.signal() }
        }
        XCTAssertNil(dropped, "the timers hold a keeper weakly")
        XCTAssertEqual(renewed.wait(timeout: .now() + 5), .success)
        nonisolated(unsafe) var answered: (Bool, Bool) = (false, false)
        onLoop(loop) { answered = (running.lastRoundTrip != nil, stopped.lastRoundTrip != nil) }
        XCTAssertTrue(answered.0, "the armed keeper renewed when its slice ran")
        XCTAssertFalse(answered.1, "the stopped one did not")
    }
}
