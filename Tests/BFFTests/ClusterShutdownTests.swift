import Foundation
import Glibc
import JSON
import RedisTestSupport
import WireClient
import XCTest

/// `SIGTERM` of an owner while a client posts keyed inputs to another node in a tight loop (real `bff`
/// processes, one real `redis-server`, `--lease-ttl 10`: the forward time-out is 2 s). The node posted to
/// forwards each input to the owner until the owner hands the session over; an input forwarded just
/// before the hand-over must still be answered at once (the stopping node answers `503`, "moved", until
/// Redis has confirmed the unsubscribe of the session's input channel, and flushes those answers before
/// its loops stop), never after the forward time-out. Every `202` is the next `inputSeq` (applied exactly
/// once). Five owners are stopped in turn (a new node joins after each), so the window is actually hit.
final class ClusterShutdownTests: XCTestCase {
    private var bff: String { ChildProcess.buildFolder + "/bff" }

    private func startNode(redis: RedisServerProcess, name: String) throws -> (ChildProcess, Int) {
        let p = try ChildProcess(
            bff,
            [
                "--port", "0", "--threads", "1", "--cache-file", "none", "--redis-url", redis.url, "--node-id", name,
                "--lease-ttl", "10", "--input-rate", "100000", "--input-burst", "100000",
            ],
            environment: ["GITHUB_API_URL": "http://127.0.0.1:9", "LOG_LEVEL": "warning"])
        let port = try XCTUnwrap(p.waitForPort(marker: "bff listening"), "bff printed no port: \(p.stderrText)")
        let deadline = Date().addingTimeInterval(10)
        while (try? WireConnection.get(port: port, path: "/readyz").status) != 200 {
            if Date() > deadline {
                XCTFail("\(name) not ready")
                break
            }
            usleep(20_000)
        }
        return (p, port)
    }

