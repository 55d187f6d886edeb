/// Decimal digits written in place into byte buffers: Redis's protocol (`RedisArg`, `respCommand`) and the
/// store's lease values, without a `String` in between. Any thread.

/// The number of decimal digits of `n`.
@inlinable
public func decimalDigits(_ n: UInt) -> Int {
    var digits = 1
    var v = n
    while v >= 10 {
        v /= 10
        digits += 1
    }
    return digits
}

/// Writes the decimal digits of `n` into `buffer`, the last one just before index `end`.
@inlinable
public func writeDecimal(_ n: UInt, into buffer: UnsafeMutableBufferPointer<UInt8>, endingAt end: Int) {
    var v = n
    var i = end
    repeat {
        i -= 1
        buffer[i] = UInt8(ascii: "0") + UInt8(v % 10)
        v /= 10
    } while v > 0
}
