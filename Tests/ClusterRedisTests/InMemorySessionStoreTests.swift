import ClusterStore
import EventHTTP
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

    func testEverythingExpiresAfterTheIdleTimeout() async throws {
        let h = harness()
        let lease = try await h.create("x", "n").get()
        _ = try await h.commit(lease, ["e"], state: "s", input: true, key: "k").get()
        clock.advance(1800 * 1000 - 1)
        let alive = await h.load("x")
        XCTAssertNotNil(try? alive.get())
        clock.advance(1)
        let expired = await h.load("x")
        XCTAssertEqual(expired, .failure(.gone))
    }
}
