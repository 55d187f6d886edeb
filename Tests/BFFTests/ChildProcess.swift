import Foundation
import Glibc
import XCTest

/// A real child process (one of the built executables, or a script) for tests of what only a
/// process shows: signals, exit codes, the working directory. Started with `posix_spawn`, signal
/// mask cleared and SIGINT/SIGTERM/SIGPIPE at their defaults (as from a terminal); stdout is a
/// pipe the test reads lines from, stderr goes to a file.
final class ChildProcess {
    let pid: pid_t
    let stderrPath: String
    private let stdoutFD: Int32
    private var stdoutText = ""
    private let exited = DispatchSemaphore(value: 0)
    private let statusBox = StatusBox()

    /// The folder of the built executables: the test bundle's own (`.build/<triple>/debug`).
    static var buildFolder: String {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
        var url = URL(fileURLWithPath: exe).deletingLastPathComponent()
        while url.pathExtension == "xctest" || url.path.contains(".xctest/") { url = url.deletingLastPathComponent() }
        return url.path
    }

    /// The package's root folder (for scripts).
    static var packageRoot: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
    }

    /// Starts `path` with `arguments` in `directory`, with `environment` added to this process's.
    /// `ownProcessGroup` puts it in a new process group whose id is its pid (like `setsid`/a shell job).
    init(
        _ path: String, _ arguments: [String], directory: String? = nil, environment: [String: String] = [:],
        ownProcessGroup: Bool = false
    ) throws {
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        stderrPath = NSTemporaryDirectory() + "child-\(UUID().uuidString).stderr"
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else { throw POSIXError(.EMFILE) }
        stdoutFD = pipeFDs[0]

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipeFDs[1], 1)
        posix_spawn_file_actions_addclose(&actions, pipeFDs[0])
        posix_spawn_file_actions_addclose(&actions, pipeFDs[1])
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
        if ownProcessGroup {
            flags |= POSIX_SPAWN_SETPGROUP
            posix_spawnattr_setpgroup(&attributes, 0)
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for s in [SIGINT, SIGTERM, SIGPIPE] { sigaddset(&defaults, s) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)

        // in `directory`: through env -C, which changes folder and execs (same pid)
        let program = directory == nil ? path : "/usr/bin/env"
        let fullArguments = directory.map { ["/usr/bin/env", "-C", $0, path] } ?? [path]
        let argv = (fullArguments + arguments).map { strdup($0) } + [nil]
        let envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for p in argv { free(p) }
            for p in envp { free(p) }
        }
        var child: pid_t = 0
        let rc = posix_spawn(&child, program, &actions, &attributes, argv, envp)
        close(pipeFDs[1])
        guard rc == 0 else {
            close(pipeFDs[0])
            throw POSIXError(POSIXErrorCode(rawValue: rc) ?? .ENOENT)
        }
        pid = child
        let (box, done, spawned) = (statusBox, exited, child)
        Thread.detachNewThread {
            var status: Int32 = 0
            while waitpid(spawned, &status, 0) == -1 && errno == EINTR {}
            box.set(status)
            done.signal()
        }
    }

    deinit {
        if !hasExited {
            kill(pid, SIGKILL)
            _ = exited.wait(timeout: .now() + 5)
        }
        close(stdoutFD)
        unlink(stderrPath)
    }

    /// Reads stdout until a line contains `text`; returns that line (nil after `timeout` or at EOF).
    func waitForLine(containing text: String, timeout: Double = 15) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            if let line = stdoutText.split(separator: "\n").first(where: { $0.contains(text) }) { return String(line) }
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return nil }
            var p = pollfd(fd: stdoutFD, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, Int32(left * 1000) + 1) > 0 else { continue }
            let n = read(stdoutFD, &buffer, buffer.count)
            guard n > 0 else { return nil }
            stdoutText += String(decoding: buffer[0..<n], as: UTF8.self)
        }
    }

    /// The port in the first stdout line that contains `marker` and ends with `:PORT`.
    func waitForPort(marker: String, timeout: Double = 15) -> Int? {
        guard let line = waitForLine(containing: marker, timeout: timeout) else { return nil }
        let digits = line.split(separator: ":").last.map { $0.prefix { $0.isNumber } } ?? ""
        return Int(digits)
    }

    /// Sends `signal` to the process (or to its process group).
    func send(_ signal: Int32, toGroup: Bool = false) {
        kill(toGroup ? -pid : pid, signal)
    }

    var hasExited: Bool { statusBox.get() != nil }

    /// Waits up to `timeout` seconds for the exit; the exit code, or nil if still running or killed by a signal.
    func waitForExit(timeout: Double) -> Int32? {
        guard exited.wait(timeout: .now() + timeout) == .success else { return nil }
        exited.signal()  // let later calls (and deinit) see it too
        guard let status = statusBox.get(), status & 0x7f == 0 else { return nil }
        return (status >> 8) & 0xff
    }

    /// What the process wrote to stderr so far.
    var stderrText: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    /// A port that was free a moment ago (for programs that must be told a port in advance).
    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0
            }
        }
        return Int(UInt16(bigEndian: addr.sin_port))
    }
}

/// The exit status, set once by the reaping thread.
private final class StatusBox: @unchecked Sendable {
    private let lock = NSLock()
    private var status: Int32?
    func set(_ s: Int32) {
        lock.lock()
        status = s
        lock.unlock()
    }
    func get() -> Int32? {
        lock.lock()
        defer { lock.unlock() }
        return status
    }
}
