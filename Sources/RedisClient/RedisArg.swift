/// RedisClient: an asynchronous Redis client driven by the server's libevent loops (hiredis 0.14).
///
/// This module is the only one that imports `CHiredis`; no C pointer leaves it. Every `EventLoop`
/// gets its own `RedisConnection` on its own `event_base`, so no Redis call blocks a loop or crosses
/// threads.

import Primitives

/// One argument of a Redis command: binary-safe bytes.
public struct RedisArg: Sendable, Hashable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
    /// The argument's bytes as sent.
    public var bytes: [UInt8]

    /// An argument with these exact bytes.
    public init(bytes: [UInt8]) { self.bytes = bytes }
    /// The UTF-8 bytes of `string`.
    public init(_ string: String) { bytes = Array(string.utf8) }
    /// The decimal form of `value`, written in place (no `String` in between; `writeDecimal`, as `respCommand`).
    public init(_ value: Int) {
        let sign = value < 0 ? 1 : 0
        let count = sign + decimalDigits(value.magnitude)
        bytes = bytesWritten(count: count) { buffer in
            if sign == 1 { buffer[0] = UInt8(ascii: "-") }
            writeDecimal(value.magnitude, into: buffer, endingAt: count)
            return count
        }
    }
    /// The decimal form of `value` (Redis reads floats as decimal strings).
    public init(_ value: Double) { bytes = Array(String(value).utf8) }
    /// A string literal argument.
    public init(stringLiteral value: String) { self.init(value) }
    /// An integer literal argument.
    public init(integerLiteral value: Int) { self.init(value) }
}
