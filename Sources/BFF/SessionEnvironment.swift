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
    let configuration: AppConfiguration
    let metrics: AppMetrics
    let logger: Logger
    /// The session layer's time (idle expiry, token buckets, idempotency windows).
    let clock: SessionClock
    /// One hazard slot per loop: how loops read each other's published snapshots without a lock.
    let hazards: HazardDomain
    /// Builds one session's own view models (everything but `status`), given the owner's executor.
    let makeViewModels: @Sendable (@escaping OwnerExecutor) -> [ViewModel]
    private let liveSessions = Atomic<Int>(0)

    init(
        configuration: AppConfiguration, metrics: AppMetrics, logger: Logger, clock: SessionClock, loops: Int,
        makeViewModels: @escaping @Sendable (@escaping OwnerExecutor) -> [ViewModel]
    ) {
        self.configuration = configuration
        self.metrics = metrics
        self.logger = logger
        self.clock = clock
        self.makeViewModels = makeViewModels
        hazards = HazardDomain(loops: loops)
    }

    /// Seconds from the injected `clock` (monotonic in production).
    func now() -> Double { clock.now() }

    /// Live sessions on this process.
    var sessions: Int { liveSessions.load(ordering: .relaxed) }

    /// Reserves a session slot; false at the limit (`--max-sessions`).
    func reserveSession() -> Bool {
        let n = liveSessions.add(1, ordering: .relaxed).newValue
        if n > configuration.maxSessions {
            liveSessions.subtract(1, ordering: .relaxed)
            return false
        }
        metrics.sessions.increment()
        return true
    }

    /// A reserved session ended (or was never started) for `reason` (an `end` reason, or `moved`).
    func sessionEnded(reason: String) {
        liveSessions.subtract(1, ordering: .relaxed)
        metrics.sessions.decrement()
        metrics.sessionEnded(reason: reason)
    }
}
