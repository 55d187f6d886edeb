import EventLoop
import Logging
import Synchronization

/// One loop's subscriptions, on any topology: sharded (`SSUBSCRIBE`, Redis 7: a message crosses only
/// its own shard), classic (`SUBSCRIBE`) and patterns (`PSUBSCRIBE`), each with a handler.
///
/// - One subscription connection (`RedisPubSubConnection`) per master this loop subscribes on, not per
///   channel: a channel goes to the master of its slot (sharded channels must; a classic channel or
///   pattern is placed by the slot of its name, any node of a cluster delivers it).
/// - One command per channel, never a batch across slots (a batched `SSUBSCRIBE` fails with
///   `CROSSSLOT`). After a reconnect, a failover, a slot move (`MOVED`, or a server's `sunsubscribe`
///   when the slot left), every channel is subscribed again where it belongs now, and its
///   `onSubscribed` runs again: messages published meanwhile are lost (pub/sub keeps nothing), so the
///   consumer catches up from its history there ("subscribe, then read history, then de-duplicate").
/// - A loopback probe per subscription connection (`RedisClientOptions.probeInterval`): it publishes to
///   a channel of its own in a slot of that master and expects the message back within the command
///   time-out. A connection that is up but deaf is reported (`isHealthy`, `problems`,
///   `.subscriptionDeaf`) and made again.
/// - Unsubscribing: messages Redis sent before it confirmed still reach the old handler; `onUnsubscribed`
///   runs once Redis confirmed (no later publish can reach this loop), or at once when nothing was
///   subscribed, or when the connection dropped.
///
/// Threading: loop-bound like its client (its mutable state is a `LoopBound`, which traps elsewhere).
/// Everything but `isHealthy` and `onHealthChange` on the loop; handlers run there.
public final class RedisShardedSubscriber: Sendable {
    /// The client whose topology it follows and through which probes are published.
    public let client: RedisClient
    /// Called on the loop when `isHealthy` changes; set before `start()`.
    public var onHealthChange: (@Sendable (Bool) -> Void)? {
        get { healthHook.withLock { $0 } }
        set { healthHook.withLock { $0 = newValue } }
    }
    private let healthHook = Lock<(@Sendable (Bool) -> Void)?>(nil)

    enum Kind: Hashable {
        case sharded, classic, pattern

        var subscribe: RedisPubSubConnection.Command {
            switch self {
            case .sharded: return .ssubscribe
            case .classic: return .subscribe
            case .pattern: return .psubscribe
            }
        }
        var unsubscribe: RedisPubSubConnection.Command {
            switch self {
            case .sharded: return .sunsubscribe
            case .classic: return .unsubscribe
            case .pattern: return .punsubscribe
            }
        }
    }

    struct Key: Hashable {
        var kind: Kind
        var name: String
    }

    /// A wanted subscription and where it stands.
    final class Subscription {
        let key: Key
        var handler: (RedisMessage) -> Void
        var onSubscribed: (() -> Void)?
        /// The master whose connection carries it (nil: not placed yet).
        var link: RedisAddress?
        /// `.pending` until its command is written, `.sent` until confirmed.
        var stage = Stage.pending {
            didSet {
                if stage == .confirmed {
                    waiting.subscriptions[ObjectIdentifier(self)] = nil
                } else if oldValue == .confirmed {
                    waitingSince = monotonicNanos()
                    waiting.subscriptions[ObjectIdentifier(self)] = self
                }
            }
        }
        /// The subscriber's subscriptions not confirmed, this one among them while it is not.
        unowned let waiting: Waiting
        var everConfirmed = false
        /// When a refusal of its subscribe command (an ACL, a misconfiguration) was last logged: at most
        /// every 10 s, though it is tried again every `failoverPollInterval`.
        var refusalLoggedAt: UInt64?
        /// When it last stopped being confirmed (or was made): a channel counts as a problem only once it
        /// waited longer than a command time-out, so subscribing new channels does not flap `/readyz`.
        var waitingSince = monotonicNanos()

