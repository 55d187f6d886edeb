import EventLoop
import Foundation
import Glibc

/// A TCP proxy on 127.0.0.1 in front of one server, for the failures a test cannot cause with signals:
/// a connection that stays up but delivers nothing ("up but deaf"): `freeze(where:)` stops forwarding
/// the server's bytes on the current connections whose client bytes so far match (they are read and
/// dropped, so the server never blocks); both sockets stay open. New connections are not frozen. And a
/// server that answers, but slowly: `slowDown(toBytesPerTick:where:)` trickles its bytes.
///
/// Threading: any thread; one thread per direction of each connection (blocking I/O, tests only). The
/// connections are behind a `Lock`, each connection's state behind its own.
package final class FreezingProxy: Sendable {
    /// The port clients connect to.
    package let port: Int
    private let target: Int
    private let listener: Int32
    private let pairs = Lock<[Pair]>([])

    /// One proxied connection: its two sockets and, behind its lock, what the client sent so far,
    /// whether the server's direction is frozen, and how many directions have finished.
    private final class Pair: Sendable {
        struct State {
            var sent: [UInt8] = []
            var frozen = false
            /// Server bytes forwarded per 0.1 s (nil: as fast as they come).
            var trickle: Int?
            /// Client bytes forwarded per 0.1 s (nil: as fast as they come).
            var trickleUp: Int?
            var finished = 0
        }

        let client: Int32
        let server: Int32
        let state = Lock(State())

        init(client: Int32, server: Int32) {
            self.client = client
            self.server = server
        }
    }

    /// A proxy to `127.0.0.1:targetPort`, accepting at once.
    package init(targetPort: Int) throws {
        target = targetPort
        listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = Self.loopback(port: 0)
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let fd = listener
        let ok = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 && listen(fd, 64) == 0
            }
        }
        guard ok else { throw POSIXError(.EADDRINUSE) }
        port = Int(UInt16(bigEndian: addr.sin_port))
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// Freezes the server-to-client direction of every current connection whose client bytes so far
    /// satisfy `selected` (e.g. contain `SSUBSCRIBE`); returns how many it froze.
    @discardableResult
    package func freeze(where selected: ([UInt8]) -> Bool) -> Int {
        let all = pairs.withLock { $0 }
        var n = 0
        for p in all {
            let froze = p.state.withLock { s -> Bool in
                guard !s.frozen, selected(s.sent) else { return false }
                s.frozen = true
                return true
            }
            if froze { n += 1 }
        }
        return n
    }

    /// Slows the server-to-client direction (with `clientBytes`, the client-to-server one: commands reach
    /// the server late) of every current connection whose client bytes so far satisfy `selected` to
    /// `bytesPerTick` bytes every 0.1 s (a Redis that answers, but slowly); returns how many.
    @discardableResult
    package func slowDown(
        toBytesPerTick bytesPerTick: Int, clientBytes: Bool = false, where selected: ([UInt8]) -> Bool
    ) -> Int {
        var n = 0
        for p in pairs.withLock({ $0 }) where p.state.withLock({ selected($0.sent) }) {
            p.state.withLock {
                if clientBytes { $0.trickleUp = max(1, bytesPerTick) } else { $0.trickle = max(1, bytesPerTick) }
            }
            n += 1
        }
        return n
    }

    /// True when `bytes` contain `text` (ASCII, case-insensitive): a helper for `freeze(where:)`.
    package static func contains(_ bytes: [UInt8], _ text: String) -> Bool {
        String(decoding: bytes, as: UTF8.self).uppercased().contains(text.uppercased())
    }

    /// Closes the listener and every connection.
    package func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for p in pairs.withLock({ $0 }) {
            shutdown(p.client, Int32(SHUT_RDWR))
            shutdown(p.server, Int32(SHUT_RDWR))
        }
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var addr = Self.loopback(port: target)
            let connected = withUnsafeMutablePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                }
            }
            guard connected else {
                close(client)
                close(server)
                continue
            }
            let pair = Pair(client: client, server: server)
            pairs.withLock { $0.append(pair) }
            Thread.detachNewThread { [self] in pump(pair, from: client, to: server, clientSide: true) }
            Thread.detachNewThread { [self] in pump(pair, from: server, to: client, clientSide: false) }
        }
    }

    private func pump(_ pair: Pair, from: Int32, to: Int32, clientSide: Bool) {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = read(from, &buffer, buffer.count)
            if n <= 0 { break }
            let chunk = clientSide ? Array(buffer[0..<n]) : []
            let (forward, trickle) = pair.state.withLock { s -> (Bool, Int?) in
                if clientSide, s.sent.count < 64 * 1024 { s.sent += chunk }
                return (clientSide || !s.frozen, clientSide ? s.trickleUp : s.trickle)
            }
            guard forward else { continue }
            if let trickle {
                var at = 0
                while at < n {
                    let slice = min(trickle, n - at)
                    let sent = buffer[at..<(at + slice)].withUnsafeBytes {
                        send(to, $0.baseAddress, slice, Int32(MSG_NOSIGNAL))  // the client may have closed
                    }
                    if sent != slice { break }
                    at += slice
                    usleep(100_000)
                }
                if at < n { break }
            } else if send(to, buffer, n, Int32(MSG_NOSIGNAL)) != n {
                break
            }
        }
        shutdown(from, Int32(SHUT_RDWR))
        shutdown(to, Int32(SHUT_RDWR))
        let last = pair.state.withLock { s -> Bool in
            s.finished += 1
            return s.finished == 2
        }
        if last {
            pairs.withLock { $0.removeAll { $0 === pair } }
            close(pair.client)
            close(pair.server)
        }
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = UInt16(port).bigEndian
        return addr
    }
}
