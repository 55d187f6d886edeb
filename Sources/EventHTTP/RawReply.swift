import CLibevent
import Glibc

/// Writes a complete response into its connection's output buffer in one piece — status line,
/// headers, blank line and body in one `evbuffer_reserve_space`/`evbuffer_commit_space` — and
/// completes the request as `evhttp_send_reply` would (`clibevent_raw_reply_finish` in
/// `CLibevent/shim.h`). evhttp's own way copies every header into its list (`evhttp_add_header`:
/// an entry and two `strdup`s each) and prints each line with its own `evbuffer_add_printf`.
///
/// The bytes are the ones evhttp sends for the same response, in its order: the status line with
/// the request's version; the common headers; the response's headers; `Date`; `Content-Length`
/// (unless the response has one); then what `evhttp_make_header_response` appends:
/// `Connection: keep-alive` to an HTTP/1.0 request that asked for it, the default `Content-Type`
/// when the response has none, `Connection: close` when the request asked for it.
///
/// `send` declines (returns false, nothing written) where evhttp's rules differ or the response
/// needs them: HEAD, CONNECT, 1xx, 204, 304, versions other than 1.0 and 1.1, proxy requests, a
/// request whose chunked body left `req->chunked` set, a response with its own `Connection` or
/// `Transfer-Encoding`, a header that evhttp would drop (CR or LF in a name, or a bare one in a
/// value). `HTTPResponder` then sends it through evhttp.
///
/// Threading: a namespace; `send` runs on the loop that owns the connection.
enum RawReply {
    /// evhttp's default `Content-Type` for responses without one (`evhttp_set_default_content_type`).
    static let defaultContentType: StaticString = "application/octet-stream"

    /// `headers` as wire lines ("Name: value\r\n" each), or nil when one of them must go through
    /// evhttp (see `send`) or is one of the headers `send` itself writes or looks for.
    static func headerBlock(_ headers: [(String, String)]) -> [UInt8]? {
        var block: [UInt8] = []
        for (name, value) in headers {
            guard kind(of: name) == .other, !hasLineBreak(name.utf8), !hasLineBreak(value.utf8) else { return nil }
            block += Array(name.utf8) + Array(": ".utf8) + Array(value.utf8) + Array("\r\n".utf8)
        }
        return block
    }

    /// Writes `response` (status ≥ 200, not 204 or 304) to `request`'s connection and completes the
    /// request. Returns false, having written nothing, when evhttp must send it instead.
    static func send(
        _ response: HTTPResponse, to request: OpaquePointer, commonHeaders: [UInt8], date: inout DateHeaderCache
    ) -> Bool {
        let status = response.status
        guard status >= 200, status <= 999, status != 204, status != 304 else { return false }
        let flags = Int(clibevent_raw_reply_check(request))
        guard flags & Int(CLIBEVENT_RAW_OK) != 0, let output = clibevent_raw_reply_output(request) else {
            return false
        }
        let reason = HTTPStatus.reasonPhrase(status)
        let body = response.body
        let dateCount = date.withCurrentBytes { $0.count }
        // An upper bound of the size: every optional line, a 20-digit length.
        var bound = 13 + reason.utf8CodeUnitCount + 2 + commonHeaders.count + (8 + dateCount) + 38 + 24 + 19 + 2
        bound += 16 + defaultContentType.utf8CodeUnitCount + body.count
        for (name, value) in response.headers { bound += name.utf8.count + value.utf8.count + 4 }
        var vector = iovec()  // evbuffer_iovec is `struct iovec` here
        guard evbuffer_reserve_space(output, bound, &vector, 1) == 1, vector.iov_len >= bound,
            let start = vector.iov_base?.assumingMemoryBound(to: UInt8.self)
        else { return false }
        var p = start
        putStatic(flags & Int(CLIBEVENT_RAW_HTTP11) != 0 ? "HTTP/1.1 " : "HTTP/1.0 ", &p)
        p[0] = UInt8(48 + status / 100)
        p[1] = UInt8(48 + status / 10 % 10)
        p[2] = UInt8(48 + status % 10)
        p[3] = UInt8(ascii: " ")
        p += 4
        putStatic(reason, &p)
        putStatic("\r\n", &p)
        commonHeaders.withUnsafeBufferPointer { putBytes($0, &p) }
        var hasContentType = false
        var hasContentLength = false
        for (name, value) in response.headers {
            switch kind(of: name) {
            case .other: break
            case .contentType: hasContentType = true
            case .contentLength: hasContentLength = true
            case .evhttpOnly: return false
            }
            guard putChecked(name, &p) else { return false }
            putStatic(": ", &p)
            guard putChecked(value, &p) else { return false }
            putStatic("\r\n", &p)
        }
        putStatic("Date: ", &p)
        date.withCurrentBytes { putBytes($0, &p) }
        putStatic("\r\n", &p)
        if !hasContentLength {
            putStatic("Content-Length: ", &p)
            putDecimal(body.count, &p)
            putStatic("\r\n", &p)
        }
        if flags & Int(CLIBEVENT_RAW_HTTP11) == 0 && flags & Int(CLIBEVENT_RAW_KEEPALIVE) != 0 {
            putStatic("Connection: keep-alive\r\n", &p)
        }
        if !hasContentType {
            putStatic("Content-Type: ", &p)
            putStatic(defaultContentType, &p)
            putStatic("\r\n", &p)
        }
        if flags & Int(CLIBEVENT_RAW_CLOSE) != 0 { putStatic("Connection: close\r\n", &p) }
        putStatic("\r\n", &p)
        body.withUnsafeBufferPointer { putBytes($0, &p) }
        vector.iov_len = start.distance(to: p)
        guard evbuffer_commit_space(output, &vector, 1) == 0 else { return false }
        clibevent_raw_reply_finish(request, Int32(status))
        return true
    }

