/// EventHTTP: HTTP/1.1 over libevent's evhttp, one `evhttp` per event loop.
///
/// It knows nothing of sessions, view models or GitHub. It offers `HTTPServer` (one evhttp per loop on
/// `SO_REUSEPORT` sockets, limits, graceful shutdown), a `Router` with path parameters and automatic
/// 404/405, streaming responses (`HTTPStream`), RFC 9457 problem responses and static files. No
/// C pointer leaves it. The loops come from
/// EventLoop, re-exported: every handler runs on one.
import CLibevent
import CoreMetrics
@_exported import EventLoop
import Glibc
import Logging
import Synchronization

/// An HTTP/1.1 server: `threads` event loops, each with its own evhttp and its own listening
/// socket bound with `SO_REUSEPORT` to the same port (the kernel spreads connections over them).
/// A connection lives on the loop that accepted it for its whole life.
///
/// Threading: configure (`router`, `onDrain`) before `start()`; `start()`/`shutdown()` are called
/// from one controlling thread (never from a loop); `state`, `port` and `loops` may be read anywhere.
/// What `start()` sets up is kept under one `Lock` (taken at start, shutdown and by `/metrics`).
public final class HTTPServer: Sendable {
    public let configuration: Configuration
    public let router = Router()
    public let logger: Logger
    let metrics: ServerMetrics
    /// The loops (one per thread; their threads run from `start()`). Hand work to one with `execute`.
    public let loops: [EventLoop]
    /// What `start()` made and `shutdown()` takes down.
    private struct Running {
        var loopHTTPs: [LoopHTTP] = []
        var threads: [pthread_t] = []
        var staticFiles: StaticFiles?
        var port = 0
        var onDrain: (@Sendable () -> Void)?
    }
    private let running = Lock(Running())
    private let unjoinedThreads = Atomic<Int>(0)
    private let stateValue = Atomic<Int>(State.starting.rawValue)

    /// The static file server of `publicDirectory` (set by `start()`), e.g. to await its re-scans.
    public var staticFiles: StaticFiles? { running.withLock { $0.staticFiles } }

    /// The bound port (valid after `start()`).
    public var port: Int { running.withLock { $0.port } }

    /// Called once, on the controlling thread, when draining starts: end long-lived responses here.
    public var onDrain: (@Sendable () -> Void)? {
        get { running.withLock { $0.onDrain } }
        set { running.withLock { $0.onDrain = newValue } }
    }

    private var loopHTTPs: [LoopHTTP] { running.withLock { $0.loopHTTPs } }

    /// Creates a server; nothing is bound until `start()`.
    public init(
        configuration: Configuration, logger: Logger, metricsFactory: any MetricsFactory = MetricsSystem.factory
    ) {
        self.configuration = configuration
        self.logger = logger
        self.metrics = ServerMetrics(factory: metricsFactory)
        loops = (0..<max(1, configuration.threads)).map { EventLoop(index: $0) }
    }

    /// The lifecycle state (`starting` until `start()` returns, `draining` during shutdown).
    public var state: State { State(rawValue: stateValue.load(ordering: .acquiring)) ?? .stopped }

    /// Open connections across all loops.
    public var openConnections: Int { metrics.connectionCount.load(ordering: .relaxed) }

    /// Loop threads started and not yet joined: one per loop while running, 0 once `shutdown()` has returned.
    public var unjoinedLoopThreads: Int { unjoinedThreads.load(ordering: .acquiring) }

