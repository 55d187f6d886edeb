import WireClient
import XCTest

/// Pure tests of the chunked decoder and the HTTP response parser, byte by byte.
final class HTTPParserTests: XCTestCase {
    private struct Collected {
        var heads: [WireResponse] = []
        var bodies: [[UInt8]] = []
        var ends = 0
    }

    private func feedByteByByte(_ text: String, into parser: inout HTTPResponseParser) throws -> Collected {
        var c = Collected()
        for byte in Array(text.utf8) {
            try parser.feed([byte][...]) { event in
                switch event {
                case .head(let h):
                    c.heads.append(h)
                    c.bodies.append([])
                case .body(let b): c.bodies[c.bodies.count - 1] += b
                case .end: c.ends += 1
                }
            }
        }
        return c
    }

    func testChunkedDecoderWithExtensionsTrailerAndLeftover() throws {
        let wire = Array("4;name=v\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-T: 1\r\n\r\nNEXT".utf8)
        var decoder = ChunkedDecoder()
        var out: [UInt8] = []
        var consumed = 0
        for i in wire.indices where !decoder.isDone {
            consumed += try decoder.feed(wire[i...i]) { out += $0 }
        }
        XCTAssertTrue(decoder.isDone)
        XCTAssertEqual(String(decoding: out, as: UTF8.self), "Wikipedia in\r\n\r\nchunks.")
        XCTAssertEqual(Array(wire[consumed...]), Array("NEXT".utf8))
        // Whole buffer at once: stops right after the trailer.
        var whole = ChunkedDecoder()
        let n = try whole.feed(wire[...]) { _ in }
        XCTAssertEqual(n, wire.count - 4)
    }

    func testChunkedDecoderRejectsGarbage() {
        var decoder = ChunkedDecoder()
        XCTAssertThrowsError(try decoder.feed(Array("zz\r\n".utf8)[...]) { _ in })
        var missingCRLF = ChunkedDecoder()
        XCTAssertThrowsError(try missingCRLF.feed(Array("2\r\nabX".utf8)[...]) { _ in })
    }

    func testPipelinedContentLengthChunkedAndNoBodyResponses() throws {
        let wire =
            "HTTP/1.1 100 Continue\r\n\r\n"
            + "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A:  spaced  \r\n\r\nhello"
            + "HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n2\r\n\":\r\n1\r\n1\r\n1\r\n}\r\n0\r\n\r\n"
            + "HTTP/1.1 204 No Content\r\nContent-Length: 99\r\n\r\n"
            + "HTTP/1.1 404 Not Found\n\n"
        var parser = HTTPResponseParser()
        let c = try feedByteByByte(wire, into: &parser)
        XCTAssertEqual(c.heads.map(\.status), [200, 202, 204, 404])
        XCTAssertEqual(c.heads[0].header("x-a"), "spaced")
        XCTAssertEqual(c.heads[1].reason, "Accepted")
        XCTAssertEqual(c.bodies.map { String(decoding: $0, as: UTF8.self) }, ["hello", "{\"a\":1}", "", ""])
        XCTAssertEqual(c.ends, 3, "the 404 without framing lasts until close")
        var ends = c.ends
        try parser.finish { if case .end = $0 { ends += 1 } }
        XCTAssertEqual(ends, 4)
    }

    func testResponseToHeadHasNoBody() throws {
        var parser = HTTPResponseParser()
        parser.nextResponseHasNoBody = true
        let c = try feedByteByByte("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", into: &parser)
        XCTAssertEqual(c.ends, 1)
        XCTAssertTrue(parser.isIdle)
    }

    func testCloseMidBodyIsReportedAsClosed() throws {
        var parser = HTTPResponseParser()
        _ = try feedByteByByte("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", into: &parser)
        XCTAssertThrowsError(try parser.finish { _ in }) { XCTAssertEqual($0 as? WireError, .closed) }
    }

    func testMalformedStatusLineAndContentLength() {
        var a = HTTPResponseParser()
        XCTAssertThrowsError(try feedByteByByte("HTTX/1.1 200 OK\r\n\r\n", into: &a))
        var b = HTTPResponseParser()
        XCTAssertThrowsError(
            try feedByteByByte("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", into: &b))
        var c = HTTPResponseParser()
        XCTAssertThrowsError(try feedByteByByte("HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n", into: &c))
    }

    func testIdenticalContentLengthListIsOneLength() throws {
        var parser = HTTPResponseParser()
        let c = try feedByteByByte(
            "HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\nhelloHTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi",
            into: &parser)
        XCTAssertEqual(c.heads.count, 2)
        XCTAssertEqual(c.bodies, [Array("hello".utf8), Array("hi".utf8)])
        XCTAssertEqual(c.ends, 2)
        XCTAssertTrue(parser.isIdle)
    }
}
