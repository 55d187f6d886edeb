import CLibevent

/// What answers one request, behind its `HTTPResponder` handle (and its `HTTPStream` handle once it
/// streams): exactly one `send` or one `startStream`. This base class holds what every responder
/// keeps (the route, the method, the stream's state and its close observer); where the bytes go is its
/// subclass's job: `EvhttpResponder` writes to an evhttp connection, `SinkResponder` hands them to a
/// `ResponseSink` (the socketless seam `InProcessClient` in BFFTesting uses). A stream's state lives
/// here too: a streaming response costs no second object, and there is no responder ⇄ stream cycle
/// to break.
///
/// Threading: owned by the loop that owns the request, and not `Sendable`: other threads hold it only
/// through the handles, whose `LoopBoundReference` traps off `loop`. Sending after the peer left is a
/// no-op.
class ResponderCore {
    /// The loop that owns the request.
    let loop: EventLoop
    let isHead: Bool
    var route: String = "unmatched"
    var routeIndex = RequestMetrics.unmatchedRoute
    let method: HTTPMethod
    /// A stream was started (it stays true; `streamClosed` says when the stream is over).
    fileprivate(set) var streaming = false
    /// True after the stream's `end()` or after the peer left (`HTTPStream.isClosed`).
    private(set) var streamClosed = false
    /// Who is told when the peer leaves a stream: a closure (`onClose`) or an object
    /// (`observeClose`). Dropped when the stream closes, so that an observer that holds the stream
    /// forms no lasting cycle (kept, an observer's memory stayed allocated with every stream).
    var closeObserver: CloseObserver?
    enum CloseObserver {
        case closure(() -> Void)
        case object(any HTTPStreamCloseObserver)
    }

    init(loop: EventLoop, method: HTTPMethod) {
        self.loop = loop
        self.method = method
        self.isHead = method == .HEAD
    }

    /// The handle of this responder (for a sink's callbacks). On `loop` only.
    var handle: HTTPResponder { HTTPResponder(LoopBoundReference(onLoop: self, loop: loop)) }

    /// True once the response was sent, or the peer is gone.
    var isClosed: Bool { fatalError("a ResponderCore subclass answers") }

    /// Sends a complete response. Later calls are ignored.
    func send(_ response: HTTPResponse) { fatalError("a ResponderCore subclass answers") }

    /// Starts a chunked streaming response; true when it started (false when the peer is already gone
    /// or a response was sent).
    func startStream(status: Int, headers: [(String, String)]) -> Bool {
        fatalError("a ResponderCore subclass answers")
    }

    /// One chunk of the stream (only while it is open).
    func writeChunk(_ bytes: UnsafeRawBufferPointer) { fatalError("a ResponderCore subclass answers") }

    /// Bytes written but not yet taken by the peer.
    var queuedBytes: Int { 0 }

    /// Finishes the stream (only while it is open).
    func endStream() { fatalError("a ResponderCore subclass answers") }

    /// Marks that a stream started (by a subclass, once its head is out).
    final func markStreaming() { streaming = true }

    /// The stream is over (ended, or its peer left): its observer is dropped, and told when `notify`.
    final func markStreamClosed(notify: Bool) {
        guard streaming, !streamClosed else { return }
        streamClosed = true
        // The observer will not be told any more: drop it (and whatever it holds) either way.
        let observer = closeObserver
        closeObserver = nil
        guard notify else { return }
        switch observer {
        case .closure(let cb)?: cb()
        case .object(let o)?: o.httpStreamPeerLeft()
        case nil: break
        }
    }
}

/// A responder that writes to an evhttp connection: a complete response in one piece straight into
/// the connection's output buffer (`RawReply`) where evhttp's rules allow, otherwise (HEAD, 1xx, 204,
/// 304, while draining, a stream's head, …) through evhttp's header list and `evhttp_send_reply`.
///
/// Threading: the connection's loop only.
final class EvhttpResponder: ResponderCore {
    private var request: OpaquePointer?
    private unowned(unsafe) let owner: LoopHTTP
    private let connection: ConnectionState?
    let startNanos: UInt64

    init(request: OpaquePointer, owner: LoopHTTP, connection: ConnectionState?, method: HTTPMethod, startNanos: UInt64)
    {
        self.request = request
        self.owner = owner
        self.connection = connection
        self.startNanos = startNanos
        super.init(loop: owner.loop, method: method)
    }

