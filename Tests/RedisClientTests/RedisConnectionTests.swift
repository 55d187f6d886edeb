import EventLoop
import Foundation
import Glibc
import RedisTestSupport
import XCTest

@testable import RedisClient

final class RedisConnectionTests: RedisLoopTestCase {

    func connect(_ url: String? = nil, timeout: Double = 2) async -> RedisConnection {
        var config = RedisConfiguration(url: url ?? server.url)!
        config.commandTimeout = timeout
        config.connectTimeout = 1
        config.reconnectBase = 0.02
        config.reconnectMax = 0.2
        let c = RedisConnection(loop: loop, configuration: config)
        c.startFromAnyThread()
        return c
    }

    func testCommandsAndReplyTypes() async throws {
        let c = await connect()
        let ready = await waitForState(c, .ready)
        XCTAssertTrue(ready)
        let set = await c.send(["SET", "k", RedisArg(bytes: [0, 255, 10, 13])])
        XCTAssertEqual(set, .success(.simpleString("OK")))
        let get = await c.send(["GET", "k"])
        XCTAssertEqual(get, .success(.bulkString([0, 255, 10, 13])))
        let missing = await c.send(["GET", "nope"])
        XCTAssertEqual(missing, .success(.null))
        let incr = await c.send(["INCRBY", "n", 41])
        XCTAssertEqual(incr, .success(.integer(41)))
        _ = await c.send(["RPUSH", "l", "a", "", "c"])
        let range = await c.send(["LRANGE", "l", 0, -1])
        XCTAssertEqual(range, .success(.array([.bulkString(Array("a".utf8)), .bulkString([]), .bulkString([99])])))
        XCTAssertEqual(c.state, .ready)
        await c.closeFromAnyThread()
        XCTAssertEqual(c.state, .closed)
    }

    /// The RESP form written for hiredis: `*N`, then `$len` and the bytes of each argument, CRLF after each,
    /// and a NUL after the command (hiredis's parser of subscribe commands needs one).
    func testCommandsAreWrittenAsRESP() {
        XCTAssertEqual(
            String(decoding: respCommand(["SET", "k", RedisArg(bytes: []), 10]), as: UTF8.self),
            "*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n$2\r\n10\r\n\0")
        let big = [UInt8](repeating: 13, count: 1_234)
        let resp = respCommand(Array(repeating: RedisArg(bytes: big), count: 12))
        XCTAssertEqual(Array(resp.prefix(12)), Array("*12\r\n$1234\r\n".utf8))
        XCTAssertEqual(resp.count, 5 + 12 * (7 + 1_234 + 2) + 1)
        XCTAssertEqual(resp.last, 0)
        for n in [0, 7, 10, 99, 100, -1, -120, Int.max, Int.min] {
            XCTAssertEqual(RedisArg(n).bytes, Array(String(n).utf8), "\(n)")
        }
    }

