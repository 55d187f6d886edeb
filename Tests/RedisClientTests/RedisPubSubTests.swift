import Dispatch
import EventLoop
import RedisClient
import RedisTestSupport
import XCTest

final class RedisPubSubTests: RedisLoopTestCase {

    private var configuration: RedisConfiguration {
        var c = RedisConfiguration(url: server.url)!
        c.reconnectBase = 0.02
        c.reconnectMax = 0.2
        return c
    }

    /// Events seen by the subscriber's callbacks, in order, as an async sequence.
    enum Seen: Equatable {
        case subscribed(String)
        case message(RedisMessage)
    }

    func makeSubscriber() -> (RedisSubscriber, AsyncStream<Seen>.Iterator, AsyncStream<Seen>.Continuation) {
        let (stream, continuation) = AsyncStream<Seen>.makeStream()
        let sub = RedisSubscriber(loop: loop, configuration: configuration)
        loop.execute { sub.start() }
        return (sub, stream.makeAsyncIterator(), continuation)
    }

    func testSubscribeAndPSubscribeReceiveMessages() async throws {
        let publisher = RedisConnection(loop: loop, configuration: configuration)
        publisher.startFromAnyThread()
        let (sub, iterator, out) = makeSubscriber()
        var seen = iterator
        let ready = await waitForState(sub.connection, .ready)
        XCTAssertTrue(ready)
        loop.execute {
            sub.subscribe(channel: "s:1", onSubscribed: { out.yield(.subscribed("s:1")) }) { out.yield(.message($0)) }
            sub.psubscribe(pattern: "cache:*", onSubscribed: { out.yield(.subscribed("cache:*")) }) {
                out.yield(.message($0))
            }
        }
        var first = await seen.next()
        XCTAssertEqual(first, .subscribed("s:1"))
        first = await seen.next()
        XCTAssertEqual(first, .subscribed("cache:*"))
        _ = await waitForState(publisher, .ready)
        let n = await publisher.send(["PUBLISH", "s:1", RedisArg(bytes: [1, 2, 0])])
        XCTAssertEqual(n, .success(.integer(1)))
        _ = await publisher.send(["PUBLISH", "cache:abc", "wake"])
        let m1 = await seen.next()
        XCTAssertEqual(m1, .message(RedisMessage(channel: "s:1", payload: [1, 2, 0])))
        let m2 = await seen.next()
        XCTAssertEqual(
            m2, .message(RedisMessage(channel: "cache:abc", pattern: "cache:*", payload: Array("wake".utf8))))

        // Unsubscribe; a later confirmed subscription proves Redis processed it (replies are ordered).
        loop.execute {
            sub.unsubscribe(channel: "s:1")
            sub.subscribe(channel: "s:2", onSubscribed: { out.yield(.subscribed("s:2")) }) { out.yield(.message($0)) }
        }
        let s2 = await seen.next()
        XCTAssertEqual(s2, .subscribed("s:2"))
        let none = await publisher.send(["PUBLISH", "s:1", "gone"])
        XCTAssertEqual(none, .success(.integer(0)))
        loop.execute {
            sub.close()
            publisher.close()
        }
    }

    /// Messages Redis sent before it processed an `UNSUBSCRIBE` still reach the handler, and the
    /// confirmation callback runs after them: once it has run, a `PUBLISH` reaches nobody. The subscriber's
    /// loop is held while three messages are published (their `PUBLISH`es, on another loop, report one
    /// receiver), so they arrive after `unsubscribe` was called.
    func testMessagesSentBeforeTheUnsubscribeReachTheHandlerAndThenItIsConfirmed() async throws {
        let publisherLoop = startedLoop()
        defer { publisherLoop.stop() }
        let publisher = RedisConnection(loop: publisherLoop, configuration: configuration)
        publisher.startFromAnyThread()
        let (sub, iterator, out) = makeSubscriber()
        var seen = iterator
        loop.execute {
            sub.subscribe(channel: "in:1", onSubscribed: { out.yield(.subscribed("in:1")) }) { out.yield(.message($0)) }
        }
        let subscribed = await seen.next()
        XCTAssertEqual(subscribed, .subscribed("in:1"))
        _ = await waitForState(publisher, .ready)
        let published = DispatchSemaphore(value: 0)
        loop.execute {
            // Hold the subscriber's loop until Redis has sent the three messages to its socket.
            _ = published.wait(timeout: .now() + 10)
            sub.unsubscribe(channel: "in:1", onUnsubscribed: { out.yield(.subscribed("unsubscribed")) })
        }
        for i in 1...3 {
            let n = await publisher.send(["PUBLISH", "in:1", RedisArg("m\(i)")])
            XCTAssertEqual(n, .success(.integer(1)))
        }
        published.signal()
        var delivered: [Seen] = []
        while let next = await seen.next() {
            delivered.append(next)
            if next == .subscribed("unsubscribed") { break }
        }
        let expected = (1...3).map { Seen.message(RedisMessage(channel: "in:1", payload: Array("m\($0)".utf8))) }
        XCTAssertEqual(
            delivered, expected + [.subscribed("unsubscribed")], "confirmed after the messages sent before it")
        let none = await publisher.send(["PUBLISH", "in:1", "late"])
        XCTAssertEqual(none, .success(.integer(0)), "nobody receives once the unsubscribe is confirmed")

        // The async form; unsubscribing a channel that is not subscribed completes at once.
        loop.execute {
            sub.subscribe(channel: "in:2", onSubscribed: { out.yield(.subscribed("in:2")) }) { out.yield(.message($0)) }
        }
        let again = await seen.next()
        XCTAssertEqual(again, .subscribed("in:2"))
        await sub.unsubscribe(channel: "in:2")
        let gone = await publisher.send(["PUBLISH", "in:2", "late"])
        XCTAssertEqual(gone, .success(.integer(0)))
        await sub.unsubscribe(channel: "never-subscribed")
        loop.execute { sub.close() }
        await publisher.closeFromAnyThread()
    }

