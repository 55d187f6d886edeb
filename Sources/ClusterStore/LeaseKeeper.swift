import Primitives

/// The timers of a loop's lease keepers: `arm` makes `keeper.timerFired()` run after about `seconds`; a
/// keeper arms once when it starts and once each time its timer fires, so at most one timer of a keeper
/// is pending. `disarm` (when the keeper stops) may cancel it, or leave it: a stopped keeper ignores it.
/// A keeper is held weakly until its timer runs: one let go without `stop` renews nothing. One object
/// for all of a loop's keepers, and no closure per timer: a loop keeping thousands of leases allocates
/// nothing per renewal (`SlicedTimers` in the session layer; `ScheduledLeaseTimers` for tests and simple
/// uses). Same thread as the keepers.
public protocol LeaseTimers: AnyObject {
    func arm(_ keeper: LeaseKeeper, after seconds: Double)
    func disarm(_ keeper: LeaseKeeper)
}

/// What one loop's keepers share: the store, the lease TTL, the renewal interval and the timers (kept once
/// per loop, not once per lease).
public final class LeaseKeeping {
    public let store: SessionStore
    public let ttl: Double
    public let interval: Double
    public let timers: any LeaseTimers

    /// Keepers renewing in `store` every `interval` seconds leases of TTL `ttlSeconds`, on `timers`.
    public init(store: SessionStore, ttlSeconds: Double, interval: Double, timers: any LeaseTimers) {
        self.store = store
        self.ttl = ttlSeconds
        self.interval = interval
        self.timers = timers
    }
}

/// `LeaseTimers` over a function that runs work after a delay and returns what cancels it (tests, tools).
public final class ScheduledLeaseTimers: LeaseTimers {
    /// Runs `work` after `seconds`; returns a function that cancels it.
    public typealias Schedule = (_ seconds: Double, _ work: @escaping () -> Void) -> (() -> Void)
    private let schedule: Schedule
    private var cancels: [ObjectIdentifier: () -> Void] = [:]

    public init(_ schedule: @escaping Schedule) { self.schedule = schedule }

    public func arm(_ keeper: LeaseKeeper, after seconds: Double) {
        disarm(keeper)
        let id = ObjectIdentifier(keeper)
        cancels[id] = schedule(seconds) { [weak self, weak keeper] in
            self?.cancels[id] = nil
            keeper?.timerFired()
        }
    }

    public func disarm(_ keeper: LeaseKeeper) { cancels.removeValue(forKey: ObjectIdentifier(keeper))?() }
}

/// Keeps one session's lease: renews it every `interval` seconds and says when it is lost, so the
/// owner stops running the session promptly (fencing keeps a late writer harmless anyway; this is
/// about not working for nothing). `handOver` releases it at once for a graceful shutdown.
///
/// Threading: loop-bound like its store; its timers run on that loop. Time is injected through the
/// timers, so tests drive it by hand.
public final class LeaseKeeper {
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
    // The flags right after `lastError`: in its padding, so the object takes one malloc size class less
    // (`malloc_usable_size` of the same layouts): one per owned session.
    /// A renewal is on its way (sent at `sentAt`); a tick meanwhile sends none, but sets `tickMissed`.
    private var inFlight = false
    private var tickMissed = false
    private var done = false
    private let keeping: LeaseKeeping
    /// Told once if the lease is lost. Not retained (it owns the keeper): one reference, no closure and
    /// its context per lease.
    private unowned let holder: any LeaseHolder
    /// Time (the sum of the delays armed so far, see `elapsed`) at which the last renewal that succeeded was
    /// sent: the lease is certainly ours until `ttl` after it. The start counts as one.
    private var renewedAt = 0.0
    /// Time since `start` as the timers tell it: the sum of the delays armed, at each tick.
    private var elapsed = 0.0
    /// The delay the pending timer was armed with (the first may be shorter than `interval`).
    private var armedFor = 0.0
    /// When the renewal in flight was sent, on the same time as `elapsed`.
    private var sentAt = 0.0
    /// Wall-clock moments (monotonic seconds) for the log line of a loss: when the last renewal that
    /// succeeded was sent, and when the one in flight was.
    private var renewedAtClock: Double
    private var sentAtClock = 0.0
    /// How long the last answered renewal took (seconds), for the same line.
    public private(set) var lastRoundTrip: Double?

