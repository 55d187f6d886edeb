import Foundation
import WireClient
import XCTest

@testable import BFF

/// The periodic checks of sessions streamed on a node: a session whose last check
/// named a live holder costs nothing of its own in Redis (one `MGET` per slice asks whether its holders
/// live); one whose holder is gone is checked one by one and taken over without a request; a node that shuts
/// down deletes its liveness keys, so the nodes streaming its sessions need not wait for them to expire.
final class ClusterStreamChecksTests: ClusterTestCase {
    func testSessionsOfALiveHolderAreNotCheckedOneByOneAndThoseOfADeadOneAreTakenOver() throws {
        let ttl = 1.0  // a check pass a second, in 10 slices; keys' expiry renewed once a minute
        let a = try node("a", leaseTTL: ttl)
        let b = try node("b", leaseTTL: ttl, threads: 1)
        let ids = try (0..<10).map { _ in try a.createSession() }
        var open: [WireConnection] = []
        defer { for c in open { c.close() } }
        for id in ids {
            let (conn, events) = try b.stream(id)
            open.append(conn)
            XCTAssertEqual(try events.next()?.event, "snapshot")
        }
        // Each session's first check names its holder (one of A's loops); from then on B's slices ask
        // whether those holders live. After ten of those asks (a whole pass) every session was checked once.
        let first = try calls("mget")
        try waitUntil("B asks whether A's loops live", within: 10) { try calls("mget") > first }
        let known = try calls("mget")
        try waitUntil("a whole pass", within: 10) { try calls("mget") >= known + 10 }
        let (hmgets, mgets) = (try calls("hmget"), try calls("mget"))
        try waitUntil("another whole pass", within: 10) { try calls("mget") >= mgets + 10 }
        XCTAssertEqual(try calls("hmget") - hmgets, 0, "no session checked one by one while its holder lives")
        XCTAssertEqual(try counter(b, "bff_cluster_takeovers_total"), 0)

        // "kill -9" in process: A's loops stop, its liveness keys expire after the lease TTL.
        a.app.server.shutdown(gracePeriod: 0)
        try waitUntil("B took every session over without a request", within: ttl + 4) {
            try counter(b, "bff_cluster_takeovers_total") >= ids.count
        }
        XCTAssertEqual(try name(b, ids[0], "bob").status, 202)
    }

    func testShutdownDeletesTheNodesLivenessKeys() throws {
        let a = try node("a")
        let b = try node("b")
        let id = try a.createSession()
        XCTAssertEqual(try name(a, id, "ann").status, 202)
        let (conn, events) = try a.stream(id)
        defer { conn.close() }
        XCTAssertEqual(try events.next()?.event, "snapshot")
        let (connB, eventsB) = try b.stream(id)
        defer { connB.close() }
        XCTAssertEqual(try eventsB.next()?.event, "snapshot")
        let holders = try XCTUnwrap(a.app.backend as? ClusterNode).holders
        func keysOfA() throws -> [String] {
            try redisCLI("KEYS", "bff:*live*").split(whereSeparator: \.isNewline).map(String.init).filter { key in
                holders.contains { key.hasSuffix(":" + $0) }
            }
        }
        let before = try keysOfA()
        XCTAssertTrue(before.contains { $0.contains(":live:") }, "A's liveness key: \(before)")
        XCTAssertTrue(before.contains { $0.contains(":slive:") }, "A's stream-liveness key: \(before)")
        a.app.shutdown()
        XCTAssertEqual(try keysOfA(), [], "deleted once A handed its sessions over")
        XCTAssertEqual(try name(b, id, "bob").status, 202, "B takes the session over")
    }
}
