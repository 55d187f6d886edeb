/// The parsed HTTP `Link` header (RFC 8288) GitHub uses for paging: `<url>; rel="next", <url>; rel="last"`.
///
/// A plain value; safe on any thread.
public struct LinkHeader: Sendable, Equatable {
    /// URL per relation (`next`, `last`, `prev`, `first`).
    public var links: [String: String]

    /// Parses a `Link` header value. Malformed parts are skipped, never fatal.
    public init(_ value: String) {
        var links: [String: String] = [:]
        for part in LinkHeader.splitLinks(value) {
            guard let open = part.firstIndex(of: "<"), let close = part[open...].firstIndex(of: ">") else { continue }
            let url = String(part[part.index(after: open)..<close])
            for param in part[part.index(after: close)...].split(separator: ";") {
                let kv = param.split(separator: "=", maxSplits: 1)
                guard kv.count == 2, kv[0].trimmingSpaces().lowercased() == "rel" else { continue }
                let rels = kv[1].trimmingSpaces().trimmingCharacters(quote: "\"")
                for rel in rels.split(separator: " ") where links[String(rel)] == nil {
                    links[String(rel)] = url
                }
            }
        }
        self.links = links
    }

    /// The `rel="next"` URL, if any.
    public var next: String? { links["next"] }
    /// The `rel="last"` URL, if any.
    public var last: String? { links["last"] }

    /// The `page` query parameter of the `rel` link, if present and numeric.
    public func page(of rel: String) -> Int? {
        guard let url = links[rel], let q = url.firstIndex(of: "?") else { return nil }
        for item in url[url.index(after: q)...].split(separator: "&") {
            let kv = item.split(separator: "=", maxSplits: 1)
            if kv.count == 2, kv[0] == "page" { return Int(kv[1]) }
        }
        return nil
    }

    /// Splits on commas that are outside `<…>` (URLs may contain commas).
    static func splitLinks(_ value: String) -> [Substring] {
        var parts: [Substring] = []
        var depth = 0
        var start = value.startIndex
        var i = value.startIndex
        while i < value.endIndex {
            switch value[i] {
            case "<": depth += 1
            case ">": depth = max(0, depth - 1)
            case "," where depth == 0:
                parts.append(value[start..<i])
                start = value.index(after: i)
            default: break
            }
            i = value.index(after: i)
        }
        parts.append(value[start...])
        return parts
    }
}

extension StringProtocol {
    func trimmingSpaces() -> Substring {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return s
    }
}

extension Substring {
    func trimmingCharacters(quote: Character) -> Substring {
        var s = self
        if s.first == quote { s = s.dropFirst() }
        if s.last == quote { s = s.dropLast() }
        return s
    }
}
