import EventHTTP
import Logging

/// Everything the application can be told (flags and environment map onto it in `bff`'s main).
public struct AppConfiguration: Sendable {
    /// The HTTP layer's configuration (address, threads, limits, public folder).
    public var http = HTTPServer.Configuration()
    /// A session with no request and no open stream for this long expires.
    public var sessionIdleTimeout: Double = 30 * 60
    /// Most live sessions; past it `POST /api/sessions` answers 503 + Retry-After.
    public var maxSessions = 20_000
    /// A session that never received an input nor opened a stream expires after this many seconds without
    /// a request (`--unused-session-timeout`), so sessions created and abandoned do not hold the table for
    /// the whole idle time-out.
    public var unusedSessionTimeout: Double = 60
    /// Per client (`HTTPRequest.client`): session creations a second and the burst on top
    /// (`--client-session-rate`, `--client-session-burst`), and live sessions (`--max-sessions-per-client`).
    public var clientSessionRate: Double = 10
    public var clientSessionBurst: Double = 20
    public var maxSessionsPerClient = 200
    /// Most clients whose session limits are tracked at once (`--max-tracked-clients`); past it, new
    /// clients share one entry (`ClientSessionLimits`).
    public var maxTrackedClients = 65_536
    /// Most open event streams per session; past it 429. A multiplexed stream counts as one stream of
    /// each of its sessions.
    public var maxStreamsPerSession = 4
    /// Most sessions one multiplexed stream (`GET /api/events`) carries; past it 400.
    public var maxSessionsPerStream = 32
    /// Sustained inputs per second per session, and the burst allowed on top.
    public var inputRate: Double = 50
    public var inputBurst: Double = 100
    /// Events kept per session for Last-Event-ID replay (count and bytes).
    public var historyEvents = 256
    public var historyBytes = 256 * 1024
    /// Queued bytes past which a stream's pending state changes are coalesced.
    public var streamHighWaterBytes = 64 * 1024
    /// Longest gap between two writes on an idle stream: a stream that carried nothing gets a
    /// keep-alive comment (checked every eighth of it, so idle streams get one every 7/8 of this and
    /// no gap exceeds it, up to the timer's lateness).
    public var keepAliveInterval: Double = 15
    /// The `retry:` the stream announces, milliseconds.
    public var retryMilliseconds = 2000
    /// How long an Idempotency-Key is remembered, seconds.
    public var idempotencyWindow: Double = 300
    /// Seconds in-flight requests get at shutdown.
    public var shutdownGracePeriod: Double = 10
    /// Enables `POST /api/_test/status` (load tests and browser tests drive the shared status with it).
    public var testHooks = false
    /// Enables `GET /bench/json` (the benchmark's small JSON route).
    public var benchRoutes = false
    /// Cluster mode (sessions in a shared Redis); nil: one process, sessions in memory.
    public var cluster: ClusterSettings?
    /// Results per search page.
    public var searchPageSize = 30

    public init() {
        http.htmlHeaders = [
            (
                "Content-Security-Policy",
                "default-src 'self'; img-src 'self' https: data:; style-src 'self'; script-src 'self'; connect-src 'self'; "
                    + "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
            ),
            ("Referrer-Policy", "no-referrer"),
        ]
    }
}
