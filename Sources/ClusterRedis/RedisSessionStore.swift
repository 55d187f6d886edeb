import ClusterStore
import EventLoop
import Primitives
import RedisClient

/// The `SessionStore` of cluster mode: sessions in Redis (see `ClusterKeys` and `SessionScripts`), on
/// any topology: every operation names a key of its session, so `RedisClient` sends it to the master of
/// that session's slot (all of a session's keys share its `{id}` hash tag); nothing here knows whether
/// that is one Redis, a Sentinel's master or one shard of a Redis Cluster.
///
/// With `replicaAcks` N > 0 (`--redis-replica-acks`) every write that decides what clients see — a
/// creation, an acquisition (its fencing token), a commit, a deletion — is followed by `WAIT N` on the
/// same connection and fails with `.notReplicated` unless N replicas confirm it within
/// `replicaTimeout`; a commit's events are then published only once confirmed (the commit script
/// publishes nothing), so no client sees an event, an id or an `inputSeq` that a failover can take back.
/// A replay, and an `Idempotency-Key` found, are confirmed the same way before they are used (their
/// scripts write the expiry they read: a write for `WAIT` to cover). See docs/CLUSTER.md, "Replica acks".
///
/// Threading: bound to its client's loop; call it there, completions run there.
/// Each operation is one round trip (one script or one command), plus its `WAIT`; commits are sent in
/// batches (`commit`), lease renewals as one key per holder and master (`renew`). An acquisition, a release or a deletion first sends
/// the commits waiting for their batch (`sendCommitsBefore`): it reaches Redis after them.
/// Stream deadlines are on Redis's clock (`TIME`), one clock for every node.
public final class RedisSessionStore: SessionStore, Sendable {
    /// The loop-bound client used.
    public let client: RedisClient
    /// The bounds applied.
    public let limits: SessionStoreLimits
    /// The key layout.
    public let keys: ClusterKeys
    /// Replicas that must confirm a write before it counts (`WAIT`); 0: none (`redis://`'s default).
    public let replicaAcks: Int
    /// Seconds a write waits for those replicas before it fails with `.notReplicated`.
    public let replicaTimeout: Double
    /// The commit window in nanoseconds (0: none): see "Commit window" in `RedisSessionStore+Commits.swift`.
    let commitWindowNanos: UInt64
    /// The commit script's first arguments, the same for every call: history max, expiry, idempotency.
    let commitHeader: [RedisArg]
    /// Told when a liveness key of this loop was found gone (`init`).
    let onLivenessLapsed: @Sendable (String) -> Void
    /// How long a stream-liveness key lives unrenewed (`ClusterKeys.streamLive`): a member of a session's
    /// set of open streams counts while its loop's key lives.
    public let streamLivenessMilliseconds: Int

    /// A store on `client`, with `limits`, under `keys`, each decisive write confirmed by `replicaAcks`
    /// replicas within `replicaTimeout` seconds (default: the command time-out), commits held for up to
    /// `commitWindow` seconds while this loop commits to their master more often than that (0: never held);
    /// `onLivenessLapsed` is told (on the loop) each time a liveness key of this loop was found gone and its
    /// leases are checked one by one (`renew`), with the key's name (a holder name: no secret); this loop's
    /// streams count while it renews its stream-liveness keys within `streamLiveness` seconds
    /// (`keepStreamsLive`).
    public init(
        client: RedisClient, limits: SessionStoreLimits = SessionStoreLimits(), keys: ClusterKeys,
        replicaAcks: Int = 0, replicaTimeout: Double? = nil, commitWindow: Double = 0, streamLiveness: Double = 30,
        onLivenessLapsed: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.onLivenessLapsed = onLivenessLapsed
        streamLivenessMilliseconds = max(1, Int((streamLiveness * 1000).rounded(.up)))
        self.client = client
        self.limits = limits
        self.keys = keys
        self.replicaAcks = max(0, replicaAcks)
        self.replicaTimeout = replicaTimeout ?? client.topology.node.commandTimeout
        commitWindowNanos = UInt64(max(0, min(commitWindow, 60)) * 1e9)
        commitHeader = [
            RedisArg(limits.historyEvents), RedisArg(limits.expirySeconds), RedisArg(limits.idempotencySeconds),
        ]
        pendingRenewals = LoopBound([], loop: client.loop)
        pendingStreamChecks = LoopBound([], loop: client.loop)
        liveness = LoopBound(Liveness(), loop: client.loop)
        commitQueue = LoopBound(CommitQueue(), loop: client.loop)
        client.preload(SessionScripts.all)
    }

