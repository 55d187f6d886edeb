import EventHTTP
import Foundation
import GitHubSearch
import JSON
import Logging
import SearchApp
import WireClient
import XCTest

@testable import BFF

/// A search that fails the test when called: most session tests must not reach GitHub.
struct UnexpectedSearch: RepositorySearching {
    func search(_ request: SearchRequest, policy: CachePolicy) async throws(SearchError) -> SearchResponse {
        XCTFail("unexpected search for \(request)")
        throw .upstream(message: "unexpected")
    }
}

/// Collects every log line (to prove secrets never reach the log).
final class LogCollector: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ s: String) {
        lock.lock()
        lines.append(s)
        lock.unlock()
    }
    var all: String {
        lock.lock()
        defer { lock.unlock() }
        return lines.joined(separator: "\n")
    }

    func logger(level: Logger.Level = .trace) -> Logger {
        var l = Logger(label: "test") { _ in CollectingHandler(collector: self) }
        l.logLevel = level
        return l
    }

    struct CollectingHandler: LogHandler {
        let collector: LogCollector
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            collector.append("\(event.level) \(event.message) \(metadata.merging(event.metadata ?? [:]) { $1 })")
        }
    }
}

/// A live application on 127.0.0.1:0, shut down when the last reference to it goes.
///
/// That last reference must not go on one of the app's own loops (`HTTPServer.shutdown` traps there: a
/// loop cannot join itself): hand work to a loop with `onOwner(of:_:)`, whose job holds neither the
/// `LiveApp` nor the closure, rather than a `loop.execute` closure that captures the `LiveApp`.
final class LiveApp: @unchecked Sendable {
    let app: Application
    var port: Int { app.port }

    init(
        search: any RepositorySearching = UnexpectedSearch(), logger: Logger? = nil, clock: SessionClock = .monotonic,
        configure: (inout AppConfiguration) -> Void = { _ in }
    ) throws {
        var c = AppConfiguration()
        c.http.port = 0
        c.http.threads = 2
        c.testHooks = true
        // Tests play one client making many sessions; the fair-use tests set the per-client limits.
        c.clientSessionRate = 1_000_000
        c.clientSessionBurst = 1_000_000
        c.maxSessionsPerClient = 1_000_000
        configure(&c)
        var quiet = Logger(label: "test")
        quiet.logLevel = .warning
        app = Application.searchApp(
            configuration: c, search: search, logger: logger ?? quiet, clock: clock)
        try app.start()
    }

    init(app: Application) throws {
        self.app = app
        try app.start()
    }

    deinit { app.shutdown() }

    /// Runs `body` with session `id` on its owner loop and returns its result once it has run.
    ///
    /// `body` (and whatever it captures, this `LiveApp` included) is released on the calling thread,
    /// never by the loop: the job holds only the `OwnerCall`, which lets go of `body` here.
    func onOwner<T: Sendable>(of id: String, _ body: @escaping @Sendable (Session) -> T) throws -> T {
        let owner = try XCTUnwrap(
            SessionID.loopIndex(of: id, loops: app.loopSessions.count).map { app.loopSessions[$0] },
            "no owner for \(id)")
        let call = OwnerCall(body)
        owner.loop.execute { call.run(on: owner, id) }
        // On a time-out `call` (and `body`) stay with the loop's job; the test fails with the error.
        guard call.done.wait(timeout: .now() + 5) == .success else { throw LoopDidNotAnswer(loop: owner.loop.index) }
        return try call.takeResult()
    }

    /// Creates a session; returns its id.
    func createSession() throws -> String {
        let r = try WireConnection.post(port: port, path: "/api/sessions", body: [])
        XCTAssertEqual(r.status, 201)
        return try XCTUnwrap(JSONValue.parse(r.body)["id"]?.stringValue)
    }

