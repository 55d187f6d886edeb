import Primitives

/// The `SessionStore` of single-process mode and of the session layer's tests: everything in this
/// process's memory, with the same fencing, id and bound rules as the Redis store.
///
/// Threading: thread-safe (one lock); one instance may be shared by every loop. Completions run
/// synchronously, before the call returns. Time comes from the injected `now` (milliseconds), so
/// lease and expiry tests need not wait.
public final class InMemorySessionStore: SessionStore, Sendable {
    private struct Record {
        var snapshot: SessionSnapshot
        var fence: UInt64
        var leaseHolder: String?
        var leaseUntil: Int64 = 0
        var events: [StoredEvent] = []
        var idempotency: [String: (inputSeq: UInt64, until: Int64)] = [:]
        var expiresAt: Int64
        /// Open event streams, by member: their deadlines (at most the admission limit, plus renewed ones).
        var streams: [String: Int64] = [:]
    }

    /// The bounds applied.
    public let limits: SessionStoreLimits
    private let now: @Sendable () -> Int64
    private let records = Lock<[String: Record]>([:])

    /// A store with `limits`, reading time (in milliseconds) from `now`.
    public init(limits: SessionStoreLimits = SessionStoreLimits(), now: @escaping @Sendable () -> Int64) {
        self.limits = limits
        self.now = now
    }

    /// Sessions currently stored (expired ones are dropped lazily when touched).
    public var count: Int { records.withLock { $0.count } }

    /// Runs `body` on the live record of `id` (nil if none or expired), under the lock.
    private func withRecord<R>(_ id: String, _ body: (inout Record?, Int64) -> R) -> R {
        let t = now()
        return records.withLock { all in
            var r = all[id]
            if let x = r, x.expiresAt <= t { r = nil }
            let result = body(&r, t)
            all[id] = r
            return result
        }
    }

    public func create(
        sessionID: String, holder: String, state: [UInt8], completion: @escaping (Result<Lease, StoreError>) -> Void
    ) {
        if state.count > limits.maxStateBytes { return completion(.failure(.tooLarge(state.count))) }
        let result: Result<Lease, StoreError> = withRecord(sessionID) { r, t in
            guard r == nil else { return .failure(.unavailable("session exists")) }
            r = Record(
                snapshot: SessionSnapshot(state: state, seq: 0, inputSeq: 0), fence: 1, leaseHolder: holder,
                leaseUntil: t + Int64(limits.leaseMilliseconds), expiresAt: t + Int64(limits.expirySeconds) * 1000)
            return .success(Lease(sessionID: sessionID, holder: holder, token: 1))
        }
        completion(result)
    }

    public func acquire(
        sessionID: String, holder: String, completion: @escaping (Result<LeaseGrant, StoreError>) -> Void
    ) {
        acquire(sessionID: sessionID, holder: holder, newToken: false, completion: completion)
    }

    public func acquire(
        sessionID: String, holder: String, newToken: Bool,
        completion: @escaping (Result<LeaseGrant, StoreError>) -> Void
    ) {
        let result: Result<LeaseGrant, StoreError> = withRecord(sessionID) { r, t in
            guard var x = r else { return .failure(.gone) }
            defer { r = x }
            if let h = x.leaseHolder, x.leaseUntil > t, h != holder {
                return .success(.heldBy(h, remainingMilliseconds: Int(x.leaseUntil - t)))
            }
            if newToken || x.leaseHolder != holder || x.leaseUntil <= t {
                x.fence += 1
                x.leaseHolder = holder
            }
            x.leaseUntil = t + Int64(limits.leaseMilliseconds)
            x.expiresAt = t + Int64(limits.expirySeconds) * 1000
            return .success(.acquired(Lease(sessionID: sessionID, holder: holder, token: x.fence), x.snapshot))
        }
        completion(result)
    }

    public func renew(_ lease: Lease, completion: @escaping (Result<Bool, StoreError>) -> Void) {
        let ok: Bool = withRecord(lease.sessionID) { r, t in
            guard let x = r, x.fence == lease.token, x.leaseHolder == lease.holder, x.leaseUntil > t else {
                return false
            }
            r?.leaseUntil = t + Int64(limits.leaseMilliseconds)
            return true
        }
        completion(.success(ok))
    }

    public func release(_ lease: Lease, completion: @escaping (Result<Bool, StoreError>) -> Void) {
        let ok: Bool = withRecord(lease.sessionID) { r, t in
            guard let x = r, x.fence == lease.token, x.leaseHolder == lease.holder, x.leaseUntil > t else {
                return false
            }
            r?.leaseHolder = nil
            r?.leaseUntil = 0
            return true
        }
        completion(.success(ok))
    }

