import EventLoop

/// When a locator reads the topology again: every `every` seconds, and soon after `soon()` (at most
/// once per `minimum` seconds, one refresh at a time, a request during a refresh runs one more after it).
///
/// Threading: loop-bound; `refresh` runs on the loop and calls its completion there.
final class RedisRefreshSchedule {
    private let loop: EventLoop
    private let every: Double
    private let minimum: Double
    private let refresh: (@escaping () -> Void) -> Void
    private var periodic: LoopTimer?
    private var soonTimer: LoopTimer?
    private var running = false
    private var again = false
    private var lastStart: UInt64 = 0

    init(loop: EventLoop, every: Double, minimum: Double, refresh: @escaping (@escaping () -> Void) -> Void) {
        self.loop = loop
        self.every = every
        self.minimum = minimum
        self.refresh = refresh
    }

    /// Starts the periodic refreshes.
    func start() {
        periodic = loop.scheduleRepeating(every: every) { [weak self] in
            guard let self, !self.running else { return }
            self.run()
        }
    }

    /// A refresh as soon as the minimum interval allows.
    func soon() {
        if running {
            again = true
            return
        }
        guard soonTimer == nil else { return }
        let since = Double(monotonicNanos() &- lastStart) / 1e9
        soonTimer = loop.schedule(after: max(0.001, minimum - since)) { [weak self] in
            self?.soonTimer = nil
            self?.run()
        }
    }

    func stop() {
        periodic?.cancel()
        soonTimer?.cancel()
        periodic = nil
        soonTimer = nil
    }

    private func run() {
        guard !running else { return }
        running = true
        lastStart = monotonicNanos()
        refresh { [weak self] in
            guard let self else { return }
            self.running = false
            if self.again {
                self.again = false
                self.soon()
            }
        }
    }
}