    /// Binds the sockets and starts the loop threads. Throws `SystemError` when binding fails.
    ///
    /// Also ignores SIGPIPE process-wide: libevent writes to sockets the peer may have closed.
    public func start() throws(SystemError) {
        signal(SIGPIPE, SIG_IGN)
        var staticFiles: StaticFiles?
        if router.fallback == nil, let dir = configuration.publicDirectory {
            let files = StaticFiles(
                directory: dir, htmlHeaders: configuration.htmlHeaders, maxTotalBytes: configuration.staticMaxBytes,
                logger: logger)
            staticFiles = files
            router.fallback = files.handler
        }
        let n = loops.count
        var fds: [Int32] = []
        var bindPort = configuration.port
        // A fixed port some process already listens on is an error, not a shared SO_REUSEPORT group.
        if bindPort != 0 { try Socket.checkUnused(host: configuration.host, port: bindPort) }
        for i in 0..<n {
            do {
                let fd = try Socket.listen(host: configuration.host, port: bindPort, backlog: configuration.backlog)
                if i == 0 { bindPort = try Socket.localPort(fd) }
                fds.append(fd)
            } catch {
                for fd in fds { close(fd) }
                throw error
            }
        }
        running.withLock {
            $0.port = bindPort
            $0.staticFiles = staticFiles
        }
        let loopHTTPs = fds.enumerated().map { i, fd in LoopHTTP(server: self, loop: loops[i], listenFD: fd) }
        staticFiles?.startWatching(interval: configuration.staticRescanInterval)
        let threads = loops.map { $0.startThread(name: "http-loop-\($0.index)") }
        running.withLock {
            $0.loopHTTPs = loopHTTPs
            $0.threads = threads
        }
        unjoinedThreads.store(threads.count, ordering: .releasing)
        stateValue.store(State.running.rawValue, ordering: .releasing)
        let budget = CPUBudget.current
        let why = n == budget.count ? "CPUs this process may use: \(budget.reason)" : "configured; CPU budget \(budget)"
        logger.info(
            "listening",
            metadata: [
                "host": "\(configuration.host)", "port": "\(bindPort)", "threads": "\(n)", "threadsReason": "\(why)",
            ])
    }

    /// The request counts and latency histograms of every loop, merged, as Prometheus text
    /// (`http_requests_total`, `http_request_duration_seconds`). Each loop hands over a copy of its
    /// own figures on its thread; `done` runs on `loop` once all have. Call from `loop`.
    public func requestMetricsExposition(replyOn loop: EventLoop, _ done: @escaping (String) -> Void) {
        struct Gather {
            var merged = RequestMetrics()
            var remaining: Int
            let done: (String) -> Void
        }
        let loopHTTPs = loopHTTPs
        guard !loopHTTPs.isEmpty else { return done("") }
        let gather = LoopBound(Gather(remaining: loopHTTPs.count, done: done), loop: loop)
        for lh in loopHTTPs {
            lh.loop.execute {
                let copy = lh.requestMetrics
                loop.execute {
                    gather.value.merged.merge(copy)
                    gather.value.remaining -= 1
                    if gather.value.remaining == 0 { gather.value.done(gather.value.merged.exposition()) }
                }
            }
        }
    }

    /// Graceful shutdown: `readyz` turns 503 (state `draining`), accepting stops, `onDrain` ends
    /// long-lived responses, in-flight requests get up to `gracePeriod` seconds, then every
    /// connection is closed and the loop threads exit. Blocks until they have. Idempotent.
    ///
    /// Never from one of the server's own loops (it traps): that loop could not run the closing of its
    /// connections while this waits, and a thread cannot join itself (`pthread_join` fails with
    /// `EDEADLK`), so its thread would end unjoined.
    public func shutdown(gracePeriod: Double = 10) {
        guard
            stateValue.compareExchange(
                expected: State.running.rawValue, desired: State.draining.rawValue,
                ordering: .acquiringAndReleasing
            ).exchanged
        else { return }
        if let own = loops.first(where: \.inEventLoop) {
            preconditionFailure("HTTPServer.shutdown() on \(own)'s own thread: call it from a controlling thread")
        }
        logger.info("draining", metadata: ["openConnections": "\(openConnections)"])
        let loopHTTPs = loopHTTPs
        for lh in loopHTTPs { lh.loop.execute { lh.stopAccepting() } }
        onDrain?()
        let deadline = monotonicNanos() + UInt64(gracePeriod * 1e9)
        while metrics.inFlight.load(ordering: .relaxed) > 0 && monotonicNanos() < deadline {
            usleep(5_000)  // a shutdown wait, not test synchronisation: polls an atomic for at most gracePeriod
        }
        for lh in loopHTTPs {
            lh.loop.execute {
                lh.freeAll()
                event_base_loopbreak(lh.loop.base)
            }
        }
        let threads = running.withLock { running in
            defer { running.threads = [] }
            return running.threads
        }
        for t in threads {
            let rc = pthread_join(t, nil)
            precondition(rc == 0, "pthread_join of a loop thread failed: \(rc)")
            unjoinedThreads.subtract(1, ordering: .releasing)
        }
        staticFiles?.stopWatching()
        stateValue.store(State.stopped.rawValue, ordering: .releasing)
        logger.info("stopped")
    }
}
