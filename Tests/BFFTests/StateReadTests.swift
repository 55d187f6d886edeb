import JSON
import WireClient
import XCTest

@testable import BFF

/// `GET /state` is answered on the connection's loop from the snapshot the owner published: every
/// loop sees every change (read your writes), a deleted session is gone everywhere, and reads keep
/// the session alive.
final class StateReadTests: XCTestCase {
    func testEveryLoopReadsTheCurrentSnapshotWithoutTheOwner() throws {
        let t = try LiveApp { $0.http.threads = 2 }
        let id = try t.createSession()
        // Many connections: the kernel spreads them over both loops (SO_REUSEPORT).
        let connections = try (0..<16).map { _ in try WireConnection(port: t.port) }
        defer { for c in connections { c.close() } }
        func stateOnEvery() throws -> [JSONValue] {
            try connections.map { c in
                let r = try c.request("GET", "/api/sessions/\(id)/state")
                XCTAssertEqual(r.status, 200)
                XCTAssertEqual(r.header("Cache-Control"), "no-store")
                return try JSONValue.parse(r.body)
            }
        }
        for s in try stateOnEvery() { XCTAssertEqual(s["seq"]?.intValue, 0) }
        for (n, name) in ["ann", "", "bob"].enumerated() {
            let c = connections[n % connections.count]
            XCTAssertEqual(try t.post(id, "greeting", "name", #"{"value":"\#(name)"}"#, on: c).status, 202)
            for s in try stateOnEvery() {
                XCTAssertEqual(s["seq"]?.intValue, n + 1)
                XCTAssertEqual(s["viewModels"]?["greeting"]?["buttonEnabled"]?.boolValue, !name.isEmpty)
            }
        }
        XCTAssertEqual(try connections[0].request("DELETE", "/api/sessions/\(id)").status, 204)
        for c in connections { try c.request("GET", "/api/sessions/\(id)/state").problem(404) }
    }

    func testTheSnapshotIsEncodedOncePerChange() throws {
        let t = try LiveApp { $0.http.threads = 1 }
        let id = try t.createSession()
        _ = try t.state(id)
        let handle = try XCTUnwrap(
            t.app.loopSessions[0].directory.find(id, slot: 0, domain: t.app.env.hazards))
        let first = try XCTUnwrap(t.app.env.hazards.protect(handle.snapshot, slot: 0, as: EncodedSnapshot.self))
        _ = try t.state(id)
        let second = try XCTUnwrap(t.app.env.hazards.protect(handle.snapshot, slot: 0, as: EncodedSnapshot.self))
        XCTAssertTrue(first === second, "an unchanged snapshot was encoded again")
        XCTAssertEqual(try t.post(id, "greeting", "name", #"{"value":"x"}"#).status, 202)
        XCTAssertEqual(try t.state(id)["seq"]?.intValue, 1)
        let third = try XCTUnwrap(t.app.env.hazards.protect(handle.snapshot, slot: 0, as: EncodedSnapshot.self))
        XCTAssertEqual(third.seq, 1)
    }

    func testReadsOnAnyLoopKeepTheSessionAlive() throws {
        let t = try LiveApp {
            $0.http.threads = 2
            $0.sessionIdleTimeout = 0.6
        }
        let id = try t.createSession()
        let deadline = Date().addingTimeInterval(1.5)
        while Date() < deadline {
            _ = try t.state(id)  // a new connection each time: both loops read it
            usleep(100_000)  // pacing the reads below the idle timeout, not synchronisation
        }
        XCTAssertEqual(try WireConnection.get(port: t.port, path: "/api/sessions/\(id)/state").status, 200)
    }
}

final class SessionDirectoryTests: XCTestCase {
    func testInsertFindRemove() {
        let domain = HazardDomain(loops: 1)
        let directory = SessionDirectory(sessions: 10)
        var retired = RetiredList()
        let ids = (0..<40).map { _ in SessionID.make(loop: 0) }
        var listed: [SessionHandle] = []
        for id in ids {
            let h = SessionHandle(id: id, now: 0)
            if directory.insert(h) { listed.append(h) }
        }
        XCTAssertGreaterThan(listed.count, 30)  // 64 slots, 8 probes: nearly all fit
        for h in listed { XCTAssertTrue(directory.find(h.id, slot: 0, domain: domain) === h) }
        for h in listed.prefix(20) { directory.remove(h, retired: &retired, domain: domain) }
        for h in listed.prefix(20) { XCTAssertNil(directory.find(h.id, slot: 0, domain: domain)) }
        for h in listed.dropFirst(20) { XCTAssertTrue(directory.find(h.id, slot: 0, domain: domain) === h) }
        retired.reclaim(domain: domain)
        XCTAssertEqual(retired.count, 0)
        XCTAssertNil(directory.find(SessionID.make(loop: 0), slot: 0, domain: domain))
    }
}

/// Request metrics are counted per loop and merged when /metrics is read.
final class PerLoopMetricsTests: XCTestCase {
    func testCountsFromEveryLoopAreMerged() throws {
        let t = try LiveApp { $0.http.threads = 2 }
        for _ in 0..<20 { XCTAssertEqual(try WireConnection.get(port: t.port, path: "/healthz").status, 200) }
        let text = try WireConnection.get(port: t.port, path: "/metrics").text
        XCTAssertTrue(text.contains(#"http_requests_total{route="/healthz",method="GET",status="200"} 20"#), text)
        XCTAssertTrue(text.contains(#"http_request_duration_seconds_count{route="/healthz"} 20"#), text)
        XCTAssertTrue(text.contains(#"http_request_duration_seconds_bucket{route="/healthz",le="+Inf"} 20"#), text)
        XCTAssertEqual(text.components(separatedBy: "# TYPE http_requests_total counter").count, 2)
    }
}
