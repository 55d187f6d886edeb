import Glibc

/// Follows the framing of the requests on one connection as their bytes arrive, one step ahead of
/// evhttp's parser, and rejects what evhttp would get wrong or answer itself in HTML:
///
/// - RFC 9112 §6.3 smuggling vectors evhttp accepts: two `Content-Length` fields with different
///   values (evhttp uses the first), `Transfer-Encoding` other than one `chunked` (evhttp would fall
///   back to `Content-Length`), both `Transfer-Encoding` and `Content-Length`, a body on a method
///   evhttp reads none for (HEAD, TRACE, unknown methods: the body would be read as the next
///   request), whitespace between a field name and its colon, obsolete line folding;
/// - a malformed chunk size (evhttp answers `413`), chunk extensions (which evhttp cannot parse),
///   trailer fields;
/// - RFC 9112 §3.2: an HTTP/1.1 request without a `Host` field, or with more than one (`400`);
///   HTTP/1.0 needs none. A target in absolute form (`http://host/path`, §3.2.2) is accepted when its
///   authority is a plain host and port (`LoopHTTP` then routes its path and uses its authority as `Host`);
/// - what evhttp would answer in HTML: a malformed request line or header line, a target that is
///   neither an origin-form path nor an http(s) absolute form (its URI parser fails on some), an unsupported
///   `Expect`, bodies and heads past its hard limits (bodies past the soft limit are rejected here
///   already, from `Content-Length` or the chunk sizes, before they are read; heads at twice the
///   soft limit, under the hard one).
///
/// Repeated `Content-Length` fields that state the same length are accepted (RFC 9110 §8.6 allows
/// it; evhttp reads the one length they agree on); any other repetition is refused.
///
/// Threading: owned by its connection, on the connection's loop.
struct RequestFraming {
    /// Why a request was refused: the status and the problem's detail.
    struct Rejection: Error {
        let status: Int
        let detail: String
    }

    private enum State {
        case head
        case body(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case trailer
    }

    private let maxHeaderBytes: Int
    private let maxHeadBytes: Int
    private let maxBodyBytes: Int
    private var state = State.head
    /// The current line (head, chunk size or trailer) up to its LF.
    private var line: [UInt8] = []
    private var isFirstLine = true
    private var headBytes = 0
    private var chunkedBodyBytes = 0
    // What the head said so far.
    private var mayHaveBody = true
    private var http11 = false
    /// `Host` fields seen in the current head.
    private var hostFields = 0
    private var contentLength: Int?
    private var chunked = false
    /// An `Expect` value other than `100-continue` (refused with 417 if a body follows).
    private var unsupportedExpect: [UInt8]?
    /// Requests whose bytes have all arrived (evhttp hands them to the server one at a time).
    private(set) var completeRequests = 0

    /// `maxHeaderBytes`: the soft header limit; a raw head (request line, fields and line ends) over
    /// twice that is refused with 431 (under evhttp's hard limit, which counts less: no line ends).
    /// Between the two, the request handler's soft check answers 431. `maxBodyBytes`: the soft body
    /// limit (413).
    init(maxHeaderBytes: Int, maxBodyBytes: Int) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxHeadBytes = maxHeaderBytes * 2
        self.maxBodyBytes = maxBodyBytes
    }

    /// The server received one of the complete requests.
    mutating func requestHandedOver() {
        if completeRequests > 0 { completeRequests -= 1 }
    }

    /// Follows `bytes` (the next bytes of the connection, in order).
    mutating func feed(_ bytes: UnsafeRawBufferPointer) throws(Rejection) {
        var i = 0
        let n = bytes.count
        while i < n {
            switch state {
            case .body(let remaining):
                let take = min(remaining, n - i)
                i += take
                if take == remaining {
                    requestComplete()
                } else {
                    state = .body(remaining: remaining - take)
                }
            case .chunkData(let remaining):
                let take = min(remaining, n - i)
                i += take
                state = take == remaining ? .chunkSize : .chunkData(remaining: remaining - take)
            case .head, .chunkSize, .trailer:
                // up to the end of the line: in place when the whole line is in `bytes`, else gathered in `line`
                let base = bytes.baseAddress!.assumingMemoryBound(to: UInt8.self)
                let end =
                    memchr(base + i, 0x0A, n - i).map { base.distance(to: $0.assumingMemoryBound(to: UInt8.self)) } ?? n
                let piece = UnsafeBufferPointer(start: base + i, count: end - i)
                let complete = end < n
                i = complete ? end + 1 : end
                try checkLineLength(line.count + piece.count, complete: complete)
                if !complete {
                    line.append(contentsOf: piece)
                } else if line.isEmpty {
                    try lineComplete(RequestFraming.trimmingCR(piece[...]))
                } else {
                    line.append(contentsOf: piece)
                    var gathered: [UInt8] = []
                    swap(&gathered, &line)
                    var failure: Rejection?
                    gathered.withUnsafeBufferPointer { l in
                        do throws(Rejection) { try lineComplete(RequestFraming.trimmingCR(l[...])) } catch {
                            failure = error
                        }
                    }
                    gathered.removeAll(keepingCapacity: true)
                    swap(&gathered, &line)
                    if let failure { throw failure }
                }
            }
        }
    }

