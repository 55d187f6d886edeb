import WireClient

#if canImport(Glibc)
    import Glibc
#endif

/// Where the load goes: an `http://host:port` URL resolved once to an IPv4 address.
///
/// A value type; safe to pass between threads.
public struct Target: Sendable, CustomStringConvertible {
    /// The host as given (used in `Host` headers).
    public let host: String
    /// The TCP port.
    public let port: Int
    /// The path prefix from the URL, without a trailing slash (usually empty).
    public let basePath: String
    /// The resolved IPv4 address in network byte order.
    let address: in_addr

    /// Parses `http://host[:port][/prefix]` and resolves the host.
    public init(url: String) throws {
        var rest = Substring(url)
        if rest.hasPrefix("http://") {
            rest = rest.dropFirst(7)
        } else if rest.contains("://") {
            throw WireError.malformed("only http:// URLs are supported: \(url)")
        }
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<slash]
        var path = String(rest[slash...])
        while path.hasSuffix("/") { path.removeLast() }
        basePath = path
        if let colon = authority.lastIndex(of: ":") {
            host = String(authority[..<colon])
            guard let p = Int(authority[authority.index(after: colon)...]), p > 0, p < 65536 else {
                throw WireError.malformed("bad port in \(url)")
            }
            port = p
        } else {
            host = String(authority)
            port = 80
        }
        var hints = addrinfo()
        hints.ai_family = AF_INET
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let name = host == "localhost" ? "127.0.0.1" : host
        guard getaddrinfo(name, nil, &hints, &list) == 0, let first = list else {
            throw WireError.malformed("cannot resolve \(host)")
        }
        defer { freeaddrinfo(list) }
        address = first.pointee.ai_addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
    }

    /// `http://host:port/prefix`.
    public var description: String { "http://\(host):\(port)\(basePath)" }

    /// A blocking WireClient connection to the target (for setup and probes).
    public func connect(timeout: Double = 5) throws -> WireConnection {
        try WireConnection(host: host, port: port, timeout: timeout)
    }
}
