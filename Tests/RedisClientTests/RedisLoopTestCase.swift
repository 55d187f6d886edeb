import EventHTTP
import RedisTestSupport
import XCTest

/// What the RedisClient suites share: a real `redis-server` (free port) and a running event loop per
/// test, both stopped after it. Has no tests of its own.
class RedisLoopTestCase: XCTestCase {
    var server: RedisServerProcess!
    var loop: EventLoop!

    override func setUp() async throws {
        server = try RedisServerProcess()
        loop = startedLoop()
    }

    override func tearDown() async throws {
        loop.stop()
        server.kill()
    }
}
