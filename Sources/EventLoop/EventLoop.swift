/// EventLoop: one libevent `event_base` per thread, and the types that keep state on its loop.
///
/// The layer below HTTP (EventHTTP) and Redis (RedisClient): `EventLoop` (a base run by one thread,
/// with a thread-safe `execute` to hand it work, timers, `runSoon`, a lag probe), `LoopBound` and
/// `LoopBoundReference` (state that traps when touched off its loop) and `LoopTimer`. It knows nothing
/// of HTTP, Redis, sessions or view models; the one C pointer it shares is `EventLoop.base` (`package`), for the modules that attach libevent
/// users (evhttp, hiredis) to a loop.
import CLibevent
import Glibc
// Re-exported: the lock type and the monotonic clock are part of what every user of the loops needs.
@_exported import Primitives
import Synchronization

/// One libevent `event_base` driven by one dedicated thread.
///
/// Threading: everything on a loop (its timers, the connections it accepted, the state handed to it)
/// is touched only by its thread. Other threads hand it work with `execute(_:)`, the one thread-safe
/// entry point, which queues a closure and wakes the loop through an `eventfd`.
// Unchecked: a libevent callback context whose loop-thread-only fields (the base's events, `soonJobs`,
// `commonTimeouts`) are touched only on its thread; what other threads use is `Lock`ed or atomic.
public final class EventLoop: @unchecked Sendable, CustomStringConvertible {
    /// The loop's index within its server (0-based), used in logs and metrics.
    public let index: Int
    /// The libevent base. `package` so that RedisClient can attach hiredis to it; nothing above
    /// EventHTTP and RedisClient may use it. Loop thread only.
    package let base: OpaquePointer
    private let wakeFD: Int32
    private var wakeEvent: OpaquePointer?
    /// `runSoon`'s jobs and the socketless event that runs them (loop thread only).
    private var soonJobs: [() -> Void] = []
    private var soonEvent: OpaquePointer?
    /// The cross-thread job queue: one `Lock` round per `execute` and per drain.
    private let queue = Lock<[@Sendable () -> Void]>([])
    private let threadID = Atomic<UInt>(0)
    /// Common-timeout handles by duration in milliseconds (O(1) timer adds; loop thread only).
    private var commonTimeouts: [Int: timeval] = [:]
    /// The lag probe's late readings (`EventLoop+Lag.swift`; loop thread only).
    var lateReadings = LateReadings()

    /// Creates a loop; call `run()` on the thread that will own it (or use `startThread()`).
    public init(index: Int = 0) {
        self.index = index
        let cfg = event_config_new()
        // NOLOCK: the base is used by its own thread only (other threads wake it through eventfd).
        // EPOLL_USE_CHANGELIST: epoll changes are applied once per loop iteration, so evhttp's
        // disable-read / enable-write / enable-read dance on a keep-alive request costs 2 epoll_ctl
        // calls instead of 4 (strace -c). libevent's caveat (dup()ed fds) does not apply: every fd
        // here is a socket or eventfd of its own.
        event_config_set_flag(
            cfg, Int32(EVENT_BASE_FLAG_NOLOCK.rawValue | EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST.rawValue))
        guard let b = event_base_new_with_config(cfg) else { fatalError("event_base_new_with_config failed") }
        event_config_free(cfg)
        base = b
        wakeFD = clibevent_wakefd_new()
        precondition(wakeFD >= 0, "eventfd failed: errno \(errno)")
        let arg = Unmanaged.passUnretained(self).toOpaque()
        wakeEvent = event_new(
            base, wakeFD, Int16(EV_READ | EV_PERSIST),
            { _, _, arg in
                Unmanaged<EventLoop>.fromOpaque(arg!).takeUnretainedValue().drainQueue()
            }, arg)
        event_add(wakeEvent, nil)
        soonEvent = event_new(
            base, -1, 0,
            { _, _, arg in
                Unmanaged<EventLoop>.fromOpaque(arg!).takeUnretainedValue().runSoonJobs()
            }, arg)
    }

    deinit {
        if let wakeEvent { event_free(wakeEvent) }
        if let soonEvent { event_free(soonEvent) }
        close(wakeFD)
        event_base_free(base)
    }

    public var description: String { "EventLoop(\(index))" }

    /// True when called on this loop's thread.
    public var inEventLoop: Bool { threadID.load(ordering: .relaxed) == UInt(pthread_self()) }

