import EventHTTP
import Foundation
import Glibc
import RedisClient

/// RedisTestSupport: a real `redis-server` per test and helpers to run event loops in tests.
/// Only test targets depend on it.

/// A real `redis-server` for tests: a free port on 127.0.0.1, no persistence, started and killed by
/// the test. `start()` returns once the server has logged "Ready to accept connections" (read from
/// its stdout: an event, not a sleep).
public final class RedisServerProcess: Sendable {
    /// The server's TCP port on 127.0.0.1.
    public let port: Int
    /// Extra `redis-server` arguments (`--requirepass …`).
    public let extraArguments: [String]
    /// The running server (nil when stopped); any thread.
    private let process = Lock<Process?>(nil)

    /// Picks a free port and starts the server there.
    public init(extraArguments: [String] = []) throws {
        port = try Self.freePort()
        self.extraArguments = extraArguments
        try start()
    }

    /// The server's process id (0 when not running).
    public var pid: Int32 { process.withLock { $0?.processIdentifier ?? 0 } }
    /// `redis://127.0.0.1:<port>`.
    public var url: String { "redis://127.0.0.1:\(port)" }

    /// Starts the server (again, on the same port) and waits until it accepts connections.
    public func start() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/redis-server")
        p.arguments =
            [
                "--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--daemonize", "no", "--loglevel", "notice",
            ] + extraArguments
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        process.withLock { $0 = p }
        var seen = ""
        let handle = out.fileHandleForReading
        let deadline = Date().addingTimeInterval(10)
        while !seen.contains("Ready to accept connections") {
            let chunk = handle.availableData  // blocks until the server writes or exits
            if chunk.isEmpty || Date() > deadline {
                throw NSError(domain: "redis-server did not start: \(seen)", code: 1)
            }
            seen += String(decoding: chunk, as: UTF8.self)
        }
        // Keep draining its log so the server never blocks on a full pipe.
        handle.readabilityHandler = { h in _ = h.availableData }
    }

    /// SIGKILLs the server and waits for it to exit.
    public func kill() {
        guard let p = process.withLock({ $0.take() }) else { return }
        Glibc.kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        (p.standardOutput as? Pipe)?.fileHandleForReading.readabilityHandler = nil
    }

    /// Sends `signal` (SIGSTOP, SIGCONT) to the server.
    public func signal(_ signal: Int32) { Glibc.kill(pid, signal) }

    deinit { kill() }

    /// A port that was free a moment ago (bound to 0 and released).
    public static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let rc = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { a -> Int32 in
                guard bind(fd, a, len) == 0 else { return -1 }
                return getsockname(fd, a, &len)
            }
        }
        guard rc == 0 else { throw NSError(domain: "bind failed", code: Int(errno)) }
        return Int(UInt16(bigEndian: addr.sin_port))
    }
}

/// An event loop on its own thread for a test; `stop()` in tearDown. The thread is detached: nothing
/// joins it, and an unjoined, undetached thread is a leak ThreadSanitizer reports at exit (four per
/// suite, which made `swift test --sanitize=thread` of the Redis suites exit 1).
public func startedLoop() -> EventLoop {
    let loop = EventLoop(index: 0)
    pthread_detach(loop.startThread(name: "redis-test-loop"))
    return loop
}

/// Waits until `connection.state == state`, polling every 5 ms up to `seconds` (a reconnect has no
/// event a test can await without hooking `onStateChange`; a poll with a deadline is the simple way).
public func waitForState(_ connection: RedisConnection, _ state: RedisConnectionState, within seconds: Double = 5) async
    -> Bool
{
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if connection.state == state { return true }
        try? await Task.sleep(nanoseconds: 5_000_000)
    }
    return connection.state == state
}