    func testAnInputForwardedToAStoppingOwnerIsAnsweredAtOnceAndAppliedOnce() throws {
        let redis = try RedisServerProcess()
        defer { redis.kill() }
        var (owner, ownerPort) = try startNode(redis: redis, name: "n0")
        var (other, otherPort) = try startNode(redis: redis, name: "n1")
        defer {
            owner.send(SIGKILL)
            other.send(SIGKILL)
        }
        // Four sessions, each with its own client, so that inputs are in flight whenever the owner stops.
        var clients: [TightClient] = []
        for _ in 0..<4 {
            let created = try WireConnection.post(port: ownerPort, path: "/api/sessions", body: [])
            XCTAssertEqual(created.status, 201)
            let id = try XCTUnwrap(JSONValue.parse(created.body)["id"]?.stringValue)
            let client = TightClient(sessionID: id, port: otherPort)
            clients.append(client)
            Thread { client.run() }.start()
        }
        defer { for c in clients { c.stop() } }
        func acks() -> [Int] { clients.map(\.acks) }
        func waitForMore(_ before: [Int], _ what: String) {
            for (c, n) in zip(clients, before) {
                XCTAssertTrue(c.waitForAcks(n + 3, within: 10), "\(what): \(c.result)")
            }
        }
        let rounds = 5
        for round in 1...rounds {
            // Inputs reach the owner through the other node before the signal.
            waitForMore(acks(), "round \(round): forwarding works")
            let signalled = Date()
            owner.send(SIGTERM)
            XCTAssertEqual(owner.waitForExit(timeout: 10), 0, "round \(round): the owner exits cleanly")
            print("cluster SIGTERM round \(round): exited after \(Date().timeIntervalSince(signalled)) s")
            // The other node took the sessions over: inputs go on being acknowledged.
            waitForMore(acks(), "round \(round): taken over")
            if round == rounds { break }
            // A new node joins; the clients post there, and the node they posted to so far (the owner now)
            // is the next one stopped.
            let (joined, joinedPort) = try startNode(redis: redis, name: "n\(round + 1)")
            (owner, ownerPort) = (other, otherPort)
            (other, otherPort) = (joined, joinedPort)
            for c in clients { c.setPort(otherPort) }
        }
        for c in clients { c.stop() }
        for c in clients {
            XCTAssertTrue(c.waitForStop(within: 10), "the client finished its last input")
            let r = c.result
            print(
                "cluster SIGTERM x\(rounds): \(r.acks) inputs acknowledged, \(r.attempts) attempts, "
                    + "\(r.refusals) answered 503, slowest answer \(String(format: "%.1f", r.slowest * 1000)) ms")
            XCTAssertTrue(r.errors.isEmpty, "\(r.errors)")
            XCTAssertLessThan(r.slowest, 1.0, "every answer well under the forward time-out (2 s)")
            // The next input on the surviving owner gets the next number: nothing was applied twice.
            let next = try WireConnection(port: otherPort).request(
                "POST", "/api/sessions/\(c.sessionID)/greeting/name",
                headers: [("Content-Type", "application/json"), ("Idempotency-Key", "last")],
                body: Array(#"{"value":"last"}"#.utf8))
            XCTAssertEqual(next.status, 202)
            XCTAssertEqual(try JSONValue.parse(next.body)["inputSeq"]?.intValue, r.acks + 1)
        }
    }
}

/// One client thread posting keyed inputs (`k1`, `k2`, …) one after the other to a port that the test may
/// change, retrying an input with its key after a `503` until it is acknowledged. Checks as it goes that
/// input i is acknowledged with `inputSeq` i, and times every answer.
private final class TightClient: @unchecked Sendable {
    struct Result {
        var acks = 0
        var attempts = 0
        var refusals = 0
        var slowest = 0.0
        var errors: [String] = []
    }

    private let lock = NSCondition()
    let sessionID: String
    private var port: Int
    private var stopping = false
    private var stopped = false
    private var state = Result()

    init(sessionID: String, port: Int) {
        self.sessionID = sessionID
        self.port = port
    }

    var acks: Int { locked { state.acks } }
    var result: Result { locked { state } }

    func setPort(_ p: Int) { locked { port = p } }

    func stop() { locked { stopping = true } }

    func waitForAcks(_ n: Int, within seconds: Double) -> Bool {
        wait(within: seconds) { self.state.acks >= n }
    }

    func waitForStop(within seconds: Double) -> Bool { wait(within: seconds) { self.stopped } }

    func run() {
        var i = 1
        var connection: (port: Int, c: WireConnection)?
        while !locked({ stopping }) {
            let target = locked { port }
            if let open = connection, open.port != target {
                open.c.close()
                connection = nil
            }
            let started = Date()
            var status = 0
            var seq: Int?
            do {
                let c = try connection?.c ?? WireConnection(port: target, timeout: 10)
                connection = (target, c)
                let r = try c.request(
                    "POST", "/api/sessions/\(sessionID)/greeting/name",
                    headers: [("Content-Type", "application/json"), ("Idempotency-Key", "k\(i)")],
                    body: Array(#"{"value":"n\#(i)"}"#.utf8))
                status = r.status
                seq = try? JSONValue.parse(r.body)["inputSeq"]?.intValue
                if status != 202 && status != 503 {
                    record { $0.errors.append("input \(i): \(r.status) \(String(decoding: r.body, as: UTF8.self))") }
                }
            } catch {
                connection?.c.close()
                connection = nil
                record { $0.errors.append("input \(i) to port \(target): \(error)") }
            }
            let seconds = Date().timeIntervalSince(started)
            record { s in
                s.attempts += 1
                s.slowest = max(s.slowest, seconds)
                if status == 503 { s.refusals += 1 }
                if status == 202 {
                    if seq != i { s.errors.append("input \(i) acknowledged as \(seq.map(String.init) ?? "?")") }
                    s.acks += 1
                }
            }
            if status == 202 { i += 1 }
            if status == 0 { usleep(10_000) }  // not reachable (an error already recorded): do not spin
        }
        connection?.c.close()
        lock.lock()
        stopped = true
        lock.broadcast()
        lock.unlock()
    }

    private func locked<T>(_ body: () -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }

    private func record(_ body: (inout Result) -> Void) {
        lock.lock()
        body(&state)
        lock.broadcast()
        lock.unlock()
    }

    private func wait(within seconds: Double, until condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        lock.lock()
        defer { lock.unlock() }
        while !condition() {
            if !lock.wait(until: deadline) { return condition() }
        }
        return true
    }
}
