/// A Redis node's address: host and TCP port, as Redis names it (`MOVED 3999 127.0.0.1:7002`, a slot
/// map, a sentinel's answer).
public struct RedisAddress: Sendable, Hashable, CustomStringConvertible {
    /// Host name or address (IPv6 without brackets).
    public var host: String
    /// TCP port.
    public var port: Int

    /// The node at `host:port`.
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `host:port` (`[v6]:port` too); nil if malformed.
    public init?(_ text: some StringProtocol) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (1...65535).contains(port)
        else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty, !host.contains("/"), !host.contains("@") else { return nil }
        self.init(host: host, port: port)
    }

    /// `host:port` (`[v6]:port`).
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
