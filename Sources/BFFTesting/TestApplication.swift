@_exported import BFFKit
import EventHTTP
import Foundation
import HTTPTesting
import Logging
import XCTest

/// An application hosting `viewModels`, driven in process: every request goes through the real router,
/// handlers and session layer, with no socket and no loop thread (the calling thread plays every loop;
/// see `InProcessClient`). For tests of view models as a browser uses them: create a session, send
/// inputs, read the state, check the problem JSON of a refused input.
///
/// Threading: the thread that made it, only (a synchronous test method). View models whose effects run
/// off the loops (async work) hop back through the loop's queue, which `runPending` drains.
public final class TestApplication {
    /// The application (never started: nothing listens).
    public let app: Application
    private let client: InProcessClient

    /// An application hosting `viewModels` (one event loop unless `configure` says otherwise, no static
    /// files, warnings only in the log).
    public init(viewModels: ViewModelRegistry, configure: (inout AppConfiguration) -> Void = { _ in }) {
        var c = AppConfiguration()
        c.http.threads = 1
        c.http.publicDirectory = nil
        configure(&c)
        var logger = Logger(label: "bff-testing")
        logger.logLevel = .warning
        app = Application(configuration: c, viewModels: viewModels, logger: logger)
        client = InProcessClient(server: app.server)
    }

    /// An answer: its status, headers and body (parsed as JSON when it is JSON).
    public struct Answer {
        /// What the handler answered (status 0, nothing else, when it never answered).
        private let response: HTTPResponse
        public var status: Int { response.status }
        public var headers: [(String, String)] { response.headers }
        public var body: [UInt8] { response.body }
        /// The body as JSON (nil when it is not).
        public var json: JSONValue? { try? JSONValue.parse(body) }
        /// The value of header `name` (case-insensitive).
        public func header(_ name: String) -> String? { response.header(name) }

        init(_ response: HTTPResponse?) { self.response = response ?? HTTPResponse(status: 0) }
    }

    /// Any request; `body` is sent as JSON when given.
    @discardableResult
    public func request(_ method: HTTPMethod, _ path: String, json body: JSONValue? = nil) -> Answer {
        let headers = body == nil ? [] : [("Content-Type", "application/json")]
        return Answer(client.request(method, path, headers: headers, body: body?.bytes ?? []).response)
    }

    /// Creates a session (`POST /api/sessions`); its id.
    public func createSession(file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let r = request(.POST, "/api/sessions")
        XCTAssertEqual(r.status, 201, "\(String(decoding: r.body, as: UTF8.self))", file: file, line: line)
        return try XCTUnwrap(r.json?["id"]?.stringValue, file: file, line: line)
    }

    /// Sends input `input` of view model `viewModel` with `value` (`{"value": …}`): `202` and its
    /// `inputSeq`, or the problem JSON of a refusal.
    @discardableResult
    public func send(_ session: String, _ viewModel: String, _ input: String, _ value: JSONValue = .null) -> Answer {
        request(.POST, "/api/sessions/\(session)/\(viewModel)/\(input)", json: ["value": value])
    }

    /// The session's state (`GET /state`): `{"seq", "viewModels": {name: outputs}}`.
    public func state(_ session: String, file: StaticString = #filePath, line: UInt = #line) throws -> JSONValue {
        let r = request(.GET, "/api/sessions/\(session)/state")
        XCTAssertEqual(r.status, 200, file: file, line: line)
        return try XCTUnwrap(r.json, file: file, line: line)
    }

    /// Runs the loops' queued work (effect results that came back) until none is left.
    public func runPending() { client.runPending() }
}
