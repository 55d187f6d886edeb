import BFF
import EventHTTP
import Features
import GitHubSearch
import JSON
import ViewModels

extension Application {
    /// `GET /api/search/repositories`: the cached search model for curl users and load tests.
    func serveStatelessSearch(_ search: any RepositorySearching) {
        server.router.add(.GET, "/api/search/repositories") { req, res in
            let request: SearchRequest
            switch Application.searchRequest(from: req.query, maxPerPage: SearchRequest.maximumPageSize) {
            case .failure(let e): return res.send(e)
            case .success(let r): request = r
            }
            let loop = req.loop
            let client = req.client.description
            Task {
                // Charged to the requesting client: GitHub's budget is shared fairly (`UpstreamClient`).
                let result: Result<SearchResponse, SearchError> = await UpstreamClient.$current.withValue(client) {
                    do throws(SearchError) {
                        return .success(try await search.search(request, policy: .useCache))
                    } catch {
                        return .failure(error)
                    }
                }
                let response = Application.searchResponse(result, request: request)
                loop.execute { res.send(response) }
            }
        }
    }

    static func searchRequest(from q: [String: String], maxPerPage: Int) -> Result<SearchRequest, HTTPError> {
        guard let text = q["q"]?.trimmingHTTPWhitespace(), !text.isEmpty else {
            return .failure(HTTPError(400, "query parameter 'q' is required and must not be blank"))
        }
        guard text.utf8.count <= 256 else {
            return .failure(HTTPError(400, "query parameter 'q' is longer than 256 bytes"))
        }
        var r = SearchRequest(query: text)
        if let s = q["sort"] {
            guard let sort = SearchSort(rawValue: s) else {
                return .failure(
                    HTTPError(
                        400,
                        "query parameter 'sort' must be one of best-match, stars, forks, updated; got '\(s.prefix(40))'"
                    ))
            }
            r.sort = sort
        }
        if let o = q["order"] {
            guard let order = SortOrder(rawValue: o) else {
                return .failure(HTTPError(400, "query parameter 'order' must be asc or desc; got '\(o.prefix(40))'"))
            }
            r.order = order
        }
        if let p = q["page"] {
            guard let page = Int(p), page >= 1, page <= 1000 else {
                return .failure(
                    HTTPError(400, "query parameter 'page' must be an integer from 1 to 1000; got '\(p.prefix(40))'"))
            }
            r.page = page
        }
        if let pp = q["per_page"] {
            guard let perPage = Int(pp), perPage >= 1, perPage <= maxPerPage else {
                return .failure(
                    HTTPError(
                        400,
                        "query parameter 'per_page' must be an integer from 1 to \(maxPerPage); got '\(pp.prefix(40))'")
                )
            }
            r.perPage = perPage
        }
        return .success(r)
    }

    static func searchResponse(_ result: Result<SearchResponse, SearchError>, request: SearchRequest) -> HTTPResponse {
        switch result {
        case .success(let r):
            let body: JSONValue = [
                "totalCount": .int(r.page.totalCount), "incompleteResults": .bool(r.page.incompleteResults),
                "items": .array(r.page.repositories.map(SearchJSON.repository)), "page": .int(r.page.page),
                "hasMore": .bool(r.page.hasMore),
            ]
            return .json(200, body, headers: [("X-Cache", r.cache.rawValue), ("Cache-Control", "no-store")])
        case .failure(let e):
            switch e {
            case .invalidQuery(let m): return .problem(status: 422, detail: "GitHub rejected the query: \(m)")
            case .rateLimited(let s, let m):
                return .problem(
                    status: 503, detail: m,  // the rate limiter's sentence: the limit and the seconds left
                    headers: [("Retry-After", String(max(1, s)))],
                    extra: ["kind": "rateLimited", "retryAfterSeconds": .int(s)])
            case .unavailable(let m):
                return .problem(
                    status: 503, detail: "GitHub cannot be reached and nothing is cached: \(m)",
                    headers: [("Retry-After", "30")],
                    extra: ["kind": "unavailable"])
            case .upstream(let m):
                return .problem(status: 502, detail: "GitHub answered unexpectedly: \(m)", extra: ["kind": "upstream"])
            }
        }
    }

    /// `POST /api/_test/status` (only with `--test-hooks`): sets the shared status (and, with
    /// `"blockedUntil": <seconds since 1970>`, the app-wide search block every session follows), e.g.
    /// `{"reachable": false, "message": "…", "rateLimit": {"limit": 30, "remaining": 0, "resetAt": 1790000000}}`.
    /// It goes into `sink`, where the gateway's reports go: in cluster mode to every node, as a status
    /// GitHub caused would.
    func serveStatusTestHook(into sink: StatusSink) {
        server.router.add(.POST, "/api/_test/status") { req, res in
            res.send(Application.applyTestStatus(req.body, to: sink))
        }
    }

    private static func applyTestStatus(_ body: [UInt8], to sink: StatusSink) -> HTTPResponse {
        guard let v = try? JSONValue.parse(body), case .object(let o) = v else {
            return .problem(status: 400, detail: "expected a JSON object {\"reachable\", \"message\", \"rateLimit\"}")
        }
        var s = UpstreamStatus(reachable: o["reachable"]?.boolValue ?? true, message: o["message"]?.stringValue)
        if let r = o["rateLimit"]?.objectValue, let limit = r["limit"]?.intValue,
            let remaining = r["remaining"]?.intValue,
            let reset = r["resetAt"]?.intValue
        {
            s.rateLimit = RateLimit(limit: limit, remaining: remaining, resetAt: reset, resource: "search")
        }
        s.blockedUntil = o["blockedUntil"]?.intValue
        sink.forward(s)
        return .json(202, ["accepted": true])
    }
}
