import EventLoop
import Foundation
import Glibc
import RedisClient

/// RedisTestSupport: a real `redis-server` per test and helpers to run event loops in tests.
/// Only test targets depend on it.

/// A real `redis-server` for tests: a free port on 127.0.0.1, no persistence, started and killed by
/// the test. `start()` returns once the server has logged "Ready to accept connections" (read from
/// its stdout: an event, not a sleep).
package final class RedisServerProcess: Sendable {
    /// The server's TCP port on 127.0.0.1.
    package let port: Int
    /// Extra `redis-server` arguments (`--requirepass …`).
    package let extraArguments: [String]
    /// The whole command line after `redis-server` (a sentinel's starts with its config file).
    private let arguments: [String]
    /// The log line that says the server is ready.
    private let readyLine: String
    /// The running server (nil when stopped); any thread.
    private let process = Lock<pid_t?>(nil)

    /// Picks a free port and starts the server there.
    package convenience init(extraArguments: [String] = []) throws {
        try self.init(port: Self.freePort(), extraArguments: extraArguments)
    }

    /// Starts a server on `port` (a cluster node's bus port must be chosen with it).
    package init(port: Int, extraArguments: [String] = []) throws {
        self.port = port
        self.extraArguments = extraArguments
        readyLine = "Ready to accept connections"
        arguments =
            [
                "--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--daemonize", "no", "--loglevel", "notice",
            ] + extraArguments
        try start()
    }

    /// Starts `redis-server` with exactly `arguments` (a sentinel: its config file, `--sentinel`, …),
    /// listening on `port`; `start()` returns once it logged `readyLine`.
    package init(port: Int, arguments: [String], readyLine: String) throws {
        self.port = port
        self.extraArguments = []
        self.arguments = arguments
        self.readyLine = readyLine
        try start()
    }

    /// The server's process id (0 when not running).
    package var pid: Int32 { process.withLock { $0 ?? 0 } }
    /// `redis://127.0.0.1:<port>`.
    package var url: String { "redis://127.0.0.1:\(port)" }

    /// Starts the server (again, on the same port) and waits until it accepts connections.
    package func start() throws { try start(adding: []) }

    /// Starts the server (again, on the same port) with `additional` arguments after its own (e.g.
    /// `--replicaof host port`: a killed Sentinel master back as the new master's replica), and waits
    /// until it accepts connections.
    package func start(adding additional: [String]) throws {
        let child = try Spawn.start("/usr/bin/redis-server", arguments + additional, stderr: .discard)
        process.withLock { $0 = child.pid }
        let out = child.stdout!
        var seen = ""
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = Date().addingTimeInterval(10)
        while !seen.contains(readyLine) {
            let left = deadline.timeIntervalSinceNow
            var p = pollfd(fd: out, events: Int16(POLLIN), revents: 0)
            let n = left > 0 && poll(&p, 1, Int32(left * 1000) + 1) > 0 ? read(out, &buffer, buffer.count) : 0
            if n <= 0 {
                close(out)
                throw NSError(domain: "redis-server did not start: \(seen)", code: 1)
            }
            seen += String(decoding: buffer[0..<n], as: UTF8.self)
        }
        // Keep draining its log so the server never blocks on a full pipe; the pipe ends when it exits.
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = read(out, &buffer, buffer.count)
                if n > 0 || (n < 0 && errno == EINTR) { continue }
                break
            }
            close(out)
        }
    }

    /// SIGKILLs the server and waits for it to exit.
    package func kill() {
        guard let pid = process.withLock({ $0.take() }) else { return }
        Glibc.kill(pid, SIGKILL)
        Spawn.wait(pid)
    }

    /// Sends `signal` (SIGSTOP, SIGCONT) to the server.
    package func signal(_ signal: Int32) { Glibc.kill(pid, signal) }

    /// Stops the server (`SIGSTOP`) and returns once the kernel reports it stopped (at most 5 s).
    package func stop() {
        signal(SIGSTOP)
        let deadline = Date().addingTimeInterval(5)
        while !isStopped, Date() < deadline { usleep(1000) }
    }

    /// A stall of the whole host as this process and the server see it (a paused VM): this process is
    /// stopped (`SIGSTOP`, from a child shell) for `seconds`, then continued, and the stopped server right
    /// after it unless `continueServer` is false. Returns once this process runs again. Its event loops
    /// wait in `epoll_wait` meanwhile, as an idle loop does when its host stalls.
    package func stallWithThisProcess(for seconds: Double, continueServer: Bool = true) throws {
        let me = getpid()
        let script =
            "kill -STOP \(me); sleep \(seconds); kill -CONT \(me)" + (continueServer ? "; kill -CONT \(pid)" : "")
        let child = try Spawn.start("/bin/sh", ["-c", script], stdout: .discard, stderr: .discard)
        let status = Spawn.wait(child.pid)
        guard status == 0 else { throw NSError(domain: "the stall's shell exited with \(status)", code: Int(status)) }
    }

    /// True while the server is stopped by `SIGSTOP` (its state in `/proc/<pid>/stat` is `T`).
    package var isStopped: Bool { Self.isStopped(pid: pid) }

    /// True while process `pid` is stopped by `SIGSTOP` (its state in `/proc/<pid>/stat` is `T`): a signal
    /// is delivered asynchronously, so tests that stop a process (a Redis, a node) wait for this.
    package static func isStopped(pid: Int32) -> Bool {
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
        return stat.split(separator: ")").last?.split(separator: " ").first == "T"
    }

    /// True while the server process runs (not killed).
    package var isRunning: Bool { process.withLock { $0 != nil } }

    /// Runs `redis-cli -p <port> args…` (blocking, for test set-up and checks) and returns its output,
    /// trimmed; "" when it could not run.
    @discardableResult
    package func cli(_ args: String...) -> String { Self.cli(port: port, args) }

    /// `redis-cli -p port args…`, as `cli(_:)`.
    package static func cli(port: Int, _ args: [String]) -> String {
        guard let r = try? Spawn.run("/usr/bin/redis-cli", ["-p", "\(port)"] + args) else { return "" }
        return r.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    deinit { kill() }

    /// A port that was free a moment ago (bound to 0 and released).
    package static func freePort() throws -> Int {
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
package func startedLoop() -> EventLoop {
    let loop = EventLoop(index: 0)
    pthread_detach(loop.startThread(name: "redis-test-loop"))
    return loop
}

/// Waits until `connection.state == state`, polling every 5 ms up to `seconds` (a reconnect has no
/// event a test can await without hooking `onStateChange`; a poll with a deadline is the simple way).
package func waitForState(_ connection: RedisConnection, _ state: RedisConnectionState, within seconds: Double = 5)
    async
    -> Bool
{
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if connection.state == state { return true }
        try? await Task.sleep(nanoseconds: 5_000_000)
    }
    return connection.state == state
}