    /// The loop the store is bound to.
    public var loop: EventLoop { client.loop }

    /// `script`, routed by `keys[0]`, and — with `replicaAcks` > 0 — confirmed by that many replicas:
    /// `.notReplicated` when they did not confirm it (the reply is dropped: the caller must not use it).
    func replicated(
        _ script: RedisScript, keys: [RedisArg], args: [RedisArg],
        _ done: @escaping (Result<RESPValue, StoreError>) -> Void
    ) {
        replicated(script, keys: keys, args: args) { r, _ in done(r) }
    }

    /// `replicated`, also saying whether Redis redirected the call (`isSlotRedirect`: nothing of it ran).
    func replicated(
        _ script: RedisScript, keys: [RedisArg], args: [RedisArg],
        _ done: @escaping (Result<RESPValue, StoreError>, _ redirected: Bool) -> Void
    ) {
        guard replicaAcks > 0 else {
            return client.evalScript(script, keys: keys, args: args) { r in
                if case .failure(let e) = r { return done(.failure(e.storeError), e.isSlotRedirect) }
                done(r.mapError(\.storeError), false)
            }
        }
        client.evalScript(script, keys: keys, args: args, waitForReplicas: replicaAcks, replicaTimeout: replicaTimeout)
        {
            r in
            switch r {
            case .success(let v) where v.isAcknowledged: done(.success(v.reply), false)
            case .success(let v): done(.failure(.notReplicated(acknowledged: v.replicas, wanted: v.wanted)), false)
            case .failure(let e): done(.failure(e.storeError), e.isSlotRedirect)
            }
        }
    }

    public func create(
        sessionID: String, holder: String, state: [UInt8], completion: @escaping (Result<Lease, StoreError>) -> Void
    ) {
        create(sessionID: sessionID, holder: holder, state: state, again: true, completion: completion)
    }

    /// `create`; `again`: a `LIVETAG` refusal (the slot map named another master's tag) is sent once more.
    private func create(
        sessionID: String, holder: String, state: [UInt8], again: Bool,
        completion: @escaping (Result<Lease, StoreError>) -> Void
    ) {
        if state.count > limits.maxStateBytes { return completion(.failure(.tooLarge(state.count))) }
        let live = keys.live(holder: holder, tag: liveTag(forSession: sessionID))
        let sent = monotonicNanos()
        stillWanted(sessionID)
        replicated(
            SessionScripts.create, keys: [RedisArg(keys.session(sessionID))],
            args: [
                RedisArg(holder), RedisArg(bytes: state), RedisArg(limits.expirySeconds), RedisArg(live),
                RedisArg(limits.leaseMilliseconds),
            ]
        ) { [self] r in
            if again, Self.isStaleTag(r) {
                return create(sessionID: sessionID, holder: holder, state: state, again: false, completion: completion)
            }
            if case .success(let v) = r { confirmed(live, sentAt: sent, wasMissing: v.int == 2) }
            completion(r.storeMap { _ in Lease(sessionID: sessionID, holder: holder, token: 1) })
        }
    }

    /// True for a script's `LIVETAG` refusal: the liveness key it was given is not this master's.
    static func isStaleTag<T>(_ r: Result<T, StoreError>) -> Bool {
        if case .failure(.unavailable(let message)) = r { return message.contains("LIVETAG") }
        return false
    }

    public func acquire(
        sessionID: String, holder: String, completion: @escaping (Result<LeaseGrant, StoreError>) -> Void
    ) {
        acquire(sessionID: sessionID, holder: holder, newToken: false, completion: completion)
    }

    /// An acquisition not confirmed by the replicas fails with `.notReplicated`, and the lease it may have
    /// taken is released (best effort): its token is never used, and whoever acquires next gets a new one.
    public func acquire(
        sessionID: String, holder: String, newToken: Bool,
        completion: @escaping (Result<LeaseGrant, StoreError>) -> Void
    ) {
        acquire(sessionID: sessionID, holder: holder, newToken: newToken, again: true, completion: completion)
    }

