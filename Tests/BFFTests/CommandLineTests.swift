import Foundation
import Glibc
import JSON
import RedisTestSupport
import WireClient
import XCTest

/// What a new user and an operator meet first, on the real `bff` executable: `--version`, `--help`,
/// the start-up log, an unknown API path, and `bff session-owner` against a real cluster.
final class CommandLineTests: XCTestCase {
    private var bff: String { ChildProcess.buildFolder + "/bff" }

    func testVersionIsPrintedAndExitsZero() throws {
        let p = try ChildProcess(bff, ["--version"])
        XCTAssertEqual(p.waitForExit(timeout: 10), 0, p.stderrText)
        XCTAssertNotNil(p.waitForLine(containing: "bff 1.0.0", timeout: 5))
    }

    func testHelpListsEveryEnvironmentVariableTheDefaultsAndTheSubcommand() throws {
        let help = try output(of: ["--help"])
        for text in [
            "Environment: HOST (like --host), PORT (like --port)", "REDIS_URL (like --redis-url)",
            "NODE_ID (like --node-id)", "GITHUB_TOKEN", "LOG_LEVEL (like --log-level)", "default: 127.0.0.1",
            "default: 8080", "bff session-owner ID --redis-url URL", "the default --max-connections shrinks to fit",
        ] {
            XCTAssertTrue(help.contains(text), "--help lacks '\(text)'")
        }
        XCTAssertTrue(try output(of: ["session-owner", "--help"]).contains("USAGE: bff session-owner <id>"))
    }

