import ClusterRedis
import ClusterStore
import CoreMetrics
import Dispatch
import EventHTTP
import Glibc
import JSON
import Logging
import RedisClient
import ViewModels

/// The cluster-mode session backend (`SessionBackend`, chosen by `Application.init` when
/// `AppConfiguration.cluster` is set): per loop, a `RedisClient` (routing each command to the master of
/// its key's slot, on whatever topology `--redis-url` names) with its `RedisSessionStore`, a
/// `RedisShardedSubscriber` with its `RedisSessionEventFeed`, and the loop's cluster state (the sessions
/// whose lease this loop holds, the streams fed from Redis). Nothing else in the session layer knows
/// Redis, and nothing here knows the topology.
///
/// Threading: `clients[i]`, `subscribers[i]`, `stores[i]`, `feeds[i]`, `perLoop[i]` belong to loop i
/// (their `LoopBound` state traps elsewhere); `unreadyReason`, `degradation` and the metrics any thread.
package final class ClusterNode: SessionBackend {
    package let settings: ClusterSettings
    let env: SessionEnvironment
    /// The session layer's loops (the same as `Application.loopSessions`).
    let loopSessions: [LoopSessions]
    /// A client and a subscriber per loop, with the counters they share.
    let group: RedisClientGroup
    let stores: [RedisSessionStore]
    let feeds: [RedisSessionEventFeed]
    /// Per loop: the per-client session limits counted across the cluster (`ClusterNode+ClientLimits.swift`).
    let ledgers: [RedisClientLedger]
    let perLoop: [LoopBound<ClusterLoopState>]
    /// Lease holder names: node id + boot nonce + loop, unique per process incarnation.
    package let holders: [String]
    package let metrics: ClusterMetrics
    let logger: Logger
    /// Per loop: the sharded channels owners answer its forwarded inputs on, one in a slot of each master
    /// (`ClusterNode+Replies.swift`); any thread (a copy of each loop's list).
    let replyChannelLists: Lock<[[String]]>
    /// Seconds a forwarded input waits for the owner's answer.
    let forwardTimeout: Double
    /// How long a commit may leave the session's expiry as its last renewal set it, in tenths of a second
    /// (`SessionStoreLimits.expiryRenewalSeconds`, less the tenth a reading of the clock rounds away).
    let expiryRenewalTenths: UInt32
    /// Every key and channel name (`settings.keyPrefix`).
    let keys: ClusterKeys
    /// What each loop last found of Redis (every `healthInterval`), for `/readyz`.
    let loopHealth: Lock<[LoopRedisHealth]>

    /// Each loop's client (routing by key).
    package var clients: [RedisClient] { group.clients }
    /// Each loop's subscriber (sharded, classic and pattern subscriptions, probed).
    package var subscribers: [RedisShardedSubscriber] { group.subscribers }

    init(settings: ClusterSettings, env: SessionEnvironment, loops loopSessions: [LoopSessions]) {
        let (configuration, logger, loops) = (env.configuration, env.logger, loopSessions.map(\.loop))
        self.settings = settings
        self.env = env
        self.loopSessions = loopSessions
        self.logger = logger
        var options = settings.clientOptions
        if options.probeChannelPrefix == RedisClientOptions().probeChannelPrefix {
            options.probeChannelPrefix = "\(settings.keyPrefix):probe:"
        }
        group = RedisClientGroup(loops: loops, topology: settings.topology, options: options, logger: logger)
        let keys = ClusterKeys(prefix: settings.keyPrefix)
        let limits = SessionStoreLimits(
            historyEvents: configuration.historyEvents,
            idleTimeout: max(1, Int(configuration.sessionIdleTimeout.rounded(.up))),
            leaseMilliseconds: max(1, Int(settings.leaseTTL * 1000)),
            // The keys live in Redis as long as in a session's memory (`OwnedSession.storeMayHoldUnseenKeys`).
            idempotencySeconds: max(1, Int(configuration.idempotencyWindow.rounded(.up))))
        let metrics = ClusterMetrics(factory: env.metrics.factory)
        let checkInterval = max(0.05, min(settings.leaseTTL, configuration.sessionIdleTimeout / 4))
        stores = group.clients.map {
            RedisSessionStore(
                client: $0, limits: limits, keys: keys, replicaAcks: settings.replicaAcks,
                replicaTimeout: settings.redis.commandTimeout, commitWindow: settings.commitWindow,
                streamLiveness: 3 * checkInterval
            ) { [logger] live in
                metrics.livenessLapses.increment()
                logger.warning(
                    "lease liveness lapsed; the leases under it are checked one by one", metadata: ["key": "\(live)"])
            }
        }
        feeds = group.subscribers.map { RedisSessionEventFeed(subscriber: $0, keys: keys) }
        let ledgerLimits = RedisClientLedger.Limits(
            ratePerSecond: configuration.clientSessionRate, burst: configuration.clientSessionBurst,
            maxLive: configuration.maxSessionsPerClient,
            countedMilliseconds: Int((3 * Self.clientRefreshInterval * 1000).rounded()))
        ledgers = group.clients.map { RedisClientLedger(client: $0, keys: keys, limits: ledgerLimits) }
        perLoop = loops.map { LoopBound(ClusterLoopState(loop: $0), loop: $0) }
        var rng = SystemRandomNumberGenerator()
        let nonce = String(rng.next() as UInt64, radix: 36)
        holders = loops.indices.map { "\(settings.nodeID)#\(nonce)#\($0)" }
        holderLoops = Dictionary(uniqueKeysWithValues: holders.enumerated().map { ($1, $0) })
        replyChannelLists = Lock(holders.map { [keys.replies($0)] })
        self.keys = keys
        forwardTimeout = min(2, settings.leaseTTL)
        expiryRenewalTenths = UInt32(max(0, limits.expiryRenewalSeconds * 10 - 1))
        streamedCheckInterval = checkInterval
        streamedCheckSlices = max(1, Int(streamedCheckInterval / 0.1))
        // A pass takes one check interval: the keys' expiry renewed once per renewal interval, at most (a
        // pass late by a slice still renews within the extra the expiry carries).
        expiryRenewalPasses = max(1, Int(Double(limits.expiryRenewalSeconds) / streamedCheckInterval))
        streamDeadlineMilliseconds = max(
            1, Int((3 * streamedCheckInterval * Double(expiryRenewalPasses) * 1000).rounded(.up)))
        self.metrics = metrics
        loopHealth = Lock(Array(repeating: LoopRedisHealth(), count: loops.count))
        for (i, client) in group.clients.enumerated() {
            let m = metrics
            client.onRoundTrip = { m.roundTrip.recordSeconds($0) }
            // A failover or a map refresh is seen by every loop on its own: counted from loop 0 only.
            client.onEvent = { [unowned self] event in self.clientEvent(event, loop: i) }
        }
        // hiredis 0.14 cannot PING a subscriber, but each subscription connection is probed (a message
        // published to itself through the command connection of the same master): no subscriber is
        // reset because a command connection dropped.
    }

    /// Connects every loop's client and subscriber, subscribes to the forwarded inputs' replies and
    /// starts the checks of streamed sessions and of Redis's health.
    func start() {
        group.start()
        subscribeForwardingChannels()
        startOrphanChecks()
        startHealthChecks()
        startClientRefreshes()
    }

    /// Shutdown: every session run here is handed to other nodes at once (`handOverAll`).
    func prepareShutdown() { handOverAll(timeout: 2) }

    /// The state lives in the store: every read is a round trip (`state(of:at:reply:)`).
    func currentState(of id: String, login: String?, at host: LoopSessions) -> [UInt8]? { nil }

    /// Nil while every loop can serve some sessions (one Redis master it reaches, whose subscriptions
    /// deliver; with `--redis-replica-acks-strict`, one with the replicas wanted): one master missing or
    /// short of replicas is its own sessions' trouble, named by `degradation`, and the node stays ready.
    /// Else why not, with every problem known (`RedisClient.problems`, `RedisShardedSubscriber.problems`).
    var unreadyReason: String? {
        let health = loopHealth.withLock { $0 }
        if health.allSatisfy(\.servesSome) { return nil }
        let found = Self.named(health)
        return "Redis is not reachable" + (found.isEmpty ? "" : ": " + found.joined(separator: "; "))
    }

    /// While ready, what is wrong with Redis all the same (a master missing, short of replicas, a
    /// subscription down), one sentence each: what `/readyz`'s body names. Empty when all is well.
    var degradation: [String] { Self.named(loopHealth.withLock { $0 }) }

    /// Every loop's problems, each prefixed by its loop.
    private static func named(_ health: [LoopRedisHealth]) -> [String] {
        health.enumerated().flatMap { i, h in h.problems.map { "loop \(i): \($0)" } }
    }

    /// An app-wide view model (`status`) is one value for the cluster, each node's fed the same notices
    /// (the status from the status board):
    /// it reaches each stream from the node that hosts it, as an event without an id, and is never
    /// committed per session (a broadcast costs Redis nothing per session; committing it in every
    /// session of a node was slow and failed). A stream resumed from a replay gets the
    /// current status after it (`ClusterStream`), and every snapshot carries it, so clients converge.
    func appWideChanged(_ name: String, _ data: [UInt8], isSignal: Bool, on loop: LoopSessions) {
        loop.broadcastToHostedStreams(SSEFrame.event(id: nil, name: name, data: data))
    }

    /// Seconds between two checks, per loop, of the sessions streamed there: orphans are acquired, and
    /// the expiry of a session run elsewhere is renewed (an open stream keeps a session alive).
    let streamedCheckInterval: Double

    /// The streamed sessions of a loop are checked in this many slices, one slice every
    /// `streamedCheckInterval / streamedCheckSlices` (about 0.1 s), each session in its own slice
    /// (`StreamedSession.slot`): still once per interval each, but never all at once. Thousands of sessions
    /// checked together stalled the loop and Redis every interval (docs/BENCHMARKS.md).
    let streamedCheckSlices: Int

    /// A streamed session's check renews its keys' idle expiry on every this-many passes over the slices
    /// (`expiryRenewalSeconds / streamedCheckInterval`, at least 1: every pass).
    let expiryRenewalPasses: Int

    /// How long an open stream stays in its session's set of open streams without a renewal: three
    /// expiry renewals (a session's streams get a new deadline when its keys' expiry is renewed, once per
    /// `expiryRenewalPasses`). A backstop: a stream counts towards the cluster-wide limit only while its
    /// loop's stream-liveness key lives (`RedisSessionStore.keepStreamsLive`, three check intervals
    /// unrenewed), so a dead node's streams stop counting at most three check intervals after its last pass.
    let streamDeadlineMilliseconds: Int

    /// This node's holders (`holders`), by name: the loop each is.
    let holderLoops: [String: Int]

    /// The name of stream `n` of loop `index` in its session's set of open streams: unique per process
    /// incarnation (the holder name carries the boot nonce).
    func streamMember(loop index: Int, _ n: Int) -> String { "\(holders[index])/\(n)" }

    /// Counts a failed store operation (for `/metrics`).
    func failed(_ error: StoreError) {
        switch error {
        case .unavailable, .notReplicated, .shortOfReplicas: metrics.redisErrors.increment()
        default: break
        }
    }

    /// Graceful shutdown (any thread but a loop's): every loop releases the leases it holds at once
    /// (waiting at most `timeout` seconds for Redis), so other nodes take those sessions over without
    /// waiting for the TTL; then it unsubscribes its input channels and waits, at most `drainTimeout`
    /// seconds, for Redis to confirm. A node that found the lease just before its release may still
    /// `PUBLISH` an input to this node: Redis delivers every message published before the unsubscribe
    /// before confirming it, and each is answered at once with "moved" (the session is no longer owned
    /// here: its sender asks Redis again and takes it over). Last, one `PING` on the loop's command
    /// connection to each master, whose reply comes after those of the answers published on it, so they
    /// have reached Redis before the loops stop. After a confirmed unsubscribe a `PUBLISH` reaches nobody and its
    /// sender answers at once too: no forwarded input waits for the forward time-out.
    func handOverAll(timeout: Double, drainTimeout: Double = 1) {
        let done = DispatchGroup()
        for (i, state) in perLoop.enumerated() {
            let loop = state.loop
            done.enter()
            let m = metrics
            loop.execute {
                let owned = state.value.owned
                state.value.owned = [:]
                // No more stream checks: they would set the stream-liveness key `dropLiveness` deletes.
                state.value.orphanTimer?.cancel()
                state.value.orphanTimer = nil
                afterAll(owned.count, within: timeout, on: loop) { step in
                    for o in owned.values {
                        o.keeper?.stop()
                        o.keeper = nil
                        self.stores[i].release(o.lease) { r in
                            if case .success(true) = r { m.handOvers.increment() }
                            step()
                        }
                    }
                } then: {
                    // Held nothing more: sessions streamed elsewhere are taken over at the streaming
                    // nodes' next check, not a lease TTL later (`startOrphanChecks`).
                    self.stores[i].dropLiveness()
                    let channels = self.inputChannels(loop: i)
                    afterAll(channels.count, within: drainTimeout, on: loop) { step in
                        for channel in channels {
                            self.subscribers[i].sunsubscribe(channel: channel, onUnsubscribed: step)
                        }
                    } then: {
                        self.clients[i].sendToEachMaster(["PING"], timeout: drainTimeout) { _ in done.leave() }
                    }
                }
            }
        }
        _ = done.wait(timeout: .now() + timeout + drainTimeout * 2 + 0.5)
    }
}