    private func acquire(
        sessionID: String, holder: String, newToken: Bool, again: Bool,
        completion: @escaping (Result<LeaseGrant, StoreError>) -> Void
    ) {
        sendCommitsBefore(sessionID: sessionID)
        let tag = liveTag(forSession: sessionID)
        let live = keys.live(holder: holder, tag: tag)
        let sent = monotonicNanos()
        stillWanted(sessionID)  // a release sent again after this would end this run
        replicated(
            SessionScripts.acquire,
            keys: [RedisArg(keys.session(sessionID)), RedisArg(keys.events(sessionID))],
            args: [
                RedisArg(holder), RedisArg(limits.leaseMilliseconds), RedisArg(limits.expirySeconds),
                newToken ? "1" : "0", RedisArg(keys.livePrefix(tag: tag)), RedisArg(live),
            ]
        ) { [self] r in
            if again, Self.isStaleTag(r) {
                return acquire(
                    sessionID: sessionID, holder: holder, newToken: newToken, again: false, completion: completion)
            }
            if case .failure(.notReplicated) = r {
                // The lease, if granted, is ours: give it back without knowing its token (the script
                // checks the holder); whoever acquires next gets a new token.
                client.send(
                    ["EVAL", RedisArg(Self.dropOwnLease), "1", RedisArg(keys.session(sessionID)), RedisArg(holder)],
                    key: RedisArg(keys.session(sessionID))
                ) { _ in }
            }
            if case .success(let v) = r, let a = v.array, a.count == 6 {
                confirmed(live, sentAt: sent, wasMissing: a[5].int == 1)
            }
            completion(
                r.storeMap { v -> LeaseGrant? in
                    guard let a = v.array, a.count >= 3 else { return nil }
                    if a[0].int == 0 {
                        return .heldBy(a[1].string ?? "", remainingMilliseconds: Int(a[2].int ?? 0))
                    }
                    guard a.count == 6, let token = a[1].int.map(UInt64.init), let seq = a[3].int,
                        let inputSeq = a[4].int
                    else { return nil }
                    let snapshot = SessionSnapshot(
                        state: a[2].bytes ?? [], seq: UInt64(seq), inputSeq: UInt64(inputSeq))
                    return .acquired(Lease(sessionID: sessionID, holder: holder, token: token), snapshot)
                })
        }
    }

    /// Lua: takes the lease off session KEYS[1] if its holder (before the last `|`) is ARGV[1].
    static let dropOwnLease = """
        local cur = redis.call('HGET', KEYS[1], 'lease')
        if cur and string.sub(cur, 1, string.find(cur, '|[^|]*$') - 1) == ARGV[1] then redis.call('HDEL', KEYS[1], 'lease') end
        return 1
        """

    /// Commits waiting to be sent and the batches in flight, per master (the client's loop only).
    let commitQueue: LoopBound<CommitQueue>

    /// Renewals asked for in this loop iteration, sent together when it ends (the client's loop only).
    private let pendingRenewals: LoopBound<[(lease: Lease, completion: (Result<Bool, StoreError>) -> Void)]>
    /// Stream checks asked for in this loop iteration, sent together at its end (`checkStreams`).
    let pendingStreamChecks: LoopBound<[StreamCheck]>
    /// What this loop knows of its holders' liveness keys (the client's loop only).
    private let liveness: LoopBound<Liveness>

    /// The liveness keys of this loop's holders: until when the leases under each are checked one by one
    /// (it was found missing), which this loop has set before, and each master's tag for them. One
    /// entry per holder and master (a loop has one holder): never dropped, since a key this loop set once
    /// and then finds missing means its leases there may have been taken.
    struct Liveness {
        var checkUntil: [String: UInt64] = [:]
        var setBefore: Set<String> = []
        var tags: [RedisAddress: String] = [:]
        /// The stream-liveness keys this loop set (one per master where it streams; `keepStreamsLive`).
        var streamLive: Set<String> = []
        /// Releases to send again, by session (`release`).
        var pendingReleases: [String: Lease] = [:]
        /// Releases sent and not yet answered, by session: how many, and a serial that each creation or
        /// acquisition of the session moves on (a release sent before it is not sent again).
        var releasesInFlight: [String: (count: Int, serial: UInt32)] = [:]
    }

