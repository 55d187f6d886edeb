import EventHTTP
import JSON
import LoadKit
import Logging
import XCTest

/// `--source`: the load's connections come from several local addresses, so one run plays many
/// clients (the server's per-client limits tell them apart).
final class SourceAddressTests: XCTestCase {
    func testConnectionsAreSpreadOverTheSourceAddresses() throws {
        var config = HTTPServer.Configuration()
        config.port = 0
        config.threads = 1
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let server = HTTPServer(configuration: config, logger: logger)
        let seen = Lock(Set<String>())
        server.router.get("/who") { req in
            seen.withLock { _ = $0.insert(req.client.description) }
            return .json(200, ["client": .string(req.client.description)])
        }
        try server.start()
        defer { server.shutdown(gracePeriod: 1) }
        let target = try Target(url: "http://127.0.0.1:\(server.port)").from(sources: "127.0.0.2-127.0.0.4,127.0.0.9")
        XCTAssertEqual(target.sources.count, 4)
        let loop = try LoadLoop()
        defer { loop.close() }
        let pool = RequestPool(loop: loop, target: target, size: 8)
        var answered = 0
        for _ in 0..<64 { pool.submit("GET", "/who") { _ in answered += 1 } }
        XCTAssertTrue(loop.run(timeout: 10) { answered == 64 })
        // Eight connections, the four addresses in turn: each was used.
        XCTAssertEqual(seen.withLock { $0 }, ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.9"])
        for bad in ["x", "127.0.0.9-127.0.0.2", "127.0.0.1-127.1.0.1"] {
            XCTAssertThrowsError(try target.from(sources: bad), bad)
        }
    }
}
