import EventHTTP
import Foundation
import Glibc
import JSON
import RedisTestSupport
import WireClient
import XCTest

/// A network partition, with real network namespaces: node A (a `bff` process in a namespace of its own,
/// `--lease-ttl 0.5`) reaches Redis over one veth pair and its clients over another; node B runs in the
/// test's namespace. The Redis link is set down and up again: A stops acknowledging (its input is `503`,
/// never `202`), B takes the session over once A's lease ran out, the commit A had sent into the cut link
/// reaches Redis when the link is back and is refused (`FENCED`: B's fencing token is newer), and nothing
/// acknowledged is lost (the inputs' numbers are 1, 2, 3; a stream shows each once, the fenced one never).
/// Skipped, with the reason, where namespaces cannot be made (not root, no `ip`).
final class ClusterPartitionTests: XCTestCase {
    private var bff: String { ChildProcess.buildFolder + "/bff" }

    func testANodeCutOffFromRedisStopsAcknowledgingIsFencedWhenItComesBackAndLosesNothing() throws {
        let (net, redis) = try partition()
        defer {
            redis.kill()
            net.remove()
        }
        let flags = ["--lease-ttl", "0.5"]
        let a = try nodeA(in: net, redis: redis, flags)
        let b = try ChildProcess(
            bff, Self.flags + flags + ["--redis-url", redis.url, "--node-id", "b"], environment: Self.environment)
        let portA = try XCTUnwrap(a.waitForPort(marker: "bff listening"), a.stderrText)
        let portB = try XCTUnwrap(b.waitForPort(marker: "bff listening"), b.stderrText)
        let (hostA, hostB) = (net.nodeAddress, "127.0.0.1")
        for (host, port) in [(hostA, portA), (hostB, portB)] {
            try waitUntil("\(host):\(port) ready", within: 10) {
                (try? WireConnection(host: host, port: port).request("GET", "/readyz").status) == 200
            }
        }
        let created = try WireConnection(host: hostA, port: portA).request("POST", "/api/sessions")
        let id = try XCTUnwrap(JSONValue.parse(created.body)["id"]?.stringValue)  // A runs it
        let stream = try StreamCollector(id, port: portB)
        defer { stream.stop() }
        XCTAssertEqual(Self.query(hostA, portA, id, "one", key: "k1")?.status, 202)
        XCTAssertTrue(stream.delivers(inputSeq: 1, within: 5))
        let fencedBefore = fencedErrors(redis)

        try net.redisLink(up: false)
        let cutAt = Date()
        // A runs the session: its commit of this input goes into the cut link (no key: straight to the commit).
        let zombie = Lock<WireResponse?>(nil)
        let zombieDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let r = Self.query(hostA, portA, id, "zombie", key: nil)
            zombie.withLock { $0 = r }
            zombieDone.signal()
        }
        usleep(50_000)
        // B takes the session over once A's lease ran out (0.5 s) and acknowledges the next input.
        var second: WireResponse?
        try waitUntil("B acknowledges while A is cut off", within: 10) {
            second = Self.query(hostB, portB, id, "two", key: "k2")
            return second?.status == 202
        }
        XCTAssertEqual(inputSeq(second), 2, "the number after the last acknowledged one")
        // The link comes back while A's commit is still being retransmitted (its next try, 1.4 s after it
        // was first sent, comes before its 2 s command time-out).
        let wait = 0.9 - Date().timeIntervalSince(cutAt)
        if wait > 0 { usleep(UInt32(wait * 1e6)) }
        try net.redisLink(up: true)
        XCTAssertEqual(zombieDone.wait(timeout: .now() + 10), .success)
        XCTAssertNotEqual(zombie.withLock { $0 }?.status, 202, "A never acknowledges while cut off")
        try waitUntil("Redis refused A's late commit (FENCED)", within: 10) { fencedErrors(redis) > fencedBefore }
        let metricsA = try WireConnection(host: hostA, port: portA).request("GET", "/metrics")
        XCTAssertTrue(String(decoding: metricsA.body, as: UTF8.self).contains("bff_cluster_fenced_total 1"), "A knows")

