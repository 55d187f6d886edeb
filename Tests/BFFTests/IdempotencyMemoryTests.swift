import XCTest

@testable import BFF

/// `IdempotencyMemory`: keys found within their window only, dropped from the front as their window
/// passes, the oldest forgotten at the cap (and until when that matters).
final class IdempotencyMemoryTests: XCTestCase {
    func testAKeyIsFoundWithinItsWindowAndDroppedAfter() {
        let m = IdempotencyMemory()
        m.remember("a", inputSeq: 1, now: 0, window: 300, cap: 8)
        m.remember("b", inputSeq: 2, now: 100, window: 300, cap: 8)
        XCTAssertEqual(m.inputSeq(of: "a", now: 299.9, window: 300), 1)
        XCTAssertNil(m.inputSeq(of: "a", now: 300, window: 300))
        m.dropExpired(now: 300, window: 300)
        XCTAssertEqual(m.count, 1, "a dropped, b kept")
        XCTAssertEqual(m.inputSeq(of: "b", now: 300, window: 300), 2)
        m.dropExpired(now: 400, window: 300)
        XCTAssertEqual(m.count, 0)
    }

    func testAKeyRememberedAgainAfterItsWindowKeepsItsNewTime() {
        let m = IdempotencyMemory()
        m.remember("a", inputSeq: 1, now: 0, window: 10, cap: 8)
        m.remember("a", inputSeq: 5, now: 20, window: 10, cap: 8)
        m.remember("b", inputSeq: 6, now: 25, window: 10, cap: 8)
        m.dropExpired(now: 29, window: 10)
        XCTAssertEqual(m.count, 2)
        XCTAssertEqual(m.inputSeq(of: "a", now: 29, window: 10), 5)
        m.dropExpired(now: 30, window: 10)
        XCTAssertEqual(m.count, 1, "a's second time passed; b's not")
    }

    func testAtTheCapTheOldestIsForgottenAndSaysUntilWhen() {
        let m = IdempotencyMemory()
        for (i, key) in ["a", "b", "c"].enumerated() {
            m.remember(key, inputSeq: i + 1, now: Double(i), window: 300, cap: 3)
        }
        XCTAssertEqual(m.forgottenUntil, -.infinity, "at the cap, none forgotten yet")
        m.remember("d", inputSeq: 4, now: 3, window: 300, cap: 3)
        XCTAssertEqual(m.count, 3)
        XCTAssertNil(m.inputSeq(of: "a", now: 3, window: 300), "a, the oldest, forgotten within its window")
        XCTAssertEqual(m.forgottenUntil, 300, "a could be retried until 0 + 300")
        XCTAssertEqual(m.inputSeq(of: "b", now: 3, window: 300), 2)
    }

    func testManyKeysThroughTheMemoryKeepOnlyTheirWindow() {
        let m = IdempotencyMemory()
        for i in 0..<10_000 { m.remember("k\(i)", inputSeq: i, now: Double(i), window: 50, cap: 1024) }
        XCTAssertEqual(m.count, 50, "one key a second, a 50 s window")
        XCTAssertEqual(m.forgottenUntil, -.infinity, "never at the cap: nothing forgotten")
        XCTAssertEqual(m.inputSeq(of: "k9950", now: 9_999, window: 50), 9950)
        XCTAssertNil(m.inputSeq(of: "k9949", now: 9_999, window: 50))
    }
}
