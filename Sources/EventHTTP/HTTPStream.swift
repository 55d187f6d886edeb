/// A streaming (chunked) response, e.g. Server-Sent Events.
///
/// Threading: bound to its responder's loop, like the responder.
public final class HTTPStream: @unchecked Sendable {
    private let responder: HTTPResponder
    /// Called once on the loop when the peer went away (not when `end()` was called).
    public var onClose: (() -> Void)?
    /// True after `end()` or after the peer left.
    public private(set) var isClosed = false

    init(responder: HTTPResponder) {
        self.responder = responder
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
        // The callback will not run any more: drop it (and whatever it captured) either way.
        let cb = onClose
        onClose = nil
        if notify { cb?() }
    }
}