    /// Runs `work` on this loop's thread, in submission order. Safe from any thread.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        let wasEmpty = queue.withLock { jobs in
            jobs.append(work)
            return jobs.count == 1
        }
        if wasEmpty { clibevent_wakefd_signal(wakeFD) }
    }

    /// Runs `work` once the callbacks of the current loop iteration have run, before the loop waits
    /// for I/O again (in submission order; a job queued by a job runs in the same iteration too).
    /// Loop thread only. For work the loop gives itself ("commit what this callback emitted", "write
    /// the commands queued so far"), this is what `execute` is not: it makes a libevent event active
    /// instead of writing the loop's `eventfd`, so it costs no system call (`execute` costs a `write`,
    /// an `epoll_wait` and a `read`, and runs one iteration later).
    public func runSoon(_ work: @escaping () -> Void) {
        precondition(inEventLoop, "EventLoop.runSoon off its loop")
        soonJobs.append(work)
        if soonJobs.count == 1 { event_active(soonEvent, EV_WRITE, 0) }
    }

    private func runSoonJobs() {
        let jobs = soonJobs
        soonJobs = []
        for job in jobs { job() }
    }

    private func drainQueue() {
        clibevent_wakefd_drain(wakeFD)
        while true {
            let jobs = takeJobs()
            if jobs.isEmpty { return }
            for job in jobs { job() }
        }
    }

    /// Makes the calling thread this loop's thread without running it (`InProcessClient`).
    package func adoptCallingThread() {
        threadID.store(UInt(pthread_self()), ordering: .relaxed)
    }

    /// Runs the jobs queued so far (`InProcessClient`); true when there were any.
    package func runPendingJobs() -> Bool {
        let jobs = takeJobs()
        for job in jobs { job() }
        return !jobs.isEmpty
    }

    /// Takes every queued job, oldest first.
    private func takeJobs() -> [@Sendable () -> Void] {
        queue.withLock { jobs in
            let taken = jobs
            jobs.removeAll(keepingCapacity: true)
            return taken
        }
    }

    /// Runs the loop on the calling thread until `stop()`.
    public func run() {
        threadID.store(UInt(pthread_self()), ordering: .relaxed)
        event_base_loop(base, 0)
    }

    /// Starts a dedicated thread that runs this loop; returns the thread for `join`.
    package func startThread(name: String) -> pthread_t {
        final class Box {
            let loop: EventLoop
            let name: String
            init(_ l: EventLoop, _ n: String) {
                loop = l
                name = n
            }
        }
        let box = Unmanaged.passRetained(Box(self, name)).toOpaque()
        var tid = pthread_t()
        let rc = pthread_create(
            &tid, nil,
            { arg in
                let box = Unmanaged<Box>.fromOpaque(arg!).takeRetainedValue()
                box.loop.run()
                return nil
            }, box)
        precondition(rc == 0, "pthread_create failed: \(rc)")
        return tid
    }

    /// A `timeval` for `seconds`, using libevent's common-timeout queue for repeated durations: the first
    /// `maxCommonTimeouts` distinct durations (in milliseconds) a loop sees get a queue each (O(1) timers
    /// for the periodic ticks, sweeps and slices, which repeat); any other duration is a plain timeval.
    /// libevent holds at most 256 queues per base and warns on every request past them ("Too many common
    /// timeouts already in use"): Redis command time-outs of every remaining length used to ask for
    /// thousands.
    package func timeout(_ seconds: Double) -> timeval {
        let ms = Int((seconds * 1000).rounded())
        if let tv = commonTimeouts[ms] { return tv }
        var tv = timeval(tv_sec: ms / 1000, tv_usec: (ms % 1000) * 1000)
        guard commonTimeouts.count < EventLoop.maxCommonTimeouts else { return tv }
        if let common = event_base_init_common_timeout(base, &tv) { tv = common.pointee }
        commonTimeouts[ms] = tv
        return tv
    }

    /// Distinct durations given a common-timeout queue per loop (libevent allows 256 per base).
    static let maxCommonTimeouts = 64

    /// Runs `work` once after `seconds` on this loop. Loop thread only.
    @discardableResult
    public func schedule(after seconds: Double, _ work: @escaping () -> Void) -> LoopTimer {
        LoopTimer(loop: self, interval: seconds, repeats: false, work: work)
    }

    /// Runs `work` once when `monotonicNanos()` reaches `deadline` (at once if it has), on this loop. A plain
    /// timer, outside the common-timeout queues: for deadlines whose distance from now rarely repeats
    /// (`timeout(_:)`). Loop thread only.
    @discardableResult
    public func schedule(atNanos deadline: UInt64, _ work: @escaping () -> Void) -> LoopTimer {
        let now = monotonicNanos()
        let wait = deadline > now ? deadline - now : 0
        let tv = timeval(tv_sec: Int(wait / 1_000_000_000), tv_usec: Int(wait % 1_000_000_000 / 1000))
        return LoopTimer(loop: self, timeval: tv, repeats: false, work: work)
    }

    /// Runs `work` every `seconds` on this loop until cancelled. Loop thread only.
    @discardableResult
    public func scheduleRepeating(every seconds: Double, _ work: @escaping () -> Void) -> LoopTimer {
        LoopTimer(loop: self, interval: seconds, repeats: true, work: work)
    }
}