    /// A line as evhttp reads it (LF or CRLF).
    private static func trimmingCR(_ l: Line) -> Line { l.last == 0x0D ? l.dropLast() : l }

    /// A line of a request head or of a chunked body, without its line end.
    typealias Line = Slice<UnsafeBufferPointer<UInt8>>

    private func checkLineLength(_ length: Int, complete: Bool) throws(Rejection) {
        switch state {
        case .head, .trailer:
            if headBytes + length + (complete ? 1 : 0) > maxHeadBytes {
                throw Rejection(
                    status: 431,
                    detail: "request headers are over \(maxHeadBytes) bytes; the limit is \(maxHeaderBytes) bytes")
            }
        case .chunkSize:
            if length > 1024 { throw Rejection(status: 400, detail: "a chunk size line is over 1024 bytes") }
        default: break
        }
    }

    private mutating func lineComplete(_ line: Line) throws(Rejection) {
        switch state {
        case .head:
            headBytes += line.count + 2
            if isFirstLine {
                isFirstLine = false
                try requestLine(line)
            } else if line.isEmpty {
                try headComplete()
            } else {
                try fieldLine(line)
            }
        case .chunkSize:
            try chunkSizeLine(line)
        case .trailer:
            headBytes += line.count + 2
            guard line.isEmpty else {
                throw Rejection(status: 400, detail: "trailer fields after a chunked body are not accepted")
            }
            requestComplete()
        default: break
        }
    }

    /// `METHOD SP target SP HTTP/x.y`, as evhttp splits it (first and last space).
    private mutating func requestLine(_ line: Line) throws(Rejection) {
        var text = line
        while text.last == 0x20 { text = text.dropLast() }
        guard text.count >= 14, let firstSpace = text.firstIndex(of: 0x20), let lastSpace = text.lastIndex(of: 0x20),
            firstSpace < lastSpace
        else {
            throw Rejection(status: 400, detail: "malformed request line (expected 'METHOD /path HTTP/1.1')")
        }
        let target = text[(firstSpace + 1)..<lastSpace]
        let version = text[(lastSpace + 1)...]
        guard let minor = RequestFraming.http1MinorVersion(version) else {
            let shown = String(decoding: version.prefix(16), as: UTF8.self)
            throw Rejection(status: 400, detail: "unsupported protocol version '\(shown)'")
        }
        http11 = minor >= 1
        // origin form (what the router serves) or http(s) absolute form, and nothing evhttp's URI parser refuses
        let parses: Bool
        if target.first == UInt8(ascii: "/") {
            parses = RequestFraming.evhttpParsesPath(target)
        } else if let rest = RequestFraming.afterHTTPScheme(target) {
            let authority = rest.prefix {
                $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#")
            }
            parses =
                !authority.isEmpty && RequestFraming.isPlainAuthority(authority)
                && RequestFraming.atMostOneHash(rest[authority.endIndex...])
        } else {
            throw Rejection(
                status: 400,
                detail: "the request target must be an absolute path or an http(s) URL (origin or absolute form)")
        }
        guard parses else {
            let shown = String(decoding: target.prefix(40), as: UTF8.self)
            throw Rejection(status: 400, detail: "malformed request target '\(shown)'")
        }
        // evhttp reads a body only for these methods (HEAD, TRACE and unknown ones have none)
        let method = text[..<firstSpace]
        mayHaveBody = RequestFraming.methodsWithBody.contains { $0.elementsEqual(method) }
    }