    /// The most leases one `renewMany` call checks.
    static let renewBatch = 256

    /// The hash tag of the liveness keys on the master of session `id` (`ClusterKeys.liveTag`): the same on
    /// every node that knows the same slot map. Loop only.
    func liveTag(forSession id: String) -> String {
        guard client.isSharded, let master = client.master(forSlot: RedisClient.slot(of: keys.arg(id))) else {
            return ClusterKeys.unshardedLiveTag
        }
        if let tag = liveness.value.tags[master], client.master(forSlot: RedisSlot.of(tag)) == master { return tag }
        let tag = ClusterKeys.liveTag { client.master(forSlot: $0) == master } ?? ClusterKeys.unshardedLiveTag
        if liveness.value.tags.count >= 1024 { liveness.value.tags = [:] }
        liveness.value.tags[master] = tag
        return tag
    }

    /// A `SET` of liveness key `live`, sent at `sentAt`, was answered; `wasMissing`: it had lapsed. Then the
    /// leases under it are checked one by one for a lease TTL (`renew`) if this loop had set it before, or if
    /// a renewal found it missing: a loop's first key on a master is set by the creation or acquisition of a
    /// session there, so leases renewed under a key never set hold sessions whose slot moved to this master
    /// (another node may have taken them there). A creation's or an acquisition's first `SET` finds it
    /// missing as a matter of course: a holder is one loop of one run of a node (`node#nonce#loop`).
    private func confirmed(_ live: String, sentAt: UInt64, wasMissing: Bool, byRenewal: Bool = false) {
        if wasMissing, byRenewal || liveness.value.setBefore.contains(live) {
            liveness.value.checkUntil[live] = sentAt &+ UInt64(limits.leaseMilliseconds) * 1_000_000
            onLivenessLapsed(live)
        }
        liveness.value.setBefore.insert(live)
        sendPendingReleases()
    }

    /// A lease is held while its holder's liveness key on the session's master exists (`SessionScripts.acquire`):
    /// renewing leases is renewing that key, one `SET … GET` per holder, master and loop iteration, however
    /// many leases a loop renews in it (a renewal of each lease, every third of its TTL, grew Redis's work
    /// with every session). A lease is lost only to someone who found its holder's key gone, so
    /// while the key was there every lease under it is still ours. When the `SET` finds the key missing (this
    /// loop or Redis paused past the TTL, a failover lost it, or it is the first), each lease under it is
    /// checked once (`renewMany`: its session still names it) for a lease TTL, within which every keeper
    /// renews: a keeper learns of a takeover without waiting for its next commit. On a cluster the renewals
    /// of one iteration are grouped by the master of their sessions. Loop only.
    public func renew(_ lease: Lease, completion: @escaping (Result<Bool, StoreError>) -> Void) {
        guard queue((lease, completion), in: pendingRenewals) else { return }
        sendAtIterationEnd(
            pendingRenewals, key: { [keys] in keys.arg($0.lease.sessionID) },
            batch: .max,
            send: { [self] batch in
                // A loop's leases have one holder, the loop: grouped only if another one shows up (a caller
                // renewing for several holders through one store, as tests do). Grouping every renewal in
                // a dictionary was a large share of a renewal's cost (docs/BENCHMARKS.md).
                let first = batch[0].lease.holder
                guard batch.contains(where: { $0.lease.holder != first }) else {
                    return renewLive(batch, holder: first)
                }
                var byHolder: [String: [Renewal]] = [:]
                for r in batch { byHolder[r.lease.holder, default: []].append(r) }
                for (holder, renewals) in byHolder { renewLive(renewals, holder: holder) }
            })
    }

    /// Keeps `item` in `pending`: true for the first one of this loop iteration, whose caller then asks for
    /// them all to be sent (`sendAtIterationEnd`). The others cost an append: no closure is made for them
    /// (a closure's allocations on every lease renewal). Loop only.
    func queue<Item>(_ item: Item, in pending: LoopBound<[Item]>) -> Bool {
        if pending.value.isEmpty { pending.value.reserveCapacity(64) }
        pending.value.append(item)
        return pending.value.count == 1
    }

