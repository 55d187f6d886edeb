import EventHTTP
import HTTPTesting
import JSON
import Logging
import XCTest

/// Routing and problem encoding through `InProcessClient`: no sockets, no loop threads.
final class InProcessRoutingTests: XCTestCase {
    private func makeClient() -> InProcessClient {
        var config = HTTPServer.Configuration()
        config.threads = 1
        config.publicDirectory = nil
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let server = HTTPServer(configuration: config, logger: logger)
        server.router.get("/hello") { _ in .json(200, ["hello": "world"]) }
        server.router.get("/items/:id") { req in .json(200, ["id": .string(req.parameters["id"] ?? "")]) }
        server.router.add(.DELETE, "/items/:id") { _, res in res.send(HTTPResponse(status: 204)) }
        server.router.add(.GET, "/later") { req, res in
            req.loop.execute { res.send(.json(200, ["later": true])) }  // answered from the loop's queue
        }
        return InProcessClient(server: server)
    }

    func testRoutesAndParameters() throws {
        let client = makeClient()
        let hello = client.request(.GET, "/hello")
        XCTAssertEqual(hello.response?.status, 200)
        XCTAssertEqual(hello.route, "/hello")
        XCTAssertEqual(hello.response?.header("Content-Type"), "application/json")
        XCTAssertEqual(hello.response.map { String(decoding: $0.body, as: UTF8.self) }, #"{"hello":"world"}"#)
        let item = client.request(.GET, "/items/a%20b")
        XCTAssertEqual(try JSONValue.parse(XCTUnwrap(item.response).body)["id"], "a b")
        XCTAssertEqual(item.route, "/items/:id")
        XCTAssertEqual(client.request(.GET, "/later").response?.status, 200)
        XCTAssertEqual(client.request(.HEAD, "/hello").response?.status, 200)  // HEAD uses GET's handler
    }

    func test404And405AreProblemDocuments() throws {
        let client = makeClient()
        let missing = try XCTUnwrap(client.request(.GET, "/nothing/here").response)
        XCTAssertEqual(missing.status, 404)
        XCTAssertEqual(missing.header("Content-Type"), "application/problem+json")
        let p = try JSONValue.parse(missing.body)
        XCTAssertEqual(p["type"], "about:blank")
        XCTAssertEqual(p["title"], "Not Found")
        XCTAssertEqual(p["status"]?.intValue, 404)
        XCTAssertEqual(p["detail"], "no resource at /nothing/here")

        let wrong = try XCTUnwrap(client.request(.POST, "/items/7").response)
        XCTAssertEqual(wrong.status, 405)
        XCTAssertEqual(wrong.header("Allow"), "DELETE, GET, HEAD")
        let q = try JSONValue.parse(wrong.body)
        XCTAssertEqual(q["title"], "Method Not Allowed")
        XCTAssertEqual(q["detail"], "method POST is not allowed on /items/7; allowed: DELETE, GET, HEAD")
    }
}
