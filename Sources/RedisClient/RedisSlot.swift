/// Redis Cluster's key → slot function: CRC16 (XMODEM) of the key modulo 16384, where a key holding a
/// non-empty `{hash tag}` is hashed by the tag alone (so `bff:s:{id}` and `bff:s:{id}:ev` share a slot).
/// Pure; any thread.
public enum RedisSlot {
    /// Slots in a Redis Cluster.
    public static let count = 16384

    /// The slot of `key`.
    public static func of(_ key: some Collection<UInt8>) -> Int {
        let bytes = Array(key)
        var tagged = bytes[...]
        if let open = bytes.firstIndex(of: UInt8(ascii: "{")),
            let close = bytes[(open + 1)...].firstIndex(of: UInt8(ascii: "}")), close > open + 1
        {
            tagged = bytes[(open + 1)..<close]
        }
        return Int(crc16(tagged) & 0x3FFF)
    }

    /// The slot of the UTF-8 bytes of `key`.
    public static func of(_ key: String) -> Int { of(Array(key.utf8)) }

    /// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), as in Redis's `crc16.c`.
    static func crc16(_ bytes: ArraySlice<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for b in bytes { crc = (crc << 8) ^ table[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ b)] }
        return crc
    }

    private static let table: [UInt16] = (0..<256).map { i in
        var c = UInt16(i) << 8
        for _ in 0..<8 { c = c & 0x8000 != 0 ? (c << 1) ^ 0x1021 : c << 1 }
        return c
    }
}