    /// Sends every item of `pending` (`queue`) once the iteration's callbacks are done: grouped by the master
    /// serving `key`, in calls of at most `batch` (`send`). How lease renewals and stream checks reach Redis
    /// together. Loop only.
    func sendAtIterationEnd<Item>(
        _ pending: LoopBound<[Item]>, key: @escaping (Item) -> RedisArg, batch: Int,
        send: @escaping ([Item]) -> Void
    ) {
        client.loop.runSoon { [self] in
            let items = pending.value
            pending.value = []
            for group in client.groupedByMaster(items, key: key) {
                for start in stride(from: 0, to: group.count, by: batch) {
                    send(Array(group[start..<min(start + batch, group.count)]))
                }
            }
        }
    }

    /// True, with `batch` sent again one slot at a time (`again`), when `r` is Redis redirecting a call over
    /// several slots (the slot map was out of date; nothing of it ran).
    func resentPerSlot<Item>(
        _ batch: [Item], after r: Result<RESPValue, RedisError>, key: (Item) -> RedisArg, again: ([Item]) -> Void
    ) -> Bool {
        guard case .failure(let e) = r else { return false }
        return resentPerSlot(batch, redirected: e.isSlotRedirect, key: key, again: again)
    }

    /// The same, when the caller already knows whether Redis redirected the call (`replicated`).
    func resentPerSlot<Item>(
        _ batch: [Item], redirected: Bool, key: (Item) -> RedisArg, again: ([Item]) -> Void
    ) -> Bool {
        guard redirected else { return false }
        let bySlot = RedisClient.groupedBySlot(batch, key: key)
        guard bySlot.count > 1 else { return false }
        for group in bySlot { again(group) }
        return true
    }

    typealias Renewal = (lease: Lease, completion: (Result<Bool, StoreError>) -> Void)

    /// A lease's value, "holder|token", as the argument the scripts compare it with.
    static func leaseValue(_ lease: Lease) -> RedisArg {
        let token = UInt(lease.token)
        let count = lease.holder.utf8.count + 1 + decimalDigits(token)
        return RedisArg(
            bytes: bytesWritten(count: count) { buffer in
                let written = UnsafeMutableBufferPointer(rebasing: buffer[...]).initialize(from: lease.holder.utf8).1
                buffer[written] = UInt8(ascii: "|")
                writeDecimal(token, into: buffer, endingAt: count)
                return count
            })
    }

    /// One `SET live 1 PX ttl GET` for `batch` (the renewals of one holder on one master in this iteration),
    /// on the lease lane; every renewal is answered true once it is, unless the leases under the key are
    /// being checked one by one (`renew`).
    private func renewLive(_ batch: [Renewal], holder: String) {
        let live = keys.live(holder: holder, tag: liveTag(forSession: batch[0].lease.sessionID))
        let sent = monotonicNanos()
        client.send(
            ["SET", RedisArg(live), "1", "PX", RedisArg(limits.leaseMilliseconds), "GET"], key: RedisArg(live),
            lane: .leases
        ) { [self] r in
            switch r {
            case .failure(let e):
                for item in batch { item.completion(.failure(e.storeError)) }
            case .success(let v):
                confirmed(live, sentAt: sent, wasMissing: v.isNull, byRenewal: true)
                if let until = liveness.value.checkUntil[live] {
                    if sent < until {
                        for start in stride(from: 0, to: batch.count, by: Self.renewBatch) {
                            check(
                                Array(batch[start..<min(start + Self.renewBatch, batch.count)]), splitOnRedirect: true)
                        }
                        return
                    }
                    liveness.value.checkUntil[live] = nil
                }
                for item in batch { item.completion(.success(true)) }
            }
        }
    }

    /// One `renewMany` call for `batch` (1 to `renewBatch` leases): each lease still named by its session?
    /// A batch over several slots that Redis redirects is sent again one slot at a time.
    private func check(_ batch: [Renewal], splitOnRedirect: Bool) {
        var args: [RedisArg] = []
        args.reserveCapacity(1 + 2 * batch.count)
        args.append(RedisArg(batch.count))
        for r in batch { args.append(keys.arg(r.lease.sessionID)) }
        for r in batch { args.append(Self.leaseValue(r.lease)) }
        client.evalScript(SessionScripts.renewMany, keys: [args[1]], args: args, lane: .leases) { [self] r in
            if splitOnRedirect,
                resentPerSlot(
                    batch, after: r, key: { keys.arg($0.lease.sessionID) },
                    again: { check($0, splitOnRedirect: false) })
            {
                return
            }
            let answers = r.store { v -> [Bool]? in
                guard let a = v.array, a.count == batch.count else { return nil }
                return a.map { $0.int == 1 }
            }
            for (i, item) in batch.enumerated() { item.completion(answers.map { $0[i] }) }
        }
    }

