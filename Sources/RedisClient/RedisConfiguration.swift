/// Where and how to connect: parsed from `redis://[:password@]host[:port][/db]`, plus time-outs and
/// reconnect back-off. Its `description` never shows the password.
public struct RedisConfiguration: Sendable, Equatable, CustomStringConvertible {
    /// Host name or address.
    public var host: String
    /// TCP port.
    public var port: Int
    /// Sent with `AUTH` after each connect; never logged.
    public var password: String?
    /// Selected with `SELECT` after each connect when not 0.
    public var database: Int
    /// Default time-out of a command, in seconds.
    public var commandTimeout: Double = 2
    /// Time-out of connect + `AUTH` + `SELECT` + `PING`, in seconds.
    public var connectTimeout: Double = 2
    /// Reconnect back-off: first delay, in seconds.
    public var reconnectBase: Double = 0.05
    /// Reconnect back-off: largest delay, in seconds.
    public var reconnectMax: Double = 2
    /// Seconds without a reply after which an idle command connection sends a `PING` (so a Redis that
    /// stopped answering, `SIGSTOP` or a dead peer whose TCP connection stays up, is noticed within this
    /// plus `commandTimeout` even when nothing else is sent); nil: never. `RedisConnectionGroup` turns it
    /// on; a subscriber cannot `PING` (hiredis 0.14).
    public var healthCheckInterval: Double? = 1
    /// Commands a connection may have outstanding (sent, reply not yet come; timed-out ones included)
    /// before `send` holds more (`maxQueued`). At Redis's time per command (docs/BENCHMARKS.md), 1,024
    /// queued commands drain in well under the command time-out.
    public var maxInFlight = 1024
    /// Commands a connection holds, in order, while `maxInFlight` are outstanding: written as replies make
    /// room, each within the deadline it was asked with. Past these too `send` refuses with `.overloaded`.
    /// A burst of completions that each send a command (thousands of deletes at once on one node) waits
    /// here instead of failing after its work began.
    public var maxQueued = 1024

    /// A configuration for `host:port`, database `database`.
    public init(host: String = "127.0.0.1", port: Int = 6379, password: String? = nil, database: Int = 0) {
        self.host = host
        self.port = port
        self.password = password
        self.database = database
    }

    /// Parses `redis://[[user]:password@]host[:port][/db]`; nil if malformed. The user name (Redis 6
    /// ACL) is not supported: a URL with one is rejected rather than silently ignored.
    public init?(url: String) {
        let scheme = "redis://"
        guard url.hasPrefix(scheme) else { return nil }
        var rest = Substring(url.dropFirst(scheme.count))
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let userinfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            guard let colon = userinfo.firstIndex(of: ":"), userinfo[..<colon].isEmpty else { return nil }
            guard let decoded = Self.percentDecoded(userinfo[userinfo.index(after: colon)...]) else { return nil }
            password = decoded
        }
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let db = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
            if !db.isEmpty {
                guard let n = Int(db), n >= 0 else { return nil }
                database = n
            }
        }
        var host = String(rest)
        var port = 6379
        if let colon = rest.lastIndex(of: ":"), !rest.hasSuffix("]") {
            guard let p = Int(rest[rest.index(after: colon)...]), (1...65535).contains(p) else { return nil }
            port = p
            host = String(rest[..<colon])
        }
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }  // IPv6
        guard !host.isEmpty, !host.contains("/") else { return nil }
        self.init(host: host, port: port, password: password, database: database)
    }

    /// The URL with the password replaced by `***`.
    public var description: String {
        "redis://\(password == nil ? "" : ":***@")\(host):\(port)/\(database)"
    }

    static func percentDecoded(_ s: Substring) -> String? {
        var out: [UInt8] = []
        var it = Array(s.utf8)[...]
        while let c = it.popFirst() {
            if c == UInt8(ascii: "%") {
                guard it.count >= 2, let v = UInt8(String(decoding: it.prefix(2), as: UTF8.self), radix: 16) else {
                    return nil
                }
                out.append(v)
                it = it.dropFirst(2)
            } else {
                out.append(c)
            }
        }
        return String(validating: out, as: UTF8.self)
    }
}
