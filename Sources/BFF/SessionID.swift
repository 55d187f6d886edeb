import Glibc

/// Session ids: 128 random bits from the kernel, base64url without padding (22 characters), then
/// the index of the event loop that owns the session (so any loop can route a request to the
/// owner without a shared table).
enum SessionID {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// A new id owned by loop `loop`.
    static func make(loop: Int) -> String {
        // SystemRandomNumberGenerator is the kernel's CSPRNG (getrandom(2)) on Linux.
        var rng = SystemRandomNumberGenerator()
        let words = [rng.next(), rng.next()] as [UInt64]
        let bytes = words.flatMap { w in (0..<8).map { UInt8(truncatingIfNeeded: w >> (8 * $0)) } }
        var out: [UInt8] = []
        out.reserveCapacity(26)
        var acc: UInt32 = 0
        var bits = 0
        for b in bytes {
            acc = acc << 8 | UInt32(b)
            bits += 8
            while bits >= 6 {
                bits -= 6
                out.append(alphabet[Int((acc >> UInt32(bits)) & 63)])
            }
        }
        if bits > 0 { out.append(alphabet[Int((acc << UInt32(6 - bits)) & 63)]) }
        out.append(contentsOf: String(loop).utf8)
        return String(decoding: out, as: UTF8.self)
    }

    /// The owning loop's index, or nil when `id` is not shaped like one of ours.
    /// Runs on every session request: walks the bytes in place, no allocation.
    static func loopIndex(of id: String, loops: Int) -> Int? {
        var id = id
        return id.withUTF8 { u -> Int? in
            guard u.count > 22, u.count <= 25 else { return nil }
            for c in u[0..<22] where !isAlphabet(c) { return nil }
            var i = 0
            for c in u[22...] {
                guard c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9") else { return nil }
                i = i * 10 + Int(c - UInt8(ascii: "0"))
            }
            return i < loops ? i : nil
        }
    }

    /// True for the base64url alphabet (A–Z, a–z, 0–9, '-', '_').
    private static func isAlphabet(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            return true
        default:
            return false
        }
    }
}
