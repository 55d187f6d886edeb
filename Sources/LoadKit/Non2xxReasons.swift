import JSON
import WireClient

/// Why a run's requests were not answered 2xx: each answer's kind (`state`, `search`), status and
/// problem `detail` (RFC 9457; digits folded to `N`, so "retry in 37 s" and "retry in 12 s" are one
/// reason), counted, for the report. Touched only on its scenario's loop thread.
struct Non2xxReasons {
    private var counts: [String: Int] = [:]

    /// Counts `response`, a non-2xx answer to a request of `kind`.
    mutating func count(_ kind: String, _ response: WireResponse) {
        let problem = try? JSONValue.parse(response.body)
        let detail = problem?["detail"]?.stringValue ?? problem?["title"]?.stringValue ?? "(no problem detail)"
        counts["\(kind) \(response.status): \(Self.folded(detail))", default: 0] += 1
    }

    /// The five most frequent reasons, "N× reason; …", and how many other reasons there were.
    var summary: String {
        let sorted = counts.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }
        var text = sorted.prefix(5).map { "\($0.value)× \($0.key)" }.joined(separator: "; ")
        if sorted.count > 5 { text += "; \(sorted.count - 5) other reasons" }
        return text
    }

    /// `detail` with each run of digits as `N`, at most 160 characters.
    static func folded(_ detail: String) -> String {
        var out = ""
        var inDigits = false
        for c in detail.prefix(160) {
            if c.isASCII && c.isNumber {
                if !inDigits { out.append("N") }
                inDigits = true
            } else {
                out.append(c)
                inDigits = false
            }
        }
        return out
    }
}
