/// BFF: the application — sessions, their event streams, and the composition of the layers.
///
/// This module is the composition root's library half: `Application` builds the HTTP server, the
/// session layer (one `SessionLoop` per event loop), the shared `status` view model and the
/// routes, from an `AppConfiguration` and an injected `RepositorySearching`. `bff`'s main only
/// reads flags, builds the GitHub model, and calls this; tests build the application the same way.
import Dispatch
import EventHTTP
import GitHubSearch
import Glibc
import JSON
import Logging
import Synchronization
import ViewModels

/// The running application. Create, `start()`, later `shutdown()`.
///
/// Threading: `start`/`shutdown` from one controlling thread; the session layer lives on the loops.
public final class Application: @unchecked Sendable {
    public let configuration: AppConfiguration
    public let server: HTTPServer
    let logger: Logger
    let metrics = AppMetrics()
    let search: any RepositorySearching
    private(set) var sessionLoops: [SessionLoop] = []
    /// One hazard slot per loop: how loops read each other's published snapshots without a lock.
    let hazards: HazardDomain
    /// Where `GET /state` reads a snapshot without a hop (set once the loops exist).
    private(set) var snapshots: LocalSnapshots!
    /// The one shared `status` view model, owned by loop 0.
    let status: StatusViewModel
    private let sessionCount = Atomic<Int>(0)
    /// Builds one session's own view models (everything but `status`), given the owner's executor.
    let makeViewModels: (@escaping OwnerExecutor) -> [ViewModel]
    /// The session layer's time (idle expiry, token buckets, idempotency windows).
    let clock: SessionClock
    /// Cluster mode's Redis side (nil: single process, sessions in memory).
    let cluster: ClusterNode?

    /// Builds the application (nothing listens until `start()`). `makeViewModels` defaults to the
    /// product's `search` and `greeting`; adding a view model touches only that list. `clock` is the
    /// session layer's time (tests pass a manual one).
    public init(
        configuration: AppConfiguration, search: any RepositorySearching, logger: Logger,
        makeViewModels: ((@escaping OwnerExecutor) -> [ViewModel])? = nil, clock: SessionClock = .monotonic
    ) {
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
        self.search = search
        server = HTTPServer(configuration: configuration.http, logger: logger, metricsFactory: metrics.factory)
        metrics.eventLoopThreads.set(server.loops.count)
        let loop0 = server.loops[0]
        status = StatusViewModel(executor: { work in loop0.execute(work) })
        let pageSize = configuration.searchPageSize
        // Not `makeViewModels ?? { … }`: a closure taken out of an optional is called through a
        // reabstraction thunk, which wraps the executor it is given in a thunk of its own (twice, 64 B
        // per session); the default closure assigned directly is called as is.
        if let makeViewModels {
            self.makeViewModels = makeViewModels
        } else {
            self.makeViewModels = { executor in
                [Application.searchViewModel(search, perPage: pageSize, executor: executor), GreetingViewModel()]
            }
        }
        let (loops, factory) = (server.loops, metrics.factory)
        cluster = configuration.cluster.map {
            ClusterNode(settings: $0, configuration: configuration, loops: loops, logger: logger, factory: factory)
        }
        hazards = HazardDomain(loops: server.loops.count)
        sessionLoops = server.loops.map { SessionLoop(app: self, loop: $0, status: status.snapshot) }
        snapshots = LocalSnapshots(loops: sessionLoops, hazards: hazards)
        status.onEvent = { [unowned self] _, event in
            for sl in self.sessionLoops { sl.loop.runOrExecute { sl.statusChanged(event) } }
        }
        registerRoutes()
        server.onDrain = { [unowned self] in
            for sl in self.sessionLoops { sl.loop.execute { sl.endAllStreams() } }
        }
    }

    private static func searchViewModel<S: RepositorySearching>(_ s: S, perPage: Int, executor: @escaping OwnerExecutor)
        -> ViewModel
    {
        SearchViewModel(search: s, perPage: perPage, executor: executor)
    }

