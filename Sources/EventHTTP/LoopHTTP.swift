import CLibevent
import Glibc
import Logging
import Primitives

/// One evhttp instance on one loop: accepts connections on that loop's listening socket, tracks
/// them, reads requests, applies the soft limits and dispatches to the router.
///
/// Threading: everything here runs on `loop`'s thread (set up before the thread starts).
// Unchecked: evhttp's callback context (`Unmanaged` in its C callbacks); its fields are loop-thread-only.
final class LoopHTTP: @unchecked Sendable {
    /// The server outlives its loops (it joins their threads before it can go away).
    unowned(unsafe) let server: HTTPServer
    let loop: EventLoop
    private(set) var http: OpaquePointer?
    private var boundSocket: OpaquePointer?
    /// Open connections by socket fd (small, dense integers): found per request without hashing.
    /// Loop-confined and never accessed re-entrantly: no dynamic exclusivity check per request.
    @exclusivity(unchecked) private var connections: [ConnectionState?] = []
    /// Reused buffer for streaming chunks (evhttp moves its contents out).
    let scratch: OpaquePointer
    let readTimeoutEnabled: Bool
    /// Read deadlines and stream write watches are checked by one periodic sweep per loop
    /// (`sweep`), every `sweepInterval` seconds: a connection's read deadline fires after
    /// `readTimeoutTicks` ticks, i.e. between `requestReadTimeout` and one interval later.
    let sweepInterval: Double
    let readTimeoutTicks: UInt64
    /// Sweeps run so far (the coarse clock of the read deadlines).
    private(set) var sweepTick: UInt64 = 0
    /// Connections with an armed read deadline or a stream write watch (`ConnectionState.sweepIndex`).
    private var sweepList: [ConnectionState] = []
    private var sweepEvent: OpaquePointer?
    /// `config.idleTimeout` and `config.writeTimeout` as timevals (nil: disabled), for the bufferevents.
    let idleTimeval: timeval?
    let writeTimeval: timeval?
    /// `config.writeTimeout` in nanoseconds (0: disabled), for the streams' own write watch.
    let writeTimeoutNanos: UInt64
    /// Set while evhttp_free tears every connection down at shutdown.
    var freeingAll = false
    /// The `Date` header value, formatted once per second.
    var date = DateHeaderCache()
    /// `config.commonHeaders` as wire lines for `RawReply`; nil when complete responses go through
    /// evhttp's header list instead (`directReplies` off, a common header `RawReply` cannot write,
    /// or a libevent other than the release whose `struct evhttp_request` it reads).
    let rawCommonHeaders: [UInt8]?
    /// Stream chunks are queued in one piece (`clibevent_stream_chunk`, which reads `struct evhttp_request`
    /// as the raw replies do); false (`directReplies` off, another libevent release): `evhttp_send_reply_chunk`.
    let directChunks: Bool
    /// This loop's request counts and latencies (merged across loops when /metrics is read).
    private(set) var requestMetrics = RequestMetrics()
    // Read on every request: kept here so the hot path copies no configuration struct and
    // retains nothing (they live as long as the server, which outlives the loop).
    let config: HTTPServer.Configuration
    unowned(unsafe) let metrics: ServerMetrics
    /// The routes, frozen when the server started.
    let routes: RouteTable
    let logger: Logger
    let debugLogging: Bool

