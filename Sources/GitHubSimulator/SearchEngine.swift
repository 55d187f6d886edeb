import JSON

/// The pure heart of the simulator: answers `GET /search/repositories` from a corpus the way
/// GitHub does (paging, sort, the 1000-result cap, `Link`, 422 bodies). No state, no clock, no
/// rate limit (those are `GitHubSimulator`'s); safe on any thread.
package enum SearchEngine {
    /// GitHub's documentation URL for search, as it appears in error bodies.
    static let documentation = "https://docs.github.com/rest/search/search#search-repositories"

    /// Answers one search. `baseURL` (e.g. `http://127.0.0.1:9090`) prefixes the `Link` URLs.
    package static func respond(_ request: SimRequest, corpus: Corpus, baseURL: String) -> SimResponse {
        let q = request.parameter("q") ?? ""
        let query: SearchQuery
        do {
            query = try SearchQuery(q)
        } catch {
            return validationFailed(message: error.message, code: error.code)
        }
        if !query.users.isEmpty, !query.users.allSatisfy(corpus.owners.contains) {
            return validationFailed(
                message:
                    "The listed users and repositories cannot be searched either because the resources do not exist or you do not have permission to view them.",
                code: "invalid")
        }
        let perPage = min(100, max(1, request.parameter("per_page").flatMap { Int($0) } ?? 30))
        let page = max(1, request.parameter("page").flatMap { Int($0) } ?? 1)
        let start = (page - 1) * perPage
        if start >= 1000 {
            return .json(
                422,
                [
                    "message": "Only the first 1000 search results are available",
                    "documentation_url": .string(documentation),
                ])
        }
        let sort = request.parameter("sort") ?? ""
        let ascending = request.parameter("order") == "asc"
        let bestMatch = !["stars", "forks", "updated"].contains(sort)
        var matches = corpus.repositories.compactMap { repo -> (repo: CorpusRepository, score: Double)? in
            query.matches(repo) ? (repo, bestMatch ? query.score(repo) : 1) : nil
        }
        matches.sort { x, y in
            let a = x.repo
            let b = y.repo
            switch sort {
            case "stars": if a.stars != b.stars { return ascending ? a.stars < b.stars : a.stars > b.stars }
            case "forks": if a.forks != b.forks { return ascending ? a.forks < b.forks : a.forks > b.forks }
            case "updated":
                if a.updatedAt != b.updatedAt {
                    return ascending ? a.updatedAt < b.updatedAt : a.updatedAt > b.updatedAt
                }
            default:
                if x.score != y.score { return ascending ? x.score < y.score : x.score > y.score }
                if a.stars != b.stars { return a.stars > b.stars }
            }
            return a.id < b.id
        }
        let reachable = min(matches.count, 1000)
        let end = min(start + perPage, reachable)
        let items = start < end ? Array(matches[start..<end]) : []
        let body: JSONValue = [
            "total_count": .int(matches.count),
            "incomplete_results": false,
            "items": .array(items.map { $0.repo.json(score: $0.score) }),
        ]
        var headers: [(String, String)] = []
        let lastPage = max(1, (reachable + perPage - 1) / perPage)
        if let link = linkHeader(request, page: page, lastPage: lastPage, baseURL: baseURL) {
            headers.append(("Link", link))
        }
        return .json(200, body, headers: headers)
    }

    /// GitHub's 422 "Validation Failed" body.
    static func validationFailed(message: String?, code: String) -> SimResponse {
        var error: JSONObject = ["resource": "Search", "field": "q", "code": .string(code)]
        if let message { error["message"] = .string(message) }
        return .json(
            422,
            [
                "message": "Validation Failed", "errors": .array([.object(error)]),
                "documentation_url": .string(documentation),
            ])
    }

    /// `next`, `last`, `first`, `prev` in GitHub's order; nil when there is a single page.
    static func linkHeader(_ request: SimRequest, page: Int, lastPage: Int, baseURL: String) -> String? {
        func url(_ p: Int) -> String {
            var items = request.query.filter { $0.0 != "page" }
            items.append(("page", String(p)))
            return "\(baseURL)/search/repositories?"
                + items.map { "\(encode($0.0))=\(encode($0.1))" }.joined(separator: "&")
        }
        var links: [String] = []
        if page < lastPage {
            links.append("<\(url(page + 1))>; rel=\"next\"")
            links.append("<\(url(lastPage))>; rel=\"last\"")
        }
        if page > 1 {
            links.append("<\(url(1))>; rel=\"first\"")
            links.append("<\(url(min(page - 1, lastPage)))>; rel=\"prev\"")
        }
        return links.isEmpty ? nil : links.joined(separator: ", ")
    }

    /// Percent-encodes everything but RFC 3986 unreserved characters.
    static func encode(_ s: String) -> String {
        let hex = Array("0123456789ABCDEF")
        var out = ""
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(Character(Unicode.Scalar(b)))
            default:
                out.append("%")
                out.append(hex[Int(b >> 4)])
                out.append(hex[Int(b & 0xF)])
            }
        }
        return out
    }
}
