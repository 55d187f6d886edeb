/// One dispatched Server-Sent Event, as a browser's `EventSource` would see it.
///
/// A value type; safe to pass between threads.
package struct SSEEvent: Equatable, Sendable, CustomStringConvertible {
    /// The last event id seen on the stream when this event was dispatched (WHATWG: the id
    /// persists across events until changed); `nil` when no non-empty id has been set.
    package var id: String?
    /// The event type; `"message"` when the event had no `event:` field.
    package var event: String
    /// The `data:` lines joined with LF.
    package var data: String

    /// Creates an event value.
    package init(id: String? = nil, event: String = "message", data: String) {
        self.id = id
        self.event = event
        self.data = data
    }

    /// `id/event: data`, for assertion messages.
    package var description: String { "[\(id ?? "-")] \(event): \(data)" }
}
