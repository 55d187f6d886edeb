import EventHTTP
import XCTest

/// `shutdown()` joins every loop thread `start()` started: a loop thread that ends unjoined is what
/// ThreadSanitizer reports as a "thread leak".
final class ShutdownJoinTests: XCTestCase {
    func testShutdownJoinsEveryLoopThread() throws {
        let t = try TestServer { $0.threads = 3 }
        XCTAssertEqual(t.server.unjoinedLoopThreads, 3)
        t.server.shutdown(gracePeriod: 1)
        XCTAssertEqual(t.server.state, .stopped)
        XCTAssertEqual(t.server.unjoinedLoopThreads, 0)
        t.server.shutdown(gracePeriod: 1)
        XCTAssertEqual(t.server.unjoinedLoopThreads, 0, "a second shutdown is a no-op")
    }
}