    init(server: HTTPServer, loop: EventLoop, listenFD: Int32) {
        self.server = server
        self.loop = loop
        scratch = evbuffer_new()
        readTimeoutEnabled = server.configuration.requestReadTimeout > 0
        let watchedTimeouts = [server.configuration.requestReadTimeout, server.configuration.writeTimeout].filter {
            $0 > 0
        }
        sweepInterval = min(1, max(0.01, (watchedTimeouts.min() ?? 1) / 8))
        readTimeoutTicks = UInt64((max(0, server.configuration.requestReadTimeout) / sweepInterval).rounded(.up)) + 1
        idleTimeval = LoopHTTP.timeval(seconds: server.configuration.idleTimeout)
        writeTimeval = LoopHTTP.timeval(seconds: server.configuration.writeTimeout)
        writeTimeoutNanos = UInt64(max(0, server.configuration.writeTimeout) * 1e9)
        config = server.configuration
        metrics = server.metrics
        routes = server.router.table()
        logger = server.logger
        debugLogging = server.logger.logLevel <= .debug
        directChunks = server.configuration.directReplies && clibevent_raw_reply_supported() != 0
        rawCommonHeaders = directChunks ? RawReply.headerBlock(server.configuration.commonHeaders) : nil
        let cfg = config
        let http = evhttp_new(loop.base)!
        self.http = http
        let arg = Unmanaged.passUnretained(self).toOpaque()
        evhttp_set_allowed_methods(http, HTTPMethod.evhttpMask)
        evhttp_set_max_body_size(http, cfg.hardBodyLimit)
        evhttp_set_max_headers_size(http, cfg.hardHeaderLimit)
        if var idle = idleTimeval {
            evhttp_set_timeout_tv(http, &idle)  // read and write; `attach` gives writes their own
        }
        RawReply.defaultContentType.withUTF8Buffer { name in
            name.withMemoryRebound(to: CChar.self) { evhttp_set_default_content_type(http, $0.baseAddress) }
        }
        evhttp_set_bevcb(
            http,
            { _, arg in
                Unmanaged<LoopHTTP>.fromOpaque(arg!).takeUnretainedValue().newConnection()
            }, arg)
        evhttp_set_gencb(
            http,
            { req, arg in
                Unmanaged<LoopHTTP>.fromOpaque(arg!).takeUnretainedValue().handle(req!)
            }, arg)
        boundSocket = evhttp_accept_socket_with_handle(http, listenFD)
        if !watchedTimeouts.isEmpty {
            sweepEvent = event_new(
                loop.base, -1, Int16(EV_PERSIST),
                { _, _, arg in
                    Unmanaged<LoopHTTP>.fromOpaque(arg!).takeUnretainedValue().sweep()
                }, arg)
            var tv = loop.timeout(sweepInterval)
            event_add(sweepEvent, &tv)
        }
    }

    /// Adds a connection to the sweep's list (it stays there until the sweep finds nothing to check
    /// or the connection closes).
    func watch(_ state: ConnectionState) {
        state.sweepIndex = sweepList.count
        sweepList.append(state)
    }

    /// Removes a connection from the sweep's list (swap with the last: O(1)).
    func unwatch(_ state: ConnectionState) {
        let i = state.sweepIndex
        guard i >= 0, i < sweepList.count, sweepList[i] === state else { return }
        let last = sweepList.removeLast()
        if last !== state {
            sweepList[i] = last
            last.sweepIndex = i
        }
        state.sweepIndex = -1
    }

    /// The periodic check of read deadlines and stream write watches (see `sweepInterval`).
    /// Backwards, so that the swap-removals (here, or of connections closed meanwhile) only move
    /// entries already checked.
    private func sweep() {
        sweepTick &+= 1
        guard !sweepList.isEmpty else { return }
        let now = monotonicNanos()
        var i = sweepList.count - 1
        while i >= 0 {
            if i < sweepList.count {
                let state = sweepList[i]
                if !state.sweep(tick: sweepTick, now: now) { unwatch(state) }
            }
            i -= 1
        }
    }

    /// A plain timeval of `seconds` (nil when not positive).
    static func timeval(seconds: Double) -> Glibc.timeval? {
        guard seconds > 0 else { return nil }
        return Glibc.timeval(tv_sec: Int(seconds), tv_usec: Int(seconds.truncatingRemainder(dividingBy: 1) * 1e6))
    }

    // MARK: connections

