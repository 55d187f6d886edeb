import EventHTTP
import JSON
import WireClient
import XCTest

@testable import BFF

/// "Fair use" through the cluster: two real nodes on one real Redis, a client whose creations go to both
/// (as a load balancer would send them) gets its per-client limits once across the cluster, not once per
/// node, while another client creates sessions throughout.
class ClusterFairUseTests: ClusterTestCase {
    private func fairNode(_ name: String, _ limits: @escaping (inout AppConfiguration) -> Void) throws -> LiveApp {
        let app = try LiveApp { c in
            c.cluster = ClusterSettings(redisURL: self.redisURL, nodeID: name, leaseTTL: 10)
            limits(&c)
        }
        try waitUntil("\(name) ready", within: 10) {
            (try? WireConnection.get(port: app.port, path: "/readyz").status) == 200
        }
        return app
    }

    private func create(_ t: LiveApp, from source: String) throws -> WireResponse {
        let c = try WireConnection(port: t.port, source: source)
        defer { c.close() }
        return try c.request("POST", "/api/sessions")
    }

    func testLiveSessionsOfAClientAreCountedAcrossNodes() throws {
        let nodes = try ["a", "b"].map { name in try fairNode(name) { $0.maxSessionsPerClient = 4 } }
        var ids: [String] = []
        for i in 0..<4 {
            let r = try create(nodes[i % 2], from: "127.0.0.2")
            XCTAssertEqual(r.status, 201, "creation \(i)")
            ids.append(try XCTUnwrap(r.json?["id"]?.stringValue))
        }
        // Each node ran two: within its own limit of four, but the client holds four in the cluster.
        for node in nodes {
            XCTAssertTrue(try create(node, from: "127.0.0.2").problem(429).contains("maximum of 4 live sessions"))
        }
        for node in nodes { XCTAssertEqual(try create(node, from: "127.0.0.3").status, 201, "another client") }
        // Deleted at the other node than the one running it: the client gets its place back on both.
        XCTAssertEqual(try WireConnection(port: nodes[1].port).request("DELETE", "/api/sessions/\(ids[0])").status, 204)
        try waitUntil("the deleted session no longer counts", within: 5) {
            (try? self.create(nodes[1], from: "127.0.0.2").status) == 201
        }
        XCTAssertEqual(try create(nodes[0], from: "127.0.0.2").status, 429, "four again")
    }

    func testTheCreationRateOfAClientIsOneBucketAcrossNodes() throws {
        let nodes = try ["a", "b"].map { name in
            try fairNode(name) {
                $0.clientSessionRate = 0.05
                $0.clientSessionBurst = 3
            }
        }
        var statuses: [Int] = []
        var refused: WireResponse?
        for i in 0..<6 {
            let r = try create(nodes[i % 2], from: "127.0.0.2")
            statuses.append(r.status)
            if r.status != 201, refused == nil { refused = r }
            // The other client, in between on the other node, within its own burst.
            if i % 3 == 0 { XCTAssertEqual(try create(nodes[(i + 1) % 2], from: "127.0.0.3").status, 201) }
        }
        // Per node the burst of 3 would have let all six through (three on each).
        XCTAssertEqual(statuses, [201, 201, 201, 429, 429, 429])
        let r = try XCTUnwrap(refused)
        XCTAssertTrue(r.problem(429).contains("--client-session-rate"))
        XCTAssertGreaterThanOrEqual(Int(r.header("Retry-After") ?? "") ?? 0, 10)
        let metrics = try WireConnection.get(port: nodes[1].port, path: "/metrics").text
        XCTAssertTrue(metrics.contains(#"bff_client_session_refusals_total{limit="rate"} "#))
    }

    func testAClientsSessionsInRedisExpireAndLeaveWhenTheyEnd() throws {
        let node = try fairNode("a") { $0.maxSessionsPerClient = 2 }
        let first = try XCTUnwrap(try create(node, from: "127.0.0.2").json?["id"]?.stringValue)
        // The client's live set in Redis holds exactly its session, with an expiry.
        let members = try redisCLI("ZRANGE", "bff:cl:{127.0.0.2}:live", "0", "-1")
        XCTAssertEqual(members.split(whereSeparator: \.isNewline).map(String.init), [first])
        let ttl = Int(try redisCLI("PTTL", "bff:cl:{127.0.0.2}:live").trimmingCharacters(in: .whitespacesAndNewlines))
        XCTAssertNotNil(ttl)
        XCTAssertGreaterThan(ttl ?? 0, 0)
        XCTAssertLessThanOrEqual(ttl ?? .max, Int(3 * ClusterNode.clientRefreshInterval * 1000) + 1000)
        XCTAssertEqual(try WireConnection(port: node.port).request("DELETE", "/api/sessions/\(first)").status, 204)
        try waitUntil("the ended session left the client's set", within: 5) {
            (try? self.redisCLI("ZCARD", "bff:cl:{127.0.0.2}:live").trimmingCharacters(in: .whitespacesAndNewlines))
                == "0"
        }
    }

    func testEveryLoopsRefreshReachesTheClientsOfEveryMaster() throws {
        let node = try fairNode("a") { $0.maxSessionsPerClient = 5 }
        let cluster = try XCTUnwrap(node.app.backend as? ClusterNode)
        // Thirty clients: on a Redis Cluster their keys fall on every master.
        let clients = (2..<32).map { "127.0.0.\($0)" }
        var ids: [String: String] = [:]
        for c in clients { ids[c] = try XCTUnwrap(try create(node, from: c).json?["id"]?.stringValue) }
        // Pull every deadline in to 5 s from now (Redis's clock), then refresh: each must be pushed back out.
        let now = try XCTUnwrap(Int(try redisCLI("TIME").split(whereSeparator: \.isNewline).first ?? ""))
        for c in clients {
            _ = try redisCLI("ZADD", "bff:cl:{\(c)}:live", "XX", "\(now * 1000 + 5000)", ids[c]!)
        }
        for i in cluster.clients.indices {
            let done = expectation(description: "loop \(i) refreshed")
            cluster.clients[i].loop.execute {
                cluster.refreshClientCounts(loop: i) { ok in
                    XCTAssertTrue(ok)
                    done.fulfill()
                }
            }
            wait(for: [done], timeout: 10)
        }
        for c in clients {
            let score = try redisCLI("ZSCORE", "bff:cl:{\(c)}:live", ids[c]!).trimmingCharacters(
                in: .whitespacesAndNewlines)
            XCTAssertGreaterThan(Double(score) ?? 0, Double(now * 1000 + 50_000), "client \(c)")
        }
    }
}

/// ClusterFairUseTests (per-client limits counted across nodes; the refresh reaching every master) on the
/// shared Redis Cluster.
final class ClusterFairUseOnRedisClusterTests: ClusterFairUseTests {
    override class var deployment: RedisDeployment { .cluster }

    override func testLiveSessionsOfAClientAreCountedAcrossNodes() throws {
        try super.testLiveSessionsOfAClientAreCountedAcrossNodes()
    }

    override func testTheCreationRateOfAClientIsOneBucketAcrossNodes() throws {
        try super.testTheCreationRateOfAClientIsOneBucketAcrossNodes()
    }

    override func testAClientsSessionsInRedisExpireAndLeaveWhenTheyEnd() throws {
        try super.testAClientsSessionsInRedisExpireAndLeaveWhenTheyEnd()
    }

    override func testEveryLoopsRefreshReachesTheClientsOfEveryMaster() throws {
        try super.testEveryLoopsRefreshReachesTheClientsOfEveryMaster()
    }
}
