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
///   idle time-out without writes;
/// - a session's open event streams, counted across every node, are at most the limit each admission
///   names: an admitted stream counts until it is released or its deadline (renewed while it is open)
///   passes, so the streams of a node that died (`kill -9`) stop counting by themselves.
public protocol SessionStore: AnyObject {
    /// Creates a session with its initial state and gives `holder` its lease (token 1).
    /// Fails with `.unavailable` if it exists already (ids are random: that is a bug or an attack).
    func create(
        sessionID: String, holder: String, state: [UInt8], completion: @escaping (Result<Lease, StoreError>) -> Void)

    /// Acquires the lease of an existing session (`.gone` if none), or tells who holds it.
    /// If `holder` holds it already, it is renewed and its token kept.
    func acquire(
        sessionID: String, holder: String, completion: @escaping (Result<LeaseGrant, StoreError>) -> Void)

    /// `acquire`, but with `newToken` a holder that holds the lease already gets a new token too, as if
    /// it took the session over: for a holder that no longer runs the session and may have shown events
    /// (ids, `inputSeq`s) that a failover then lost, so that it never numbers new events from a rolled
    /// back `seq` under the token it showed them with. The default (a store without it) is `acquire`.
    func acquire(
        sessionID: String, holder: String, newToken: Bool,
        completion: @escaping (Result<LeaseGrant, StoreError>) -> Void)

    /// Extends the lease if `lease` is still the current one; false if it was lost. A store may extend every
    /// lease of a holder at once (Redis: the holder's liveness key on the session's master), and then answers
    /// false once it has seen that the holder's liveness lapsed and the lease names someone else.
    func renew(_ lease: Lease, completion: @escaping (Result<Bool, StoreError>) -> Void)

    /// Gives the lease up at once (graceful hand-over) if `lease` is still current.
    func release(_ lease: Lease, completion: @escaping (Result<Bool, StoreError>) -> Void)

    /// Applies `commit` atomically if its lease's token is current (else `.fenced`).
    func commit(_ commit: SessionCommit, completion: @escaping (Result<CommitResult, StoreError>) -> Void)

    /// The committed snapshot (`.gone` if none).
    func load(sessionID: String, completion: @escaping (Result<SessionSnapshot, StoreError>) -> Void)

    /// The committed events after `lastEventID`, fewer than `limit` (`--history-events`: an id with `limit` or
    /// more events after it is out of a history of `limit` events, `.snapshotNeeded`, as in single-process
    /// mode, however many more the store happens to keep).
    func replay(
        sessionID: String, after lastEventID: UInt64, limit: Int,
        completion: @escaping (Result<ReplayResult, StoreError>) -> Void)

    /// The `inputSeq` an `Idempotency-Key` was recorded with in the last 5 minutes, or nil.
    func inputSeq(
        sessionID: String, idempotencyKey: String, completion: @escaping (Result<UInt64?, StoreError>) -> Void)

    /// Deletes the session if `lease` is current (its streams learn it from the `deleted` event).
    func delete(_ lease: Lease, completion: @escaping (Result<Void, StoreError>) -> Void)

    /// Admits one more open event stream of session `sessionID` (`.gone` if none) under the name
    /// `member` (unique per node incarnation and stream) if fewer than `limit` streams count now,
    /// dropping first those whose deadline passed; an admitted stream counts until it is released or
    /// `ttlMilliseconds` pass without `renewStreams` (the Redis store: and only while its loop, named in
    /// `member` as `<holder>/<n>`, keeps its stream-liveness key, `RedisSessionStore.keepStreamsLive`).
    /// True if admitted (a member admitted already is
    /// admitted again, its deadline renewed), false if the session has its `limit` of streams.
    func admitStream(
        sessionID: String, member: String, limit: Int, ttlMilliseconds: Int,
        completion: @escaping (Result<Bool, StoreError>) -> Void)

    /// The periodic check of a session streamed on a node: gives its stream `members` (those still
    /// open there) a new deadline `ttlMilliseconds` from now (re-counting one dropped meanwhile, e.g.
    /// after a store outage longer than its deadline), gives the session and its history their idle
    /// expiry again (an open stream keeps a session alive), and answers who holds its lease (nil if
    /// nobody: its owner died or released it, so the streaming node may take it over). `.gone` if none.
    func renewStreams(
        sessionID: String, members: [String], ttlMilliseconds: Int,
        completion: @escaping (Result<String?, StoreError>) -> Void)

    /// `renewStreams`, answering also the session's last committed event id (`seq`): a stream whose last
    /// written id stays below it has missed a live event and catches up from the history. With
    /// `renewsExpiry` false the session's keys keep their expiry (a node checking every few seconds renews
    /// it once per `SessionStoreLimits.expiryRenewalSeconds`, as an owner's commits do). The default (a
    /// store without it) renews, and answers `seq` 0 (never behind).
    func checkStreams(
        sessionID: String, members: [String], ttlMilliseconds: Int, renewsExpiry: Bool,
        completion: @escaping (Result<StreamsCheck, StoreError>) -> Void)

    /// Stops counting stream `member` of session `sessionID` (its stream closed); no error if unknown.
    func releaseStream(sessionID: String, member: String, completion: @escaping (Result<Void, StoreError>) -> Void)
}

extension SessionStore {
    public func acquire(
        sessionID: String, holder: String, newToken: Bool,
        completion: @escaping (Result<LeaseGrant, StoreError>) -> Void
    ) {
        acquire(sessionID: sessionID, holder: holder, completion: completion)
    }

    public func checkStreams(
        sessionID: String, members: [String], ttlMilliseconds: Int, renewsExpiry: Bool,
        completion: @escaping (Result<StreamsCheck, StoreError>) -> Void
    ) {
        renewStreams(sessionID: sessionID, members: members, ttlMilliseconds: ttlMilliseconds) { r in
            completion(r.map { StreamsCheck(holder: $0, seq: 0) })
        }
    }

    /// `checkStreams` that renews the session's expiry.
    public func checkStreams(
        sessionID: String, members: [String], ttlMilliseconds: Int,
        completion: @escaping (Result<StreamsCheck, StoreError>) -> Void
    ) {
        checkStreams(
            sessionID: sessionID, members: members, ttlMilliseconds: ttlMilliseconds, renewsExpiry: true,
            completion: completion)
    }
}

/// What a streamed session's periodic check found (`SessionStore.checkStreams`).
public struct StreamsCheck: Sendable, Equatable {
    /// Who holds the lease (nil: nobody).
    public var holder: String?
    /// The session's last committed event id.
    public var seq: UInt64

    /// A check's answer.
    public init(holder: String?, seq: UInt64) {
        self.holder = holder
        self.seq = seq
    }
}
