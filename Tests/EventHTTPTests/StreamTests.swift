import EventHTTP
import JSON
import WireClient
import XCTest

final class StreamTests: XCTestCase {
    /// A route that opens a stream, writes one event, and reports the stream so the test can drive it.
    final class Streams: @unchecked Sendable {
        var streams: [HTTPStream] = []
        let opened = Signal()
        let closed = Signal()
    }

    func makeServer(_ s: Streams, configure: (inout HTTPServer.Configuration) -> Void = { _ in }) throws -> TestServer {
        try TestServer(
            configure: configure,
            routes: { router in
                router.add(.GET, "/stream") { _, responder in
                    guard let stream = responder.startStream(headers: [("Content-Type", "text/event-stream")]) else {
                        return
                    }
                    stream.onClose = { s.closed.fire() }
                    stream.write(Array("data: hello\n\n".utf8))
                    s.streams.append(stream)
                    s.opened.fire()
                }
            })
    }

    func testStreamDeliversChunksAndEnds() throws {
        let s = Streams()
        let t = try makeServer(s)
        let c = try WireConnection(port: t.port)
        let (head, reader) = try c.openEventStream("/stream")
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.header("Transfer-Encoding"), "chunked")
        XCTAssertEqual(try reader.next()?.data, "hello")
        XCTAssertTrue(s.opened.wait())
        let stream = s.streams[0]
        stream.loop.execute {
            stream.write(Array("event: x\ndata: two\n\n".utf8))
            stream.end()
        }
        let e = try reader.next()
        XCTAssertEqual(e?.event, "x")
        XCTAssertEqual(e?.data, "two")
        XCTAssertNil(try reader.next())  // end of the chunked body
        XCTAssertEqual(try c.request("GET", "/hello").status, 200)  // connection reusable after end()
    }

    func testPeerGoneIsNoticedWhileStreaming() throws {
        let s = Streams()
        let t = try makeServer(s)
        let c = try WireConnection(port: t.port)
        let (_, reader) = try c.openEventStream("/stream")
        XCTAssertEqual(try reader.next()?.data, "hello")
        XCTAssertTrue(s.opened.wait())
        c.close()
        XCTAssertTrue(s.closed.wait(), "server noticed the vanished reader without writing")
        let stream = s.streams[0]
        let after = Signal()
        final class Box: @unchecked Sendable {
            var closed = false
            var queued = -1
        }
        let box = Box()
        stream.loop.execute {
            stream.write(Array("data: late\n\n".utf8))  // harmless after close
            box.closed = stream.isClosed
            box.queued = stream.queuedBytes
            after.fire()
        }
        XCTAssertTrue(after.wait())
        XCTAssertTrue(box.closed)
        XCTAssertEqual(box.queued, 0)
        XCTAssertEqual(t.server.openConnections, 0)
    }

    /// A peer that keeps sending while its stream is open: libevent keeps reading (close detection),
    /// so without a bound the bytes would pile up in the input buffer for the stream's whole life.
    /// Past one largest request's worth the connection is closed; the server serves others.
    func testBytesSentBehindAnOpenStreamAreBoundedByClosingTheConnection() throws {
        let s = Streams()
        let t = try makeServer(s) { c in
            c.maxHeaderBytes = 4096
            c.maxBodyBytes = 4096
        }
        let c = try WireConnection(port: t.port)
        let (_, reader) = try c.openEventStream("/stream")
        XCTAssertEqual(try reader.next()?.data, "hello")
        XCTAssertTrue(s.opened.wait())
        // Within the bound (a pipelined request's worth): the stream stays open.
        try c.send(raw: "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        let stream = s.streams[0]
        let probe = Signal()
        stream.loop.execute {
            stream.write(Array("data: still\n\n".utf8))
            probe.fire()
        }
        XCTAssertTrue(probe.wait())
        XCTAssertEqual(try reader.next()?.data, "still")
        // Past it: closed, the stream told, nothing left open.
        let flood = [UInt8](repeating: UInt8(ascii: "x"), count: 64 * 1024)
        for _ in 0..<4 { try? c.send(raw: flood) }
        XCTAssertTrue(s.closed.wait(10), "the flooding peer's stream was closed")
        XCTAssertTrue(c.waitForClose(timeout: 10))
        let after = Signal()
        final class Box: @unchecked Sendable { var closed = false }
        let box = Box()
        stream.loop.execute {
            box.closed = stream.isClosed
            after.fire()
        }
        XCTAssertTrue(after.wait())
        XCTAssertTrue(box.closed)
        let other = try WireConnection(port: t.port)
        XCTAssertEqual(try other.request("GET", "/hello").status, 200)
    }

    func testQueuedBytesGrowWhenTheReaderStopsReading() throws {
        let s = Streams()
        let t = try makeServer(s)
        let c = try WireConnection(port: t.port)
        let (_, reader) = try c.openEventStream("/stream")
        XCTAssertEqual(try reader.next()?.data, "hello")
        XCTAssertTrue(s.opened.wait())
        let stream = s.streams[0]
        let queued = onLoop(stream) {
            let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 64 * 1024)
            for _ in 0..<100 { stream.write(chunk) }  // 6.4 MB, far more than socket buffers hold
            return stream.queuedBytes
        }
        XCTAssertGreaterThan(try XCTUnwrap(queued), 1_000_000)
    }

    /// Runs `body` on `stream`'s loop and returns its result (nil if the loop did not run it within 5 s).
    private func onLoop<T>(_ stream: HTTPStream, _ body: @escaping @Sendable () -> T) -> T? {
        let box = LoopResult<T>()
        let done = Signal()
        stream.loop.execute {
            box.value = body()
            done.fire()
        }
        return done.wait() ? box.value : nil
    }

    /// Chunks are queued without asking for writability and written at once: what the socket does not
    /// take must still go out as the reader reads (the server waits to write only then), in order,
    /// and the queue ends empty.
    func testEventsTheSocketCouldNotTakeAtOnceArriveWholeAndInOrder() throws {
        let s = Streams()
        let t = try makeServer(s)
        let c = try WireConnection(port: t.port, timeout: 20)
        let (_, reader) = try c.openEventStream("/stream")
        XCTAssertEqual(try reader.next()?.data, "hello")
        XCTAssertTrue(s.opened.wait())
        let stream = s.streams[0]
        let queued = onLoop(stream) {
            for i in 0..<100 {  // 6.4 MB: far more than the socket's buffers hold
                let payload = String(i) + String(repeating: "a", count: 64 * 1024)
                stream.write(Array("data: \(payload)\n\n".utf8))
            }
            return stream.queuedBytes
        }
        XCTAssertGreaterThan(
            try XCTUnwrap(queued), 1_000_000, "the socket took only part: the rest waits for writability")
        for i in 0..<100 {
            let data = try reader.next()?.data
            XCTAssertEqual(data?.count, String(i).count + 64 * 1024)
            XCTAssertTrue(data?.hasPrefix(String(i) + "a") == true, "event \(i) in order")
        }
        XCTAssertEqual(onLoop(stream) { stream.queuedBytes }, 0)
    }

    /// An HTTP/1.0 reader gets the stream without chunk framing: the events as they are, until the
    /// server ends the stream and closes the connection.
    func testAnHTTP10StreamIsNotChunked() throws {
        let s = Streams()
        let t = try makeServer(s)
        let c = try WireConnection(port: t.port)
        try c.send(raw: "GET /stream HTTP/1.0\r\n\r\n")
        XCTAssertTrue(s.opened.wait())
        let stream = s.streams[0]
        stream.loop.execute {
            stream.write(Array("data: two\n\n".utf8))
            stream.end()
        }
        let response = try c.readResponse()
        XCTAssertEqual(response.status, 200)
        XCTAssertNil(response.header("Transfer-Encoding"))
        XCTAssertEqual(String(decoding: response.body, as: UTF8.self), "data: hello\n\ndata: two\n\n")
    }

    /// Chunks queued in one piece (`clibevent_stream_chunk`) are byte for byte what evhttp's
    /// `evhttp_send_reply_chunk` sends: size lines of one to five hex digits, the end of the stream.
    func testDirectChunksAreTheBytesEvhttpSends() throws {
        func wire(direct: Bool) throws -> [UInt8] {
            let s = Streams()
            let t = try makeServer(s) { $0.directReplies = direct }
            let peer = try RawPeer(port: t.port)
            try peer.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            XCTAssertTrue(s.opened.wait())
            let stream = s.streams[0]
            stream.loop.execute {
                for size in [1, 15, 16, 255, 4096, 70_000] { stream.write([UInt8](repeating: 0x62, count: size)) }
                stream.end()
            }
            var bytes: [UInt8] = []
            let tail = Array("0\r\n\r\n".utf8)
            while !(bytes.count > 4 && Array(bytes.suffix(5)) == tail) { bytes += try peer.readSome() }
            // From the body on: the head carries a Date that may differ.
            let body = bytes.firstRange(of: Array("\r\n\r\n".utf8)).map { Array(bytes[$0.upperBound...]) } ?? []
            return body
        }
        let direct = try wire(direct: true)
        XCTAssertEqual(direct, try wire(direct: false))
        XCTAssertEqual(String(decoding: direct.prefix(18), as: UTF8.self), "d\r\ndata: hello\n\n\r\n")  // 13 = 0xd
        XCTAssertTrue(String(decoding: direct, as: UTF8.self).contains("\r\n11170\r\nbbb"), "70,000 = 0x11170")
    }

    func testGracefulShutdownEndsOpenStreamsAndTurnsStateDraining() throws {
        let s = Streams()
        let t = try makeServer(s)
        let c = try WireConnection(port: t.port)
        let (_, reader) = try c.openEventStream("/stream")
        XCTAssertEqual(try reader.next()?.data, "hello")
        XCTAssertTrue(s.opened.wait())
        let stateDuringDrain = Lock<HTTPServer.State?>(nil)
        t.server.onDrain = {
            stateDuringDrain.withLock { $0 = t.server.state }
            for stream in s.streams {
                stream.loop.execute {
                    stream.write(Array("event: end\ndata: {\"reason\":\"shutdown\"}\n\n".utf8))
                    stream.end()
                }
            }
        }
        let finished = Signal()
        Thread.detachNewThread {
            t.server.shutdown(gracePeriod: 5)
            finished.fire()
        }
        let end = try reader.next()
        XCTAssertEqual(end?.event, "end")
        XCTAssertEqual(end?.data, #"{"reason":"shutdown"}"#)
        XCTAssertTrue(finished.wait(10))
        XCTAssertEqual(stateDuringDrain.withLock { $0 }, .draining)
        XCTAssertEqual(t.server.state, .stopped)
        XCTAssertTrue(c.waitForClose(timeout: 5))
        XCTAssertThrowsError(try WireConnection(port: t.port).request("GET", "/hello"))
    }
}

/// What a closure run on a loop returned, for the test thread (`StreamTests.onLoop`; read after its signal).
private final class LoopResult<T>: @unchecked Sendable {
    var value: T?
}
