import Synchronization
import XCTest

@testable import EventLoop

/// `EventLoop.lateness(since:)`: how long a loop could not run within a span, from its lag probe's readings.
final class LagProbeTests: XCTestCase {
    /// Readings are cut to the span: a reading 0.8 s late taken 0.3 s after the mark counts 0.3 s; readings
    /// before the mark and readings below the jitter threshold count nothing; the ring keeps the last 8.
    func testLatenessWithinASpanIsTheLongestReadingCutToTheSpan() {
        var r = LateReadings()
        let s: UInt64 = 1_000_000_000
        r.record(at: 10 * s, late: 0.9)  // before the mark below
        r.record(at: 12 * s, late: 0.04)  // jitter
        XCTAssertEqual(r.longest(since: 11 * s), 0)
        r.record(at: 11 * s + 300_000_000, late: 0.8)
        XCTAssertEqual(r.longest(since: 11 * s), 0.3, accuracy: 1e-9)
        r.record(at: 13 * s, late: 0.5)
        XCTAssertEqual(r.longest(since: 11 * s), 0.5, accuracy: 1e-9)
        XCTAssertEqual(r.longest(since: 9 * s), 0.9, accuracy: 1e-9)
        for i in 0..<8 { r.record(at: 20 * s + UInt64(i), late: 0.1) }  // the older readings leave the ring
        XCTAssertEqual(r.longest(since: 9 * s), 0.1, accuracy: 1e-9)
    }

    /// A loop blocked in a callback for 0.3 s: its probe (every 20 ms) reads it late, and `lateness(since:)`
    /// over a span that contains the block says so; a span after it says 0.
    func testAProbeSeesABlockedLoop() throws {
        let loop = EventLoop()
        let thread = loop.startThread(name: "lag-probe-test")
        defer {
            loop.stop()
            pthread_join(thread, nil)  // no thread outlives its test (ThreadSanitizer reports a leak)
        }
        let result = Mutex<(during: Double, after: Double)?>(nil)
        let done = expectation(description: "measured")
        loop.execute {
            let probe = loop.startLagProbe(every: 0.02) { _ in }
            let mark = monotonicNanos()
            loop.runSoon { usleep(300_000) }
            loop.schedule(after: 0.5) {
                let after = monotonicNanos()
                loop.schedule(after: 0.2) {
                    result.withLock { $0 = (loop.lateness(since: mark), loop.lateness(since: after)) }
                    probe.cancel()
                    done.fulfill()
                }
            }
        }
        wait(for: [done], timeout: 10)
        let (during, after) = try XCTUnwrap(result.withLock { $0 })
        XCTAssertGreaterThanOrEqual(during, 0.2, "the block was seen")
        XCTAssertLessThan(during, 1.0)
        XCTAssertEqual(after, 0, "nothing after it")
    }
}
