import BFF
import Foundation
import Logging
import WireClient
import XCTest

/// "Fair use" through the cluster: GitHub's budget is shared fairly between clients across the nodes. Two
/// in-process nodes on one real `redis-server`, the GitHub simulator with the real 30 searches a minute;
/// clients on different loopback source addresses (all of 127/8 is loopback).
final class ClusterFairShareTests: ClusterTestCase {
    func searchNode(_ name: String, sim: SearchEndToEndTests.Simulator) throws -> LiveApp {
        try liveNode(name, sim: sim)
    }

    func search(_ node: LiveApp, _ q: String, from source: String) throws -> WireResponse {
        let conn = try WireConnection(port: node.port, timeout: 15, source: source)
        defer { conn.close() }
        return try conn.request("GET", "/api/search/repositories?q=\(q)&per_page=5")
    }

    /// A client alone sending uncached searches to both nodes is served GitHub's whole window: the shared
    /// bucket caps it only while another client asks.
    func testALoneClientOnBothNodesIsServedTheWholeWindow() throws {
        let sim = try SearchEndToEndTests.Simulator(token: SearchEndToEndTests.token, rateLimit: 30)
        let nodes = [try searchNode("a", sim: sim), try searchNode("b", sim: sim)]
        for i in 0..<30 {
            let r = try search(nodes[i % 2], "alone-\(i)", from: "127.0.0.2")
            XCTAssertEqual(r.status, 200, "search \(i + 1) of GitHub's 30: \(r.text)")
        }
        XCTAssertEqual(sim.sim.stats.requests, 30)
        XCTAssertEqual(
            try nodes.map { try counter($0, "bff_upstream_client_share_refusals_total") }.reduce(0, +), 0)
    }

    /// Once another client has asked (on one node), one client sending uncached searches to both nodes gets
    /// its share of the window once, summed over the nodes (each node alone would let it have its share:
    /// together, the whole window), and the other client's uncached searches still reach GitHub.
    func testOneClientFloodingBothNodesGetsItsShareOnceAndAnotherStillSearches() throws {
        let sim = try SearchEndToEndTests.Simulator(token: SearchEndToEndTests.token, rateLimit: 30)
        let nodes = [try searchNode("a", sim: sim), try searchNode("b", sim: sim)]
        XCTAssertEqual(try search(nodes[1], "other", from: "127.0.0.1").status, 200, "the other asks first")
        var served = [0, 0]
        var refusal: WireResponse?
        for i in 0..<30 {
            let r = try search(nodes[i % 2], "unique-\(i)", from: "127.0.0.2")
            if r.status == 200 { served[i % 2] += 1 } else if refusal == nil { refusal = r }
        }
        XCTAssertEqual(served.reduce(0, +), 15, "half of the window across both nodes (served \(served))")
        XCTAssertGreaterThan(served[0], 0, "node a never saw the other client: the share is cluster-wide")
        XCTAssertGreaterThan(served[1], 0)
        let r = try XCTUnwrap(refusal)
        XCTAssertTrue(r.problem(503).contains("your share"), r.text)
        XCTAssertGreaterThanOrEqual(Int(r.header("Retry-After") ?? "") ?? 0, 1)
        // The other client still reaches GitHub, through either node, in the same window.
        for i in 0..<6 {
            let r = try search(nodes[i % 2], "other-\(i)", from: "127.0.0.1")
            XCTAssertEqual(r.status, 200, "other-\(i): \(r.text)")
            XCTAssertEqual(r.header("X-Cache"), "miss")
        }
        XCTAssertEqual(sim.sim.stats.requests, 22, "1 + 15 + 6 upstream calls, no more")
        // An over-share refusal blocks nobody: the bucket itself refused nothing.
        for n in nodes {
            XCTAssertEqual(try counter(n, "bff_cluster_budget_refusals_total"), 0)
        }
        XCTAssertEqual(
            try nodes.map { try counter($0, "bff_upstream_client_share_refusals_total") }.reduce(0, +), 15,
            "each refusal counted once, on the node that answered it")
    }

    /// The flooder spent two thirds of the window alone through node a; the newcomer's first search, on
    /// node b, makes it share on both nodes (node a's own limiter never saw the newcomer: the bucket in Redis
    /// did), and everything left of the window is the newcomer's.
    func testANewcomerOnOneNodeCapsAClientThatSpentMostOfTheWindowAloneOnEveryNode() throws {
        let sim = try SearchEndToEndTests.Simulator(token: SearchEndToEndTests.token, rateLimit: 30)
        let nodes = [try searchNode("a", sim: sim), try searchNode("b", sim: sim)]
        for i in 0..<20 {
            XCTAssertEqual(try search(nodes[0], "flood-\(i)", from: "127.0.0.2").status, 200, "alone, search \(i + 1)")
        }
        XCTAssertEqual(try search(nodes[1], "other-0", from: "127.0.0.1").status, 200, "the newcomer")
        for i in 1..<10 {
            let refused = try search(nodes[i % 2], "flood-2\(i)", from: "127.0.0.2")
            XCTAssertTrue(refused.problem(503).contains("your share"), "node \(i % 2): \(refused.text)")
            let r = try search(nodes[(i + 1) % 2], "other-\(i)", from: "127.0.0.1")
            XCTAssertEqual(r.status, 200, "the newcomer's search \(i + 1): \(r.text)")
        }
        XCTAssertEqual(sim.sim.stats.requests, 30, "GitHub's whole window: 20 before the newcomer, 10 to it")
    }
}
