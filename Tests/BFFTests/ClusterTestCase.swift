import Foundation
import GitHubSearch
import JSON
import Logging
import RedisTestSupport
import SearchApp
import WireClient
import XCTest

@testable import BFF

/// What the in-process cluster suites share: a real `redis-server` per test (free port) — or, in the
/// topology suites (`deployment` overridden), the shared Redis Cluster or Sentinel set (`SharedRedis`) —,
/// nodes (`Application`s on 127.0.0.1:0 in cluster mode) returned once `/readyz` says ready, and the
/// input helpers. Has no tests of its own.
///
/// XCTest on Linux finds only the test methods a class declares itself: a topology suite runs a suite's
/// tests again by overriding each one (`ClusterTopologySuites.swift`); a test added to such a suite is
/// added there too.
class ClusterTestCase: XCTestCase {
    var redis: RedisServerProcess!

    /// The Redis this class's nodes share (`.standalone`: one `redis-server` per test).
    class var deployment: RedisDeployment { .standalone }

    override func setUpWithError() throws {
        if Self.deployment == .standalone {
            redis = try RedisServerProcess()
        } else {
            try prepareSharedDeployment()
        }
    }

    override func tearDown() {
        redis?.kill()
        redis = nil
    }

    func node(
        _ name: String, leaseTTL: Double = 10, search: any RepositorySearching = UnexpectedSearch(),
        idleTimeout: Double? = nil, threads: Int? = nil, commandTimeout: Double? = nil, logger: Logger? = nil,
        url: String? = nil, clock: SessionClock = .monotonic, cluster: (inout ClusterSettings) -> Void = { _ in },
        configure: (inout AppConfiguration) -> Void = { _ in }
    ) throws -> LiveApp {
        let url = url ?? redisURL
        let app = try LiveApp(search: search, logger: logger, clock: clock) { c in
            configure(&c)
            c.cluster = ClusterSettings(redisURL: url, nodeID: name, leaseTTL: leaseTTL)
            if c.cluster != nil { cluster(&c.cluster!) }
            if let idleTimeout { c.sessionIdleTimeout = idleTimeout }
            if let threads { c.http.threads = threads }
            if let commandTimeout { c.cluster?.redis.commandTimeout = commandTimeout }
        }
        try waitUntil("\(name) ready", within: 10) {
            (try? WireConnection.get(port: app.port, path: "/readyz").status) == 200
        }
        return app
    }

    /// A node composed as `bff` composes it (`Application.live`): the cluster's status board, shared GitHub
    /// budget and search cache, and the test hook's status through the board. GitHub is an address nothing
    /// listens on: these tests make no search. `probing: false` turns the subscription connections' loopback
    /// probe off (an `SPUBLISH` every second per connection), for a test that counts the `SPUBLISH`es of
    /// something else.
    func composedNode(_ name: String, threads: Int = 1, probing: Bool = true) throws -> LiveApp {
        var c = AppConfiguration()
        c.http.port = 0
        c.http.threads = threads
        c.testHooks = true
        c.clientSessionRate = 1_000_000
        c.clientSessionBurst = 1_000_000
        c.maxSessionsPerClient = 1_000_000
        c.cluster = ClusterSettings(redisURL: redisURL, nodeID: name, leaseTTL: 10)
        if !probing { c.cluster?.clientOptions.probeInterval = nil }
        var github = GitHubSettings()
        github.baseURL = "http://127.0.0.1:9"
        github.cachePath = nil
        var quiet = Logger(label: "test")
        quiet.logLevel = .warning
        let app = try LiveApp(app: Application.live(configuration: c, github: github, logger: quiet))
        try waitUntil("\(name) ready", within: 10) {
            (try? WireConnection.get(port: app.port, path: "/readyz").status) == 200
        }
        return app
    }

    func name(_ app: LiveApp, _ id: String, _ value: String, key: String? = nil) throws -> WireResponse {
        try app.post(
            id, "greeting", "name", #"{"value":"\#(value)"}"#, headers: key.map { [("Idempotency-Key", $0)] } ?? [])
    }

    func greet(_ app: LiveApp, _ id: String) throws -> WireResponse { try app.post(id, "greeting", "greet") }

    func label(_ app: LiveApp, _ id: String) throws -> JSONValue? {
        try app.state(id)["viewModels"]?["greeting"]?["label"]
    }

    /// The node's `/metrics` text.
    func metrics(_ app: LiveApp) throws -> String {
        String(decoding: try WireConnection.get(port: app.port, path: "/metrics").body, as: UTF8.self)
    }

    /// Calls of `command` Redis has run so far, scripts' commands included (`INFO commandstats`; summed
    /// over the masters).
    func calls(_ command: String) throws -> Int {
        var total = 0
        for port in try masterPorts() {
            let text = try runCLI(port: port, ["INFO", "commandstats"])
            for line in text.split(whereSeparator: \.isNewline) where line.hasPrefix("cmdstat_\(command):calls=") {
                total += Int(line.dropFirst("cmdstat_\(command):calls=".count).prefix { $0.isNumber }) ?? 0
            }
        }
        return total
    }

    /// Runs `redis-cli` against the test's Redis (which must exit 0), where the command applies
    /// (`deploymentCLI`); its output.
    func redisCLI(_ args: String...) throws -> String { try deploymentCLI(args) }

    /// The value of the sample `name` (with its labels) in `app`'s `/metrics`; 0 when absent.
    func counter(_ app: LiveApp, _ name: String) throws -> Int {
        let text = String(decoding: try WireConnection.get(port: app.port, path: "/metrics").body, as: UTF8.self)
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Int(Double(line.dropFirst(name.count + 1)) ?? -1)
        }
        return 0
    }

    func inputSeq(_ r: WireResponse) -> Int? { (try? JSONValue.parse(r.body))?["inputSeq"]?.intValue }
}
