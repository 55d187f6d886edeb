/// The proxies whose word is taken on who the client is (`--trusted-proxies CIDR[,CIDR…]`), and the rule
/// that reads it: for a request from a trusted proxy, the client is the last address of the forwarding
/// chain that is not itself a trusted proxy — from `Forwarded` (RFC 7239, its `for=` parameters) when
/// the request has one, else from `X-Forwarded-For` — walking the chain from its end (the hop the
/// proxy appended) towards its start. A request from any other peer is that peer: its forwarding
/// headers are ignored (anyone can write them), so a client rotating them stays one client. A chain
/// that is missing, empty, malformed or made only of trusted proxies leaves the peer as the client.
///
/// Threading: immutable; any thread.
public struct TrustedProxies: Sendable, Equatable {
    /// One CIDR block.
    public struct Block: Sendable, Equatable {
        let high: UInt64
        let low: UInt64
        /// Prefix length in bits over the 128-bit (IPv4-mapped for IPv4) form.
        let bits: Int

        func contains(_ a: ClientAddress) -> Bool {
            func mask(_ n: Int) -> UInt64 { n <= 0 ? 0 : n >= 64 ? ~0 : ~0 << UInt64(64 - n) }
            let (hm, lm) = (mask(bits), mask(bits - 64))
            return a.high & hm == high & hm && a.low & lm == low & lm
        }
    }

    public let blocks: [Block]

    /// None: every request's client is its peer.
    public init() { blocks = [] }

    /// Parses `CIDR[,CIDR…]` (`10.0.0.0/8`, `::1/128`, or a bare address: one host); nil (with the
    /// offending part) when a part is not one.
    public static func parse(_ text: String) -> Result<TrustedProxies, ParseError> {
        var blocks: [Block] = []
        for part in text.split(separator: ",") {
            let trimmed = part.trimmingHTTPWhitespace()
            guard !trimmed.isEmpty else { continue }
            let pieces = trimmed.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let address = ClientAddress(parsing: pieces[0]) else { return .failure(ParseError(part: trimmed)) }
            let isV4 = address.isIPv4 && !pieces[0].contains(":")
            var bits = 128
            if pieces.count == 2 {
                guard let n = Int(pieces[1]), n >= 0, n <= (isV4 ? 32 : 128) else {
                    return .failure(ParseError(part: trimmed))
                }
                bits = isV4 ? 96 + n : n
            }
            blocks.append(Block(high: address.high, low: address.low, bits: bits))
        }
        return .success(TrustedProxies(blocks: blocks))
    }

    init(blocks: [Block]) { self.blocks = blocks }

    /// A part of `--trusted-proxies` that is not a CIDR block.
    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public let part: String
        public var description: String { "'\(part)' is not an IP address or CIDR block" }
    }

    public var isEmpty: Bool { blocks.isEmpty }

    /// True when `address` is a trusted proxy.
    public func contains(_ address: ClientAddress) -> Bool {
        for b in blocks where b.contains(address) { return true }
        return false
    }

    /// The client of a request from `peer` with `headers` (see the type's comment).
    public func client(peer: ClientAddress, headers: [(String, String)]) -> ClientAddress {
        guard contains(peer) else { return peer }
        var forwarded: [Substring] = []
        var xff: [Substring] = []
        for (name, value) in headers {
            if name.caseInsensitiveEquals("Forwarded") {
                for element in value.split(separator: ",") {
                    for pair in element.split(separator: ";") {
                        let kv = pair.split(separator: "=", maxSplits: 1)
                        if kv.count == 2, kv[0].trimmingHTTPWhitespace().lowercased() == "for" {
                            forwarded.append(kv[1])
                        }
                    }
                }
            } else if name.caseInsensitiveEquals("X-Forwarded-For") {
                xff.append(contentsOf: value.split(separator: ","))
            }
        }
        let chain = forwarded.isEmpty ? xff : forwarded
        for hop in chain.reversed() {
            guard let address = ClientAddress(parsing: hop) else { return peer }  // malformed: not believed
            if !contains(address) { return address }
        }
        return peer
    }
}
