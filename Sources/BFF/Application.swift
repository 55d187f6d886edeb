/// BFF: the host — sessions, their event streams, the session backend (this process, or a cluster node
/// on Redis) — for whatever view models are registered.
///
/// `Application` builds the HTTP server, the session layer (one `LoopSessions` per event loop), the
/// app-wide view models and the session routes from an `AppConfiguration` and a `ViewModelRegistry`.
/// It knows no view model by name and nothing of GitHub: the product (`SearchApp`) registers its view
/// models, adds its own routes and posts its notices (`post(_:toSessions:standing:)`).
import Dispatch
import EventHTTP
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
    package let metrics: AppMetrics
    /// What the session layer shares (configuration, metrics, clock, view-model factory, hazards).
    let env: SessionEnvironment
    let loopSessions: [LoopSessions]
    /// The app-wide view models (`ViewModelScope.app`), owned by loop 0 (kept here; used there only).
    let appWide: LoopBoundReference<[any ViewModel]>
    /// Where sessions live and how a request reaches one (the session layer's one seam).
    let backend: any SessionBackend
    /// Sign-in on the session routes (which login a request carries, the cross-site rule); nil: off,
    /// every session anonymous and no cookie read.
    package let signIn: SignInGate?

    /// Builds the application (nothing listens until `start()`) hosting the view models of `viewModels`:
    /// those of scope `.session` made for each session, in registration order, those of scope `.app` once.
    /// `clock` is the session layer's time (tests pass a manual one). `signIn`: the logins a session may
    /// belong to. Add routes of your own to `server.router` before `start()`.
    public init(
        configuration: AppConfiguration, viewModels: ViewModelRegistry, logger: Logger,
        clock: SessionClock = .monotonic, signIn: SignInSettings? = nil
    ) {
        self.configuration = configuration
        self.signIn = signIn.map(SignInGate.init)
        self.logger = logger
        let metrics = AppMetrics()
        self.metrics = metrics
        server = HTTPServer(configuration: configuration.http, logger: logger, metricsFactory: metrics.factory)
        metrics.eventLoopThreads.set(server.loops.count)
        let loop0 = server.loops[0]
        let appWide = viewModels.make(.app, ViewModelContext(executor: { work in loop0.execute(work) }, client: nil))
        self.appWide = LoopBoundReference(appWide, madeFor: loop0)
        let env = SessionEnvironment(
            configuration: configuration, metrics: metrics, logger: logger, clock: clock, loops: server.loops.count,
            signInEnabled: signIn != nil,
            makeViewModels: { executor, client, person in
                viewModels.make(.session, ViewModelContext(executor: executor, client: client, person: person))
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
    package let finishAfterShutdown = Lock<(@Sendable () async -> Void)?>(nil)

    /// Hands `notice` to every app-wide view model (on loop 0) and, when `toSessions`, to every
    /// session's view models on every loop (`ViewModel.receive`). `standing`: sessions created later
    /// receive it too, when they start, until the next notice to sessions. Any thread.
    public func post(_ notice: any Sendable, toSessions: Bool, standing: Bool) {
        let appWide = self.appWide
        appWide.loop.execute {
            for vm in appWide.value { vm.receive(notice) }
        }
        guard toSessions else { return }
        for sl in loopSessions { sl.loop.execute { sl.noticed(notice, standing: standing) } }
    }

    /// Hands `notice` to the view models of every session of the login `loginKey` names
    /// (`SignedInPerson.loginKey`), on every loop: e.g. that person's own rate limit. Any thread.
    public func post(_ notice: any Sendable, toLogin loginKey: String) {
        for sl in loopSessions { sl.loop.execute { sl.noticed(notice, login: loginKey) } }
    }

    /// Ends every session of the login `loginKey` names; their streams get `event: end` `signed-out`
    /// (the person signed out, or their token was refused). Any thread.
    public func endSessions(ofLogin loginKey: String) { backend.endSessions(ofLogin: loginKey) }

    /// The cluster node this application's sessions live on (nil in one process): for the product's
    /// parts that share the node's Redis connections.
    package var clusterNode: ClusterNode? { backend as? ClusterNode }

    /// Live sessions on this process.
    public var sessions: Int { env.sessions }

    /// Seconds from the injected `clock` (monotonic in production).
    func now() -> Double { env.now() }
}