    /// Many arguments, long ones (lengths of several digits) and binary bytes reach Redis intact.
    func testLongAndManyArgumentsRoundTrip() async throws {
        let c = await connect()
        let ready = await waitForState(c, .ready)
        XCTAssertTrue(ready)
        let values: [[UInt8]] = (0..<12).map { i in (0..<(i * 9_001)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ i) } }
        let pushed = await c.send(["RPUSH", "many"] + values.map { RedisArg(bytes: $0) })
        XCTAssertEqual(pushed, .success(.integer(12)))
        let range = await c.send(["LRANGE", "many", 0, -1])
        XCTAssertEqual(range, .success(.array(values.map { .bulkString($0) })))
        await c.closeFromAnyThread()
    }

    func testErrorRepliesAreFailuresAndKeepTheConnection() async throws {
        let c = await connect()
        _ = await waitForState(c, .ready)
        _ = await c.send(["SET", "s", "text"])
        let wrong = await c.send(["INCR", "s"])
        XCTAssertEqual(wrong, .failure(.server("ERR value is not an integer or out of range")))
        let unknown = await c.send(["NOSUCHCOMMAND"])
        guard case .failure(let e) = unknown else { return XCTFail("\(unknown)") }
        XCTAssertEqual(e.serverCode, "ERR")
        let ping = await c.send(["PING"])
        XCTAssertEqual(ping, .success(.simpleString("PONG")))
        await c.closeFromAnyThread()
    }

    func testNotConnectedFailsAtOnce() async throws {
        let port = try RedisServerProcess.freePort()
        let c = await connect("redis://127.0.0.1:\(port)")
        let down = await waitForState(c, .disconnected)
        XCTAssertTrue(down)
        let r = await c.send(["PING"])
        XCTAssertEqual(r, .failure(.notConnected))
        await c.closeFromAnyThread()
    }

    /// A stopped Redis: the command times out, and the connection is silent (not counted as connected) but
    /// kept, since Redis's host acknowledges; once Redis continues it answers the late `INCR` on the same
    /// connection, which ends the silence.
    func testTimeoutFailsTheCommandDropsTheLateReplyAndIsAnsweredAgain() async throws {
        let c = await connect(timeout: 0.2)
        _ = await waitForState(c, .ready)
        server.signal(SIGSTOP)
        let started = Date()
        let r = await c.send(["INCR", "counter"])
        XCTAssertEqual(r, .failure(.timeout))
        XCTAssertLessThan(Date().timeIntervalSince(started), 1.5)
        XCTAssertFalse(c.isAnswering)
        server.signal(SIGCONT)
        let deadline = Date().addingTimeInterval(10)
        while !c.isAnswering, Date() < deadline { try await Task.sleep(nanoseconds: 5_000_000) }
        XCTAssertTrue(c.isAnswering)
        // The INCR was applied by the server after SIGCONT, its late reply dropped;
        // the next command gets its own reply, not the stale one.
        let ping = await c.send(["PING"])
        XCTAssertEqual(ping, .success(.simpleString("PONG")))
        await c.closeFromAnyThread()
    }

    /// Nothing is sent, yet a group's connection notices a server that stopped answering (its health
    /// check's `PING` times out: silent, so the group is not ready) and answers again once the server
    /// does; without health checks it stays `ready` and answering (the control).
    func testAnIdleGroupConnectionNoticesAStoppedServerThroughItsHealthCheck() async throws {
        var config = RedisConfiguration(url: server.url)!
        config.healthCheckInterval = 0.2
        config.commandTimeout = 0.5
        config.connectTimeout = 0.5
        config.reconnectMax = 0.2
        let group = RedisConnectionGroup(loops: [loop], configuration: config)
        let c = group.connections[0]
        let unchecked = await connect()  // no health checks: a plain connection
        group.start()
        _ = await waitForState(c, .ready)
        _ = await waitForState(unchecked, .ready)
        server.signal(SIGSTOP)
        let deadline = Date().addingTimeInterval(10)
        while c.isAnswering, Date() < deadline { try await Task.sleep(nanoseconds: 5_000_000) }
        XCTAssertTrue(c.isSilent, "the health check's PING timed out")
        XCTAssertFalse(group.isReady)
        XCTAssertTrue(unchecked.isAnswering, "an idle connection without health checks does not notice")
        server.signal(SIGCONT)
        let back = Date().addingTimeInterval(10)
        while !c.isAnswering, Date() < back { try await Task.sleep(nanoseconds: 5_000_000) }
        XCTAssertTrue(c.isAnswering)
        XCTAssertTrue(group.isReady)
        let pong = await c.send(["PING"])
        XCTAssertEqual(pong, .success(.simpleString("PONG")))
        await group.close()
        await unchecked.closeFromAnyThread()
    }

    /// A restarted Redis answers `-LOADING` until it has read its data: a connection whose hand-shake
    /// `PING` gets an error reply reconnects (it stayed `connecting` for good before).
    func testAnErrorReplyToTheHandshakePingReconnectsUntilReady() async throws {
        let fake = try ScriptedServer(replies: ["-LOADING Redis is loading the dataset in memory\r\n", "+PONG\r\n"])
        defer { fake.stop() }
        let c = await connect("redis://127.0.0.1:\(fake.port)")
        let ready = await waitForState(c, .ready, within: 10)
        XCTAssertTrue(ready, "\(c.state)")
        XCTAssertEqual(fake.connections, 2, "one refused hand-shake, then a new connection")
        await c.closeFromAnyThread()
    }

    func testReconnectsAfterTheServerIsKilledAndRestarted() async throws {
        let c = await connect()
        _ = await waitForState(c, .ready)
        _ = await c.send(["SET", "before", "1"])
        server.kill()
        let down = await waitForState(c, .disconnected)
        XCTAssertTrue(down)
        let failed = await c.send(["PING"])
        XCTAssertEqual(failed, .failure(.notConnected))
        try server.start()
        let back = await waitForState(c, .ready)
        XCTAssertTrue(back)
        let r = await c.send(["GET", "before"])
        XCTAssertEqual(r, .success(.null), "a restarted server without persistence is empty")
        await c.closeFromAnyThread()
    }

    func testAuthAndSelectAfterConnect() async throws {
        server.kill()
        server = try RedisServerProcess(extraArguments: ["--requirepass", "s3cr:t"])
        let c = await connect("redis://:s3cr%3At@127.0.0.1:\(server.port)/3")
        let ready = await waitForState(c, .ready)
        XCTAssertTrue(ready)
        let info = await c.send(["CLIENT", "INFO"])
        XCTAssertTrue(try info.map { $0.string ?? "" }.get().contains(" db=3 "), "\(info)")
        XCTAssertFalse(c.configuration.description.contains("s3cr"))
        await c.closeFromAnyThread()

        let wrong = await connect("redis://:nope@127.0.0.1:\(server.port)")
        let down = await waitForState(wrong, .disconnected)
        XCTAssertTrue(down, "a wrong password never becomes ready")
        XCTAssertNotEqual(wrong.state, .ready)
        await wrong.closeFromAnyThread()
    }

    /// `onRoundTrip` (what feeds `bff_redis_round_trip`) gets every reply's round trip.
    func testRoundTripLatencyIsRecorded() async throws {
        let c = await connect()
        _ = await waitForState(c, .ready)
        let times = RoundTrips()
        await withCheckedContinuation { k in
            c.loop.execute {
                c.onRoundTrip = { times.add($0) }
                k.resume()
            }
        }
        let n = 2000
        let started = Date()
        for _ in 0..<n { _ = await c.send(["PING"]) }
        let elapsed = Date().timeIntervalSince(started)
        let all = times.values
        XCTAssertGreaterThanOrEqual(all.count, n)
        let mean = all.reduce(0, +) / Double(max(1, all.count))
        XCTAssertGreaterThan(mean, 0)
        print(
            "redis PING round trip on loopback: mean \(mean * 1e6) µs, max \((all.max() ?? 0) * 1e6) µs; "
                + "with the hop from a task: \(elapsed / Double(n) * 1e6) µs")
        await c.closeFromAnyThread()
    }
}

