import Foundation
import Glibc
import JSON
import RedisTestSupport
import WireClient
import XCTest

/// HTTP/2 at the edge: the shipped `deploy/haproxy.cfg` with a certificate (`scripts/make-cert.sh`)
/// terminates TLS, offers `h2` by ALPN, and carries a browser's multiplexed event stream and its inputs
/// over one HTTP/2 connection to two real cluster nodes on HTTP/1.1. The client is `curl --http2`.
final class ClusterHAProxyHTTP2Tests: XCTestCase {
    private static let haproxy = "/usr/sbin/haproxy"
    private static let curl = "/usr/bin/curl"

    /// Runs curl with `args`; its standard output (it must exit 0 within `timeout`, unless `allowTimeout`).
    private func curl(_ args: [String], timeout: Double = 10, allowTimeout: Bool = false) throws -> String {
        let out = NSTemporaryDirectory() + "curl-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: out) }
        let p = try ChildProcess(Self.curl, ["-sk", "--http2", "-o", out] + args)
        let code = p.waitForExit(timeout: timeout)
        if code == nil {
            p.send(SIGKILL)
            XCTAssertTrue(allowTimeout, "curl \(args) did not finish: \(p.stderrText)")
        } else if !allowTimeout || code != 28 {
            XCTAssertEqual(code, 0, "curl \(args): \(p.stderrText)")
        }
        return (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
    }

    func testBrowsersGetHTTP2WithTheirMultiplexedStreamThroughTheShippedConfig() throws {
        for tool in [Self.haproxy, Self.curl] where !FileManager.default.isExecutableFile(atPath: tool) {
            throw XCTSkip("\(tool) is not installed")
        }
        let certs = NSTemporaryDirectory() + "certs-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: certs) }
        let make = try ChildProcess("/bin/bash", [ChildProcess.packageRoot + "/scripts/make-cert.sh", certs])
        XCTAssertEqual(make.waitForExit(timeout: 30), 0, make.stderrText)

        let redis = try RedisServerProcess()
        defer { redis.kill() }
        let ports = (0..<3).map { _ in ChildProcess.freePort() }
        var nodes: [ChildProcess] = []
        for (i, port) in ports.enumerated() {
            let p = try ChildProcess(
                ChildProcess.buildFolder + "/bff",
                [
                    "--port", "\(port)", "--threads", "1", "--cache-file", "none", "--redis-url", redis.url,
                    "--node-id", "node\(i + 1)",
                ], environment: ["GITHUB_API_URL": "http://127.0.0.1:9", "LOG_LEVEL": "warning"])
            XCTAssertNotNil(p.waitForLine(containing: "bff listening"), p.stderrText)
            nodes.append(p)
        }
        defer { for n in nodes { n.send(SIGKILL) } }
        let (plain, tls) = (ChildProcess.freePort(), ChildProcess.freePort())
        let proxy = try ChildProcess(
            Self.haproxy, ["-f", ChildProcess.packageRoot + "/deploy/haproxy.cfg"],
            environment: [
                "BFF_NODE1": "127.0.0.1:\(ports[0])", "BFF_NODE2": "127.0.0.1:\(ports[1])",
                "BFF_NODE3": "127.0.0.1:\(ports[2])", "HAPROXY_BIND": "127.0.0.1:\(plain)",
                "HAPROXY_TLS_BIND": "127.0.0.1:\(tls)", "HAPROXY_CERT": certs + "/bff.pem",
                "HAPROXY_STATS_BIND": "127.0.0.1:\(ChildProcess.freePort())",
            ])
        defer { proxy.send(SIGKILL) }
        try waitUntil("HAProxy serves the ready nodes", within: 15) {
            (try? WireConnection.get(port: plain, path: "/readyz").status) == 200
        }
        let base = "https://127.0.0.1:\(tls)"
        // ALPN picks h2.
        let version = try ChildProcess(
            Self.curl, ["-sk", "--http2", "-o", "/dev/null", "-w", "%{http_version}", base + "/"])
        XCTAssertEqual(version.waitForExit(timeout: 10), 0)
        XCTAssertEqual(version.waitForLine(containing: "2", timeout: 2), "2", "HTTP/2 through the TLS frontend")

        // Two tabs' sessions, created over h2; their multiplexed stream over h2 delivers both snapshots
        // and an input's event.
        var ids: [String] = []
        for _ in 0..<2 {
            let created = try curl(["-X", "POST", base + "/api/sessions"])
            ids.append(try XCTUnwrap(JSONValue.parse(Array(created.utf8))["id"]?.stringValue, created))
        }
        let streamFile = NSTemporaryDirectory() + "h2-stream-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: streamFile) }
        let stream = try ChildProcess(
            Self.curl,
            ["-skN", "--http2", "-o", streamFile, base + "/api/events?sessions=" + ids.joined(separator: ",")])
        defer { stream.send(SIGKILL) }
        func streamText() -> String { (try? String(contentsOfFile: streamFile, encoding: .utf8)) ?? "" }
        try waitUntil("both snapshots arrived over h2", within: 10) {
            streamText().components(separatedBy: "event: snapshot").count == 3
        }
        _ = try curl([
            "-X", "POST", "-H", "Content-Type: application/json", "--data", #"{"value":"h2"}"#,
            base + "/api/sessions/\(ids[1])/greeting/name",
        ])
        try waitUntil("the input's event arrived on the multiplexed stream", within: 10) {
            streamText().contains(#"event: greeting"#) && streamText().contains(#""session":"\#(ids[1])""#)
        }
    }
}