        enum Stage { case pending, sent, confirmed }

        init(key: Key, handler: @escaping (RedisMessage) -> Void, onSubscribed: (() -> Void)?, waiting: Waiting) {
            self.key = key
            self.handler = handler
            self.onSubscribed = onSubscribed
            self.waiting = waiting
            waiting.subscriptions[ObjectIdentifier(self)] = self  // pending
        }
    }

    /// The subscriptions not confirmed (pending or sent), kept as their stage changes: `problems` looks at
    /// these, not at every subscription (a node subscribes a channel per streamed session; walking all of
    /// them several times a second for health was most of an idle loop's work). Loop thread only.
    final class Waiting {
        var subscriptions: [ObjectIdentifier: Subscription] = [:]
    }

    /// An unsubscribe Redis has not confirmed yet.
    struct Draining {
        var link: RedisAddress
        var handler: (RedisMessage) -> Void
        var done: [() -> Void]
    }

    /// The subscriber's mutable state (its loop only).
    struct State {
        var subscriptions: [Key: Subscription] = [:]
        /// Those of `subscriptions` not confirmed.
        let waiting = Waiting()
        var draining: [Key: Draining] = [:]
        var links: [RedisAddress: Link] = [:]
        /// Some subscription is not placed or not written: `reconcile` has work.
        var dirty = false
        var retryTimer: LoopTimer?
        var probeTimer: LoopTimer?
        var probeCounter = 0
        var closed = false
        /// When `isHealthy` was last recomputed, and whether a deferred recomputation is queued.
        var healthComputedAt: UInt64 = 0
        var healthQueued = false
        /// Subscriptions looked at so far by placements and health scans (tests: the work per channel).
        var visited = 0
    }

    /// Subscriptions looked at so far by `place` and by health scans: grows by O(1) per channel added or
    /// confirmed, not O(channels). Loop thread only; for tests.
    var subscriptionsVisited: Int { state.value.visited }

    let state: LoopBound<State>
    let nonce = String(UInt64.random(in: 0...UInt64.max), radix: 36)
    private let healthy = Atomic<Bool>(true)

    var subscriptions: [Key: Subscription] {
        get { state.value.subscriptions }
        _modify { yield &state.value.subscriptions }
    }
    var draining: [Key: Draining] {
        get { state.value.draining }
        _modify { yield &state.value.draining }
    }
    var links: [RedisAddress: Link] {
        get { state.value.links }
        _modify { yield &state.value.links }
    }
    var dirty: Bool {
        get { state.value.dirty }
        set { state.value.dirty = newValue }
    }
    var probeCounter: Int {
        get { state.value.probeCounter }
        set { state.value.probeCounter = newValue }
    }
    var closed: Bool {
        get { state.value.closed }
        set { state.value.closed = newValue }
    }

    /// A subscriber following `client`'s topology on its loop; `start()` on the loop.
    public init(client: RedisClient) {
        self.client = client
        state = LoopBound(State(), loop: client.loop)
    }

    /// The loop it lives on.
    public var loop: EventLoop { client.loop }

    /// False while a channel has not been subscribed where it belongs for over a command time-out, or a
    /// subscription connection that carries channels is down or deaf (its probe did not come back). Any
    /// thread.
    public var isHealthy: Bool { healthy.load(ordering: .relaxed) }

    /// Starts following the topology and probing. Loop thread only.
    public func start() {
        precondition(loop.inEventLoop, "RedisShardedSubscriber.start off its loop")
        client.addTopologyObserver { [weak self] in self?.topologyChanged() }
        state.value.retryTimer = loop.scheduleRepeating(every: client.options.failoverPollInterval) { [weak self] in
            guard let self, self.dirty else { return self?.updateHealth() ?? () }
            self.reconcile()
        }
        if let every = client.options.probeInterval {
            state.value.probeTimer = loop.scheduleRepeating(every: every) { [weak self] in self?.probeAll() }
        }
        topologyChanged()
    }

