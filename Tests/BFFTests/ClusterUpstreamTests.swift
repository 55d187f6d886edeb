import BFF
import Foundation
import GitHubSearch
import JSON
import Logging
import RedisTestSupport
import Synchronization
import WireClient
import XCTest

/// "One upstream, shared" in cluster mode: several in-process `Application.live` nodes on one real
/// `redis-server`, the GitHub simulator (over real HTTP) as upstream, counting the calls it receives.
final class ClusterUpstreamTests: XCTestCase {
    var redis: RedisServerProcess!

    override func setUpWithError() throws {
        redis = try RedisServerProcess()
    }

    override func tearDown() {
        redis?.kill()
        redis = nil
    }

    func node(_ name: String, sim: SearchEndToEndTests.Simulator) throws -> LiveApp {
        var c = AppConfiguration()
        c.http.port = 0
        c.http.threads = 2
        c.cluster = ClusterSettings(redisURL: redis.url, nodeID: name)
        var g = GitHubSettings()
        g.baseURL = sim.url
        g.token = SearchEndToEndTests.token
        g.cachePath = nil
        var quiet = Logger(label: name)
        quiet.logLevel = .error
        let app = try LiveApp(app: Application.live(configuration: c, github: g, logger: quiet))
        try waitUntil("\(name) ready", within: 10) {
            (try? WireConnection.get(port: app.port, path: "/readyz").status) == 200
        }
        return app
    }

    func testARateLimitSeenThroughOneNodeBlocksTheOthersWithoutCallingGitHub() throws {
        let sim = try SearchEndToEndTests.Simulator(token: SearchEndToEndTests.token)
        let a = try node("a", sim: sim)
        let b = try node("b", sim: sim)
        let idB = try b.createSession()
        sim.sim.faults.primaryRateLimit = true
        let limitedA = try WireConnection.get(port: a.port, path: "/api/search/repositories?q=rust")
        XCTAssertTrue(limitedA.problem(503).contains("rate limit"))
        XCTAssertEqual(sim.sim.stats.requests, 1)
        // B never saw GitHub's 403, and its cache is empty: the shared budget refuses the call.
        let limitedB = try WireConnection.get(port: b.port, path: "/api/search/repositories?q=swift")
        XCTAssertTrue(limitedB.problem(503).contains("rate limit"))
        XCTAssertNotNil(limitedB.header("Retry-After").flatMap(Int.init))
        XCTAssertEqual(sim.sim.stats.requests, 1, "node B called GitHub during the block")
        // B's sessions show the block in `status`.
        try waitUntil("B's session shows the limit", within: 5) {
            let status = try b.state(idB)["viewModels"]?["status"]
            return status?["message"]?.stringValue?.contains("rate limit") == true
        }
    }

    func testAnOutageOrARateLimitSeenByOneNodeShowsInEveryNodesStatusWithoutItSearching() throws {
        let sim = try SearchEndToEndTests.Simulator(token: SearchEndToEndTests.token)
        let a = try node("a", sim: sim)
        let b = try node("b", sim: sim)
        let c = try node("c", sim: sim)
        let idB = try b.createSession()
        let idC = try c.createSession()
        func status(_ app: LiveApp, _ id: String) throws -> JSONValue? { try app.state(id)["viewModels"]?["status"] }
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
                return vms?["status"]?["message"]?.stringValue?.contains("rate limit") == true
                    && vms?["status"]?["reachable"] == true && vms?["search"]?["searchEnabled"] == false
                    && vms?["search"]?["retryAt"]?.stringValue != nil
            }
        }
        XCTAssertEqual(sim.sim.stats.requests, 2, "only node A called GitHub")
        // A session created after the report follows it too (the node's app-wide status).
        XCTAssertEqual(try status(c, try c.createSession())?["message"]?.stringValue?.contains("rate limit"), true)
    }

    func testIdenticalConcurrentSearchesOnThreeNodesCostOneUpstreamCall() throws {
        let sim = try SearchEndToEndTests.Simulator(token: SearchEndToEndTests.token)
        sim.sim.faults.latencyMs = 300  // the first call is still under way when the others ask
        let nodes = try ["a", "b", "c"].map { try node($0, sim: sim) }
        let answers = Mutex<[Int: WireResponse]>([:])
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
        // Later, another node's identical search is served from the shared cache.
        let d = try node("d", sim: sim)
        XCTAssertEqual(
            try WireConnection.get(port: d.port, path: "/api/search/repositories?q=language:swift").status, 200)
        XCTAssertEqual(sim.sim.stats.requests, 1)
    }
}
