import BFF
import JSON
import WireClient
import XCTest

/// Stalled readers: closed after the write time-out, counted, and converging on reconnect.
final class StalledReaderTests: XCTestCase {
    /// A reader that accepts no bytes at all is closed after the write time-out, even while the
    /// server keeps adding keep-alive comments to its queue (those used to restart evhttp's clock);
    /// a slow reader that keeps taking a little is not. The closure is counted, and the client
    /// converges by reconnecting with Last-Event-ID.
    func testStalledReaderIsClosedAfterTheWriteTimeoutAndConvergesOnReconnect() throws {
        let writeTimeout = 3.0  // a busy machine may pause the reader for a second; it must not look stalled
        let t = try LiveApp(configure: {
            $0.http.writeTimeout = writeTimeout
            $0.http.idleTimeout = 600  // not what closes it
            $0.keepAliveInterval = 0.2  // comments keep being queued while it stalls
            $0.streamHighWaterBytes = 64 << 20  // stays live: keeps writing (and queueing) every frame
            $0.inputRate = 1_000_000
            $0.inputBurst = 1_000_000
        })
        let id = try t.createSession()
        let slow = try WireConnection(port: t.port, timeout: 20)
        slow.setReceiveBufferSize(64 * 1024)
        let (head, reader) = try slow.openEventStream("/api/sessions/\(id)/events")
        XCTAssertEqual(head.status, 200)
        var client = ClientState()
        try client.apply(XCTUnwrap(reader.next()))
        // ~9.6 MB of events (one 16 KB label per greet): more than the kernel's socket buffers hold
        // (4 MB send, 128 KB receive here), so bytes wait in the server. The reader takes one event
        // now and then: slow, but never a write time-out's worth without progress.
        let poster = try WireConnection(port: t.port)
        let long = String(repeating: "y", count: 16_000)
        for i in 0..<600 {
            _ = try t.post(id, "greeting", "name", #"{"value":"\#(long)\#(i)"}"#, on: poster)
            _ = try t.post(id, "greeting", "greet", on: poster)
            if i % 10 == 0 { try client.apply(XCTUnwrap(reader.next())) }
        }
        // 2 s of a slow reader: 128 KB every quarter second (the server sees progress only when the
        // kernel frees room in its 4 MB send buffer: much slower readers can look stalled for a while)
        for _ in 0..<8 {
            usleep(250_000)
            for _ in 0..<8 { try client.apply(XCTUnwrap(reader.next())) }
        }
        XCTAssertEqual(counter(t, "http_stream_write_timeouts_total"), 0, "a slow reader that makes progress was cut")
        // now it stops reading: closed once the write time-out passed without progress (polled, bounded)
        let lastRead = MonotonicClock.now()
        while counter(t, "http_stream_write_timeouts_total") < 1 && MonotonicClock.now() < lastRead + writeTimeout + 10
        {
            usleep(20_000)
        }
        let seenAfter = MonotonicClock.now() - lastRead
        XCTAssertEqual(counter(t, "http_stream_write_timeouts_total"), 1, "the stalled stream was not closed")
        XCTAssertGreaterThanOrEqual(seenAfter, writeTimeout, "closed before the write time-out")
        XCTAssertLessThan(seenAfter, writeTimeout + 2, "closed long after the write time-out")
        XCTAssertEqual(counter(t, "bff_open_event_streams"), 0)
        // the client reads what had reached it, then sees the connection end without `event: end`
        var sawEnd = false
        while let e = try reader.next(timeout: 10) {
            try client.apply(e)
            if e.event == "end" { sawEnd = true }
        }
        XCTAssertFalse(sawEnd)
        XCTAssertNotEqual(client.snapshot, try t.state(id), "the cut stream missed the latest events")
        // what EventSource does: reconnect with the last id it saw
        let (_, resumed) = try t.stream(id, lastEventID: reader.lastEventID)
        let final = try t.state(id)
        var events = 0
        while client.snapshot != final, events < 1000, let e = try resumed.next(timeout: 10) {
            try client.apply(e)
            events += 1
        }
        XCTAssertEqual(client.snapshot, final)
        print("write time-out \(writeTimeout) s: closure seen \(seenAfter) s after the reader's last read")
    }

    /// `--idle-timeout` is for idle keep-alive connections: a quiet stream (its reader sends nothing,
    /// and nothing was written for longer than the idle time-out) stays open.
    func testIdleTimeoutDoesNotCloseAQuietStream() throws {
        let t = try LiveApp(configure: {
            $0.http.idleTimeout = 0.3
            $0.keepAliveInterval = 30
        })
        let id = try t.createSession()
        let (_, reader) = try t.stream(id)
        XCTAssertEqual(try reader.next()?.event, "snapshot")
        XCTAssertThrowsError(try reader.next(timeout: 1.2), "the stream ended at the idle time-out") {
            XCTAssertEqual($0 as? WireError, .timeout)
        }
        _ = try t.post(id, "greeting", "name", #"{"value":"still here"}"#)
        XCTAssertEqual(try reader.next()?.event, "greeting")
    }

    private func counter(_ t: LiveApp, _ name: String) -> Double {
        guard let text = try? WireConnection.get(port: t.port, path: "/metrics").text else { return -1 }
        return text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
            .flatMap { Double($0.split(separator: " ")[1]) } ?? 0
    }
}
