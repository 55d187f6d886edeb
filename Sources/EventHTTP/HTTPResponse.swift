import JSON

/// A complete response: status, headers and body bytes.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON response (`application/json`).
    public static func json(_ status: Int, _ value: JSONValue, headers: [(String, String)] = []) -> HTTPResponse {
        json(status, bytes: value.bytes, headers: headers)
    }

    /// A JSON response whose body is already encoded (compact JSON, e.g. written straight into bytes on
    /// the per-input path, where building a `JSONValue` only to serialize it costs more than the reply).
    public static func json(_ status: Int, bytes: [UInt8], headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: headers.isEmpty ? jsonHeaders : jsonHeaders + headers, body: bytes)
    }

    /// `Content-Type: application/json`, made once (an array literal is a new allocation per response).
    private static let jsonHeaders = [("Content-Type", "application/json")]

    /// An RFC 9457 problem document: `application/problem+json` with type, title, status, detail.
    /// `detail` says precisely what was wrong (the field, the limit, the id).
    public static func problem(
        status: Int, detail: String, headers: [(String, String)] = [], extra: JSONObject = JSONObject()
    ) -> HTTPResponse {
        var body: JSONObject = [
            "type": "about:blank", "title": .string(HTTPStatus.reason(status)), "status": .int(status),
            "detail": .string(detail),
        ]
        body.merge(extra)
        return HTTPResponse(
            status: status, headers: [("Content-Type", "application/problem+json")] + headers,
            body: JSONValue.object(body).bytes)
    }

    /// The first value of a header (case-insensitive).
    public func header(_ name: String) -> String? {
        headers.first { $0.0.caseInsensitiveEquals(name) }?.1
    }
}

/// An error that knows its HTTP status and becomes a problem response.
public struct HTTPError: Error, Sendable {
    public var status: Int
    public var detail: String
    public var headers: [(String, String)]

    public init(_ status: Int, _ detail: String, headers: [(String, String)] = []) {
        self.status = status
        self.detail = detail
        self.headers = headers
    }

    /// The problem response for this error.
    public var response: HTTPResponse { .problem(status: status, detail: detail, headers: headers) }
}

/// Reason phrases.
public enum HTTPStatus {
    /// The standard reason phrase for `status`.
    public static func reason(_ status: Int) -> String { reasonPhrase(status).description }

    /// The same as a static C string: handed to evhttp without building a temporary C string.
    static func reasonPhrase(_ status: Int) -> StaticString {
        switch status {
        case 200: return "OK"
        case 201: return "Created"
        case 202: return "Accepted"
        case 204: return "No Content"
        case 304: return "Not Modified"
        case 400: return "Bad Request"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 409: return "Conflict"
        case 413: return "Content Too Large"
        case 415: return "Unsupported Media Type"
        case 422: return "Unprocessable Content"
        case 429: return "Too Many Requests"
        case 417: return "Expectation Failed"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        default: return status < 400 ? "OK" : "Error"
        }
    }
}

extension StringProtocol {
    /// Without leading and trailing HTTP whitespace (space, tab, CR, LF).
    /// Works on UTF-8 code units (the four are ASCII), not on Characters: no grapheme breaking.
    public func trimmingHTTPWhitespace() -> String {
        let ws: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D || $0 == 0x0A }
        let u = utf8
        guard let first = u.firstIndex(where: { !ws($0) }) else { return "" }
        // `end` follows the last non-whitespace byte: it is an ASCII whitespace byte or the end,
        // so both bounds fall on character boundaries.
        var end = first
        var i = first
        while i != u.endIndex {
            let byte = u[i]
            i = u.index(after: i)
            if !ws(byte) { end = i }
        }
        return String(self[first..<end])
    }
}

extension String {
    /// ASCII case-insensitive equality (header names). On every header lookup (a request's handler asks
    /// for several): compares the two strings' contiguous UTF-8 in place (a `zip` of their UTF-8 views
    /// cost far more per lookup).
    public func caseInsensitiveEquals(_ other: String) -> Bool {
        guard utf8.count == other.utf8.count else { return false }
        var a = self
        var b = other
        return a.withUTF8 { x in
            b.withUTF8 { y in
                for i in 0..<x.count where x[i] != y[i] {
                    let lx = x[i] &- 65 < 26 ? x[i] | 0x20 : x[i]
                    let ly = y[i] &- 65 < 26 ? y[i] | 0x20 : y[i]
                    if lx != ly { return false }
                }
                return true
            }
        }
    }
}

extension HTTPStatus {
    /// Calls `body` with the reason phrase as a NUL-terminated C string (static storage, no copy).
    static func withReason<R>(_ status: Int, _ body: (UnsafePointer<CChar>) -> R) -> R {
        let phrase = reasonPhrase(status)
        return phrase.utf8Start.withMemoryRebound(to: CChar.self, capacity: phrase.utf8CodeUnitCount + 1, body)
    }
}
