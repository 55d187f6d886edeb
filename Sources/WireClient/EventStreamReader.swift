/// Reads Server-Sent Events from a connection opened with `WireConnection.openEventStream`.
///
/// Not thread-safe: it shares its connection's thread.
package final class EventStreamReader {
    /// The connection the stream runs on (close it to drop the stream).
    package let connection: WireConnection

    init(connection: WireConnection) {
        self.connection = connection
    }

    /// The next event, waiting up to `timeout` seconds; `nil` at the end of the stream (the
    /// server ended the chunked body or closed). Throws `.timeout` when nothing arrived.
    package func next(timeout: Double = 5) throws -> SSEEvent? {
        let deadline = MonotonicClock.now() + timeout
        while true {
            if !connection.sseEvents.isEmpty { return connection.sseEvents.removeFirst() }
            if connection.streamEnded || connection.atEndOfFile { return nil }
            try connection.pump(deadline: deadline)
        }
    }

    /// The next `count` events (throws `.timeout`, or `.closed` if the stream ends first).
    package func next(_ count: Int, timeout: Double = 5) throws -> [SSEEvent] {
        let deadline = MonotonicClock.now() + timeout
        var events: [SSEEvent] = []
        while events.count < count {
            guard let event = try next(timeout: max(0.001, deadline - MonotonicClock.now())) else {
                throw WireError.closed
            }
            events.append(event)
        }
        return events
    }

    /// Events until one named `name` (inclusive), waiting up to `timeout` seconds in total.
    package func next(until name: String, timeout: Double = 5) throws -> [SSEEvent] {
        let deadline = MonotonicClock.now() + timeout
        var events: [SSEEvent] = []
        while true {
            guard let event = try next(timeout: max(0.001, deadline - MonotonicClock.now())) else {
                throw WireError.closed
            }
            events.append(event)
            if event.event == name { return events }
        }
    }

    /// How many comment lines (keep-alives) the stream has carried so far.
    package var commentCount: Int { connection.sse.commentCount }
    /// The last `retry:` value (milliseconds) the stream sent, if any.
    package var retry: Int? { connection.sse.retry }
    /// The last event id seen (what a browser would send as `Last-Event-ID`); empty if none.
    package var lastEventID: String { connection.sse.lastEventID }
    /// True when the connection closed in the middle of a chunk (not a clean end of stream).
    package var truncated: Bool { connection.streamTruncated }
}
