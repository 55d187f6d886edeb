/// The order of search results (the contract's names; `bestMatch` sends no `sort` upstream).
public enum SearchSort: String, Sendable, CaseIterable, Codable {
    case bestMatch = "best-match"
    case stars
    case forks
    case updated
}

/// Ascending or descending.
public enum SortOrder: String, Sendable, CaseIterable, Codable {
    case desc
    case asc
}

/// One page of one search: the cache key and the upstream request.
public struct SearchRequest: Sendable, Hashable, Codable {
    /// GitHub's largest page size.
    public static let maximumPageSize = 100
    /// GitHub serves at most this many results of any search; pages past it are never requested.
    public static let resultCap = 1000

    /// The query text, trimmed (GitHub qualifiers such as `language:swift` included).
    public var query: String
    public var sort: SearchSort
    public var order: SortOrder
    /// 1-based page number.
    public var page: Int
    /// Results per page, 1...100.
    public var perPage: Int

    /// The stored names (cache rows, durable view-model state); explicit so a rename cannot change them.
    enum CodingKeys: String, CodingKey {
        case query, sort, order, page, perPage
    }

    public init(
        query: String, sort: SearchSort = .bestMatch, order: SortOrder = .desc, page: Int = 1, perPage: Int = 30
    ) {
        self.query = query
        self.sort = sort
        self.order = order
        self.page = page
        self.perPage = perPage
    }

    /// True when the page lies entirely past GitHub's 1000-result cap (it must not be requested).
    public var isPastResultCap: Bool { (page - 1) * perPage >= SearchRequest.resultCap }

    /// The query as a cache key: what GitHub reads the same way is spelled the same way.
    ///
    /// GitHub's repository search is case-insensitive for terms and ignores extra whitespace, so
    /// `Swift`, ` swift ` and `SWIFT` are one search. The rules:
    /// - leading and trailing whitespace is dropped, runs of whitespace between tokens become one space;
    /// - free-text terms are lower-cased;
    /// - kept as typed: quoted phrases (whitespace inside the quotes included, in case it matters),
    ///   qualifiers (`key:value` tokens; their values, e.g. `user:Apple`, are not assumed to be
    ///   case-insensitive, and lower-casing a key could change what GitHub takes for a qualifier),
    ///   and the operators `AND`, `OR`, `NOT`, which GitHub recognises only in upper case
    ///   (`swift or rust` searches for the word "or").
    /// The order of tokens is kept (`swift rust` and `rust swift` stay two keys).
    public static func normalizedQuery(_ query: String) -> String {
        var tokens: [String] = []
        var current = ""
        var inQuotes = false
        func flush() {
            guard !current.isEmpty else { return }
            tokens.append(normalizedToken(current))
            current = ""
        }
        for character in query {
            if character == "\"" { inQuotes.toggle() }
            if !inQuotes && character.isWhitespace {
                flush()
            } else {
                current.append(character)
            }
        }
        flush()
        return tokens.joined(separator: " ")
    }

    private static func normalizedToken(_ token: String) -> String {
        if token.contains("\"") || token.contains(":") { return token }
        if token == "AND" || token == "OR" || token == "NOT" { return token }
        return token.lowercased()
    }

    /// The request for the following page.
    public var nextPage: SearchRequest {
        var r = self
        r.page += 1
        return r
    }
}

/// How a caller wants the cache to treat a request. Stored by name in durable view-model state.
public enum CachePolicy: String, Sendable, Equatable, Codable {
    /// Serve from cache when fresh (or stale within the maximum age when upstream fails).
    case useCache
    /// Revalidate with upstream now (the user pressed refresh); fall back to stale on failure.
    case revalidate
}
