import JSON

extension GitHubSimulator {
    static let rateLimitDocs = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api"

    /// Search with faults, authentication and the per-minute budget applied around `SearchEngine`.
    func search(_ request: SimRequest, now: Double) -> SimOutcome {
        let f = faults
        let authorization = request.header("Authorization")
        // A token the sign-in flow issued spends its own budget; one it no longer knows is refused.
        let bearer = SimOAuth.bearer(request)
        let userToken = bearer.flatMap { oauth.login(ofToken: $0) != nil ? $0 : nil }
        let appToken = token != nil && authorization == "Bearer \(token!)"
        let authenticated = appToken || userToken != nil
        let bump: (inout Stats) -> Void = {
            $0.requests += 1
            if authenticated { $0.authenticated += 1 }
            if userToken != nil { $0.signedIn += 1 }
        }
        let delay = f.latencyMs
        if f.hang {
            record(bump)
            return .hang
        }
        let unknownUserToken = userToken == nil && bearer?.hasPrefix(SimOAuth.tokenPrefix) == true
        if unknownUserToken || (userToken == nil && token != nil && authorization != nil && !appToken) {
            record(bump)
            return .respond(
                .json(401, ["message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"]),
                delayMilliseconds: delay)
        }
        if request.header("User-Agent") == nil {
            record(bump)
            return .respond(
                .json(
                    403,
                    [
                        "message":
                            "Request forbidden by administrative rules. Please make sure your request has a User-Agent header (https://docs.github.com/en/rest/overview/resources-in-the-rest-api#user-agent-required)."
                    ]), delayMilliseconds: delay)
        }
        if f.serverError {
            record(bump)
            return .respond(.json(f.serverErrorStatus, ["message": "Server Error"]), delayMilliseconds: delay)
        }
        // The budget: a fixed window that starts with the first request after the last reset.
        let (budget, remaining, reset, allowed) = consume(now: now, forced: f.primaryRateLimit, token: userToken)
        var headers: [(String, String)] = [
            ("X-RateLimit-Limit", String(budget)), ("X-RateLimit-Remaining", String(remaining)),
            ("X-RateLimit-Reset", String(reset)), ("X-RateLimit-Used", String(budget - remaining)),
            ("X-RateLimit-Resource", "search"),
        ]
        if !allowed {
            record {
                bump(&$0)
                $0.rateLimited += 1
            }
            return .respond(
                .json(
                    403,
                    [
                        "message":
                            "API rate limit exceeded for user ID 1. If you reach out to GitHub Support for help, please include the request ID.",
                        "documentation_url": .string(GitHubSimulator.rateLimitDocs),
                    ], headers: headers), delayMilliseconds: delay)
        }
        if f.secondaryRateLimit {
            record {
                bump(&$0)
                $0.rateLimited += 1
            }
            headers.append(("Retry-After", String(f.retryAfterSeconds)))
            return .respond(
                .json(
                    429,
                    [
                        "message":
                            "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID.",
                        "documentation_url": .string(GitHubSimulator.rateLimitDocs),
                    ], headers: headers), delayMilliseconds: delay)
        }
        let host = request.header("Host") ?? "127.0.0.1"
        var response = SearchEngine.respond(request, corpus: corpus, baseURL: "http://\(host)")
        response.headers.append(contentsOf: headers)
        if f.malformedJSON && response.status == 200 {
            response.body = Array(response.body.prefix(max(1, response.body.count / 2)))
        } else if response.status == 200 {
            let etag = GitHubSimulator.etag(response.body)
            response.headers.append(("ETag", etag))
            if request.header("If-None-Match") == etag {
                refund(token: userToken)  // like GitHub, a 304 to a conditional request costs no budget
                response.status = 304
                response.body = []
                response.headers =
                    response.headers.filter { $0.0 != "Content-Type" && $0.0 != "X-RateLimit-Remaining" }
                    + [("X-RateLimit-Remaining", String(remaining + 1))]
                record {
                    bump(&$0)
                    $0.notModified += 1
                }
                return .respond(response, delayMilliseconds: delay)
            }
        }
        record {
            bump(&$0)
            if response.status == 200 { $0.served += 1 }
        }
        return .respond(response, delayMilliseconds: delay)
    }
}

extension GitHubSimulator {
    /// A weak ETag of a body (FNV-1a, 64 bits), shaped like GitHub's `W/"…"`.
    static func etag(_ body: [UInt8]) -> String {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in body { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        let hex = String(h, radix: 16)
        return "W/\"\(String(repeating: "0", count: 16 - hex.count))\(hex)\""
    }
}