    override var isClosed: Bool { request == nil }

    override func send(_ response: HTTPResponse) {
        guard let req = request, !streaming else { return }
        request = nil
        // In one piece when evhttp's rules allow (RawReply); draining adds `Connection: close`,
        // which evhttp must see in the output headers to close: its way.
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
                EvhttpResponder.withDecimal(response.body.count) { _ = evhttp_add_header(out, "Content-Length", $0) }
            }
        }
        HTTPStatus.withReason(response.status) { evhttp_send_reply(req, Int32(response.status), $0, nil) }
        finished(status: response.status)
    }

    override func startStream(status: Int, headers: [(String, String)]) -> Bool {
        guard let req = request, !streaming else { return false }
        addHeaders(evhttp_request_get_output_headers(req), headers)
        HTTPStatus.withReason(status) { evhttp_send_reply_start(req, Int32(status), $0) }
        // The head is in the output buffer now. The request would keep its header copies (a
        // strdup'ed name, value and list entry each) as long as the stream lasts: drop them, except
        // `Connection`, which evhttp reads again when the response ends.
        EvhttpResponder.dropHeaders(evhttp_request_get_output_headers(req))
        EvhttpResponder.dropHeaders(evhttp_request_get_input_headers(req))
        markStreaming()
        connection?.startCloseWatch()
        owner.metrics.openStreams.increment()
        owner.record(route: route, routeIndex: routeIndex, method: method, status: status, startNanos: startNanos)
        return true
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
        owner.record(
            route: route, routeIndex: routeIndex, method: method, status: status, startNanos: startNanos)
    }

    // MARK: streaming (through HTTPStream)

    override func writeChunk(_ bytes: UnsafeRawBufferPointer) {
        guard let req = request else { return }
        let before = connection?.outputLength ?? 0
        // evhttp's way when direct chunks are off, or if the direct way found no memory for the chunk
        if !owner.directChunks || clibevent_stream_chunk(req, bytes.baseAddress, bytes.count) == 0 {
            evbuffer_add(owner.scratch, bytes.baseAddress, bytes.count)
            evhttp_send_reply_chunk(req, owner.scratch)
        }
        connection?.streamBytesAdded(since: before)
        connection?.flushOutput()
        connection?.waitToWriteOnlyIfPending()
    }

    override var queuedBytes: Int {
        guard request != nil, let evcon = connection?.evcon else { return 0 }
        return evbuffer_get_length(bufferevent_get_output(evhttp_connection_get_bufferevent(evcon)))
    }

    override func endStream() {
        guard let req = request else { return }
        request = nil
        evhttp_send_reply_end(req)
        if streaming { owner.metrics.openStreams.decrement() }
        markStreamClosed(notify: false)
        connection?.requestFinished()
    }

    /// The connection is going away under this response.
    func connectionClosed(freeRequest: Bool) {
        guard let req = request else { return }
        request = nil
        if freeRequest { evhttp_request_free(req) }
        if streaming && !streamClosed {
            owner.metrics.openStreams.decrement()
            markStreamClosed(notify: true)
        }
    }
}

/// A responder without a connection: what it sends goes to a `ResponseSink` (the socketless seam).
///
/// Threading: its loop only (in-process, the thread playing that loop).
final class SinkResponder: ResponderCore {
    private let sink: any ResponseSink
    /// True until the response is complete (or the stream ended).
    private var open = true

    init(sink: any ResponseSink, loop: EventLoop, method: HTTPMethod) {
        self.sink = sink
        super.init(loop: loop, method: method)
    }

    override var isClosed: Bool { !open }

    override func send(_ response: HTTPResponse) {
        guard open, !streaming else { return }
        open = false
        sink.responder(handle, sent: response, route: route)
    }

    override func startStream(status: Int, headers: [(String, String)]) -> Bool {
        guard open, !streaming else { return false }
        sink.responder(handle, startedStream: status, headers: headers, route: route)
        markStreaming()
        return true
    }

    override func writeChunk(_ bytes: UnsafeRawBufferPointer) {
        if open { sink.responder(handle, wrote: bytes) }
    }

    override func endStream() {
        guard open else { return }
        open = false
        markStreamClosed(notify: false)
        sink.responderEnded(handle)
    }
}
