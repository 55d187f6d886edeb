import ClusterRedis
import Foundation
import JSON
import RedisTestSupport
import WireClient
import XCTest

/// `bff session-owner` on every `--redis-url` form the nodes take: a session on each master of a Redis
/// Cluster (its key and its holder's liveness key on the master of the session's slot) and behind a
/// Sentinel set is reported with its owner, and an error Redis answered is reported as that error, not as
/// Redis being unreachable. The single-Redis form is `CommandLineTests`.
class SessionOwnerOnRedisClusterTests: ClusterTestCase {
    override class var deployment: RedisDeployment { .cluster }
    private var bff: String { ChildProcess.buildFolder + "/bff" }

    /// Runs `bff session-owner --json` for `id` with `url`: its exit status, report and standard error.
    private func owner(_ id: String, url: String) throws -> (code: Int32?, report: JSONValue?, stderr: String) {
        let p = try ChildProcess(bff, ["session-owner", "--redis-url", url, "--json", "--", id])
        let code = p.waitForExit(timeout: 15)
        let line = p.waitForLine(containing: "{", timeout: 1)
        return (code, try line.map { try JSONValue.parse(Array($0.utf8)) }, p.stderrText)
    }

    func testTheOwnerOfASessionOnEveryMasterIsNamed() throws {
        let a = try node("alpha")
        defer { withExtendedLifetime(a) {} }
        let masters = Set(try masterPorts())
        let keys = ClusterKeys(prefix: "bff")
        // Sessions until every master holds one (ids are random: their slots spread).
        var byMaster: [Int: String] = [:]
        for _ in 0..<200 where byMaster.count < masters.count {
            let id = try a.createSession()
            byMaster[try masterPort(of: keys.session(id))] = id
        }
        XCTAssertEqual(Set(byMaster.keys), masters, "a session on every master")
        for (port, id) in byMaster.sorted(by: { $0.key < $1.key }) {
            let (code, report, stderr) = try owner(id, url: redisURL)
            XCTAssertEqual(code, 0, stderr)
            XCTAssertEqual(report?["exists"], true)
            XCTAssertEqual(report?["owner"], "alpha", "the session on master \(port) is held by alpha")
            XCTAssertGreaterThan(report?["leaseExpiresInMs"]?.intValue ?? 0, 0)
            XCTAssertEqual(report?["seq"], 0)
        }
        XCTAssertEqual(try owner("no-such-session", url: redisURL).code, 1)
    }

    func testAnErrorRedisAnsweredIsNamedAsItsAnswer() throws {
        let a = try node("alpha")
        defer { withExtendedLifetime(a) {} }
        let keys = ClusterKeys(prefix: "bff")
        let id = try a.createSession()
        let holder = try masterPort(of: keys.session(id))
        let other = try XCTUnwrap(try masterPorts().first { $0 != holder })
        // One shard's own address as a single Redis: it answers MOVED for the session's key.
        let (code, _, stderr) = try owner(id, url: "redis://127.0.0.1:\(other)")
        XCTAssertEqual(code, 69)
        XCTAssertTrue(stderr.contains("answered with an error"), stderr)
        XCTAssertTrue(stderr.contains("MOVED"), stderr)
        XCTAssertFalse(stderr.contains("not reachable"), stderr)
    }
}

/// `bff session-owner` through a Sentinel set (`redis+sentinel://`): it asks the sentinels for the master.
final class SessionOwnerOnSentinelTests: ClusterTestCase {
    override class var deployment: RedisDeployment { .sentinel }
    private var bff: String { ChildProcess.buildFolder + "/bff" }

    func testTheOwnerIsNamedThroughTheSentinels() throws {
        let a = try node("alpha")
        defer { withExtendedLifetime(a) {} }
        let id = try a.createSession()
        let p = try ChildProcess(bff, ["session-owner", "--redis-url", redisURL, "--json", "--", id])
        XCTAssertEqual(p.waitForExit(timeout: 15), 0, p.stderrText)
        let line = try XCTUnwrap(p.waitForLine(containing: "{", timeout: 1))
        let report = try JSONValue.parse(Array(line.utf8))
        XCTAssertEqual(report["owner"], "alpha")
        XCTAssertEqual(report["fencingToken"], 1)
    }
}
