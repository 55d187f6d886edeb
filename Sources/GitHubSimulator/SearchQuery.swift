import Foundation

/// A parsed GitHub repository search `q`: free-text terms and the common qualifiers.
///
/// Supported: free text (quoted phrases too), `language:`, `stars:`, `forks:` (`N`, `>N`, `>=N`,
/// `<N`, `<=N`, `N..M`, `N..*`, `*..N`), `user:`/`org:`, `in:name,description,topics`, `topic:`.
/// Unknown qualifiers are treated as free text. A plain value; safe on any thread.
package struct SearchQuery: Sendable, Equatable {
    /// The fields free-text terms are matched against.
    package enum Field: String, Sendable, CaseIterable { case name, description, topics }

    /// Lower-cased free-text terms; every one must match.
    package var terms: [String] = [] { didSet { termBytes = terms.map { Array($0.utf8) } } }
    var termBytes: [[UInt8]] = []
    /// Lower-cased languages; any may match (empty: no restriction).
    package var languages: [String] = []
    /// Lower-cased owners; any may match.
    package var users: [String] = []
    /// Lower-cased topics; all must be present.
    package var topics: [String] = [] { didSet { topicBytes = topics.map { Array($0.utf8) } } }
    var topicBytes: [[UInt8]] = []
    package var stars: ClosedRange<Int>?
    package var forks: ClosedRange<Int>?
    /// Where terms are searched (default: all three).
    package var fields: Set<Field> = Set(Field.allCases)

    /// A query GitHub would refuse with 422: the `errors[].message` (or nil) and the code.
    package struct Invalid: Error, Equatable, Sendable {
        package var message: String?
        package var code: String
    }

    /// Parses `q`.
    package init(_ q: String) throws(Invalid) {
        let trimmed = q.trimmingWhitespace()
        guard !trimmed.isEmpty else { throw Invalid(message: nil, code: "missing") }
        guard trimmed.count <= 256 else {
            throw Invalid(message: "The search is longer than 256 characters.", code: "invalid")
        }
        var fieldsSet = false
        for token in SearchQuery.tokens(String(trimmed)) {
            guard !token.quoted, let colon = token.text.firstIndex(of: ":") else {
                terms.append(token.text.lowercased())
                continue
            }
            let key = token.text[..<colon].lowercased()
            let value = String(token.text[token.text.index(after: colon)...])
            switch key {
            case "language": languages.append(value.lowercased())
            case "user", "org": users.append(value.lowercased())
            case "topic": topics.append(value.lowercased())
            case "stars", "forks":
                guard let range = SearchQuery.range(value) else {
                    throw Invalid(message: "Invalid value '\(value)' for the \(key) qualifier.", code: "invalid")
                }
                if key == "stars" { stars = range } else { forks = range }
            case "in":
                if !fieldsSet { fields = [] }
                fieldsSet = true
                for part in value.lowercased().split(separator: ",") {
                    guard let f = Field(rawValue: String(part)) else {
                        throw Invalid(message: "Invalid value '\(part)' for the in qualifier.", code: "invalid")
                    }
                    fields.insert(f)
                }
            default:
                terms.append(token.text.lowercased())
            }
        }
        termBytes = terms.map { Array($0.utf8) }  // observers do not run inside init
        topicBytes = topics.map { Array($0.utf8) }
    }

    /// True when `repo` satisfies every part of the query.
    package func matches(_ repo: CorpusRepository) -> Bool {
        if !languages.isEmpty {
            guard let l = repo.language?.lowercased(), languages.contains(l) else { return false }
        }
        if !users.isEmpty && !users.contains(repo.owner.lowercased()) { return false }
        if let stars, !stars.contains(repo.stars) { return false }
        if let forks, !forks.contains(repo.forks) { return false }
        for t in topicBytes where !repo.lowerTopics.contains(t) { return false }
        for term in termBytes where !matches(term, repo) { return false }
        return true
    }

    func matches(_ term: [UInt8], _ repo: CorpusRepository) -> Bool {
        (fields.contains(.name) && bytesContain(repo.lowerName, term))
            || (fields.contains(.description) && bytesContain(repo.lowerDescription, term))
            || (fields.contains(.topics) && repo.lowerTopics.contains { bytesContain($0, term) })
    }

    /// Best-match relevance: name hits weigh most, then topics, then description; stars break ties.
    package func score(_ repo: CorpusRepository) -> Double {
        var s = 0.0
        for term in termBytes {
            if repo.lowerName == term { s += 10 } else if bytesContain(repo.lowerName, term) { s += 5 }
            if repo.lowerTopics.contains(term) { s += 3 }
            if bytesContain(repo.lowerDescription, term) { s += 1 }
        }
        var magnitude = 0.0
        var v = Double(repo.stars) + 1
        while v >= 10 {
            v /= 10
            magnitude += 1
        }
        return s + magnitude * 0.5 + 1
    }

    /// `N`, `>N`, `>=N`, `<N`, `<=N`, `N..M`, `N..*`, `*..N`.
    static func range(_ v: String) -> ClosedRange<Int>? {
        if v.hasPrefix(">=") { return Int(v.dropFirst(2)).map { $0...Int.max } }
        if v.hasPrefix("<=") { return Int(v.dropFirst(2)).map { Int.min...$0 } }
        if v.hasPrefix(">") { return Int(v.dropFirst()).flatMap { $0 == Int.max ? nil : ($0 + 1)...Int.max } }
        if v.hasPrefix("<") { return Int(v.dropFirst()).flatMap { $0 == Int.min ? nil : Int.min...($0 - 1) } }
        let parts = v.components(separatedBy: "..")
        if parts.count == 2 {
            let lo = parts[0] == "*" ? Int.min : Int(parts[0])
            let hi = parts[1] == "*" ? Int.max : Int(parts[1])
            guard let lo, let hi, lo <= hi else { return nil }
            return lo...hi
        }
        return Int(v).map { $0...$0 }
    }

    struct Token: Equatable {
        var text: String
        var quoted: Bool
    }

    /// Splits on whitespace; `"a b"` is one quoted token.
    static func tokens(_ s: String) -> [Token] {
        var out: [Token] = []
        var current = ""
        var inQuotes = false
        for c in s {
            if c == "\"" {
                if inQuotes {
                    if !current.isEmpty { out.append(Token(text: current, quoted: true)) }
                } else if !current.isEmpty {
                    out.append(Token(text: current, quoted: false))
                }
                current = ""
                inQuotes.toggle()
            } else if c.isWhitespace && !inQuotes {
                if !current.isEmpty { out.append(Token(text: current, quoted: false)) }
                current = ""
            } else {
                current.append(c)
            }
        }
        if !current.isEmpty { out.append(Token(text: current, quoted: inQuotes)) }
        return out
    }
}

extension String {
    func trimmingWhitespace() -> Substring {
        var s = self[...]
        while let f = s.first, f.isWhitespace { s = s.dropFirst() }
        while let l = s.last, l.isWhitespace { s = s.dropLast() }
        return s
    }

}