final class RedisConfigurationTests: XCTestCase {
    func testURLs() {
        let a = RedisConfiguration(url: "redis://127.0.0.1:6379/0")
        XCTAssertEqual(a, RedisConfiguration(host: "127.0.0.1", port: 6379, password: nil, database: 0))
        let b = RedisConfiguration(url: "redis://:p%40ss@host:7000/2")
        XCTAssertEqual(b, RedisConfiguration(host: "host", port: 7000, password: "p@ss", database: 2))
        XCTAssertEqual(b?.description, "redis://:***@host:7000/2")
        XCTAssertEqual(RedisConfiguration(url: "redis://redis")?.port, 6379)
        XCTAssertNil(RedisConfiguration(url: "http://host"))
        XCTAssertNil(RedisConfiguration(url: "redis://host:0"))
        XCTAssertNil(RedisConfiguration(url: "redis://host/x"))
        XCTAssertNil(RedisConfiguration(url: "redis://user:pw@host"), "ACL users are not supported")
        XCTAssertNil(RedisConfiguration(url: "redis://"))
        XCTAssertEqual(RedisConfiguration(url: "redis://[::1]:7001")?.host, "::1")
        XCTAssertEqual(RedisConfiguration(url: "redis://[::1]:7001")?.port, 7001)
        XCTAssertEqual(RedisConfiguration(url: "redis://[::1]")?.port, 6379)
    }

