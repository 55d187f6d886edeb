/// Told when an `HTTPStream`'s peer went away: the allocation-free alternative to a closure in
/// `HTTPStream.onClose` for an object that owns the stream (a closure capturing it costs a context
/// allocation per stream).
public protocol HTTPStreamCloseObserver: AnyObject {
    /// Called once on the stream's loop when the peer went away (not when `end()` was called).
    func httpStreamPeerLeft()
}

/// A streaming (chunked) response, e.g. Server-Sent Events: a `Sendable` handle to the request's
/// responder (whose state holds the stream's), so starting a stream allocates nothing.
///
/// Threading: every member but `loop` on the responder's loop only, checked: off it, it traps
/// (`LoopBoundReference`).
public struct HTTPStream: Sendable {
    private let reference: LoopBoundReference<ResponderCore>

    init(_ reference: LoopBoundReference<ResponderCore>) {
        self.reference = reference
    }

    private var core: ResponderCore { reference.value }

    /// True after `end()` or after the peer left.
    public var isClosed: Bool { core.streamClosed }

    /// Called once on the loop when the peer went away (not when `end()` was called). Setting it
    /// replaces an observer given to `observeClose`; dropped when the stream closes.
    public var onClose: (() -> Void)? {
        get {
            guard case .closure(let cb) = core.closeObserver else { return nil }
            return cb
        }
        nonmutating set { core.closeObserver = newValue.map(ResponderCore.CloseObserver.closure) }
    }

    /// Tells `observer` (held strongly until the stream closes) once on the loop when the peer went
    /// away, instead of an `onClose` closure (which it replaces).
    public func observeClose(with observer: any HTTPStreamCloseObserver) {
        core.closeObserver = .object(observer)
    }

    /// The loop that owns the stream. Any thread.
    public var loop: EventLoop { reference.loop }

    /// Queues bytes for the peer. Ignored after close.
    public func write(_ bytes: [UInt8]) {
        let core = core
        guard !core.streamClosed, !bytes.isEmpty else { return }
        bytes.withUnsafeBytes { core.writeChunk($0) }
    }

    /// Bytes written but not yet accepted by the peer's socket (the back-pressure signal).
    public var queuedBytes: Int {
        let core = core
        return core.streamClosed ? 0 : core.queuedBytes
    }

    /// Finishes the response (the final empty chunk); the connection may then be reused.
    public func end() {
        let core = core
        guard !core.streamClosed else { return }
        core.endStream()
    }
}
