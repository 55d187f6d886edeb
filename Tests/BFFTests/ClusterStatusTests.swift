import ClusterStore
import EventHTTP
import Foundation
import GitHubSearch
import Logging
import RedisTestSupport
import XCTest

@testable import BFF
@testable import SearchApp

/// `ClusterStatus` on an in-memory board, its wall clock and timers driven by hand: a block's end is
/// applied at its time unless a newer post came first.
final class ClusterStatusTests: XCTestCase {
    /// A `StatusBoard` in memory: a post is stored and announced to the observer, as Redis does.
    final class MemoryBoard: StatusBoard {
        var value: [UInt8]?
        var observer: (([UInt8]) -> Void)?
        /// Reads of the latest value that fail (Redis did not answer) before they answer again.
        var failingReads = 0

        func post(_ value: [UInt8], completion: @escaping (Result<Void, StoreError>) -> Void) {
            self.value = value
            completion(.success(()))
            observer?(value)
        }

        func latest(completion: @escaping (Result<[UInt8]?, StoreError>) -> Void) {
            guard failingReads == 0 else {
                failingReads -= 1
                return completion(.failure(.unavailable("redis: command timed out")))
            }
            completion(.success(value))
        }

        func observe(onSubscribed: @escaping () -> Void, _ observer: @escaping ([UInt8]) -> Void) {
            self.observer = observer
            onSubscribed()
        }
    }

    /// One armed timer of the injected `schedule`.
    final class Timer: @unchecked Sendable {
        let seconds: Double
        let work: () -> Void
        var cancelled = false
        var fired = false
        init(seconds: Double, work: @escaping () -> Void) {
            self.seconds = seconds
            self.work = work
        }
    }

    /// What the closures given to `ClusterStatus` share (timers: on the loop only).
    final class Fixture: @unchecked Sendable {
        let wallTime = Lock<Double>(1_000_000)
        let applied = Lock<[UpstreamStatus]>([])
        var timers: [Timer] = []
    }

    var loop: EventLoop!
    let fixture = Fixture()
    var status: ClusterStatus!

    override func setUp() {
        loop = startedLoop()
        status = following(MemoryBoard())
    }

    /// A `ClusterStatus` following `board`, applying into and timing with the fixture.
    func following(_ board: MemoryBoard) -> ClusterStatus {
        let f = fixture
        return ClusterStatus(
            board: board, loop: loop, apply: { s in f.applied.withLock { $0.append(s) } },
            logger: Logger(label: "test"), now: { f.wallTime.withLock { $0 } },
            schedule: { seconds, work in
                let t = Timer(seconds: seconds, work: work)
                f.timers.append(t)
                return { t.cancelled = true }
            })
    }

    override func tearDown() {
        status = nil
        loop.stop()
    }

    var applied: [UpstreamStatus] { fixture.applied.withLock { $0 } }

    func setWallTime(_ t: Double) { fixture.wallTime.withLock { $0 = t } }