    /// Everything `bff arguments` writes on stdout, its lines joined by single spaces (help text wraps at
    /// the terminal's width); fails unless it exits 0.
    private func output(of arguments: [String]) throws -> String {
        let r = try Spawn.run(bff, arguments)
        XCTAssertEqual(r.status, 0, "bff \(arguments)")
        return r.output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    /// A start under a low open-file limit logs nothing about `--max-connections` at the default level
    /// (`--help` says it once); with `--log-level debug` the fitted value is there.
    func testTheFittedMaxConnectionsIsNoNoticeOnEveryStart() throws {
        let prlimit = "/usr/bin/prlimit"
        guard FileManager.default.isExecutableFile(atPath: prlimit) else { throw XCTSkip("no prlimit") }
        for (level, shown) in [("info", false), ("debug", true)] {
            let p = try ChildProcess(
                prlimit,
                [
                    "--nofile=1000:1000", bff, "--port", "0", "--cache-file", "none", "--threads", "1", "--log-level",
                    level,
                ])
            XCTAssertNotNil(p.waitForPort(marker: "listening on"), p.stderrText)
            p.send(SIGTERM)
            XCTAssertEqual(p.waitForExit(timeout: 10), 0)
            XCTAssertEqual(p.stderrText.contains("max-connections"), shown, "\(level): \(p.stderrText)")
        }
    }

    func testAnUnknownAPIPathIsNoMissingFile() throws {
        let p = try ChildProcess(bff, ["--port", "0", "--cache-file", "none", "--threads", "1"])
        defer { p.send(SIGKILL) }
        let port = try XCTUnwrap(p.waitForPort(marker: "listening on"), p.stderrText)
        let nope = try WireConnection.get(port: port, path: "/api/nope")
        XCTAssertEqual(nope.status, 404)
        XCTAssertEqual(nope.header("Content-Type"), "application/problem+json")
        XCTAssertEqual(try JSONValue.parse(nope.body)["detail"], "no API route matches GET /api/nope")
        // the test hook is an API route that does not exist without --test-hooks (it was a 405 of the files)
        let hook = try WireConnection(port: port).request("POST", "/api/_test/status", body: Array("{}".utf8))
        XCTAssertEqual(try JSONValue.parse(hook.body)["detail"], "no API route matches POST /api/_test/status")
        XCTAssertEqual(hook.status, 404)
        let wrongMethod = try WireConnection.get(port: port, path: "/api/sessions")
        XCTAssertEqual(wrongMethod.status, 405)
        XCTAssertEqual(wrongMethod.header("Allow"), "POST")
        XCTAssertEqual(try WireConnection.get(port: port, path: "/").status, 200, "files are still served")
    }

    /// `bff session-owner` names the node holding the lease, sees a hand-over (no owner) and the next
    /// owner, says when a session does not exist (exit 1) and when Redis is not there (exit 69), and
    /// never prints the Redis password.
    func testSessionOwnerNamesTheNodeHoldingTheLease() throws {
        let redis = try RedisServerProcess()
        defer { redis.kill() }
        func node(_ name: String) throws -> (ChildProcess, Int) {
            let p = try ChildProcess(
                bff,
                [
                    "--port", "0", "--threads", "1", "--cache-file", "none", "--lease-ttl", "1", "--redis-url",
                    redis.url,
                    "--node-id",
                    name,
                ],
                environment: ["GITHUB_API_URL": "http://127.0.0.1:9", "LOG_LEVEL": "warning"])
            let port = try XCTUnwrap(p.waitForPort(marker: "listening on"), p.stderrText)
            // Listening comes before Redis is connected: a stream opened then is refused (503).
            try waitUntil("\(name) ready", within: 10) {
                (try? WireConnection.get(port: port, path: "/readyz").status) == 200
            }
            return (p, port)
        }
        let (a, portA) = try node("alpha")
        defer { a.send(SIGKILL) }
        let (b, portB) = try node("beta")
        defer { b.send(SIGKILL) }
        let created = try WireConnection.post(port: portA, path: "/api/sessions", body: [])
        let id = try XCTUnwrap(JSONValue.parse(created.body)["id"]?.stringValue)
        let stream = try WireConnection(port: portB)
        let (head, events) = try stream.openEventStream("/api/sessions/\(id)/events")
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(try events.next()?.event, "snapshot")

        func owner(_ id: String, url: String? = nil) throws -> (Int32?, JSONValue?, ChildProcess) {
            let p = try ChildProcess(bff, ["session-owner", "--redis-url", url ?? redis.url, "--json", "--", id])
            let code = p.waitForExit(timeout: 10)
            let line = p.waitForLine(containing: "{", timeout: 1)
            return (code, try line.map { try JSONValue.parse(Array($0.utf8)) }, p)
        }
        let (code, report, _) = try owner(id)
        XCTAssertEqual(code, 0)
        XCTAssertEqual(report?["owner"], "alpha", "the creating node holds the lease")
        XCTAssertEqual(report?["fencingToken"], 1)
        XCTAssertEqual(report?["streams"]?.arrayValue?.first?["node"], "beta", "the open stream is on beta")
        XCTAssertGreaterThan(report?["leaseExpiresInMs"]?.intValue ?? 0, 0)

        let text = try ChildProcess(bff, ["session-owner", "--", id], environment: ["REDIS_URL": redis.url])
        XCTAssertEqual(text.waitForExit(timeout: 10), 0)
        XCTAssertNotNil(text.waitForLine(containing: "owner alpha (lease holder alpha#", timeout: 1))

        // SIGTERM hands the leases over. The streamed session is taken over by beta, which streams it; the
        // other one has no owner until its next input, which beta then runs.
        let idle = try XCTUnwrap(
            JSONValue.parse(try WireConnection.post(port: portA, path: "/api/sessions", body: []).body)["id"]?
                .stringValue)
        XCTAssertEqual(try owner(idle).1?["owner"], "alpha")
        a.send(SIGTERM)
        XCTAssertEqual(a.waitForExit(timeout: 10), 0)
        XCTAssertEqual(try owner(idle).1?["owner"], .null)
        let takenBy = Date().addingTimeInterval(15)
        while try owner(id).1?["owner"] != "beta" && Date() < takenBy { usleep(100_000) }
        XCTAssertEqual(try owner(id).1?["fencingToken"], 2, "beta took the streamed session over")
        let input = try WireConnection(port: portB).request(
            "POST", "/api/sessions/\(idle)/greeting/name", headers: [("Content-Type", "application/json")],
            body: Array(#"{"value":"x"}"#.utf8))
        XCTAssertEqual(input.status, 202)
        let after = try owner(idle).1
        XCTAssertEqual(after?["owner"], "beta")
        XCTAssertEqual(after?["fencingToken"], 2)
        XCTAssertEqual(after?["inputSeq"], 1)

        let (missing, missingReport, _) = try owner("no-such-session")
        XCTAssertEqual(missing, 1)
        XCTAssertEqual(missingReport?["exists"], false)

        let secret = "s3cr3t-pw"
        let (down, _, process) = try owner(id, url: "redis://:\(secret)@127.0.0.1:\(ChildProcess.freePort())")
        XCTAssertEqual(down, 69)
        XCTAssertTrue(process.stderrText.contains("not reachable"), process.stderrText)
        XCTAssertFalse(process.stderrText.contains(secret))
    }
}
