/// One dispatched Server-Sent Event, as a browser's `EventSource` would see it.
///
/// A value type; safe to pass between threads.
public struct SSEEvent: Equatable, Sendable, CustomStringConvertible {
    /// The last event id seen on the stream when this event was dispatched (WHATWG: the id
    /// persists across events until changed); `nil` when no non-empty id has been set.
    public var id: String?
    /// The event type; `"message"` when the event had no `event:` field.
    public var event: String
    /// The `data:` lines joined with LF.
    public var data: String

    /// Creates an event value.
    public init(id: String? = nil, event: String = "message", data: String) {
        self.id = id
        self.event = event
        self.data = data
    }

    /// `id/event: data`, for assertion messages.
    public var description: String { "[\(id ?? "-")] \(event): \(data)" }
}