    private func newConnection() -> OpaquePointer? {
        guard let bev = bufferevent_socket_new(loop.base, -1, Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)) else { return nil }
        let state = Unmanaged.passRetained(ConnectionState(owner: self, bev: bev)).toOpaque()
        // evhttp builds the connection around `bev` right after this callback returns; attach then.
        event_base_once(
            loop.base, -1, Int16(EV_TIMEOUT),
            { _, _, arg in
                let state = Unmanaged<ConnectionState>.fromOpaque(arg!).takeRetainedValue()
                state.owner.attach(state)
            }, state, nil)
        return bev
    }

    private func attach(_ state: ConnectionState) {
        var cbarg: UnsafeMutableRawPointer?
        bufferevent_getcb(state.bev, nil, nil, nil, &cbarg)
        guard let cbarg else { return }
        let evcon = OpaquePointer(cbarg)
        state.attach(evcon: evcon)
        let fd = Int(state.fd)
        guard fd >= 0 else { return }
        if fd >= connections.count {
            connections.append(contentsOf: repeatElement(nil, count: fd + 1 - connections.count))
        }
        connections[fd] = state
        let open = metrics.connectionCount.add(1, ordering: .relaxed).newValue
        metrics.openConnections.increment()
        if open > config.maxConnections {
            state.overLimit = true
            metrics.rejectedConnections.increment()
        }
        // Per client: a trusted proxy carries many clients and is not counted; anyone else past its
        // share is closed at once, unanswered (an answer would cost what the limit saves).
        state.peer = ClientAddress(peerOf: state.fd) ?? .loopback
        if config.trustedProxies.contains(state.peer) {
            state.peerIsTrustedProxy = true
        } else if metrics.clientConnections.open(state.peer, limit: config.maxConnectionsPerClient) {
            state.countedForClient = true
        } else {
            metrics.clientConnectionRefusals.increment()
            state.closeNow()
        }
    }

    func connectionClosed(_ state: ConnectionState) {
        let fd = Int(state.fd)
        guard fd >= 0, fd < connections.count, connections[fd] === state else { return }
        connections[fd] = nil
        metrics.connectionCount.subtract(1, ordering: .relaxed)
        metrics.openConnections.decrement()
        if state.countedForClient {
            state.countedForClient = false
            metrics.clientConnections.close(state.peer)
        }
    }

    /// Stops accepting new connections on this loop (existing ones go on).
    func stopAccepting() {
        if let http, let b = boundSocket {
            evhttp_del_accept_socket(http, b)
            boundSocket = nil
        }
    }

    /// Closes every connection and the evhttp instance (shutdown).
    func freeAll() {
        stopAccepting()
        freeingAll = true
        if let e = sweepEvent {
            event_free(e)
            sweepEvent = nil
        }
        if let http { evhttp_free(http) }
        sweepList = []
        http = nil
        evbuffer_free(scratch)
    }

    // MARK: requests

    /// The tracked connection a request arrived on (nil only if it was never attached).
    private func connection(of req: OpaquePointer) -> ConnectionState? {
        guard let evcon = evhttp_request_get_connection(req) else { return nil }
        let fd = Int(bufferevent_getfd(evhttp_connection_get_bufferevent(evcon)))
        guard fd >= 0, fd < connections.count, let state = connections[fd], state.evcon == evcon else { return nil }
        return state
    }

    private func handle(_ req: OpaquePointer) {
        let start = monotonicNanos()
        let conn = connection(of: req)
        conn?.requestStarted()
        let knownMethod = HTTPMethod(command: evhttp_request_get_command(req))
        let method = knownMethod ?? .CONNECT  // no route handles CONNECT: unknown methods get 405 below
        let core = EvhttpResponder(request: req, owner: self, connection: conn, method: method, startNanos: start)
        conn?.current = core
        let responder = HTTPResponder(LoopBoundReference<ResponderCore>(onLoop: core, loop: loop))
        if conn?.overLimit == true {
            return responder.send(
                HTTPResponse.problem(
                    status: 503,
                    detail: "the server has reached its limit of \(config.maxConnections) open connections",
                    headers: [("Retry-After", "1"), ("Connection", "close")]))
        }
        guard let uriC = evhttp_request_get_uri(req) else {
            return responder.send(HTTPResponse.problem(status: 400, detail: "missing request target"))
        }
        // Split at '?' on the C string: one Swift string per part, no scan of a Swift string.
        let rawPath: String
        let rawQuery: String?
        var authority: String?  // absolute form: stands for Host (RFC 9112 §3.2.2)
        if uriC.pointee != CChar(UInt8(ascii: "/")), let absolute = AbsoluteFormTarget(String(cString: uriC)) {
            (rawPath, rawQuery, authority) = (absolute.rawPath, absolute.rawQuery, absolute.authority)
            clibevent_request_for_origin(req)
        } else if let q = strchr(uriC, Int32(UInt8(ascii: "?"))) {
            let n = uriC.distance(to: UnsafePointer(q))
            rawPath = uriC.withMemoryRebound(to: UInt8.self, capacity: n) {
                String(decoding: UnsafeBufferPointer(start: $0, count: n), as: UTF8.self)
            }
            rawQuery = String(cString: q + 1)
        } else {
            rawPath = String(cString: uriC)
            rawQuery = nil
        }
        guard rawPath.utf8.first == UInt8(ascii: "/") else {
            return responder.send(
                HTTPResponse.problem(status: 400, detail: "the request target must be an absolute path"))
        }
        var headers: [(String, String)] = []
        var headerBytes = 0
        if let q = evhttp_request_get_input_headers(req) {
            var count = 0  // the exact capacity: one allocation of the size needed (wrk sends 1 header)
            var c = clibevent_headers_first(q)
            while let h = c {
                count += 1
                c = clibevent_headers_next(h)
            }
            headers.reserveCapacity(count)
            var kv = clibevent_headers_first(q)
            while let h = kv {
                let name = String(cString: h.pointee.key)
                let value = String(cString: h.pointee.value)
                headerBytes += name.utf8.count + value.utf8.count + 4
                headers.append((name, value))
                kv = clibevent_headers_next(h)
            }
        }
        if let authority {
            headers.removeAll { $0.0.caseInsensitiveEquals("Host") }
            headers.append(("Host", authority))
        }
        if headerBytes > config.maxHeaderBytes {
            return responder.send(
                HTTPResponse.problem(
                    status: 431,
                    detail: "request headers are \(headerBytes) bytes; the limit is \(config.maxHeaderBytes) bytes",
                    headers: [("Connection", "close")]))
        }
        var body: [UInt8] = []
        if let inbuf = evhttp_request_get_input_buffer(req) {
            let n = evbuffer_get_length(inbuf)
            if n > config.maxBodyBytes {
                return responder.send(
                    HTTPResponse.problem(
                        status: 413, detail: "request body is \(n) bytes; the limit is \(config.maxBodyBytes) bytes",
                        headers: [("Connection", "close")]))
            }
            if n > 0 {
                body = bytesWritten(count: n) { max(0, Int(evbuffer_copyout(inbuf, $0.baseAddress, n))) }
            }
        }
        var request = HTTPRequest(
            method: method, rawPath: rawPath, rawQuery: rawQuery, headers: headers, body: body, loop: loop)
        if let conn {
            // A trusted proxy's requests name their client; anyone else's headers are not believed.
            request.client =
                conn.peerIsTrustedProxy ? config.trustedProxies.client(peer: conn.peer, headers: headers) : conn.peer
            request.viaTrustedProxy = conn.peerIsTrustedProxy
        }
        routes.dispatch(request, knownMethod: knownMethod, to: responder)
        if !core.isClosed { conn?.keepReadingWhileAnswerPending() }
    }

    /// Counts one response `RawReply` wrote (`http_direct_replies_total`).
    func countDirectReply() { requestMetrics.directReplies &+= 1 }

    /// Records the request metrics and the debug log line for one answered request.
    func record(route: String, routeIndex: Int, method: HTTPMethod, status: Int, startNanos: UInt64) {
        let nanos = Int64(monotonicNanos() &- startNanos)
        requestMetrics.record(route: route, routeIndex: routeIndex, method: method, status: status, nanos: nanos)
        if debugLogging {
            logger.debug(
                "request",
                metadata: [
                    "method": "\(method.rawValue)", "route": "\(route)", "status": "\(status)",
                    "us": "\(nanos / 1000)", "loop": "\(loop.index)",
                ])
        }
        if status >= 500 && status != 503 {
            logger.warning("server error", metadata: ["route": "\(route)", "status": "\(status)"])
        }
    }
}
