import CLibevent

/// A request as handlers see it: a value copied out of evhttp (headers and body included), safe to
/// keep and to send to other threads.
public struct HTTPRequest: Sendable {
    public var method: HTTPMethod
    /// The percent-decoded path ("/api/sessions/x"), for messages; routing and static files work on
    /// `rawPath` segment by segment, so an encoded "/" never splits a segment. Decoded when read
    /// (only error messages read it): no decoding or copy per request.
    public var path: String { PercentDecoding.decode(Substring(rawPath), plusIsSpace: false) ?? rawPath }
    /// The path exactly as sent (before `?`).
    public var rawPath: String
    /// The raw query string (after `?`), if any.
    public var rawQuery: String?
    public var headers: [(String, String)]
    public var body: [UInt8]
    /// Route parameters (`:name` segments), percent-decoded.
    public var parameters = RouteParameters()
    /// The loop that owns the connection; replies must be sent there.
    public let loop: EventLoop
    /// Who sent it, as the fair-use limits count clients: the connection's peer, or the client a trusted
    /// proxy forwarded it for (`TrustedProxies`). Loopback for requests made without a socket.
    public var client = ClientAddress.loopback
    /// True when the connection's peer is a trusted proxy (`--trusted-proxies`): only then are its
    /// forwarding headers (`X-Forwarded-For`, `X-Forwarded-Proto`) believed.
    public var viaTrustedProxy = false

    /// Every value of header `name` (case-insensitive), in order (`Cookie` may come several times).
    public func headers(named name: String) -> [String] {
        var out: [String] = []
        for (n, v) in headers where n.caseInsensitiveEquals(name) { out.append(v) }
        return out
    }

    /// The first value of header `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        for (n, v) in headers where n.caseInsensitiveEquals(name) { return v }
        return nil
    }

    /// Decoded query items in order.
    public var queryItems: [(String, String)] {
        guard let rawQuery, !rawQuery.isEmpty else { return [] }
        return rawQuery.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = PercentDecoding.decode(parts[0], plusIsSpace: true) ?? String(parts[0])
            let value = parts.count > 1 ? (PercentDecoding.decode(parts[1], plusIsSpace: true) ?? String(parts[1])) : ""
            return (name, value)
        }
    }

    /// Decoded query parameters; the first occurrence of a name wins.
    public var query: [String: String] {
        var q: [String: String] = [:]
        for (k, v) in queryItems where q[k] == nil { q[k] = v }
        return q
    }

    public init(
        method: HTTPMethod, rawPath: String, rawQuery: String?, headers: [(String, String)], body: [UInt8],
        loop: EventLoop
    ) {
        self.method = method
        self.rawPath = rawPath
        self.rawQuery = rawQuery
        self.headers = headers
        self.body = body
        self.loop = loop
    }
}

/// A request target in absolute form (`http://host:port/path?query`, RFC 9112 §3.2.2), which a server
/// must accept: its path and query are routed as the origin form would be, and its authority stands
/// for `Host`. `RequestFraming` has already refused every other target that does not start with "/".
struct AbsoluteFormTarget {
    /// "host" or "host:port", as sent.
    let authority: String
    /// The path ("/" when the target has none), before `?`.
    let rawPath: String
    /// The query (after `?`), if any.
    let rawQuery: String?

    /// Splits `target`; nil unless it starts with `http://` or `https://` (any case).
    init?(_ target: String) {
        let bytes = Array(target.utf8)
        let schemeLength: Int
        if bytes.count >= 7, AbsoluteFormTarget.lowercased(bytes[0..<7]) == Array("http://".utf8) {
            schemeLength = 7
        } else if bytes.count >= 8, AbsoluteFormTarget.lowercased(bytes[0..<8]) == Array("https://".utf8) {
            schemeLength = 8
        } else {
            return nil
        }
        let rest = bytes[schemeLength...]
        let slash = UInt8(ascii: "/")
        let question = UInt8(ascii: "?")
        let hash = UInt8(ascii: "#")
        let end = rest.firstIndex { $0 == slash || $0 == question || $0 == hash } ?? rest.endIndex
        authority = String(decoding: rest[..<end], as: UTF8.self)
        // a fragment is never sent on; evhttp hands it over, the origin form would not have it
        let tail = rest[end...].prefix { $0 != hash }
        let q = tail.firstIndex(of: question)
        let path = tail[..<(q ?? tail.endIndex)]
        rawPath = path.isEmpty ? "/" : String(decoding: path, as: UTF8.self)
        rawQuery = q.map { String(decoding: tail[($0 + 1)...], as: UTF8.self) }
    }

    private static func lowercased(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        bytes.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
    }
}

/// Percent-decoding of URL components.
public enum PercentDecoding {
    /// Decodes `%XX` escapes (and `+` as space when asked); nil for malformed escapes or invalid UTF-8.
    public static func decode(_ s: Substring, plusIsSpace: Bool) -> String? {
        let utf8 = s.utf8
        if !utf8.contains(UInt8(ascii: "%")) && !(plusIsSpace && utf8.contains(UInt8(ascii: "+"))) {
            return String(s)
        }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count)
        var it = utf8.makeIterator()
        while let c = it.next() {
            if c == UInt8(ascii: "%") {
                guard let h = it.next(), let l = it.next(), let hv = hexValue(h), let lv = hexValue(l) else {
                    return nil
                }
                out.append(hv << 4 | lv)
            } else if plusIsSpace && c == UInt8(ascii: "+") {
                out.append(0x20)
            } else {
                out.append(c)
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    /// The value of one ASCII hex digit, or nil (percent-decoding here, chunk sizes in `RequestFraming`).
    @inline(__always)
    static func hexValue(_ c: UInt8) -> UInt8? { asciiHexValue(c) }
}
