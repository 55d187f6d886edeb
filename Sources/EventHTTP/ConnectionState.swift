import CLibevent
import Glibc

/// What the server tracks about one accepted connection: its evhttp connection, the request being
/// handled, the request-read deadline and the early-close watch of a streaming response.
///
/// The close watch costs no allocation (it was an `event` of its own per stream): the
/// bufferevent keeps reading while the response streams, with evhttp's read callback off, so the
/// peer's FIN or reset reaches evhttp's error callback, which frees the connection.
///
/// Threading: owned by the loop that accepted the connection (`LoopHTTP`).
final class ConnectionState {
    // Stored properties are laid out in declaration order: the word-sized ones first, then the
    // 4-byte socket and the flags together, so that no padding sits between them (one of these per
    // connection).

    /// The loop outlives its connections (evhttp_free closes them all first).
    unowned(unsafe) let owner: LoopHTTP
    /// The peer's address (loopback until attached).
    var peer = ClientAddress.loopback
    let bev: OpaquePointer
    var evcon: OpaquePointer?
    /// Request-read deadline: armed (at the loop's sweep tick `readArmedTick`) when bytes arrive
    /// while no request is being handled; checked by the loop's periodic sweep (`LoopHTTP.sweep`),
    /// so arming and disarming it per request is two stores, not an `event_add`/`event_del`.
    private var readArmedTick: UInt64 = 0
    /// Its index in the loop's list of connections the sweep checks (-1: not in it).
    var sweepIndex = -1
    /// The responder of the request being handled, if any.
    var current: EvhttpResponder?
    private var inputCallback: OpaquePointer?
    /// Write watch of a streaming response, checked by the sweep (no buffer callback, no timer):
    /// the bytes the stream added to the output buffer since the watch started, how many of them the
    /// peer had taken at the last sweep, and when the peer last took bytes (or bytes started
    /// waiting), monotonic nanoseconds.
    private var outputAdded = 0
    private var outputTaken = 0
    private var lastWriteProgress: UInt64 = 0
    /// The framing of the requests arriving on this connection, followed ahead of evhttp's parser.
    /// (Loop-confined, never accessed re-entrantly: no dynamic exclusivity check per request.)
    @exclusivity(unchecked) private var framing: RequestFraming
    /// A request refused by `framing`: answered (problem JSON) and the connection closed once the
    /// requests before it are answered. Out of line (a reference instead of the whole value inline): rare.
    private var refused: Refused?
    /// The socket, as it was when the connection was attached (the key in `LoopHTTP.connections`).
    private(set) var fd: Int32 = -1
    private var readArmed = false
    /// A request is with a handler (or streaming): no read deadline, no keep-alive reads.
    var handling = false
    /// Past the connection limit: its first request gets 503 and the connection closes.
    var overLimit = false
    /// The peer is a trusted proxy: each request names its client in its forwarding headers.
    var peerIsTrustedProxy = false
    /// Counted in the server's per-client connections (`ClientConnections`), until it closes.
    var countedForClient = false
    /// Set while the server itself frees the evhttp connection (libevent then frees the request).
    var freeingOurselves = false
    /// A streaming response is under way (its close watch and write watch are on).
    private var streaming = false
    /// `keepReadingWhileAnswerPending` took the bufferevent's time-outs off until the answer.
    private var answerPending = false
    private var writeWatching = false
    private var rejectionScheduled = false
    /// Closing because too much unread input arrived behind the request being answered.
    private var flooded = false
    var isClosed = false

    /// A refused request's rejection, boxed (see `refused`).
    private final class Refused {
        let rejection: RequestFraming.Rejection
        init(_ rejection: RequestFraming.Rejection) { self.rejection = rejection }
    }

    private var rejection: RequestFraming.Rejection? {
        get { refused?.rejection }
        set { refused = newValue.map(Refused.init) }
    }

    init(owner: LoopHTTP, bev: OpaquePointer) {
        self.owner = owner
        self.bev = bev
        framing = RequestFraming(maxHeaderBytes: owner.config.maxHeaderBytes, maxBodyBytes: owner.config.maxBodyBytes)
    }

