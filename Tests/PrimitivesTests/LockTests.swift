import Dispatch
import Primitives
import XCTest

final class LockTests: XCTestCase {
    /// Threads adding under the lock lose no update (without the lock, `+=` from several threads
    /// loses some). Under scripts/tsan.sh, ThreadSanitizer must see the lock: no race report.
    func testConcurrentUpdatesUnderTheLockAreAllKept() {
        let counter = Lock(0)
        let list = Lock<[Int]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { t in
            for i in 0..<5_000 {
                counter.withLock { $0 += 1 }
                if i % 100 == 0 { list.withLock { $0.append(t) } }
            }
        }
        XCTAssertEqual(counter.withLock { $0 }, 40_000)
        XCTAssertEqual(list.withLock { $0.count }, 8 * 50)
    }

    func testWithLockReturnsTheBodysResultAndRethrows() {
        struct Refused: Error {}
        let lock = Lock([1, 2, 3])
        XCTAssertEqual(lock.withLock { $0.reduce(0, +) }, 6)
        XCTAssertThrowsError(
            try lock.withLock { (value: inout [Int]) throws(Refused) -> Int in
                value.append(4)
                throw Refused()
            })
        XCTAssertEqual(lock.withLock { $0 }, [1, 2, 3, 4], "a change made before the throw stays")
    }
}

final class TokenBucketLevelTests: XCTestCase {
    func testRefillAddsTheRateTimesTheElapsedTimeUpToTheCapacity() {
        var level = TokenBucketLevel(tokens: 1, at: 10)
        level.refill(to: 12, capacity: 5, ratePerUnit: 0.5)
        XCTAssertEqual(level, TokenBucketLevel(tokens: 2, at: 12))
        level.refill(to: 100, capacity: 5, ratePerUnit: 0.5)
        XCTAssertEqual(level, TokenBucketLevel(tokens: 5, at: 100))
    }

    func testAClockThatWentBackwardsAddsNothing() {
        var level = TokenBucketLevel(tokens: 1, at: 10)
        level.refill(to: 7, capacity: 5, ratePerUnit: 1)
        XCTAssertEqual(level, TokenBucketLevel(tokens: 1, at: 10))
    }
}

final class MonotonicClockTests: XCTestCase {
    func testTheClockNeverGoesBackwardsAndAgreesWithItsSecondsForm() {
        var last = monotonicNanos()
        for _ in 0..<1000 {
            let now = monotonicNanos()
            XCTAssertGreaterThanOrEqual(now, last)
            last = now
        }
        let seconds = MonotonicClock.now()
        let nanos = MonotonicClock.nanoseconds()
        XCTAssertLessThan(abs(Double(nanos) / 1e9 - seconds), 1, "the same clock in two units")
    }
}
