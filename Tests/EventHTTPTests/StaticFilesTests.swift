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

    // MARK: in memory, reloaded off the loops, capped

    private func makeFolder() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("static-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: dir.appendingPathComponent("css"), withIntermediateDirectories: true)
        try "<!doctype html><title>one</title>".write(
            to: dir.appendingPathComponent("index.html"), atomically: true, encoding: .utf8)
        try "body{}".write(to: dir.appendingPathComponent("css/app.css"), atomically: true, encoding: .utf8)
        return dir
    }

    private let loop = EventLoop()

    private func get(_ files: StaticFiles, _ path: String, headers: [(String, String)] = []) -> HTTPResponse {
        files.response(
            for: HTTPRequest(method: .GET, rawPath: path, rawQuery: nil, headers: headers, body: [], loop: loop))
    }

    func testFilesAreServedFromMemoryUntilARescanSeesTheChange() throws {
        let dir = try makeFolder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let files = StaticFiles(directory: dir.path)
        XCTAssertEqual(files.servedPaths, ["css/app.css", "index.html"])
        let first = get(files, "/")
        XCTAssertEqual(first.status, 200)
        XCTAssertEqual(String(decoding: first.body, as: UTF8.self), "<!doctype html><title>one</title>")
        let etag = try XCTUnwrap(first.headers.first { $0.0 == "ETag" }?.1)

        // Changed, added and removed on disk: nothing changes until a scan (requests touch no disk).
        try "<!doctype html><title>two, longer</title>".write(
            to: dir.appendingPathComponent("index.html"), atomically: true, encoding: .utf8)
        try "new".write(to: dir.appendingPathComponent("new.txt"), atomically: true, encoding: .utf8)
        try FileManager.default.removeItem(at: dir.appendingPathComponent("css/app.css"))
        XCTAssertEqual(String(decoding: get(files, "/").body, as: UTF8.self), "<!doctype html><title>one</title>")
        XCTAssertEqual(get(files, "/css/app.css").status, 200)
        XCTAssertEqual(get(files, "/new.txt").status, 404)

        XCTAssertTrue(files.rescan())
        let second = get(files, "/index.html")
        XCTAssertEqual(String(decoding: second.body, as: UTF8.self), "<!doctype html><title>two, longer</title>")
        XCTAssertNotEqual(second.headers.first { $0.0 == "ETag" }?.1, etag)
        XCTAssertEqual(
            get(files, "/", headers: [("If-None-Match", etag)]).status, 200, "the old ETag no longer matches")
        XCTAssertEqual(get(files, "/new.txt").status, 200)
        XCTAssertEqual(get(files, "/css/app.css").status, 404)
        XCTAssertFalse(files.rescan(), "nothing changed since: no new table")
    }

    func testTheWatcherThreadPicksUpChanges() throws {
        let dir = try makeFolder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let files = StaticFiles(directory: dir.path)
        try "later".write(to: dir.appendingPathComponent("later.txt"), atomically: true, encoding: .utf8)
        let before = files.scans
        files.startWatching(interval: 0.05)
        defer { files.stopWatching() }
        XCTAssertTrue(files.waitForScans(before + 1, timeout: 10), "the watcher scanned")
        XCTAssertEqual(String(decoding: get(files, "/later.txt").body, as: UTF8.self), "later")
    }

    func testLiveServerReloadsWithItsWatcher() throws {
        let t = try TestServer(configure: { $0.staticRescanInterval = 0.05 })
        XCTAssertEqual(try WireConnection.get(port: t.port, path: "/added.txt").status, 404)
        try "added".write(to: t.publicDir.appendingPathComponent("added.txt"), atomically: true, encoding: .utf8)
        // A scan that started after the write sees the file: await two more completed scans.
        let files = try XCTUnwrap(t.server.staticFiles)
        XCTAssertTrue(files.waitForScans(files.scans + 2, timeout: 10))
        let r = try WireConnection.get(port: t.port, path: "/added.txt")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.text, "added")
    }

    func testCapsLeaveBigFilesOutAndServeTheRest() throws {
        let dir = try makeFolder()
        defer { try? FileManager.default.removeItem(at: dir) }
        try String(repeating: "a", count: 100).write(
            to: dir.appendingPathComponent("a-big.txt"), atomically: true, encoding: .utf8)
        try String(repeating: "b", count: 40).write(
            to: dir.appendingPathComponent("b.txt"), atomically: true, encoding: .utf8)
        // Per file: 64 bytes (a-big.txt is out). In total: 80 bytes, filled in sorted path order:
        // b.txt (40) and css/app.css (6) fit, index.html (33) would make 79 and fits, nothing else.
        let files = StaticFiles(directory: dir.path, maxFileBytes: 64, maxTotalBytes: 80)
        XCTAssertEqual(files.servedPaths, ["b.txt", "css/app.css", "index.html"])
        XCTAssertEqual(files.bytesInMemory, 79)
        XCTAssertEqual(get(files, "/a-big.txt").status, 404)
        XCTAssertEqual(get(files, "/b.txt").status, 200)
        // Two more bytes (81 in all) are past the cap: the last file in order is left out.
        try "<!doctype html><title>one!!</title>".write(
            to: dir.appendingPathComponent("index.html"), atomically: true, encoding: .utf8)
        XCTAssertTrue(files.rescan())
        XCTAssertEqual(files.servedPaths, ["b.txt", "css/app.css"])
        XCTAssertEqual(get(files, "/").status, 404)
    }

    func testARescanKeepsTheTraversalDefences() throws {
        let dir = try makeFolder()
        let outside = dir.deletingLastPathComponent().appendingPathComponent("outside-\(UUID().uuidString).txt")
        defer {
            try? FileManager.default.removeItem(at: dir)
            try? FileManager.default.removeItem(at: outside)
        }
        let files = StaticFiles(directory: dir.path)
        try "top secret".write(to: outside, atomically: true, encoding: .utf8)
        let fm = FileManager.default
        try fm.createSymbolicLink(at: dir.appendingPathComponent("out.txt"), withDestinationURL: outside)
        try fm.createSymbolicLink(
            at: dir.appendingPathComponent("in.css"), withDestinationURL: dir.appendingPathComponent("css/app.css"))
        try fm.createSymbolicLink(at: dir.appendingPathComponent("loop"), withDestinationURL: dir)
        try "secret".write(to: dir.appendingPathComponent(".env"), atomically: true, encoding: .utf8)
        try fm.createDirectory(at: dir.appendingPathComponent(".git"), withIntermediateDirectories: true)
        try "x".write(to: dir.appendingPathComponent(".git/config"), atomically: true, encoding: .utf8)
        XCTAssertTrue(files.rescan())
        XCTAssertEqual(files.servedPaths, ["css/app.css", "in.css", "index.html"])
        for path in ["/out.txt", "/.env", "/.git/config", "/loop/index.html", "/%2e%2e/\(outside.lastPathComponent)"] {
            XCTAssertEqual(get(files, path).status, 404, path)
        }
        XCTAssertEqual(String(decoding: get(files, "/in.css").body, as: UTF8.self), "body{}")
    }
}
