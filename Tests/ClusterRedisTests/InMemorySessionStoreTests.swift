import ClusterStore
import EventLoop
import RedisTestSupport
import XCTest

final class InMemorySessionStoreTests: XCTestCase {
    var loop: EventLoop!
    let clock = TestClock()

    override func setUp() { loop = startedLoop() }
    override func tearDown() { loop.stop() }

    func harness(history: Int = 256) -> SessionStoreHarness {
        let clock = self.clock
        let store = InMemorySessionStore(limits: SessionStoreLimits(historyEvents: history)) { clock.now }
        let h = SessionStoreHarness(loop: loop, store: store) { _ in clock.advance(10_001) }
        h.passStreamDeadlines = { _ in clock.advance(Int64(SessionStoreContract.streamTTL)) }
        return h
    }

    func testCreateCommitReplay() async throws { try await SessionStoreContract.createCommitReplay(harness()) }
    func testLeaseFencingAndTakeover() async throws {
        try await SessionStoreContract.leaseFencingAndTakeover(harness())
    }
    func testStreamLimit() async throws { try await SessionStoreContract.streamLimit(harness()) }
    func testHistoryIsBounded() async throws {
        try await SessionStoreContract.historyIsBounded(harness(history: 10), history: 10)
    }

    /// Everything expires the idle time-out plus the renewal interval (1,800 + 60 s) after the last renewal.
    func testEverythingExpiresAfterTheIdleTimeoutAndTheRenewalInterval() async throws {
        let h = harness()
        let lease = try await h.create("x", "n").get()
        _ = try await h.commit(lease, ["e"], state: "s", input: true, key: "k").get()
        clock.advance(1860 * 1000 - 1)
        let alive = await h.load("x")
        XCTAssertNotNil(try? alive.get())
        clock.advance(1)
        let expired = await h.load("x")
        XCTAssertEqual(expired, .failure(.gone))
    }

    /// A commit that does not renew leaves the expiry where the last renewal put it.
    func testACommitThatDoesNotRenewLeavesTheExpiry() async throws {
        let h = harness()
        let lease = try await h.create("x", "n").get()
        clock.advance(50 * 1000)
        _ = try await h.commit(lease, ["e"], state: "s", renews: false).get()
        clock.advance(1810 * 1000)
        let expired = await h.load("x")
        XCTAssertEqual(expired, .failure(.gone), "1,860 s after the creation, 1,810 s after the commit")
    }

    /// A stream check that does not renew leaves the expiry; opening a stream renews it.
    func testAStreamCheckThatDoesNotRenewLeavesTheExpiryAndOpeningAStreamRenewsIt() async throws {
        let h = harness()
        _ = try await h.create("x", "n").get()
        clock.advance(50 * 1000)
        _ = await h.checkStreamsTogether(["x"], members: ["n/1"], renewsExpiry: false)
        clock.advance(1810 * 1000)
        let expired = await h.load("x")
        XCTAssertEqual(expired, .failure(.gone), "1,860 s after the creation, 1,810 s after the check")

        _ = try await h.create("y", "n").get()
        clock.advance(50 * 1000)
        _ = try await h.admitStream("y", "n/1", limit: 4).get()
        clock.advance(1810 * 1000)
        let alive = await h.load("y")
        XCTAssertNotNil(try? alive.get(), "1,810 s after the stream opened")
    }

    func testTheRenewalIntervalIsATenthOfTheIdleTimeOutAtMostAMinute() {
        XCTAssertEqual(SessionStoreLimits(idleTimeout: 1800).expiryRenewalSeconds, 60)
        XCTAssertEqual(SessionStoreLimits(idleTimeout: 1800).expirySeconds, 1860)
        XCTAssertEqual(SessionStoreLimits(idleTimeout: 300).expiryRenewalSeconds, 30)
        XCTAssertEqual(SessionStoreLimits(idleTimeout: 9).expiryRenewalSeconds, 0, "short: every commit renews")
        XCTAssertEqual(SessionStoreLimits(idleTimeout: 9).expirySeconds, 9)
    }
}
