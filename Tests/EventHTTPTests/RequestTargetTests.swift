import EventHTTP
import JSON
import WireClient
import XCTest

/// RFC 9112 §3.2 on real sockets: `Host` is required in HTTP/1.1 (and at most once), and a request
/// target in absolute form is accepted, its authority standing for `Host`. Plus the router's
/// route-only prefixes: an unknown path under one is a `404` problem naming the method, never a file.
final class RequestTargetTests: XCTestCase {
    /// Sends `raw` on a fresh connection; returns the one response and whether the server then closed.
    private func exchange(_ t: TestServer, _ raw: String) throws -> (WireResponse, Bool) {
        let c = try WireConnection(port: t.port)
        try c.send(raw: raw)
        let r = try c.readResponse()
        return (r, c.waitForClose(timeout: 5))
    }

    private func server() throws -> TestServer {
        try TestServer(routes: { router in
            router.get("/whoami") { req in
                .json(
                    200,
                    [
                        "host": req.header("Host").map(JSONValue.string) ?? .null, "path": .string(req.rawPath),
                        "query": req.rawQuery.map(JSONValue.string) ?? .null,
                    ])
            }
            router.get("/fields") { req in
                .json(
                    200,
                    [
                        "accept": req.header("aCCept").map(JSONValue.string) ?? .null,
                        "xTwice": req.header("X-Twice").map(JSONValue.string) ?? .null,
                        "missing": req.header("X-Missing").map(JSONValue.string) ?? .null,
                        "names": .array(req.headers.map { .string($0.0) }),
                        "values": .array(req.headers.map { .string($0.1) }),
                    ])
            }
            router.add(.POST, "/api/things") { _, res in res.send(.json(201, ["ok": true])) }
            router.get("/api/items/:id") { req in .json(200, ["id": .string(req.parameters["id"] ?? "")]) }
            router.routesOnly(under: "/api/", name: "API")
        })
    }

    /// Header fields as handlers read them: a name in any case, the first of two fields with one name,
    /// nil for one not sent, a value with colons and inner spaces intact, and every field in order.
    func testHeaderFieldsAreReadCaseInsensitivelyTheFirstOfTwoWinsAndAllInOrder() throws {
        let t = try server()
        let (r, _) = try exchange(
            t,
            "GET /fields HTTP/1.1\r\nHost: h\r\nAccept: text/x: y;  q=1\r\nX-Twice: one\r\nx-twice: two\r\n"
                + "Connection: close\r\n\r\n")
        XCTAssertEqual(r.status, 200)
        let body = try JSONValue.parse(r.body)
        XCTAssertEqual(body["accept"], "text/x: y;  q=1")
        XCTAssertEqual(body["xTwice"], "one")
        XCTAssertEqual(body["missing"], .null)
        XCTAssertEqual(body["names"], ["Host", "Accept", "X-Twice", "x-twice", "Connection"])
        XCTAssertEqual(body["values"], ["h", "text/x: y;  q=1", "one", "two", "close"])
    }

    func testAnHTTP11RequestWithoutHostIs400ProblemAndClosed() throws {
        let t = try server()
        for raw in [
            "GET /hello HTTP/1.1\r\n\r\n",
            "POST /echo HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi",
            "GET /hello HTTP/1.1\r\nX-Host: x\r\n\r\n",
        ] {
            let (r, closed) = try exchange(t, raw)
            let detail = TestServer.problem(r, status: 400)?["detail"]?.stringValue ?? ""
            XCTAssertTrue(detail.contains("Host"), "\(raw): \(detail)")
            XCTAssertTrue(closed, raw)
        }
        // A second Host field is as bad as none (§3.2: "more than one Host header field line").
        let (twice, closed) = try exchange(t, "GET /hello HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n")
        let detail = TestServer.problem(twice, status: 400)?["detail"]?.stringValue ?? ""
        XCTAssertTrue(detail.contains("more than one Host"), detail)
        XCTAssertTrue(closed)
        // The server goes on serving everyone else.
        XCTAssertEqual(try WireConnection.get(port: t.port, path: "/hello").status, 200)
    }

    func testHTTP10WithoutHostAndHTTP11WithAnEmptyHostAreAccepted() throws {
        let t = try server()
        let (old, _) = try exchange(t, "GET /hello HTTP/1.0\r\n\r\n")
        XCTAssertEqual(old.status, 200)
        let c = try WireConnection(port: t.port)
        try c.send(raw: "GET /whoami HTTP/1.1\r\nHost:\r\n\r\n")  // §3.2: empty when the URI has no authority
        let r = try c.readResponse()
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(try c.request("GET", "/hello").status, 200, "the connection stays usable")
    }

