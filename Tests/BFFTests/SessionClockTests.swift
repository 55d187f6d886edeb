import Foundation
import JSON
import Primitives
import WireClient
import XCTest

@testable import BFF

/// Time-driven session rules (idle expiry, idempotency window, input rate) with a manual clock: the test
/// moves time, so nothing waits for the wall clock.
final class SessionClockTests: XCTestCase {
    /// The session layer's time, moved by the test. Thread-safe: the loops read it.
    final class ManualTime: Sendable {
        private let current = Lock(10_000.0)

        var clock: SessionClock { SessionClock { [self] in current.withLock { $0 } } }

        func advance(_ seconds: Double) { current.withLock { $0 += seconds } }
    }

    private func expireNow(_ t: LiveApp) {
        let done = expectation(description: "expiry ran on every loop")
        t.app.expireIdleSessionsNow { done.fulfill() }
        wait(for: [done], timeout: 5)
    }

    private func expiredCount(_ t: LiveApp) throws -> Bool {
        try WireConnection.get(port: t.port, path: "/metrics").text.contains(
            #"bff_sessions_ended_total{reason="expired"} 1"#)
    }

    func testIdleSessionWithoutStreamsExpiresOnceItsIdleTimeHasPassed() throws {
        let time = ManualTime()
        let t = try LiveApp(
            clock: time.clock,
            configure: {
                $0.sessionIdleTimeout = 1800
                $0.unusedSessionTimeout = 1800  // this session is never used: the idle rule alone applies
            })
        let idle = try t.createSession()
        let watched = try t.createSession()
        let (_, reader) = try t.stream(watched)
        XCTAssertEqual(try reader.next()?.event, "snapshot")

        time.advance(1799)
        expireNow(t)
        XCTAssertFalse(try expiredCount(t), "not yet idle long enough")  // /metrics touches no session
        time.advance(1)
        expireNow(t)
        XCTAssertTrue(try expiredCount(t))
        try WireConnection.get(port: t.port, path: "/api/sessions/\(idle)/state").problem(404)
        XCTAssertEqual(try t.state(watched)["seq"], 0, "a session with an open stream does not expire")
    }

    func testIdempotencyKeyIsForgottenAfterItsWindow() throws {
        let time = ManualTime()
        let t = try LiveApp(clock: time.clock)
        let id = try t.createSession()
        let key = [("Idempotency-Key", "k")]
        XCTAssertEqual(try t.post(id, "greeting", "greet", headers: key).json, ["inputSeq": 1])
        time.advance(299)
        XCTAssertEqual(try t.post(id, "greeting", "greet", headers: key).json, ["inputSeq": 1], "within 5 minutes")
        time.advance(1)
        XCTAssertEqual(try t.post(id, "greeting", "greet", headers: key).json, ["inputSeq": 2], "a new input after")
    }

    /// The keys a session remembers of its inputs (nil: no memory of keys at all), read on its loop.
    private func rememberedKeys(_ t: LiveApp, _ id: String) throws -> Int? {
        let found = Lock<Int??>(nil)
        let done = expectation(description: "read on every loop")
        // Counted before any loop can fulfill it: set after, the first loop's fulfillment ended the wait before
        // the session's loop had looked (CI at 8b28515: "on no loop" for four of five reads).
        done.expectedFulfillmentCount = t.app.loopSessions.count
        for host in t.app.loopSessions {
            host.loop.execute {
                if let s = host.sessions[id] { found.withLock { $0 = .some(s.rememberedKeyCount) } }
                done.fulfill()
            }
        }
        wait(for: [done], timeout: 5)
        return try XCTUnwrap(found.withLock { $0 }, "session \(id) on no loop")
    }

    /// Keys leave a session once their window passed (the loop's sweep), and the memory with the last one:
    /// a session that took many keyed inputs does not hold them until it ends.
    func testIdempotencyKeysAreFreedOnceTheirWindowPassed() throws {
        let time = ManualTime()
        let t = try LiveApp(clock: time.clock, configure: { $0.sessionIdleTimeout = 1800 })
        let id = try t.createSession()
        XCTAssertEqual(try rememberedKeys(t, id), nil, "no keyed input yet: nothing allocated")
        for k in 1...5 {
            let r = try t.post(id, "greeting", "greet", headers: [("Idempotency-Key", "k\(k)")])
            XCTAssertEqual(r.json?["inputSeq"]?.intValue, k)
            time.advance(10)
        }
        XCTAssertEqual(try rememberedKeys(t, id), 5)
        time.advance(250)  // k1 was seen 300 s ago, k2 290 s ago
        expireNow(t)
        XCTAssertEqual(try rememberedKeys(t, id), 4, "k1's window passed")
        XCTAssertEqual(try t.post(id, "greeting", "greet", headers: [("Idempotency-Key", "k2")]).json, ["inputSeq": 2])
        time.advance(40)
        expireNow(t)
        XCTAssertEqual(try rememberedKeys(t, id), nil, "every window passed: the memory is freed")
        XCTAssertEqual(try t.post(id, "greeting", "greet", headers: [("Idempotency-Key", "k5")]).json, ["inputSeq": 6])
        XCTAssertEqual(try rememberedKeys(t, id), 1)
    }

    func testInputRateRefillsAsTheClockMoves() throws {
        let time = ManualTime()
        let t = try LiveApp(
            clock: time.clock,
            configure: {
                $0.inputRate = 1
                $0.inputBurst = 2
            })
        let id = try t.createSession()
        XCTAssertEqual(try t.post(id, "greeting", "greet").json, ["inputSeq": 1])
        XCTAssertEqual(try t.post(id, "greeting", "greet").json, ["inputSeq": 2])
        let limited = try t.post(id, "greeting", "greet")
        XCTAssertTrue(limited.problem(429).contains("retry in 1 s"))
        time.advance(1)
        XCTAssertEqual(try t.post(id, "greeting", "greet").json, ["inputSeq": 3])
    }
}
