import Glibc

/// The `Date` header value of this loop's responses (`HTTPDate.format`), formatted once per second
/// instead of per response: evhttp formats one for every response that has none
/// (`evutil_date_rfc1123`: `time`, `gmtime_r`, `snprintf`, ~3,400 instructions).
///
/// Threading: one per loop (`LoopHTTP`), used on that loop only.
struct DateHeaderCache {
    private var second: time_t = -1
    /// The value as a NUL-terminated C string.
    private var text: [CChar] = [0]

    init() {}

    /// Calls `body` with the value for `now` (default: the current second) as a C string.
    mutating func withCurrent<R>(now: time_t = time(nil), _ body: (UnsafePointer<CChar>) -> R) -> R {
        if now != second {
            second = now
            text = Array(HTTPDate.format(Int(now)).utf8CString)
        }
        return text.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}
