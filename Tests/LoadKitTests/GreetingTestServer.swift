import Foundation

/// A stand-in for the bff server that speaks the greeting/status subset of the contract
/// (sessions, streams, `greeting/name` inputs, the `_test/status` hook, `/state`, stateless
/// search), over `ScriptedServer`. It lets LoadKit's engine be tested without the real server.
///
/// Its state is guarded by one lock; handlers run on connection threads. Servers made with
/// `init(sharing:)` serve the same sessions on their own ports, like the nodes of a cluster, and
/// count what each of them handled (`handled`), so a test can tell which requests went where.
final class GreetingTestServer: @unchecked Sendable {
    /// The sessions, shared by every server made with `init(sharing:)`.
    private final class Sessions: @unchecked Sendable {
        let lock = NSLock()
        var nextID = 0
        var all: [String: (seq: Int, inputSeq: Int, name: String, streams: [ScriptedServer.Client])] = [:]
    }

    /// Kinds of request, for `handled`.
    enum Kind: Hashable { case create, stream, input, delete, statusHook, other }

    private var server: ScriptedServer!
    private let shared: Sessions
    private var lock: NSLock { shared.lock }
    private var nextID: Int {
        get { shared.nextID }
        set { shared.nextID = newValue }
    }
    private var sessions: [String: (seq: Int, inputSeq: Int, name: String, streams: [ScriptedServer.Client])] {
        get { shared.all }
        _modify { yield &shared.all }
    }
    private var counts: [Kind: Int] = [:]
    private var inputs = 0
    private var keys: [String?] = []
    /// The `Idempotency-Key` of every greeting input received, in order (nil: none).
    var inputKeys: [String?] { lock.withLock { keys } }
    /// Stop the whole server when this many inputs have been answered (simulates a crash mid-run).
    var stopAfterInputs = Int.max
    /// Reject every Nth greeting input with `429` without applying it (0: never).
    var rejectEvery = 0
    private var received = 0
    /// Answer the status hook with 404, as a server without the test hook does.
    var hasStatusHook = true
    /// What the status hook answers when `hasStatusHook` is false (405: an older bff's static files).
    var noHookStatus = "404 Not Found"

    /// Answer this many DELETEs (the first ones) `503` with `Retry-After: 0`, deleting nothing.
    var busyDeletes = 0
    /// Sessions this server (and those sharing it) still has.
    var sessionCount: Int { lock.withLock { sessions.count } }

    var port: Int { server.port }

    /// Requests of `kind` this server (this port) handled.
    func handled(_ kind: Kind) -> Int { lock.withLock { counts[kind, default: 0] } }

    /// A server with sessions of its own.
    convenience init() throws { try self.init(shared: Sessions()) }

    /// A second server (port) for the sessions of `other`.
    convenience init(sharing other: GreetingTestServer) throws { try self.init(shared: other.shared) }

    private init(shared: Sessions) throws {
        self.shared = shared
        server = try ScriptedServer { [unowned self] request, client in handle(request, client) }
    }

    func stop() { server.stop() }

    private func respond(_ client: ScriptedServer.Client, _ status: String, _ body: String) {
        client.write(
            "HTTP/1.1 \(status)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
    }

    private static func chunk(_ text: String) -> String { String(text.utf8.count, radix: 16) + "\r\n" + text + "\r\n" }

    private func handle(_ request: ScriptedServer.Request, _ client: ScriptedServer.Client) {
        let parts = request.path.split(separator: "?")[0].split(separator: "/").map(String.init)
        lock.lock()
        defer { lock.unlock() }
        let kind: Kind =
            switch (request.method, parts.count) {
            case ("POST", 2) where parts == ["api", "sessions"]: .create
            case ("GET", 4) where parts[3] == "events": .stream
            case ("POST", 5) where parts[3] == "greeting" && parts[4] == "name": .input
            case ("DELETE", 3): .delete
            case ("POST", 3) where parts == ["api", "_test", "status"]: .statusHook
            default: .other
            }
        counts[kind, default: 0] += 1
        switch (request.method, parts.count) {
        case ("POST", 2) where parts == ["api", "sessions"]:
            nextID += 1
            let id = "s\(nextID)"
            sessions[id] = (0, 0, "", [])
            respond(client, "201 Created", "{\"id\":\"\(id)\",\"events\":\"/api/sessions/\(id)/events\"}")
        case ("GET", 4) where parts[3] == "events":
            guard var session = sessions[parts[2]] else { return respond(client, "404 Not Found", "{}") }
            client.write("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            client.write(
                Self.chunk("retry: 2000\n\nid: \(session.seq)\nevent: snapshot\ndata: {\"seq\":\(session.seq)}\n\n"))
            session.streams.append(client)
            sessions[parts[2]] = session
        case ("GET", 4) where parts[3] == "state":
            respond(client, sessions[parts[2]] == nil ? "404 Not Found" : "200 OK", "{\"seq\":0}")
        case ("GET", 3) where parts[1] == "search":
            respond(client, "200 OK", "{\"totalCount\":0,\"items\":[]}")
        case ("POST", 5) where parts[3] == "greeting" && parts[4] == "name":
            guard var session = sessions[parts[2]] else { return respond(client, "404 Not Found", "{}") }
            received += 1
            keys.append(request.header("Idempotency-Key"))
            if rejectEvery > 0 && received % rejectEvery == 0 { return respond(client, "429 Too Many Requests", "{}") }
            let name = String(decoding: request.body, as: UTF8.self).contains("\"\"") ? "" : "load"
            session.inputSeq += 1
            if name.isEmpty != session.name.isEmpty {
                session.seq += 1
                let event =
                    "id: \(session.seq)\nevent: greeting\n"
                    + "data: {\"inputSeq\":\(session.inputSeq),\"outputs\":{\"buttonEnabled\":\(!name.isEmpty)}}\n\n"
                for stream in session.streams { stream.write(Self.chunk(event)) }
            }
            session.name = name
            sessions[parts[2]] = session
            respond(client, "202 Accepted", "{\"inputSeq\":\(session.inputSeq)}")
            inputs += 1
            if inputs == stopAfterInputs { server.stop() }
        case ("POST", 3) where parts == ["api", "_test", "status"]:
            guard hasStatusHook else { return respond(client, noHookStatus, "{}") }
            for (id, var session) in sessions {
                session.seq += 1
                let event = "id: \(session.seq)\nevent: status\ndata: {\"outputs\":{\"reachable\":false}}\n\n"
                for stream in session.streams { stream.write(Self.chunk(event)) }
                sessions[id] = session
            }
            respond(client, "200 OK", "{}")
        case ("DELETE", 3):
            if busyDeletes > 0 {
                busyDeletes -= 1
                return client.write("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 0\r\nContent-Length: 0\r\n\r\n")
            }
            guard let session = sessions.removeValue(forKey: parts[2]) else {
                return respond(client, "404 Not Found", "{}")
            }
            for stream in session.streams {
                stream.write(Self.chunk("event: end\ndata: {\"reason\":\"deleted\"}\n\n") + "0\r\n\r\n")
                stream.close()
            }
            client.write("HTTP/1.1 204 No Content\r\n\r\n")
        default:
            respond(client, "404 Not Found", "{}")
        }
    }
}