    /// On the command connection, not the lease lane: a hand-over followed by this loop acquiring the session
    /// again must reach Redis in that order (an `acquire` by the holder itself keeps its token; a release
    /// that came after it deleted the lease the new run was under, and another holder took the session).
    ///
    /// A release Redis did not answer is sent again once a liveness `SET` of this loop is answered (Redis is
    /// back), unless this loop acquired the session again meanwhile: a lease is held while its holder's
    /// liveness key lives, and the key lives on for the loop's other sessions, so a lease let go without a
    /// release would stay held by a loop that no longer runs its session (`pendingReleases`).
    public func release(_ lease: Lease, completion: @escaping (Result<Bool, StoreError>) -> Void) {
        let id = lease.sessionID
        sendCommitsBefore(sessionID: id)
        liveness.value.pendingReleases[id] = nil
        liveness.value.releasesInFlight[id, default: (0, 0)].count += 1
        let serial = liveness.value.releasesInFlight[id]?.serial ?? 0
        client.evalScript(SessionScripts.release, keys: [keys.arg(id)], args: [Self.leaseValue(lease)]) {
            [self] r in
            // Still wanted unless this loop created or acquired the session after sending it (`stillWanted`).
            // The entry is there: counted in before the send, counted out only here.
            let inFlight = liveness.value.releasesInFlight[id, default: (1, serial)]
            let wanted = inFlight.serial == serial
            liveness.value.releasesInFlight[id] = inFlight.count > 1 ? (inFlight.count - 1, inFlight.serial) : nil
            if case .failure = r, wanted, liveness.value.pendingReleases.count < Self.maxPendingReleases {
                liveness.value.pendingReleases[id] = lease
            }
            completion(r.store { $0.int.map { $0 == 1 } })
        }
    }

    /// This loop creates or acquires session `id`: a release of it sent before, or waiting to be sent again,
    /// must not be sent again after this (with the same token, it would end the new run). Loop only.
    private func stillWanted(_ id: String) {
        liveness.value.pendingReleases[id] = nil
        liveness.value.releasesInFlight[id]?.serial &+= 1
    }

    /// The most releases kept to send again (a loop's sessions, left while Redis was away).
    static let maxPendingReleases = 200_000

    /// Sends again the releases Redis did not answer (`release`), a `renewBatch` at a time. Loop only.
    private func sendPendingReleases() {
        guard !liveness.value.pendingReleases.isEmpty else { return }
        for (id, lease) in liveness.value.pendingReleases.prefix(Self.renewBatch) {
            liveness.value.pendingReleases[id] = nil
            release(lease) { _ in }
        }
    }

    public func load(sessionID: String, completion: @escaping (Result<SessionSnapshot, StoreError>) -> Void) {
        client.evalScript(SessionScripts.load, keys: [RedisArg(keys.session(sessionID))], args: []) { r in
            if case .success(.array(let a)) = r, a.count == 3, a[1].isNull { return completion(.failure(.gone)) }
            completion(
                r.store { v -> SessionSnapshot? in
                    guard let a = v.array, a.count == 3, let seq = a[1].int, let input = a[2].int else { return nil }
                    return SessionSnapshot(state: a[0].bytes ?? [], seq: UInt64(seq), inputSeq: UInt64(input))
                })
        }
    }

