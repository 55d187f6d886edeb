import GitHubSimulator
import JSON
import XCTest

/// The simulator's core without sockets: corpus, query engine, paging, cap, 422s, budget, faults.
final class SimulatorCoreTests: XCTestCase {
    static let sim = GitHubSimulator(
        configuration: {
            var c = GitHubSimulator.Configuration()
            c.rateLimit = 1_000_000
            return c
        }())
    let now = 1_800_000_000.0

    func search(
        _ items: [(String, String)], sim: GitHubSimulator? = nil,
        headers: [(String, String)] = [("User-Agent", "t"), ("Host", "sim")]
    ) -> SimResponse {
        let s = sim ?? Self.sim  // shared, with a budget that never runs out
        guard
            case .respond(let r, _) = s.handle(
                SimRequest(path: "/search/repositories", query: items, headers: headers), now: now)
        else {
            XCTFail("no response")
            return SimResponse(status: 0)
        }
        return r
    }

    func items(_ r: SimResponse) -> [JSONValue] { r.json?["items"]?.arrayValue ?? [] }

    func testCorpusIsDeterministicAndVaried() {
        let a = Corpus(seed: 7, count: 3000)
        let b = Corpus(seed: 7, count: 3000)
        let c = Corpus(seed: 8, count: 3000)
        XCTAssertEqual(a.repositories, b.repositories)
        XCTAssertNotEqual(a.repositories, c.repositories)
        let repos = Self.sim.corpus.repositories
        XCTAssertEqual(repos.count, 5000)
        XCTAssertEqual(Set(repos.map(\.id)).count, 5000)
        XCTAssertEqual(Set(repos.map(\.fullName)).count, 5000)
        XCTAssertTrue(repos.contains { $0.description?.contains("<script>") == true })
        XCTAssertTrue(repos.contains { $0.description?.contains("onerror=") == true })
        XCTAssertTrue(
            repos.contains { $0.description?.unicodeScalars.contains { $0.value >= 0x1F300 } == true }, "emoji")
        XCTAssertTrue(
            repos.contains { $0.description?.unicodeScalars.contains { (0x0600...0x06FF).contains($0.value) } == true },
            "RTL")
        XCTAssertTrue(
            repos.contains { $0.description?.unicodeScalars.contains { (0x0300...0x036F).contains($0.value) } == true },
            "combining")
        XCTAssertTrue(repos.contains { $0.description == nil })
        XCTAssertTrue(repos.contains { $0.language == nil })
        XCTAssertTrue(repos.contains { $0.topics == nil })
        // Zipf: the top 1% of repositories hold a large share of all stars.
        let stars = repos.map(\.stars).sorted(by: >)
        let top = stars.prefix(50).reduce(0, +)
        let all = stars.reduce(0, +)
        XCTAssertGreaterThan(Double(top) / Double(all), 0.4)
        XCTAssertLessThan(stars.last!, 100)
    }

    func testQualifiersFilter() {
        let swift = search([("q", "language:swift"), ("per_page", "100")])
        XCTAssertEqual(swift.status, 200)
        let count = Self.sim.corpus.repositories.filter { $0.language == "Swift" }.count
        XCTAssertEqual(swift.json?["total_count"]?.intValue, count)
        XCTAssertTrue(items(swift).allSatisfy { $0["language"]?.stringValue == "Swift" })

        let stars = search([("q", "stars:>=1000 language:go"), ("per_page", "100")])
        XCTAssertTrue(
            items(stars).allSatisfy {
                ($0["stargazers_count"]?.intValue ?? 0) >= 1000 && $0["language"]?.stringValue == "Go"
            })
        XCTAssertGreaterThan(items(stars).count, 0)
        let range = search([("q", "stars:100..200"), ("per_page", "100")])
        XCTAssertTrue(items(range).allSatisfy { (100...200).contains($0["stargazers_count"]?.intValue ?? -1) })
        let below = search([("q", "stars:<50"), ("per_page", "100")])
        XCTAssertTrue(items(below).allSatisfy { ($0["stargazers_count"]?.intValue ?? 99) < 50 })

        let owner = Self.sim.corpus.repositories[0].owner
        let user = search([("q", "user:\(owner)")])
        XCTAssertEqual(
            user.json?["total_count"]?.intValue, Self.sim.corpus.repositories.filter { $0.owner == owner }.count)
        XCTAssertTrue(items(user).allSatisfy { $0["owner"]?["login"]?.stringValue == owner })
    }

