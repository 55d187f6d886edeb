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
/// - what evhttp would answer in HTML: a malformed request line or header line, a target that is
///   not an origin-form path (its URI parser fails on some absolute and "//" forms), an unsupported
///   `Expect`, bodies and heads past its hard limits (bodies past the soft limit are rejected here
///   already, from `Content-Length` or the chunk sizes, before they are read; heads at twice the
///   soft limit, under the hard one).
///
/// Identical repeated `Content-Length` values are accepted (RFC 9110 §8.6 allows it; evhttp reads
/// the one length they agree on).
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
    private var contentLengths: [String] = []
    private var transferEncodings: [String] = []
    private var expect: String?
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
                // up to the end of the line
                var end = i
                while end < n && bytes[end] != 0x0A { end += 1 }
                line.append(contentsOf: bytes[i..<end])
                let complete = end < n
                i = complete ? end + 1 : end
                try checkLineLength(complete: complete)
                if complete {
                    if line.last == 0x0D { line.removeLast() }
                    try lineComplete()
                    line.removeAll(keepingCapacity: true)
                }
            }
        }
    }

    private mutating func checkLineLength(complete: Bool) throws(Rejection) {
        switch state {
        case .head, .trailer:
            if headBytes + line.count + (complete ? 1 : 0) > maxHeadBytes {
                throw Rejection(
                    status: 431,
                    detail: "request headers are over \(maxHeadBytes) bytes; the limit is \(maxHeaderBytes) bytes")
            }
        case .chunkSize:
            if line.count > 1024 { throw Rejection(status: 400, detail: "a chunk size line is over 1024 bytes") }
        default: break
        }
    }

    private mutating func lineComplete() throws(Rejection) {
        switch state {
        case .head:
            headBytes += line.count + 2
            if isFirstLine {
                isFirstLine = false
                try requestLine()
            } else if line.isEmpty {
                try headComplete()
            } else {
                try fieldLine()
            }
        case .chunkSize:
            try chunkSizeLine()
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
    private mutating func requestLine() throws(Rejection) {
        var text = String(decoding: line, as: UTF8.self)
        while text.hasSuffix(" ") { text.removeLast() }
        guard let firstSpace = text.firstIndex(of: " "), let lastSpace = text.lastIndex(of: " "),
            firstSpace < lastSpace, text.utf8.count >= 14
        else {
            throw Rejection(status: 400, detail: "malformed request line (expected 'METHOD /path HTTP/1.1')")
        }
        let method = text[..<firstSpace]
        let target = text[text.index(after: firstSpace)..<lastSpace]
        let version = text[text.index(after: lastSpace)...]
        // origin-form only (what the router serves), and nothing evhttp's URI parser refuses in HTML
        guard target.hasPrefix("/") else {
            throw Rejection(status: 400, detail: "the request target must be an absolute path")
        }
        guard RequestFraming.evhttpParsesPath(target.utf8) else {
            throw Rejection(status: 400, detail: "malformed request target '\(target.prefix(40))'")
        }
        guard let (major, minor) = RequestFraming.httpVersion(version), major == 1 else {
            throw Rejection(status: 400, detail: "unsupported protocol version '\(version.prefix(16))'")
        }
        http11 = minor >= 1
        // evhttp reads a body only for these methods (HEAD, TRACE and unknown ones have none)
        mayHaveBody = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT"].contains(method)
    }

    /// Whether evhttp's URI parser (lenient mode) accepts a target that starts with "/": at most one
    /// `#`, and a leading "//" starts an authority (host, optional port) it validates. Stricter than
    /// evhttp on authorities (no userinfo, no IP literals): those get 400 here, not a 404 later.
    private static func evhttpParsesPath(_ target: Substring.UTF8View) -> Bool {
        var hashes = 0
        for c in target where c == UInt8(ascii: "#") { hashes += 1 }
        guard hashes <= 1 else { return false }
        guard target.starts(with: "//".utf8) else { return true }
        let rest = target.dropFirst(2)
        var authority = rest.prefix { $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
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
                hexValue(authority[authority.index(i, offsetBy: 1)]) != nil,
                hexValue(authority[authority.index(i, offsetBy: 2)]) != nil
            {
                i = authority.index(i, offsetBy: 3)
            } else {
                return false
            }
        }
        return true
    }

    /// `HTTP/<digits>.<digits>`.
    private static func httpVersion(_ s: Substring) -> (Int, Int)? {
        guard s.hasPrefix("HTTP/") else { return nil }
        let parts = s.dropFirst(5).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isASCIIDigit) }),
            let major = Int(parts[0]), let minor = Int(parts[1])
        else { return nil }
        return (major, minor)
    }

    private mutating func fieldLine() throws(Rejection) {
        if line[0] == 0x20 || line[0] == 0x09 {
            throw Rejection(status: 400, detail: "obsolete line folding in the request head is not accepted")
        }
        guard let colon = line.firstIndex(of: 0x3A), colon > 0 else {
            throw Rejection(status: 400, detail: "malformed header line (no field name and colon)")
        }
        let name = line[..<colon]
        if name.contains(where: { $0 == 0x20 || $0 == 0x09 }) {
            throw Rejection(status: 400, detail: "whitespace in a header field name or before its colon")
        }
        // only three names matter here: compare lengths first
        guard name.count == 6 || name.count == 14 || name.count == 17 else { return }
        let lower = String(decoding: name, as: UTF8.self).lowercased()
        guard lower == "content-length" || lower == "transfer-encoding" || lower == "expect" else { return }
        var value = String(decoding: line[(colon + 1)...], as: UTF8.self)
        value = String(value.drop { $0 == " " || $0 == "\t" })
        while let last = value.last, last == " " || last == "\t" { value.removeLast() }
        switch lower {
        case "content-length": contentLengths.append(value)
        case "transfer-encoding": transferEncodings.append(value)
        default: if expect == nil { expect = value }
        }
    }

    private mutating func headComplete() throws(Rejection) {
        defer {
            contentLengths = []
            transferEncodings = []
            expect = nil
        }
        var length = 0
        if let first = contentLengths.first {
            if let other = contentLengths.first(where: { $0 != first }) {
                throw Rejection(
                    status: 400,
                    detail: "conflicting Content-Length values '\(first.prefix(20))' and '\(other.prefix(20))'")
            }
            guard !first.isEmpty, first.utf8.count <= 18, first.allSatisfy(\.isASCIIDigit), let n = Int(first) else {
                throw Rejection(status: 400, detail: "invalid Content-Length '\(first.prefix(20))'")
            }
            length = n
        }
        if !transferEncodings.isEmpty {
            guard contentLengths.isEmpty else {
                throw Rejection(
                    status: 400, detail: "a request must not have both Transfer-Encoding and Content-Length")
            }
            guard transferEncodings.count == 1, transferEncodings[0].lowercased() == "chunked" else {
                throw Rejection(
                    status: 400,
                    detail:
                        "unsupported Transfer-Encoding '\(transferEncodings.joined(separator: ", ").prefix(40))' (only 'chunked')"
                )
            }
        }
        guard mayHaveBody else {
            if length > 0 || !transferEncodings.isEmpty {
                throw Rejection(status: 400, detail: "this method takes no request body")
            }
            return requestComplete()
        }
        let chunked = !transferEncodings.isEmpty
        if !chunked && length > maxBodyBytes {
            throw Rejection(
                status: 413, detail: "request body is \(length) bytes; the limit is \(maxBodyBytes) bytes")
        }
        let hasBody = chunked || length > 0
        if hasBody, http11, let expect, expect.lowercased() != "100-continue" {
            throw Rejection(status: 417, detail: "Expect: '\(expect.prefix(40))' is not supported")
        }
        if chunked {
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
    private mutating func chunkSizeLine() throws(Rejection) {
        guard !line.isEmpty else { return }
        let digits = line.prefix { RequestFraming.hexValue($0) != nil }
        let rest = line[digits.endIndex...]
        guard !digits.isEmpty, digits.count <= 15, rest.isEmpty || rest.first == 0x20 else {
            let shown = String(decoding: line.prefix(20), as: UTF8.self)
            throw Rejection(status: 400, detail: "malformed chunk size line '\(shown)' (expected hexadecimal digits)")
        }
        var size = 0
        for d in digits { size = size << 4 | Int(RequestFraming.hexValue(d)!) }
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

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x41...0x46: return c - 0x41 + 10
        case 0x61...0x66: return c - 0x61 + 10
        default: return nil
        }
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
