import EventHTTP
import Foundation
import JSON
import Logging
import XCTest

/// A live server on 127.0.0.1:0 with a temporary public folder, for the EventHTTP tests.
final class TestServer: @unchecked Sendable {
    let server: HTTPServer
    let publicDir: URL
    var port: Int { server.port }

    init(configure: (inout HTTPServer.Configuration) -> Void = { _ in }, routes: (Router) -> Void = { _ in }) throws {
        publicDir = FileManager.default.temporaryDirectory.appendingPathComponent("eventhttp-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: publicDir.appendingPathComponent("css"), withIntermediateDirectories: true)
        try "<!doctype html><title>t</title>".write(
            to: publicDir.appendingPathComponent("index.html"), atomically: true, encoding: .utf8)
        try "body{}".write(to: publicDir.appendingPathComponent("css/app.css"), atomically: true, encoding: .utf8)
        try "secret".write(to: publicDir.appendingPathComponent(".env"), atomically: true, encoding: .utf8)
        var config = HTTPServer.Configuration()
        config.port = 0
        config.threads = 2
        config.publicDirectory = publicDir.path
        configure(&config)
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        server = HTTPServer(configuration: config, logger: logger)
        server.router.get("/hello") { _ in .json(200, ["hello": "world"]) }
        server.router.get("/items/:id") { req in .json(200, ["id": .string(req.parameters["id"] ?? "")]) }
        server.router.post("/echo") { req in
            HTTPResponse(status: 200, headers: [("Content-Type", "application/octet-stream")], body: req.body)
        }
        routes(server.router)
        try server.start()
    }

    deinit {
        server.shutdown(gracePeriod: 1)
        try? FileManager.default.removeItem(at: publicDir)
    }

    /// Parses a problem body and checks its shape.
    static func problem(_ r: WireResponseLike, status: Int, file: StaticString = #filePath, line: UInt = #line)
        -> JSONValue?
    {
        XCTAssertEqual(r.statusCode, status, file: file, line: line)
        XCTAssertEqual(r.contentType, "application/problem+json", file: file, line: line)
        guard let v = try? JSONValue.parse(r.bodyBytes) else {
            XCTFail("problem body is not JSON: \(r.bodyBytes.count) bytes", file: file, line: line)
            return nil
        }
        XCTAssertEqual(v["status"], .int(status), file: file, line: line)
        XCTAssertEqual(v["type"], "about:blank", file: file, line: line)
        XCTAssertNotNil(v["title"]?.stringValue, file: file, line: line)
        XCTAssertFalse(v["detail"]?.stringValue?.isEmpty ?? true, file: file, line: line)
        return v
    }
}

/// What `TestServer.problem` needs from a response.
protocol WireResponseLike {
    var statusCode: Int { get }
    var contentType: String? { get }
    var bodyBytes: [UInt8] { get }
}

/// A thread-safe one-shot signal a test can wait for (instead of sleeping).
final class Signal: @unchecked Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    func fire() { semaphore.signal() }
    func wait(_ seconds: Double = 5) -> Bool { semaphore.wait(timeout: .now() + seconds) == .success }
}