    /// Called once evhttp has built the connection (same loop iteration as the accept).
    func attach(evcon: OpaquePointer) {
        self.evcon = evcon
        fd = bufferevent_getfd(bev)
        // Responses and stream events are written whole (one writev each): send them at once
        // instead of letting Nagle hold a small event back until the peer's delayed ACK arrives.
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let arg = Unmanaged.passUnretained(self).toOpaque()
        evhttp_connection_set_closecb(
            evcon,
            { _, arg in
                Unmanaged<ConnectionState>.fromOpaque(arg!).takeUnretainedValue().connectionClosed()
            }, arg)
        inputCallback = evbuffer_add_cb(
            bufferevent_get_input(bev),
            { _, info, arg in
                guard let info, info.pointee.n_added > 0 else { return }
                Unmanaged<ConnectionState>.fromOpaque(arg!).takeUnretainedValue().bytesArrived(info.pointee.n_added)
            }, arg)
        setBuffereventTimeouts(streaming: false)
    }

    /// evhttp gives the bufferevent one time-out for reads and writes (`--idle-timeout`). Complete
    /// responses get `--write-timeout` for writes instead; streaming responses get neither (their
    /// peer sends nothing, and evhttp re-arms the bufferevent's write time-out with every chunk, so
    /// a stalled reader fed keep-alives would never time out): `startWriteWatch` watches them.
    private func setBuffereventTimeouts(streaming: Bool) {
        var idle = owner.idleTimeval ?? timeval()
        var write = owner.writeTimeval ?? timeval()
        withUnsafePointer(to: &idle) { idlePointer in
            withUnsafePointer(to: &write) { writePointer in
                _ = bufferevent_set_timeouts(
                    bev, streaming || owner.idleTimeval == nil ? nil : idlePointer,
                    streaming || owner.writeTimeval == nil ? nil : writePointer)
            }
        }
    }

    /// `added` bytes arrived at the end of the input buffer; evhttp parses them right after this.
    private func bytesArrived(_ added: Int) {
        if refused == nil {
            do throws(RequestFraming.Rejection) {
                try followFraming(added)
            } catch {
                rejection = error
            }
        }
        if refused != nil { return settleRejection() }
        if handling { return limitUnreadInput() }
        if !readArmed && owner.readTimeoutEnabled { armReadDeadline() }
    }

    /// While a request is answered evhttp does not parse what arrives behind it, but libevent keeps
    /// reading (that is how a stream notices its peer leave): the bytes collect in the input buffer,
    /// for a stream's whole life. More than one largest request (headers + body limits) waiting there
    /// is not pipelining but a flood: the connection is closed (from a zero-delay event, not inside
    /// libevent's read) and its input dropped at once.
    private func limitUnreadInput() {
        guard !flooded, let input = bufferevent_get_input(bev),
            evbuffer_get_length(input) > owner.config.maxHeaderBytes + owner.config.maxBodyBytes
        else { return }
        flooded = true
        owner.metrics.unreadInputCloses.increment()
        evbuffer_drain(input, evbuffer_get_length(input))
        bufferevent_disable(bev, Int16(EV_READ))
        later(afterMilliseconds: 0) { $0.closeNow() }
    }

    /// Feeds the last `added` bytes of the input buffer to `framing` (in place, no copy).
    private func followFraming(_ added: Int) throws(RequestFraming.Rejection) {
        guard let input = bufferevent_get_input(bev), case let total = evbuffer_get_length(input), total >= added
        else { return }
        var position = evbuffer_ptr()
        guard evbuffer_ptr_set(input, &position, total - added, EVBUFFER_PTR_SET) == 0 else { return }
        let count = Int(evbuffer_peek(input, added, &position, nil, 0))
        guard count > 0 else { return }
        var failure: RequestFraming.Rejection?
        withUnsafeTemporaryAllocation(of: iovec.self, capacity: count) { vectors in
            let filled = Int(evbuffer_peek(input, added, &position, vectors.baseAddress, Int32(count)))
            var left = added
            for v in vectors.prefix(filled) where left > 0 {
                let n = min(v.iov_len, left)
                left -= n
                do throws(RequestFraming.Rejection) {
                    try framing.feed(UnsafeRawBufferPointer(start: v.iov_base, count: n))
                } catch {
                    failure = error
                    return
                }
            }
        }
        if let failure { throw failure }
    }

