import BFF
import EventHTTP
import Features
import HTTPTesting
import JSON
import Logging
import SearchApp
import XCTest

/// The session routes in-process (`InProcessClient`): create → input → state, errors as problem
/// JSON, and the hop to a session's owner loop, with no sockets.
final class InProcessSessionTests: XCTestCase {
    private func makeClient(threads: Int) -> (Application, InProcessClient) {
        var c = AppConfiguration()
        c.http.threads = threads
        c.http.publicDirectory = nil
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let app = Application.searchApp(
            configuration: c, search: UnexpectedSearch(), logger: logger)
        return (app, InProcessClient(server: app.server))
    }

    private func json(_ r: RecordingResponse) throws -> JSONValue { try JSONValue.parse(XCTUnwrap(r.response).body) }

    func testCreateInputStateFlow() throws {
        for threads in [1, 2] {
            let (app, client) = makeClient(threads: threads)
            let created = client.request(.POST, "/api/sessions", loop: threads - 1)
            XCTAssertEqual(created.response?.status, 201)
            let id = try XCTUnwrap(json(created)["id"]?.stringValue)
            XCTAssertEqual(created.response?.header("Location"), "/api/sessions/\(id)")

            // The request arrives on loop 0; with 2 loops the session lives on loop 1: a hop.
            let input = client.request(
                .POST, "/api/sessions/\(id)/greeting/name", headers: [("Content-Type", "application/json")],
                body: Array(#"{"value":"ann"}"#.utf8), loop: 0)
            XCTAssertEqual(input.response?.status, 202)
            XCTAssertEqual(try json(input)["inputSeq"]?.intValue, 1)

            for loop in 0..<threads {
                let state = client.request(.GET, "/api/sessions/\(id)/state", loop: loop)
                XCTAssertEqual(state.response?.status, 200)
                XCTAssertEqual(state.response?.header("Cache-Control"), "no-store")
                let s = try json(state)
                XCTAssertEqual(s["seq"]?.intValue, 1)
                XCTAssertEqual(s["viewModels"]?["greeting"]?["buttonEnabled"]?.boolValue, true)
                XCTAssertEqual(s["viewModels"]?["status"]?["reachable"]?.boolValue, true)
            }
            XCTAssertEqual(app.sessions, 1)
            XCTAssertEqual(client.request(.DELETE, "/api/sessions/\(id)").response?.status, 204)
            XCTAssertEqual(client.request(.GET, "/api/sessions/\(id)/state").response?.status, 404)
        }
    }

    func testInputErrorsAreProblems() throws {
        let (app, client) = makeClient(threads: 1)
        defer { withExtendedLifetime(app) {} }  // the routes hold it unowned
        let id = try XCTUnwrap(json(client.request(.POST, "/api/sessions"))["id"]?.stringValue)
        let unknown = try XCTUnwrap(
            client.request(.POST, "/api/sessions/\(id)/nope/name", headers: [("Content-Type", "application/json")])
                .response)
        XCTAssertEqual(unknown.status, 404)
        XCTAssertEqual(unknown.header("Content-Type"), "application/problem+json")
        XCTAssertEqual(
            try JSONValue.parse(unknown.body)["detail"],
            "no view model 'nope'; known view models: search, greeting, account, status")
        let text = try XCTUnwrap(
            client.request(
                .POST, "/api/sessions/\(id)/greeting/name", headers: [("Content-Type", "text/plain")],
                body: Array("x".utf8)
            ).response)
        XCTAssertEqual(text.status, 415)
        let wrongMethod = try XCTUnwrap(client.request(.PUT, "/api/sessions/\(id)/state").response)
        XCTAssertEqual(wrongMethod.status, 405)
        XCTAssertEqual(wrongMethod.header("Allow"), "GET, HEAD")
    }
}