    func testFreeTextAndInQualifier() {
        let text = search([("q", "PARSER"), ("per_page", "100")])
        let all = items(text)
        XCTAssertGreaterThan(all.count, 0)
        for item in all {
            let hay =
                [item["name"]?.stringValue, item["description"]?.stringValue].compactMap { $0 }.joined(separator: " ")
                .lowercased()
                + " " + (item["topics"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: " ")
            XCTAssertTrue(hay.contains("parser"), hay)
        }
        let nameOnly = search([("q", "parser in:name"), ("per_page", "100")])
        XCTAssertTrue(items(nameOnly).allSatisfy { $0["name"]?.stringValue?.lowercased().contains("parser") == true })
        XCTAssertLessThan(nameOnly.json?["total_count"]?.intValue ?? 0, text.json?["total_count"]?.intValue ?? 0)
        let hostile = search([("q", "script in:description")])
        XCTAssertTrue(items(hostile).contains { $0["description"]?.stringValue?.contains("<script>") == true })
        let none = search([("q", "zzzzqqq")])
        XCTAssertEqual(none.json?["total_count"]?.intValue, 0)
        XCTAssertNil(none.header("Link"))
    }

    func testSortOrderAndPaging() {
        let desc = items(search([("q", "language:python"), ("sort", "stars"), ("per_page", "50")])).compactMap {
            $0["stargazers_count"]?.intValue
        }
        XCTAssertEqual(desc, desc.sorted(by: >))
        let asc = items(search([("q", "language:python"), ("sort", "forks"), ("order", "asc"), ("per_page", "50")]))
            .compactMap { $0["forks_count"]?.intValue }
        XCTAssertEqual(asc, asc.sorted())
        let updated = items(search([("q", "language:python"), ("sort", "updated")])).compactMap {
            $0["updated_at"]?.stringValue
        }
        XCTAssertEqual(updated, updated.sorted(by: >))

        let p1 = search([("q", "language:python"), ("sort", "stars"), ("per_page", "10"), ("page", "1")])
        let p2 = search([("q", "language:python"), ("sort", "stars"), ("per_page", "10"), ("page", "2")])
        let ids1 = items(p1).compactMap { $0["id"]?.intValue }
        let ids2 = items(p2).compactMap { $0["id"]?.intValue }
        XCTAssertEqual(ids1.count, 10)
        XCTAssertTrue(Set(ids1).isDisjoint(with: ids2))
        XCTAssertEqual(
            desc.prefix(20).map { $0 }, (items(p1) + items(p2)).compactMap { $0["stargazers_count"]?.intValue })
        let total = p1.json?["total_count"]?.intValue ?? 0
        let link = p2.header("Link") ?? ""
        XCTAssertTrue(link.contains("page=3>; rel=\"next\""), link)
        XCTAssertTrue(link.contains("page=\((min(total, 1000) + 9) / 10)>; rel=\"last\""), link)
        XCTAssertTrue(link.contains("page=1>; rel=\"first\""), link)
        XCTAssertTrue(link.contains("page=1>; rel=\"prev\""), link)
        XCTAssertTrue(
            link.hasPrefix("<http://sim/search/repositories?q=language%3Apython&sort=stars&per_page=10&page=3>"), link)
        XCTAssertEqual(
            items(search([("q", "language:python"), ("per_page", "500")])).count, min(100, total),
            "per_page is capped at 100")
    }

    func testResultCap() {
        let r = search([("q", "a"), ("per_page", "100"), ("page", "10")])
        XCTAssertEqual(r.status, 200)
        XCTAssertGreaterThan(r.json?["total_count"]?.intValue ?? 0, 1000, "total_count reports all matches")
        XCTAssertEqual(items(r).count, 100)
        XCTAssertFalse(r.header("Link")?.contains("rel=\"next\"") ?? true, "no next page past the cap")
        let past = search([("q", "a"), ("per_page", "100"), ("page", "11")])
        XCTAssertEqual(past.status, 422)
        XCTAssertEqual(past.json?["message"]?.stringValue, "Only the first 1000 search results are available")
        let partial = search([("q", "a"), ("per_page", "30"), ("page", "34")])
        XCTAssertEqual(items(partial).count, 10, "results 990..<1000")
    }

    func testValidationErrors() {
        let empty = search([("q", "  ")])
        XCTAssertEqual(empty.status, 422)
        XCTAssertEqual(empty.json?["message"]?.stringValue, "Validation Failed")
        XCTAssertEqual(empty.json?["errors"]?.arrayValue?.first?["code"]?.stringValue, "missing")
        XCTAssertEqual(search([]).status, 422)
        let long = search([("q", String(repeating: "x", count: 257))])
        XCTAssertEqual(
            long.json?["errors"]?.arrayValue?.first?["message"]?.stringValue,
            "The search is longer than 256 characters.")
        XCTAssertEqual(search([("q", "stars:abc")]).status, 422)
        let ghost = search([("q", "user:no-such-user-xyz")])
        XCTAssertEqual(ghost.status, 422)
        XCTAssertTrue(
            ghost.json?["errors"]?.arrayValue?.first?["message"]?.stringValue?.contains("cannot be searched") == true)
    }

    func testRateBudgetPerMinute() {
        var config = GitHubSimulator.Configuration()
        config.rateLimit = 3
        config.repositories = 200
        let sim = GitHubSimulator(configuration: config)
        let statuses = (0..<4).map { _ in search([("q", "a")], sim: sim) }
        XCTAssertEqual(statuses.map(\.status), [200, 200, 200, 403])
        XCTAssertEqual(statuses.map { $0.header("X-RateLimit-Remaining") }, ["2", "1", "0", "0"])
        XCTAssertEqual(statuses[3].json?["message"]?.stringValue?.hasPrefix("API rate limit exceeded"), true)
        XCTAssertEqual(sim.stats.rateLimited, 1)
        XCTAssertEqual(sim.stats.requests, 4)
        let reset = Double(statuses[3].header("X-RateLimit-Reset") ?? "0") ?? 0
        guard
            case .respond(let later, _) = sim.handle(
                SimRequest(path: "/search/repositories", query: [("q", "a")], headers: [("User-Agent", "t")]),
                now: reset + 1)
        else { return XCTFail() }
        XCTAssertEqual(later.status, 200, "a new window after the reset")
    }

    func testFaultsAndControlEndpoints() {
        let sim = GitHubSimulator(
            configuration: {
                var c = GitHubSimulator.Configuration()
                c.repositories = 100
                return c
            }())
        func post(_ body: String) -> SimResponse {
            guard
                case .respond(let r, _) = sim.handle(
                    SimRequest(method: "POST", path: "/_sim/faults", body: Array(body.utf8)), now: now)
            else { return SimResponse(status: 0) }
            return r
        }
        XCTAssertEqual(post(#"{"serverError": true}"#).status, 200)
        XCTAssertEqual(search([("q", "a")], sim: sim).status, 502)
        XCTAssertEqual(post(#"{"serverError": false, "secondaryRateLimit": true, "retryAfterSeconds": 7}"#).status, 200)
        let secondary = search([("q", "a")], sim: sim)
        XCTAssertEqual(secondary.status, 429)
        XCTAssertEqual(secondary.header("Retry-After"), "7")
        XCTAssertEqual(post(#"{"secondaryRateLimit": false, "primaryRateLimit": true}"#).status, 200)
        let primary = search([("q", "a")], sim: sim)
        XCTAssertEqual(primary.status, 403)
        XCTAssertEqual(primary.header("X-RateLimit-Remaining"), "0")
        XCTAssertEqual(post(#"{"primaryRateLimit": false, "malformedJSON": true}"#).status, 200)
        let malformed = search([("q", "a")], sim: sim)
        XCTAssertEqual(malformed.status, 200)
        XCTAssertNil(malformed.json)
        XCTAssertEqual(post(#"{"malformedJSON": false, "hang": true, "latencyMs": 250}"#).status, 200)
        XCTAssertEqual(
            sim.handle(
                SimRequest(path: "/search/repositories", query: [("q", "a")], headers: [("User-Agent", "t")]), now: now),
            .hang)
        XCTAssertEqual(post(#"{"hang": false}"#).status, 200)
        guard
            case .respond(let slow, let delay) = sim.handle(
                SimRequest(path: "/search/repositories", query: [("q", "a")], headers: [("User-Agent", "t")]), now: now)
        else { return XCTFail() }
        XCTAssertEqual(slow.status, 200)
        XCTAssertEqual(delay, 250)
        XCTAssertEqual(post(#"{"bogus": 1}"#).status, 400)
        XCTAssertEqual(post(#"{"hang": "yes"}"#).status, 400)
        XCTAssertEqual(sim.stats.requests, 6)
        guard case .respond(let stats, _) = sim.handle(SimRequest(path: "/_sim/stats"), now: now) else {
            return XCTFail()
        }
        XCTAssertEqual(stats.json?["requests"]?.intValue, 6)
        sim.reset()
        XCTAssertEqual(sim.stats, GitHubSimulator.Stats())
        XCTAssertEqual(sim.faults, SimFaults())
    }

    func testAuthenticationAndUserAgent() {
        var config = GitHubSimulator.Configuration()
        config.token = "tok"
        config.repositories = 100
        let sim = GitHubSimulator(configuration: config)
        XCTAssertEqual(
            search([("q", "a")], sim: sim, headers: [("User-Agent", "t"), ("Authorization", "Bearer tok")]).status, 200)
        XCTAssertEqual(
            search([("q", "a")], sim: sim, headers: [("User-Agent", "t"), ("Authorization", "Bearer nope")]).status, 401
        )
        XCTAssertEqual(
            search([("q", "a")], sim: sim, headers: [("User-Agent", "t")]).status, 200, "anonymous is allowed")
        XCTAssertEqual(search([("q", "a")], sim: sim, headers: []).status, 403, "GitHub requires a User-Agent")
        XCTAssertEqual(sim.stats.authenticated, 1)
    }

    func testConditionalRequestsAreFree() {
        var config = GitHubSimulator.Configuration()
        config.rateLimit = 5
        config.repositories = 100
        let sim = GitHubSimulator(configuration: config)
        let first = search([("q", "a")], sim: sim)
        let etag = try? XCTUnwrap(first.header("ETag"))
        XCTAssertTrue(etag?.hasPrefix("W/\"") == true)
        let again = search([("q", "a")], sim: sim, headers: [("User-Agent", "t"), ("If-None-Match", etag ?? "")])
        XCTAssertEqual(again.status, 304)
        XCTAssertEqual(again.body, [])
        XCTAssertEqual(again.header("X-RateLimit-Remaining"), "4", "the 304 did not spend budget")
        let other = search([("q", "b")], sim: sim, headers: [("User-Agent", "t"), ("If-None-Match", etag ?? "")])
        XCTAssertEqual(other.status, 200)
        XCTAssertEqual(sim.stats.notModified, 1)
    }
}
