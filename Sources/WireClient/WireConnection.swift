/// WireClient: a small blocking HTTP/1.1 and Server-Sent Events client for tests and tools.
///
/// It speaks to servers over real loopback sockets with plain Glibc calls (no Foundation
/// networking, no libevent), so tests see exactly the bytes a browser or curl would see. The
/// incremental parsers it is built on (`HTTPResponseParser`, `ChunkedDecoder`, `SSEParser`)
/// are package-visible value types that the load tool reuses in its event loop.
#if canImport(Glibc)
    import Glibc
#endif

/// One TCP connection to a server, used one request at a time (keep-alive reuse), or turned
/// into an event stream by `openEventStream`.
///
/// Not thread-safe: one thread at a time may touch a connection and the reader it hands out.
package final class WireConnection {
    /// The host this connection was opened to (used in the `Host` header).
    package let host: String
    /// The port this connection was opened to.
    package let port: Int
    /// How long `readResponse` and `request` wait for a response, in seconds.
    package var timeout: Double

    let socket: BlockingSocket
    private var parser = HTTPResponseParser()
    private var readBuffer = [UInt8](repeating: 0, count: 64 * 1024)
    private var current: WireResponse?
    private var completed: [WireResponse] = []
    private(set) var atEndOfFile = false

    // Event-stream mode
    private var streaming = false
    private(set) var streamHead: WireResponse?
    var sse = SSEParser()
    var sseEvents: [SSEEvent] = []
    private(set) var streamEnded = false
    private(set) var streamTruncated = false

    /// Connects to `host:port` (from the numeric address `source` when given: a client on `127.0.0.2`);
    /// `timeout` bounds connect, every send and every response wait.
    package init(host: String = "127.0.0.1", port: Int, timeout: Double = 5, source: String? = nil) throws {
        self.host = host
        self.port = port
        self.timeout = timeout
        socket = try BlockingSocket(host: host, port: port, timeout: timeout, source: source)
    }

    /// Sends raw bytes as they are (for hostile tests: slow headers, bad framing, pipelining).
    package func send(raw: [UInt8]) throws {
        try socket.sendAll(raw)
    }

    /// Sends the UTF-8 bytes of `raw` as they are.
    package func send(raw: String) throws {
        try socket.sendAll(Array(raw.utf8))
    }

    /// Sends a request and reads its response. Adds `Host` and, when there is a body or the
    /// method is POST/PUT/PATCH, `Content-Length`, unless `headers` already has them.
    package func request(
        _ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil
    ) throws -> WireResponse {
        try send(raw: requestBytes(method, path, headers: headers, body: body))
        if method == "HEAD" { parser.nextResponseHasNoBody = true }
        return try readResponse()
    }

    /// The bytes of a request as `request` would send them.
    package func requestBytes(
        _ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil
    ) -> [UInt8] {
        var text = "\(method) \(path) HTTP/1.1\r\n"
        let names = Set(headers.map { $0.0.lowercased() })
        if !names.contains("host") { text += "Host: \(host):\(port)\r\n" }
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        let needsLength = body != nil || ["POST", "PUT", "PATCH"].contains(method)
        if needsLength && !names.contains("content-length") && !names.contains("transfer-encoding") {
            text += "Content-Length: \(body?.count ?? 0)\r\n"
        }
        text += "\r\n"
        return Array(text.utf8) + (body ?? [])
    }

    /// Reads the next complete response (body framed by `Content-Length`, chunked, or until
    /// close). Throws `.timeout` after `timeout` seconds, `.closed` if the peer closed first.
    package func readResponse() throws -> WireResponse {
        let deadline = MonotonicClock.now() + timeout
        while true {
            if !completed.isEmpty { return completed.removeFirst() }
            if atEndOfFile { throw WireError.closed }
            try pump(deadline: deadline)
        }
    }

    /// Sends `GET path` with `Accept: text/event-stream` and reads the response head. On `200`
    /// the reader yields the stream's events; otherwise the returned response carries the whole
    /// body (e.g. a problem document) and the reader is at its end.
    package func openEventStream(
        _ path: String, headers: [(String, String)] = []
    ) throws -> (WireResponse, EventStreamReader) {
        var all = headers
        if !headers.contains(where: { $0.0.lowercased() == "accept" }) { all.append(("Accept", "text/event-stream")) }
        streaming = true
        try send(raw: requestBytes("GET", path, headers: all))
        let deadline = MonotonicClock.now() + timeout
        while streamHead == nil {
            if atEndOfFile { throw WireError.closed }
            try pump(deadline: deadline)
        }
        let head = streamHead!
        if head.status != 200 {
            streamEnded = true
            while completed.isEmpty {
                if atEndOfFile { throw WireError.closed }
                try pump(deadline: deadline)
            }
            return (completed.removeFirst(), EventStreamReader(connection: self))
        }
        return (head, EventStreamReader(connection: self))
    }

    /// Closes the socket; later calls throw `.closed`.
    package func close() {
        socket.close()
    }

    /// Waits up to `timeout` seconds for the peer to close (read returns 0 or ECONNRESET).
    /// Bytes that arrive meanwhile are parsed as usual (responses and events are kept).
    package func waitForClose(timeout: Double) -> Bool {
        let deadline = MonotonicClock.now() + timeout
        while !atEndOfFile {
            do {
                try pump(deadline: deadline)
            } catch WireError.timeout {
                return false
            } catch WireError.malformed {
                continue
            } catch {
                return true
            }
        }
        return true
    }

    /// Reads once (waiting until `deadline`) and feeds the bytes to the parser.
    func pump(deadline: Double) throws {
        let n = try socket.receive(into: &readBuffer, deadline: deadline)
        if n == 0 {
            atEndOfFile = true
            do {
                try parser.finish(emit: handle)
            } catch {
                streamTruncated = true
                if !streaming { throw error }
            }
            if streaming { streamEnded = true }
            return
        }
        try parser.feed(readBuffer[0..<n], emit: handle)
    }

    private func handle(_ event: HTTPResponseParser.Event) {
        switch event {
        case .head(let head):
            if streaming && streamHead == nil {
                streamHead = head
                if head.status != 200 { current = head }
            } else {
                current = head
            }
        case .body(let bytes):
            if current != nil {
                current!.body.append(contentsOf: bytes)
            } else if streaming {
                sse.feed(bytes) { sseEvents.append($0) }
            }
        case .end:
            if let response = current {
                completed.append(response)
                current = nil
            } else if streaming {
                streamEnded = true
            }
        }
    }
}