    /// What the keeper saw of its last renewals, in words, for the log line of a loss: the loop and the
    /// store's pace tell a starved node from a slow store.
    public var lastRenewals: String {
        let now = Self.clock()
        func seconds(_ x: Double) -> String { "\((x * 100).rounded() / 100) s" }
        var out = "last renewed \(seconds(now - renewedAtClock)) ago"
        if let lastRoundTrip { out += ", last answer after \(seconds(lastRoundTrip))" }
        if inFlight { out += ", one in flight for \(seconds(now - sentAtClock))" }
        return out
    }

    private static func clock() -> Double { Double(monotonicNanos()) / 1e9 }

    /// Keeps `lease` as `keeping` says (its store, TTL, interval and timers); `holder` (which must outlive
    /// the keeper's work: it owns the keeper) is told once if it is lost.
    public init(lease: Lease, keeping: LeaseKeeping, holder: any LeaseHolder) {
        self.lease = lease
        self.keeping = keeping
        self.holder = holder
        renewedAtClock = Self.clock()
    }

    /// Starts renewing: the first renewal after `firstDelay` (at most `interval`; default
    /// `interval`), then every `interval`. Leases taken at the same moment (sessions created in a
    /// burst, a failover taking over a dead node's sessions) would otherwise renew together for as
    /// long as they live: one burst of round trips per interval that stalls the loop and Redis. A
    /// random first delay (`Double.random(in: 0.5...1) * interval`) spreads them for good. Renewing
    /// earlier is always safe; a store outage still costs the lease only a TTL after the last renewal.
    public func start(firstDelay: Double? = nil) {
        arm(after: min(max(firstDelay ?? keeping.interval, 0), keeping.interval))
    }

    /// Stops renewing without releasing (the session was deleted or fenced).
    public func stop() {
        done = true
        keeping.timers.disarm(self)
    }

    /// Stops renewing and releases the lease at once, so another node takes over without waiting
    /// for the TTL; `completion` gets whether it was still ours.
    public func handOver(completion: @escaping (Result<Bool, StoreError>) -> Void) {
        stop()
        keeping.store.release(lease, completion: completion)
    }

    private func arm(after delay: Double) {
        guard !done else { return }
        armedFor = delay
        keeping.timers.arm(self, after: delay)
    }

    /// The timer armed last ran out (called by the timers only): the next one is armed, and a renewal sent.
    ///
    /// Renewals keep their cadence from when they are sent, not from when they are answered: on a store
    /// that answers slowly (a loaded Redis, a starved loop), arming the next one only after the answer
    /// spaced renewals by `interval` plus the round trip, and a lease whose renewals took more than
    /// TTL − interval was lost though every one succeeded. At most one is in flight: a tick
    /// while one is on its way sends none, and the answer sends the missed one at once.
    public func timerFired() {
        guard !done else { return }
        elapsed += armedFor
        arm(after: keeping.interval)
        if inFlight {
            tickMissed = true
        } else {
            send()
        }
    }

    private func send() {
        inFlight = true
        tickMissed = false
        sentAt = elapsed  // a missed tick's renewal is sent later than this: the lease is taken as older
        let sentClock = Self.clock()
        sentAtClock = sentClock
        keeping.store.renew(lease) { [weak self] result in
            guard let self else { return }
            self.inFlight = false
            self.lastRoundTrip = Self.clock() - sentClock
            guard !self.done else { return }
            switch result {
            case .success(true):
                self.renewedAt = self.sentAt
                self.renewedAtClock = sentClock
                self.lastError = nil
            case .success(false):
                return self.lose(.taken)
            case .failure(let error):
                self.lastError = error
                if self.elapsed - self.renewedAt >= self.keeping.ttl { return self.lose(.unreachable) }
            }
            if self.tickMissed { self.send() }
        }
    }

    private func lose(_ loss: Loss) {
        stop()
        holder.leaseLost(loss, keeper: self)
    }
}

/// Who runs what a `LeaseKeeper` keeps the lease of: told when the lease is lost (the session runs here no
/// longer). Same thread as the keeper.
public protocol LeaseHolder: AnyObject {
    func leaseLost(_ loss: LeaseKeeper.Loss, keeper: LeaseKeeper)
}

/// A `LeaseHolder` that runs a closure (tests and tools). The keeper does not retain it: keep it as long
/// as the keeper works.
public final class ClosureLeaseHolder: LeaseHolder {
    private let body: (LeaseKeeper.Loss) -> Void

    public init(_ body: @escaping (LeaseKeeper.Loss) -> Void) { self.body = body }

    public func leaseLost(_ loss: LeaseKeeper.Loss, keeper: LeaseKeeper) { body(loss) }
}
