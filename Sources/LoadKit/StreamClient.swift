import WireClient

/// One `text/event-stream` subscription on its own nonblocking connection: sends the `GET`,
/// then feeds the de-chunked body to WireClient's `SSEParser`.
///
/// Touched only on its loop's thread.
package final class StreamClient {
    /// Monotonic nanoseconds when the connect started.
    package let startedAt: UInt64
    /// The response head, once received.
    package private(set) var head: WireResponse?
    private var parser = SSEParser()
    private let connection: LoadConnection
    private var errorBody: [UInt8] = []

    /// Called for each event with its arrival time (monotonic nanoseconds).
    package var onEvent: (SSEEvent, UInt64) -> Void = { _, _ in }
    /// Called once with the response head (status 200 or an error status and its body).
    package var onHead: (WireResponse) -> Void = { _ in }
    /// Called once when the stream closes; `nil` error when we closed it.
    package var onClose: (WireError?) -> Void = { _ in }

    /// Connects and requests `path` (relative to the target's base path).
    package init(loop: LoadLoop, target: Target, path: String, headers: [(String, String)] = []) throws {
        startedAt = LoadLoop.now()
        connection = try LoadConnection(loop: loop, target: target)
        var text = "GET \(target.basePath)\(path) HTTP/1.1\r\nHost: \(target.host):\(target.port)\r\n"
        text += "Accept: text/event-stream\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        connection.send(Array((text + "\r\n").utf8))
        // Both callbacks keep this stream alive while they run: the owner's callbacks they call or drop
        // often hold the last reference to it (a scenario's session that holds its stream), and `self`
        // used after that would be a destroyed object.
        connection.onEvent = { [unowned self] event in withExtendedLifetime(self) { handle(event) } }
        connection.onClose = { [unowned self] error in
            withExtendedLifetime(self) {
                let callback = onClose
                // The owner's callbacks often capture what holds this stream: drop them once closed.
                onEvent = { _, _ in }
                onHead = { _ in }
                onClose = { _ in }
                callback(error)
            }
        }
    }

    private func handle(_ event: HTTPResponseParser.Event) {
        switch event {
        case .head(let response):
            head = response
            if response.status == 200 { onHead(response) }
        case .body(let bytes):
            if head?.status == 200 {
                let now = LoadLoop.now()
                parser.feed(bytes) { onEvent($0, now) }
            } else {
                errorBody += bytes
            }
        case .end:
            if var response = head, response.status != 200 {
                response.body = errorBody
                onHead(response)
            }
            connection.close(head?.status == 200 ? .closed : nil)
        }
    }

    deinit {
        // The connection's callbacks refer to this object: silence them, then close it.
        connection.onEvent = { _ in }
        connection.onClose = { _ in }
        connection.close()
    }

    /// Closes the stream (`onClose` gets `nil`).
    package func close() { connection.close() }
}
