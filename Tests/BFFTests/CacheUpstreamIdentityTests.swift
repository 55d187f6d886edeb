import BFF
import Foundation
import GitHubSearch
import JSON
import Logging
import RedisTestSupport
import SearchApp
import WireClient
import XCTest

/// A cached page is valid for the upstream it came from (GitHub's base URL, and the token it was asked
/// with), in the SQLite file and in cluster mode's shared Redis cache: the simulator's repositories
/// (`scripts/run.sh --demo`) are never served as GitHub's, nor an anonymous page as a token's. Live:
/// `Application.live` on real sockets, the simulator over HTTP counting the calls it receives, a real
/// `redis-server`.
final class CacheUpstreamIdentityTests: ClusterTestCase {
    private let query = "/api/search/repositories?q=swift"
    private let token = "ghp_IDENTITY_TEST_SECRET_0123456789"

    private func app(
        baseURL: String, token: String? = nil, cachePath: String?, cluster: String? = nil, logs: LogCollector? = nil
    ) throws -> LiveApp {
        var c = AppConfiguration()
        c.http.port = 0
        c.http.threads = 1
        if let cluster { c.cluster = ClusterSettings(redisURL: redis.url, nodeID: cluster) }
        var g = GitHubSettings()
        g.baseURL = baseURL
        g.token = token
        g.cachePath = cachePath
        g.requestTimeout = 2
        var quiet = Logger(label: "identity")
        quiet.logLevel = .error
        let app = try LiveApp(
            app: Application.live(configuration: c, github: g, logger: logs?.logger(level: .info) ?? quiet))
        if cluster != nil {
            try waitUntil("ready", within: 10) {
                (try? WireConnection.get(port: app.port, path: "/readyz").status) == 200
            }
        }
        return app
    }

    /// A folder of this test's own, removed afterwards.
    private func folder() throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("bff-identity-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: url) }
        return url.path
    }

    func testACacheFileFilledAgainstTheSimulatorIsNotServedForAnotherUpstreamOrWithAToken() throws {
        let sim = try SearchEndToEndTests.Simulator(token: token)
        let file = try folder() + "/search-cache.sqlite"
        var simulated: [UInt8] = []
        do {  // `run.sh --demo`: filled from the simulator, then stopped (the file is flushed at shutdown)
            let demo = try app(baseURL: sim.url, cachePath: file)
            let r = try WireConnection.get(port: demo.port, path: query)
            XCTAssertEqual(r.header("X-Cache"), "miss")
            simulated = r.body
        }
        XCTAssertEqual(sim.sim.stats.requests, 1)
        do {  // the same upstream again: the file serves it (the cache still works across restarts)
            let again = try app(baseURL: sim.url, cachePath: file)
            let r = try WireConnection.get(port: again.port, path: query)
            XCTAssertEqual(r.header("X-Cache"), "hit")
            XCTAssertEqual(r.body, simulated)
        }
        do {  // `run.sh` against a GitHub that is down: nothing cached for it, so no simulator page as a hit
            let logs = LogCollector()
            let real = try app(baseURL: "http://127.0.0.1:9", cachePath: file, logs: logs)
            let r = try WireConnection.get(port: real.port, path: query)
            XCTAssertEqual(r.status, 503, "the simulator's page was served for another upstream: \(r)")
            XCTAssertNotEqual(r.header("X-Cache"), "hit")
            XCTAssertNotEqual(r.body, simulated)
            XCTAssertTrue(logs.all.contains("written for another upstream"), logs.all)
            XCTAssertTrue(logs.all.contains("http://127.0.0.1:9 (token: no)"), logs.all)
        }
        do {  // the simulator's base URL again, with a token: GitHub answers differently, so a miss
            let withToken = try app(baseURL: sim.url, token: token, cachePath: file)
            let r = try WireConnection.get(port: withToken.port, path: query)
            XCTAssertEqual(r.status, 200)
            XCTAssertEqual(r.header("X-Cache"), "miss")
        }
        XCTAssertEqual(sim.sim.stats.authenticated, 1, "the token's search reached the simulator")
        // The token is in no byte of the cache file (nor its WAL), in clear.
        for suffix in ["", "-wal"] {
            let bytes = (try? Data(contentsOf: URL(fileURLWithPath: file + suffix))) ?? Data()
            XCTAssertNil(bytes.range(of: Data(token.utf8)), "the token is in \(file + suffix)")
        }
    }

    func testTheSharedRedisCacheServesNoPageOfAnotherUpstreamOrToken() throws {
        let simA = try SearchEndToEndTests.Simulator(token: token)
        let simB = try SearchEndToEndTests.Simulator(token: token)
        let a = try app(baseURL: simA.url, cachePath: nil, cluster: "a")
        XCTAssertEqual(try WireConnection.get(port: a.port, path: query).header("X-Cache"), "miss")
        XCTAssertEqual(simA.sim.stats.requests, 1)

        // Same upstream on another node: the shared cache answers (the point of it).
        let a2 = try app(baseURL: simA.url, cachePath: nil, cluster: "a2")
        XCTAssertEqual(try WireConnection.get(port: a2.port, path: query).status, 200)
        XCTAssertEqual(simA.sim.stats.requests, 1)
        XCTAssertEqual(try sharedCache(a2, "hit"), 1)

        // Another base URL: its own call, its own answer.
        let b = try app(baseURL: simB.url, cachePath: nil, cluster: "b")
        XCTAssertEqual(try WireConnection.get(port: b.port, path: query).status, 200)
        XCTAssertEqual(simB.sim.stats.requests, 1, "served simulator A's page for B's upstream")
        XCTAssertEqual(try sharedCache(b, "hit"), 0)
        XCTAssertEqual(try sharedCache(b, "miss"), 1)

        // The first base URL with a token: a miss too.
        let t = try app(baseURL: simA.url, token: token, cachePath: nil, cluster: "t")
        XCTAssertEqual(try WireConnection.get(port: t.port, path: query).status, 200)
        XCTAssertEqual(simA.sim.stats.requests, 2, "served the anonymous page for a token")
        XCTAssertEqual(simA.sim.stats.authenticated, 1)
        XCTAssertEqual(try sharedCache(t, "miss"), 1)

        // Three upstreams, three entries; no key names the token.
        let keys = try redisCLI(["--scan", "--pattern", "bff:c:*"]).split(separator: "\n").filter {
            !$0.hasSuffix(":lock")
        }
        XCTAssertEqual(keys.count, 3, "\(keys)")
        XCTAssertFalse(keys.contains { $0.contains(token) })
    }

    /// `bff_cluster_search_cache_total{outcome=…}` of `app`.
    private func sharedCache(_ app: LiveApp, _ outcome: String) throws -> Int {
        let name = #"bff_cluster_search_cache_total{outcome="\#(outcome)"}"#
        let text = String(decoding: try WireConnection.get(port: app.port, path: "/metrics").body, as: UTF8.self)
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Int(Double(line.dropFirst(name.count + 1)) ?? -1)
        }
        return 0
    }

    private func redisCLI(_ arguments: [String]) throws -> String {
        try Spawn.run("/usr/bin/redis-cli", ["-p", "\(redis.port)"] + arguments).output
    }
}
