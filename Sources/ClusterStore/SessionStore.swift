/// The durable, shared home of sessions in cluster mode: ownership leases with fencing, fenced
/// commits of events + state, replay for reconnecting streams, idempotency keys.
///
/// Threading: an instance is bound to one event loop (the Redis one owns that loop's connection):
/// call it on that loop only; completions run on that loop, possibly before the call returns
/// (the in-memory store completes synchronously).
///
/// Guarantees every implementation keeps (the shared conformance tests check them):
/// - at most one holder of a session's lease at a time; each acquisition by a new holder returns
///   a larger token than any before;
/// - a commit is applied only if its token is the session's current one (else `.fenced`), and
///   then entirely: events appended and published, state written, `inputSeq` bumped, together;
/// - event ids of a session strictly increase and are never reused; a new holder's ids start
///   above `token << 32` (see `Lease.firstEventID`), so they jump forward on takeover;
/// - every stored thing is bounded (history length, value sizes) and expires after the session
///   idle time-out without writes.
public protocol SessionStore: AnyObject {
    /// Creates a session with its initial state and gives `holder` its lease (token 1).
    /// Fails with `.unavailable` if it exists already (ids are random: that is a bug or an attack).
    func create(
        sessionID: String, holder: String, state: [UInt8], completion: @escaping (Result<Lease, StoreError>) -> Void)

    /// Acquires the lease of an existing session (`.gone` if none), or tells who holds it.
    /// If `holder` holds it already, it is renewed and its token kept.
    func acquire(
        sessionID: String, holder: String, completion: @escaping (Result<LeaseGrant, StoreError>) -> Void)

    /// Extends the lease if `lease` is still the current one; false if it was lost.
    func renew(_ lease: Lease, completion: @escaping (Result<Bool, StoreError>) -> Void)

    /// Gives the lease up at once (graceful hand-over) if `lease` is still current.
    func release(_ lease: Lease, completion: @escaping (Result<Bool, StoreError>) -> Void)

    /// Applies `commit` atomically if its lease's token is current (else `.fenced`).
    func commit(_ commit: SessionCommit, completion: @escaping (Result<CommitResult, StoreError>) -> Void)

    /// The committed snapshot (`.gone` if none).
    func load(sessionID: String, completion: @escaping (Result<SessionSnapshot, StoreError>) -> Void)

    /// The committed events after `lastEventID`, at most `limit` (more than that: `.snapshotNeeded`).
    func replay(
        sessionID: String, after lastEventID: UInt64, limit: Int,
        completion: @escaping (Result<ReplayResult, StoreError>) -> Void)

    /// The `inputSeq` an `Idempotency-Key` was recorded with in the last 5 minutes, or nil.
    func inputSeq(
        sessionID: String, idempotencyKey: String, completion: @escaping (Result<UInt64?, StoreError>) -> Void)

    /// Deletes the session if `lease` is current (its streams learn it from the `deleted` event).
    func delete(_ lease: Lease, completion: @escaping (Result<Void, StoreError>) -> Void)
}
