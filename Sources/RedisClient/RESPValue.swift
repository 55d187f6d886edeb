/// A Redis reply as a Swift value (RESP2, what hiredis 0.14 speaks). Never holds a C pointer.
public enum RESPValue: Sendable, Hashable {
    /// A status reply such as `OK` or `PONG`.
    case simpleString(String)
    /// An error nested in an array (a top-level error reply becomes `RedisError.server`).
    case error(String)
    /// An integer reply.
    case integer(Int64)
    /// A bulk string, binary-safe.
    case bulkString([UInt8])
    /// The nil bulk string or nil array.
    case null
    /// An array reply.
    case array([RESPValue])

    /// The value as text: bulk and simple strings as UTF-8, integers in decimal; nil otherwise.
    public var string: String? {
        switch self {
        case .simpleString(let s): return s
        case .bulkString(let b): return String(decoding: b, as: UTF8.self)
        case .integer(let i): return String(i)
        default: return nil
        }
    }

    /// The value as an integer: integer replies, and strings holding a decimal integer.
    public var int: Int64? {
        switch self {
        case .integer(let i): return i
        case .bulkString, .simpleString: return string.flatMap { Int64($0) }
        default: return nil
        }
    }

    /// The bytes of a bulk or simple string.
    public var bytes: [UInt8]? {
        switch self {
        case .bulkString(let b): return b
        case .simpleString(let s): return Array(s.utf8)
        default: return nil
        }
    }

    /// The elements of an array reply.
    public var array: [RESPValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// True for the nil reply.
    public var isNull: Bool { self == .null }
}
