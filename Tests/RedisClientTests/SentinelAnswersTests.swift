import XCTest

@testable import RedisClient

/// Which sentinel answers a locator believes (`SentinelAnswers`): a sentinel behind the others and one
/// still naming the master just replaced are not followed back to it; a real failover back, an
/// announcement and a set made anew are.
final class SentinelAnswersTests: XCTestCase {
    let a = RedisAddress(host: "127.0.0.1", port: 7001)
    let b = RedisAddress(host: "127.0.0.1", port: 7002)

    /// A locator that found `a` at epoch 1 and switched to `b` at epoch 2.
    func switched() -> SentinelAnswers {
        var s = SentinelAnswers()
        XCTAssertEqual(s.answer(a, epoch: 1, sentinels: 3), .switchTo(a))
        XCTAssertNil(s.left, "the first master found replaces nothing")
        XCTAssertEqual(s.answer(b, epoch: 2, sentinels: 3), .switchTo(b))
        XCTAssertEqual(s.left?.address, a)
        return s
    }

    func testTheLeaderStillNamingTheOldMasterAtTheNewEpochIsNotFollowedBack() {
        var s = switched()
        // The failover's leader raised the epoch before switching its address.
        guard case .stale(let why) = s.answer(a, epoch: 2, sentinels: 3) else { return XCTFail("followed back") }
        XCTAssertTrue(why.contains("replaced"), why)
        XCTAssertEqual(s.master, b)
        XCTAssertEqual(s.answer(b, epoch: 2, sentinels: 3), .same, "the next sentinel agrees")
    }

    /// The sequence `RedisSentinelTests` met in CI: the switch came by `+switch-master` (no epoch), then a
    /// sentinel that had not heard of it named the old master at the old epoch. Before, that answer was
    /// not below the highest epoch seen and the client went back, then forward again: three failovers.
    func testASentinelBehindAfterAnAnnouncementIsNotFollowedBack() {
        var s = SentinelAnswers()
        XCTAssertEqual(s.answer(a, epoch: 1, sentinels: 3), .switchTo(a))
        XCTAssertEqual(s.announced(b), .switchTo(b))
        XCTAssertEqual(s.left?.address, a)
        guard case .stale = s.answer(a, epoch: 1, sentinels: 3) else { return XCTFail("followed back") }
        XCTAssertEqual(s.answer(b, epoch: 2, sentinels: 3), .same)
        XCTAssertEqual(s.master, b)
        XCTAssertEqual(s.knownEpoch, 2)
    }

    func testASentinelBelowTheHighestEpochIsStale() {
        var s = switched()
        guard case .stale(let why) = s.answer(a, epoch: 1, sentinels: 3) else { return XCTFail("followed back") }
        XCTAssertTrue(why.contains("behind"), why)
        XCTAssertEqual(s.master, b)
    }

    func testAFailoverBackToTheOldMasterRaisesTheEpochAndIsFollowed() {
        var s = switched()
        XCTAssertEqual(s.answer(a, epoch: 3, sentinels: 3), .switchTo(a))
        XCTAssertEqual(s.left?.address, b)
        XCTAssertEqual(s.announced(b), .switchTo(b), "an announcement is always believed")
    }

    func testEverySentinelInARowNamingTheOldMasterIsBelieved() {
        var s = switched()
        // A set made anew (its epochs start again): every sentinel answers the same, one after another.
        for _ in 0..<3 {
            guard case .stale = s.answer(a, epoch: 0, sentinels: 3) else { return XCTFail("believed too soon") }
        }
        XCTAssertEqual(s.answer(a, epoch: 0, sentinels: 3), .switchTo(a))
        XCTAssertEqual(s.knownEpoch, 0)
        XCTAssertEqual(s.staleInARow, 0)
    }

    func testAnAnswerNamingTheMasterKeepsItAndRecordsItsEpoch() {
        var s = switched()
        XCTAssertEqual(s.answer(b, epoch: 5, sentinels: 3), .same)
        XCTAssertEqual(s.knownEpoch, 5)
        guard case .stale = s.answer(a, epoch: 4, sentinels: 3) else { return XCTFail("followed back") }
    }
}