/// Runs `then` once, on `loop`, when `count` steps have finished or `seconds` have passed, whichever
/// comes first: `start` begins the steps and each calls the `step` it is given when done (loop only).
private func afterAll(
    _ count: Int, within seconds: Double, on loop: EventLoop, start: (_ step: @escaping () -> Void) -> Void,
    then: @escaping () -> Void
) {
    let join = LoopJoin(count, then)
    guard count > 0 else { return join.finish() }
    join.bound = loop.schedule(after: seconds) { join.finish() }
    start { join.step() }
}

/// The state of one `afterAll` (its loop only).
private final class LoopJoin {
    private var left: Int
    private var then: (() -> Void)?
    var bound: LoopTimer?

    init(_ count: Int, _ then: @escaping () -> Void) {
        left = count
        self.then = then
    }

    func step() {
        left -= 1
        if left == 0 { finish() }
    }

    func finish() {
        bound?.cancel()
        bound = nil
        guard let then else { return }
        self.then = nil
        then()
    }
}

/// One loop's cluster state (that loop only).
struct ClusterLoopState {
    /// The timers of the leases this loop keeps, in ~0.1 s slices: the renewals due in one slice go to
    /// Redis as one call (`RedisSessionStore.renew`), not one each.
    let renewals: SlicedTimers
    /// What this loop's lease keepers share (made with the first).
    var keeping: LeaseKeeping?
    /// Sessions whose lease this loop holds.
    var owned: [String: OwnedSession] = [:]
    /// Streams on this loop fed from Redis, by session. Change it only through `addFed`/`removeFed`,
    /// which keep `fedSlices` in step.
    private(set) var fed: [String: StreamedSession] = [:]
    /// The sessions of `fed` by the slice of the periodic check they are in (`StreamedSession.slot`): a
    /// slice's check visits its own sessions, not every session streamed on the loop (walking `fed` visited
    /// every one of them at every slice).
    private(set) var fedSlices: [[StreamedSession]] = []
    /// Inputs forwarded from this loop to other nodes, waiting for their answers.
    var forwards: [Int: PendingForward] = [:]
    /// Sessions whose live lease another node held when this loop last asked (`acquire`): the holder, and
    /// until when (`Application.now()`): their inputs are forwarded without asking again
    /// (`forwardToKnownHolder`).
    var heldElsewhere: [String: (holder: String, until: Double)] = [:]
    var nextForward = 0
    /// The number of this loop's next stream (its member name in the session's set of open streams).
    var nextStream = 0
    /// The timer that looks for orphaned sessions among those streamed here, and the slice it checks next.
    var orphanTimer: LoopTimer?
    var orphanSlice = 0
    /// Passes over every slice so far (the keys' expiry is renewed on every `expiryRenewalPasses`-th).
    var orphanPass = 0
    /// The lease holders the streamed sessions' last checks named (`StreamedSession.holder` is an index
    /// here; 0, "", is none or not known), and each one's index. At most 4,096: then forgotten, and every
    /// streamed session is checked one by one once more.
    private(set) var knownHolders: [String] = [""]
    private var holderNumbers: [String: UInt16] = [:]
    /// The slice the next session streamed here is checked in (round robin).
    var nextSlot = 0
    /// The sharded channels owners answer this loop's forwarded inputs on (the first: `<prefix>:reply:
    /// {<holder>}`; then one in a slot of each master, made as masters appear).
    var replyChannels: [String] = []
    /// The sharded channels other nodes forward this loop's sessions' inputs on (the same layout:
    /// `<prefix>:in:{<holder>}`, then one in a slot of each master).
    var inputChannels: [String] = []
    /// The timer reading this loop's Redis problems (`ClusterNode.startHealthChecks`), and when this loop
    /// last logged a commit its replicas did not confirm (at most every 10 s).
    var healthTimer: LoopTimer?
    /// The timer keeping this loop's sessions counted against their clients (`startClientRefreshes`).
    var clientRefreshTimer: LoopTimer?
    /// Creations admitted on this node's own limits because Redis did not answer the client ledger, since
    /// this loop last said so, and when it did (at most every 10 s: a Redis in trouble fails thousands).
    var ledgerFailures = 0
    var ledgerFailuresLoggedAt: Double?
    var ackTimeoutLoggedAt: Double?
    /// Forwarding messages this loop could not read (another version, or damaged) since it last said so,
    /// and when it last said so (`Application.dropUnreadable`).
    var unreadable = 0
    var unreadableLoggedAt: Double?