    func post(
        _ id: String, _ vm: String, _ input: String, _ json: String? = nil, headers: [(String, String)] = [],
        on connection: WireConnection? = nil
    ) throws -> WireResponse {
        let c = try connection ?? WireConnection(port: port)
        defer { if connection == nil { c.close() } }
        return try c.request(
            "POST", "/api/sessions/\(id)/\(vm)/\(input)",
            headers: (json == nil ? [] : [("Content-Type", "application/json")]) + headers,
            body: json.map { Array($0.utf8) })
    }

    func state(_ id: String) throws -> JSONValue {
        let r = try WireConnection.get(port: port, path: "/api/sessions/\(id)/state")
        XCTAssertEqual(r.status, 200)
        return try JSONValue.parse(r.body)
    }

    func stream(_ id: String, lastEventID: String? = nil) throws -> (WireConnection, EventStreamReader) {
        let c = try WireConnection(port: port, timeout: 10)
        let (head, reader) = try c.openEventStream(
            "/api/sessions/\(id)/events",
            headers: lastEventID.map { [("Last-Event-ID", $0)] } ?? [])
        XCTAssertEqual(head.status, 200, "\(head)")
        return (c, reader)
    }
}

/// One `LiveApp.onOwner` call: `body` runs on the owner loop, the result is read once `done` fires.
private final class OwnerCall<T>: @unchecked Sendable {
    private var body: (@Sendable (Session) -> T)?
    private var result: T?
    let done = DispatchSemaphore(value: 0)

    init(_ body: @escaping @Sendable (Session) -> T) { self.body = body }

    /// On the owner loop.
    func run(on owner: LoopSessions, _ id: String) {
        if let session = owner.sessions[id] { result = body?(session) }
        done.signal()
    }

    /// On the calling thread, after `done` (which orders `run`'s writes before these reads): the body is
    /// released here.
    func takeResult() throws -> T {
        body = nil
        return try XCTUnwrap(result, "the owner has no such session")
    }
}

struct LoopDidNotAnswer: Error {
    let loop: Int
}

/// What a browser does with the stream: apply snapshots and merge changed outputs.
struct ClientState {
    var seq = -1
    var viewModels = JSONObject()
    var signals: [(String, JSONObject)] = []
    var lastInputSeq: Int?

    mutating func apply(_ e: SSEEvent) throws {
        let data = try JSONValue.parse(e.data)
        if let id = e.id.flatMap(Int.init) { seq = id }
        switch e.event {
        case "snapshot":
            viewModels = data["viewModels"]?.objectValue ?? [:]
            XCTAssertEqual(data["seq"]?.intValue, seq)
        case "end": break
        default:
            var vm = viewModels[e.event]?.objectValue ?? [:]
            if let outputs = data["outputs"]?.objectValue { vm.merge(outputs) }
            viewModels[e.event] = .object(vm)
            if let s = data["signals"]?.objectValue { signals.append((e.event, s)) }
            lastInputSeq = data["inputSeq"]?.intValue ?? lastInputSeq
        }
    }

    var snapshot: JSONValue { ["seq": .int(seq), "viewModels": .object(viewModels)] }
}

extension WireResponse {
    var json: JSONValue? { try? JSONValue.parse(body) }
    /// Checks an RFC 9457 problem response and returns its detail.
    @discardableResult
    func problem(_ status: Int, file: StaticString = #filePath, line: UInt = #line) -> String {
        XCTAssertEqual(self.status, status, "\(self)", file: file, line: line)
        XCTAssertEqual(header("Content-Type"), "application/problem+json", file: file, line: line)
        XCTAssertEqual(json?["status"]?.intValue, status, file: file, line: line)
        XCTAssertEqual(json?["type"], "about:blank", file: file, line: line)
        return json?["detail"]?.stringValue ?? ""
    }
}

extension XCTestCase {
    /// Polls `condition` every 20 ms until it holds, failing the test after `seconds`: for guarantees
    /// stated as "within N seconds" (readiness, takeover), where no single event marks the moment.
    func waitUntil(_ what: String, within seconds: Double, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while try !condition() {
            if Date() > deadline { return XCTFail("not within \(seconds) s: \(what)") }
            usleep(20_000)
        }
    }
}