    private static let methodsWithBody = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT"].map {
        Array($0.utf8)
    }

    /// The minor version of `HTTP/1.<digits>` (evhttp refuses majors above 1; 0.x is not HTTP/1).
    private static func http1MinorVersion(_ v: Line) -> Int? {
        guard v.count >= 8, v.count <= 10 else { return nil }
        let s = v.startIndex
        guard v[s] == 0x48, v[s + 1] == 0x54, v[s + 2] == 0x54, v[s + 3] == 0x50, v[s + 4] == 0x2F, v[s + 5] == 0x31,
            v[s + 6] == 0x2E
        else { return nil }  // "HTTP/1."
        var minor = 0
        for c in v.dropFirst(7) {
            guard c >= 0x30 && c <= 0x39 else { return nil }
            minor = minor * 10 + Int(c - 0x30)
        }
        return minor
    }

    /// Whether evhttp's URI parser (lenient mode) accepts a target that starts with "/": at most one
    /// `#`, and a leading "//" starts an authority (host, optional port) it validates. Stricter than
    /// evhttp on authorities (no userinfo, no IP literals): those get 400 here, not a 404 later.
    private static func evhttpParsesPath(_ target: Line) -> Bool {
        guard atMostOneHash(target) else { return false }
        guard target.count >= 2, target[target.startIndex + 1] == 0x2F else { return true }  // "//"
        let rest = target.dropFirst(2)
        return isPlainAuthority(
            rest.prefix { $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") })
    }

    /// At most one `#` (evhttp's URI parser refuses a second).
    private static func atMostOneHash(_ target: Line) -> Bool {
        guard !target.isEmpty, let hash = memchr(target.base.baseAddress! + target.startIndex, 0x23, target.count)
        else { return true }
        let after = target.base.baseAddress!.distance(to: hash.assumingMemoryBound(to: UInt8.self)) + 1
        return memchr(target.base.baseAddress! + after, 0x23, target.endIndex - after) == nil
    }

    /// What follows `http://` or `https://` (scheme case-insensitive), or nil for any other target.
    private static func afterHTTPScheme(_ target: Line) -> Line? {
        for scheme: StaticString in ["http://", "https://"] where target.count >= scheme.utf8CodeUnitCount {
            let head = target.prefix(scheme.utf8CodeUnitCount)
            if equalsLowercased(head, scheme) { return target.dropFirst(scheme.utf8CodeUnitCount) }
        }
        return nil
    }

    /// A reg-name or IPv4 host with an optional `:port` (digits, at most 65535): what evhttp's URI
    /// parser accepts, minus userinfo and IP literals (those get 400 here, not a 404 later).
    private static func isPlainAuthority(_ whole: Line) -> Bool {
        var authority = whole
        // ":port" (digits, at most 65535; may be empty)
        let digits = authority.reversed().prefix { $0 >= 0x30 && $0 <= 0x39 }.count
        if digits < authority.count, authority[authority.index(authority.endIndex, offsetBy: -digits - 1)] == 0x3A {
            guard digits <= 5, Int(String(decoding: authority.suffix(digits), as: UTF8.self)) ?? 0 <= 65535 else {
                return false
            }
            authority = authority.dropLast(digits + 1)
        }
        // reg-name or IPv4: unreserved, sub-delims, %XX
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=".utf8)
        var i = authority.startIndex
        while i < authority.endIndex {
            let c = authority[i]
            if allowed.contains(c) {
                i = authority.index(after: i)
            } else if c == UInt8(ascii: "%"), authority.distance(from: i, to: authority.endIndex) >= 3,
                PercentDecoding.hexValue(authority[authority.index(i, offsetBy: 1)]) != nil,
                PercentDecoding.hexValue(authority[authority.index(i, offsetBy: 2)]) != nil
            {
                i = authority.index(i, offsetBy: 3)
            } else {
                return false
            }
        }
        return true
    }

    private mutating func fieldLine(_ line: Line) throws(Rejection) {
        if line.first == 0x20 || line.first == 0x09 {
            throw Rejection(status: 400, detail: "obsolete line folding in the request head is not accepted")
        }
        guard let colon = line.firstIndex(of: 0x3A), colon > line.startIndex else {
            throw Rejection(status: 400, detail: "malformed header line (no field name and colon)")
        }
        let name = line[..<colon]
        if name.contains(where: { $0 == 0x20 || $0 == 0x09 }) {
            throw Rejection(status: 400, detail: "whitespace in a header field name or before its colon")
        }
        // only four names matter here: compare lengths first, then bytes (ASCII, case-insensitive)
        let field: Field
        switch name.count {
        case 14 where RequestFraming.equalsLowercased(name, "content-length"): field = .contentLength
        case 17 where RequestFraming.equalsLowercased(name, "transfer-encoding"): field = .transferEncoding
        case 6 where RequestFraming.equalsLowercased(name, "expect"): field = .expect
        case 4 where RequestFraming.equalsLowercased(name, "host"):
            hostFields += 1
            return
        default: return
        }
        var value = line[(colon + 1)...]
        while let c = value.first, c == 0x20 || c == 0x09 { value = value.dropFirst() }
        while let c = value.last, c == 0x20 || c == 0x09 { value = value.dropLast() }
        switch field {
        case .contentLength:
            guard !value.isEmpty, value.count <= 18, value.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                throw Rejection(status: 400, detail: "invalid Content-Length '\(RequestFraming.shown(value))'")
            }
            let n = value.reduce(0) { $0 * 10 + Int($1 - 0x30) }
            if let first = contentLength, first != n {
                throw Rejection(
                    status: 400,
                    detail: "conflicting Content-Length values '\(first)' and '\(RequestFraming.shown(value))'")
            }
            contentLength = n
        case .transferEncoding:
            guard !chunked, RequestFraming.equalsLowercased(value, "chunked") else {
                throw Rejection(
                    status: 400,
                    detail: "unsupported Transfer-Encoding '\(RequestFraming.shown(value))' (only one 'chunked')")
            }
            chunked = true
        case .expect:
            if unsupportedExpect == nil && !RequestFraming.equalsLowercased(value, "100-continue") {
                unsupportedExpect = Array(value)
            }
        }
    }

    private static func shown<C: Collection<UInt8>>(_ bytes: C) -> String {
        String(decoding: bytes.prefix(40), as: UTF8.self)
    }

    private enum Field { case contentLength, transferEncoding, expect }

    private static func equalsLowercased(_ bytes: Line, _ lowercase: StaticString) -> Bool {
        let expected = UnsafeBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount)
        return bytes.count == expected.count
            && zip(bytes, expected).allSatisfy { a, b in (a >= 0x41 && a <= 0x5A ? a | 0x20 : a) == b }
    }

    private mutating func headComplete() throws(Rejection) {
        let length = contentLength ?? 0
        let hasLength = contentLength != nil
        let isChunked = chunked
        let expect = unsupportedExpect
        let hosts = hostFields
        contentLength = nil
        chunked = false
        unsupportedExpect = nil
        hostFields = 0
        if hosts > 1 { throw Rejection(status: 400, detail: "more than one Host header field (RFC 9112 §3.2)") }
        if hosts == 0 && http11 {
            throw Rejection(status: 400, detail: "an HTTP/1.1 request must have a Host header field (RFC 9112 §3.2)")
        }
        if isChunked && hasLength {
            throw Rejection(status: 400, detail: "a request must not have both Transfer-Encoding and Content-Length")
        }
        guard mayHaveBody else {
            if length > 0 || isChunked { throw Rejection(status: 400, detail: "this method takes no request body") }
            return requestComplete()
        }
        if !isChunked && length > maxBodyBytes {
            throw Rejection(
                status: 413, detail: "request body is \(length) bytes; the limit is \(maxBodyBytes) bytes")
        }
        if isChunked || length > 0, http11, let expect {
            throw Rejection(status: 417, detail: "Expect: '\(RequestFraming.shown(expect))' is not supported")
        }
        if isChunked {
            chunkedBodyBytes = 0
            state = .chunkSize
        } else if length > 0 {
            state = .body(remaining: length)
        } else {
            requestComplete()
        }
    }

    /// `HEXDIG+`, optionally followed by a space and anything (what evhttp accepts, minus its
    /// `strtoll` leniencies); empty lines are skipped, as evhttp does (the CRLF after chunk data).
    private mutating func chunkSizeLine(_ line: Line) throws(Rejection) {
        guard !line.isEmpty else { return }
        let digits = line.prefix { PercentDecoding.hexValue($0) != nil }
        let rest = line[digits.endIndex...]
        guard !digits.isEmpty, digits.count <= 15, rest.isEmpty || rest.first == 0x20 else {
            let shown = String(decoding: line.prefix(20), as: UTF8.self)
            throw Rejection(status: 400, detail: "malformed chunk size line '\(shown)' (expected hexadecimal digits)")
        }
        var size = 0
        for d in digits { size = size << 4 | Int(PercentDecoding.hexValue(d)!) }
        chunkedBodyBytes += size
        if chunkedBodyBytes > maxBodyBytes {
            throw Rejection(
                status: 413,
                detail: "chunked request body is over \(maxBodyBytes) bytes; the limit is \(maxBodyBytes) bytes")
        }
        state = size == 0 ? .trailer : .chunkData(remaining: size)
    }

    private mutating func requestComplete() {
        completeRequests += 1
        state = .head
        isFirstLine = true
        headBytes = 0
    }
}