    init(loop: EventLoop) { renewals = SlicedTimers(loop: loop) }

    /// The index of `name` in `knownHolders` (0 for nil).
    mutating func holderNumber(_ name: String?) -> UInt16 {
        guard let name else { return 0 }
        if let n = holderNumbers[name] { return n }
        if knownHolders.count >= 4096 {
            knownHolders = [""]
            holderNumbers = [:]
            for f in fed.values { f.holder = 0 }
        }
        knownHolders.append(name)
        let n = UInt16(knownHolders.count - 1)
        holderNumbers[name] = n
        return n
    }

    /// A slot for a session newly streamed here: round robin over `slices`.
    mutating func takeSlot(of slices: Int) -> Int {
        defer { nextSlot = (nextSlot + 1) % slices }
        return nextSlot % slices
    }

    /// `session` (of session `id`) is streamed on this loop from now on: in `fed` and in its slice.
    mutating func addFed(_ session: StreamedSession, id: String) {
        fed[id] = session
        if session.slot >= fedSlices.count {
            fedSlices += Array(repeating: [], count: session.slot + 1 - fedSlices.count)
        }
        session.sliceIndex = Int32(fedSlices[session.slot].count)
        fedSlices[session.slot].append(session)
    }

    /// `session` (of session `id`) is no longer streamed on this loop (its last stream here closed): out of
    /// `fed` and of its slice (the slice's last session takes its place).
    mutating func removeFed(_ session: StreamedSession, id: String) {
        if fed[id] === session { fed[id] = nil }
        let i = Int(session.sliceIndex)
        guard i >= 0, session.slot < fedSlices.count, i < fedSlices[session.slot].count,
            fedSlices[session.slot][i] === session
        else { return }
        let last = fedSlices[session.slot].removeLast()
        if i < fedSlices[session.slot].count {
            fedSlices[session.slot][i] = last
            last.sliceIndex = Int32(i)
        }
        session.sliceIndex = -1
    }

