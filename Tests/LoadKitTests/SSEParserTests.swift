import WireClient
import XCTest

/// Pure tests of the SSE parser, feeding byte by byte and in odd slicings.
final class SSEParserTests: XCTestCase {
    private func parseByteByByte(_ text: String) -> (events: [SSEEvent], parser: SSEParser) {
        var parser = SSEParser()
        var events: [SSEEvent] = []
        for byte in Array(text.utf8) { events += parser.feed([byte]) }
        return (events, parser)
    }

    func testContractExampleByteByByte() {
        let stream =
            "retry: 2000\n\nid: 41\nevent: snapshot\ndata: {\"seq\":41}\n\n"
            + "id: 42\nevent: search\ndata: {\"inputSeq\":7}\n\n: keep-alive\n\n"
        let (events, parser) = parseByteByByte(stream)
        XCTAssertEqual(
            events,
            [
                SSEEvent(id: "41", event: "snapshot", data: "{\"seq\":41}"),
                SSEEvent(id: "42", event: "search", data: "{\"inputSeq\":7}"),
            ])
        XCTAssertEqual(parser.retry, 2000)
        XCTAssertEqual(parser.commentCount, 1)
        XCTAssertEqual(parser.lastEventID, "42")
    }

    func testAllThreeLineEndingsAndCRLFSplitAcrossFeeds() {
        var parser = SSEParser()
        var events = parser.feed(Array("data: a\r".utf8))
        events += parser.feed(Array("\ndata: b\rdata: c\n\r".utf8))
        events += parser.feed(Array("\n".utf8))  // the LF of a CRLF split from its CR: not a second blank line
        events += parser.feed(Array("data: d\r\n\r\n".utf8))
        XCTAssertEqual(events.map(\.data), ["a\nb\nc", "d"])
    }

    func testOnlyOneLeadingSpaceIsRemovedAndColonlessFieldsHaveEmptyValue() {
        let (events, _) = parseByteByByte("data:  two spaces\ndata:nospace\ndata\n\n")
        XCTAssertEqual(events, [SSEEvent(data: " two spaces\nnospace\n")])
    }

    func testEventWithoutDataIsNotDispatchedAndItsTypeIsReset() {
        let (events, _) = parseByteByByte("event: lonely\n\ndata: x\n\n")
        XCTAssertEqual(events, [SSEEvent(event: "message", data: "x")])
    }

    func testIdPersistsAndEmptyIdClearsIt() {
        let (events, _) = parseByteByByte("id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n")
        XCTAssertEqual(events.map(\.id), ["7", "7", nil])
    }

    func testIdWithNulIsIgnoredAndRetryNeedsDigitsOnly() {
        let (events, parser) = parseByteByByte("id: 1\n\nid: 2\u{0}x\nretry: 12a\ndata: z\n\nretry: 300\n")
        XCTAssertEqual(events, [SSEEvent(id: "1", data: "z")])
        XCTAssertEqual(parser.retry, 300)
    }

    func testUnknownFieldsIgnoredAndUnterminatedEventDiscarded() {
        let (events, _) = parseByteByByte("foo: bar\ndata: kept\n\ndata: never dispatched\n")
        XCTAssertEqual(events, [SSEEvent(data: "kept")])
    }

    func testLeadingBOMIsSkippedAndUTF8Survives() {
        let (events, _) = parseByteByByte("\u{FEFF}data: grüße ✓\n\n")
        XCTAssertEqual(events, [SSEEvent(data: "grüße ✓")])
    }

    /// The slice path (bulk line copies, used by the load tool) agrees with the byte-by-byte path
    /// for every split of a stream into two feeds: CR, LF and CRLF endings, BOM, comments, retry.
    func testSliceFeedingAgreesWithByteByByteAtEverySplit() {
        let text =
            "\u{FEFF}retry: 1500\r\n: ping\r\rid: 7\revent: a\ndata: x\r\ndata: ü\n\ndata:y\r\n\r\nid\ndata: z\n\n"
        let bytes = Array(text.utf8)
        let (expected, reference) = parseByteByByte(text)
        XCTAssertEqual(expected.map(\.data), ["x\nü", "y", "z"])
        for split in 0...bytes.count {
            var parser = SSEParser()
            var events: [SSEEvent] = []
            parser.feed(bytes[..<split]) { events.append($0) }
            parser.feed(bytes[split...]) { events.append($0) }
            XCTAssertEqual(events, expected, "split at \(split)")
            XCTAssertEqual(parser.commentCount, reference.commentCount)
            XCTAssertEqual(parser.retry, reference.retry)
            XCTAssertEqual(parser.lastEventID, reference.lastEventID)
        }
    }
}
