import Synchronization
import WireClient

#if canImport(Glibc)
    import Glibc
#endif

/// Where the load goes: an `http://host:port` URL resolved once to an IPv4 address.
///
/// A value type; safe to pass between threads.
package struct Target: Sendable, CustomStringConvertible {
    /// The host as given (used in `Host` headers).
    package let host: String
    /// The TCP port.
    package let port: Int
    /// The path prefix from the URL, without a trailing slash (usually empty).
    package let basePath: String
    /// The resolved IPv4 address in network byte order.
    let address: in_addr
    /// Local IPv4 addresses the connections are made from, spread over them (empty: the kernel's
    /// choice). On loopback every 127/8 address is the machine's own, so one run can play many clients
    /// (`--source 127.0.0.2-127.0.0.40`): the server's per-client limits count them apart.
    package private(set) var sources: [in_addr] = []
    /// Which source the next connection takes (shared by the copies of one target: round robin).
    private var nextSource = SourceTurn()

    /// The round robin of `sources` (any thread).
    private final class SourceTurn: Sendable {
        private let next = Atomic<Int>(0)
        func take() -> Int { next.add(1, ordering: .relaxed).oldValue }
    }

    /// Parses `http://host[:port][/prefix]` and resolves the host.
    package init(url: String) throws {
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
    package var description: String { "http://\(host):\(port)\(basePath)" }

    /// The same target, its connections made from `spec`: IPv4 addresses joined by `,`, each optionally
    /// a range `A-B` of one /24 (`127.0.0.2-127.0.0.9`); at most 65,536 in all.
    package func from(sources spec: String) throws -> Target {
        var out: [in_addr] = []
        for part in spec.split(separator: ",") {
            let ends = part.split(separator: "-", maxSplits: 1).map { String($0.filter { $0 != " " }) }
            var first = in_addr()
            guard inet_pton(AF_INET, ends[0], &first) == 1 else {
                throw WireError.malformed("bad source address '\(part)'")
            }
            var last = first
            if ends.count == 2, inet_pton(AF_INET, ends[1], &last) != 1 {
                throw WireError.malformed("bad source address '\(part)'")
            }
            let (a, b) = (UInt32(bigEndian: first.s_addr), UInt32(bigEndian: last.s_addr))
            guard a <= b, b - a < 65_536, out.count + Int(b - a) < 65_536 else {
                throw WireError.malformed("bad source range '\(part)'")
            }
            for v in a...b { out.append(in_addr(s_addr: v.bigEndian)) }
        }
        var t = self
        t.sources = out
        t.nextSource = SourceTurn()
        return t
    }

    /// The addresses sessions are created from (`LoadSession.create`): `sources` when set; else, for a
    /// loopback target, 127.0.1.1–127.0.1.254, so the run's sessions belong to 254 clients as a real
    /// deployment's belong to its users (the server's per-client limits — 10 creations a second, 200 live
    /// sessions — would otherwise cap one run at 200 sessions); else none (the kernel's choice).
    var creationSources: [in_addr] {
        if !sources.isEmpty { return sources }
        guard UInt32(bigEndian: address.s_addr) >> 24 == 127 else { return [] }
        return (1...254).map { in_addr(s_addr: (UInt32(0x7F00_0100) | UInt32($0)).bigEndian) }
    }

    /// The same target with its connections made from `source` alone.
    func from(source: in_addr) -> Target {
        var t = self
        t.sources = [source]
        t.nextSource = SourceTurn()
        return t
    }

    /// The source address of the next connection: `sources` in turn (nil: the kernel's choice).
    func nextSourceAddress() -> in_addr? { sources.isEmpty ? nil : sources[nextSource.take() % sources.count] }

    /// A blocking WireClient connection to the target (for setup and probes).
    package func connect(timeout: Double = 5) throws -> WireConnection {
        try WireConnection(host: host, port: port, timeout: timeout)
    }
}
