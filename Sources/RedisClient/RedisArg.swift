/// RedisClient: an asynchronous Redis client driven by the server's libevent loops (hiredis 0.14).
///
/// This module is the only one that imports `CHiredis`; no C pointer leaves it. Every `EventLoop`
/// gets its own `RedisConnection` on its own `event_base`, so no Redis call blocks a loop or crosses
/// threads.

/// One argument of a Redis command: binary-safe bytes.
public struct RedisArg: Sendable, Hashable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
    /// The argument's bytes as sent.
    public var bytes: [UInt8]

    /// An argument with these exact bytes.
    public init(bytes: [UInt8]) { self.bytes = bytes }
    /// The UTF-8 bytes of `string`.
    public init(_ string: String) { bytes = Array(string.utf8) }
    /// The decimal form of `value` (written digit by digit: no `String` in between).
    public init(_ value: Int) {
        var digits: [UInt8] = []
        digits.reserveCapacity(20)
        var v = value.magnitude
        repeat {
            digits.append(UInt8(ascii: "0") + UInt8(v % 10))
            v /= 10
        } while v > 0
        if value < 0 { digits.append(UInt8(ascii: "-")) }
        digits.reverse()
        bytes = digits
    }
    /// The decimal form of `value` (Redis reads floats as decimal strings).
    public init(_ value: Double) { bytes = Array(String(value).utf8) }
    /// A string literal argument.
    public init(stringLiteral value: String) { self.init(value) }
    /// An integer literal argument.
    public init(integerLiteral value: Int) { self.init(value) }
}
