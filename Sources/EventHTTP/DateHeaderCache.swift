import Glibc

/// The `Date` header value of this loop's responses (`HTTPDate.format`), formatted once per second
/// instead of per response: evhttp formats one for every response that has none
/// (`evutil_date_rfc1123`: `time`, `gmtime_r`, `snprintf`).
///
/// Threading: one per loop (`LoopHTTP`), used on that loop only.
struct DateHeaderCache {
    private var second: time_t = -1
    /// The value's bytes followed by a NUL (a C string).
    private var text: [UInt8] = [0]

    init() {}

    /// Calls `body` with the value for `now` (default: the current second) as a C string.
    mutating func withCurrent<R>(now: time_t = time(nil), _ body: (UnsafePointer<CChar>) -> R) -> R {
        refresh(now)
        return text.withUnsafeBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) { body($0) }
        }
    }

    /// Calls `body` with the value for `now` (default: the current second) as bytes (no NUL).
    mutating func withCurrentBytes<R>(now: time_t = time(nil), _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        refresh(now)
        return text.withUnsafeBufferPointer { body(UnsafeBufferPointer(rebasing: $0.dropLast())) }
    }

    private mutating func refresh(_ now: time_t) {
        guard now != second else { return }
        second = now
        text = Array(HTTPDate.format(Int(now)).utf8) + [0]
    }
}