    public func commit(_ commit: SessionCommit, completion: @escaping (Result<CommitResult, StoreError>) -> Void) {
        if let e = limits.check(commit) { return completion(.failure(e)) }
        let result: Result<CommitResult, StoreError> = withRecord(commit.lease.sessionID) { r, t in
            guard var x = r else { return .failure(.gone) }
            guard x.fence == commit.lease.token else { return .failure(.fenced) }
            var ids: [UInt64] = []
            for payload in commit.events {
                let id = max(x.snapshot.seq + 1, commit.lease.firstEventID)
                x.snapshot.seq = id
                ids.append(id)
                x.events.append(StoredEvent(id: id, payload: payload))
            }
            if x.events.count > limits.historyEvents { x.events.removeFirst(x.events.count - limits.historyEvents) }
            x.snapshot.state = commit.state
            var inputSeq: UInt64?
            if commit.isInput {
                x.snapshot.inputSeq += 1
                inputSeq = x.snapshot.inputSeq
                if let key = commit.idempotencyKey {
                    x.idempotency = x.idempotency.filter { $0.value.until > t }
                    x.idempotency[key] = (x.snapshot.inputSeq, t + Int64(limits.idempotencySeconds) * 1000)
                }
            }
            if commit.renewsExpiry { x.expiresAt = t + Int64(limits.expirySeconds) * 1000 }
            r = x
            return .success(CommitResult(eventIDs: ids, inputSeq: inputSeq))
        }
        completion(result)
    }

    public func load(sessionID: String, completion: @escaping (Result<SessionSnapshot, StoreError>) -> Void) {
        let s: SessionSnapshot? = withRecord(sessionID) { r, _ in r?.snapshot }
        completion(s.map { .success($0) } ?? .failure(.gone))
    }

    public func replay(
        sessionID: String, after lastEventID: UInt64, limit: Int,
        completion: @escaping (Result<ReplayResult, StoreError>) -> Void
    ) {
        let result: Result<ReplayResult, StoreError> = withRecord(sessionID) { r, _ in
            guard let x = r else { return .failure(.gone) }
            if lastEventID == x.snapshot.seq { return .success(.upToDate) }
            guard let i = x.events.firstIndex(where: { $0.id == lastEventID }) else { return .success(.snapshotNeeded) }
            let after = x.events[(i + 1)...]
            return .success(after.count >= limit ? .snapshotNeeded : .events(Array(after)))
        }
        completion(result)
    }

    public func inputSeq(
        sessionID: String, idempotencyKey: String, completion: @escaping (Result<UInt64?, StoreError>) -> Void
    ) {
        let seq: UInt64? = withRecord(sessionID) { r, t in
            guard let entry = r?.idempotency[idempotencyKey], entry.until > t else { return nil }
            return entry.inputSeq
        }
        completion(.success(seq))
    }

    public func delete(_ lease: Lease, completion: @escaping (Result<Void, StoreError>) -> Void) {
        let result: Result<Void, StoreError> = withRecord(lease.sessionID) { r, _ in
            guard let x = r else { return .failure(.gone) }
            guard x.fence == lease.token else { return .failure(.fenced) }
            r = nil
            return .success(())
        }
        completion(result)
    }

    public func admitStream(
        sessionID: String, member: String, limit: Int, ttlMilliseconds: Int,
        completion: @escaping (Result<Bool, StoreError>) -> Void
    ) {
        let result: Result<Bool, StoreError> = withRecord(sessionID) { r, t in
            guard var x = r else { return .failure(.gone) }
            defer { r = x }
            x.streams = x.streams.filter { $0.value > t }
            if x.streams[member] == nil, x.streams.count >= limit { return .success(false) }
            x.streams[member] = t + Int64(ttlMilliseconds)
            x.expiresAt = t + Int64(limits.expirySeconds) * 1000  // an open stream keeps the session alive
            return .success(true)
        }
        completion(result)
    }

    public func renewStreams(
        sessionID: String, members: [String], ttlMilliseconds: Int,
        completion: @escaping (Result<String?, StoreError>) -> Void
    ) {
        checkStreams(sessionID: sessionID, members: members, ttlMilliseconds: ttlMilliseconds) { r in
            completion(r.map(\.holder))
        }
    }

    public func checkStreams(
        sessionID: String, members: [String], ttlMilliseconds: Int, renewsExpiry: Bool,
        completion: @escaping (Result<StreamsCheck, StoreError>) -> Void
    ) {
        let result: Result<StreamsCheck, StoreError> = withRecord(sessionID) { r, t in
            guard var x = r else { return .failure(.gone) }
            defer { r = x }
            x.streams = x.streams.filter { $0.value > t }
            for m in members { x.streams[m] = t + Int64(ttlMilliseconds) }
            if renewsExpiry { x.expiresAt = t + Int64(limits.expirySeconds) * 1000 }
            return .success(StreamsCheck(holder: x.leaseUntil > t ? x.leaseHolder : nil, seq: x.snapshot.seq))
        }
        completion(result)
    }

    public func releaseStream(
        sessionID: String, member: String, completion: @escaping (Result<Void, StoreError>) -> Void
    ) {
        withRecord(sessionID) { r, _ in _ = r?.streams.removeValue(forKey: member) }
        completion(.success(()))
    }
}
