import EventHTTP

/// The HTTP side of one event-stream response, on its connection's loop: the request until the head
/// is sent, then the open stream; every write; the keep-alive comments. Embedded by both kinds of
/// stream (`SessionStream`, one session; `MultiplexedStream`, several), which decide what to write.
///
/// Keep-alive: `keepAliveTick()` runs `keepAliveTicksPerInterval` times per `--keep-alive` interval (the
/// host loop's tick). A stream whose last write came after tick 0 and that carried nothing through ticks
/// 1 … n-1 gets a comment at tick n-1: the gap since that write is under n tick periods, the interval
/// (up to the timer's lateness). Busy streams carry none, and idle streams get theirs at different
/// times instead of all in one burst.
///
/// Threading: a value inside its stream, on the host loop only. Memory: two words and a few bytes.
struct SSEResponse {
    /// Keep-alive ticks per `--keep-alive` interval.
    static let keepAliveTicksPerInterval = 8
    /// The head every event stream answers with.
    static let headers: [(String, String)] = [
        ("Content-Type", "text/event-stream; charset=utf-8"), ("Cache-Control", "no-cache"),
        ("X-Accel-Buffering", "no"),
    ]

    private var connection: Connection
    private enum Connection {
        case pending(HTTPResponder)
        case open(HTTPStream)
        case closed
    }
    /// Ticks with nothing written, and whether anything was written since the last tick.
    private var quietTicks: Int32 = 0
    private var wroteSinceTick = false

    /// The response to the request `responder` answers (nothing is sent yet).
    init(_ responder: HTTPResponder) { connection = .pending(responder) }

    /// The open stream, or nil before the head and after the end.
    var http: HTTPStream? {
        if case .open(let s) = connection, !s.isClosed { s } else { nil }
    }

    /// The request, while nothing was sent (to answer with an error instead).
    var responder: HTTPResponder? {
        if case .pending(let r) = connection { r } else { nil }
    }

    /// Sends the head and `initial`; nil (and closed) when the peer left before. `observer` hears of
    /// the peer leaving.
    mutating func start(initial: [UInt8], observer: HTTPStreamCloseObserver) -> HTTPStream? {
        guard case .pending(let responder) = connection else { return nil }
        connection = .closed
        guard let stream = responder.startStream(headers: SSEResponse.headers) else { return nil }
        connection = .open(stream)
        stream.observeClose(with: observer)  // no closure context per stream
        write(initial)
        return stream
    }

    /// Answers the request with `response` instead of a stream (nothing was sent yet).
    mutating func refuse(with response: HTTPResponse) {
        guard case .pending(let responder) = connection else { return }
        connection = .closed
        responder.send(response)
    }

    mutating func write(_ bytes: [UInt8]) {
        guard let http else { return }
        http.write(bytes)
        wroteSinceTick = true
    }

    /// Bytes queued for the peer (0 when not open).
    var queuedBytes: Int { http?.queuedBytes ?? 0 }

    /// One keep-alive tick (see the type's comment).
    mutating func keepAliveTick() {
        guard let http else { return }
        if wroteSinceTick {
            wroteSinceTick = false
            quietTicks = 0
            return
        }
        quietTicks += 1
        if Int(quietTicks) >= SSEResponse.keepAliveTicksPerInterval - 1 {
            quietTicks = 0
            http.write(SSEFrame.keepAlive)
        }
    }

    /// Finishes the response (if open) and forgets it.
    mutating func end() {
        http?.end()
        connection = .closed
    }

    /// Forgets the response (the peer left).
    mutating func forget() { connection = .closed }
}

/// A stream a loop hosts (its connection's loop): told of keep-alive ticks, watched while it is
/// behind, ended at shutdown (`LoopSessions`). Host loop only.
protocol HostedStream: AnyObject {
    /// Its index in the host's list (-1: not listed).
    var hostedIndex: Int32 { get set }
    func keepAliveTick()
    /// Called by the host's drain timer while the stream is behind: true when it no longer needs watching.
    func checkDrained() -> Bool
    /// Shutdown: every session of the stream gets `endFrame` (`end`, `shutdown`) and the response ends.
    func shutdown(with endFrame: [UInt8])
    /// Every session of the stream gets `frame` (an event without an id), as a state frame.
    func broadcast(_ frame: [UInt8])
}

/// Where one session's events go on a stream's host loop: a `SessionStream` (the session's own stream)
/// or one member of a `MultiplexedStream`. The session backends attach one to a session
/// (`SessionBackend.openStream`) and feed it. Host loop only; the session holds it as a `LoopBoundReference`.
protocol SessionEventSink: AnyObject {
    /// The session whose events it takes.
    var sessionID: String { get }
    /// The loop that hosts its connection.
    var host: LoopSessions { get }
    /// The loop that runs the session when it runs in this process (`LocalSessions` sets it): told
    /// when the sink closes, asked for a fresh snapshot when the stream fell behind.
    var sessionOwner: LoopSessions? { get set }
    /// Cluster mode: what feeds the sink from outside this process (a fresh snapshot when the stream fell
    /// behind; told once when the sink is over). Unowned: the feed outlives the open sink.
    var externalFeed: ExternalFeed? { get set }
    /// The session accepted the sink: `initial` is its first frames (a snapshot, or a replay).
    func start(initial: [UInt8])
    /// One event the session emitted (an SSE frame as `SSEFrame` makes it).
    func deliverFromSession(_ frame: [UInt8], isSignal: Bool)
    /// The session ended: its `end` frame.
    func finish(with endFrame: [UInt8])
}

/// What feeds a `SessionEventSink` when no session of this process does (cluster mode's `ClusterStream`).
/// A class, not a protocol, so that a sink keeps it in one word, and one object instead of two closures:
/// less memory per cluster stream. The base does nothing; the cluster's stream overrides both.
class ExternalFeed {
    /// A fresh snapshot frame for a sink that fell behind (host loop; `done` may never run if none can be read).
    func snapshotFrame(_ done: @escaping ([UInt8]) -> Void) {}
    /// The sink is over (host loop; called once, then the sink forgets the feed).
    func sinkClosed() {}
}

extension SessionEventSink {
    /// The reference the session keeps, on its own loop (any thread may hold it; only the host opens it).
    var link: LoopBoundReference<any SessionEventSink> { LoopBoundReference(self, loop: host.loop) }
}
