/// Formats epoch seconds as ISO 8601 UTC text (`2026-11-21T10:00:00Z`) without Foundation.
///
/// Pure functions; any thread.
enum UTCTimestamp {
    /// The ISO 8601 UTC time of `epochSeconds` (seconds since 1970-01-01T00:00:00Z), for years 0...9999.
    static func iso8601(epochSeconds: Int) -> String {
        let (days, secondOfDay) = floorDivMod(epochSeconds, 86_400)
        let (year, month, day) = civil(fromDays: days)
        return pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2) + "T" + pad(secondOfDay / 3600, 2) + ":"
            + pad(secondOfDay % 3600 / 60, 2) + ":" + pad(secondOfDay % 60, 2) + "Z"
    }

    /// Year, month, day of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`).
    static func civil(fromDays days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    private static func floorDivMod(_ a: Int, _ b: Int) -> (Int, Int) {
        let q = a / b
        let r = a % b
        return r < 0 ? (q - 1, r + b) : (q, r)
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}
