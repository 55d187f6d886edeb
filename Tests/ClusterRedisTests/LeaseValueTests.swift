import ClusterStore
import RedisClient
import XCTest

@testable import ClusterRedis

/// The lease value the renewal and release scripts compare with the lease key ("holder|token"), written
/// as bytes: the same bytes as the string the lease key holds, for every number of digits.
final class LeaseValueTests: XCTestCase {
    func testTheLeaseValueHasTheBytesOfHolderBarToken() {
        let tokens: [UInt64] = [0, 1, 9, 10, 99, 100, 4_294_967_297, 999_999_999_999, UInt64.max]
        for holder in ["n1#abc#0", "", "é✓#x#12"] {
            for token in tokens {
                let lease = Lease(sessionID: "s", holder: holder, token: token)
                XCTAssertEqual(
                    RedisSessionStore.leaseValue(lease).bytes, Array("\(holder)|\(token)".utf8), "\(holder) \(token)")
            }
        }
    }
}