    func testSubscriptionsComeBackAfterARestart() async throws {
        let publisher = RedisConnection(loop: loop, configuration: configuration)
        publisher.startFromAnyThread()
        let (sub, iterator, out) = makeSubscriber()
        var seen = iterator
        loop.execute {
            // Subscribed before the connection is ready: issued when it becomes ready.
            sub.subscribe(channel: "s:9", onSubscribed: { out.yield(.subscribed("s:9")) }) { out.yield(.message($0)) }
        }
        let first = await seen.next()
        XCTAssertEqual(first, .subscribed("s:9"))
        server.kill()
        try server.start()
        let again = await seen.next()
        XCTAssertEqual(again, .subscribed("s:9"), "onSubscribed runs again after the reconnect")
        _ = await waitForState(publisher, .ready)
        _ = await publisher.send(["PUBLISH", "s:9", "after"])
        let m = await seen.next()
        XCTAssertEqual(m, .message(RedisMessage(channel: "s:9", payload: Array("after".utf8))))
        loop.execute {
            sub.close()
            publisher.close()
        }
    }
}

final class RedisScriptTests: XCTestCase {
    func testSHA1MatchesKnownVectors() {
        XCTAssertEqual(RedisScript("").sha1, "da39a3ee5e6b4b0d3255bfef95601890afd80709")
        XCTAssertEqual(RedisScript("abc").sha1, "a9993e364706816aba3e25717850c26c9cd0d89d")
        let long = String(repeating: "a", count: 1000)
        XCTAssertEqual(RedisScript(long).sha1, "291e9a6c66994949b57ba5e650361e98fc36b1ba")
    }

    func testEvalShaLoadsTheScriptOnNoscript() async throws {
        let server = try RedisServerProcess()
        let loop = startedLoop()
        defer {
            loop.stop()
            server.kill()
        }
        let c = RedisConnection(loop: loop, configuration: RedisConfiguration(url: server.url)!)
        c.startFromAnyThread()
        _ = await waitForState(c, .ready)
        let script = RedisScript("return {KEYS[1], ARGV[1], redis.call('INCR', KEYS[1])}")
        let loaded = await c.send(["SCRIPT", "LOAD", RedisArg(script.source)])
        XCTAssertEqual(loaded.map(\.string), .success(script.sha1), "our SHA-1 is Redis's")
        _ = await c.send(["SCRIPT", "FLUSH"])
        for expected in [1, 2] as [Int64] {
            let r = await withCheckedContinuation { k in
                loop.execute { c.evalScript(script, keys: ["n"], args: ["x"]) { k.resume(returning: $0) } }
            }
            XCTAssertEqual(
                r, .success(.array([.bulkString(Array("n".utf8)), .bulkString(Array("x".utf8)), .integer(expected)])))
        }
        let failing = RedisScript("return redis.error_reply('FENCED token 3 < 4')")
        let f = await withCheckedContinuation { k in
            loop.execute { c.evalScript(failing, keys: [], args: []) { k.resume(returning: $0) } }
        }
        XCTAssertEqual(f, .failure(.server("FENCED token 3 < 4")))
        await c.closeFromAnyThread()
    }
}

final class RedisReconnectTests: XCTestCase {
    func testReconnectOnRequestFailsPendingAndComesBack() async throws {
        let server = try RedisServerProcess()
        let loop = startedLoop()
        defer {
            loop.stop()
            server.kill()
        }
        let c = RedisConnection(loop: loop, configuration: RedisConfiguration(url: server.url)!)
        c.startFromAnyThread()
        _ = await waitForState(c, .ready)
        let pending = await withCheckedContinuation { k in
            loop.execute {
                c.send(["BLPOP", "never", 0], timeout: 10) { k.resume(returning: $0) }
                c.reconnect()
            }
        }
        guard case .failure(.connectionLost) = pending else { return XCTFail("\(pending)") }
        let back = await waitForState(c, .ready)
        XCTAssertTrue(back)
        await c.closeFromAnyThread()
    }
}
