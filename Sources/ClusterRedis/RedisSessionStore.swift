import ClusterStore
import EventHTTP
import RedisClient

/// The `SessionStore` of cluster mode: sessions in Redis (see `ClusterKeys` and `SessionScripts`).
///
/// Threading: bound to its connection's loop; call it there, completions run there.
/// Each operation is one round trip (one script or one command).
/// Stream deadlines are on Redis's clock (`TIME`), one clock for every node.
public final class RedisSessionStore: SessionStore, Sendable {
    /// The loop-bound connection used.
    public let connection: RedisConnection
    /// The bounds applied.
    public let limits: SessionStoreLimits
    /// The key layout.
    public let keys: ClusterKeys

    /// A store on `connection`, with `limits`, under `keys`.
    public init(connection: RedisConnection, limits: SessionStoreLimits = SessionStoreLimits(), keys: ClusterKeys) {
        self.connection = connection
        self.limits = limits
        self.keys = keys
        pendingRenewals = LoopBound([], loop: connection.loop)
    }

    public func create(
        sessionID: String, holder: String, state: [UInt8], completion: @escaping (Result<Lease, StoreError>) -> Void
    ) {
        if state.count > limits.maxStateBytes { return completion(.failure(.tooLarge(state.count))) }
        connection.evalScript(
            SessionScripts.create, keys: [RedisArg(keys.session(sessionID)), RedisArg(keys.lease(sessionID))],
            args: [
                RedisArg(holder), RedisArg(bytes: state), RedisArg(limits.leaseMilliseconds),
                RedisArg(limits.idleTimeout),
            ]
        ) { r in
            completion(r.store { _ in Lease(sessionID: sessionID, holder: holder, token: 1) })
        }
    }

    public func acquire(
        sessionID: String, holder: String, completion: @escaping (Result<LeaseGrant, StoreError>) -> Void
    ) {
        connection.evalScript(
            SessionScripts.acquire,
            keys: [
                RedisArg(keys.session(sessionID)), RedisArg(keys.lease(sessionID)), RedisArg(keys.events(sessionID)),
            ],
            args: [RedisArg(holder), RedisArg(limits.leaseMilliseconds), RedisArg(limits.idleTimeout)]
        ) { r in
            completion(
                r.store { v -> LeaseGrant? in
                    guard let a = v.array, a.count >= 3 else { return nil }
                    if a[0].int == 0 {
                        return .heldBy(a[1].string ?? "", remainingMilliseconds: Int(a[2].int ?? 0))
                    }
                    guard a.count == 5, let token = a[1].int.map(UInt64.init), let seq = a[3].int,
                        let inputSeq = a[4].int
                    else { return nil }
                    let snapshot = SessionSnapshot(
                        state: a[2].bytes ?? [], seq: UInt64(seq), inputSeq: UInt64(inputSeq))
                    return .acquired(Lease(sessionID: sessionID, holder: holder, token: token), snapshot)
                })
        }
    }

    /// Renewals asked for in this loop iteration, sent together when it ends (the connection's loop only).
    private let pendingRenewals: LoopBound<[(lease: Lease, completion: (Result<Bool, StoreError>) -> Void)]>

    /// The most leases one `renewMany` call carries.
    static let renewBatch = 256

    /// Renewals asked for in the same loop iteration go to Redis as one script call (`renewMany`), not
    /// one each: a loop keeping thousands of sessions renews them in slices (`LeaseKeeper`'s timers
    /// grouped by the caller), and Redis's per-call cost (~20 µs of Lua set-up) is paid once per slice.
    /// Off the loop (tests), one call at once.
    public func renew(_ lease: Lease, completion: @escaping (Result<Bool, StoreError>) -> Void) {
        guard connection.loop.inEventLoop else { return renewNow([(lease, completion)]) }
        pendingRenewals.value.append((lease, completion))
        guard pendingRenewals.value.count == 1 else { return }
        connection.loop.runSoon { [self] in
            let batch = pendingRenewals.value
            pendingRenewals.value = []
            for start in stride(from: 0, to: batch.count, by: Self.renewBatch) {
                renewNow(Array(batch[start..<min(start + Self.renewBatch, batch.count)]))
            }
        }
    }

    /// One `renewMany` call for `batch` (1 to `renewBatch` leases), each completion with its own answer.
    private func renewNow(_ batch: [(lease: Lease, completion: (Result<Bool, StoreError>) -> Void)]) {
        connection.evalScript(
            SessionScripts.renewMany, keys: batch.map { RedisArg(keys.lease($0.lease.sessionID)) },
            args: [RedisArg(limits.leaseMilliseconds)] + batch.map { RedisArg("\($0.lease.holder)|\($0.lease.token)") }
        ) { r in
            let answers = r.store { v -> [Bool]? in
                guard let a = v.array, a.count == batch.count else { return nil }
                return a.map { $0.int == 1 }
            }
            for (i, item) in batch.enumerated() { item.completion(answers.map { $0[i] }) }
        }
    }

    public func release(_ lease: Lease, completion: @escaping (Result<Bool, StoreError>) -> Void) {
        connection.evalScript(
            SessionScripts.release, keys: [RedisArg(keys.lease(lease.sessionID))],
            args: [RedisArg("\(lease.holder)|\(lease.token)")]
        ) { r in completion(r.store { $0.int.map { $0 == 1 } }) }
    }

