import EventHTTP
import JSON

/// One open event stream of one session, living on the loop that owns its HTTP connection (which
/// may differ from the session's loop).
///
/// Back-pressure: while the peer keeps up, every frame is written as it comes. Once more than the
/// high-water mark is queued, state frames are dropped (coalesced) and signals are kept; when the
/// queue has drained to a quarter of the mark, the stream asks the session for a fresh `snapshot`
/// and writes the kept signals and then that snapshot, so the latest state always arrives and
/// memory per stream stays bounded.
///
/// Threading: host loop only (not `Sendable`). The session, on its own loop, holds the stream's
/// `link` (a `LoopOwned` reference that traps when opened off the host loop) and hands it frames,
/// which hop here.
///
/// Memory: one per open stream; cluster mode's two extras live out of line, and the small fields are
/// declared last so that they pack.
final class SessionStream: HTTPStreamCloseObserver {
    enum Mode { case live, behind, catchingUp }

    let sessionID: String
    /// The loop the session lives on, when it lives in this process (set by `LocalSessions` as it attaches
    /// the stream): told when the stream closes, asked for a fresh snapshot when it fell behind.
    unowned var sessionOwner: LoopSessions?
    /// The loop the HTTP connection lives on.
    unowned let host: LoopSessions
    /// The request until the stream starts, then its HTTP stream (one word: an idle stream's size counts).
    private var connection = Connection.closed
    private enum Connection {
        case pending(HTTPResponder)
        case open(HTTPStream)
        case closed
    }
    private var http: HTTPStream? {
        get { if case .open(let s) = connection { s } else { nil } }
        set { connection = newValue.map { .open($0) } ?? .closed }
    }
    private var pendingSignals: [[UInt8]] = []
    static let maxPendingSignals = 1000
    /// Cluster mode's extras, allocated when one is set.
    private var extras: Extras?
    /// Keep-alive bookkeeping: how many ticks (`keepAliveTicksPerInterval` to an interval) passed
    /// with nothing written, and whether anything was written since the last keep-alive tick.
    private var quietTicks: Int32 = 0
    /// Its index in its host loop's list of hosted streams (-1: not listed). Host loop only.
    var hostedIndex: Int32 = -1
    private var wroteSinceTick = false
    private(set) var mode = Mode.live
    /// Keep-alive ticks per `--keep-alive` interval. A stream gets a comment on the tick that ends
    /// its `ticks - 1`-th tick period with nothing written: its last write happened after the tick
    /// before those periods began, so the gap between two writes stays below `ticks` periods, i.e.
    /// below the interval (plus the timer's lateness).
    static let keepAliveTicksPerInterval = 8

    /// The extras cluster mode sets on a stream (see `snapshotSource`, `onClosed`).
    private final class Extras {
        var snapshotSource: ((@escaping ([UInt8]) -> Void) -> Void)?
        var onClosed: (() -> Void)?
    }

    private var madeExtras: Extras {
        if let extras { return extras }
        let made = Extras()
        extras = made
        return made
    }

    /// Cluster mode: where a stream that fell behind gets its fresh snapshot frame (the session's state
    /// is in the store, not on a loop here); nil asks the local session. Host loop only.
    var snapshotSource: ((@escaping ([UInt8]) -> Void) -> Void)? {
        get { extras?.snapshotSource }
        set { if newValue != nil || extras != nil { madeExtras.snapshotSource = newValue } }
    }
    /// Cluster mode: told once when the stream is over (host loop).
    var onClosed: (() -> Void)? {
        get { extras?.onClosed }
        set { if newValue != nil || extras != nil { madeExtras.onClosed = newValue } }
    }

    /// A stream of session `sessionID` for the request `responder` answers, on the responder's loop
    /// `host` (host loop).
    init(sessionID: String, host: LoopSessions, responder: HTTPResponder) {
        self.sessionID = sessionID
        self.host = host
        connection = .pending(responder)
    }

    /// The reference the session keeps, on its own loop (any thread may hold it; only the host opens it).
    var link: LoopOwned<SessionStream> { LoopOwned(self, loop: host.loop) }

