import Glibc

extension WireConnection {
    /// Shrinks the kernel receive buffer (slow-reader tests: the server's queue fills sooner).
    package func setReceiveBufferSize(_ bytes: Int32) {
        socket.setReceiveBufferSize(bytes)
    }
}

extension BlockingSocket {
    func setReceiveBufferSize(_ bytes: Int32) {
        var v = bytes
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, socklen_t(MemoryLayout<Int32>.size))
    }
}
