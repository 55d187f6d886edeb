/// One HTTP response as received: status line, headers in arrival order, and the de-framed body.
///
/// A value type; safe to pass between threads.
package struct WireResponse: Sendable, CustomStringConvertible {
    /// The status code, e.g. `200`.
    package var status: Int
    /// The reason phrase, e.g. `"OK"` (may be empty).
    package var reason: String
    /// The header fields in arrival order, names as sent.
    package var headers: [(String, String)]
    /// The body after removing the transfer framing (chunked or `Content-Length`).
    package var body: [UInt8]

    /// Creates a response value.
    package init(status: Int, reason: String, headers: [(String, String)], body: [UInt8] = []) {
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body
    }

    /// The value of the first header named `name` (case-insensitive), or `nil`.
    package func header(_ name: String) -> String? {
        headers.first { Self.namesMatch($0.0, name) }?.1
    }

    /// All values of the headers named `name` (case-insensitive), in arrival order.
    package func headerValues(_ name: String) -> [String] {
        headers.filter { Self.namesMatch($0.0, name) }.map(\.1)
    }

    /// ASCII case-insensitive equality of header names (field names are ASCII tokens), without
    /// building lowercased copies.
    static func namesMatch(_ a: String, _ b: String) -> Bool {
        let x = a.utf8
        let y = b.utf8
        guard x.count == y.count else { return false }
        for (p, q) in zip(x, y) where p != q {
            let lp = p >= 0x41 && p <= 0x5A ? p | 0x20 : p
            let lq = q >= 0x41 && q <= 0x5A ? q | 0x20 : q
            if lp != lq { return false }
        }
        return true
    }

    /// The body decoded as UTF-8 (invalid sequences replaced).
    package var text: String { String(decoding: body, as: UTF8.self) }

    /// `"HTTP 200 OK"` plus the body's first 200 characters, for assertion messages.
    package var description: String { "HTTP \(status) \(reason) \(String(text.prefix(200)))" }
}
