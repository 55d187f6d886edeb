import EventHTTP
import Foundation
import Glibc
import RedisClient
import WireClient
import XCTest

@testable import BFF

/// Admission control: while a node's Redis connection is busy, new sessions and streams are
/// refused at once with `503` + `Retry-After`, before anything is sent, so the work already admitted keeps
/// its room; once Redis catches up they are served again.
final class ClusterAdmissionTests: ClusterTestCase {
    func testNewWorkIsRefusedAtOnceWhileRedisIsBusyAndServedAfter() throws {
        let a = try node("a", threads: 1, commandTimeout: 10) { $0.admissionInFlight = 2 }
        let id = try firstSession(on: a)
        var resumed = false
        defer { if !resumed { redis.signal(SIGCONT) } }
        let (waiting, answers) = try stopRedisWithTwoCreationsWaiting(on: a, key: id)
        // The next creation and a stream are refused without waiting for Redis.
        try assertBusyAtOnce(a, "POST", "/api/sessions")
        let stream = try WireConnection(port: a.port, timeout: 20).request("GET", "/api/sessions/\(id)/events")
        XCTAssertTrue(stream.problem(503).contains("busy"), stream.text)
        redis.signal(SIGCONT)
        resumed = true
        XCTAssertEqual(waiting.wait(timeout: .now() + 20), .success)
        XCTAssertEqual(answers.withLock { $0 }, [201, 201], "the work admitted before was served")
        try waitUntil("creations served again", within: 10) {
            try WireConnection(port: a.port).request("POST", "/api/sessions").status == 201
        }
        let metrics = try WireConnection.get(port: a.port, path: "/metrics").text
        let refusals = metrics.split(separator: "\n").first { $0.hasPrefix("bff_cluster_admission_refusals_total ") }
        XCTAssertGreaterThanOrEqual(Double(refusals?.split(separator: " ").last ?? "") ?? 0, 2)
    }

    /// A delete is admitted like a creation: while the connection is busy it is refused at once with `503`
    /// + `Retry-After`, nothing done (the session and its stream stay as they were), and served after.
    func testADeleteIsRefusedAtOnceWhileRedisIsBusyAndServedAfter() throws {
        let a = try node("a", threads: 1, commandTimeout: 10) { $0.admissionInFlight = 2 }
        let id = try firstSession(on: a)
        let doomed = try a.createSession()
        var resumed = false
        defer { if !resumed { redis.signal(SIGCONT) } }
        let (waiting, _) = try stopRedisWithTwoCreationsWaiting(on: a, key: id)
        try assertBusyAtOnce(a, "DELETE", "/api/sessions/\(doomed)")
        redis.signal(SIGCONT)
        resumed = true
        XCTAssertEqual(waiting.wait(timeout: .now() + 20), .success)
        XCTAssertEqual(try a.state(doomed)["seq"], 0, "the refused delete changed nothing")
        try waitUntil("deletes served again", within: 10) {
            try WireConnection(port: a.port).request("DELETE", "/api/sessions/\(doomed)").status == 204
        }
        XCTAssertEqual(try WireConnection(port: a.port).request("GET", "/api/sessions/\(doomed)/state").status, 404)
    }

    /// Commits queued behind a batch in flight count as waiting work: with Redis stopped, one input's
    /// commit is on the connection and two more wait in the store for its answer (group commit); the
    /// connection holds one command, but a creation is refused at once, and every input is acknowledged
    /// once Redis continues.
    func testCommitsQueuedBehindABatchInFlightCountForAdmission() throws {
        let a = try node("a", threads: 1, commandTimeout: 10) { $0.admissionInFlight = 3 }
        let id = try firstSession(on: a)
        let cluster = try XCTUnwrap(a.app.backend as? ClusterNode)
        let key = cluster.keys.session(id)
        try waitUntil("the connection is idle", within: 10) { self.inFlight(cluster, key: key) == 0 }
        redis.signal(SIGSTOP)
        var resumed = false
        defer { if !resumed { redis.signal(SIGCONT) } }
        let waiting = DispatchGroup()
        let answers = Lock<[Int]>([])
        func post(_ value: String) {
            waiting.enter()
            Thread.detachNewThread {
                let status =
                    (try? WireConnection(port: a.port, timeout: 20).request(
                        "POST", "/api/sessions/\(id)/greeting/name", headers: [("Content-Type", "application/json")],
                        body: Array("{\"value\":\"\(value)\"}".utf8)))?.status
                answers.withLock { $0.append(status ?? 0) }
                waiting.leave()
            }
        }
        post("a")
        try waitUntil("the first commit is on the connection", within: 10) { self.inFlight(cluster, key: key) == 1 }
        post("b")
        post("c")
        try waitUntil("two commits wait behind it", within: 10) { self.queued(cluster, key: key) == 2 }
        XCTAssertEqual(inFlight(cluster, key: key), 1, "the connection holds the first batch only")
        let started = Date()
        let refused = try WireConnection(port: a.port, timeout: 20).request("POST", "/api/sessions")
        XCTAssertLessThan(Date().timeIntervalSince(started), 1, "answered before any Redis round trip")
        XCTAssertTrue(refused.problem(503).contains("busy"), refused.text)
        redis.signal(SIGCONT)
        resumed = true
        XCTAssertEqual(waiting.wait(timeout: .now() + 20), .success)
        XCTAssertEqual(answers.withLock { $0 }, [202, 202, 202], "every input acknowledged")
    }

