import XCTest

@testable import EventHTTP

/// `RequestFraming` on its own: bytes split at every position must frame like whole requests.
final class RequestFramingTests: XCTestCase {
    private let pipelined = Array(
        ("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
            + "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello"
            + "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n5\r\nhello\r\n10 \r\n0123456789abcdef\r\n0\r\n\r\n"
            + "HEAD /d HTTP/1.0\n\n").utf8)

    private func feed(_ bytes: [UInt8], pieces: Int) throws -> RequestFraming {
        var framing = RequestFraming(maxHeaderBytes: 1024, maxBodyBytes: 1024)
        var i = 0
        while i < bytes.count {
            let end = min(bytes.count, i + pieces)
            var failure: RequestFraming.Rejection?
            bytes[i..<end].withUnsafeBytes { b in
                do throws(RequestFraming.Rejection) { try framing.feed(b) } catch { failure = error }
            }
            if let failure { throw failure }
            i = end
        }
        return framing
    }

    func testPipelinedRequestsFrameTheSameWhateverTheReadSizes() throws {
        for size in [1, 2, 3, 7, 64, pipelined.count] {
            XCTAssertEqual(try feed(pipelined, pieces: size).completeRequests, 4, "reads of \(size) bytes")
        }
    }

    func testRefusalsDoNotDependOnReadSizes() {
        let conflicting = Array(
            "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!".utf8)
        let badChunk = Array(
            "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nxyz\r\n".utf8)
        for size in [1, 5, 1000] {
            XCTAssertThrowsError(try feed(conflicting, pieces: size)) {
                XCTAssertEqual(($0 as? RequestFraming.Rejection)?.status, 400)
                XCTAssertEqual(
                    ($0 as? RequestFraming.Rejection)?.detail, "conflicting Content-Length values '5' and '6'")
            }
            XCTAssertThrowsError(try feed(badChunk, pieces: size)) {
                XCTAssertEqual(($0 as? RequestFraming.Rejection)?.status, 400)
            }
        }
    }
}
