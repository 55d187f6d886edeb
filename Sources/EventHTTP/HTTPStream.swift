/// Told when an `HTTPStream`'s peer went away: the allocation-free alternative to a closure in
/// `HTTPStream.onClose` for an object that owns the stream (a closure capturing it costs a context
/// allocation per stream).
public protocol HTTPStreamCloseObserver: AnyObject {
    /// Called once on the stream's loop when the peer went away (not when `end()` was called).
    func httpStreamPeerLeft()
}

/// A streaming (chunked) response, e.g. Server-Sent Events.
///
/// Threading: bound to its responder's loop, like the responder.
public final class HTTPStream: @unchecked Sendable {
    private let responder: HTTPResponder
    /// Who is told when the peer leaves: a closure (`onClose`) or an object (`observeClose`). One
    /// field for either; dropped when the stream closes, so a strongly held observer that holds the
    /// stream forms no lasting cycle.
    private var closeObserver: CloseObserver?
    private enum CloseObserver {
        case closure(() -> Void)
        case object(any HTTPStreamCloseObserver)
    }
    /// True after `end()` or after the peer left.
    public private(set) var isClosed = false

    init(responder: HTTPResponder) {
        self.responder = responder
    }

    /// Called once on the loop when the peer went away (not when `end()` was called). Setting it
    /// replaces an observer given to `observeClose`.
    public var onClose: (() -> Void)? {
        get {
            guard case .closure(let cb) = closeObserver else { return nil }
            return cb
        }
        set { closeObserver = newValue.map(CloseObserver.closure) }
    }

    /// Tells `observer` (held strongly until the stream closes) once on the loop when the peer went
    /// away, instead of an `onClose` closure (which it replaces).
    public func observeClose(with observer: any HTTPStreamCloseObserver) {
        closeObserver = .object(observer)
    }

    /// The loop that owns the stream.
    public var loop: EventLoop { responder.loop }

    /// Queues bytes for the peer. Ignored after close.
    public func write(_ bytes: [UInt8]) {
        guard !isClosed, !bytes.isEmpty else { return }
        bytes.withUnsafeBytes { responder.writeChunk($0) }
    }

    /// Bytes written but not yet accepted by the peer's socket (the back-pressure signal).
    public var queuedBytes: Int { isClosed ? 0 : responder.queuedBytes }

    /// Finishes the response (the final empty chunk); the connection may then be reused.
    public func end() {
        guard !isClosed else { return }
        responder.endStream()
    }

    func markClosed(notify: Bool) {
        guard !isClosed else { return }
        isClosed = true
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