    /// The sessions checked in slice `slice` (none if no session was ever put there).
    func fedSessions(inSlice slice: Int) -> [StreamedSession] { slice < fedSlices.count ? fedSlices[slice] : [] }
}

/// A session run here under a lease (owner loop only).
final class OwnedSession: SessionCustodian, LeaseHolder {
    let session: Session
    unowned let node: ClusterNode
    let lease: Lease
    var keeper: LeaseKeeper?
    /// Events emitted since the last commit, encoded for the store.
    var pending: [[UInt8]] = []
    var flushScheduled = false
    /// This run took the session from the store (`acquire`), not from its creation here, and no idempotency
    /// window has passed since, as far as the last look (`storeMayHoldUnseenKeys`) saw: keys an earlier run
    /// committed may be in the store only. This flag and `tookOverAt` sit beside `flushScheduled`, in the
    /// padding before `expiryRenewedAt`: no byte per session.
    private var tookOver: Bool
    /// When this run took the session over: whole seconds of the session clock, wrapping at 2^16 (18 h).
    private let tookOverAt: UInt16
    /// When a commit of this run last renewed the session's expiry in the store, in tenths of a second of
    /// the session clock (wrapping: only differences count); `.max` until the first commit, which renews
    /// (`ClusterNode.commit`). In the padding after `flushScheduled`: no byte per session.
    var expiryRenewedAt: UInt32 = .max
    /// The highest `inputSeq` the store has acknowledged.
    var committedInputSeq: Int
    /// Duplicates (`Idempotency-Key`) of inputs whose commit is still in flight: answered once it lands.
    var waiters: [(inputSeq: Int, answer: (Bool) -> Void)] = []
    /// Each view model's stored form as of the last commit (`Application.clusterState(of:memos:)`).
    var storedForms: [StoredFormMemo] = []

