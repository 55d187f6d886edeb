import ClusterRedis
import ClusterStore
import EventLoop
import RedisClient
import RedisTestSupport
import XCTest

final class RedisStatusBoardTests: XCTestCase {
    func testAPostByOneNodeReachesEveryNode() async throws {
        let server = try RedisServerProcess()
        var loops: [EventLoop] = []
        var boards: [RedisStatusBoard] = []
        let (stream, out) = AsyncStream<(Int, [UInt8]?)>.makeStream()
        var seen = stream.makeAsyncIterator()
        for i in 0..<3 {
            let loop = startedLoop()
            let (client, subscriber) = await startedClient(server.url, on: loop)
            let board = RedisStatusBoard(
                client: client, subscriber: subscriber, name: "upstream", ttlSeconds: 60, keys: ClusterKeys(prefix: "t")
            )
            loop.execute { board.observe(onSubscribed: { out.yield((i, nil)) }) { out.yield((i, $0)) } }
            loops.append(loop)
            boards.append(board)
        }
        defer {
            for (loop, board) in zip(loops, boards) {
                loop.execute {
                    board.subscriber.close()
                    board.client.close()
                }
                loop.stop()
            }
            server.kill()
        }
        var subscribed = Set<Int>()
        while subscribed.count < 3, let (i, _) = await seen.next() { subscribed.insert(i) }
        let value = Array(#"{"reachable":true,"message":"rate limited for 42 s"}"#.utf8)
        let (poster, reader) = (boards[1], boards[2])
        let posted = await withCheckedContinuation { k in
            loops[1].execute { poster.post(value) { k.resume(returning: $0) } }
        }
        XCTAssertNoThrow(try posted.get())
        var received = Set<Int>()
        while received.count < 3, let (i, v) = await seen.next() {
            XCTAssertEqual(v, value)
            received.insert(i)
        }
        let latest = await withCheckedContinuation { k in
            loops[2].execute { reader.latest { k.resume(returning: $0) } }
        }
        XCTAssertEqual(try latest.get(), value, "a node that starts later reads the latest value")
    }
}
