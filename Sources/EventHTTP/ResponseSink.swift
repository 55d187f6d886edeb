/// Where a responder without a connection sends its output: the socketless seam
/// (`HTTPResponder(recordingTo:loop:method:)`; HTTPTesting's `InProcessClient` records through it).
///
/// Threading: called on the responder's loop.
public protocol ResponseSink: AnyObject {
    /// A complete response; `route` is the pattern that matched (or "unmatched"/"static").
    func responder(_ responder: HTTPResponder, sent response: HTTPResponse, route: String)
    /// A streaming response started.
    func responder(_ responder: HTTPResponder, startedStream status: Int, headers: [(String, String)], route: String)
    /// A chunk of a streaming response.
    func responder(_ responder: HTTPResponder, wrote bytes: UnsafeRawBufferPointer)
    /// The streaming response ended.
    func responderEnded(_ responder: HTTPResponder)
}
