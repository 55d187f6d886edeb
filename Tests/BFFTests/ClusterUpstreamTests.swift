import BFF
import ClusterStore
import EventHTTP
import Foundation
import GitHubSearch
import JSON
import Logging
import RedisTestSupport
import WireClient
import XCTest

/// "One upstream, shared" in cluster mode: several in-process `Application.live` nodes on one real
/// `redis-server`, the GitHub simulator (over real HTTP) as upstream, counting the calls it receives.
class ClusterUpstreamTests: ClusterTestCase {

    func node(
        _ name: String, sim: SearchEndToEndTests.Simulator, requestTimeout: Double? = nil, cacheTTL: Double? = nil,
        sharedBudget: TokenBucketShape? = nil
    ) throws -> LiveApp {
        try liveNode(name, sim: sim) { g in
            if let requestTimeout { g.requestTimeout = requestTimeout }
            if let cacheTTL { g.cacheTTL = cacheTTL }
            if let sharedBudget { g.sharedBudget = sharedBudget }
        }
    }

    func testARateLimitSeenThroughOneNodeBlocksTheOthersWithoutCallingGitHub() throws {
        let (sim, a, b, idB) = try nodesAAndB()
        sim.sim.faults.primaryRateLimit = true
        let limitedA = try WireConnection.get(port: a.port, path: "/api/search/repositories?q=rust")
        XCTAssertTrue(limitedA.problem(503).contains("rate limit"))
        XCTAssertEqual(sim.sim.stats.requests, 1)
        // B never saw GitHub's 403, and its cache is empty: the shared budget refuses the call.
        let limitedB = try WireConnection.get(port: b.port, path: "/api/search/repositories?q=swift")
        XCTAssertTrue(limitedB.problem(503).contains("rate limit"))
        XCTAssertNotNil(limitedB.header("Retry-After").flatMap(Int.init))
        XCTAssertEqual(sim.sim.stats.requests, 1, "node B called GitHub during the block")
        XCTAssertEqual(try counter(b, "bff_cluster_budget_refusals_total"), 1, "B's call refused by the shared budget")
        XCTAssertEqual(try counter(a, "bff_cluster_budget_refusals_total"), 0, "A's call was GitHub's 403")
        // B's sessions show the block in `status`.
        try waitUntil("B's session shows the limit", within: 5) {
            try showsRateLimit(status(b, idB))
        }
    }

    func testAnOutageOrARateLimitSeenByOneNodeShowsInEveryNodesStatusWithoutItSearching() throws {
        let sim = try SearchEndToEndTests.Simulator(token: SearchEndToEndTests.token)
        let a = try node("a", sim: sim)
        let b = try node("b", sim: sim)
        let c = try node("c", sim: sim)
        let idB = try b.createSession()
        let idC = try c.createSession()
        sim.sim.faults.serverError = true
        XCTAssertEqual(try WireConnection.get(port: a.port, path: "/api/search/repositories?q=rust").status, 502)
        for (app, id) in [(b, idB), (c, idC)] {
            try waitUntil("the outage reaches every node", within: 5) {
                try status(app, id)?["reachable"] == false
            }
        }
        sim.sim.faults.serverError = false
        sim.sim.faults.primaryRateLimit = true
        XCTAssertTrue(
            try WireConnection.get(port: a.port, path: "/api/search/repositories?q=go").problem(503).contains(
                "rate limit"))
        for (app, id) in [(b, idB), (c, idC)] {
            try waitUntil("the limit reaches every node's status and search", within: 5) {
                let vms = try app.state(id)["viewModels"]
                return showsRateLimit(vms?["status"]) && vms?["status"]?["reachable"] == true
                    && vms?["search"]?["searchEnabled"] == false
                    && vms?["search"]?["retryAt"]?.stringValue != nil
            }
        }
        XCTAssertEqual(sim.sim.stats.requests, 2, "only node A called GitHub")
        // A session created after the report follows it too (the node's app-wide status).
        XCTAssertTrue(showsRateLimit(try status(c, try c.createSession())))
    }

