import JSON

/// A request as the simulator core sees it (no sockets).
package struct SimRequest: Sendable {
    package var method: String
    /// The decoded path, e.g. `/search/repositories`.
    package var path: String
    /// Decoded query items in order.
    package var query: [(String, String)]
    package var headers: [(String, String)]
    package var body: [UInt8]

    /// Creates a request.
    package init(
        method: String = "GET", path: String, query: [(String, String)] = [], headers: [(String, String)] = [],
        body: [UInt8] = []
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
    }

    /// The first value of header `name` (case-insensitive).
    package func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers.first { $0.0.lowercased() == lower }?.1
    }

    /// The first value of query parameter `name`.
    package func parameter(_ name: String) -> String? { query.first { $0.0 == name }?.1 }
}

/// A response of the simulator core.
package struct SimResponse: Sendable, Equatable {
    package var status: Int
    package var headers: [(String, String)]
    package var body: [UInt8]

    /// Creates a response.
    package init(status: Int, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON response.
    package static func json(_ status: Int, _ value: JSONValue, headers: [(String, String)] = []) -> SimResponse {
        SimResponse(
            status: status, headers: [("Content-Type", "application/json; charset=utf-8")] + headers, body: value.bytes)
    }

    /// The first value of header `name` (case-insensitive).
    package func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers.first { $0.0.lowercased() == lower }?.1
    }

    /// The body parsed as JSON, if it is JSON.
    package var json: JSONValue? { try? JSONValue.parse(body) }

    package static func == (a: SimResponse, b: SimResponse) -> Bool {
        a.status == b.status && a.body == b.body
            && a.headers.map { "\($0.0):\($0.1)" } == b.headers.map { "\($0.0):\($0.1)" }
    }
}

/// What the front end must do with a request.
package enum SimOutcome: Sendable, Equatable {
    /// Send `response` after `delayMilliseconds`.
    case respond(SimResponse, delayMilliseconds: Int)
    /// Never answer (the `hang` fault).
    case hang
}