    /// Starts listening and the session timers.
    public func start() throws(SystemError) {
        try server.start()
        if let cluster {
            cluster.start()
            subscribeForwardReplies(cluster)
            startOrphanChecks(cluster)
        }
        for sl in sessionLoops { sl.loop.execute { sl.startTimers() } }
    }

    /// The bound port.
    public var port: Int { server.port }

    /// Graceful shutdown: readiness fails, streams get `event: end` (`shutdown`), then the server stops.
    public func shutdown() {
        if server.state == .running {
            cluster?.handOverAll(timeout: 2)  // other nodes take this node's sessions over at once
        }
        server.shutdown(gracePeriod: configuration.shutdownGracePeriod)
        if let finish = finishAfterShutdown {
            // Off the loops (they are stopped): e.g. the search cache's queued writes reach its file, so
            // a restart answers what this run cached without spending GitHub's budget again.
            let done = DispatchSemaphore(value: 0)
            Task {
                await finish()
                done.signal()
            }
            done.wait()
        }
    }

    /// Work to finish once the server has stopped (set by the composition root before `start()`).
    public var finishAfterShutdown: (@Sendable () async -> Void)?

    /// The `blockedUntil` last sent to the loops (`.none`: nothing yet), shared by every `statusUpdater`.
    private let lastBlockFannedOut = Mutex<Int??>(.none)

    /// A function any thread may call to report GitHub's status: to the shared `status` view model, and
    /// to every session's view models (a rate limit disables searching in every session, including
    /// sessions that have not searched yet).
    public var statusUpdater: @Sendable (UpstreamStatus) -> Void {
        // (every updater shares `lastBlockFannedOut`: the loops hear of the block only when it changes)
        let update = status.makeUpdater()
        let loops = sessionLoops
        return { [weak self] status in
            update(status)
            // Most reports only move the remaining budget: the loops hear of the block only when it changes.
            guard let self else { return }
            let changed = self.lastBlockFannedOut.withLock { last in
                defer { last = .some(status.blockedUntil) }
                return last != .some(status.blockedUntil)
            }
            guard changed else { return }
            for sl in loops { sl.loop.execute { sl.upstreamChanged(status) } }
        }
    }

    /// Live sessions across loops.
    public var sessions: Int { sessionCount.load(ordering: .relaxed) }

    // MARK: internals shared by the routes

    /// Seconds from the injected `clock` (monotonic in production).
    func now() -> Double { clock.now() }

    /// Reserves a session slot; false at the limit.
    func reserveSession() -> Bool {
        let n = sessionCount.add(1, ordering: .relaxed).newValue
        if n > configuration.maxSessions {
            sessionCount.subtract(1, ordering: .relaxed)
            return false
        }
        metrics.sessions.increment()
        return true
    }

    func sessionEnded(reason: String) {
        sessionCount.subtract(1, ordering: .relaxed)
        metrics.sessions.decrement()
        metrics.sessionEnded(reason: reason)
        if reason == "moved" { cluster?.metrics.moved.increment() }
    }

    /// The loop that owns session `id`, or nil when `id` cannot be one of ours.
    func home(of id: String) -> SessionLoop? {
        if cluster != nil {  // another node may have more loops: any index maps onto ours
            return SessionID.loopIndex(of: id, loops: 1000).map { sessionLoops[$0 % sessionLoops.count] }
        }
        return SessionID.loopIndex(of: id, loops: sessionLoops.count).map { sessionLoops[$0] }
    }

    /// Runs `work` on the owner of session `id` and sends its response from the request's loop.
    func onOwner(
        of id: String, _ request: HTTPRequest, _ responder: HTTPResponder,
        _ work: @escaping @Sendable (SessionLoop) -> HTTPResponse
    ) {
        guard let home = home(of: id) else { return responder.send(Application.noSession(id)) }
        home.loop.runOrExecute {
            let response = work(home)
            responder.loop.runOrExecute { responder.send(response) }
        }
    }

    static func noSession(_ id: String) -> HTTPResponse {
        .problem(status: 404, detail: "no session '\(id.prefix(64))'")
    }
}
