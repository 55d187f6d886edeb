import Glibc

/// Who a request comes from, as the fair-use limits count clients: an IP address (IPv4 held as an
/// IPv4-mapped IPv6 address), 16 bytes, no allocation. The peer address of the connection, or, for a
/// request that came through a trusted proxy, the address it forwarded for (`TrustedProxies`).
///
/// Threading: a value; any thread.
public struct ClientAddress: Hashable, Sendable, CustomStringConvertible {
    /// The address's 128 bits, high and low half, in network order read as big-endian integers.
    public let high: UInt64
    public let low: UInt64

    /// The address `high`/`low` (IPv4 as `::ffff:a.b.c.d`).
    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// The IPv4 address `a.b.c.d` as one integer (`a` in the high byte).
    public init(ipv4 value: UInt32) {
        high = 0
        low = 0x0000_FFFF_0000_0000 | UInt64(value)
    }

    /// 127.0.0.1: the client of requests made without a socket (in-process tests).
    public static let loopback = ClientAddress(ipv4: 0x7F00_0001)

    /// True for an IPv4 address (held mapped).
    public var isIPv4: Bool { high == 0 && low >> 32 == 0xFFFF }

    /// The address of the peer of socket `fd` (nil when it has none or is not IP).
    public init?(peerOf fd: Int32) {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) == 0 }
        }
        guard ok else { return nil }
        self.init(storage)
    }

    /// The address in `storage` (an `AF_INET` or `AF_INET6` socket address).
    init?(_ storage: sockaddr_storage) {
        var storage = storage
        switch Int32(storage.ss_family) {
        case AF_INET:
            let v4 = withUnsafeBytes(of: &storage) { $0.load(as: sockaddr_in.self) }
            self.init(ipv4: UInt32(bigEndian: v4.sin_addr.s_addr))
        case AF_INET6:
            let v6 = withUnsafeBytes(of: &storage) { $0.load(as: sockaddr_in6.self) }
            let bytes = withUnsafeBytes(of: v6.sin6_addr) { Array($0) }
            self.init(bytes: bytes)
        default:
            return nil
        }
    }

    /// The address of 16 bytes in network order.
    init(bytes: [UInt8]) {
        var h: UInt64 = 0
        var l: UInt64 = 0
        for i in 0..<8 { h = h << 8 | UInt64(bytes[i]) }
        for i in 8..<16 { l = l << 8 | UInt64(bytes[i]) }
        self.init(high: h, low: l)
    }

    /// Parses an address as written in headers and flags: `a.b.c.d`, an IPv6 address, `[v6]`, or any of
    /// them followed by `:port` (the port is ignored); surrounding spaces and quotes are trimmed. Nil when
    /// it is none of these (`unknown`, an obfuscated `_node` of RFC 7239, garbage).
    public init?(parsing text: Substring) {
        var t = text.drop { $0 == " " || $0 == "\t" || $0 == "\"" }
        while let last = t.last, last == " " || last == "\t" || last == "\"" { t = t.dropLast() }
        if t.first == "[" {  // [v6] or [v6]:port
            guard let close = t.firstIndex(of: "]") else { return nil }
            t = t[t.index(after: t.startIndex)..<close]
        } else if let colon = t.firstIndex(of: ":"), t.lastIndex(of: ":") == colon {
            t = t[..<colon]  // a.b.c.d:port
        }
        guard !t.isEmpty, t.count <= 45 else { return nil }
        var bytes = [UInt8](repeating: 0, count: 16)
        let text = String(t)
        if inet_pton(AF_INET6, text, &bytes) == 1 {
            self.init(bytes: bytes)
        } else if inet_pton(AF_INET, text, &bytes) == 1 {
            self.init(ipv4: UInt32(bytes[0]) << 24 | UInt32(bytes[1]) << 16 | UInt32(bytes[2]) << 8 | UInt32(bytes[3]))
        } else {
            return nil
        }
    }

    /// `a.b.c.d` for IPv4, the RFC 5952 text of IPv6 otherwise.
    public var description: String {
        if isIPv4 {
            let v = UInt32(truncatingIfNeeded: low)
            return "\(v >> 24).\(v >> 16 & 0xFF).\(v >> 8 & 0xFF).\(v & 0xFF)"
        }
        var bytes = [UInt8](repeating: 0, count: 16)
        for i in 0..<8 {
            bytes[i] = UInt8(truncatingIfNeeded: high >> (56 - 8 * UInt64(i)))
            bytes[8 + i] = UInt8(truncatingIfNeeded: low >> (56 - 8 * UInt64(i)))
        }
        var out = [CChar](repeating: 0, count: 64)
        guard inet_ntop(AF_INET6, bytes, &out, 64) != nil else { return "?" }
        return String(decoding: out.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