    /// Commits loop 0's store holds for the master of `key`, behind its batch in flight (read on that loop).
    func queued(_ cluster: ClusterNode, key: String) -> Int {
        let store = cluster.stores[0]
        let n = Lock(0)
        let done = DispatchSemaphore(value: 0)
        store.loop.execute {
            n.withLock { $0 = store.commitsWaiting(key: key) }
            done.signal()
        }
        done.wait()
        return n.withLock { $0 }
    }

    /// A session created on `a`, retried until `201`: at start the node loads its scripts on the connection,
    /// and with a small `admissionInFlight` a creation meanwhile is refused.
    /// Stops Redis (`SIGSTOP`: it takes commands and answers none) and starts two creations on `a`, which
    /// wait on its one connection (to the master of session `key`) until Redis continues; returns once both
    /// are on the connection, with what tells when they are answered and their statuses. The caller sends
    /// `SIGCONT`.
    func stopRedisWithTwoCreationsWaiting(on a: LiveApp, key id: String) throws -> (DispatchGroup, Lock<[Int]>) {
        redis.signal(SIGSTOP)
        let waiting = DispatchGroup()
        let answers = Lock<[Int]>([])
        for _ in 0..<2 {
            waiting.enter()
            Thread.detachNewThread {
                let status = (try? WireConnection(port: a.port, timeout: 20).request("POST", "/api/sessions"))?.status
                answers.withLock { $0.append(status ?? 0) }
                waiting.leave()
            }
        }
        let cluster = try XCTUnwrap(a.app.backend as? ClusterNode)
        try waitUntil("two commands wait on the connection", within: 10) {
            self.inFlight(cluster, key: cluster.keys.session(id)) >= 2
        }
        return (waiting, answers)
    }

    /// `method path` on `a` is answered `503` "busy" with `Retry-After: 1` within a second: before any
    /// Redis round trip (Redis is stopped).
    func assertBusyAtOnce(_ a: LiveApp, _ method: String, _ path: String, line: UInt = #line) throws {
        let started = Date()
        let refused = try WireConnection(port: a.port, timeout: 20).request(method, path)
        XCTAssertLessThan(Date().timeIntervalSince(started), 1, "answered before any Redis round trip", line: line)
        XCTAssertTrue(refused.problem(503, line: line).contains("busy"), refused.text, line: line)
        XCTAssertEqual(refused.header("Retry-After"), "1", line: line)
    }

    func firstSession(on a: LiveApp) throws -> String {
        var created: WireResponse?
        try waitUntil("a session created", within: 10) {
            created = try WireConnection(port: a.port).request("POST", "/api/sessions")
            return created?.status == 201
        }
        return try XCTUnwrap(created?.json?["id"]?.stringValue)
    }

    /// Commands loop 0's connection to the master of `key` has outstanding (read on that loop).
    func inFlight(_ cluster: ClusterNode, key: String) -> Int {
        let client = cluster.clients[0]
        let n = Lock(0)
        let done = DispatchSemaphore(value: 0)
        client.loop.execute {
            n.withLock { $0 = client.commandsInFlight(key: RedisArg(key)) }
            done.signal()
        }
        done.wait()
        return n.withLock { $0 }
    }
}