    /// Once the requests before the refused one are answered: drops what is left of the input (evhttp
    /// never parses it) and answers from a zero-delay event (not from inside evhttp's read).
    private func settleRejection() {
        guard refused != nil, !isClosed, !handling, framing.completeRequests == 0 else { return }
        if let input = bufferevent_get_input(bev) { evbuffer_drain(input, evbuffer_get_length(input)) }
        bufferevent_disable(bev, Int16(EV_READ))
        guard !rejectionScheduled else { return }
        rejectionScheduled = true
        answerRejection(afterMilliseconds: 0)
    }

    private func answerRejection(afterMilliseconds ms: Int) {
        later(afterMilliseconds: ms) { $0.sendRejection() }
    }

    /// Runs `action` on this connection from a one-shot loop timer: for what must not happen inside
    /// libevent's read callback (answering and freeing the connection). Rare paths: one small box each.
    private func later(afterMilliseconds ms: Int, _ action: @escaping (ConnectionState) -> Void) {
        final class Deferred {
            let state: ConnectionState
            let action: (ConnectionState) -> Void
            init(_ state: ConnectionState, _ action: @escaping (ConnectionState) -> Void) {
                self.state = state
                self.action = action
            }
        }
        var tv = timeval(tv_sec: 0, tv_usec: ms * 1000)
        event_base_once(
            owner.loop.base, -1, Int16(EV_TIMEOUT),
            { _, _, arg in
                let d = Unmanaged<Deferred>.fromOpaque(arg!).takeRetainedValue()
                d.action(d.state)
            }, Unmanaged.passRetained(Deferred(self, action)).toOpaque(), &tv)
    }

    /// Frees the evhttp connection now (libevent then frees a request it still holds).
    func closeNow() {
        guard !isClosed, let evcon else { return }
        freeingOurselves = true
        evhttp_connection_free(evcon)
    }

    /// Sends the problem response after whatever is still queued, then closes the connection.
    private func sendRejection() {
        guard !isClosed, evcon != nil, let rejection else { return }
        if let output = bufferevent_get_output(bev), evbuffer_get_length(output) > 0 {
            flushOutput()  // an earlier response's tail goes first
            if evbuffer_get_length(output) > 0 { return answerRejection(afterMilliseconds: 10) }
        }
        answerAndClose(status: rejection.status, detail: rejection.detail)
    }

    /// Writes `status` problem JSON straight to the socket (`Connection: close`, the common headers)
    /// and frees the connection: the answers evhttp cannot give, for a request it never parsed or
    /// never received completely.
    private func answerAndClose(status: Int, detail: String) {
        let body = HTTPResponse.problem(status: status, detail: detail).body
        var head = "HTTP/1.1 \(status) \(HTTPStatus.reason(status))\r\n"
        head += "Content-Type: application/problem+json\r\nConnection: close\r\n"
        for (name, value) in owner.config.commonHeaders { head += "\(name): \(value)\r\n" }
        head += "Content-Length: \(body.count)\r\n\r\n"
        let bytes = Array(head.utf8) + body
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        // Read what the peer already sent: closing with unread bytes resets the connection, and the
        // reset can destroy the answer before the peer reads it.
        var sink = [UInt8](repeating: 0, count: 16 * 1024)
        var reads = 0
        while reads < 64 && recv(fd, &sink, sink.count, Int32(MSG_DONTWAIT)) > 0 { reads += 1 }
        closeNow()
    }

    private func armReadDeadline() {
        readArmed = true
        readArmedTick = owner.sweepTick
        if sweepIndex < 0 { owner.watch(self) }
    }

