import CLibevent

/// The handle a handler answers through: exactly one `send` or one `startStream`.
///
/// It writes to an evhttp connection — a complete response in one piece straight into the
/// connection's output buffer (`RawReply`) where evhttp's rules allow, otherwise (HEAD, 1xx, 204,
/// 304, while draining, a stream's head, …) through evhttp's header list and `evhttp_send_reply` —
/// or — the socketless test seam — to a `ResponseSink` such as
/// `RecordingResponse` (`HTTPResponder(recordingTo:loop:method:)`, used by `InProcessClient`).
/// One final class with an optional sink rather than a protocol for handlers to take: the socket
/// path stays statically dispatched and pays one nil check.
///
/// Threading: bound to the loop that owns the connection. Use it only on `loop` (hop there with
/// `loop.execute` when the answer is computed elsewhere). Sending after the peer left is a no-op.
public final class HTTPResponder: @unchecked Sendable {
    /// The loop that owns the connection.
    public let loop: EventLoop
    private var request: OpaquePointer?
    /// nil for a responder with a sink (no connection, no evhttp).
    private unowned(unsafe) let owner: LoopHTTP?
    private let connection: ConnectionState?
    /// Where the response goes instead of evhttp (tests); nil on the socket path.
    private let sink: (any ResponseSink)?
    /// For a sink responder: true until the response is complete (or the stream ended).
    private var sinkOpen = false
    let startNanos: UInt64
    let isHead: Bool
    var route: String = "unmatched"
    var routeIndex = RequestMetrics.unmatchedRoute
    let method: HTTPMethod
    /// The open stream, until it ends or its connection closes. The stream holds its responder
    /// strongly, so this reference must be dropped then: kept, the pair (and the connection state
    /// the responder holds) leaked with every stream, about 290 bytes each, and the stream's
    /// `onClose` closure kept the memory of what it captured unowned (a session's stream object)
    /// allocated too, 430 bytes with a session per stream (issue 10, item 9).
    private(set) var stream: HTTPStream?

    init(request: OpaquePointer, owner: LoopHTTP, connection: ConnectionState?, method: HTTPMethod, startNanos: UInt64)
    {
        self.request = request
        self.owner = owner
        self.loop = owner.loop
        self.connection = connection
        self.method = method
        self.isHead = method == .HEAD
        self.startNanos = startNanos
        self.sink = nil
    }

    /// A responder without a connection: what it sends goes to `sink` (in-process tests).
    public init(recordingTo sink: any ResponseSink, loop: EventLoop, method: HTTPMethod) {
        self.sink = sink
        self.sinkOpen = true
        self.loop = loop
        self.owner = nil
        self.connection = nil
        self.method = method
        self.isHead = method == .HEAD
        self.startNanos = 0
    }

    /// True once the response was sent, or the peer is gone.
    public var isClosed: Bool { sink == nil ? request == nil : !sinkOpen }

    /// Sends a complete response. Later calls are ignored.
    public func send(_ response: HTTPResponse) {
        precondition(loop.inEventLoop, "HTTPResponder used off its loop")
        if let sink {
            guard sinkOpen, stream == nil else { return }
            sinkOpen = false
            return sink.responder(self, sent: response, route: route)
        }
        guard let req = request, stream == nil else { return }
        request = nil
        // In one piece when evhttp's rules allow (RawReply); draining adds `Connection: close`,
        // which evhttp must see in the output headers to close: its way.
        let owner = owner.unsafelyUnwrapped
        if !isHead, let common = owner.rawCommonHeaders, owner.server.state != .draining,
            RawReply.send(response, to: req, commonHeaders: common, date: &owner.date)
        {
            owner.countDirectReply()
            return finished(status: response.status)
        }
        let out = evhttp_request_get_output_headers(req)
        addHeaders(out, response.headers)
        if isHead {
            if response.header("Content-Length") == nil && response.status != 304 && response.status != 204 {
                evhttp_add_header(out, "Content-Length", String(response.body.count))
            }
        } else {
            if !response.body.isEmpty {
                response.body.withUnsafeBytes {
                    _ = evbuffer_add(evhttp_request_get_output_buffer(req), $0.baseAddress, $0.count)
                }
            }
            // What evhttp would add (for a response with a body) with `snprintf("%ld")`, formatted
            // here on the stack; no status that must not have one (1xx, 204, 304).
            let status = response.status
            if status >= 200 && status != 204 && status != 304 && response.header("Content-Length") == nil {
                HTTPResponder.withDecimal(response.body.count) { _ = evhttp_add_header(out, "Content-Length", $0) }
            }
        }
        HTTPStatus.withReason(response.status) { evhttp_send_reply(req, Int32(response.status), $0, nil) }
        finished(status: response.status)
    }

    /// Sends a problem response.
    public func send(_ error: HTTPError) { send(error.response) }

