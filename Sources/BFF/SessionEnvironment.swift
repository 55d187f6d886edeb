import EventHTTP
import Logging
import Synchronization
import ViewModels

/// What every part of the session layer shares, fixed when the application is built: the
/// configuration, the metrics, the clock, the factory of a session's view models, the hazard domain
/// through which loops read each other's snapshots, and the count of live sessions (Point-Free's
/// "one explicit environment built in main"). Both session backends (`LocalSessions`, `ClusterNode`)
/// and every `LoopSessions` hold it; it holds none of them, so it is built first.
///
/// Threading: immutable but for the atomic session count; any thread.
final class SessionEnvironment: Sendable {
    /// Builds a session's own view models: its owner's executor, the client its searches are charged to.
    typealias ViewModelFactory =
        @Sendable (
            _ executor: @escaping OwnerExecutor, _ client: String?, _ person: SignedInPerson?
        ) -> [ViewModel]

    let configuration: AppConfiguration
    let metrics: AppMetrics
    let logger: Logger
    /// The session layer's time (idle expiry, token buckets, idempotency windows).
    let clock: SessionClock
    /// One hazard slot per loop: how loops read each other's published snapshots without a lock.
    let hazards: HazardDomain
    /// Builds one session's own view models (everything but `status`), given the owner's executor and
    /// the client its upstream calls are charged to (`UpstreamClient`; nil: nobody).
    let makeViewModels: ViewModelFactory
    private let liveSessions = Atomic<Int>(0)
    /// Per-client limits on creating and holding sessions.
    let clientLimits: ClientSessionLimits
    /// Sessions may belong to logins (sign-in is configured): cluster mode then checks a stream's session
    /// before it opens.
    let signInEnabled: Bool

    init(
        configuration: AppConfiguration, metrics: AppMetrics, logger: Logger, clock: SessionClock, loops: Int,
        signInEnabled: Bool = false, makeViewModels: @escaping ViewModelFactory
    ) {
        self.signInEnabled = signInEnabled
        self.configuration = configuration
        self.metrics = metrics
        self.logger = logger
        self.clock = clock
        self.makeViewModels = makeViewModels
        hazards = HazardDomain(loops: loops)
        clientLimits = ClientSessionLimits(
            limits: .init(
                ratePerSecond: configuration.clientSessionRate, burst: configuration.clientSessionBurst,
                maxLive: configuration.maxSessionsPerClient, maxClients: configuration.maxTrackedClients))
    }

    /// Seconds from the injected `clock` (monotonic in production).
    func now() -> Double { clock.now() }

    /// Live sessions on this process.
    var sessions: Int { liveSessions.load(ordering: .relaxed) }

    /// Reserves a new session of `client`: within its own limits (creations a second, live sessions) and
    /// the process's (`--max-sessions`). Succeeds with the key the session is counted under (give it to
    /// `sessionEnded`).
    func reserveSession(for client: ClientAddress) -> Result<ClientAddress, SessionFailure> {
        switch clientLimits.reserve(client, now: now()) {
        case .failure(.rate(let seconds)):
            metrics.clientRefusals(limit: "rate")
            return .failure(.clientCreationRate(retryAfterSeconds: seconds, perSecond: configuration.clientSessionRate))
        case .failure(.live(let max)):
            metrics.clientRefusals(limit: "live")
            return .failure(.clientSessionLimit(max))
        case .success(let key):
            guard reserveSession() else {
                clientLimits.released(key)
                return .failure(.sessionLimit(configuration.maxSessions))
            }
            return .success(key)
        }
    }

    /// Reserves a session slot of the process (a session taken over: its client was counted where it
    /// was created); false at the limit (`--max-sessions`).
    func reserveSession() -> Bool {
        let n = liveSessions.add(1, ordering: .relaxed).newValue
        if n > configuration.maxSessions {
            liveSessions.subtract(1, ordering: .relaxed)
            return false
        }
        metrics.sessions.increment()
        return true
    }

    /// A session reserved for `client` (the key `reserveSession(for:)` returned) is not created after all:
    /// both reservations are given back, and no session is counted as ended.
    func cancelReservation(client: ClientAddress?) {
        if let client { clientLimits.released(client) }
        liveSessions.subtract(1, ordering: .relaxed)
        metrics.sessions.decrement()
    }

    /// A reserved session ended (or was never started) for `reason` (an `end` reason, `unused`, or
    /// `moved`); `client` is the key it was counted under, if it was created here.
    func sessionEnded(reason: String, client: ClientAddress? = nil) {
        cancelReservation(client: client)
        metrics.sessionEnded(reason: reason)
    }
}