    /// With `replicaAcks` > 0 the answer is used only once replicas confirmed a write made after every
    /// commit it shows (`.notReplicated` otherwise: the caller tries again).
    public func replay(
        sessionID: String, after lastEventID: UInt64, limit: Int,
        completion: @escaping (Result<ReplayResult, StoreError>) -> Void
    ) {
        replicated(
            SessionScripts.replay, keys: [RedisArg(keys.session(sessionID)), RedisArg(keys.events(sessionID))],
            args: [RedisArg(String(lastEventID)), RedisArg(limit), replicaAcks > 0 ? "1" : "0"]
        ) { r in
            completion(
                r.storeMap { v -> ReplayResult? in
                    guard let a = v.array, let kind = a.first?.int else { return nil }
                    switch kind {
                    case 1: return .upToDate
                    case 0: return .snapshotNeeded
                    default:
                        guard a.count == 2, let entries = a[1].array else { return nil }
                        var events: [StoredEvent] = []
                        for entry in entries {
                            guard let e = entry.array, e.count == 2, let sid = e[0].string,
                                let id = sid.split(separator: "-").first.flatMap({ UInt64($0) }),
                                let fields = e[1].array, fields.count == 2, let payload = fields[1].bytes
                            else { return nil }
                            events.append(StoredEvent(id: id, payload: payload))
                        }
                        return .events(events)
                    }
                })
        }
    }

    /// With `replicaAcks` > 0 a key found is answered only once replicas confirm the commit that recorded
    /// it (`.notReplicated` otherwise): a retry is acknowledged exactly when a first attempt would be.
    public func inputSeq(
        sessionID: String, idempotencyKey: String, completion: @escaping (Result<UInt64?, StoreError>) -> Void
    ) {
        let key = RedisArg(keys.idempotency(sessionID, idempotencyKey))
        let parse = { (v: RESPValue) -> UInt64?? in v.isNull ? .some(nil) : v.int.map { .some(UInt64($0)) } }
        client.send(["GET", key], key: key) { [self] r in
            guard replicaAcks > 0, case .success(let v) = r, !v.isNull else { return completion(r.store(parse)) }
            replicated(SessionScripts.acknowledgedInputSeq, keys: [key], args: []) { r in
                completion(r.storeMap(parse))
            }
        }
    }

    /// KEYS of the scripts that delete a session: its hash (with its lease), history and set of open streams.
    private func everyKey(of id: String) -> [RedisArg] {
        [RedisArg(keys.session(id)), RedisArg(keys.events(id)), RedisArg(keys.streams(id))]
    }

    public func delete(_ lease: Lease, completion: @escaping (Result<Void, StoreError>) -> Void) {
        let id = lease.sessionID
        sendCommitsBefore(sessionID: id)
        replicated(
            SessionScripts.delete,
            keys: everyKey(of: id),
            args: [RedisArg(Int(lease.token))]
        ) { r in completion(r.storeMap { _ in () }) }
    }

    /// Deletes the session of `lease` if it is unused across the cluster (`SessionScripts.deleteIfUnused`):
    /// true if deleted; false if it was used (an input, a stream on any node), and nothing changed. Reads
    /// (`load`) are no use. Like `delete`, confirmed by the replicas when `replicaAcks` > 0.
    public func deleteIfUnused(_ lease: Lease, completion: @escaping (Result<Bool, StoreError>) -> Void) {
        let id = lease.sessionID
        sendCommitsBefore(sessionID: id)
        replicated(SessionScripts.deleteIfUnused, keys: everyKey(of: id), args: [RedisArg(Int(lease.token))]) { r in
            completion(r.storeMap { $0.int.map { $0 == 1 } })
        }
    }

    public func admitStream(
        sessionID: String, member: String, limit: Int, ttlMilliseconds: Int,
        completion: @escaping (Result<Bool, StoreError>) -> Void
    ) {
        client.evalScript(
            SessionScripts.admitStream,
            keys: [
                RedisArg(keys.session(sessionID)), RedisArg(keys.streams(sessionID)), RedisArg(keys.events(sessionID)),
            ],
            args: [
                RedisArg(member), RedisArg(limit), RedisArg(ttlMilliseconds), RedisArg(limits.expirySeconds),
                RedisArg(keys.streamLivePrefix(tag: streamLiveKey(member: member, sessionID: sessionID).tag)),
                RedisArg(streamLivenessMilliseconds),
            ]
        ) { r in completion(r.store { $0.int.map { $0 == 1 } }) }
    }

    /// The loop a stream member names (`<holder>/<n>`; the whole name if it has no `/`).
    static func holder(ofMember member: String) -> Substring {
        guard let slash = member.lastIndex(of: "/") else { return member[...] }
        return member[..<slash]
    }

