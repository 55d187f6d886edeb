import CSpawn
import Foundation
import Glibc

/// Runs programs for the tests (redis-server, redis-cli, ip, the built executables) with `posix_spawn`,
/// never Foundation's `Process`: on this toolchain `Process.run()` reads `/proc/self/fd` with a struct copy
/// that over-reads glibc's buffer and crashes the test process about once in five suites that spawn many
/// children (swift-corelibs-foundation PR 5472; seen here in the full suite). The child gets stdin, stdout
/// and stderr as asked, every other descriptor closed (as `Process` does), and its own process group.
///
/// Threading: any thread; each call owns the descriptors it opens.
package enum Spawn {
    /// Where a child's stdout or stderr goes.
    package enum Output: Sendable {
        /// `/dev/null`.
        case discard
        /// A pipe the caller reads (`run` reads it to the end).
        case capture
    }

    /// What `run` found: the exit status (128 + the signal when a signal ended it) and the outputs.
    package struct Result: Sendable {
        package var status: Int32
        package var output: String
        package var errorOutput: String
    }

    /// A started child: its pid and, when captured, the read ends of its stdout and stderr pipes (the
    /// caller closes them).
    package struct Child: Sendable {
        package let pid: pid_t
        package let stdout: Int32?
        package let stderr: Int32?
    }

    /// Runs `path` with `arguments` to its end: `input` on its stdin (else `/dev/null`), stdout and stderr
    /// captured.
    package static func run(_ path: String, _ arguments: [String], input: String? = nil) throws -> Result {
        var inputFDs: [Int32] = [-1, -1]
        if input != nil { guard cspawn_pipe(&inputFDs) == 0 else { throw POSIXError(.EMFILE) } }
        let child: Child
        do {
            child = try start(path, arguments, stdin: input == nil ? nil : inputFDs[0])
        } catch {
            if input != nil { for fd in inputFDs { close(fd) } }
            throw error
        }
        if let input {
            close(inputFDs[0])
            let bytes = Array(input.utf8)
            var sent = 0
            while sent < bytes.count {
                let n = bytes[sent...].withUnsafeBytes { write(inputFDs[1], $0.baseAddress, $0.count) }
                if n <= 0 { break }
                sent += n
            }
            close(inputFDs[1])
        }
        let (out, err) = readBoth(child.stdout!, child.stderr!)
        return Result(status: wait(child.pid), output: out, errorOutput: err)
    }

    /// Starts `path` with `arguments`: stdin from `stdin` (else `/dev/null`), stdout and stderr as asked.
    package static func start(
        _ path: String, _ arguments: [String], stdin: Int32? = nil, stdout: Output = .capture,
        stderr: Output = .capture
    ) throws -> Child {
        var outFDs: [Int32] = [-1, -1]
        var errFDs: [Int32] = [-1, -1]
        if case .capture = stdout { guard cspawn_pipe(&outFDs) == 0 else { throw POSIXError(.EMFILE) } }
        if case .capture = stderr {
            guard cspawn_pipe(&errFDs) == 0 else {
                for fd in outFDs where fd >= 0 { close(fd) }
                throw POSIXError(.EMFILE)
            }
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let stdin {
            posix_spawn_file_actions_adddup2(&actions, stdin, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        for (fd, fds, output) in [(Int32(1), outFDs, stdout), (Int32(2), errFDs, stderr)] {
            switch output {
            case .capture: posix_spawn_file_actions_adddup2(&actions, fds[1], fd)
            case .discard: posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", O_WRONLY, 0)
            }
        }
        cspawn_close_from(&actions, 3)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK))
        posix_spawnattr_setpgroup(&attributes, 0)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)

        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, path, &actions, &attributes, argv, environ)
        for fd in [outFDs[1], errFDs[1]] where fd >= 0 { close(fd) }
        guard rc == 0 else {
            for fd in [outFDs[0], errFDs[0]] where fd >= 0 { close(fd) }
            throw POSIXError(POSIXErrorCode(rawValue: rc) ?? .ENOENT)
        }
        return Child(pid: pid, stdout: outFDs[0] >= 0 ? outFDs[0] : nil, stderr: errFDs[0] >= 0 ? errFDs[0] : nil)
    }

    /// Runs `path` with `arguments` for `seconds` (a watcher such as `redis-cli monitor`), then ends it with
    /// SIGTERM: everything it wrote on stdout. Its output is read throughout (its pipe never fills).
    package static func output(of path: String, _ arguments: [String], for seconds: Double) throws -> String {
        let child = try start(path, arguments, stderr: .discard)
        let out = child.stdout!
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        let deadline = Date().addingTimeInterval(seconds)
        var ended = false
        while true {
            let left = deadline.timeIntervalSinceNow
            if left <= 0, !ended {
                kill(child.pid, SIGTERM)
                ended = true
            }
            var p = pollfd(fd: out, events: Int16(POLLIN), revents: 0)
            let ready = poll(&p, 1, ended ? -1 : Int32(left * 1000) + 1)
            if ready <= 0 { continue }
            let n = read(out, &buffer, buffer.count)
            if n > 0 {
                data.append(contentsOf: buffer[0..<n])
            } else if n == 0 || errno != EINTR {
                break
            }
        }
        close(out)
        wait(child.pid)
        return String(decoding: data, as: UTF8.self)
    }

    /// Waits for `pid` to end: its exit status, or 128 + the signal that ended it.
    @discardableResult
    package static func wait(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            guard errno == EINTR else { return -1 }
        }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    /// Reads `out` and `err` to their ends (both at once: neither pipe can fill and stall the child), then
    /// closes them.
    static func readBoth(_ out: Int32, _ err: Int32) -> (String, String) {
        var data: [Int32: [UInt8]] = [out: [], err: []]
        var open = [out, err]
        var buffer = [UInt8](repeating: 0, count: 65536)
        while !open.isEmpty {
            var fds = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            guard poll(&fds, nfds_t(fds.count), -1) >= 0 || errno == EINTR else { break }
            for p in fds where p.revents != 0 {
                let n = read(p.fd, &buffer, buffer.count)
                if n > 0 {
                    data[p.fd]!.append(contentsOf: buffer[0..<n])
                } else if n == 0 || errno != EINTR {
                    open.removeAll { $0 == p.fd }
                }
            }
        }
        close(out)
        close(err)
        return (String(decoding: data[out]!, as: UTF8.self), String(decoding: data[err]!, as: UTF8.self))
    }
}
