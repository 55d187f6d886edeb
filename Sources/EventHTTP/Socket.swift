import Glibc

/// A failed system call: the function name and errno.
public struct SystemError: Error, CustomStringConvertible, Sendable {
    public let function: String
    public let errno: Int32
    public var description: String { "\(function) failed: \(String(cString: strerror(errno))) (errno \(errno))" }
}

/// Listening sockets.
enum Socket {
    /// A non-blocking listening socket with SO_REUSEADDR and SO_REUSEPORT.
    static func listen(host: String, port: Int, backlog: Int32) throws(SystemError) -> Int32 {
        let fd = try bound(host: host, port: port, reusePort: true)
        guard Glibc.listen(fd, backlog) == 0 else {
            let e = errno
            close(fd)
            throw SystemError(function: "listen", errno: e)
        }
        return fd
    }

    /// Throws `EADDRINUSE` when some socket already listens on `host:port`, even one with
    /// SO_REUSEPORT. Without this check a second server started on a port in use (a forgotten `bff`,
    /// another user's `github-sim` of the same uid) joins the first one's SO_REUSEPORT group: both
    /// start, and the kernel splits connections between two unrelated processes. The probe sets
    /// SO_REUSEADDR only, so connections left in TIME_WAIT by a previous run do not block a restart.
    static func checkUnused(host: String, port: Int) throws(SystemError) {
        close(try bound(host: host, port: port, reusePort: false))
    }

    /// A non-blocking socket bound to `host:port` with SO_REUSEADDR (and SO_REUSEPORT if asked).
    private static func bound(host: String, port: Int, reusePort: Bool) throws(SystemError) -> Int32 {
        guard (0...65535).contains(port) else {
            throw SystemError(function: "bind(\(host):\(port))", errno: EINVAL)
        }
        let v6 = host.contains(":")
        let fd = socket(
            v6 ? AF_INET6 : AF_INET,
            Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SystemError(function: "socket", errno: errno) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if reusePort { setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size)) }
        var rc: Int32
        if v6 {
            var addr = sockaddr_in6()
            addr.sin6_family = sa_family_t(AF_INET6)
            addr.sin6_port = in_port_t(UInt16(port).bigEndian)
            guard inet_pton(AF_INET6, host, &addr.sin6_addr) == 1 else {
                close(fd)
                throw SystemError(function: "inet_pton(\(host))", errno: EINVAL)
            }
            rc = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        } else {
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_port = in_port_t(UInt16(port).bigEndian)
            let h = host == "localhost" ? "127.0.0.1" : host
            guard inet_pton(AF_INET, h, &addr.sin_addr) == 1 else {
                close(fd)
                throw SystemError(function: "inet_pton(\(host))", errno: EINVAL)
            }
            rc = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        guard rc == 0 else {
            let e = errno
            close(fd)
            throw SystemError(function: "bind(\(host):\(port))", errno: e)
        }
        return fd
    }

    /// The port a socket is bound to.
    static func localPort(_ fd: Int32) throws(SystemError) -> Int {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        guard rc == 0 else { throw SystemError(function: "getsockname", errno: errno) }
        let family = storage.ss_family
        return withUnsafePointer(to: &storage) { p -> Int in
            if family == sa_family_t(AF_INET6) {
                return p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    Int(UInt16(bigEndian: $0.pointee.sin6_port))
                }
            }
            return p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                Int(UInt16(bigEndian: $0.pointee.sin_port))
            }
        }
    }
}
