import Glibc

/// IMF-fixdate formatting and parsing (RFC 9110 §5.6.7).
public enum HTTPDate {
    /// Formats seconds since 1970 as "Sun, 06 Nov 1994 08:49:37 GMT".
    public static func format(_ seconds: Int) -> String {
        var t = time_t(seconds)
        var tmv = tm()
        gmtime_r(&t, &tmv)
        var buf = [CChar](repeating: 0, count: 64)
        let n = strftime(&buf, buf.count, "%a, %d %b %Y %H:%M:%S GMT", &tmv)
        return String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Parses an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"); nil for anything else.
    public static func parse(_ text: String) -> Int? {
        let p = text.split(separator: " ")
        guard p.count == 6, p[5] == "GMT", let day = Int(p[1]), let year = Int(p[3]),
            let month = months.firstIndex(of: String(p[2]))
        else { return nil }
        let t = p[4].split(separator: ":").compactMap { Int($0) }
        guard t.count == 3 else { return nil }
        var tmv = tm()
        tmv.tm_year = Int32(year - 1900)
        tmv.tm_mon = Int32(month)
        tmv.tm_mday = Int32(day)
        tmv.tm_hour = Int32(t[0])
        tmv.tm_min = Int32(t[1])
        tmv.tm_sec = Int32(t[2])
        return Int(timegm(&tmv))
    }
}
