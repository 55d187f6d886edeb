import EventHTTP
import JSON
import ViewModels

/// Where sessions live and how a request reaches one: the session layer's one seam.
///
/// Two implementations, chosen once by the composition root (`Application.init`):
/// - `LocalSessions`: the sessions live in this process, each on the loop its id names.
/// - `ClusterNode` (`--redis-url`): the sessions live in Redis; whichever node holds a session's lease
///   runs it, and any node answers any request for it (taking the session over, or forwarding to its
///   runner).
///
/// The routes (`Application+Sessions.swift`) parse and validate the request, call the backend, and map
/// its answer — a value in the session layer's terms (`InputOutcome`, `SessionFailure`), never an HTTP
/// response — to HTTP in one place (`Application.response(to:)`). A new backend (another store, another
/// way to find a session's runner) is a new conformance; no route changes. docs/ARCHITECTURE.md, "The
/// session seam", shows both.
///
/// Threading: every method is called on the request's loop (`host.loop`). `reply` may be called on any
/// loop, once; callers hop to where they answer (`HTTPResponder.sendFromAnyLoop`).
protocol SessionBackend: Sendable {
    /// Starts what the backend runs besides the loops (Redis connections, subscriptions, timers). Once,
    /// after the server started; any thread.
    func start()

    /// Graceful shutdown's first step, before the server stops (a controlling thread, never a loop):
    /// e.g. hand every session run here to other nodes at once.
    func prepareShutdown()

    /// The shared `status` changed (`data`: its event's JSON): bring it to the sessions and streams of
    /// `loop` (called on that loop, on every loop).
    func appWideChanged(_ name: String, _ data: [UInt8], isSignal: Bool, on loop: LoopSessions)

    /// Why this process cannot serve sessions now (`/readyz` answers `503` with it), or nil. Any thread.
    var unreadyReason: String? { get }

    /// While ready, what it cannot do all the same (some sessions' store missing or degraded), one sentence
    /// each, for `/readyz`'s body; empty when all is well. Any thread.
    var degradation: [String] { get }

    /// Creates a session of `client` (its per-client limits apply) on `host`'s loop, belonging to
    /// `person`'s login when one signed in; `reply` gets its id.
    ///
    /// Every later operation names the login its request carries (`login`: the key of its cookie, nil
    /// without one); a session that belongs to a login answers `notFound` to any other, as if it did not
    /// exist. Anonymous sessions answer everyone.
    func create(
        at host: LoopSessions, client: ClientAddress, person: SignedInPerson?,
        reply: @escaping @Sendable (Result<String, SessionFailure>) -> Void)

    /// The session's snapshot as JSON when it can be had at once on `host`'s loop, with no hop and no
    /// round trip (marking the session active), else nil: then `state(of:at:reply:)` answers. `GET /state`
    /// is the hottest route; this keeps its usual case free of a callback.
    func currentState(of id: String, login: String?, at host: LoopSessions) -> [UInt8]?

    /// The session's snapshot as JSON (`GET /state`), marking it active.
    func state(
        of id: String, login: String?, at host: LoopSessions,
        reply: @escaping @Sendable (Result<[UInt8], SessionFailure>) -> Void)

    /// Offers one input; `reply` gets what became of it once it is durable (accepted) or refused.
    func input(_ input: SessionInput, at host: LoopSessions, reply: @escaping @Sendable (InputResult) -> Void)

    /// Ends and forgets the session (its streams get `event: end` `deleted`).
    func delete(
        _ id: String, login: String?, at host: LoopSessions,
        reply: @escaping @Sendable (Result<Void, SessionFailure>) -> Void)

    /// Ends every session of the login `key` names that runs here (its streams get `event: end`
    /// `signed-out`): the person signed out, or their token was refused. Any thread.
    func endSessions(ofLogin key: String)

    /// Attaches `stream` (a sink on the request's loop: a session's own stream, or one member of a
    /// multiplexed stream) to session `id`: the backend starts it with a replay from `lastEventID` or a
    /// snapshot and then feeds it every later event, or calls `refuse` (once, on the stream's host loop)
    /// when it cannot.
    func openStream(
        _ stream: any SessionEventSink, sessionID id: String, login: String?, lastEventID: Int?,
        refuse: @escaping (SessionFailure) -> Void)
}

/// One input as the route parsed it: the session, the view model and input names, the value, and the
/// `Idempotency-Key` if any.
struct SessionInput: Sendable {
    var sessionID: String
    var viewModel: String
    var input: String
    var value: JSONValue
    var idempotencyKey: String?
    /// The login the request carries (the key of its cookie), checked against the session's.
    var login: String? = nil
}

/// What became of an input: the session's own answer (`InputOutcome`), or why no session could take it.
typealias InputResult = Result<InputOutcome, SessionFailure>

/// Why a request for a session could not be served, in the session layer's terms. The routes map each
/// case to a status, a `Retry-After` where retrying helps, and a sentence (`Application.response(to:)`).
/// Nothing was changed by a request that ends in one of these, except where a case says otherwise.
enum SessionFailure: Error, Equatable, Sendable {
    /// No such session (unknown, expired or deleted): `404`.
    case notFound
    /// The process holds its maximum of sessions (`--max-sessions`): `503`, retry later.
    case sessionLimit(Int)
    /// The client created sessions faster than its rate (`--client-session-rate` a second): `429`, retry
    /// after this many seconds.
    case clientCreationRate(retryAfterSeconds: Int, perSecond: Double)
    /// The client holds its maximum of live sessions (`--max-sessions-per-client`): `429`.
    case clientSessionLimit(Int)
    /// The session already has this many open event streams (its limit; counted across the cluster when
    /// `clusterWide`): `429`.
    case tooManyStreams(limit: Int, clusterWide: Bool)
    /// The cluster's Redis cannot be reached: `503`, retry shortly.
    case storeUnavailable
    /// New work is refused while the node's Redis connection is busy with the work already admitted
    /// (`ClusterSettings.admissionInFlight`): `503`, retry in a second. Nothing was sent to Redis.
    case busy
    /// The session moved to another node while this request was under way; nothing was applied: `503`,
    /// retry (the retry finds the new runner).
    case moved
    /// Another node holds the session's live lease and this node could not reach it: `503`; this node
    /// takes the session over when that lease ends, within this many seconds.
    case heldElsewhere(seconds: Int)
    /// The input was sent to the node running the session, which did not answer in time: `503`. It may
    /// have been applied; a retry with the same `Idempotency-Key` is applied at most once.
    case runnerDidNotAnswer
    /// The session's stored state cannot be read by this version: `500`.
    case unreadableState
    /// The session's state or one event would exceed the store's limit (bytes): `413`.
    case tooLarge(Int)
    /// The input (or creation, deletion) ran on the session's Redis master, but fewer replicas than
    /// `--redis-replica-acks` confirmed it in time: `503`. It may have been applied; a retry with the same
    /// `Idempotency-Key` is applied at most once, and acknowledged once the replicas hold it.
    case notReplicated
    /// Refused before anything was written: the session's Redis master has fewer connected replicas than
    /// `--redis-replica-acks` and `--redis-replica-acks-strict` is set: `503`. Nothing changed.
    case shortOfReplicas
}