    /// Starts a chunked streaming response; write to the returned stream, then `end()` it.
    /// Returns nil when the peer is already gone.
    public func startStream(status: Int = 200, headers: [(String, String)]) -> HTTPStream? {
        precondition(loop.inEventLoop, "HTTPResponder used off its loop")
        if let sink {
            guard sinkOpen, stream == nil else { return nil }
            sink.responder(self, startedStream: status, headers: headers, route: route)
            let s = HTTPStream(responder: self)
            stream = s
            return s
        }
        guard let req = request, stream == nil, let owner else { return nil }
        addHeaders(evhttp_request_get_output_headers(req), headers)
        HTTPStatus.withReason(status) { evhttp_send_reply_start(req, Int32(status), $0) }
        // The head is in the output buffer now. The request would keep its header copies (a
        // strdup'ed name, value and list entry each) as long as the stream lasts: drop them, except
        // `Connection`, which evhttp reads again when the response ends.
        HTTPResponder.dropHeaders(evhttp_request_get_output_headers(req))
        HTTPResponder.dropHeaders(evhttp_request_get_input_headers(req))
        let s = HTTPStream(responder: self)
        stream = s
        connection?.startCloseWatch()
        owner.metrics.openStreams.increment()
        owner.record(route: route, routeIndex: routeIndex, method: method, status: status, startNanos: startNanos)
        return s
    }

    /// `n` (not negative) in decimal as a C string on the stack.
    private static func withDecimal<R>(_ n: Int, _ body: (UnsafePointer<CChar>) -> R) -> R {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 24) { buffer in
            var i = 23
            buffer[i] = 0
            var v = n
            repeat {
                i -= 1
                buffer[i] = CChar(48 + v % 10)
                v /= 10
            } while v > 0
            return body(buffer.baseAddress! + i)
        }
    }

    /// Clears `headers` but for their `Connection` field.
    private static func dropHeaders(_ headers: UnsafeMutablePointer<evkeyvalq>?) {
        guard let headers else { return }
        let connection = evhttp_find_header(headers, "Connection").map { String(cString: $0) }
        evhttp_clear_headers(headers)
        if let connection { _ = evhttp_add_header(headers, "Connection", connection) }
    }

    private func addHeaders(_ out: UnsafeMutablePointer<evkeyvalq>?, _ headers: [(String, String)]) {
        let owner = owner.unsafelyUnwrapped
        for (n, v) in owner.config.commonHeaders { addHeader(out, n, v) }
        for (n, v) in headers { addHeader(out, n, v) }
        if owner.server.state == .draining { evhttp_add_header(out, "Connection", "close") }
        owner.date.withCurrent { _ = evhttp_add_header(out, "Date", $0) }  // evhttp then formats none
    }

    /// `evhttp_add_header` with both strings as C strings: a native Swift string is already
    /// NUL-terminated in its storage and a small one is copied to the stack; no heap C string.
    private func addHeader(_ out: UnsafeMutablePointer<evkeyvalq>?, _ name: String, _ value: String) {
        name.withCString { n in value.withCString { v in _ = evhttp_add_header(out, n, v) } }
    }

    private func finished(status: Int) {
        connection?.requestFinished()
        owner.unsafelyUnwrapped.record(
            route: route, routeIndex: routeIndex, method: method, status: status, startNanos: startNanos)
    }

    // MARK: streaming internals (used by HTTPStream)

    func writeChunk(_ bytes: UnsafeRawBufferPointer) {
        if let sink {
            if sinkOpen { sink.responder(self, wrote: bytes) }
            return
        }
        guard let req = request, let owner else { return }
        let before = connection?.outputLength ?? 0
        evbuffer_add(owner.scratch, bytes.baseAddress, bytes.count)
        evhttp_send_reply_chunk(req, owner.scratch)
        connection?.streamBytesAdded(since: before)
        connection?.flushOutput()
    }

    var queuedBytes: Int {
        guard sink == nil, request != nil, let evcon = connection?.evcon else { return 0 }
        return evbuffer_get_length(bufferevent_get_output(evhttp_connection_get_bufferevent(evcon)))
    }

    func endStream() {
        if let sink {
            guard sinkOpen else { return }
            sinkOpen = false
            stream?.markClosed(notify: false)
            return sink.responderEnded(self)
        }
        guard let req = request, let owner else { return }
        request = nil
        evhttp_send_reply_end(req)
        owner.metrics.openStreams.decrement()
        stream?.markClosed(notify: false)
        stream = nil  // breaks the responder ⇄ stream cycle (see `stream`)
        connection?.requestFinished()
    }

    /// The connection is going away under this response.
    func connectionClosed(freeRequest: Bool) {
        guard let req = request, let owner else { return }
        request = nil
        if freeRequest { evhttp_request_free(req) }
        if let s = stream {
            stream = nil  // breaks the responder ⇄ stream cycle (see `stream`)
            owner.metrics.openStreams.decrement()
            s.markClosed(notify: true)
        }
    }
}