    /// The loop's periodic check (`LoopHTTP.sweep`, once per tick): answers 408 to a request not
    /// received within `--request-read-timeout` and closes a stream whose peer accepted no bytes
    /// for `--write-timeout` while bytes waited. Returns whether the sweep should keep checking.
    func sweep(tick: UInt64, now: UInt64) -> Bool {
        guard !isClosed else { return false }
        if readArmed && tick &- readArmedTick >= owner.readTimeoutTicks {
            readArmed = false
            readTimedOut()
            if isClosed { return false }
        }
        if writeWatching, !isClosed, let evcon, let output = bufferevent_get_output(bev),
            case let waiting = evbuffer_get_length(output), waiting > 0
        {
            let taken = outputAdded &- waiting
            if taken != outputTaken {
                // the peer took bytes since the last sweep: progress, dated now (at most one
                // interval late, so the time-out can only come later than due, never earlier)
                outputTaken = taken
                lastWriteProgress = now
            } else if now &- lastWriteProgress >= owner.writeTimeoutNanos {
                owner.metrics.streamWriteTimeouts.increment()
                freeingOurselves = true
                evhttp_connection_free(evcon)  // calls connectionClosed() through the close callback
                return false
            }
        }
        return readArmed || writeWatching
    }

    /// A complete request was handed to the server.
    func requestStarted() {
        framing.requestHandedOver()
        handling = true
        owner.metrics.inFlight.add(1, ordering: .relaxed)
        readArmed = false
    }

    /// The response went out; the connection may read the next request.
    func requestFinished() {
        if handling { owner.metrics.inFlight.subtract(1, ordering: .relaxed) }
        handling = false
        current = nil
        if streaming || answerPending {
            if streaming {
                streaming = false
                stopWriteWatch()
            }
            answerPending = false
            if !isClosed { setBuffereventTimeouts(streaming: false) }
        }
        if refused != nil { settleRejection() }
    }

    private func readTimedOut() {
        guard !handling, evcon != nil else { return }
        owner.metrics.readTimeouts.increment()
        answerAndClose(
            status: 408, detail: "the request was not received completely within \(owner.config.requestReadTimeout) s")
    }

    /// Writes what is queued on the socket now, from inside the handler, instead of when the loop
    /// next polls the socket for writability. Used for stream chunks: an event caused by a request
    /// then leaves before that request's own response (whose connection evhttp touched first, so
    /// epoll would report it first) and before the rest of the loop iteration's work.
    ///
    /// The bufferevent freezes the start of its output buffer so that only it drains it; the freeze
    /// is lifted for this one write on the loop thread. Whatever the socket does not take stays
    /// queued and the bufferevent writes it as usual. Complete responses are written at once by
    /// `clibevent_raw_reply_finish`, which then lets evhttp complete the request.
    func flushOutput() {
        guard !isClosed, fd >= 0, let output = bufferevent_get_output(bev), evbuffer_get_length(output) > 0 else {
            return
        }
        evbuffer_unfreeze(output, 1)
        _ = evbuffer_write(output, fd)
        evbuffer_freeze(output, 1)
    }

    /// After a stream chunk was queued and `flushOutput` wrote what the socket took: waits for
    /// writability only while bytes remain (the bufferevent then writes them as usual), and stops waiting
    /// once none do. Waiting with nothing to write, the loop's next poll would register the socket for
    /// `EPOLLOUT` (one `epoll_ctl`), report it writable with nothing to write, and unregister it (a second
    /// `epoll_ctl`) — for each stream of a broadcast. Chunks are queued without asking for
    /// writability (`clibevent_stream_chunk`); evhttp's own way asks, and the ask is dropped here in the
    /// same loop iteration, so it never reaches epoll (`EPOLL_USE_CHANGELIST`).
    func waitToWriteOnlyIfPending() {
        guard !isClosed, let output = bufferevent_get_output(bev) else { return }
        let writing = bufferevent_get_enabled(bev) & Int16(EV_WRITE) != 0
        if evbuffer_get_length(output) == 0 {
            if writing { bufferevent_disable(bev, Int16(EV_WRITE)) }
        } else if !writing {
            bufferevent_enable(bev, Int16(EV_WRITE))
        }
    }