    func testBackoffGrowsWithJitterUpToTheCap() {
        let b = Backoff(base: 0.1, max: 1)
        XCTAssertEqual(b.delay(attempt: 0, unit: 0), 0.05, accuracy: 1e-9)
        XCTAssertEqual(b.delay(attempt: 0, unit: 1), 0.1, accuracy: 1e-9)
        XCTAssertEqual(b.delay(attempt: 2, unit: 1), 0.4, accuracy: 1e-9)
        XCTAssertEqual(b.delay(attempt: 10, unit: 1), 1, accuracy: 1e-9)
        XCTAssertEqual(b.delay(attempt: 100, unit: 0), 0.5, accuracy: 1e-9)
    }
}

final class RedisConnectionGroupTests: XCTestCase {
    func testOneConnectionPerLoopEachOnItsOwnThread() async throws {
        let server = try RedisServerProcess()
        let loops = [startedLoop(), startedLoop()]
        defer {
            for l in loops { l.stop() }
            server.kill()
        }
        let group = RedisConnectionGroup(loops: loops, configuration: RedisConfiguration(url: server.url)!)
        XCTAssertFalse(group.isReady)
        group.start()
        for c in group.connections { _ = await waitForState(c, .ready) }
        XCTAssertTrue(group.isReady)
        for loop in loops {
            let c = group.connection(for: loop)
            XCTAssertTrue(c.loop === loop)
            let onLoop = await withCheckedContinuation { k in
                loop.execute { c.send(["PING"]) { _ in k.resume(returning: loop.inEventLoop) } }
            }
            XCTAssertTrue(onLoop, "replies are delivered on the connection's own loop")
        }
        await group.close()
        XCTAssertFalse(group.isReady)
    }
}

/// A TCP server on 127.0.0.1 that answers every read on its n-th connection with `replies[n]` (the last
/// one for later connections), one connection at a time, on its own thread.
final class ScriptedServer: @unchecked Sendable {
    let port: Int
    private let fd: Int32
    private let lock = NSLock()
    private var accepted = 0

    init(replies: [String]) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let fd = self.fd
        let ok = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 && listen(fd, 4) == 0
            }
        }
        guard ok else { throw POSIXError(.EADDRINUSE) }
        port = Int(UInt16(bigEndian: addr.sin_port))
        Thread.detachNewThread { [self] in
            var n = 0
            while true {
                let client = accept(fd, nil, nil)
                guard client >= 0 else { return }
                lock.withLock { accepted += 1 }
                let reply = Array(replies[min(n, replies.count - 1)].utf8)
                n += 1
                var buffer = [UInt8](repeating: 0, count: 1024)
                while read(client, &buffer, buffer.count) > 0 { _ = write(client, reply, reply.count) }
                close(client)
            }
        }
    }

    /// Connections accepted so far.
    var connections: Int { lock.withLock { accepted } }

    func stop() {
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }
}

/// Round trips reported by `onRoundTrip` (on the loop), read from the test.
final class RoundTrips: @unchecked Sendable {
    private let lock = NSLock()
    private var all: [Double] = []
    func add(_ t: Double) { lock.withLock { all.append(t) } }
    var values: [Double] { lock.withLock { all } }
}
