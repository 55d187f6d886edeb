import Features
import JSON
import ViewModels
import XCTest

@testable import BFF

/// The bytes of one event frame, however it is built: from encoded data, or with the data written
/// into the frame itself (a session's own events).
final class SSEFrameTests: XCTestCase {
    private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    func testAnEventFrameHasItsIdNameAndOneDataLine() {
        XCTAssertEqual(
            text(SSEFrame.event(id: 7, name: "greeting", data: Array("{\"a\":1}".utf8))),
            "id: 7\nevent: greeting\ndata: {\"a\":1}\n\n")
        XCTAssertEqual(
            text(SSEFrame.event(id: nil, name: "end", json: ["reason": "deleted"])),
            "event: end\ndata: {\"reason\":\"deleted\"}\n\n")
    }

    func testALineBreakInANameNeverReachesTheWire() {
        XCTAssertEqual(
            text(SSEFrame.event(id: 1, name: "a\r\nb\nc", data: Array("1".utf8))),
            "id: 1\nevent: abc\ndata: 1\n\n")
        XCTAssertEqual(
            text(SSEFrame.event(id: 1, name: "a\rb", capacity: 0) { $0.append(0x31) }),
            "id: 1\nevent: ab\ndata: 1\n\n")
    }

    func testDataWrittenIntoTheFrameGivesTheSameBytesAsEncodedData() {
        let events = [
            ViewModelEvent(inputSeq: 3, outputs: ["buttonEnabled": true]),
            ViewModelEvent(inputSeq: nil, outputs: ["message": "é \"quoted\"\n"], signals: ["openURL": "https://x"]),
            ViewModelEvent(inputSeq: 12_345_678, signals: ["deselect": .null]),
            ViewModelEvent(inputSeq: 1, outputs: ["repositories": .array(Array(repeating: ["n": 1], count: 40))]),
        ]
        // The bytes of one, written out (the comparison below shares the framing with what it compares to).
        XCTAssertEqual(
            text(
                SSEFrame.event(id: 1, name: "greeting", capacity: 96) { Session.writeEventData(events[0], into: &$0) }),
            "id: 1\nevent: greeting\ndata: {\"inputSeq\":3,\"outputs\":{\"buttonEnabled\":true}}\n\n")
        for (i, e) in events.enumerated() {
            let viaData = SSEFrame.event(id: i + 1, name: "search", data: Session.eventData(e))
            let inPlace = SSEFrame.event(id: i + 1, name: "search", capacity: 96) {
                Session.writeEventData(e, into: &$0)
            }
            XCTAssertEqual(text(inPlace), text(viaData))
            let data = try? JSONValue.parse(Session.eventData(e))
            XCTAssertEqual(data?["inputSeq"], e.inputSeq.map { .int($0) } ?? .null)
            XCTAssertEqual(data?["outputs"], e.outputs.isEmpty ? nil : .object(e.outputs))
        }
    }
}
