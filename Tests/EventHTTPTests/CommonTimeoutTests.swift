import CLibevent
import EventHTTP
import Foundation
import Glibc
import Synchronization
import XCTest

/// libevent keeps at most 256 common-timeout queues per `event_base` and logs a warning for every request
/// past them. Timers of many distinct durations (Redis commands' remaining time-outs, say) must never get
/// there: the loop gives common queues to its first durations only (once, 2,000–3,000 such warnings
/// per node under load).
final class CommonTimeoutTests: XCTestCase {
    /// Warnings libevent logged while the callback below was installed.
    private static let warnings = Atomic<Int>(0)

    func testTimersOfManyDistinctDurationsMakeLibeventWarnNothing() {
        event_set_log_callback { severity, _ in
            if severity >= EVENT_LOG_WARN { CommonTimeoutTests.warnings.add(1, ordering: .relaxed) }
        }
        defer { event_set_log_callback(nil) }
        let loop = EventLoop(index: 0)
        let thread = loop.startThread(name: "common-timeouts")
        defer {
            loop.stop()
            pthread_join(thread, nil)
        }
        let done = DispatchSemaphore(value: 0)
        loop.execute {
            // 400 distinct durations (10.000 s … 10.399 s), each scheduled twice, then cancelled.
            var timers: [LoopTimer] = []
            for round in 0..<2 {
                for i in 0..<400 { timers.append(loop.schedule(after: 10 + Double(i) / 1000) { _ = round }) }
            }
            for t in timers { t.cancel() }
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(Self.warnings.load(ordering: .relaxed), 0, "libevent warned about common timeouts")
    }
}