    /// Runs `body` on the loop (after everything queued there before it) and returns its value.
    func onLoop<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { k in loop.execute { k.resume(returning: body()) } }
    }

    func report(_ s: UpstreamStatus) async {
        status.report(s)
        await onLoop {}
    }

    func armed() async -> [Timer] {
        let f = fixture
        return await onLoop { f.timers.filter { !$0.cancelled && !$0.fired } }
    }

    func fire(_ t: Timer) async {
        await onLoop {
            t.fired = true
            t.work()
        }
    }

    let limit = RateLimit(limit: 30, remaining: 0, resetAt: 1_000_060, resource: "search")

    func blocked(until: Int) -> UpstreamStatus {
        UpstreamStatus(reachable: true, message: "rate limited", rateLimit: limit, blockedUntil: until)
    }

    /// A read of the latest value after a subscription that fails (Redis slow or unreachable) is tried
    /// again every second until one answers: a block posted while this node's subscription was down reaches
    /// it. Before: one failed read, and the node kept its old status until the next post (a 6 × 17,000 run
    /// on a starved Redis waited for its broadcast for good).
    func testAFailedReadAfterASubscriptionIsTriedAgainUntilOneAnswers() async throws {
        let board = MemoryBoard()
        board.value = Array(try JSONEncoder().encode(blocked(until: 1_000_005)))
        board.failingReads = 2
        let follower = following(board)
        await onLoop {}
        XCTAssertEqual(applied, [], "the first read failed")
        for attempt in 1...2 {
            let retries = await armed()
            let retry = try XCTUnwrap(retries.last, "read \(attempt) is tried again")
            XCTAssertEqual(retries.count, 1)
            XCTAssertEqual(retry.seconds, ClusterStatus.catchUpRetry, accuracy: 1e-9)
            await fire(retry)
        }
        XCTAssertEqual(applied, [blocked(until: 1_000_005)], "the third read answered")
        let left = await armed()
        XCTAssertEqual(left.map(\.seconds), [5], "only the block's end is armed: no more reads")
        _ = follower
    }

    func testABlockEndsByItselfAtItsTime() async throws {
        await report(blocked(until: 1_000_005))
        XCTAssertEqual(applied, [blocked(until: 1_000_005)])
        let timerArmed = await armed()
        let timer = try XCTUnwrap(timerArmed.first)
        XCTAssertEqual(timer.seconds, 5, accuracy: 1e-9)
        setWallTime(1_000_005)
        await fire(timer)
        XCTAssertEqual(
            applied.last, UpstreamStatus(reachable: true, message: nil, rateLimit: limit),
            "available, GitHub's rate limit kept")
        let left = await armed()
        XCTAssertTrue(left.isEmpty)
    }

    func testATimerAheadOfTheWallClockWaitsForTheRest() async throws {
        await report(blocked(until: 1_000_005))
        let timerArmed = await armed()
        let timer = try XCTUnwrap(timerArmed.first)
        setWallTime(1_000_004)
        await fire(timer)
        XCTAssertEqual(applied.count, 1, "not yet over")
        let restArmed = await armed()
        let rest = try XCTUnwrap(restArmed.last)
        XCTAssertEqual(rest.seconds, 1, accuracy: 1e-9)
        setWallTime(1_000_005)
        await fire(rest)
        XCTAssertNil(applied.last?.message)
    }

    func testANewerBlockReplacesTheEndOfTheOlderOne() async throws {
        await report(blocked(until: 1_000_005))
        let firstArmed = await armed()
        let first = try XCTUnwrap(firstArmed.first)
        await report(blocked(until: 1_000_009))
        XCTAssertTrue(first.cancelled, "the older block's timer is disarmed")
        setWallTime(1_000_005)
        await fire(first)  // even had it fired already (a race on the loop), it applies nothing
        XCTAssertEqual(applied.last, blocked(until: 1_000_009))
        let secondArmed = await armed()
        let second = try XCTUnwrap(secondArmed.first)
        XCTAssertEqual(second.seconds, 9, accuracy: 1e-9)
        setWallTime(1_000_009)
        await fire(second)
        XCTAssertEqual(applied.last, UpstreamStatus(reachable: true, message: nil, rateLimit: limit))
    }

    func testANewerPostWithoutABlockCancelsTheEnd() async throws {
        await report(blocked(until: 1_000_005))
        let timerArmed = await armed()
        let timer = try XCTUnwrap(timerArmed.first)
        let down = UpstreamStatus(reachable: false, message: "GitHub is having problems (HTTP 502).", rateLimit: limit)
        await report(down)
        XCTAssertTrue(timer.cancelled)
        setWallTime(1_000_005)
        await fire(timer)
        XCTAssertEqual(applied, [blocked(until: 1_000_005), down], "the outage stays")
    }

    /// An outage during a block is shown until the next report, as on the node that saw it: no timer.
    func testAnUnreachableStatusWithABlockArmsNoTimer() async {
        await report(UpstreamStatus(reachable: false, message: "down", rateLimit: limit, blockedUntil: 1_000_005))
        let timers = await armed()
        XCTAssertTrue(timers.isEmpty)
    }
}