    /// Watches for the peer closing while a response streams. evhttp turns reading off before the
    /// handler runs (`evhttp_handle_request`, 2.1.12) and on again from `evhttp_send_reply_start` on,
    /// without a read callback (`keepReadingWhileAnswerPending` may have done so already): bytes only
    /// collect in the input buffer, and the peer's FIN or reset reaches evhttp's error callback, which
    /// fails the request and frees the connection (`connectionClosed` through the close callback).
    /// Reading is turned on here in case it was off; no `event` of its own.
    func startCloseWatch() {
        guard !streaming, !isClosed else { return }
        streaming = true
        bufferevent_enable(bev, Int16(EV_READ))
        setBuffereventTimeouts(streaming: true)
        startWriteWatch()
    }

    /// A handler returned without answering (the answer waits on Redis, another node or another loop):
    /// reading stays on meanwhile, with evhttp's read callback off, as for a stream (`startCloseWatch`).
    /// evhttp turned reading off before the handler ran; off until the answer, it costs an
    /// `EPOLL_CTL_DEL` now and an `EPOLL_CTL_ADD` when the answer lets evhttp read the next request,
    /// where turned on again in this loop iteration it is one `EPOLL_CTL_MOD`, and nothing later. The
    /// peer's FIN or reset now reaches evhttp's error callback while the answer waits: evhttp detaches
    /// the request and frees the connection (`connectionClosed` frees the request), and the late
    /// answer finds no request. What the peer sends meanwhile (a pipelined request) collects in the
    /// input buffer under the same limit as for streams; evhttp reads it once the answer is out. The
    /// bufferevent's time-outs are off until then (`requestFinished` puts them back): `--idle-timeout`
    /// is for a connection waiting on its client, not on the server's answer, which reading left off
    /// never timed.
    func keepReadingWhileAnswerPending() {
        guard !streaming, !answerPending, !isClosed, evcon != nil else { return }
        var writecb: bufferevent_data_cb?
        var eventcb: bufferevent_event_cb?
        var arg: UnsafeMutableRawPointer?
        bufferevent_getcb(bev, nil, &writecb, &eventcb, &arg)
        guard writecb != nil, eventcb != nil else { return }
        bufferevent_setcb(bev, nil, writecb, eventcb, arg)
        answerPending = true
        setBuffereventTimeouts(streaming: true)
        bufferevent_enable(bev, Int16(EV_READ))
    }

    /// Closes a streaming response whose peer accepted no bytes for `--write-timeout` while bytes
    /// waited (only what the peer takes counts as progress, not what the server adds).
    private func startWriteWatch() {
        guard owner.writeTimeoutNanos > 0, !writeWatching, let output = bufferevent_get_output(bev) else { return }
        writeWatching = true
        outputAdded = evbuffer_get_length(output)  // the head, not yet taken
        outputTaken = 0
        lastWriteProgress = monotonicNanos()
        if sweepIndex < 0 { owner.watch(self) }
    }

    private func stopWriteWatch() {
        writeWatching = false
    }

    /// The output buffer's length, for `streamBytesAdded(since:)`.
    var outputLength: Int { isClosed ? 0 : evbuffer_get_length(bufferevent_get_output(bev)) }

    /// A stream chunk went into the output buffer, which held `before` bytes until then.
    func streamBytesAdded(since before: Int) {
        guard writeWatching, !isClosed else { return }
        outputAdded &+= outputLength &- before
        if before == 0 { lastWriteProgress = monotonicNanos() }  // bytes start waiting now
    }

    /// evhttp is freeing the connection (peer gone, time-out, our own free, or server stop).
    private func connectionClosed() {
        guard !isClosed else { return }
        isClosed = true
        streaming = false
        stopWriteWatch()
        readArmed = false
        owner.unwatch(self)  // not kept until the next sweep: freed with the connection
        if let cb = inputCallback {
            evbuffer_remove_cb_entry(bufferevent_get_input(bev), cb)
            inputCallback = nil
        }
        // When libevent fails a connection under a request the handler still holds, it detaches the
        // request and leaves it to us; when we (or evhttp_free) free the connection, libevent frees it.
        let libeventFreesRequest = freeingOurselves || owner.freeingAll
        current?.connectionClosed(freeRequest: !libeventFreesRequest)
        current = nil
        if handling {
            handling = false
            owner.metrics.inFlight.subtract(1, ordering: .relaxed)
        }
        owner.connectionClosed(self)
    }
}
