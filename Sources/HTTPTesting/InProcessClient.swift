/// HTTPTesting: requests through a server's router and handlers in process, no sockets
/// (`InProcessClient`, `RecordingResponse`), for the route, encoding and session tests of this package
/// and of packages built on it.
import EventHTTP

/// What a handler answered, recorded instead of written to a socket.
///
/// Threading: written on the responder's loop (in-process, the thread of the `InProcessClient`),
/// read by that thread once `request` returns; not `Sendable`.
public final class RecordingResponse: ResponseSink {
    /// The complete response, or the head of a stream (status and headers, body empty).
    public private(set) var response: HTTPResponse?
    /// The route pattern that answered ("unmatched" for 404/405 before any handler).
    public private(set) var route: String?
    /// Bytes a stream wrote so far.
    public private(set) var streamed: [UInt8] = []
    public private(set) var isStream = false
    public private(set) var ended = false

    public init() {}

    public func responder(_ responder: HTTPResponder, sent response: HTTPResponse, route: String) {
        self.response = response
        self.route = route
        ended = true
    }

    public func responder(
        _ responder: HTTPResponder, startedStream status: Int, headers: [(String, String)], route: String
    ) {
        response = HTTPResponse(status: status, headers: headers)
        self.route = route
        isStream = true
    }

    public func responder(_ responder: HTTPResponder, wrote bytes: UnsafeRawBufferPointer) {
        streamed.append(contentsOf: bytes)
    }

    public func responderEnded(_ responder: HTTPResponder) { ended = true }
}

/// Runs requests through a server's router and handlers in-process: no sockets, no loop threads
/// (like SwiftNIO's `EmbeddedChannel` or Hummingbird's router test framework). The calling thread
/// plays every loop of the server: work a handler hands to a loop with `execute` runs when the
/// client drains the loops' queues, in order, before `request` returns.
///
/// For routing, encoding and session tests; what needs sockets (limits, streaming back-pressure,
/// time-outs) stays in the live tests. Use a server that was never started.
///
/// Threading: one thread, the one that created the client.
public final class InProcessClient {
    public let server: HTTPServer

    /// Takes over `server`'s loops on the calling thread (the server must not be started).
    public init(server: HTTPServer) {
        precondition(server.state == .starting, "InProcessClient needs a server that was never started")
        self.server = server
        for loop in server.loops { loop.adoptCallingThread() }
    }

    /// Sends one request as if it arrived on a connection of loop `loop`; returns what was recorded
    /// once every loop's queue is empty (`response` is nil if the handler never answered).
    @discardableResult
    public func request(
        _ method: HTTPMethod, _ target: String, headers: [(String, String)] = [], body: [UInt8] = [], loop: Int = 0
    ) -> RecordingResponse {
        let recording = RecordingResponse()
        let onLoop = server.loops[loop]
        let (path, query) = InProcessClient.split(target)
        let request = HTTPRequest(
            method: method, rawPath: path, rawQuery: query, headers: headers, body: body, loop: onLoop)
        let responder = HTTPResponder(recordingTo: recording, loop: onLoop, method: method)
        server.router.dispatch(request, knownMethod: method, to: responder)
        runPending()
        return recording
    }

    /// Runs queued loop work until every loop's queue is empty.
    public func runPending() {
        var ran = true
        while ran {
            ran = false
            for loop in server.loops where loop.runPendingJobs() { ran = true }
        }
    }

    private static func split(_ target: String) -> (String, String?) {
        guard let q = target.firstIndex(of: "?") else { return (target, nil) }
        return (String(target[..<q]), String(target[target.index(after: q)...]))
    }
}
