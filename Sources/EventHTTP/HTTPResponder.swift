/// The handle a handler answers through: exactly one `send` or one `startStream`.
///
/// A `Sendable` value that refers to the request's `ResponderCore`: on the socket path an
/// `EvhttpResponder` (a complete response goes in one piece straight into the connection's output
/// buffer where evhttp's rules allow); without a connection a `SinkResponder`
/// (`HTTPResponder(recordingTo:loop:method:)`, what BFFTesting's `InProcessClient` records). A handler that computes its answer on another loop carries the handle there and
/// back; only on `loop` may it be used.
///
/// Threading: every member but `loop` on `loop` only, checked: off `loop` it traps
/// (`LoopBoundReference`). Hop with `loop.execute` (or `runOrExecute`) to answer from elsewhere.
/// Sending after the peer left is a no-op.
public struct HTTPResponder: Sendable {
    let reference: LoopBoundReference<ResponderCore>

    init(_ reference: LoopBoundReference<ResponderCore>) {
        self.reference = reference
    }

    /// A responder without a connection: what it sends goes to `sink` (in-process tests). On `loop`.
    public init(recordingTo sink: any ResponseSink, loop: EventLoop, method: HTTPMethod) {
        reference = LoopBoundReference<ResponderCore>(SinkResponder(sink: sink, loop: loop, method: method), loop: loop)
    }

    /// The loop that owns the connection. Any thread.
    public var loop: EventLoop { reference.loop }

    /// The request's responder object (checked: on `loop` only).
    var core: ResponderCore { reference.value }

    /// True once the response was sent, or the peer is gone.
    public var isClosed: Bool { core.isClosed }

    /// Sends a complete response. Later calls are ignored.
    public func send(_ response: HTTPResponse) { core.send(response) }

    /// Sends a problem response.
    public func send(_ error: HTTPError) { core.send(error.response) }

    /// Starts a chunked streaming response; write to the returned stream, then `end()` it.
    /// Returns nil when the peer is already gone.
    public func startStream(status: Int = 200, headers: [(String, String)]) -> HTTPStream? {
        core.startStream(status: status, headers: headers) ? HTTPStream(reference) : nil
    }
}
