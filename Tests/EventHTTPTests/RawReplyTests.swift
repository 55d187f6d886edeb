import EventHTTP
import Foundation
import Glibc
import WireClient
import XCTest

/// Complete responses written in one piece (`RawReply`): the exact bytes on the wire, the same bytes
/// evhttp's own reply path sends, and the connection handling evhttp does after them (keep-alive,
/// pipelining, HTTP/1.0, `Connection: close`, HEAD, large bodies, a client leaving mid-response).
final class RawReplyTests: XCTestCase {
    static let stateBody = Array(#"{"seq":7,"viewModels":{}}"#.utf8)
    /// 256 KiB that are not one repeated byte (a lost or reordered piece shows).
    static let bigBody: [UInt8] = (0..<(256 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }

    /// A server with the routes below; `direct` false sends every response through evhttp's header list.
    private func server(direct: Bool = true, configure: (inout HTTPServer.Configuration) -> Void = { _ in })
        throws -> TestServer
    {
        try TestServer(
            configure: {
                $0.directReplies = direct
                configure(&$0)
            },
            routes: { r in
                r.get("/state") { _ in
                    HTTPResponse(
                        status: 200, headers: [("Content-Type", "application/json"), ("Cache-Control", "no-store")],
                        body: RawReplyTests.stateBody)
                }
                r.get("/plain") { _ in HTTPResponse(status: 200, body: Array("x".utf8)) }
                r.post("/created") { _ in HTTPResponse(status: 201, headers: [("Location", "/created/1")]) }
                r.get("/sized") { _ in
                    HTTPResponse(
                        status: 200, headers: [("Content-Type", "text/plain"), ("content-length", "3")],
                        body: Array("abc".utf8))
                }
                r.get("/nothing") { _ in HTTPResponse(status: 204) }
                r.get("/refuse") { _ in
                    .problem(status: 503, detail: "refused", headers: [("Connection", "close")])
                }
                r.get("/broken-header") { _ in
                    HTTPResponse(
                        status: 200, headers: [("X-Split", "a\r\nInjected: yes"), ("Content-Type", "text/plain")],
                        body: Array("ok".utf8))
                }
                r.get("/big") { _ in
                    HTTPResponse(
                        status: 200, headers: [("Content-Type", "application/octet-stream")],
                        body: RawReplyTests.bigBody)
                }
                r.get("/huge") { _ in
                    HTTPResponse(status: 200, body: [UInt8](repeating: 0x61, count: 16 << 20))
                }
            })
    }

    // MARK: exact bytes

    func testHeadBytesAreExactlyEvhttpsLayout() throws {
        let t = try server()
        let before = Int(time(nil))
        let peer = try RawPeer(port: t.port)
        try peer.send(
            "GET /state HTTP/1.1\r\nHost: x\r\n\r\n" + "GET /plain HTTP/1.1\r\nHost: x\r\n\r\n"
                + "GET /state HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
                + "POST /created HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
                + "GET /sized HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let all = try peer.readToEnd()
        let after = Int(time(nil))
        let (text, dates) = RawPeer.replacingDates(all)
        XCTAssertEqual(dates.count, 5, "one Date per response")
        for d in dates {
            let seconds = try XCTUnwrap(HTTPDate.parse(d), d)
            XCTAssertTrue((before...after).contains(seconds), "\(d) not within \(before)...\(after)")
            XCTAssertEqual(HTTPDate.format(seconds), d)
        }
        let state = String(decoding: RawReplyTests.stateBody, as: UTF8.self)
        let expected =
            "HTTP/1.1 200 OK\r\nX-Content-Type-Options: nosniff\r\nContent-Type: application/json\r\n"
            + "Cache-Control: no-store\r\nDate: DATE\r\nContent-Length: \(state.utf8.count)\r\n\r\n\(state)"
            // no Content-Type of its own: evhttp's default, after Content-Length
            + "HTTP/1.1 200 OK\r\nX-Content-Type-Options: nosniff\r\nDate: DATE\r\nContent-Length: 1\r\n"
            + "Content-Type: application/octet-stream\r\n\r\nx"
            // HTTP/1.0 asking for keep-alive: the version echoed, keep-alive confirmed
            + "HTTP/1.0 200 OK\r\nX-Content-Type-Options: nosniff\r\nContent-Type: application/json\r\n"
            + "Cache-Control: no-store\r\nDate: DATE\r\nContent-Length: \(state.utf8.count)\r\n"
            + "Connection: keep-alive\r\n\r\n\(state)"
            // no body: Content-Length 0
            + "HTTP/1.1 201 Created\r\nX-Content-Type-Options: nosniff\r\nLocation: /created/1\r\nDate: DATE\r\n"
            + "Content-Length: 0\r\nContent-Type: application/octet-stream\r\n\r\n"
            // the handler's own Content-Length, not a second one; the request's close answered
            + "HTTP/1.1 200 OK\r\nX-Content-Type-Options: nosniff\r\nContent-Type: text/plain\r\ncontent-length: 3\r\n"
            + "Date: DATE\r\nConnection: close\r\n\r\nabc"
        XCTAssertEqual(text, expected)
        XCTAssertEqual(try directReplies(t), 5, "all five written by RawReply")
    }

    /// The same requests against a server whose responses all go through evhttp's header list: byte
    /// for byte the same (but the `Date` values), including where RawReply declines.
    func testBytesAreTheSameAsEvhttpsOwnReplies() throws {
        let direct = try server()
        let viaEvhttp = try server(direct: false)
        let exchanges: [String] = [
            "GET /state HTTP/1.1\r\nHost: x\r\n\r\nGET /state HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            "GET /state HTTP/1.0\r\n\r\n",
            "GET /plain HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\nGET /plain HTTP/1.0\r\nConnection: CLOSE\r\n\r\n",
            "POST /created HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\nGET /sized HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            "HEAD /state HTTP/1.1\r\nHost: x\r\n\r\nHEAD /plain HTTP/1.0\r\n\r\n",
            "GET /nothing HTTP/1.1\r\nHost: x\r\n\r\nGET /missing HTTP/1.1\r\nHost: x\r\n\r\nGET /state HTTP/1.0\r\n\r\n",
            "GET /refuse HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET /broken-header HTTP/1.1\r\nHost: x\r\n\r\nGET /state HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            // a chunked request body leaves evhttp's request flagged chunked: declined, evhttp answers
            "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
                + "GET /state HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            "GET /items/%41b HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\nDELETE /state HTTP/1.0\r\n\r\n",
            "GET http://elsewhere.example/state HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ]
        for exchange in exchanges {
            let a = try RawPeer(port: direct.port)
            try a.send(exchange)
            let b = try RawPeer(port: viaEvhttp.port)
            try b.send(exchange)
            let (mine, _) = RawPeer.replacingDates(try a.readToEnd())
            let (theirs, _) = RawPeer.replacingDates(try b.readToEnd())
            XCTAssertFalse(theirs.isEmpty, exchange)
            XCTAssertEqual(mine, theirs, exchange)
        }
        XCTAssertGreaterThanOrEqual(try directReplies(direct), 10, "RawReply wrote most of them")
        XCTAssertEqual(try directReplies(viaEvhttp), 0)
    }

    // MARK: connection handling

    func testThreePipelinedRequestsInOneWriteAreAnsweredInOrder() throws {
        let t = try server()
        let c = try WireConnection(port: t.port)
        try c.send(raw: (["one", "two", "three"].flatMap { c.requestBytes("GET", "/items/\($0)") }))
        for id in ["one", "two", "three"] {
            let r = try c.readResponse()
            XCTAssertEqual(r.status, 200)
            XCTAssertEqual(r.text, #"{"id":"\#(id)"}"#)
        }
        XCTAssertEqual(try c.request("GET", "/state").body, RawReplyTests.stateBody, "the connection stays usable")
        XCTAssertEqual(try directReplies(t), 4)
    }

    func testOneConnectionServesAHundredRequestsInTurn() throws {
        let t = try server()
        let c = try WireConnection(port: t.port)
        for i in 0..<100 {
            let r = try c.request("GET", "/items/\(i)")
            XCTAssertEqual(r.status, 200)
            XCTAssertEqual(r.text, #"{"id":"\#(i)"}"#)
            XCTAssertNil(r.header("Connection"))
        }
        XCTAssertEqual(t.server.openConnections, 1, "one connection, kept alive")
        XCTAssertEqual(try directReplies(t), 100)
    }

    func testHTTP10ClosesUnlessAskedToKeepAlive() throws {
        let t = try server()
        let closing = try WireConnection(port: t.port)
        try closing.send(raw: "GET /state HTTP/1.0\r\n\r\n")
        let r = try closing.readResponse()
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.body, RawReplyTests.stateBody)
        XCTAssertNil(r.header("Connection"))
        XCTAssertTrue(closing.waitForClose(timeout: 5), "HTTP/1.0 without keep-alive: closed after the response")

        let kept = try WireConnection(port: t.port)
        for _ in 0..<3 {
            try kept.send(raw: "GET /state HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            let r = try kept.readResponse()
            XCTAssertEqual(r.body, RawReplyTests.stateBody)
            XCTAssertEqual(r.header("Connection"), "keep-alive")
        }
        XCTAssertEqual(try directReplies(t), 4)
    }

    func testConnectionCloseClosesAfterTheResponse() throws {
        let t = try server()
        let c = try WireConnection(port: t.port)
        try c.send(
            raw: "GET /state HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /plain HTTP/1.1\r\nHost: x\r\n\r\n")
        let r = try c.readResponse()
        XCTAssertEqual(r.body, RawReplyTests.stateBody)
        XCTAssertEqual(r.header("Connection"), "close")
        XCTAssertTrue(c.waitForClose(timeout: 5))
        XCTAssertThrowsError(try c.readResponse(), "nothing answered after the close")
    }

    func testHeadHasTheHeadersAndNoBody() throws {
        let t = try server()
        let peer = try RawPeer(port: t.port)
        // a body after HEAD's head would be read as the start of the next response
        try peer.send(
            "HEAD /state HTTP/1.1\r\nHost: x\r\n\r\nGET /plain HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let (text, _) = RawPeer.replacingDates(try peer.readToEnd())
        let parts = text.components(separatedBy: "\r\n\r\n")
        XCTAssertEqual(parts.count, 3, text)
        let head = parts[0].components(separatedBy: "\r\n")
        XCTAssertEqual(head.first, "HTTP/1.1 200 OK")
        XCTAssertTrue(head.contains("Content-Length: \(RawReplyTests.stateBody.count)"), text)
        XCTAssertTrue(head.contains("Content-Type: application/json"), text)
        XCTAssertTrue(parts[1].hasPrefix("HTTP/1.1 200 OK\r\n"), "the next response follows the head at once: \(text)")
        XCTAssertEqual(parts[2], "x")
        XCTAssertEqual(try directReplies(t), 1, "HEAD goes through evhttp")
    }

    func testA256KiBBodyArrivesWhole() throws {
        let t = try server()
        let c = try WireConnection(port: t.port)
        for _ in 0..<2 {
            let r = try c.request("GET", "/big")
            XCTAssertEqual(r.status, 200)
            XCTAssertEqual(r.header("Content-Length"), String(RawReplyTests.bigBody.count))
            XCTAssertEqual(r.body.count, RawReplyTests.bigBody.count)
            XCTAssertTrue(r.body == RawReplyTests.bigBody, "the body's bytes differ")
        }
        XCTAssertEqual(try directReplies(t), 2)
    }

    /// The next request arrives while a response is still being written: evhttp must not read it
    /// then (the raw path clears the bufferevent's read callback as `evhttp_write_buffer` does) and
    /// answers it once the response is out.
    func testARequestArrivingWhileTheResponseIsWrittenIsAnsweredAfterIt() throws {
        let t = try server()
        let peer = try RawPeer(port: t.port)
        try peer.send("GET /huge HTTP/1.1\r\nHost: x\r\n\r\n")
        var received = try peer.readSome()  // 16 MiB do not fit in the socket buffers: still writing
        try peer.send("GET /state HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        received += try peer.readToEnd(timeout: 20)
        let text = String(decoding: received.prefix(512), as: UTF8.self)
        let headEnd = try XCTUnwrap(text.range(of: "\r\n\r\n"), text)
        let firstHead = text[..<headEnd.lowerBound]
        XCTAssertTrue(firstHead.contains("Content-Length: \(16 << 20)"), String(firstHead))
        let secondStart = text.utf8.distance(from: text.startIndex, to: headEnd.upperBound) + (16 << 20)
        XCTAssertGreaterThan(received.count, secondStart)
        XCTAssertTrue(received[secondStart...].starts(with: Array("HTTP/1.1 200 OK\r\n".utf8)))
        XCTAssertTrue(received.suffix(RawReplyTests.stateBody.count) == RawReplyTests.stateBody[...])
        XCTAssertEqual(try directReplies(t), 2)
    }

    func testAClientLeavingMidResponseDoesNotHurtTheServer() throws {
        let t = try server { $0.threads = 1 }
        for _ in 0..<3 {
            let peer = try RawPeer(port: t.port)
            try peer.send("GET /huge HTTP/1.1\r\nHost: x\r\n\r\n")
            XCTAssertTrue(try peer.readSome().starts(with: Array("HTTP/1.1 200 OK\r\n".utf8)))
            peer.reset()  // RST with most of the 16 MiB still queued
        }
        // the same loop answers, and every connection is gone
        let c = try WireConnection(port: t.port)
        XCTAssertEqual(try c.request("GET", "/state").body, RawReplyTests.stateBody)
        c.close()
        let deadline = Date().addingTimeInterval(5)
        while t.server.openConnections > 0 && Date() < deadline { usleep(10_000) }  // polls the condition
        XCTAssertEqual(t.server.openConnections, 0)
        XCTAssertEqual(try directReplies(t), 4)
    }

    /// A complete response is written from inside `send`, not when the loop next polls the socket: the
    /// peer reads all of it while the handler that sent it still runs on the loop. evhttp's own way
    /// queues it for `EPOLLOUT` (two `epoll_ctl`s and a loop iteration more per request): the peer would
    /// get nothing until the handler returned, and the handler's wait below would time out. evhttp then
    /// completes the request at once: the same connection serves the next request.
    func testACompleteResponseLeavesBeforeTheHandlerThatSentItReturns() throws {
        final class Outcome: @unchecked Sendable {
            let peerRead = Signal()
            let handlerDone = Signal()
            var peerReadWhileHandlerRan = false  // written on the loop before `handlerDone`, read after it
        }
        let outcome = Outcome()
        let t = try TestServer(
            configure: { $0.threads = 1 },
            routes: { r in
                r.add(.GET, "/wait") { _, res in
                    res.send(HTTPResponse(status: 200, body: Array("now".utf8)))
                    outcome.peerReadWhileHandlerRan = outcome.peerRead.wait(5)
                    outcome.handlerDone.fire()
                }
                r.get("/plain") { _ in HTTPResponse(status: 200, body: Array("x".utf8)) }
            })
        let c = try WireConnection(port: t.port)
        try c.send(raw: "GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")
        let first = try c.readResponse()
        outcome.peerRead.fire()
        XCTAssertEqual(first.status, 200)
        XCTAssertEqual(first.text, "now")
        XCTAssertTrue(outcome.handlerDone.wait(10))
        XCTAssertTrue(outcome.peerReadWhileHandlerRan, "the response reached the peer only after its handler returned")
        try c.send(raw: "GET /plain HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(try c.readResponse().text, "x")
        XCTAssertEqual(try directReplies(t), 2)
    }

    /// Requests to `/later` whose handlers keep their responders unanswered, for a test to answer later.
    private final class HeldAnswers: @unchecked Sendable {
        var responders: [HTTPResponder] = []  // appended on the loop before `arrived` fires
        let arrived = Signal()

        /// Answers the `index`th held request with `text`, on its loop.
        func answer(_ index: Int, _ text: String) {
            let res = responders[index]
            res.loop.execute { res.send(HTTPResponse(status: 200, body: Array(text.utf8))) }
        }
    }

    /// A one-loop server whose `/later` is held (`HeldAnswers`) and `/plain` answers "x" at once.
    private func heldServer(
        _ held: HeldAnswers, configure: @escaping (inout HTTPServer.Configuration) -> Void = { _ in }
    ) throws -> TestServer {
        try TestServer(
            configure: {
                $0.threads = 1
                configure(&$0)
            },
            routes: { r in
                r.add(.GET, "/later") { _, res in
                    held.responders.append(res)
                    held.arrived.fire()
                }
                r.get("/plain") { _ in HTTPResponse(status: 200, body: Array("x".utf8)) }
            })
    }

    /// An answer that comes later (from another loop iteration, as a cluster node's `202` comes after Redis
    /// answered): the connection keeps reading meanwhile, with evhttp's read callback off. A request sent
    /// behind the waiting one is answered after it; a peer that leaves while its answer waits is noticed
    /// at once (with reading off, only when the answer was written), and the late answer goes nowhere.
    func testWhileAnAnswerWaitsTheNextRequestWaitsItsTurnAndAPeerLeavingIsNoticed() throws {
        let held = HeldAnswers()
        let t = try heldServer(held)
        let c = try WireConnection(port: t.port)
        try c.send(raw: "GET /later HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertTrue(held.arrived.wait())
        try c.send(raw: "GET /plain HTTP/1.1\r\nHost: x\r\n\r\n")  // while /later's answer waits
        held.answer(0, "later")
        XCTAssertEqual(try c.readResponse().text, "later")
        XCTAssertEqual(try c.readResponse().text, "x")

        let d = try WireConnection(port: t.port)
        try d.send(raw: "GET /later HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertTrue(held.arrived.wait())
        d.close()
        let deadline = Date().addingTimeInterval(5)
        while t.server.openConnections > 1 && Date() < deadline { usleep(10_000) }  // polls the condition
        XCTAssertEqual(t.server.openConnections, 1, "the peer that left while its answer waited is still counted")
        let late = held.responders[1]
        let sent = Signal()
        late.loop.execute {
            late.send(HTTPResponse(status: 200, body: Array("late".utf8)))
            sent.fire()
        }
        XCTAssertTrue(sent.wait())
        try c.send(raw: "GET /plain HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(try c.readResponse().text, "x")
        XCTAssertEqual(t.server.openConnections, 1)
    }

    /// `--idle-timeout` times a connection waiting on its client, not one waiting on the server's answer:
    /// with reading kept on while the answer waits, its read time-out is off until the answer is out, and
    /// back on for the idle keep-alive connection after it.
    func testAnAnswerThatWaitsLongerThanTheIdleTimeoutStillReachesItsPeer() throws {
        let held = HeldAnswers()
        let t = try heldServer(held) { $0.idleTimeout = 0.2 }
        let c = try WireConnection(port: t.port)
        try c.send(raw: "GET /later HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertTrue(held.arrived.wait())
        usleep(600_000)  // three idle time-outs pass while the answer waits: the stimulus, not a synchronisation
        held.answer(0, "late but here")
        XCTAssertEqual(try c.readResponse().text, "late but here")
        XCTAssertTrue(c.waitForClose(timeout: 5), "the idle time-out closes the connection once it waits on its client")
    }

    /// Draining adds `Connection: close`, which evhttp must see to close: that response takes evhttp's way.
    func testAResponseWhileDrainingClosesTheConnection() throws {
        // the held request: its handler keeps the responder; draining answers it
        let held = HeldAnswers()
        let t = try heldServer(held)
        t.server.onDrain = { held.answer(0, "bye") }
        let h = try WireConnection(port: t.port)
        try h.send(raw: "GET /later HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertTrue(held.arrived.wait())
        let stopped = Signal()
        Thread.detachNewThread {
            t.server.shutdown(gracePeriod: 5)
            stopped.fire()
        }
        let r = try h.readResponse()
        XCTAssertEqual(r.text, "bye")
        XCTAssertEqual(r.header("Connection"), "close")
        XCTAssertTrue(h.waitForClose(timeout: 5))
        XCTAssertTrue(stopped.wait(10))
    }

    /// `http_direct_replies_total` summed over the loops.
    private func directReplies(_ t: TestServer) throws -> Int {
        let done = Signal()
        final class Box: @unchecked Sendable { var text = "" }
        let box = Box()
        let loop = t.server.loops[0]
        loop.execute {
            t.server.requestMetricsExposition(replyOn: loop) {
                box.text = $0
                done.fire()
            }
        }
        XCTAssertTrue(done.wait())
        let line = try XCTUnwrap(
            box.text.split(separator: "\n").first { $0.hasPrefix("http_direct_replies_total ") }, box.text)
        return try XCTUnwrap(Int(line.split(separator: " ")[1]))
    }
}

/// A bare TCP client for the exact bytes of responses (WireClient parses them).
/// Not thread-safe: one test thread uses it.
final class RawPeer {
    private let fd: Int32
    private var closed = false

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw WireError.closed }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            Glibc.close(fd)
            throw WireError.closed
        }
    }

    deinit { if !closed { Glibc.close(fd) } }

    func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw WireError.closed }
            sent += n
        }
    }

    /// Waits up to `timeout` seconds for bytes; the first ones that arrive.
    func readSome(timeout: Double = 5) throws -> [UInt8] {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, Int32(timeout * 1000)) == 1 else { throw WireError.timeout }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        let n = recv(fd, &buffer, buffer.count, 0)
        guard n > 0 else { throw WireError.closed }
        return Array(buffer[0..<n])
    }

    /// Everything until the server closes (within `timeout` seconds).
    func readToEnd(timeout: Double = 5) throws -> [UInt8] {
        let deadline = Date().addingTimeInterval(timeout)
        var all: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { throw WireError.timeout }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, Int32(left * 1000) + 1) == 1 else { throw WireError.timeout }
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { return all }
            all += buffer[0..<n]
        }
    }

    /// Closes with a reset (SO_LINGER 0, then close): the server's next write fails.
    func reset() {
        guard !closed else { return }
        var l = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, socklen_t(MemoryLayout<linger>.size))
        Glibc.close(fd)
        closed = true
    }

    /// The bytes as text with every `Date` header value replaced by "DATE", and the values.
    static func replacingDates(_ bytes: [UInt8]) -> (String, [String]) {
        var text = String(decoding: bytes, as: UTF8.self)
        var dates: [String] = []
        while let range = text.range(of: "\r\nDate: ") {
            guard let end = text[range.upperBound...].range(of: "\r\n") else { break }
            dates.append(String(text[range.upperBound..<end.lowerBound]))
            text.replaceSubrange(range.lowerBound..<end.lowerBound, with: "\r\nDate- DATE")
        }
        return (text.replacingOccurrences(of: "\r\nDate- DATE", with: "\r\nDate: DATE"), dates)
    }
}