        // A, back, forwards to B; nothing acknowledged was lost, the fenced input never applied.
        var third: WireResponse?
        try waitUntil("A serves again", within: 10) {
            third = Self.query(hostA, portA, id, "three", key: "k3")
            return third?.status == 202
        }
        XCTAssertEqual(inputSeq(third), 3)
        XCTAssertTrue(stream.delivers(inputSeq: 3, within: 5))
        XCTAssertEqual(stream.inputSeqs, [1, 2, 3], "each acknowledged input once, in order")
        XCTAssertFalse(stream.all.contains { $0.data.contains("zombie") }, "the fenced input is nowhere")
        let state = try WireConnection.get(port: portB, path: "/api/sessions/\(id)/state")
        XCTAssertEqual(try JSONValue.parse(state.body)["viewModels"]?["search"]?["query"], "three")
    }

    /// A cut link is told from a slow Redis by what TCP saw: A's Redis link is cut
    /// with commands waiting on it (an input's commit, the lease renewals), so the kernel sends them again
    /// and no ACK comes. After the command time-out A resets the connection, says why (the retransmissions,
    /// the last ACK), and `/readyz` is `503`; once the link is back A connects again and is ready. A Redis
    /// that is only slow or stopped keeps its connection instead (`RedisCommandTimeoutTests`).
    func testANodeCutOffFromRedisResetsItsConnectionOnWhatTCPSawAndIsReadyOnceTheLinkIsBack() throws {
        let (net, redis) = try partition()
        defer {
            redis.kill()
            net.remove()
        }
        let a = try nodeA(in: net, redis: redis, [])
        defer { a.send(SIGKILL) }
        let port = try XCTUnwrap(a.waitForPort(marker: "bff listening"), a.stderrText)
        func ready() -> Int? { try? WireConnection(host: net.nodeAddress, port: port).request("GET", "/readyz").status }
        try waitUntil("A ready", within: 10) { ready() == 200 }
        let created = try WireConnection(host: net.nodeAddress, port: port).request("POST", "/api/sessions")
        let id = try XCTUnwrap(JSONValue.parse(created.body)["id"]?.stringValue)

        try net.redisLink(up: false)
        let cutAt = Date()
        let input = Self.query(net.nodeAddress, port, id, "into the cut", key: "k1")
        XCTAssertNotEqual(input?.status, 202, "not acknowledged while cut off")
        try waitUntil("A resets its connection on what TCP saw", within: 10) {
            a.stderrText.contains("retransmissions, last ACK") && a.stderrText.contains("redis connection down")
        }
        let resetAfter = Date().timeIntervalSince(cutAt)
        let line = a.stderrText.split(whereSeparator: \.isNewline).first { $0.contains("retransmissions, last ACK") }
        print("partition: reset after \(resetAfter) s: \(line ?? "")")
        XCTAssertFalse(line?.contains(" 0 retransmissions") ?? true, "the kernel sent again: \(line ?? "")")
        XCTAssertLessThan(resetAfter, 8, "after the command time-out (2 s), not the silence's ten")
        // Read every quarter second (`ClusterNode.healthInterval`): unready on the next reading.
        try waitUntil("A unready while it reaches no Redis", within: 1) { ready() == 503 }

        try net.redisLink(up: true)
        try waitUntil("A ready once the link is back", within: 15) { ready() == 200 }
    }

    private static let flags = ["--port", "0", "--threads", "1", "--cache-file", "none"]
    private static let environment = ["GITHUB_API_URL": "http://127.0.0.1:9", "LOG_LEVEL": "warning"]

    /// A network namespace and a Redis that listens on its Redis link; the test is skipped, with the
    /// reason, where namespaces cannot be made. The caller removes and kills them.
    private func partition() throws -> (NetworkPartition, RedisServerProcess) {
        let net: NetworkPartition
        do { net = try NetworkPartition() } catch { throw XCTSkip("no network namespaces here: \(error)") }
        do {
            let redis = try RedisServerProcess(extraArguments: [
                "--bind", "127.0.0.1", net.redisAddress, "--protected-mode", "no",
            ])
            return (net, redis)
        } catch {
            net.remove()
            throw error
        }
    }

    /// Node A, in the namespace: its clients reach it on the client link, it reaches Redis on the other.
    private func nodeA(in net: NetworkPartition, redis: RedisServerProcess, _ flags: [String]) throws -> ChildProcess {
        let (program, arguments) = net.command(
            bff,
            Self.flags + flags + [
                "--host", net.nodeAddress, "--redis-url", "redis://\(net.redisAddress):\(redis.port)", "--node-id", "a",
            ])
        return try ChildProcess(program, arguments, environment: Self.environment)
    }

    /// `POST …/search/query {"value": value}` (with `key` as `Idempotency-Key`); nil without an answer.
    private static func query(_ host: String, _ port: Int, _ id: String, _ value: String, key: String?)
        -> WireResponse?
    {
        guard let c = try? WireConnection(host: host, port: port, timeout: 5) else { return nil }
        defer { c.close() }
        return try? c.request(
            "POST", "/api/sessions/\(id)/search/query",
            headers: [("Content-Type", "application/json")] + (key.map { [("Idempotency-Key", $0)] } ?? []),
            body: Array(#"{"value":"\#(value)"}"#.utf8))
    }

    /// Errors Redis answered with `FENCED` so far (`INFO errorstats`).
    private func fencedErrors(_ redis: RedisServerProcess) -> Int {
        let line = redis.cli("INFO", "errorstats").split(whereSeparator: \.isNewline).first {
            $0.hasPrefix("errorstat_FENCED:")
        }
        return line.flatMap { Int($0.split(separator: "=").last?.prefix { $0.isNumber } ?? "") } ?? 0
    }

    private func inputSeq(_ r: WireResponse?) -> Int? {
        r.flatMap { (try? JSONValue.parse($0.body))?["inputSeq"]?.intValue }
    }
}