    init(session: Session, node: ClusterNode, lease: Lease, committedInputSeq: Int, tookOver: Bool, now: Double) {
        self.session = session
        self.node = node
        self.lease = lease
        self.tookOver = tookOver
        tookOverAt = Self.wrappedSeconds(now)
        self.committedInputSeq = committedInputSeq
        super.init()
    }

    /// An event of the session: kept for the next commit, which is scheduled for the end of this loop
    /// iteration (owner loop).
    override func sessionEmitted(viewModel name: String, data: [UInt8], isSignal: Bool) {
        pending.append(ClusterEvent.encode(name: name, data: data, isSignal: isSignal))
        guard !flushScheduled else { return }
        flushScheduled = true
        session.owner.loop.runSoon { [node] in node.flush(self) }
    }

    override func sessionEnded(reason: String) { node.ended(self, reason: reason, loop: session.owner.loop.index) }

    /// The lease is lost (taken, or Redis silent for a whole TTL): the session leaves this node (owner loop).
    func leaseLost(_ loss: LeaseKeeper.Loss, keeper: LeaseKeeper) {
        var metadata: Logger.Metadata = ["session": "\(session.id)", "loss": "\(loss)"]
        if let error = keeper.lastError { metadata["error"] = "\(error)" }
        metadata["renewals"] = "\(keeper.lastRenewals)"
        node.logger.warning("lease lost", metadata: metadata)
        self.keeper = nil
        // Not answered for a whole TTL: the lease may still name this loop, and its liveness key lives on for
        // the loop's other sessions once Redis answers again. Released then (the store sends it again).
        if loss == .unreachable { node.stores[session.owner.loop.index].release(keeper.lease) { _ in } }
        node.leave(session)
    }