    /// Writes a frame the session emitted (called through `link` from the session's loop).
    func deliverFromSession(_ frame: [UInt8], isSignal: Bool) { deliver(frame, isSignal: isSignal) }

    // MARK: on the host loop

    /// Starts the HTTP stream with the preamble and the first frames (snapshot or replay).
    func start(initial: [UInt8]) {
        guard case .pending(let responder) = connection else { return }
        connection = .closed
        guard
            let stream = responder.startStream(headers: [
                ("Content-Type", "text/event-stream; charset=utf-8"), ("Cache-Control", "no-cache"),
                ("X-Accel-Buffering", "no"),
            ])
        else {
            closed()
            return
        }
        http = stream
        stream.observeClose(with: self)  // no closure context per stream
        host.register(self)
        stream.write(initial)
        wroteSinceTick = true
    }

    private func deliver(_ frame: [UInt8], isSignal: Bool) {
        guard let http, !http.isClosed else { return }
        switch mode {
        case .live:
            if http.queuedBytes < host.env.configuration.streamHighWaterBytes {
                http.write(frame)
                wroteSinceTick = true
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

    /// Called by the host's drain timer while behind: true when it no longer needs watching.
    func checkDrained() -> Bool {
        guard let http, !http.isClosed else { return true }
        guard mode == .behind else { return mode == .live }
        guard http.queuedBytes <= host.env.configuration.streamHighWaterBytes / 4 else { return false }
        mode = .catchingUp
        if let snapshotSource {
            snapshotSource { [weak self] frame in self?.catchUp(snapshotFrame: frame) }
            return true
        }
        guard let owner = sessionOwner else { return true }
        let (id, link) = (sessionID, self.link)
        owner.loop.execute {
            guard let frame = owner.sessions[id].map({ $0.snapshotFrame }) else { return }
            link.run(with: frame) { stream, frame in stream.catchUp(snapshotFrame: frame) }
        }
        return true
    }

    private func catchUp(snapshotFrame: [UInt8]) {
        guard let http, !http.isClosed, mode == .catchingUp else { return }
        for s in pendingSignals { http.write(s) }
        pendingSignals = []
        http.write(snapshotFrame)
        wroteSinceTick = true
        mode = .live
    }

    /// A keep-alive tick, `keepAliveTicksPerInterval` times per keep-alive interval. A stream whose
    /// last write came after tick 0 and that carried nothing through ticks 1 … n-1 gets a comment at
    /// tick n-1: the gap since that write is under n tick periods, the interval. (Waiting for n quiet
    /// ticks, as before, let gaps reach (n+1)/n of the interval.) Busy streams carry none, and idle
    /// streams get theirs at different times instead of all in one burst (with 10,000 streams, one
    /// write each).
    func keepAliveTick() {
        guard mode == .live, let http else { return }
        if wroteSinceTick {
            wroteSinceTick = false
            quietTicks = 0
            return
        }
        quietTicks += 1
        if Int(quietTicks) >= SessionStream.keepAliveTicksPerInterval - 1 {
            quietTicks = 0
            http.write(SSEFrame.keepAlive)
        }
    }

    /// Writes `event: end` (after any kept signals) and finishes the response.
    func finish(with endFrame: [UInt8]) {
        guard let http, !http.isClosed else { return }
        for s in pendingSignals { http.write(s) }
        pendingSignals = []
        http.write(endFrame)
        http.end()
        self.http = nil
        host.unregister(self)
        onClosed?()
        onClosed = nil
    }

    /// Ends the response (too far behind on signals); the client reconnects with Last-Event-ID.
    private func close() {
        guard let http else { return }
        http.end()
        closed()
    }

    /// The peer went away (`HTTPStreamCloseObserver`, on the host loop).
    func httpStreamPeerLeft() { closed() }

    /// The peer went away (or the stream never started): forget it here and in the session.
    private func closed() {
        http = nil
        host.unregister(self)
        onClosed?()
        onClosed = nil
        guard let owner = sessionOwner else { return }
        let (id, link) = (sessionID, self.link)
        owner.loop.execute { owner.streamClosed(link, sessionID: id) }
    }
}
