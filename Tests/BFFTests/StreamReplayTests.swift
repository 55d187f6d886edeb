import BFF
import JSON
import WireClient
import XCTest

/// Last-Event-ID replay, stale ids, framing, and slow readers.
final class StreamReplayTests: XCTestCase {
    func testReconnectWithLastEventIDReplaysMissedEventsContiguously() throws {
        let t = try LiveApp()
        let id = try t.createSession()
        var client = ClientState()
        do {
            let (c, reader) = try t.stream(id)
            try client.apply(XCTUnwrap(reader.next()))
            _ = try t.post(id, "greeting", "name", #"{"value":"a"}"#)
            try client.apply(XCTUnwrap(reader.next()))
            c.close()
        }
        XCTAssertEqual(client.seq, 1)
        for name in ["", "b", "", "c"] { _ = try t.post(id, "greeting", "name", #"{"value":"\#(name)"}"#) }
        _ = try t.post(id, "greeting", "greet")
        let (_, reader) = try t.stream(id, lastEventID: "1")
        let replayed = try reader.next(5)
        XCTAssertEqual(replayed.map(\.id), ["2", "3", "4", "5", "6"], "no snapshot first, ids contiguous")
        for e in replayed { try client.apply(e) }
        XCTAssertEqual(client.snapshot, try t.state(id))
        // caught up: a reconnect at the current id replays nothing and then goes live
        let (_, live) = try t.stream(id, lastEventID: "6")
        _ = try t.post(id, "greeting", "name", #"{"value":""}"#)
        XCTAssertEqual(try live.next()?.id, "7")
    }

    func testUnknownFutureOrNonNumericLastEventIDGetsAFreshSnapshot() throws {
        let t = try LiveApp(configure: { $0.historyEvents = 4 })
        let id = try t.createSession()
        for name in ["a", "", "b", "", "c", "", "d"] {
            _ = try t.post(id, "greeting", "name", #"{"value":"\#(name)"}"#)
        }
        for last in ["1", "99", "abc", "-5"] {  // 1 fell out of the 4-event history
            let (c, reader) = try t.stream(id, lastEventID: last)
            let e = try XCTUnwrap(reader.next())
            XCTAssertEqual(e.event, "snapshot", "Last-Event-ID \(last)")
            XCTAssertEqual(e.id, "7")
            XCTAssertEqual(try JSONValue.parse(e.data), try t.state(id))
            c.close()
        }
        let (_, recent) = try t.stream(id, lastEventID: "4")  // still in history
        XCTAssertEqual(try recent.next(3).map(\.id), ["5", "6", "7"])
    }

    func testFramingHasNoStrayLineBreaksForHostileText() throws {
        let t = try LiveApp()
        let id = try t.createSession()
        let (_, reader) = try t.stream(id)
        let hostile = "line1\\nline2\\r\\nline3\\r\\u2028é😀<script>"
        _ = try t.post(id, "greeting", "name", #"{"value":"\#(hostile)"}"#)
        _ = try t.post(id, "greeting", "greet")
        let events = try reader.next(3)
        let label = try JSONValue.parse(events[2].data)["outputs"]?["label"]?.stringValue
        XCTAssertEqual(label, "Hello, LINE1\nLINE2\r\nLINE3\r\u{2028}É😀<SCRIPT>!")
        for e in events { XCTAssertFalse(e.data.contains("\n") || e.data.contains("\r")) }
    }

    func testSlowReaderKeepsMemoryBoundedAndConvergesToTheFinalState() throws {
        let t = try LiveApp(configure: {
            $0.inputRate = 1_000_000
            $0.inputBurst = 1_000_000
            $0.streamHighWaterBytes = 16 * 1024
        })
        let id = try t.createSession()
        // a reader that reads the head and then stops reading
        let slow = try WireConnection(port: t.port, timeout: 20)
        let (_, reader) = try slow.openEventStream("/api/sessions/\(id)/events")
        var client = ClientState()
        try client.apply(XCTUnwrap(reader.next()))
        let poster = try WireConnection(port: t.port)
        let long = String(repeating: "x", count: 16_000)  // big events fill the socket buffers fast
        let rounds = 1500
        for i in 0..<rounds {
            _ = try t.post(id, "greeting", "name", #"{"value":"\#(i % 2 == 0 ? long + String(i) : "")"}"#, on: poster)
            if i % 2 == 0 { _ = try t.post(id, "greeting", "greet", on: poster) }
        }
        let metrics = try WireConnection.get(port: t.port, path: "/metrics").text
        let coalesced =
            metrics.split(separator: "\n").first { $0.hasPrefix("bff_coalesced_state_frames_total ") }
            .flatMap { Double($0.split(separator: " ")[1]) } ?? 0
        // 2,250 state frames were produced; the kernel's socket buffers (autotuned, several MB on
        // loopback) take a machine-dependent share before the server's queue reaches its mark, and
        // most of the rest must have been coalesced rather than queued.
        XCTAssertGreaterThan(coalesced, Double(rounds) / 2, "state frames were coalesced instead of queued")
        // 2250 events of up to ~16 KB were produced (~24 MB); the server queued at most the high-water
        // mark plus the kernel's socket buffers. Now read everything and converge.
        let final = try t.state(id)
        var events = 0
        while client.snapshot != final {
            guard let e = try reader.next(timeout: 20) else { break }
            try client.apply(e)
            events += 1
        }
        XCTAssertEqual(client.snapshot, final)
        XCTAssertLessThan(events, rounds, "intermediate states were skipped")
    }

    func testKeepAliveCommentsGoToQuietStreamsOnly() throws {
        let t = try LiveApp(configure: {
            $0.keepAliveInterval = 0.4
            $0.http.threads = 1
        })
        let quiet = try t.createSession()
        let busy = try t.createSession()
        let (_, quietReader) = try t.stream(quiet)
        let (_, busyReader) = try t.stream(busy)
        XCTAssertEqual(try quietReader.next()?.event, "snapshot")
        XCTAssertEqual(try busyReader.next()?.event, "snapshot")
        let poster = try WireConnection(port: t.port)
        var inputs = 0
        // The busy stream carries an event about every 50 ms; the quiet one nothing but comments.
        while quietReader.commentCount < 3 {
            XCTAssertLessThan(inputs, 200, "the quiet stream got no keep-alive comments")
            if inputs >= 200 { break }
            inputs += 1
            // alternately a name and none: buttonEnabled changes every time, so every input is an event
            _ = try t.post(busy, "greeting", "name", #"{"value":"\#(inputs % 2 == 1 ? "x" : "")"}"#, on: poster)
            XCTAssertEqual(try busyReader.next()?.event, "greeting")
            XCTAssertThrowsError(try quietReader.next(timeout: 0.05), "comments only, no events")
        }
        XCTAssertEqual(busyReader.commentCount, 0, "a stream that carries events gets no keep-alives")
        XCTAssertGreaterThanOrEqual(inputs, 12, "three comments took at least three intervals (1.2 s)")
    }
}
