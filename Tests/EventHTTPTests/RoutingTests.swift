import EventHTTP
import JSON
import WireClient
import XCTest

extension WireResponse: WireResponseLike {
    var statusCode: Int { status }
    var contentType: String? { header("Content-Type") }
    var bodyBytes: [UInt8] { body }
}

final class RoutingTests: XCTestCase {
    func testRoutesPathParametersAnd404And405() throws {
        let t = try TestServer()
        let c = try WireConnection(port: t.port)
        let hello = try c.request("GET", "/hello")
        XCTAssertEqual(hello.status, 200)
        XCTAssertEqual(hello.header("Content-Type"), "application/json")
        XCTAssertEqual(hello.text, #"{"hello":"world"}"#)
        XCTAssertEqual(hello.header("X-Content-Type-Options"), "nosniff")

        let item = try c.request("GET", "/items/a%20b")  // same keep-alive connection
        XCTAssertEqual(try JSONValue.parse(item.body)["id"], "a b")

        let head = try c.request("HEAD", "/hello")
        XCTAssertEqual(head.status, 200)
        XCTAssertTrue(head.body.isEmpty)

        let wrong = try c.request("DELETE", "/hello")
        let p = TestServer.problem(wrong, status: 405)
        XCTAssertEqual(wrong.header("Allow"), "GET, HEAD")
        XCTAssertEqual(p?["detail"]?.stringValue?.contains("DELETE"), true)

        let api = try WireConnection(port: t.port).request("GET", "/items/1/nope")
        XCTAssertEqual(api.status, 404)  // falls through to static files, which have no such file
        _ = TestServer.problem(api, status: 404)
    }

    func testNoFallbackMeans404Problem() throws {
        let t = try TestServer(configure: { $0.publicDirectory = nil })
        let r = try WireConnection.get(port: t.port, path: "/missing")
        XCTAssertEqual(TestServer.problem(r, status: 404)?["detail"], "no resource at /missing")
    }

    func testDeferredResponseFromAnotherThreadHopsBackToTheOwningLoop() throws {
        let t = try TestServer(routes: { router in
            router.add(.GET, "/deferred") { request, responder in
                DispatchQueue.global().async {
                    let value = "computed off-loop"
                    request.loop.execute { responder.send(.json(200, ["value": .string(value)])) }
                }
            }
        })
        for _ in 0..<20 {
            let r = try WireConnection.get(port: t.port, path: "/deferred")
            XCTAssertEqual(try JSONValue.parse(r.body)["value"], "computed off-loop")
        }
    }

    func testExecuteRunsInSubmissionOrderOnTheLoopThread() throws {
        let t = try TestServer()
        let loop = t.server.loops[1]
        let done = Signal()
        final class Box: @unchecked Sendable {
            var seen: [Int] = []
            var onLoop = true
        }
        let box = Box()
        for i in 0..<1000 {  // submitted from the test's thread, not the loop's
            loop.execute {
                box.onLoop = box.onLoop && loop.inEventLoop
                box.seen.append(i)
                if i == 999 { done.fire() }
            }
        }
        XCTAssertTrue(done.wait())
        XCTAssertEqual(box.seen, Array(0..<1000))
        XCTAssertTrue(box.onLoop)
        XCTAssertFalse(loop.inEventLoop)
    }

    func testResponseHeadersOfEverySizeArriveIntact() throws {
        let long = String(repeating: "v", count: 2000)
        let t = try TestServer(routes: { router in
            router.get("/headers") { _ in
                HTTPResponse(
                    status: 200, headers: [("X-Empty", ""), ("X-Small", "é1"), ("X-Long", long)], body: Array("ok".utf8)
                )
            }
        })
        let r = try WireConnection.get(port: t.port, path: "/headers")
        XCTAssertEqual(r.header("X-Empty"), "")
        XCTAssertEqual(r.header("X-Small"), "é1")
        XCTAssertEqual(r.header("X-Long"), long)
        XCTAssertEqual(r.text, "ok")
    }

    func testRouterMatchingIsExact() throws {
        let t = try TestServer(configure: { $0.publicDirectory = nil })
        for (path, status) in [
            ("/hello/", 200), ("//hello", 200), ("/hello//", 200), ("/hello/x", 404), ("/items", 404),
            ("/items/1/2", 404),
        ] {
            XCTAssertEqual(try WireConnection.get(port: t.port, path: path).status, status, path)
        }
    }

    func testEachMethodReachesItsOwnHandlerAndAllowListsTheRegisteredOnes() throws {
        let t = try TestServer(
            configure: { $0.publicDirectory = nil },
            routes: { router in
                router.add(.PUT, "/multi") { _, res in res.send(HTTPResponse(status: 200, body: Array("put".utf8))) }
                router.add(.PATCH, "/multi") { _, res in res.send(HTTPResponse(status: 200, body: Array("patch".utf8)))
                }
                router.add(.DELETE, "/multi/:id") { req, res in
                    res.send(HTTPResponse(status: 200, body: Array("delete \(req.parameters["id"] ?? "")".utf8)))
                }
            })
        XCTAssertEqual(try WireConnection(port: t.port).request("PUT", "/multi").text, "put")
        XCTAssertEqual(try WireConnection(port: t.port).request("PATCH", "/multi").text, "patch")
        XCTAssertEqual(try WireConnection(port: t.port).request("DELETE", "/multi/7").text, "delete 7")
        for method in ["GET", "POST", "OPTIONS", "TRACE"] {
            let r = try WireConnection(port: t.port).request(method, "/multi")
            XCTAssertEqual(r.status, 405, method)
            XCTAssertEqual(r.header("Allow"), "PATCH, PUT", method)
        }
        XCTAssertEqual(try WireConnection(port: t.port).request("PUT", "/multi/7").header("Allow"), "DELETE")
    }

    func testRouteParametersAreFoundByName() {
        let p: RouteParameters = ["id": "a b", "viewModel": "greeting"]
        XCTAssertEqual(p["id"], "a b")
        XCTAssertEqual(p["viewModel"], "greeting")
        XCTAssertNil(p["input"])
        XCTAssertTrue(RouteParameters().isEmpty)
    }

    func testTrimmingHTTPWhitespaceKeepsEveryNonASCIICharacterIntact() {
        XCTAssertEqual(" \t héllo wörld \r\n".trimmingHTTPWhitespace(), "héllo wörld")
        XCTAssertEqual("e\u{301}\t".trimmingHTTPWhitespace(), "e\u{301}")
        XCTAssertEqual("日本 ".trimmingHTTPWhitespace(), "日本")
        XCTAssertEqual(" \r\n\t ".trimmingHTTPWhitespace(), "")
        XCTAssertEqual("".trimmingHTTPWhitespace(), "")
        XCTAssertEqual("x".trimmingHTTPWhitespace(), "x")
        XCTAssertEqual("a b"[...].trimmingHTTPWhitespace(), "a b")
    }
}