    /// The stream-liveness key of `member`'s loop on the master of session `id`, and that master's hash tag;
    /// the key remembered (on the loop) for `keepStreamsLive`.
    func streamLiveKey(member: String, sessionID id: String) -> (tag: String, key: String) {
        let tag = liveTag(forSession: id)
        let key = keys.streamLive(holder: String(Self.holder(ofMember: member)), tag: tag)
        if client.loop.inEventLoop {
            if liveness.value.streamLive.count >= 1024 { liveness.value.streamLive = [] }
            liveness.value.streamLive.insert(key)
        }
        return (tag, key)
    }

    /// Renews every stream-liveness key this loop set (`ClusterKeys.streamLive`): one `SET … PX` per master
    /// where it streams, once per stream-check interval, instead of a new deadline for each stream. A key
    /// that lapsed (Redis lost it, or this loop paused for its whole lifetime) is set again, and its members
    /// count again. Loop only.
    public func keepStreamsLive() {
        for key in liveness.value.streamLive {
            let k = RedisArg(key)
            client.send(["SET", k, "1", "PX", RedisArg(streamLivenessMilliseconds)], key: k, lane: .leases) { _ in }
        }
    }

    /// Deletes every liveness and stream-liveness key this loop set (shutdown, once its sessions were handed
    /// over): the streaming nodes that last saw this loop hold a session check it at their next pass, not a
    /// lease TTL later, and this loop's streams stop counting at once. On the command connection, after the
    /// releases. Loop only.
    public func dropLiveness() {
        for key in liveness.value.setBefore.union(liveness.value.streamLive) {
            let k = RedisArg(key)
            client.send(["DEL", k], key: k) { _ in }
        }
    }

    /// The sessions in `sessionsByHolder` (by the lease holder their last check named) whose holder's
    /// liveness key on their master is gone, each handed to `gone`: one `holdersAlive` per master. A streaming
    /// loop asks this once per slice, and checks one by one only those sessions
    /// (`ClusterNode.startOrphanChecks`). Redis not answering hands over none: the next slice asks again.
    /// Loop only.
    public func findSessionsOfGoneHolders(_ sessionsByHolder: [String: [String]], gone: @escaping (String) -> Void) {
        var byTag: [String: [String: [String]]] = [:]
        for (holder, ids) in sessionsByHolder {
            for id in ids { byTag[liveTag(forSession: id), default: [:]][holder, default: []].append(id) }
        }
        for sessions in byTag.values {
            let holders = Array(sessions.keys)
            guard let anyID = sessions[holders[0]]?.first else { continue }
            holdersAlive(holders, forSession: anyID) { alive in
                guard let alive else { return }
                for (holder, isAlive) in zip(holders, alive) where !isAlive {
                    for id in sessions[holder] ?? [] { gone(id) }
                }
            }
        }
    }

    /// Whether each of `holders` (loops of any node) is alive on the master of session `id`: its liveness key
    /// there exists (one `MGET`: the keys share a hash tag, so one slot). nil if Redis did not answer. Loop only.
    public func holdersAlive(_ holders: [String], forSession id: String, completion: @escaping ([Bool]?) -> Void) {
        let tag = liveTag(forSession: id)
        var command: [RedisArg] = ["MGET"]
        command.reserveCapacity(1 + holders.count)
        for h in holders { command.append(RedisArg(keys.live(holder: h, tag: tag))) }
        client.send(command, key: command[1]) { r in
            guard case .success(let v) = r, let a = v.array, a.count == holders.count else { return completion(nil) }
            completion(a.map { !$0.isNull })
        }
    }

    public func renewStreams(
        sessionID: String, members: [String], ttlMilliseconds: Int,
        completion: @escaping (Result<String?, StoreError>) -> Void
    ) {
        checkStreams(sessionID: sessionID, members: members, ttlMilliseconds: ttlMilliseconds) { r in
            completion(r.map(\.holder))
        }
    }

    public func releaseStream(
        sessionID: String, member: String, completion: @escaping (Result<Void, StoreError>) -> Void
    ) {
        let key = RedisArg(keys.streams(sessionID))
        client.send(["ZREM", key, RedisArg(member)], key: key) { r in
            completion(r.store { _ in () })
        }
    }
}
