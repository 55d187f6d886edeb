// Re-exported: `MonotonicClock` (in Primitives since the server's and the Redis client's clocks were
// merged into it) stays available to WireClient's users, as before.
@_exported import Primitives

#if canImport(Glibc)
    import Glibc
#endif

/// A connected blocking TCP socket with deadline-based reads (poll) and whole-buffer writes.
///
/// Owned by one `WireConnection`; not thread-safe.
final class BlockingSocket {
    private(set) var fd: Int32

    /// Connects to `host:port` (numeric address or name resolved by `getaddrinfo`), from the numeric
    /// address `source` when given (e.g. `127.0.0.2`: every 127/8 address is loopback, so tests and load
    /// runs can play several clients).
    init(host: String, port: Int, timeout: Double, source: String? = nil) throws(WireError) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host == "localhost" ? "127.0.0.1" : host, String(port), &hints, &list)
        guard rc == 0, let first = list else { throw .system("getaddrinfo(\(host))", rc) }
        defer { freeaddrinfo(list) }
        var lastError: Int32 = 0
        var current: UnsafeMutablePointer<addrinfo>? = first
        fd = -1
        while let ai = current {
            let s = socket(ai.pointee.ai_family, ai.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), 0)
            if s >= 0 {
                Self.setTimeouts(s, timeout)
                if let source, !Self.bind(s, to: source, family: ai.pointee.ai_family) {
                    lastError = errno
                    Glibc.close(s)
                    throw .system("bind(\(source))", lastError)
                }
                if connect(s, ai.pointee.ai_addr, ai.pointee.ai_addrlen) == 0 {
                    fd = s
                    break
                }
                lastError = errno
                Glibc.close(s)
            } else {
                lastError = errno
            }
            current = ai.pointee.ai_next
        }
        guard fd >= 0 else { throw .system("connect(\(host):\(port))", lastError) }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    deinit { close() }

    /// Binds `fd` to the numeric address `source`, any port; false (errno set) when it cannot.
    static func bind(_ fd: Int32, to source: String, family: Int32) -> Bool {
        if family == AF_INET6 {
            var a = sockaddr_in6()
            a.sin6_family = sa_family_t(AF_INET6)
            guard inet_pton(AF_INET6, source, &a.sin6_addr) == 1 else { return false }
            return withUnsafePointer(to: &a) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) == 0
                }
            }
        }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        guard inet_pton(AF_INET, source, &a.sin_addr) == 1 else { return false }
        return withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    private static func setTimeouts(_ fd: Int32, _ seconds: Double) {
        var tv = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - seconds.rounded(.down)) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    func close() {
        if fd >= 0 {
            Glibc.close(fd)
            fd = -1
        }
    }

    /// Writes all of `bytes`; a peer that closed or reset gives `.closed`.
    func sendAll(_ bytes: [UInt8]) throws(WireError) {
        guard fd >= 0 else { throw .closed }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { buffer in
                Glibc.send(fd, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
            }
            if n < 0 {
                let e = errno
                if e == EINTR { continue }
                if e == EAGAIN || e == EWOULDBLOCK { throw .timeout }
                if e == EPIPE || e == ECONNRESET { throw .closed }
                throw .system("send", e)
            }
            offset += n
        }
    }

    /// Reads what is available into `buffer` waiting until `deadline` (monotonic seconds);
    /// returns 0 on end of file (or reset), throws `.timeout` when nothing arrived in time.
    func receive(into buffer: inout [UInt8], deadline: Double) throws(WireError) -> Int {
        guard fd >= 0 else { throw .closed }
        while true {
            let remaining = deadline - MonotonicClock.now()
            guard remaining > 0 else { throw .timeout }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pfd, 1, Int32(min(remaining * 1000, 1_000_000_000).rounded(.up)))
            if ready < 0 {
                if errno == EINTR { continue }
                throw .system("poll", errno)
            }
            if ready == 0 { continue }
            let n = buffer.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress!, $0.count, Int32(MSG_DONTWAIT)) }
            if n >= 0 { return n }
            let e = errno
            if e == EINTR || e == EAGAIN || e == EWOULDBLOCK { continue }
            if e == ECONNRESET { return 0 }
            throw .system("recv", e)
        }
    }
}
