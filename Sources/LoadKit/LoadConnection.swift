import WireClient

#if canImport(Glibc)
    import Glibc
#endif

/// One nonblocking TCP connection driven by a `LoadLoop`: queued writes, and received bytes
/// parsed by WireClient's `HTTPResponseParser` into callbacks.
///
/// Touched only on its loop's thread.
final class LoadConnection {
    let fd: Int32
    private unowned let loop: LoadLoop
    private var output: [UInt8] = []
    private var outputOffset = 0
    private var parser = HTTPResponseParser()
    private var connected = false
    private(set) var isClosed = false

    /// Called for every response event.
    var onEvent: (HTTPResponseParser.Event) -> Void = { _ in }
    /// Called once when the connection closes; the error is `nil` for a clean close by us.
    var onClose: (WireError?) -> Void = { _ in }

    /// Starts a nonblocking connect to `target`.
    init(loop: LoadLoop, target: Target) throws {
        self.loop = loop
        fd = socket(
            AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            isClosed = true
            throw WireError.system("socket", errno)
        }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        if let source = target.nextSourceAddress() {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr = source
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                }
            }
            guard bound else {
                let e = errno
                isClosed = true
                Glibc.close(fd)
                throw WireError.system("bind (source address)", e)
            }
        }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(target.port).bigEndian)
        addr.sin_addr = target.address
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if rc != 0 && errno != EINPROGRESS {
            let e = errno
            isClosed = true
            Glibc.close(fd)
            throw WireError.system("connect", e)
        }
        do {
            try loop.register(self)
        } catch {
            isClosed = true
            Glibc.close(fd)
            throw error
        }
    }

    deinit {
        if !isClosed { Glibc.close(fd) }
    }

    /// Queues `bytes` and writes what the socket takes now.
    func send(_ bytes: [UInt8]) {
        guard !isClosed else { return }
        if outputOffset == output.count {
            output = bytes
            outputOffset = 0
        } else {
            output += bytes
        }
        if connected { flush() }
    }

    /// Closes the socket; `onClose` gets `error` (nil for an intended close).
    func close(_ error: WireError? = nil) {
        guard !isClosed else { return }
        isClosed = true
        loop.unregister(self)
        Glibc.close(fd)
        let callback = onClose
        onClose = { _ in }
        onEvent = { _ in }
        callback(error)
    }

    /// Closes the socket without callbacks and without touching the loop (which is going away).
    func detach() {
        guard !isClosed else { return }
        isClosed = true
        Glibc.close(fd)
        onClose = { _ in }
        onEvent = { _ in }
    }

    func handle(events: UInt32) {
        if !connected && events & (Epoll.output | Epoll.error | Epoll.hangUp) != 0 {
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
            if error != 0 { return close(.system("connect", error)) }
            connected = true
        }
        if events & Epoll.output != 0 { flush() }
        if events & (Epoll.input | Epoll.readHangUp | Epoll.hangUp | Epoll.error) != 0 { readAll() }
    }

    private func flush() {
        while outputOffset < output.count {
            let n = output.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + outputOffset, $0.count - outputOffset, Int32(MSG_NOSIGNAL))
            }
            if n < 0 {
                if errno == EAGAIN || errno == EWOULDBLOCK { return }
                if errno == EINTR { continue }
                return close(errno == EPIPE || errno == ECONNRESET ? .closed : .system("send", errno))
            }
            outputOffset += n
        }
        output.removeAll(keepingCapacity: true)
        outputOffset = 0
    }

    private func readAll() {
        while !isClosed {
            let n = loop.readBuffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if n > 0 {
                do {
                    try parser.feed(loop.readBuffer[0..<n]) { onEvent($0) }
                } catch {
                    return close(error)
                }
                continue
            }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
            if n < 0 && errno == EINTR { continue }
            let error: WireError = n == 0 || errno == ECONNRESET ? .closed : .system("recv", errno)
            do { try parser.finish { onEvent($0) } } catch {}
            return close(error)
        }
    }
}
