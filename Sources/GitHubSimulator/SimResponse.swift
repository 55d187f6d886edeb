import JSON

/// A request as the simulator core sees it (no sockets).
public struct SimRequest: Sendable {
    public var method: String
    /// The decoded path, e.g. `/search/repositories`.
    public var path: String
    /// Decoded query items in order.
    public var query: [(String, String)]
    public var headers: [(String, String)]
    public var body: [UInt8]

    /// Creates a request.
    public init(
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
    public func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers.first { $0.0.lowercased() == lower }?.1
    }

    /// The first value of query parameter `name`.
    public func parameter(_ name: String) -> String? { query.first { $0.0 == name }?.1 }
}

/// A response of the simulator core.
public struct SimResponse: Sendable, Equatable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]

    /// Creates a response.
    public init(status: Int, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON response.
    public static func json(_ status: Int, _ value: JSONValue, headers: [(String, String)] = []) -> SimResponse {
        SimResponse(
            status: status, headers: [("Content-Type", "application/json; charset=utf-8")] + headers, body: value.bytes)
    }

    /// The first value of header `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers.first { $0.0.lowercased() == lower }?.1
    }

    /// The body parsed as JSON, if it is JSON.
    public var json: JSONValue? { try? JSONValue.parse(body) }

    public static func == (a: SimResponse, b: SimResponse) -> Bool {
        a.status == b.status && a.body == b.body
            && a.headers.map { "\($0.0):\($0.1)" } == b.headers.map { "\($0.0):\($0.1)" }
    }
}

/// What the front end must do with a request.
public enum SimOutcome: Sendable, Equatable {
    /// Send `response` after `delayMilliseconds`.
    case respond(SimResponse, delayMilliseconds: Int)
    /// Never answer (the `hang` fault).
    case hang
}
