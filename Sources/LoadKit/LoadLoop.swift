import WireClient

/// LoadKit: the engine and scenarios of `bff-load`, the project's load-test tool.
///
/// One `LoadLoop` (a nonblocking epoll event loop with a nanosecond timerfd) drives many
/// `LoadConnection`s on one thread, reusing WireClient's incremental HTTP and SSE parsers.
/// Scenarios (`LatencyScenario`, `StreamsScenario`, `SearchScenario`, `RestScenario`) are
/// open-loop where latency is measured: each action has a scheduled time and latency counts
/// from it, so a slow server cannot hide its latency by slowing the client down.
#if canImport(Glibc)
    import Glibc
#endif

/// An epoll event loop with timers. Everything registered with it (connections, timers) is
/// touched only on the thread that calls `run`; build and start it on that thread.
package final class LoadLoop {
    private let epollFD: Int32
    private let timerFD: Int32
    private var connections: [LoadConnection?] = []
    private var timers = TimerHeap()
    private var armedDeadline: UInt64 = .max
    private var events = [UInt8](repeating: 0, count: 1024 * Epoll.eventSize)
    /// The receive buffer all connections share (they run one at a time on this thread).
    var readBuffer = [UInt8](repeating: 0, count: 256 * 1024)
    /// Set by `close()`: no more connections or timers are accepted.
    private(set) var isClosed = false
    /// Poll instead of sleeping: `epoll_wait` with a zero timeout in a loop, timers checked on
    /// every turn. The thread spins at 100 % of its core, and in exchange the measurement no
    /// longer includes this process's own wake-ups (a timer firing late, a reply noticed late).
    package var busyPoll = false
    /// Nanoseconds to sleep after a batch of socket events before waiting for the next (0: none). A socket
    /// that becomes readable while this thread sleeps (not in `epoll_wait`) is queued on the epoll without
    /// waking anyone, so a burst to many streams is read in a few batches instead of one wake-up per
    /// handful of sockets. On loopback the server's `write` runs the receiver's wake-up: a loader sharing
    /// the server's host that does not batch its reads charges the server for each of its wake-ups.
    /// Every event is seen at most this much later.
    package var readBatchNanos: UInt64 = 0
    /// How many times `epoll_wait` returned events of connections (timers not counted): the loop's wake-ups
    /// for sockets.
    package private(set) var socketBatches = 0

    /// Creates the epoll instance and its timer.
    package init() throws {
        epollFD = try Epoll.create()
        timerFD = try Epoll.timerCreate()
        Epoll.control(epollFD, Epoll.add, timerFD, events: Epoll.input)
    }

    deinit {
        // Connections can outlive the loop (a pool or stream still holds them): close their
        // sockets here without callbacks, so they neither leak nor reach back into this loop.
        for case let connection? in connections { connection.detach() }
        Glibc.close(epollFD)
        Glibc.close(timerFD)
    }

    /// Closes every registered connection (their `onClose` runs with `nil`) and drops every
    /// timer, which also releases what the timers' closures hold. The loop is finished
    /// afterwards: new connections fail with `.closed` and new timers are ignored.
    package func close() {
        guard !isClosed else { return }
        isClosed = true
        for case let connection? in connections { connection.close() }
        timers = TimerHeap()
        armedDeadline = .max
    }

    /// Now, in monotonic nanoseconds.
    package static func now() -> UInt64 { MonotonicClock.nanoseconds() }

    /// Runs `action` on the loop at `deadline` (monotonic nanoseconds), or at once if past.
    package func schedule(at deadline: UInt64, _ action: @escaping () -> Void) {
        guard !isClosed else { return }
        timers.insert(deadline, action)
        if deadline < armedDeadline { arm(deadline) }
    }

    /// Runs `action` after `seconds`.
    package func schedule(after seconds: Double, _ action: @escaping () -> Void) {
        schedule(at: Self.now() + UInt64(max(0, seconds) * 1e9), action)
    }

    private func arm(_ deadline: UInt64) {
        armedDeadline = deadline
        Epoll.timerArm(timerFD, deadline: deadline)
    }

    func register(_ connection: LoadConnection) throws(WireError) {
        guard !isClosed else { throw .closed }
        let fd = Int(connection.fd)
        if fd >= connections.count { connections += Array(repeating: nil, count: fd - connections.count + 1024) }
        connections[fd] = connection
        let events = Epoll.input | Epoll.output | Epoll.readHangUp | Epoll.edgeTriggered
        Epoll.control(epollFD, Epoll.add, connection.fd, events: events)
    }

    func unregister(_ connection: LoadConnection) {
        Epoll.control(epollFD, Epoll.delete, connection.fd, events: 0)
        connections[Int(connection.fd)] = nil
    }

    /// Runs until `condition` becomes true (checked after every batch of events and timers)
    /// or `timeout` seconds pass. Returns whether `condition` held.
    @discardableResult
    package func run(timeout: Double = .infinity, until condition: () -> Bool = { false }) -> Bool {
        let end = timeout.isFinite ? Self.now() + UInt64(max(0, timeout) * 1e9) : UInt64.max
        while true {
            runDueTimers()
            if condition() { return true }
            let now = Self.now()
            if now >= end { return false }
            // Timers wake the loop through the timerfd; the end of the run bounds the wait itself
            // (rounded up to whole milliseconds, so the loop never wakes before `end`).
            var wait: Int32 = timers.isEmpty ? 1000 : -1
            if end != .max {
                let untilEnd = Int32(clamping: (end - now + 999_999) / 1_000_000)
                wait = wait < 0 ? untilEnd : min(wait, untilEnd)
            }
            if busyPoll { wait = 0 }
            let n = Epoll.wait(epollFD, &events, timeoutMilliseconds: wait)
            if n < 0 { continue }
            var sockets = 0
            for i in 0..<n {
                let (flags, fd) = Epoll.event(events, i)
                if fd == timerFD {
                    var expirations: UInt64 = 0
                    _ = read(timerFD, &expirations, 8)
                    armedDeadline = .max
                    continue
                }
                guard Int(fd) < connections.count, let connection = connections[Int(fd)] else { continue }
                sockets += 1
                connection.handle(events: flags)
            }
            guard sockets > 0 else { continue }
            socketBatches += 1
            if readBatchNanos > 0 { Self.sleep(nanoseconds: readBatchNanos) }
        }
    }

    private static func sleep(nanoseconds: UInt64) {
        var request = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
        var remaining = timespec()
        while nanosleep(&request, &remaining) != 0, errno == EINTR { request = remaining }
    }

    private func runDueTimers() {
        let now = Self.now()
        while let action = timers.popDue(now) { action() }
        if let next = timers.nextDeadline, next != armedDeadline { arm(next) }
        if timers.isEmpty { armedDeadline = .max }
    }
}