    /// What `send` makes of a response header's name.
    private enum Kind { case other, contentType, contentLength, evhttpOnly }

    /// By length first (most names differ in length from all four), then ASCII case-insensitively
    /// on the bytes in place (cheaper than `caseInsensitiveEquals`, which walks two UTF-8 views).
    private static func kind(of name: String) -> Kind {
        switch name.utf8.count {
        case 10: return named(name, "connection") ? .evhttpOnly : .other
        case 12: return named(name, "content-type") ? .contentType : .other
        case 14: return named(name, "content-length") ? .contentLength : .other
        case 17: return named(name, "transfer-encoding") ? .evhttpOnly : .other
        default: return .other
        }
    }

    /// Whether `name` is `lowercase` (of the same length) but for the case of ASCII letters.
    private static func named(_ name: String, _ lowercase: StaticString) -> Bool {
        let expected = lowercase.utf8Start
        if let equal = name.utf8.withContiguousStorageIfAvailable({ bytes -> Bool in
            guard bytes.count == lowercase.utf8CodeUnitCount else { return false }
            for i in 0..<bytes.count {
                let c = bytes[i]
                if (c >= 65 && c <= 90 ? c | 0x20 : c) != expected[i] { return false }
            }
            return true
        }) {
            return equal
        }
        return name.lowercased() == lowercase.description
    }

    /// A CR or LF anywhere (evhttp drops such a name; a value only when the break is not followed by
    /// a space or tab, which this stricter test also declines).
    private static func hasLineBreak<C: Collection<UInt8>>(_ bytes: C) -> Bool {
        bytes.contains { $0 == 13 || $0 == 10 }
    }

    @inline(__always)
    private static func putStatic(_ s: StaticString, _ p: inout UnsafeMutablePointer<UInt8>) {
        p.update(from: s.utf8Start, count: s.utf8CodeUnitCount)
        p += s.utf8CodeUnitCount
    }

    @inline(__always)
    private static func putBytes(_ bytes: UnsafeBufferPointer<UInt8>, _ p: inout UnsafeMutablePointer<UInt8>) {
        guard let base = bytes.baseAddress else { return }
        p.update(from: base, count: bytes.count)
        p += bytes.count
    }

    /// Copies `s`; false when it holds a CR or LF (see `hasLineBreak`).
    @inline(__always)
    private static func putChecked(_ s: String, _ p: inout UnsafeMutablePointer<UInt8>) -> Bool {
        if let clean = s.utf8.withContiguousStorageIfAvailable({ bytes -> Bool in
            guard !hasLineBreak(bytes) else { return false }
            putBytes(bytes, &p)
            return true
        }) {
            return clean
        }
        guard !hasLineBreak(s.utf8) else { return false }
        for byte in s.utf8 {
            p.pointee = byte
            p += 1
        }
        return true
    }

    /// `n` (not negative) in decimal.
    private static func putDecimal(_ n: Int, _ p: inout UnsafeMutablePointer<UInt8>) {
        var digits = 1
        var rest = n / 10
        while rest > 0 {
            digits += 1
            rest /= 10
        }
        var v = n
        for i in stride(from: digits - 1, through: 0, by: -1) {
            p[i] = UInt8(48 + v % 10)
            v /= 10
        }
        p += digits
    }
}
