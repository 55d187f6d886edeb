import EventHTTP
import JSON
import WireClient
import XCTest

/// Request framing at the edges (RFC 9112 §6): what evhttp alone gets wrong or answers in HTML.
final class FramingTests: XCTestCase {
    /// Sends `raw` on a fresh connection; returns the one response and whether the server then closed.
    private func exchange(_ t: TestServer, _ raw: String) throws -> (WireResponse, Bool) {
        let c = try WireConnection(port: t.port)
        try c.send(raw: raw)
        let r = try c.readResponse()
        return (r, c.waitForClose(timeout: 5))
    }

    func testConflictingContentLengthsAre400ProblemAndNothingIsSmuggled() throws {
        let t = try TestServer()
        // evhttp alone used the first length: "hello" was echoed and the rest ran as a second request
        let smuggle =
            "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 42\r\n\r\n"
            + "helloGET /hello HTTP/1.1\r\nHost: x\r\n\r\n"
        let c = try WireConnection(port: t.port)
        try c.send(raw: smuggle)
        let r = try c.readResponse()
        let detail = TestServer.problem(r, status: 400)?["detail"]?.stringValue ?? ""
        XCTAssertTrue(detail.contains("conflicting Content-Length values '5' and '42'"), detail)
        XCTAssertEqual(r.header("Connection"), "close")
        XCTAssertTrue(c.waitForClose(timeout: 5))
        XCTAssertThrowsError(try c.readResponse(), "a second (smuggled) response arrived")
        XCTAssertEqual(try WireConnection.get(port: t.port, path: "/hello").status, 200)
    }

    func testIdenticalRepeatedContentLengthsAreAccepted() throws {
        let t = try TestServer()
        let c = try WireConnection(port: t.port)
        try c.send(raw: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello")
        let r = try c.readResponse()
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.text, "hello")
        XCTAssertEqual(try c.request("GET", "/hello").status, 200, "the connection stays usable")
    }

    func testMalformedChunkSizeIs400ProblemNot413() throws {
        let t = try TestServer()
        let ok = try WireConnection(port: t.port)
        try ok.send(raw: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        XCTAssertEqual(try ok.readResponse().text, "hello", "well-formed chunked bodies still work")
        for size in ["zz", "5;ext=1", "-5", "0x5", ""] {
            let body = size.isEmpty ? "\r\n\r\n" : "\(size)\r\nhello\r\n0\r\n\r\n"
            let (r, closed) = try exchange(
                t, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\(body)X\r\n")
            let detail = TestServer.problem(r, status: 400)?["detail"]?.stringValue ?? ""
            XCTAssertTrue(detail.contains("chunk size"), "size '\(size)': \(detail)")
            XCTAssertTrue(closed)
        }
    }

    /// What evhttp's own parser and hard limits used to answer in HTML now gets problem JSON.
    func testErrorsEvhttpAnsweredInHTMLAreProblemDocuments() throws {
        let t = try TestServer(configure: {
            $0.maxBodyBytes = 1024
            $0.maxHeaderBytes = 2048
        })
        let cases: [(String, Int, String)] = [
            ("GARBAGE\r\n\r\n", 400, "malformed request line"),
            ("GET /hello HTTP/2.0\r\nHost: x\r\n\r\n", 400, "protocol version"),
            ("GET http://a:b:c/ HTTP/1.1\r\nHost: x\r\n\r\n", 400, "malformed request target"),
            ("GET //a:b:c/ HTTP/1.1\r\nHost: x\r\n\r\n", 400, "malformed request target"),
            ("GET //[::1/ HTTP/1.1\r\nHost: x\r\n\r\n", 400, "malformed request target"),
            ("GET /a#b#c HTTP/1.1\r\nHost: x\r\n\r\n", 400, "malformed request target"),
            ("GET /hello HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", 400, "malformed header line"),
            ("GET /hello HTTP/1.1\r\nHost : x\r\n\r\n", 400, "before its colon"),
            ("GET /hello HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  folded\r\n\r\n", 400, "line folding"),
            // past evhttp's hard limits (about twice the soft ones)
            ("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n", 413, "the limit is 1024 bytes"),
            (
                "GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "a", count: 9000))\r\n\r\n", 431,
                "the limit is 2048 bytes"
            ),
            (
                "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n\(String(repeating: "b", count: 2048))\r\n",
                413, "the limit is 1024 bytes"
            ),
            // framing evhttp would misread
            ("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 400, "Transfer-Encoding"),
            (
                "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
                400,
                "both Transfer-Encoding and Content-Length"
            ),
            ("HEAD /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 400, "no request body"),
            ("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400, "invalid Content-Length"),
            ("POST /echo HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nContent-Length: 2\r\n\r\nhi", 417, "Expect"),
            (
                "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX-Trailer: 1\r\n\r\n",
                400,
                "trailer"
            ),
        ]
        for (raw, status, text) in cases {
            let (r, closed) = try exchange(t, raw)
            let detail = TestServer.problem(r, status: status)?["detail"]?.stringValue ?? ""
            XCTAssertTrue(detail.contains(text), "\(raw.prefix(60)): \(detail)")
            XCTAssertTrue(closed, "\(raw.prefix(60)): connection not closed")
        }
        XCTAssertEqual(try WireConnection.get(port: t.port, path: "/hello").status, 200)
    }

    /// A bad request pipelined behind a good one: the good one is answered first, then the problem.
    func testPipelinedBadRequestIsAnsweredAfterTheGoodOne() throws {
        let t = try TestServer()
        let c = try WireConnection(port: t.port)
        try c.send(
            raw: "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"
                + "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab")
        let first = try c.readResponse()
        XCTAssertEqual(first.status, 200)
        XCTAssertEqual(try JSONValue.parse(first.body)["hello"], "world")
        _ = TestServer.problem(try c.readResponse(), status: 400)
        XCTAssertTrue(c.waitForClose(timeout: 5))
    }
}
