/// Keeps one session's lease: renews it every `interval` seconds and says when it is lost, so the
/// owner stops running the session promptly (fencing keeps a late writer harmless anyway; this is
/// about not working for nothing). `handOver` releases it at once for a graceful shutdown.
///
/// Threading: loop-bound like its store; `schedule` must run work on that loop. Time is injected
/// through `schedule`, so tests drive it by hand.
public final class LeaseKeeper {
    /// Runs `work` after `seconds`; returns a function that cancels it.
    public typealias Schedule = (_ seconds: Double, _ work: @escaping () -> Void) -> (() -> Void)

    /// Why the lease was lost.
    public enum Loss: Sendable, Equatable {
        /// Another holder has it (or it expired and renewal was refused).
        case taken
        /// The store did not answer for a whole lease TTL: the lease has certainly expired.
        case unreachable
    }

    /// The lease kept.
    public let lease: Lease
    /// The store's answer to the last renewal that failed (nil once one succeeds): what an `unreachable`
    /// loss was about, for its log line.
    public private(set) var lastError: StoreError?
    private let store: SessionStore
    private let interval: Double
    private let ttl: Double
    private let schedule: Schedule
    private let onLost: (Loss) -> Void
    private var cancelTimer: (() -> Void)?
    private var failingSince: Double?
    private var elapsed = 0.0
    /// The delay the pending renewal was armed with (the first may be shorter than `interval`).
    private var armedFor = 0.0
    private var done = false

    /// Keeps `lease` in `store` (TTL `ttlSeconds`), renewing every `interval` (e.g. TTL / 3);
    /// `onLost` runs once if it is lost.
    public init(
        lease: Lease, store: SessionStore, ttlSeconds: Double, interval: Double, schedule: @escaping Schedule,
        onLost: @escaping (Loss) -> Void
    ) {
        self.lease = lease
        self.store = store
        self.ttl = ttlSeconds
        self.interval = interval
        self.schedule = schedule
        self.onLost = onLost
    }

    /// Starts renewing: the first renewal after `firstDelay` (at most `interval`; default
    /// `interval`), then every `interval`. Leases taken at the same moment (sessions created in a
    /// burst, a failover taking over a dead node's sessions) would otherwise renew together for as
    /// long as they live: one burst of round trips per interval that stalls the loop and Redis. A
    /// random first delay (`Double.random(in: 0.5...1) * interval`) spreads them for good. Renewing
    /// earlier is always safe; a store outage still costs the lease only a TTL after the last renewal.
    public func start(firstDelay: Double? = nil) { arm(after: min(max(firstDelay ?? interval, 0), interval)) }

    /// Stops renewing without releasing (the session was deleted or fenced).
    public func stop() {
        done = true
        cancelTimer?()
        cancelTimer = nil
    }

    /// Stops renewing and releases the lease at once, so another node takes over without waiting
    /// for the TTL; `completion` gets whether it was still ours.
    public func handOver(completion: @escaping (Result<Bool, StoreError>) -> Void) {
        stop()
        store.release(lease, completion: completion)
    }

    private func arm(after delay: Double) {
        guard !done else { return }
        armedFor = delay
        cancelTimer = schedule(delay) { [weak self] in self?.tick() }
    }

    private func tick() {
        guard !done else { return }
        let waited = armedFor
        elapsed += waited
        store.renew(lease) { [weak self] result in
            guard let self, !self.done else { return }
            switch result {
            case .success(true):
                self.failingSince = nil
                self.lastError = nil
                self.arm(after: self.interval)
            case .success(false):
                self.lose(.taken)
            case .failure(let error):
                self.lastError = error
                let since = self.failingSince ?? (self.elapsed - waited)  // the last renewal (or the start)
                self.failingSince = since
                if self.elapsed - since >= self.ttl { self.lose(.unreachable) } else { self.arm(after: self.interval) }
            }
        }
    }

    private func lose(_ loss: Loss) {
        stop()
        onLost(loss)
    }
}