    private static func wrappedSeconds(_ t: Double) -> UInt16 { UInt16(truncatingIfNeeded: Int64(t.rounded(.down))) }

    /// True while the store may hold an `Idempotency-Key` this run never saw: it took the session over less
    /// than `window` seconds ago (an earlier run's keys expire a window after their commit, which came before
    /// the takeover). Once a whole window has surely passed (the whole seconds compared may each be up to 1 s
    /// off, so `window` + 1), it stays false. A wrapped clock errs only towards true, a lookup too many.
    func storeMayHoldUnseenKeys(now: Double, window: Double) -> Bool {
        guard tookOver else { return false }
        let elapsed = Self.wrappedSeconds(now) &- tookOverAt
        guard window + 1 < Double(UInt16.max), Double(elapsed) >= window + 1 else { return true }
        tookOver = false
        return false
    }

    /// The store acknowledged inputs up to `inputSeq`.
    func acknowledged(_ inputSeq: Int) {
        committedInputSeq = max(committedInputSeq, inputSeq)
        let ready = waiters.filter { $0.inputSeq <= committedInputSeq }
        waiters.removeAll { $0.inputSeq <= committedInputSeq }
        for w in ready { w.answer(true) }
    }

    /// The session left this node: every waiter is told its input's fate is unknown here.
    func failWaiters() {
        let all = waiters
        waiters = []
        for w in all { w.answer(false) }
    }
}

/// The streams of one session on one loop, fed by one subscription.
final class StreamedSession {
    /// The slice of the loop's periodic check this session is checked in (`ClusterNode.streamedCheckSlices`).
    let slot: Int
    /// Never empty while the session is in `fed` (it leaves with its last stream); each knows the session's id.
    /// The first inline: most sessions have one stream on a loop, and an array of one is an allocation more.
    var streams = InlineFirstList<ClusterStream>()
    var subscribed = false
    /// Fed by the commits of this very loop, which runs the session (no subscription to its channel):
    /// set when the first stream opens while the session is run here; cleared (subscribed, caught up from
    /// the history) when the session leaves the loop.
    var local = false
    /// The lease holder its last check named (`ClusterLoopState.knownHolders`; 0: none, or not checked yet):
    /// while that holder's liveness key lives, the periodic check needs nothing of this session
    /// (`ClusterNode.startOrphanChecks`). In the padding after the two flags, as `sliceIndex`.
    var holder: UInt16 = 0
    /// Its place in its slice's array (`ClusterLoopState.fedSlices`); -1 when in none. 32 bits, after the two
    /// flags: in the padding the object had, no byte more per session.
    var sliceIndex: Int32 = -1

