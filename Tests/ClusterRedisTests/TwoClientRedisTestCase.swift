import EventLoop
import RedisClient
import RedisTestSupport
import XCTest

/// A real `redis-server` per test and two clients on loops of their own: two nodes, as far as a store
/// shared through Redis can tell.
class TwoClientRedisTestCase: XCTestCase {
    var server: RedisServerProcess!
    var loops: [EventLoop] = []
    var connections: [RedisClient] = []
    var subscribers: [RedisShardedSubscriber] = []

    override func setUp() async throws {
        server = try RedisServerProcess()
        for _ in 0..<2 {
            let loop = startedLoop()
            let (c, s) = await startedClient(server.url, on: loop)
            XCTAssertTrue(c.isReady)
            loops.append(loop)
            connections.append(c)
            subscribers.append(s)
        }
    }

    override func tearDown() async throws {
        for (c, s) in zip(connections, subscribers) { await close(c, s) }
        for l in loops { l.stop() }
        server.kill()
    }
}
