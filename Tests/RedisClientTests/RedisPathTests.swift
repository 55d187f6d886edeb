import XCTest

@testable import RedisClient

/// `RedisPath`'s verdict on a silent connection: gone only when the connection is
/// not established or bytes were sent again with no ACK for the whole limit.
final class RedisPathTests: XCTestCase {
    func path(_ retransmissions: UInt32, unacknowledged: UInt32, sinceACK ms: UInt32, established: Bool = true)
        -> RedisPath
    {
        RedisPath(
            established: established, retransmissions: retransmissions, unacknowledged: unacknowledged,
            millisecondsSinceACK: ms)
    }

    func testAHostThatAcknowledgesIsNotGone() {
        XCTAssertFalse(path(0, unacknowledged: 0, sinceACK: 60_000).isGone(limit: 2), "all acknowledged long ago")
        XCTAssertFalse(path(0, unacknowledged: 3, sinceACK: 60_000).isGone(limit: 2), "sent, not yet due again")
        XCTAssertFalse(path(2, unacknowledged: 3, sinceACK: 1_500).isGone(limit: 2), "an ACK within the limit")
        XCTAssertTrue(path(0, unacknowledged: 0, sinceACK: 5).allAcknowledged)
    }

    func testRetransmissionsWithoutAnACKForTheLimitOrAClosedConnectionAreGone() {
        XCTAssertTrue(path(1, unacknowledged: 1, sinceACK: 2_000).isGone(limit: 2))
        XCTAssertTrue(path(0, unacknowledged: 0, sinceACK: 0, established: false).isGone(limit: 2))
        XCTAssertFalse(path(1, unacknowledged: 1, sinceACK: 2_000).allAcknowledged)
    }
}
