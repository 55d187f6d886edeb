/// The value of one ASCII hex digit (`0-9`, `A-F`, `a-f`), or nil: percent-decoding and chunk sizes
/// (EventHTTP's request parsing, WireClient's chunked decoder). Any thread.
@inlinable
public func asciiHexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case 0x30...0x39: return byte - 0x30
    case 0x41...0x46: return byte - 0x41 + 10
    case 0x61...0x66: return byte - 0x61 + 10
    default: return nil
    }
}