    init(slot: Int) { self.slot = slot }

    /// Feeds the streams from this loop's own commits (`Application.deliverLocally`): nothing to wait
    /// for, so each stream catches up from the store at once (host loop, which runs the session).
    func followCommits() {
        local = true
        subscribed = true
        for s in streams { s.resync() }
    }

    /// Feeds the streams from the session's Redis channel: subscribe, then each stream catches up from
    /// the history (`resync`) and goes on with the live events (host loop).
    func follow(_ feed: any SessionEventFeed, sessionID id: String) {
        local = false
        subscribed = false
        feed.subscribe(
            sessionID: id,
            onSubscribed: { [weak self] in
                guard let self else { return }
                self.subscribed = true
                for s in self.streams { s.resync() }
            },
            { [weak self] event in
                guard let self else { return }
                for s in self.streams { s.live(event) }
            })
    }
}

/// Cluster mode's meters (in the application's registry, so `/metrics` shows them).
package final class ClusterMetrics: Sendable {
    let roundTrip: CoreMetrics.Timer
    let takeovers: CoreMetrics.Counter
    let handOvers: CoreMetrics.Counter
    let crossNodeInputs: CoreMetrics.Counter
    package let redisErrors: CoreMetrics.Counter
    let fenced: CoreMetrics.Counter
    /// Times a loop found its liveness key on a master gone (paused past the lease TTL, a failover lost it,
    /// a slot moved): its leases there were then checked one by one.
    let livenessLapses: CoreMetrics.Counter
    /// New sessions and streams refused because the loop's Redis connection was busy (`admits`).
    let admissionRefusals: CoreMetrics.Counter
    /// Sessions that left this node for another (lease lost, fenced, commit failed): registered only in
    /// cluster mode, so single-process `/metrics` is unchanged.
    let moved: CoreMetrics.Counter
    /// Calls to GitHub the cluster-wide token bucket refused (this node's searches answered rate-limited).
    package let budgetRefusals: CoreMetrics.Counter
    /// The shared search cache's answers to this node's misses, by outcome (`SearchCacheOutcome`).
    private let searchCache: [String: CoreMetrics.Counter]
    /// What the Redis clients saw (failovers, redirections, resubscriptions, probe failures, …).
    let redis: RedisHealthMetrics
    /// `bff_redis_problems`.
    var redisProblems: Meter { redis.problems }

    /// The `outcome` label values of `bff_cluster_search_cache_total`.
    package static let searchCacheOutcomes = ["hit", "miss", "waited", "lock_timeout", "stale", "unavailable"]

    init(factory f: MetricsFactory) {
        roundTrip = CoreMetrics.Timer(label: "bff_redis_round_trip", dimensions: [], factory: f)
        takeovers = CoreMetrics.Counter(label: "bff_cluster_takeovers_total", factory: f)
        handOvers = CoreMetrics.Counter(label: "bff_cluster_hand_overs_total", factory: f)
        crossNodeInputs = CoreMetrics.Counter(label: "bff_cluster_inputs_owned_elsewhere_total", factory: f)
        redisErrors = CoreMetrics.Counter(label: "bff_redis_errors_total", factory: f)
        fenced = CoreMetrics.Counter(label: "bff_cluster_fenced_total", factory: f)
        livenessLapses = CoreMetrics.Counter(label: "bff_cluster_liveness_lapses_total", factory: f)
        admissionRefusals = CoreMetrics.Counter(label: "bff_cluster_admission_refusals_total", factory: f)
        moved = CoreMetrics.Counter(label: "bff_sessions_ended_total", dimensions: [("reason", "moved")], factory: f)
        budgetRefusals = CoreMetrics.Counter(label: "bff_cluster_budget_refusals_total", factory: f)
        var searchCache: [String: CoreMetrics.Counter] = [:]
        for outcome in Self.searchCacheOutcomes {
            searchCache[outcome] = CoreMetrics.Counter(
                label: "bff_cluster_search_cache_total", dimensions: [("outcome", outcome)], factory: f)
        }
        self.searchCache = searchCache
        redis = RedisHealthMetrics(factory: f)
    }

    /// Counts one event of a Redis client or subscriber.
    func redisEvent(_ event: RedisClientEvent) { redis.count(event) }

    /// Counts one answer of the shared search cache (`outcome` one of `searchCacheOutcomes`).
    package func searchCache(_ outcome: String) { searchCache[outcome]?.increment() }
}
