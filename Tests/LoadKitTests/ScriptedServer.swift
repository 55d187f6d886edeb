import Foundation
import WireClient

#if canImport(Glibc)
    import Glibc
#endif

/// A tiny blocking HTTP/1.1 server for tests: listens on 127.0.0.1:0, one thread per
/// connection, parses requests (Content-Length bodies, keep-alive) and hands each to `handler`,
/// which writes whatever bytes it likes through the `Client`.
///
/// The handler runs on the connection's thread; the server object may be stopped from any thread.
final class ScriptedServer: @unchecked Sendable {
    /// One request as received.
    struct Request: Sendable {
        var method: String
        var path: String
        var headers: [(String, String)]
        var body: [UInt8]
        func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
    }

    /// The accepted connection; write to it from the handler (or later, from any thread: a write after
    /// the connection ended is dropped, never sent to whatever socket reuses its number — in a test
    /// process that may be one of the load tool's own client sockets).
    final class Client: Sendable {
        let fd: Int32
        /// True while the socket is open; held across each write, so the socket cannot close mid-write.
        private let open = Lock(true)
        init(fd: Int32) { self.fd = fd }
        func write(_ text: String) { write(Array(text.utf8)) }
        func write(_ bytes: [UInt8]) {
            open.withLock { open in
                guard open else { return }
                var offset = 0
                while offset < bytes.count {
                    let n = bytes.withUnsafeBytes {
                        Glibc.send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
                    }
                    if n <= 0 { return }
                    offset += n
                }
            }
        }
        func close() { open.withLock { if $0 { _ = shutdown(fd, Int32(SHUT_RDWR)) } } }
        /// The connection ended: no write reaches the socket after this returns (then it is closed).
        func ended() { open.withLock { $0 = false } }
    }

    let port: Int
    private let listener: Int32
    private let handler: @Sendable (Request, Client) -> Void
    private let lock = NSLock()
    private var clients: [Int32] = []
    private var stopped = false

    init(handler: @escaping @Sendable (Request, Client) -> Void) throws {
        self.handler = handler
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(listener, 1024) == 0 else { throw POSIXError(.EADDRINUSE) }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &len) }
        }
        self.port = Int(UInt16(bigEndian: addr.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// Stops accepting and shuts every open connection down.
    func stop() {
        lock.lock()
        stopped = true
        let open = clients
        lock.unlock()
        shutdown(listener, Int32(SHUT_RDWR))
        for fd in open { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    deinit { Glibc.close(listener) }

    private func acceptLoop() {
        while true {
            let fd = accept(listener, nil, nil)
            if fd < 0 { return }
            lock.lock()
            if stopped {
                lock.unlock()
                Glibc.close(fd)
                return
            }
            clients.append(fd)
            lock.unlock()
            let thread = Thread { [self] in serve(fd) }
            thread.stackSize = 256 * 1024
            thread.start()
        }
    }

    private func serve(_ fd: Int32) {
        let client = Client(fd: fd)
        defer {
            lock.lock()
            clients.removeAll { $0 == fd }
            lock.unlock()
            client.ended()
            Glibc.close(fd)
        }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            while let request = Self.takeRequest(&buffer) { handler(request, client) }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if n <= 0 { return }
            buffer += chunk[0..<n]
        }
    }

    private static func takeRequest(_ buffer: inout [UInt8]) -> Request? {
        let terminator: [UInt8] = [13, 10, 13, 10]
        guard buffer.count >= 4,
            let end = (0...(buffer.count - 4)).first(where: { buffer[$0..<($0 + 4)].elementsEqual(terminator) })
        else { return nil }
        let head = String(decoding: buffer[0..<end], as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n")
        let requestLine = lines.removeFirst().split(separator: " ")
        let headers = lines.compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let length = Int(headers.first { $0.0.lowercased() == "content-length" }?.1 ?? "0") ?? 0
        guard buffer.count >= end + 4 + length else { return nil }
        let body = Array(buffer[(end + 4)..<(end + 4 + length)])
        buffer.removeFirst(end + 4 + length)
        return Request(method: String(requestLine[0]), path: String(requestLine[1]), headers: headers, body: body)
    }
}
