import Foundation
import JSON
import WireClient
import XCTest

@testable import BFF

/// The contract's unused session (no input, no stream: `--unused-session-timeout`) in cluster mode: its
/// owner ends it and it is gone from Redis too, for every node; a session streamed on another node is not
/// unused, and its owner hands it over instead (as before this rule, when every unused session stayed in
/// Redis for the idle time-out and a later request brought it back).
final class ClusterUnusedSessionTests: ClusterTestCase {
    /// Runs the owner's expiry sweep until `a` counts `count` sessions ended as unused.
    func expireUnused(_ a: LiveApp, count: Int) throws {
        try waitUntil("\(count) unused session(s) ended", within: 10) {
            let swept = DispatchSemaphore(value: 0)
            a.app.expireIdleSessionsNow { swept.signal() }
            swept.wait()
            return try counter(a, "bff_sessions_ended_total{reason=\"unused\"}") >= count
        }
    }

    /// Waits until `a` has handed `count` leases over (the owner's decision to keep a session it found
    /// unused here, once Redis answered).
    func handedOver(_ a: LiveApp, count: Int) throws {
        try waitUntil("\(count) lease(s) handed over", within: 10) {
            return try counter(a, "bff_cluster_hand_overs_total") >= count
        }
    }

    /// Whether session `id` counts against its client (127.0.0.1, the tests' address) in the cluster's ledger.
    func counted(_ id: String) throws -> Bool {
        let score = try redisCLI("ZSCORE", "bff:cl:{127.0.0.1}:live", id)
        return !score.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
    }

    func testAnUnusedSessionIsGoneFromEveryNode() throws {
        let a = try node("a", configure: { $0.unusedSessionTimeout = 0.2 })
        let b = try node("b")
        let id = try a.createSession()
        let cluster = try XCTUnwrap(a.app.backend as? ClusterNode)
        XCTAssertEqual(
            try redisCLI("EXISTS", cluster.keys.session(id)).trimmingCharacters(in: .whitespacesAndNewlines), "1")
        XCTAssertEqual(try counted(id), true)
        try expireUnused(a, count: 1)
        try waitUntil("deleted in Redis", within: 10) {
            try WireConnection.get(port: b.port, path: "/api/sessions/\(id)/state").status == 404
        }
        XCTAssertEqual(try WireConnection.get(port: a.port, path: "/api/sessions/\(id)/state").status, 404)
        for key in [cluster.keys.session(id), cluster.keys.events(id)] {
            XCTAssertEqual(try redisCLI("EXISTS", key).trimmingCharacters(in: .whitespacesAndNewlines), "0", key)
        }
        let input = try name(b, id, "late")
        XCTAssertEqual(input.status, 404, "not brought back by a later request")
        XCTAssertEqual(try counted(id), false, "its client's count dropped")
    }

    /// Streamed on B (the stream then closed), never an input: used, so the owner's unused sweep hands
    /// it over and it lives on; an input at B is served.
    func testASessionStreamedElsewhereIsNotUnused() throws {
        let a = try node("a", configure: { $0.unusedSessionTimeout = 0.2 })
        let b = try node("b")
        let id = try a.createSession()
        do {
            let (conn, events) = try b.stream(id)
            XCTAssertEqual(try events.next()?.event, "snapshot")
            conn.close()
        }
        try expireUnused(a, count: 1)
        try handedOver(a, count: 1)
        XCTAssertEqual(try counted(id), true, "handed over, not ended: still counted against its client")
        XCTAssertEqual(try WireConnection.get(port: b.port, path: "/api/sessions/\(id)/state").status, 200)
        let input = try name(b, id, "still here")
        XCTAssertEqual(input.status, 202)
        XCTAssertEqual(inputSeq(input), 1)
    }

    /// A stream open on B that was admitted without the `used` mark (by a node of the version before it):
    /// the owner sees the stream in the session's set of open streams and does not delete the session.
    func testAnOpenStreamKeepsASessionWithoutTheUsedMark() throws {
        let a = try node("a", configure: { $0.unusedSessionTimeout = 0.2 })
        let b = try node("b")
        let id = try a.createSession()
        let (conn, events) = try b.stream(id)
        defer { conn.close() }
        XCTAssertEqual(try events.next()?.event, "snapshot")
        let cluster = try XCTUnwrap(a.app.backend as? ClusterNode)
        XCTAssertEqual(
            try redisCLI("HDEL", cluster.keys.session(id), "used").trimmingCharacters(in: .whitespacesAndNewlines), "1")
        try expireUnused(a, count: 1)
        try handedOver(a, count: 1)
        XCTAssertEqual(try WireConnection.get(port: b.port, path: "/api/sessions/\(id)/state").status, 200)
        XCTAssertEqual(try name(b, id, "watched").status, 202)
        var sawInput = false
        while let e = try events.next() {
            if e.event == "greeting" {
                sawInput = true
                break
            }
        }
        XCTAssertTrue(sawInput, "the open stream goes on")
    }
    /// A client only reading the session (`GET /state`, on its owner and on another node) does not use
    /// it: only inputs and streams do (the contract's "Fair use"). Polled all along, it is still ended as
    /// unused and deleted from Redis, not handed over.
    func testASessionOnlyReadIsStillUnusedAndDeleted() throws {
        let a = try node("a", configure: { $0.unusedSessionTimeout = 1 })
        let b = try node("b")
        let id = try a.createSession()
        try waitUntil("the owner found it unused", within: 10) {
            XCTAssertEqual(try WireConnection.get(port: b.port, path: "/api/sessions/\(id)/state").status, 200)
            XCTAssertEqual(try WireConnection.get(port: a.port, path: "/api/sessions/\(id)/state").status, 200)
            let swept = DispatchSemaphore(value: 0)
            a.app.expireIdleSessionsNow { swept.signal() }
            swept.wait()
            return try counter(a, "bff_sessions_ended_total{reason=\"unused\"}") == 1
        }
        try waitUntil("deleted in Redis", within: 10) {
            try WireConnection.get(port: b.port, path: "/api/sessions/\(id)/state").status == 404
        }
        XCTAssertEqual(try counter(a, "bff_cluster_hand_overs_total"), 0, "deleted, not handed over")
        XCTAssertEqual(try counted(id), false, "its client's count dropped")
    }
}