    func testIdenticalConcurrentSearchesOnThreeNodesCostOneUpstreamCall() throws {
        let sim = try SearchEndToEndTests.Simulator(token: SearchEndToEndTests.token)
        sim.sim.faults.latencyMs = 300  // the first call is still under way when the others ask
        let nodes = try ["a", "b", "c"].map { try node($0, sim: sim) }
        let answers = Lock<[Int: WireResponse]>([:])
        let group = DispatchGroup()
        for (i, n) in nodes.enumerated() {  // one thread each: the three requests overlap the 300 ms call
            group.enter()
            Thread.detachNewThread {
                let r = try? WireConnection.get(port: n.port, path: "/api/search/repositories?q=language:swift")
                answers.withLock { $0[i] = r }
                group.leave()
            }
        }
        group.wait()
        let all = answers.withLock { $0 }
        XCTAssertEqual(all.count, 3)
        for (_, r) in all {
            XCTAssertEqual(r.status, 200)
            XCTAssertEqual(r.json?["totalCount"], all[0]?.json?["totalCount"])
        }
        XCTAssertEqual(sim.sim.stats.requests, 1, "one upstream call for three nodes")
        func total(_ outcome: String) throws -> Int {
            try nodes.map { try counter($0, #"bff_cluster_search_cache_total{outcome="\#(outcome)"}"#) }.reduce(0, +)
        }
        XCTAssertEqual(try total("miss"), 1, "one node called upstream")
        XCTAssertEqual(try total("waited") + total("hit"), 2, "the others were served by its fill")
        XCTAssertEqual(try total("lock_timeout"), 0)
        // Later, another node's identical search is served from the shared cache.
        let d = try node("d", sim: sim)
        XCTAssertEqual(
            try WireConnection.get(port: d.port, path: "/api/search/repositories?q=language:swift").status, 200)
        XCTAssertEqual(sim.sim.stats.requests, 1)
        XCTAssertEqual(try counter(d, #"bff_cluster_search_cache_total{outcome="hit"}"#), 1)
    }

    /// `X-Cache` tells the truth through two real nodes: a page A fetched and the shared cache served B is
    /// a `hit` on B (GitHub was called once, for A's answer: it was `miss` there before); identical requests
    /// in flight on both nodes at once are both `miss` (GitHub was called for the answer: by one of them,
    /// the other waited for it).
    func testXCacheSaysMissOnlyWhenGitHubWasCalledForTheAnswer() throws {
        let sim = try SearchEndToEndTests.Simulator(token: SearchEndToEndTests.token)
        let a = try node("a", sim: sim)
        let b = try node("b", sim: sim)
        let path = "/api/search/repositories?q=xcache"
        let first = try WireConnection.get(port: a.port, path: path)
        XCTAssertEqual(first.status, 200)
        XCTAssertEqual(first.header("X-Cache"), "miss")
        let second = try WireConnection.get(port: b.port, path: path)
        XCTAssertEqual(second.status, 200)
        XCTAssertEqual(second.header("X-Cache"), "hit", "B's answer came from the shared cache: GitHub not called")
        XCTAssertEqual(sim.sim.stats.requests, 1)
        XCTAssertEqual(try WireConnection.get(port: b.port, path: path).header("X-Cache"), "hit", "B's own cache")

        sim.sim.faults.latencyMs = 300  // the first call is still under way when the other node asks
        let answers = Lock<[WireResponse?]>([])
        let group = DispatchGroup()
        for n in [a, b] {
            group.enter()
            Thread.detachNewThread {
                let r = try? WireConnection.get(port: n.port, path: "/api/search/repositories?q=inflight")
                answers.withLock { $0.append(r) }
                group.leave()
            }
        }
        group.wait()
        XCTAssertEqual(sim.sim.stats.requests, 2, "one call for both")
        XCTAssertEqual(answers.withLock { $0 }.map { $0?.header("X-Cache") }, ["miss", "miss"])
    }

    /// A lock whose holder died (never fills, never unlocks): the waiting node's wait runs out, it then
    /// calls GitHub itself (once the lock expired) and counts a `lock_timeout`.
    func testAWaitForADeadLockHolderRunsOutAndIsCountedAsALockTimeout() throws {
        let sim = try SearchEndToEndTests.Simulator(token: SearchEndToEndTests.token)
        let a = try node("a", sim: sim, requestTimeout: 1)  // waits for another node's fill 1 + 2 s
        let b = try node("b", sim: sim, requestTimeout: 1)
        XCTAssertEqual(try WireConnection.get(port: a.port, path: "/api/search/repositories?q=ghost").status, 200)
        XCTAssertEqual(try counter(a, #"bff_cluster_search_cache_total{outcome="miss"}"#), 1)
        let keys = try redisCLI("--raw", "KEYS", "bff:c:*")
        let entry = try XCTUnwrap(keys.split(separator: "\n").first.map(String.init), "the shared entry: \(keys)")
        _ = try redisCLI("DEL", entry)
        XCTAssertEqual(try redisCLI("SET", entry + ":lock", "dead-node", "PX", "1500"), "OK\n")
        let started = Date()
        let r = try WireConnection(port: b.port, timeout: 15).request(
            "GET", "/api/search/repositories?q=ghost", headers: [], body: nil)
        XCTAssertEqual(r.status, 200)
        XCTAssertGreaterThan(Date().timeIntervalSince(started), 2.5, "B waited for the dead holder's fill")
        XCTAssertEqual(sim.sim.stats.requests, 2, "B called GitHub itself")
        XCTAssertEqual(try counter(b, #"bff_cluster_search_cache_total{outcome="lock_timeout"}"#), 1)
        XCTAssertEqual(try counter(b, #"bff_cluster_search_cache_total{outcome="miss"}"#), 0)
    }

    /// An expired shared entry is revalidated with its own `ETag`: GitHub's `304` (free of budget) stores
    /// it again, and a node that never saw the page gets it from the shared entry.
    func testAnExpiredSharedEntryIsRevalidatedWithItsETag() throws {
        let sim = try SearchEndToEndTests.Simulator(token: SearchEndToEndTests.token)
        let a = try node("a", sim: sim, cacheTTL: 0.5)
        let b = try node("b", sim: sim, cacheTTL: 0.5)
        let first = try WireConnection.get(port: a.port, path: "/api/search/repositories?q=etag")
        XCTAssertEqual(first.status, 200)
        XCTAssertEqual(sim.sim.stats.notModified, 0)
        usleep(700_000)  // the entry's freshness (0.5 s) has to run out: time itself is what is tested
        let second = try WireConnection.get(port: b.port, path: "/api/search/repositories?q=etag")
        XCTAssertEqual(second.status, 200)
        XCTAssertEqual(second.json?["totalCount"], first.json?["totalCount"])
        XCTAssertEqual(sim.sim.stats.notModified, 1, "B's call was conditional and answered 304")
        XCTAssertEqual(sim.sim.stats.requests, 2)
        XCTAssertEqual(try counter(b, #"bff_cluster_search_cache_total{outcome="miss"}"#), 1)
    }

    /// GitHub does not count a `304` against its limit: the revalidating node's token goes back to the
    /// shared bucket (read in Redis), so the bucket holds what it held before the call.
    func testA304RevalidationLeavesTheSharedBucketAsItWas() throws {
        let sim = try SearchEndToEndTests.Simulator(token: SearchEndToEndTests.token)
        let slow = TokenBucketShape(capacity: 30, refillPerSecond: 0.0001)  // no refill to speak of in the test
        let a = try node("a", sim: sim, cacheTTL: 0.5, sharedBudget: slow)
        let b = try node("b", sim: sim, cacheTTL: 0.5, sharedBudget: slow)
        XCTAssertEqual(try WireConnection.get(port: a.port, path: "/api/search/repositories?q=refund").status, 200)
        let before = try tokens()
        XCTAssertEqual(before, 29, accuracy: 0.01, "A's call took one token of 30")
        usleep(700_000)  // the entry's freshness (0.5 s) has to run out: time itself is what is tested
        XCTAssertEqual(try WireConnection.get(port: b.port, path: "/api/search/repositories?q=refund").status, 200)
        XCTAssertEqual(sim.sim.stats.notModified, 1, "B's call was answered 304")
        XCTAssertEqual(try tokens(), before, accuracy: 0.01, "the 304's token was given back")
        // A counted call still costs its token.
        XCTAssertEqual(try WireConnection.get(port: b.port, path: "/api/search/repositories?q=other").status, 200)
        XCTAssertEqual(try tokens(), before - 1, accuracy: 0.01)
    }

    /// A node posts a block with a short end (GitHub's secondary limit, `Retry-After: 2`) and dies before it
    /// ends: the other node's `status` returns to "available" by itself at the end, with no further post
    /// (the board still holds the block), and its sessions may search again.
    func testADeadPostersBlockMessageEndsWithTheBlockOnTheOtherNodes() throws {
        let (sim, a, b, idB) = try nodesAAndB()
        sim.sim.faults.secondaryRateLimit = true
        sim.sim.faults.retryAfterSeconds = 2
        XCTAssertTrue(
            try WireConnection.get(port: a.port, path: "/api/search/repositories?q=rust").problem(503).contains(
                "rate limit"))
        let block = try XCTUnwrap(boardValue(), "A posted the block")
        let until = try XCTUnwrap(block.blockedUntil)
        XCTAssertNotNil(block.message)
        a.app.server.shutdown(gracePeriod: 0)  // "kill -9" in process: A posts nothing more
        try waitUntil("B's session shows the block", within: 5) {
            try showsRateLimit(status(b, idB))
        }
        try waitUntil("B's status is available again", within: Double(until) - Date().timeIntervalSince1970 + 5) {
            let s = try status(b, idB)
            return (s?["message"] ?? .null) == .null && s?["reachable"] == true
        }
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince1970, Double(until), "not before the block's end")
        XCTAssertEqual(try boardValue(), block, "no post cleared it: the board still holds A's block")
        XCTAssertEqual(try b.state(idB)["viewModels"]?["search"]?["retryAt"] ?? .null, .null, "no longer blocked")
        XCTAssertEqual(sim.sim.stats.requests, 1)
    }

    /// A newer post applied before a block's end replaces it, timer included: a block that ends later
    /// (posted over the board by a node that then died too) keeps `status` blocked past the first end.
    func testANewerPostBeforeTheBlocksEndWins() throws {
        let sim = try SearchEndToEndTests.Simulator(token: SearchEndToEndTests.token)
        let b = try node("b", sim: sim)
        let idB = try b.createSession()
        let message = "GitHub's search rate limit is exhausted; searching resumes when it resets."
        let first = Int(Date().timeIntervalSince1970.rounded(.up)) + 2
        try post(UpstreamStatus(reachable: true, message: message, blockedUntil: first))
        var retryAt: JSONValue?
        try waitUntil("B applies the first block", within: 5) {
            let vms = try b.state(idB)["viewModels"]
            retryAt = vms?["search"]?["retryAt"]
            return vms?["status"]?["message"]?.stringValue == message && retryAt?.stringValue != nil
        }
        let second = first + 2
        try post(UpstreamStatus(reachable: true, message: message, blockedUntil: second))
        try waitUntil("B applies the second block", within: 5) {
            let r = try b.state(idB)["viewModels"]?["search"]?["retryAt"]
            return r?.stringValue != nil && r != retryAt
        }
        XCTAssertLessThan(Date().timeIntervalSince1970, Double(first), "the second post came before the first end")
        try waitUntil("B's status is available again", within: Double(second) - Date().timeIntervalSince1970 + 5) {
            (try status(b, idB)?["message"] ?? .null) == .null
        }
        XCTAssertGreaterThanOrEqual(
            Date().timeIntervalSince1970, Double(second), "the first block's end did not clear the second")
    }

    /// Last post wins, a node's repeat included: A reports an outage, B's successful call then posts
    /// "available", and A's next failure (the same report as its first) is posted again and shows on B.
    func testARepeatedReportIsPostedAgainAfterAnotherNodesPost() throws {
        let (sim, a, b, idB) = try nodesAAndB()
        func reachable() throws -> JSONValue? { try status(b, idB)?["reachable"] }
        sim.sim.faults.serverError = true
        XCTAssertEqual(try WireConnection.get(port: a.port, path: "/api/search/repositories?q=one").status, 502)
        try waitUntil("A's outage shows on B", within: 5) { try reachable() == false }
        sim.sim.faults.serverError = false
        XCTAssertEqual(try WireConnection.get(port: b.port, path: "/api/search/repositories?q=two").status, 200)
        try waitUntil("B's success shows on B", within: 5) { try reachable() == true }
        sim.sim.faults.serverError = true
        XCTAssertEqual(try WireConnection.get(port: a.port, path: "/api/search/repositories?q=three").status, 502)
        try waitUntil("A's second outage shows on B", within: 5) { try reachable() == false }
        XCTAssertEqual(sim.sim.stats.requests, 3)
    }

    /// Nodes A and B on one simulated GitHub, and a session on B (whose `status` shows what reaches B).
    func nodesAAndB() throws -> (sim: SearchEndToEndTests.Simulator, a: LiveApp, b: LiveApp, idB: String) {
        let sim = try SearchEndToEndTests.Simulator(token: SearchEndToEndTests.token)
        let a = try node("a", sim: sim)
        let b = try node("b", sim: sim)
        return (sim, a, b, try b.createSession())
    }

    /// The `status` view model of session `id` on `app`.
    func status(_ app: LiveApp, _ id: String) throws -> JSONValue? { try app.state(id)["viewModels"]?["status"] }

    /// `status` tells of GitHub's rate limit.
    func showsRateLimit(_ status: JSONValue?) -> Bool {
        status?["message"]?.stringValue?.contains("rate limit") == true
    }

    /// Posts `status` to the board as a node does (SET and SPUBLISH in one script).
    func post(_ status: UpstreamStatus) throws {
        let json = String(decoding: try JSONEncoder().encode(status), as: UTF8.self)
        let script = "redis.call('SET', KEYS[1], ARGV[1], 'EX', 600) return redis.call('SPUBLISH', KEYS[1], ARGV[1])"
        XCTAssertNotEqual(try redisCLI("EVAL", script, "1", "bff:status:{github}", json), "0\n", "B subscribes")
    }

    /// The status on the board (the last post), nil when none.
    func boardValue() throws -> UpstreamStatus? {
        let text = try redisCLI("--raw", "GET", "bff:status:{github}").trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? nil : try JSONDecoder().decode(UpstreamStatus.self, from: Data(text.utf8))
    }

    /// The tokens of the shared GitHub bucket as Redis last stored them.
    func tokens() throws -> Double {
        let text = try redisCLI("--raw", "HGET", "bff:rl:{github-search}", "tokens")
        return try XCTUnwrap(Double(text.trimmingCharacters(in: .whitespacesAndNewlines)), "tokens: '\(text)'")
    }

}
