import EventHTTP
import Glibc
import JSON
import Logging
import WireClient
import XCTest

final class LimitTests: XCTestCase {
    /// A second server on a port another one listens on fails to start (EADDRINUSE) instead of joining
    /// the first one's SO_REUSEPORT group and taking half of its connections.
    func testSecondServerOnAPortInUseFailsToStart() throws {
        let first = try TestServer()
        var config = HTTPServer.Configuration()
        config.port = first.port
        config.threads = 2
        let second = HTTPServer(configuration: config, logger: Logger(label: "test"))
        XCTAssertThrowsError(try second.start()) { error in
            XCTAssertEqual((error as? SystemError)?.errno, EADDRINUSE, "\(error)")
        }
        for _ in 0..<8 { XCTAssertEqual(try WireConnection.get(port: first.port, path: "/hello").status, 200) }
    }

    func testOversizedBodyGets413ProblemAndServerKeepsServing() throws {
        let t = try TestServer(configure: { $0.maxBodyBytes = 1024 })
        let ok = try WireConnection.post(port: t.port, path: "/echo", body: [UInt8](repeating: 65, count: 1024))
        XCTAssertEqual(ok.body.count, 1024)
        let big = try WireConnection.post(port: t.port, path: "/echo", body: [UInt8](repeating: 65, count: 1025))
        let p = TestServer.problem(big, status: 413)
        XCTAssertEqual(p?["detail"], "request body is 1025 bytes; the limit is 1024 bytes")
        // far past the hard limit: libevent cuts it off; the server still serves others
        let c = try WireConnection(port: t.port)
        try c.send(raw: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n")
        let cut = try c.readResponse()
        XCTAssertEqual(cut.status, 413)
        XCTAssertEqual(try WireConnection.get(port: t.port, path: "/hello").status, 200)
    }

    func testHeaderOverflowGets431Problem() throws {
        let t = try TestServer(configure: { $0.maxHeaderBytes = 2048 })
        let r = try WireConnection.get(
            port: t.port, path: "/hello", headers: [("X-Big", String(repeating: "a", count: 3000))])
        XCTAssertEqual(
            TestServer.problem(r, status: 431)?["detail"]?.stringValue?.contains("limit is 2048 bytes"), true)
        XCTAssertEqual(try WireConnection.get(port: t.port, path: "/hello").status, 200)
    }

    func testSlowClientTimesOutWith408WithoutBlockingOthers() throws {
        let t = try TestServer(configure: { $0.requestReadTimeout = 0.5 })
        let slow = try WireConnection(port: t.port, timeout: 5)
        try slow.send(raw: "GET /hello HTTP/1.1\r\nHost: x\r\nX-Slow: ")  // never finishes its headers
        // others are served meanwhile
        for _ in 0..<10 { XCTAssertEqual(try WireConnection.get(port: t.port, path: "/hello").status, 200) }
        let r = try slow.readResponse()  // the server answers 408 and closes
        _ = TestServer.problem(r, status: 408)
        XCTAssertEqual(r.header("X-Content-Type-Options"), "nosniff")  // the common headers, as every answer
        XCTAssertTrue(slow.waitForClose(timeout: 5))
    }

    func testIdleKeepAliveConnectionIsClosedAfterIdleTimeout() throws {
        let t = try TestServer(configure: { $0.idleTimeout = 0.5 })
        let c = try WireConnection(port: t.port)
        XCTAssertEqual(try c.request("GET", "/hello").status, 200)
        XCTAssertTrue(c.waitForClose(timeout: 5))
    }

    func testConnectionLimitAnswers503AndFreesSlotsOnClose() throws {
        let t = try TestServer(configure: {
            $0.maxConnections = 2
            $0.threads = 1
        })
        let a = try WireConnection(port: t.port)
        let b = try WireConnection(port: t.port)
        XCTAssertEqual(try a.request("GET", "/hello").status, 200)
        XCTAssertEqual(try b.request("GET", "/hello").status, 200)
        let c = try WireConnection(port: t.port)
        let r = try c.request("GET", "/hello")
        XCTAssertEqual(TestServer.problem(r, status: 503)?["detail"]?.stringValue?.contains("limit of 2"), true)
        XCTAssertEqual(r.header("Retry-After"), "1")
        XCTAssertTrue(c.waitForClose(timeout: 5))
        a.close()
        // the slot frees once the server has seen the close: retry until then (bounded)
        var status = 0
        for _ in 0..<200 {
            status = try WireConnection.get(port: t.port, path: "/hello").status
            if status == 200 { break }
        }
        XCTAssertEqual(status, 200)
        XCTAssertEqual(try b.request("GET", "/hello").status, 200)
    }

    func testMalformedRequestLineGets400AndServerGoesOn() throws {
        let t = try TestServer()
        let c = try WireConnection(port: t.port)
        try c.send(raw: "GARBAGE\r\n\r\n")
        XCTAssertEqual(try c.readResponse().status, 400)
        let abs = try WireConnection(port: t.port)
        try abs.send(raw: "GET ftp://example.com/hello HTTP/1.1\r\nHost: x\r\n\r\n")
        _ = TestServer.problem(try abs.readResponse(), status: 400)
        XCTAssertEqual(try WireConnection.get(port: t.port, path: "/hello").status, 200)
    }
}

final class MethodTests: XCTestCase {
    func testUnrecognizedMethodsGet405ProblemNotLibeventsHTML501() throws {
        let t = try TestServer()
        for (method, path, allow) in [
            ("QUERY", "/hello", "GET, HEAD"), ("BREW", "/index.html", "GET, HEAD"), ("PROPFIND", "/echo", "POST"),
        ] {
            let c = try WireConnection(port: t.port)
            try c.send(raw: "\(method) \(path) HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
            let r = try c.readResponse()
            XCTAssertEqual(TestServer.problem(r, status: 405)?["detail"]?.stringValue?.contains(path), true, method)
            XCTAssertEqual(r.header("Allow"), allow, method)
        }
    }
}
