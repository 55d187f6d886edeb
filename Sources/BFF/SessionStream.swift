import EventHTTP
import JSON

/// One session's own event stream (`GET /api/sessions/{id}/events`), living on the loop that owns its
/// HTTP connection (which may differ from the session's loop).
///
/// Back-pressure: while the peer keeps up, every frame is written as it comes. Once more than the
/// high-water mark is queued, state frames are dropped (coalesced) and signals are kept; when the
/// queue has drained to a quarter of the mark, the stream asks the session for a fresh `snapshot`
/// and writes the kept signals and then that snapshot, so the latest state always arrives and
/// memory per stream stays bounded.
///
/// Threading: host loop only (not `Sendable`). The session, on its own loop, holds the stream's
/// `link` (a `LoopBoundReference` reference that traps when opened off the host loop) and hands it frames,
/// which hop here.
///
/// Memory: one per open stream; cluster mode's feed is one unowned word, and the small fields are
/// declared last so that they pack.
final class SessionStream: SessionEventSink, HostedStream, HTTPStreamCloseObserver {
    enum Mode { case live, behind, catchingUp }

    let sessionID: String
    unowned var sessionOwner: LoopSessions?
    unowned let host: LoopSessions
    private var response: SSEResponse
    private var pendingSignals: [[UInt8]] = []
    static let maxPendingSignals = 1000
    /// Cluster mode's feed (one word: `ExternalFeed` is a class).
    unowned var externalFeed: ExternalFeed?
    var hostedIndex: Int32 = -1
    private(set) var mode = Mode.live

    /// A stream of session `sessionID` for the request `responder` answers, on the responder's loop
    /// `host` (host loop).
    init(sessionID: String, host: LoopSessions, responder: HTTPResponder) {
        self.sessionID = sessionID
        self.host = host
        response = SSEResponse(responder)
    }

    // MARK: SessionEventSink (host loop)

    /// Starts the HTTP stream with the preamble (`retry:`) and the first frames (snapshot or replay).
    func start(initial: [UInt8]) {
        let preamble = SSEFrame.retry(milliseconds: host.env.configuration.retryMilliseconds)
        guard response.start(initial: preamble + initial, observer: self) != nil else { return closed() }
        host.register(self)
    }

    func deliverFromSession(_ frame: [UInt8], isSignal: Bool) {
        guard let http = response.http else { return }
        switch mode {
        case .live:
            if http.queuedBytes < host.env.configuration.streamHighWaterBytes {
                response.write(frame)
                return
            }
            mode = .behind
            host.watchBehind(self)
            fallthrough
        case .behind, .catchingUp:
            if isSignal {
                pendingSignals.append(frame)
                if pendingSignals.count > SessionStream.maxPendingSignals { return close() }
            } else {
                host.env.metrics.coalesced.increment()
            }
        }
    }

    /// Writes `event: end` (after any kept signals) and finishes the response.
    func finish(with endFrame: [UInt8]) {
        guard response.http != nil else { return }
        for s in pendingSignals { response.write(s) }
        pendingSignals = []
        response.write(endFrame)
        response.end()
        host.unregister(self)
        externalFeed?.sinkClosed()
        externalFeed = nil
    }

    // MARK: HostedStream (host loop)

    func keepAliveTick() {
        if mode == .live { response.keepAliveTick() }
    }

    func checkDrained() -> Bool {
        guard response.http != nil else { return true }
        guard mode == .behind else { return mode == .live }
        guard response.queuedBytes <= host.env.configuration.streamHighWaterBytes / 4 else { return false }
        mode = .catchingUp
        if let externalFeed {
            externalFeed.snapshotFrame { [weak self] frame in self?.catchUp(snapshotFrame: frame) }
            return true
        }
        guard let owner = sessionOwner else { return true }
        let (id, link) = (sessionID, self.link)
        owner.loop.execute {
            guard let frame = owner.sessions[id].map({ $0.snapshotFrame }) else { return }
            link.run(with: frame) { stream, frame in (stream as? SessionStream)?.catchUp(snapshotFrame: frame) }
        }
        return true
    }

    func shutdown(with endFrame: [UInt8]) { finish(with: endFrame) }

    func broadcast(_ frame: [UInt8]) { deliverFromSession(frame, isSignal: false) }

    private func catchUp(snapshotFrame: [UInt8]) {
        guard response.http != nil, mode == .catchingUp else { return }
        for s in pendingSignals { response.write(s) }
        pendingSignals = []
        response.write(snapshotFrame)
        mode = .live
    }

    /// Ends the response (too far behind on signals); the client reconnects with Last-Event-ID.
    private func close() {
        response.end()
        closed()
    }

    /// The peer went away (`HTTPStreamCloseObserver`, on the host loop).
    func httpStreamPeerLeft() { closed() }

    /// The peer went away (or the stream never started): forget it here and in the session.
    private func closed() {
        response.forget()
        host.unregister(self)
        externalFeed?.sinkClosed()
        externalFeed = nil
        guard let owner = sessionOwner else { return }
        let (id, link) = (sessionID, self.link)
        owner.loop.execute { owner.streamClosed(link, sessionID: id) }
    }
}