    func testAbsoluteFormIsAcceptedAndItsAuthorityIsTheHost() throws {
        let t = try server()
        let c = try WireConnection(port: t.port)
        try c.send(raw: "GET http://Example.COM:8080/whoami?a=1 HTTP/1.1\r\nHost: other\r\n\r\n")
        let r = try c.readResponse()
        XCTAssertEqual(r.status, 200, r.text)
        let v = try JSONValue.parse(r.body)
        XCTAssertEqual(v["path"], "/whoami")
        XCTAssertEqual(v["query"], "a=1")
        XCTAssertEqual(v["host"], "Example.COM:8080", "the authority replaces the Host field (§3.2.2)")
        // keep-alive goes on; https and upper-case schemes, routes with parameters, no path at all
        try c.send(raw: "GET HTTPS://example.com/items/a%20b HTTP/1.1\r\nHost: example.com\r\n\r\n")
        XCTAssertEqual(try JSONValue.parse(try c.readResponse().body)["id"], "a b")
        try c.send(raw: "POST http://example.com/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
        XCTAssertEqual(try c.readResponse().text, "hi")
        try c.send(raw: "GET http://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n")
        let root = try c.readResponse()
        XCTAssertEqual(root.status, 200, "an empty path is '/' (§3.2.2): the index file")
        XCTAssertEqual(root.header("Content-Type")?.hasPrefix("text/html"), true)
    }

    func testMalformedAbsoluteFormsAre400Problem() throws {
        let t = try server()
        for (raw, text) in [
            ("GET http://a:b:c/ HTTP/1.1\r\nHost: x\r\n\r\n", "malformed request target"),
            ("GET http:///hello HTTP/1.1\r\nHost: x\r\n\r\n", "malformed request target"),
            ("GET ftp://example.com/hello HTTP/1.1\r\nHost: x\r\n\r\n", "absolute path or an http(s) URL"),
            ("GET hello HTTP/1.1\r\nHost: x\r\n\r\n", "absolute path or an http(s) URL"),
            ("GET http://us@er@x/hello HTTP/1.1\r\nHost: x\r\n\r\n", "malformed request target"),
        ] {
            let (r, closed) = try exchange(t, raw)
            let detail = TestServer.problem(r, status: 400)?["detail"]?.stringValue ?? ""
            XCTAssertTrue(detail.contains(text), "\(raw): \(detail)")
            XCTAssertTrue(closed, raw)
        }
    }

    func testAPathUnderARouteOnlyPrefixThatMatchesNoRouteIs404ProblemNotAFile() throws {
        let t = try server()
        // a file that would be served if the prefix fell through to the static files
        try FileManager.default.createDirectory(
            at: t.publicDir.appendingPathComponent("api"), withIntermediateDirectories: true)
        try "{}".write(to: t.publicDir.appendingPathComponent("api/nope"), atomically: true, encoding: .utf8)
        _ = t.server.staticFiles?.rescan()
        XCTAssertEqual(try WireConnection.get(port: t.port, path: "/index.html").status, 200)

        for (method, path) in [("GET", "/api/nope"), ("POST", "/api/nope"), ("DELETE", "/api/items/1/x")] {
            let r = try WireConnection(port: t.port).request(method, path, body: method == "POST" ? [] : nil)
            let detail = TestServer.problem(r, status: 404)?["detail"]?.stringValue
            XCTAssertEqual(detail, "no API route matches \(method) \(path)")
        }
        // An unrecognized method under the prefix is no file question either.
        let (odd, _) = try exchange(t, "BREW /api/nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        XCTAssertEqual(
            TestServer.problem(odd, status: 404)?["detail"], "no API route matches (unrecognized method) /api/nope")
        // A path that exists for another method is still 405 with Allow.
        let wrong = try WireConnection(port: t.port).request("GET", "/api/things")
        _ = TestServer.problem(wrong, status: 405)
        XCTAssertEqual(wrong.header("Allow"), "POST")
        // Routes under the prefix and files elsewhere are served as before.
        XCTAssertEqual(try WireConnection(port: t.port).request("POST", "/api/things", body: []).status, 201)
        XCTAssertEqual(try WireConnection.get(port: t.port, path: "/api/items/7").status, 200)
        XCTAssertEqual(try WireConnection.get(port: t.port, path: "/css/app.css").status, 200)
        // Only whole segments count: "/apiary" is a file path like any other.
        XCTAssertEqual(try WireConnection.get(port: t.port, path: "/apiary").status, 404)
        XCTAssertNotEqual(
            TestServer.problem(try WireConnection.get(port: t.port, path: "/apiary"), status: 404)?["detail"]?
                .stringValue?.hasPrefix("no API route"), true)
    }
}
