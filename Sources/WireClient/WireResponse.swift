/// One HTTP response as received: status line, headers in arrival order, and the de-framed body.
///
/// A value type; safe to pass between threads.
public struct WireResponse: Sendable, CustomStringConvertible {
    /// The status code, e.g. `200`.
    public var status: Int
    /// The reason phrase, e.g. `"OK"` (may be empty).
    public var reason: String
    /// The header fields in arrival order, names as sent.
    public var headers: [(String, String)]
    /// The body after removing the transfer framing (chunked or `Content-Length`).
    public var body: [UInt8]

    /// Creates a response value.
    public init(status: Int, reason: String, headers: [(String, String)], body: [UInt8] = []) {
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body
    }

    /// The value of the first header named `name` (case-insensitive), or `nil`.
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.0.lowercased() == wanted }?.1
    }

    /// All values of the headers named `name` (case-insensitive), in arrival order.
    public func headerValues(_ name: String) -> [String] {
        let wanted = name.lowercased()
        return headers.filter { $0.0.lowercased() == wanted }.map(\.1)
    }

    /// The body decoded as UTF-8 (invalid sequences replaced).
    public var text: String { String(decoding: body, as: UTF8.self) }

    /// `"HTTP 200 OK"` plus the body's first 200 characters, for assertion messages.
    public var description: String { "HTTP \(status) \(reason) \(String(text.prefix(200)))" }
}
