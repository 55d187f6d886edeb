import EventHTTP
import Foundation
import WireClient
import XCTest

final class StaticFilesTests: XCTestCase {
    func testServesFilesWithTypesValidatorsAnd304() throws {
        let t = try TestServer(configure: { $0.htmlHeaders = [("Content-Security-Policy", "default-src 'self'")] })
        let index = try WireConnection.get(port: t.port, path: "/")
        XCTAssertEqual(index.status, 200)
        XCTAssertEqual(index.header("Content-Type"), "text/html; charset=utf-8")
        XCTAssertEqual(index.header("Cache-Control"), "no-cache")
        XCTAssertEqual(index.header("Content-Security-Policy"), "default-src 'self'")
        XCTAssertTrue(index.text.contains("<title>t</title>"))
        let etag = try XCTUnwrap(index.header("ETag"))
        let lastModified = try XCTUnwrap(index.header("Last-Modified"))
        XCTAssertEqual(
            try WireConnection.get(port: t.port, path: "/index.html", headers: [("If-None-Match", etag)]).status, 304)
        XCTAssertEqual(
            try WireConnection.get(port: t.port, path: "/", headers: [("If-Modified-Since", lastModified)]).status, 304)
        XCTAssertEqual(
            try WireConnection.get(port: t.port, path: "/", headers: [("If-None-Match", "\"other\"")]).status, 200)
        let css = try WireConnection.get(port: t.port, path: "/css/app.css")
        XCTAssertEqual(css.header("Content-Type"), "text/css; charset=utf-8")
        XCTAssertEqual(css.text, "body{}")
        XCTAssertNil(css.header("Content-Security-Policy"))
    }

    func testNothingOutsideThePublicFolderIsServed() throws {
        let t = try TestServer()
        let outside = t.publicDir.deletingLastPathComponent().appendingPathComponent("outside-\(UUID().uuidString).txt")
        try "top secret".write(to: outside, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: outside) }
        try FileManager.default.createSymbolicLink(
            at: t.publicDir.appendingPathComponent("link.txt"), withDestinationURL: outside)
        let name = outside.lastPathComponent
        let hostile = [
            "/../\(name)", "/css/../../\(name)", "/%2e%2e/\(name)", "/%2E%2E%2F\(name)", "/css%2F..%2F..%2F\(name)",
            "/link.txt", "/.env", "/%2eenv", "/..%5C\(name)", "/%00", "/etc/passwd", "//etc/passwd",
            "/css/%2e%2e/%2e%2e/\(name)",
        ]
        for path in hostile {
            let c = try WireConnection(port: t.port)
            try c.send(raw: "GET \(path) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            let r = try c.readResponse()
            XCTAssertTrue([400, 404].contains(r.status), "\(path) -> \(r.status)")
            XCTAssertFalse(r.text.contains("top secret") || r.text.contains("secret\""), path)
            XCTAssertFalse(r.text.contains("root:"), path)
        }
        XCTAssertEqual(try WireConnection.get(port: t.port, path: "/css/app.css").status, 200)
    }

    func testPostToAStaticPathIs405() throws {
        let t = try TestServer()
        let r = try WireConnection.post(port: t.port, path: "/index.html", body: [])
        _ = TestServer.problem(r, status: 405)
        XCTAssertEqual(r.header("Allow"), "GET, HEAD")
    }

    func testHTTPDateRoundTrips() {
        XCTAssertEqual(HTTPDate.format(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT")
        XCTAssertEqual(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT"), 784_111_777)
        XCTAssertNil(HTTPDate.parse("yesterday"))
    }
}