    public func commit(_ commit: SessionCommit, completion: @escaping (Result<CommitResult, StoreError>) -> Void) {
        if let e = limits.check(commit) { return completion(.failure(e)) }
        let id = commit.lease.sessionID
        let key = commit.idempotencyKey
        var args: [RedisArg] = [
            RedisArg(Int(commit.lease.token)), RedisArg(bytes: commit.state), RedisArg(limits.historyEvents),
            RedisArg(limits.idleTimeout), commit.isInput ? "1" : "0", RedisArg(limits.idempotencySeconds),
            commit.isInput && key != nil ? "1" : "0", RedisArg(keys.channel(id)), RedisArg(commit.events.count),
        ]
        args += commit.events.map { RedisArg(bytes: $0) }
        connection.evalScript(
            SessionScripts.commit,
            keys: [
                RedisArg(keys.session(id)), RedisArg(keys.events(id)), RedisArg(keys.idempotency(id, key ?? "")),
            ],
            args: args
        ) { r in
            completion(
                r.store { v -> CommitResult? in
                    guard let a = v.array, a.count == 2, let input = a[0].int, let ids = a[1].array else { return nil }
                    let eventIDs = ids.compactMap { $0.string.flatMap { UInt64($0) } }
                    guard eventIDs.count == ids.count else { return nil }
                    return CommitResult(eventIDs: eventIDs, inputSeq: input < 0 ? nil : UInt64(input))
                })
        }
    }

    public func load(sessionID: String, completion: @escaping (Result<SessionSnapshot, StoreError>) -> Void) {
        connection.send(["HMGET", RedisArg(keys.session(sessionID)), "state", "seq", "inputSeq"]) { r in
            if case .success(.array(let a)) = r, a.count == 3, a[1].isNull { return completion(.failure(.gone)) }
            completion(
                r.store { v -> SessionSnapshot? in
                    guard let a = v.array, a.count == 3, let seq = a[1].int, let input = a[2].int else { return nil }
                    return SessionSnapshot(state: a[0].bytes ?? [], seq: UInt64(seq), inputSeq: UInt64(input))
                })
        }
    }

    public func replay(
        sessionID: String, after lastEventID: UInt64, limit: Int,
        completion: @escaping (Result<ReplayResult, StoreError>) -> Void
    ) {
        connection.evalScript(
            SessionScripts.replay, keys: [RedisArg(keys.session(sessionID)), RedisArg(keys.events(sessionID))],
            args: [RedisArg(String(lastEventID)), RedisArg(limit)]
        ) { r in
            completion(
                r.store { v -> ReplayResult? in
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

    public func inputSeq(
        sessionID: String, idempotencyKey: String, completion: @escaping (Result<UInt64?, StoreError>) -> Void
    ) {
        connection.send(["GET", RedisArg(keys.idempotency(sessionID, idempotencyKey))]) { r in
            completion(r.store { v -> UInt64?? in v.isNull ? .some(nil) : v.int.map { .some(UInt64($0)) } })
        }
    }

    public func delete(_ lease: Lease, completion: @escaping (Result<Void, StoreError>) -> Void) {
        let id = lease.sessionID
        connection.evalScript(
            SessionScripts.delete,
            keys: [
                RedisArg(keys.session(id)), RedisArg(keys.events(id)), RedisArg(keys.lease(id)),
                RedisArg(keys.streams(id)),
            ],
            args: [RedisArg(Int(lease.token))]
        ) { r in completion(r.store { _ in () }) }
    }

    public func admitStream(
        sessionID: String, member: String, limit: Int, ttlMilliseconds: Int,
        completion: @escaping (Result<Bool, StoreError>) -> Void
    ) {
        connection.evalScript(
            SessionScripts.admitStream, keys: [RedisArg(keys.session(sessionID)), RedisArg(keys.streams(sessionID))],
            args: [RedisArg(member), RedisArg(limit), RedisArg(ttlMilliseconds), RedisArg(limits.idleTimeout)]
        ) { r in completion(r.store { $0.int.map { $0 == 1 } }) }
    }

    public func renewStreams(
        sessionID: String, members: [String], ttlMilliseconds: Int,
        completion: @escaping (Result<String?, StoreError>) -> Void
    ) {
        connection.evalScript(
            SessionScripts.renewStreams,
            keys: [
                RedisArg(keys.session(sessionID)), RedisArg(keys.events(sessionID)),
                RedisArg(keys.streams(sessionID)), RedisArg(keys.lease(sessionID)),
            ],
            args: [RedisArg(ttlMilliseconds), RedisArg(limits.idleTimeout)] + members.map { RedisArg($0) }
        ) { r in completion(r.store { v -> String?? in v.isNull ? .some(nil) : v.string.map { .some($0) } }) }
    }

    public func releaseStream(
        sessionID: String, member: String, completion: @escaping (Result<Void, StoreError>) -> Void
    ) {
        connection.send(["ZREM", RedisArg(keys.streams(sessionID)), RedisArg(member)]) { r in
            completion(r.store { _ in () })
        }
    }
}