    /// Closes every subscription connection; every unsubscribe under way completes. Loop thread only.
    public func close() {
        closed = true
        state.value.retryTimer?.cancel()
        state.value.probeTimer?.cancel()
        subscriptions.removeAll()
        state.value.waiting.subscriptions.removeAll()
        for link in links.values { link.close() }
        links.removeAll()
        completeDraining { _ in true }
        updateHealth()
    }

    /// Subscribes `handler` to the sharded channel `channel` (`SSUBSCRIBE`, at the master of its slot),
    /// replacing an earlier handler. `onSubscribed` runs at each confirmation (again after every
    /// resubscription). Loop thread only.
    public func ssubscribe(
        channel: String, onSubscribed: (() -> Void)? = nil, _ handler: @escaping (RedisMessage) -> Void
    ) {
        add(Key(kind: .sharded, name: channel), onSubscribed, handler)
    }

    /// Subscribes `handler` to the classic channel `channel` (`SUBSCRIBE`; on a cluster every node
    /// delivers every `PUBLISH`). Loop thread only.
    public func subscribe(
        channel: String, onSubscribed: (() -> Void)? = nil, _ handler: @escaping (RedisMessage) -> Void
    ) {
        add(Key(kind: .classic, name: channel), onSubscribed, handler)
    }

    /// Subscribes `handler` to the classic channels matching the glob `pattern` (`PSUBSCRIBE`). Loop
    /// thread only.
    public func psubscribe(
        pattern: String, onSubscribed: (() -> Void)? = nil, _ handler: @escaping (RedisMessage) -> Void
    ) {
        add(Key(kind: .pattern, name: pattern), onSubscribed, handler)
    }

    /// Stops delivering the sharded channel `channel` (see the type's notes on unsubscribing). Loop
    /// thread only.
    public func sunsubscribe(channel: String, onUnsubscribed: (() -> Void)? = nil) {
        remove(Key(kind: .sharded, name: channel), onUnsubscribed)
    }

    /// Stops delivering the classic channel `channel`. Loop thread only.
    public func unsubscribe(channel: String, onUnsubscribed: (() -> Void)? = nil) {
        remove(Key(kind: .classic, name: channel), onUnsubscribed)
    }

    /// Stops delivering `pattern`. Loop thread only.
    public func punsubscribe(pattern: String, onUnsubscribed: (() -> Void)? = nil) {
        remove(Key(kind: .pattern, name: pattern), onUnsubscribed)
    }

    /// Publishes `payload` on the sharded channel `channel` (`SPUBLISH`, at the master of its slot); the
    /// reply is the number of this shard's subscribers that got it. Loop thread only.
    public func spublish(channel: String, payload: [UInt8], _ callback: @escaping RedisClient.Callback) {
        client.send(["SPUBLISH", RedisArg(channel), RedisArg(bytes: payload)], key: RedisArg(channel), callback)
    }

    /// True when the subscription to the glob `pattern` is confirmed where it belongs now (false while it
    /// is being made again after a reconnect, a failover or a slot move). Loop thread only.
    public func isConfirmed(pattern: String) -> Bool {
        subscriptions[Key(kind: .pattern, name: pattern)]?.stage == .confirmed
    }

    /// True when the subscription to the sharded channel `channel` is confirmed where it belongs now.
    /// Loop thread only.
    public func isConfirmed(shardChannel channel: String) -> Bool {
        subscriptions[Key(kind: .sharded, name: channel)]?.stage == .confirmed
    }

    private func add(_ key: Key, _ onSubscribed: (() -> Void)?, _ handler: @escaping (RedisMessage) -> Void) {
        precondition(loop.inEventLoop, "RedisShardedSubscriber off its loop")
        if let existing = subscriptions[key] {
            existing.handler = handler
            existing.onSubscribed = onSubscribed
            return
        }
        let sub = Subscription(key: key, handler: handler, onSubscribed: onSubscribed, waiting: state.value.waiting)
        subscriptions[key] = sub
        guard !closed else { return }
        // This one only: `reconcile` walks every subscription, and a node subscribes a channel per session
        // and per streamed session (a walk for each made subscribing them all O(n²)).
        place(sub)
        updateHealth(soon: true)
    }

