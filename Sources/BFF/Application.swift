/// BFF: the application — sessions, their event streams, and the composition of the layers.
///
/// This module is the composition root's library half: `Application` builds the HTTP server, the
/// session layer (one `LoopSessions` per event loop), the app-wide view models and the routes, from an
/// `AppConfiguration`, the registered view models (`ViewModelRegistry`) and an optional injected
/// `RepositorySearching` (the stateless search route). `bff`'s main only reads flags, builds the
/// GitHub model, and calls this; tests build the application the same way.
import Dispatch
import EventHTTP
import GitHubSearch
import Glibc
import JSON
import Logging
import ViewModels

/// The running application. Create, `start()`, later `shutdown()`.
///
/// The composition: the HTTP server, one `LoopSessions` per event loop, the app-wide view models (one
/// instance each, on loop 0), the session backend (`SessionBackend`: in this process, or a cluster node on Redis — chosen here, once)
/// and the routes, which reach sessions only through the backend.
///
/// Threading: `start`/`shutdown` from one controlling thread; the session layer lives on the loops.
/// Immutable after `init` (every member is a `let` of a `Sendable` type), so any thread may hold it.
public final class Application: Sendable {
    public let configuration: AppConfiguration
    public let server: HTTPServer
    let logger: Logger
    let metrics: AppMetrics
    /// The stateless search route's model (`GET /api/search/repositories`; nil: no such route).
    let search: (any RepositorySearching)?
    /// What the session layer shares (configuration, metrics, clock, view-model factory, hazards).
    let env: SessionEnvironment
    let loopSessions: [LoopSessions]
    /// The app-wide view models (`ViewModelScope.app`), owned by loop 0 (kept here; used there only).
    let appWide: LoopBoundReference<[any ViewModel]>
    /// Where sessions live and how a request reaches one (the session layer's one seam).
    let backend: any SessionBackend

    /// Builds the application (nothing listens until `start()`) hosting the view models of `viewModels`:
    /// those of scope `.session` made for each session, in registration order, those of scope `.app` once.
    /// `search` serves the stateless search route (nil: none). `clock` is the session layer's time (tests
    /// pass a manual one).
    public init(
        configuration: AppConfiguration, search: (any RepositorySearching)?, viewModels: ViewModelRegistry,
        logger: Logger, clock: SessionClock = .monotonic
    ) {
        self.configuration = configuration
        self.logger = logger
        self.search = search
        let metrics = AppMetrics()
        self.metrics = metrics
        server = HTTPServer(configuration: configuration.http, logger: logger, metricsFactory: metrics.factory)
        metrics.eventLoopThreads.set(server.loops.count)
        let loop0 = server.loops[0]
        let appWide = viewModels.make(.app, ViewModelContext(executor: { work in loop0.execute(work) }, client: nil))
        self.appWide = LoopBoundReference(appWide, madeFor: loop0)
        let env = SessionEnvironment(
            configuration: configuration, metrics: metrics, logger: logger, clock: clock, loops: server.loops.count,
            makeViewModels: { executor, client in
                viewModels.make(.session, ViewModelContext(executor: executor, client: client))
            })
        self.env = env
        let shared = JSONObject(appWide.map { ($0.name, .object($0.snapshot)) })
        let loops = server.loops.map { LoopSessions(env: env, loop: $0, appWide: shared) }
        loopSessions = loops
        // The one choice of where sessions live.
        backend =
            configuration.cluster.map { ClusterNode(settings: $0, env: env, loops: loops) }
            ?? LocalSessions(env: env, loops: loops)
        let backend = self.backend
        for vm in appWide {
            vm.onEvent = { name, event in
                for sl in loops { sl.loop.runOrExecute { sl.appWideChanged(name, event, backend: backend) } }
            }
        }
        registerRoutes()
        server.onDrain = {
            for sl in loops { sl.loop.execute { sl.endAllStreams() } }
        }
    }

    /// Starts listening, the backend and the session timers.
    public func start() throws(SystemError) {
        try server.start()
        backend.start()
        for sl in loopSessions { sl.loop.execute { sl.startTimers() } }
    }

    /// The bound port.
    public var port: Int { server.port }

    /// Graceful shutdown: readiness fails, streams get `event: end` (`shutdown`), then the server stops.
    public func shutdown() {
        if server.state == .running { backend.prepareShutdown() }
        server.shutdown(gracePeriod: configuration.shutdownGracePeriod)
        if let finish = finishAfterShutdown.withLock({ $0 }) {
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
    let finishAfterShutdown = Lock<(@Sendable () async -> Void)?>(nil)

    /// Where the test hook's status goes (set by the composition root): the way the gateway's reports go,
    /// so in cluster mode through the status board to every node, as a status GitHub caused would. nil (an
    /// application built without the live composition): `statusUpdater`, this process only.
    let statusReport = Lock<(@Sendable (UpstreamStatus) -> Void)?>(nil)

    /// The `blockedUntil` last sent to the loops (`.none`: nothing yet), shared by every `statusUpdater`.
    private let lastBlockFannedOut = Lock<Int??>(.none)

    /// A function any thread may call to report GitHub's status: a notice to the app-wide view models,
    /// and to every session's view models (a rate limit disables searching in every session, including
    /// sessions that have not searched yet).
    public var statusUpdater: @Sendable (UpstreamStatus) -> Void {
        // (every updater shares `lastBlockFannedOut`: the loops hear of the block only when it changes)
        let appWide = self.appWide
        let loops = loopSessions
        return { [weak self] status in
            appWide.loop.execute {
                for vm in appWide.value { vm.receive(status) }
            }
            // Most reports only move the remaining budget: the loops hear of the block only when it changes.
            guard let self else { return }
            let changed = self.lastBlockFannedOut.withLock { last in
                defer { last = .some(status.blockedUntil) }
                return last != .some(status.blockedUntil)
            }
            guard changed else { return }
            for sl in loops { sl.loop.execute { sl.noticed(status, standing: status.blockedUntil != nil) } }
        }
    }

    /// Live sessions on this process.
    public var sessions: Int { env.sessions }

    /// Seconds from the injected `clock` (monotonic in production).
    func now() -> Double { env.now() }
}
