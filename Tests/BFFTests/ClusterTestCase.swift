import Foundation
import GitHubSearch
import JSON
import Logging
import RedisTestSupport
import WireClient
import XCTest

@testable import BFF

/// What the in-process cluster suites share: a real `redis-server` per test (free port), nodes
/// (`Application`s on 127.0.0.1:0 in cluster mode) returned once `/readyz` says ready, and the input
/// helpers. Has no tests of its own.
class ClusterTestCase: XCTestCase {
    var redis: RedisServerProcess!

    override func setUpWithError() throws {
        redis = try RedisServerProcess()
    }

    override func tearDown() {
        redis?.kill()
        redis = nil
    }

    func node(
        _ name: String, leaseTTL: Double = 10, search: any RepositorySearching = UnexpectedSearch(),
        idleTimeout: Double? = nil, threads: Int? = nil, commandTimeout: Double? = nil, logger: Logger? = nil
    ) throws -> LiveApp {
        let url = redis.url
        let app = try LiveApp(search: search, logger: logger) { c in
            c.cluster = ClusterSettings(redisURL: url, nodeID: name, leaseTTL: leaseTTL)
            if let idleTimeout { c.sessionIdleTimeout = idleTimeout }
            if let threads { c.http.threads = threads }
            if let commandTimeout { c.cluster?.redis.commandTimeout = commandTimeout }
        }
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

    /// Calls of `command` Redis has run so far, scripts' commands included (`INFO commandstats`).
    func calls(_ command: String) throws -> Int {
        let port = String(redis.url.split(separator: ":").last ?? "")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["redis-cli", "-p", port, "INFO", "commandstats"]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        for line in text.split(whereSeparator: \.isNewline) where line.hasPrefix("cmdstat_\(command):calls=") {
            let digits = line.dropFirst("cmdstat_\(command):calls=".count).prefix { $0.isNumber }
            return Int(digits) ?? 0
        }
        return 0
    }

    /// Runs `redis-cli` against the test's server (which must exit 0); its output.
    func redisCLI(_ args: String...) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/redis-cli")
        p.arguments = ["-p", "\(redis.port)"] + args
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0)
        return String(decoding: data, as: UTF8.self)
    }

    func inputSeq(_ r: WireResponse) -> Int? { (try? JSONValue.parse(r.body))?["inputSeq"]?.intValue }
}
