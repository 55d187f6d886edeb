/// An incremental parser of a sequence of HTTP/1.1 responses on one connection.
///
/// Feed it received bytes in any slicing; it reports each response's head, its body bytes as
/// they arrive (de-chunked or cut at `Content-Length`), and its end, then starts over for the
/// next response on a keep-alive connection. Interim `1xx` responses (except `101`) are
/// skipped. Responses to `HEAD`, and `204`/`304`, have no body: set `nextResponseHasNoBody`
/// before the response to a `HEAD` arrives. A body with neither framing lasts until the peer
/// closes: call `finish()` on end of file.
///
/// A value type owned by whoever feeds it (one thread at a time).
package struct HTTPResponseParser: Sendable {
    /// What the parser found, in order.
    package enum Event {
        /// A complete response head (its `body` is empty).
        case head(WireResponse)
        /// Payload bytes of the current response's body.
        case body(ArraySlice<UInt8>)
        /// The current response is complete.
        case end
    }

    private enum State: Sendable {
        case head
        case fixed(remaining: Int)
        case chunked(ChunkedDecoder)
        case untilClose
    }

    /// The largest response head accepted.
    package static let maximumHeadSize = 64 * 1024

    private var state: State = .head
    private var headBytes: [UInt8] = []
    /// Set before a `HEAD` response arrives: the next response has no body whatever its headers say.
    package var nextResponseHasNoBody = false

    /// A parser at the start of a connection.
    package init() {}

    /// True between responses (no partial response buffered).
    package var isIdle: Bool { if case .head = state { return headBytes.isEmpty } else { return false } }

    /// Consumes all of `bytes`, calling `emit` for each head, body slice and end.
    package mutating func feed(_ bytes: ArraySlice<UInt8>, emit: (Event) -> Void) throws(WireError) {
        var i = bytes.startIndex
        while i < bytes.endIndex {
            switch state {
            case .head:
                // Copy the run up to and including the next LF in one go.
                guard let lf = bytes[i...].firstIndex(of: 0x0A) else {
                    headBytes.append(contentsOf: bytes[i...])
                    i = bytes.endIndex
                    if headBytes.count > Self.maximumHeadSize { throw .malformed("response head over 64 KiB") }
                    continue
                }
                headBytes.append(contentsOf: bytes[i...lf])
                i = lf + 1
                if headBytes.count > Self.maximumHeadSize { throw .malformed("response head over 64 KiB") }
                let n = headBytes.count
                if n == 1 || (n == 2 && headBytes[0] == 0x0D) {
                    headBytes.removeAll(keepingCapacity: true)  // stray CRLF between responses
                    continue
                }
                let endsHead =
                    (n >= 2 && headBytes[n - 2] == 0x0A)
                    || (n >= 3 && headBytes[n - 2] == 0x0D && headBytes[n - 3] == 0x0A)
                if endsHead { try finishHead(emit: emit) }
            case .fixed(let remaining):
                let n = min(remaining, bytes.endIndex - i)
                emit(.body(bytes[i..<(i + n)]))
                i += n
                if n == remaining { endResponse(emit: emit) } else { state = .fixed(remaining: remaining - n) }
            case .chunked(var decoder):
                let consumed = try decoder.feed(bytes[i...]) { emit(.body($0)) }
                i += consumed
                if decoder.isDone { endResponse(emit: emit) } else { state = .chunked(decoder) }
            case .untilClose:
                emit(.body(bytes[i...]))
                i = bytes.endIndex
            }
        }
    }

    /// Reports end of file: ends a body that lasts until close; throws `.closed` when the peer
    /// closed in the middle of a head or a framed body.
    package mutating func finish(emit: (Event) -> Void) throws(WireError) {
        switch state {
        case .head:
            if !headBytes.isEmpty { throw .closed }
        case .untilClose:
            endResponse(emit: emit)
        case .fixed, .chunked:
            throw .closed
        }
    }

    private mutating func endResponse(emit: (Event) -> Void) {
        state = .head
        emit(.end)
    }

    private mutating func finishHead(emit: (Event) -> Void) throws(WireError) {
        let head = try Self.parseHead(headBytes)
        headBytes.removeAll(keepingCapacity: true)
        if head.status >= 100 && head.status < 200 && head.status != 101 { return }
        let noBody = nextResponseHasNoBody || head.status == 204 || head.status == 304 || head.status < 200
        nextResponseHasNoBody = false
        emit(.head(head))
        if noBody {
            endResponse(emit: emit)
            return
        }
        let chunked = head.headers.contains { name, value in
            WireResponse.namesMatch(name, "Transfer-Encoding")
                && value.split(separator: ",").contains {
                    WireResponse.namesMatch(String($0.trimmingSpaces()), "chunked")
                }
        }
        if chunked {
            state = .chunked(ChunkedDecoder())
        } else if let lengthText = head.header("Content-Length") {
            // `Content-Length: 5, 5` (or the header repeated) is one length: parse the single distinct value.
            var length: Int?
            for value in head.headerValues("Content-Length") {
                for part in value.split(separator: ",") {
                    guard let n = Int(part.trimmingSpaces()), n >= 0, length == nil || length == n else {
                        throw .malformed("bad Content-Length '\(lengthText)'")
                    }
                    length = n
                }
            }
            guard let length else { throw .malformed("bad Content-Length '\(lengthText)'") }
            if length == 0 { endResponse(emit: emit) } else { state = .fixed(remaining: length) }
        } else {
            state = .untilClose
        }
    }

    /// Parses a complete head (status line and header lines, ending with a blank line).
    static func parseHead(_ bytes: [UInt8]) throws(WireError) -> WireResponse {
        var lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false).map { line -> ArraySlice<UInt8> in
            line.last == 0x0D ? line.dropLast() : line
        }
        while let last = lines.last, last.isEmpty { lines.removeLast() }
        guard let statusLine = lines.first else { throw .malformed("empty response head") }
        let parts = statusLine.split(separator: 0x20, maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].starts(with: "HTTP/1.".utf8), parts[1].count == 3,
            let status = Int(String(decoding: parts[1], as: UTF8.self)), status >= 100
        else {
            throw .malformed("bad status line '\(String(decoding: statusLine.prefix(100), as: UTF8.self))'")
        }
        let reason = parts.count > 2 ? String(decoding: parts[2], as: UTF8.self) : ""
        var headers: [(String, String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex else {
                throw .malformed("bad header line '\(String(decoding: line.prefix(100), as: UTF8.self))'")
            }
            let name = String(decoding: line[..<colon], as: UTF8.self)
            let value = String(decoding: line[(colon + 1)...], as: UTF8.self).trimmingSpaces()
            headers.append((name, String(value)))
        }
        return WireResponse(status: status, reason: reason, headers: headers)
    }
}

extension StringProtocol {
    /// The text without leading and trailing spaces and tabs.
    /// Works on UTF-8 code units (both are ASCII): no grapheme breaking.
    func trimmingSpaces() -> Substring {
        let s = Substring(self)
        let u = s.utf8
        let start = u.firstIndex { $0 != 0x20 && $0 != 0x09 } ?? u.endIndex
        var end = start
        var i = start
        while i != u.endIndex {
            let byte = u[i]
            i = u.index(after: i)
            if byte != 0x20 && byte != 0x09 { end = i }
        }
        return s[start..<end]
    }
}
