import GitHubSearch
import Primitives

/// Keeps the gateway within GitHub's rate limits and publishes what it knows about GitHub's state.
///
/// - Reads `X-RateLimit-Limit/Remaining/Reset/Resource` and `Retry-After` from every response.
/// - After a primary limit (403/429 with `X-RateLimit-Remaining: 0`, or any response reporting
///   zero remaining) no call is made until `X-RateLimit-Reset`; after a secondary limit (403/429
///   with `Retry-After`, or without any hint) none until `Retry-After` or `secondaryBackoff`
///   seconds. Calls in that time are answered `rateLimited` at once, without touching GitHub.
/// - Never causes a secondary limit itself: at most `maxConcurrentRequests` calls in flight
///   (FIFO queue behind them) and at least `minimumSpacing` between the starts of two calls.
/// - Publishes `UpstreamStatus` changes (deduplicated unless `publishesRepeats`) through the injected
///   callback.
/// - Shares GitHub's budget between clients (`UpstreamClient`) only while it is contended: a client's
///   calls are counted in every window, and it is refused past `clientShare` of the window's calls only
///   while another client has asked within `askingHorizonSeconds`. Alone, a client may use the whole window.
///
/// An actor: its state is touched only on its own executor; the status callback is invoked from
/// it and must be cheap and thread-safe (hand the value to its owner).
public actor RateLimiter {
    /// How polite to be.
    public struct Configuration: Sendable, Equatable {
        /// Upstream calls allowed in flight at once (GitHub asks for serial requests).
        public var maxConcurrentRequests: Int
        /// Minimum time between the starts of two upstream calls (real time).
        public var minimumSpacing: Duration
        /// Back-off after a secondary limit that gave no `Retry-After` (GitHub says at least a minute).
        public var secondaryBackoffSeconds: Double
        /// The largest share of a rate window one client's calls may take while other clients ask
        /// (`UpstreamClient`; the rest is left for them): 0.5 lets a client spend at most half of GitHub's
        /// 30 searches a minute once someone else searches too. 1 turns the per-client limit off.
        public var clientShare: Double
        /// How long after another client's last ask (allowed or not) a client's share still binds: one rate
        /// window, so a person who searches now and then still counts as asking between two searches, and
        /// the heavy client is capped before their next one comes.
        public var askingHorizonSeconds: Double
        /// The window assumed before GitHub's first answer names its own (`X-RateLimit-Limit`/`Reset`).
        public var defaultWindowLimit: Int
        public var defaultWindowSeconds: Double
        /// Publishes every status, a repeat of the last one included (cluster mode: what every node shows
        /// is the shared board's last post, which may be another node's since this limiter's last report,
        /// so a repeat is news there). False: only changes.
        public var publishesRepeats: Bool

        /// Defaults: 1 in flight, 100 ms spacing, 60 s secondary back-off, changes only.
        public init(
            maxConcurrentRequests: Int = 1, minimumSpacing: Duration = .milliseconds(100),
            secondaryBackoffSeconds: Double = 60, publishesRepeats: Bool = false, clientShare: Double = 0.5,
            defaultWindowLimit: Int = 30, defaultWindowSeconds: Double = 60, askingHorizonSeconds: Double = 60
        ) {
            self.clientShare = min(1, max(0.01, clientShare))
            self.askingHorizonSeconds = max(0, askingHorizonSeconds)
            self.defaultWindowLimit = max(1, defaultWindowLimit)
            self.defaultWindowSeconds = max(1, defaultWindowSeconds)
            self.maxConcurrentRequests = max(1, maxConcurrentRequests)
            self.minimumSpacing = minimumSpacing
            self.secondaryBackoffSeconds = secondaryBackoffSeconds
            self.publishesRepeats = publishesRepeats
        }
    }

    let configuration: Configuration
    let clock: any WallClock
    let onStatus: @Sendable (UpstreamStatus) -> Void
    /// Told of every call refused because its client spent its share (metrics).
    let onClientRefusal: @Sendable () -> Void
    let shared: (any SharedRateBudget)?
    /// What the last observed response said, not yet reported to `shared`.
    private var unreported: (remaining: Int?, blockedUntil: Double?)?
    /// The last observed response was a `304`, which GitHub does not count: `shared` gets its share back.
    private var unreportedFree = false

    /// No upstream call before this wall-clock time (seconds since 1970).
    private(set) var blockedUntil: Double?
    private(set) var inFlight = 0
    private var waiters: [(id: Int, continuation: CheckedContinuation<Bool, Never>)] = []
    private var nextWaiter = 0
    private var unblockTask: Task<Void, Never>?
    private var queueWatchers = CountWatchers<Int>()  // one key: the queue
    private var lastStart: ContinuousClock.Instant?
    private var rateLimit: RateLimit?
    private var published: UpstreamStatus?
    /// The fair share: calls started per client in the current rate window, and when it ends.
    private var clientCalls: [String: Int] = [:]
    private var windowEnd: Double = 0
    private var windowLimit = 0
    /// Who asked for calls last (whether the share binds: someone else asked within the horizon).
    private var askers = RecentAskers()

    /// Creates a limiter.
    /// - Parameters:
    ///   - clock: wall time, for reset and retry times.
    ///   - onStatus: receives every change of `UpstreamStatus`.
    ///   - shared: a budget shared with other processes (cluster mode), asked before every call and
    ///     told what GitHub answered; nil (single process): this limiter alone decides.
    public init(
        configuration: Configuration = Configuration(), clock: any WallClock,
        onStatus: @escaping @Sendable (UpstreamStatus) -> Void = { _ in }, shared: (any SharedRateBudget)? = nil,
        onClientRefusal: @escaping @Sendable () -> Void = {}
    ) {
        self.onClientRefusal = onClientRefusal
        self.configuration = configuration
        self.clock = clock
        self.onStatus = onStatus
        self.shared = shared
    }

    /// The last status published (nil before the first response).
    public var status: UpstreamStatus? { published }

    /// The `rateLimited` error to answer now without calling upstream, or nil when calls are allowed.
    public func blockedError() -> SearchError? {
        guard let until = blockedUntil else { return nil }
        let now = clock.now()
        if until <= now {
            blockedUntil = nil
            return nil
        }
        return RateLimiter.limitedError(seconds: until - now)
    }

    /// Waits for a slot to call upstream; throws `rateLimited` (without waiting) while blocked.
    /// Every successful `acquire` must be paired with one `release`.
    ///
    /// Cancellation: a caller whose task is cancelled while it waits (in the queue behind the calls in
    /// flight, or for the spacing) leaves at once and throws `SearchError.cancelled`; it spends no slot
    /// (a slot handed to it meanwhile passes to the next waiter) and gives back its spacing turn.
    public func acquire() async throws(SearchError) {
        let client = UpstreamClient.current
        // Every ask counts, a refused one too: a client that finds the budget spent is still asking.
        if let client, configuration.clientShare < 1 { askers.record(client, at: clock.now()) }
        if let error = blockedError() { throw error }
        if let client, let error = overShare(client) {
            onClientRefusal()
            throw error
        }
        if Task.isCancelled { throw .cancelled }
        if inFlight >= configuration.maxConcurrentRequests {
            nextWaiter += 1
            let id = nextWaiter
            let granted = await withTaskCancellationHandler {
                await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
                    waiters.append((id, c))  // `release` hands its slot over (true)
                    queueChanged()
                }
            } onCancel: {
                Task { await self.leaveQueue(id) }
            }
            guard granted else { throw .cancelled }  // left the queue: no slot taken
        } else {
            inFlight += 1
        }
        if Task.isCancelled {
            release()
            throw .cancelled
        }
        let now = ContinuousClock.now
        if let last = lastStart, last + configuration.minimumSpacing > now {
            let start = last + configuration.minimumSpacing
            lastStart = start
            try? await Task.sleep(until: start, clock: .continuous)
            if Task.isCancelled {
                if lastStart == start { lastStart = last }  // the turn was not used
                release()
                throw .cancelled
            }
        } else {
            lastStart = now
        }
        if let error = blockedError() {
            release()
            throw error
        }
        if let client, let error = overShare(client) {  // its share went while it waited in the queue
            onClientRefusal()
            release()
            throw error
        }
        switch await shared?.admit(client: client) ?? .admitted {
        case .admitted:
            break
        case .blocked(let wait):
            // Another process spent the budget or saw GitHub's limit: this one is blocked as if it had.
            block(until: clock.now() + wait)
            publish(limitedStatus())
            release()
            throw RateLimiter.limitedError(seconds: wait)
        case .overShare(let wait, let cap, let limit):
            // This client spent its share on the cluster's nodes together: only it waits (nothing
            // blocked, nothing published: GitHub is not limited for the others).
            onClientRefusal()
            release()
            throw RateLimiter.shareError(seconds: wait, cap: cap, limit: limit)
        }
        if let client { clientCalls[client, default: 0] += 1 }
    }

    /// The most calls one client may start in a window: its share of the window's limit (at least 1).
    var clientCap: Int { max(1, Int((Double(windowLimit) * configuration.clientShare).rounded(.down))) }

    /// The `rateLimited` answer for `client` when another client asked within the horizon and `client` has
    /// spent its share of the current window (its calls before the other came included: the rest of the
    /// window is the others'; nothing is published: GitHub is not limited for them), else nil. It may call
    /// again when its window ends or once nobody else has asked for a horizon, whichever comes first.
    private func overShare(_ client: String) -> SearchError? {
        guard configuration.clientShare < 1 else { return nil }
        let now = clock.now()
        rollWindow(now: now)
        guard clientCalls[client, default: 0] >= clientCap,
            let shared = askers.contended(for: client, now: now, horizon: configuration.askingHorizonSeconds)
        else { return nil }
        return RateLimiter.shareError(seconds: min(windowEnd, shared) - now, cap: clientCap, limit: windowLimit)
    }

    /// Starts a new window of per-client counts once the current one is over: GitHub's own window
    /// (`X-RateLimit-Reset`, `-Limit`) when known, else the default one from now.
    private func rollWindow(now: Double) {
        guard now >= windowEnd else { return }
        clientCalls = [:]
        if let r = rateLimit, Double(r.resetAt) > now {
            windowEnd = Double(r.resetAt)
            windowLimit = r.limit
        } else {
            windowEnd = now + configuration.defaultWindowSeconds
            windowLimit = rateLimit?.limit ?? configuration.defaultWindowLimit
        }
    }

    /// Calls `client` started in the current window (tests, metrics).
    public func calls(of client: String) -> Int { clientCalls[client, default: 0] }

    /// Reports what the last observed response said to the shared budget (no-op without one), giving
    /// back the call's share first when it was a `304`. The gateway calls it before `release`, so the
    /// next call anywhere sees the correction.
    public func reportShared() async {
        guard let shared else { return }
        if unreportedFree {
            unreportedFree = false
            await shared.refund()
        }
        guard let report = unreported else { return }
        unreported = nil
        await shared.report(remaining: report.remaining, blockedUntil: report.blockedUntil)
    }

    /// A cancelled caller leaves the queue (false: no slot); a no-op when it was already handed a slot.
    private func leaveQueue(_ id: Int) {
        guard let i = waiters.firstIndex(where: { $0.id == id }) else { return }
        waiters.remove(at: i).continuation.resume(returning: false)
        queueChanged()
    }

    /// Callers waiting for a slot.
    public var queued: Int { waiters.count }

    /// Returns once exactly `count` callers wait for a slot (tests await a queue forming or emptying).
    @_spi(Testing) public func waitForQueue(_ count: Int) async {
        if waiters.count == count { return }
        await withCheckedContinuation { queueWatchers.add(0, count, $0) }
    }

    private func queueChanged() {
        queueWatchers.changed(0, to: waiters.count)
    }

    /// Gives back the slot taken by `acquire`.
    public func release() {
        if waiters.isEmpty {
            inFlight -= 1
        } else {
            waiters.removeFirst().continuation.resume(returning: true)
            queueChanged()
        }
    }

    /// Records a response's status and headers (names lower-cased). Returns the `rateLimited`
    /// error when the response is a primary or secondary limit, else nil.
    public func observe(status: Int, headers: [String: String], bodyMentionsRateLimit: Bool = false) -> SearchError? {
        let now = clock.now()
        // GitHub does not count a conditional request answered `304` against the limit. This limiter
        // spends nothing of its own per call (it follows GitHub's headers), so only `shared` gives back.
        unreportedFree = status == 304
        if let limit = headers["x-ratelimit-limit"].flatMap(Int.init),
            let remaining = headers["x-ratelimit-remaining"].flatMap(Int.init),
            let reset = headers["x-ratelimit-reset"].flatMap(Int.init)
        {
            rateLimit = RateLimit(
                limit: limit, remaining: remaining, resetAt: reset, resource: headers["x-ratelimit-resource"])
        }
        let remaining = headers["x-ratelimit-remaining"].flatMap(Int.init)
        let reset = headers["x-ratelimit-reset"].flatMap(Double.init)
        let retryAfter = headers["retry-after"].flatMap(Double.init)
        let isLimit = status == 429 || (status == 403 && (remaining == 0 || retryAfter != nil || bodyMentionsRateLimit))
        if isLimit {
            let until: Double
            if let retryAfter {
                until = now + max(1, retryAfter)
            } else if remaining == 0, let reset {
                until = max(reset, now + 1)
            } else {
                until = now + configuration.secondaryBackoffSeconds
            }
            block(until: until)
            unreported = (remaining, until)
            let error = RateLimiter.limitedError(seconds: until - now)
            publish(limitedStatus())
            return error
        }
        unreported = remaining.map { (remaining: $0, blockedUntil: nil as Double?) }
        if remaining == 0, let reset, reset > now {
            unreported = (0, reset)
            block(until: reset)  // the budget is spent: do not spend a call to learn it again
            publish(limitedStatus())
        } else if status >= 500 {
            publish(
                UpstreamStatus(
                    reachable: false, message: "GitHub is having problems (HTTP \(status)).", rateLimit: rateLimit))
        } else {
            publish(UpstreamStatus(reachable: true, message: nil, rateLimit: rateLimit))
        }
        return nil
    }

    /// Records that GitHub could not be reached (connection failure, time-out) or answered garbage.
    public func observeUnreachable(message: String) {
        unreportedFree = false
        publish(UpstreamStatus(reachable: false, message: message, rateLimit: rateLimit))
    }

    /// "Rate limited": the banner's sentence (`publish` adds the time every session's search view model
    /// counts down to).
    private func limitedStatus() -> UpstreamStatus {
        UpstreamStatus(reachable: true, message: RateLimiter.limitedStatusMessage, rateLimit: rateLimit)
    }

    private func block(until: Double) {
        blockedUntil = max(blockedUntil ?? 0, until)
        scheduleUnblock()
    }

    /// When the block ends, the "rate limit is exhausted" message is withdrawn (no response would
    /// otherwise arrive to clear it until someone searches again, and the page would keep showing it).
    private func scheduleUnblock() {
        unblockTask?.cancel()
        guard let until = blockedUntil else { return }
        let delay = max(0, until - clock.now())
        unblockTask = Task { [weak self] in
            try? await Task.sleep(for: .milliseconds(Int((delay * 1000).rounded(.up))))
            guard !Task.isCancelled else { return }
            await self?.unblockIfDue()
        }
    }

    /// Publishes "reachable, no message" once the block has ended, unless another block started.
    func unblockIfDue() {
        if blockedError() != nil {
            scheduleUnblock()  // the wall clock lags the sleep: wait for the rest
            return
        }
        guard let last = published, last.reachable, last.message != nil else { return }
        publish(UpstreamStatus(reachable: true, message: nil, rateLimit: rateLimit))
    }

    /// Every status carries the block in force, whatever else it reports (an unreachable GitHub during a
    /// block is still a block), so sessions never offer a search the limiter would refuse.
    private func publish(_ status: UpstreamStatus) {
        var status = status
        status.blockedUntil = blockedError() == nil ? nil : blockedUntil.map { Int($0.rounded(.up)) }
        guard status != published || configuration.publishesRepeats else { return }
        published = status
        onStatus(status)
    }

    /// The `status` view model's sentence while rate limited. It names no number of seconds: it is
    /// shared state, shown unchanged to every session (and in snapshots taken later) until the block
    /// ends, so "try again in 48 seconds" went stale at once and contradicted the page's countdown
    /// (`retryAt`). Errors answering one request (`limitedError`) keep their seconds.
    static let limitedStatusMessage = "GitHub's search rate limit is exhausted; searching resumes when it resets."

    /// The `rateLimited` answer to a client that has started `cap` of the `limit` calls of its window while
    /// others ask too (it tells a person why: alone they would not have been refused).
    static func shareError(seconds: Double, cap: Int, limit: Int) -> SearchError {
        let s = max(1, Int(seconds.rounded(.up)))
        return .rateLimited(
            retryAfterSeconds: s,
            message: "You have used your share of GitHub's search budget while others are searching too "
                + "(\(cap) of the \(limit) searches of this rate window); the rest is left for them. "
                + "Try again in \(s) second\(s == 1 ? "" : "s").")
    }

    static func limitedError(seconds: Double) -> SearchError {
        let s = max(1, Int(seconds.rounded(.up)))
        return .rateLimited(
            retryAfterSeconds: s,
            message: "GitHub's search rate limit is exhausted; try again in \(s) second\(s == 1 ? "" : "s")."
        )
    }
}
