extension JSONValue {
    /// The compact JSON text of this value as UTF-8 bytes.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        write(into: &out)
        return out
    }

    /// The compact JSON text of this value.
    public var text: String { String(decoding: bytes, as: UTF8.self) }

    /// Appends the compact JSON text of this value to `out`.
    ///
    /// Strings are escaped per RFC 8259; U+2028/U+2029 are escaped too so the text can be embedded
    /// in JavaScript, and no raw control character or CR/LF ever appears (safe for SSE `data:` lines).
    public func write(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])
        case .bool(let b):
            b
                ? out.append(contentsOf: [0x74, 0x72, 0x75, 0x65])
                : out.append(contentsOf: [0x66, 0x61, 0x6C, 0x73, 0x65])
        case .int(let i): JSONValue.writeInt(i, into: &out)
        case .double(let d):
            if d.isFinite {
                if d.rounded() == d && abs(d) < 1e15 {
                    JSONValue.writeInt(Int(d), into: &out)
                } else {
                    out.append(contentsOf: "\(d)".utf8)
                }
            } else {
                out.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])  // JSON has no NaN/Infinity
            }
        case .string(let s): JSONValue.writeString(s, into: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            var first = true
            for v in a {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                v.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let o): o.write(into: &out)
        }
    }

    /// Appends the decimal digits of `value`.
    public static func writeInt(_ value: Int, into out: inout [UInt8]) {
        if value == 0 {
            out.append(UInt8(ascii: "0"))
            return
        }
        var v = value.magnitude
        var buf: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes of scratch, enough for 20 digits
        let n: Int = withUnsafeMutableBytes(of: &buf) { raw in
            var i = raw.count
            while v > 0 {
                i -= 1
                raw[i] = UInt8(truncatingIfNeeded: v % 10) &+ 48
                v /= 10
            }
            if value < 0 {
                i -= 1
                raw[i] = UInt8(ascii: "-")
            }
            out.append(contentsOf: raw[i...])
            return raw.count - i
        }
        _ = n
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends `s` as a JSON string literal.
    public static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { utf8 in
            var start = 0
            var i = 0
            let n = utf8.count
            while i < n {
                let c = utf8[i]
                var escape: [UInt8]? = nil
                var skip = 1
                switch c {
                case 0x22: escape = [0x5C, 0x22]
                case 0x5C: escape = [0x5C, 0x5C]
                case 0x0A: escape = [0x5C, 0x6E]
                case 0x0D: escape = [0x5C, 0x72]
                case 0x09: escape = [0x5C, 0x74]
                case 0x00..<0x20, 0x7F:
                    escape = [0x5C, 0x75, 0x30, 0x30, hex[Int(c >> 4)], hex[Int(c & 0xF)]]
                case 0xE2 where i + 2 < n && utf8[i + 1] == 0x80 && (utf8[i + 2] == 0xA8 || utf8[i + 2] == 0xA9):
                    escape = [0x5C, 0x75, 0x32, 0x30, 0x32, utf8[i + 2] == 0xA8 ? 0x38 : 0x39]
                    skip = 3
                default: break
                }
                if let escape {
                    if start < i { out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<i])) }
                    out.append(contentsOf: escape)
                    i += skip
                    start = i
                } else {
                    i += 1
                }
            }
            if start < n { out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<n])) }
        }
        out.append(UInt8(ascii: "\""))
    }
}

extension JSONObject {
    /// Appends the compact JSON text of this object to `out`.
    public func write(into out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        var first = true
        for (k, v) in entries {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            JSONValue.writeString(k, into: &out)
            out.append(UInt8(ascii: ":"))
            v.write(into: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// The compact JSON text of this object as UTF-8 bytes.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        write(into: &out)
        return out
    }
}