    private func remove(_ key: Key, _ onUnsubscribed: (() -> Void)?) {
        precondition(loop.inEventLoop, "RedisShardedSubscriber off its loop")
        guard let sub = subscriptions.removeValue(forKey: key) else {
            if let onUnsubscribed {
                if draining[key] != nil { draining[key]?.done.append(onUnsubscribed) } else { onUnsubscribed() }
            }
            return
        }
        sub.waiting.subscriptions[ObjectIdentifier(sub)] = nil
        guard let at = sub.link, let link = links[at], sub.stage != .pending, link.connection.state == .ready else {
            onUnsubscribed?()
            return
        }
        link.channels.remove(key)
        draining[key] = Draining(link: at, handler: sub.handler, done: onUnsubscribed.map { [$0] } ?? [])
        link.connection.send(key.kind.unsubscribe, key.name) { [weak self] _ in
            guard let self, self.draining[key]?.link == at else { return }
            let d = self.draining.removeValue(forKey: key)
            for done in d?.done ?? [] { done() }
        }
    }

    /// Completes the unsubscribes under way that `where` selects (their connection dropped).
    func completeDraining(where selected: (Draining) -> Bool) {
        for (key, d) in draining where selected(d) {
            draining[key] = nil
            for done in d.done { done() }
        }
    }

    /// Recomputes `isHealthy` and tells `onHealthChange`. `problems` walks the subscriptions not confirmed:
    /// with `soon` (a subscription added or confirmed: thousands at once after a reconnect) it runs at most
    /// every 0.1 s, the last call's recomputation deferred to the end of that window.
    func updateHealth(soon: Bool = false) {
        let t = monotonicNanos()
        if soon, t &- state.value.healthComputedAt < Self.healthInterval {
            guard !state.value.healthQueued else { return }
            state.value.healthQueued = true
            _ = loop.schedule(after: Double(Self.healthInterval) / 1e9) { [weak self] in
                guard let self else { return }
                self.state.value.healthQueued = false
                self.updateHealth()
            }
            return
        }
        state.value.healthComputedAt = t
        let now = !closed && problems.isEmpty
        if healthy.exchange(now, ordering: .relaxed) != now { onHealthChange?(now) }
    }

    /// Nanoseconds between two recomputations of `isHealthy` for added and confirmed subscriptions.
    static let healthInterval: UInt64 = 100_000_000

    /// False while this loop's subscription connection to `master` carries channels and is down or deaf:
    /// events published there do not reach this loop. Loop thread only.
    public func delivers(from master: RedisAddress) -> Bool {
        guard let link = links[master], !link.channels.isEmpty else { return true }
        return link.connection.state == .ready && link.deaf == nil
    }

    /// What is wrong, one sentence each (empty when healthy). Loop thread only.
    public var problems: [String] {
        var out: [String] = []
        let limit = UInt64(client.topology.node.commandTimeout * 1e9)
        let now = monotonicNanos()
        var unplaced = 0
        let waiting = state.value.waiting.subscriptions
        for sub in waiting.values where now &- sub.waitingSince > limit { unplaced += 1 }
        state.value.visited += waiting.count
        if unplaced > 0 {
            out.append("\(unplaced) channels not subscribed for over \(client.topology.node.commandTimeout) s")
        }
        for (address, link) in links.sorted(by: { $0.key.description < $1.key.description }) {
            if link.connection.state != .ready, !link.channels.isEmpty {
                out.append("subscription connection to \(address) is down")
            }
            if let why = link.deaf { out.append("subscription connection to \(address) is deaf (\(why))") }
        }
        return out
    }
}
