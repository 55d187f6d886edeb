import ArgumentParser
import BFF
import EventHTTP
import Glibc
import Logging
import SearchApp

/// `bff`: reads flags and environment, builds the live application, serves until SIGTERM/SIGINT.
struct BFFCommand: ParsableCommand {
    /// What `bff --version` prints (the HTTP API contract it serves is v1).
    static let version = "bff 1.0.0 (HTTP API v1)"

    static let configuration = CommandConfiguration(
        commandName: "bff",
        abstract:
            "HTTP backend-for-frontend hosting per-session view models (POST inputs, Server-Sent Events outputs).",
        discussion: """
            Environment: HOST (like --host), PORT (like --port), GITHUB_API_URL (like --github-api-url), \
            GITHUB_TOKEN (bearer token for GitHub; never logged, never in a cache key or file), LOG_LEVEL (like \
            --log-level), REDIS_URL (like --redis-url), REDIS_REPLICA_ACKS (like --redis-replica-acks), NODE_ID (like \
            --node-id), PUBLIC_URL (like --public-url). Flags win over the environment.
            Sign-in with GitHub is on when GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET (a GitHub OAuth app's; the \
            secret is never logged) are set; GITHUB_WEB_URL (default https://github.com) is where its authorize \
            page and code exchange are; BFF_SECRET_KEY (32 bytes, base64) seals the tokens at rest, else a key \
            file secret.key (mode 0600) is made in --state-dir. Logins are kept in --state-dir/logins.json; in \
            cluster mode (--redis-url) in Redis, shared by every node, and BFF_SECRET_KEY (the same on every node) \
            is required.
            Open files: bff raises its open-file limit to --max-connections + 256. Where the hard limit is lower, \
            the default --max-connections shrinks to fit (logged at debug level); an explicit value that does not \
            fit stops bff at start (exit 64).
            SIGTERM or SIGINT drains: /readyz turns 503, streams get `event: end` (shutdown), the process exits 0.
            Subcommand: bff session-owner ID --redis-url URL (cluster mode: which node runs a session; see \
            bff session-owner --help).
            """,
        version: version)

    @Option(help: "Address to listen on (env HOST; default: 127.0.0.1). Use 0.0.0.0 in containers.") var host: String?
    @Option(help: "Port to listen on (env PORT; default: 8080); 0 picks a free one, printed on stdout.") var port: Int?
    @Option(help: "Event-loop threads (default: the CPUs this process may use, from its affinity and cgroup quota).")
    var threads: Int?
    @Option(help: "Folder of static files (the browser UI and /openapi.yaml).") var publicDir = "Public"
    @Option(help: "Largest request body in bytes (413 past it).") var maxBodyBytes = 64 * 1024
    @Option(help: "Largest total request header size in bytes (431 past it).") var maxHeaderBytes = 16 * 1024
    @Option(help: "Seconds an idle keep-alive connection stays open (event streams are exempt); 0 disables.")
    var idleTimeout = 60.0
    @Option(
        help:
            "Seconds a response or event stream may wait for its reader to accept any byte before it is closed (like nginx's send_timeout; the client reconnects with Last-Event-ID); 0 disables."
    )
    var writeTimeout = 60.0
    @Option(help: "Seconds allowed to receive a whole request once it started (408 past it); 0 disables.")
    var requestTimeout = 10.0
    @Option(
        help: """
            Most open connections (503 past it; default: 25000, or what the open-file hard limit allows). An \
            explicit value the hard limit cannot fit is refused at start.
            """)
    var maxConnections: Int?
    @Option(help: "Seconds without requests or open streams after which a session expires.") var sessionIdleTimeout =
        1800.0
    @Option(help: "Most live sessions (503 + Retry-After past it).") var maxSessions = 20_000
    @Option(help: "Seconds without requests after which a session that never got an input nor a stream expires.")
    var unusedSessionTimeout = 60.0
    @Option(help: "Session creations a second per client (429 + Retry-After past it and the burst).")
    var clientSessionRate = 10.0
    @Option(help: "Session creations a client may make in a burst above its rate.") var clientSessionBurst = 20.0
    @Option(help: "Most live sessions per client (429 past it).") var maxSessionsPerClient = 200
    @Option(help: "Most clients whose session limits are tracked at once; past it new clients share one entry.")
    var maxTrackedClients = 65_536
    @Option(help: "Most open connections per client (trusted proxies exempt); past it new ones are closed at once.")
    var maxConnectionsPerClient = 256
    @Option(
        help:
            "Proxies (CIDR[,CIDR...]) whose Forwarded/X-Forwarded-For name the client (default: none: every peer is its own client and its forwarding headers are ignored)."
    ) var trustedProxies = ""
    @Option(
        help:
            "Largest share (0-1] of GitHub's rate window one client's uncached searches may take while other clients search too: a client alone may use the whole window; the share binds from another client's uncached search until a window (60 s) after its last one (cluster mode: counted over all nodes together; 1: never)."
    )
    var upstreamClientShare = 0.5
    @Option(help: "Most open event streams per session (429 past it).") var maxStreamsPerSession = 4
    @Option(help: "Most sessions one multiplexed event stream (GET /api/events) carries (400 past it).")
    var maxSessionsPerStream = 32
    @Option(help: "Sustained inputs per second per session (429 past it).") var inputRate = 50.0
    @Option(help: "Inputs a session may send in a burst above the rate.") var inputBurst = 100.0
    @Option(help: "Events kept per session for Last-Event-ID replay.") var historyEvents = 256
    @Option(help: "Queued bytes per stream past which state changes are coalesced.") var streamHighWater = 64 * 1024
    @Option(
        help:
            "Longest silence on an event stream: one that carried nothing gets a keep-alive comment before this many seconds pass (checked every eighth of it; busy streams get none)."
    ) var keepAlive = 15.0
    @Option(help: "Seconds in-flight requests get at shutdown.") var shutdownGrace = 10.0
    @Option(help: "GitHub API base URL (env GITHUB_API_URL; default https://api.github.com; http:// allowed).")
    var githubApiUrl: String?
    @Option(help: "Seconds a cached search page is fresh.") var cacheTtl = 60.0
    @Option(help: "Seconds a stale page may be served when GitHub fails.") var cacheMaxAge = 86_400.0
    @Option(help: "Most cached search pages.") var cacheMaxEntries = 2000
    @Option(help: "SQLite file of the search cache, or 'none' for memory only.") var cacheFile =
        "var/search-cache.sqlite"
    @Option(help: "Results per page in the search view model (1-100).") var pageSize = 30
    @Option(
        help:
            "The server's public origin, e.g. https://bff.example.com (env PUBLIC_URL): sign-in's redirect_uri and the login cookie are for it; default: each request's own (Host, and X-Forwarded-Proto from a trusted proxy)."
    ) var publicUrl: String?
    @Option(help: "Seconds a login lasts from its last use (sign-in; default 14 days).") var loginTtl = 14 * 86_400.0
    @Option(help: "Folder of sign-in's files: logins.json and, without BFF_SECRET_KEY, secret.key (both mode 0600).")
    var stateDir = "var"
    @Option(help: "Most logins kept (sign-in); past it a new sign-in answers 503.") var maxLogins = 100_000
    @Option(help: "Most sign-ins under way at once (each good for 10 minutes); past it /auth/login answers 503.")
    var maxPendingSignIns = 10_000
    @Option(help: "Most signed-in people whose own GitHub client (their rate limiter) is kept at once.")
    var maxPersonalClients = 1000
    @Option(
        help: "trace, debug, info, notice, warning, error or critical (env LOG_LEVEL). debug logs one line per request."
    )
    var logLevel: String?
    @Flag(help: "Enable POST /api/_test/status (drives the shared status view model; for load and browser tests).")
    var testHooks = false
    @Flag(help: "Enable GET /bench/json (the HTTP benchmark's route).") var benchRoutes = false
    @Option(
        help: """
            Cluster mode: the shared Redis (env REDIS_URL). One Redis: redis://[:password@]host:port/db; Redis \
            Sentinel: redis+sentinel://[:password@]host:port[,host:port…]/MASTER[?db=N] (the sentinels, port \
            26379 if left out); Redis Cluster: redis+cluster://[:password@]host:port[,host:port…] (seed nodes, \
            port 6379 if left out). The password is the data nodes'. Unset: one process, sessions in memory.
            """)
    var redisUrl: String?
    @Option(
        help: """
            Cluster mode: replicas that must confirm an input's commit (WAIT) before its 202; not confirmed \
            within the Redis command time-out: 503, the retry with the same Idempotency-Key applied once \
            (env REDIS_REPLICA_ACKS; default 0 for redis://, 1 for redis+sentinel:// and redis+cluster://).
            """)
    var redisReplicaAcks: Int?
    @Flag(
        help: """
            Cluster mode: while a Redis master has fewer connected replicas than --redis-replica-acks, refuse \
            its sessions' inputs (503) instead of waiting for the replicas it has (env \
            REDIS_REPLICA_ACKS_STRICT=1). Either way the master is named in the log, /readyz and /metrics.
            """)
    var redisReplicaAcksStrict = false
    @Option(help: "Cluster mode: this node's name in logs, metrics and leases (env NODE_ID; default HOST:PORT).")
    var nodeId: String?
    @Option(
        help: "Cluster mode: seconds a session's ownership lease lasts without renewal (failover bound after kill -9).")
    var leaseTtl = 10.0
    @Option(
        help: """
            Cluster mode: seconds a commit may wait for others of its event loop to the same Redis master, to \
            go in one script call (0: never). Only while the loop commits there more often than once per \
            window; a commit after a quiet spell goes at once. Trades up to this much input latency for \
            Redis CPU (docs/CLUSTER.md, "Group commit").
            """)
    var redisCommitWindow = 0.0

    /// `--redis-replica-acks`, else `REDIS_REPLICA_ACKS`, else nil (the URL's default).
    private var replicaAcks: Int? { redisReplicaAcks ?? env("REDIS_REPLICA_ACKS").flatMap { Int($0) } }

    func validate() throws {
        if let p = port ?? env("PORT").flatMap(Int.init), !(0...65535).contains(p) {
            throw ValidationError("--port must be 0...65535")
        }
        if let t = threads, t < 1 || t > 64 { throw ValidationError("--threads must be 1...64") }
        if !(1...100).contains(pageSize) { throw ValidationError("--page-size must be 1...100") }
        if let u = publicUrl ?? env("PUBLIC_URL"), !u.isEmpty {
            let lower = u.lowercased()
            let rest = lower.drop { $0 != "/" }.dropFirst(2)
            guard lower.hasPrefix("http://") || lower.hasPrefix("https://"), !rest.isEmpty,
                !rest.contains("/") || rest.drop(while: { $0 != "/" }) == "/"
            else {
                throw ValidationError(
                    "--public-url must be an origin such as https://bff.example.com (scheme and host, no path); got '\(u.prefix(100))'"
                )
            }
        }
        if loginTtl < 60 { throw ValidationError("--login-ttl must be at least 60 seconds") }
        if maxLogins < 1 || maxPendingSignIns < 1 || maxPersonalClients < 1 {
            throw ValidationError("--max-logins, --max-pending-sign-ins and --max-personal-clients must be at least 1")
        }
        if let l = logLevel ?? env("LOG_LEVEL"), Logger.Level(rawValue: l) == nil {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
        if let url = redisUrl ?? env("REDIS_URL"), !url.isEmpty, ClusterSettings(redisURL: url, nodeID: "x") == nil {
            // never echo the URL: it may hold a password
            throw ValidationError(
                "--redis-url must look like redis://[:password@]host:port/db, "
                    + "redis+sentinel://[:password@]host:port[,host:port…]/MASTER[?db=N] or "
                    + "redis+cluster://[:password@]host:port[,host:port…]")
        }
        if let text = env("REDIS_REPLICA_ACKS"), redisReplicaAcks == nil, Int(text) == nil {
            throw ValidationError("REDIS_REPLICA_ACKS must be a number, got '\(text.prefix(20))'")
        }
        if let n = replicaAcks, !(0...16).contains(n) {
            throw ValidationError("--redis-replica-acks must be 0...16")
        }
        if !(0.5...300).contains(leaseTtl) { throw ValidationError("--lease-ttl must be 0.5...300 seconds") }
        if case .failure(let e) = TrustedProxies.parse(trustedProxies) {
            throw ValidationError("--trusted-proxies: \(e)")
        }
        try checkRanges()
        if let p = env("PORT"), port == nil, Int(p) == nil {
            throw ValidationError("PORT must be a number, got '\(p)'")
        }
    }

    /// Every numeric flag's accepted range: a negative, zero or absurd value (or `nan`) is refused at
    /// start with the flag's name, instead of a server that misbehaves later (a zero history ring, a
    /// negative time-out that fires at once, a directory sized for a billion sessions).
    private func checkRanges() throws {
        let day = 86_400.0
        let seconds: [(String, Double, ClosedRange<Double>)] = [
            ("--idle-timeout", idleTimeout, 0...day), ("--write-timeout", writeTimeout, 0...day),
            ("--request-timeout", requestTimeout, 0...day),
            ("--session-idle-timeout", sessionIdleTimeout, 1...(30 * day)),
            ("--keep-alive", keepAlive, 0.1...3600), ("--shutdown-grace", shutdownGrace, 0...3600),
            ("--cache-ttl", cacheTtl, 0...(365 * day)), ("--cache-max-age", cacheMaxAge, 0...(365 * day)),
            ("--input-rate", inputRate, 0.001...1_000_000), ("--input-burst", inputBurst, 1...1_000_000),
            ("--unused-session-timeout", unusedSessionTimeout, 1...(30 * day)),
            ("--client-session-rate", clientSessionRate, 0.001...1_000_000),
            ("--client-session-burst", clientSessionBurst, 1...1_000_000),
            ("--upstream-client-share", upstreamClientShare, 0.01...1),
            ("--redis-commit-window", redisCommitWindow, 0...0.1),
        ]
        for (flag, value, range) in seconds where !range.contains(value) {
            throw ValidationError("\(flag) must be \(range.lowerBound)...\(range.upperBound), got \(value)")
        }
        let counts: [(String, Int, ClosedRange<Int>)] = [
            ("--max-body-bytes", maxBodyBytes, 1...(1 << 30)), ("--max-header-bytes", maxHeaderBytes, 1024...(1 << 20)),
            ("--max-connections", maxConnections ?? 25_000, 1...1_000_000),
            ("--max-sessions", maxSessions, 1...1_000_000),
            ("--max-sessions-per-client", maxSessionsPerClient, 1...1_000_000),
            ("--max-tracked-clients", maxTrackedClients, 16...10_000_000),
            ("--max-connections-per-client", maxConnectionsPerClient, 1...1_000_000),
            ("--max-streams-per-session", maxStreamsPerSession, 1...1000),
            ("--max-sessions-per-stream", maxSessionsPerStream, 1...1000),
            ("--history-events", historyEvents, 1...100_000),
            ("--stream-high-water", streamHighWater, 1024...(1 << 30)),
            ("--cache-max-entries", cacheMaxEntries, 1...10_000_000),
        ]
        for (flag, value, range) in counts where !range.contains(value) {
            throw ValidationError("\(flag) must be \(range.lowerBound)...\(range.upperBound), got \(value)")
        }
    }

    func run() throws {
        let level = Logger.Level(rawValue: logLevel ?? env("LOG_LEVEL") ?? "info") ?? .info
        LoggingSystem.bootstrap { label in
            var h = StreamLogHandler.standardError(label: label)
            h.logLevel = level
            return h
        }
        var logger = Logger(label: "bff")
        logger.logLevel = level

        var config = AppConfiguration()
        config.http.host = host ?? env("HOST") ?? "127.0.0.1"
        config.http.port = port ?? env("PORT").flatMap(Int.init) ?? 8080
        if let threads { config.http.threads = threads }
        config.http.publicDirectory = publicDir
        config.http.maxBodyBytes = maxBodyBytes
        config.http.maxHeaderBytes = maxHeaderBytes
        config.http.idleTimeout = idleTimeout
        config.http.writeTimeout = writeTimeout
        config.http.requestReadTimeout = requestTimeout
        config.http.maxConnections = try connectionLimit(logger: logger)
        config.sessionIdleTimeout = sessionIdleTimeout
        config.maxSessions = maxSessions
        config.unusedSessionTimeout = unusedSessionTimeout
        config.clientSessionRate = clientSessionRate
        config.clientSessionBurst = clientSessionBurst
        config.maxSessionsPerClient = maxSessionsPerClient
        config.maxTrackedClients = maxTrackedClients
        config.http.maxConnectionsPerClient = maxConnectionsPerClient
        config.http.trustedProxies = (try? TrustedProxies.parse(trustedProxies).get()) ?? TrustedProxies()
        config.maxStreamsPerSession = maxStreamsPerSession
        config.maxSessionsPerStream = maxSessionsPerStream
        config.inputRate = inputRate
        config.inputBurst = inputBurst
        config.historyEvents = historyEvents
        config.streamHighWaterBytes = streamHighWater
        config.keepAliveInterval = keepAlive
        config.shutdownGracePeriod = shutdownGrace
        config.testHooks = testHooks
        config.benchRoutes = benchRoutes
        config.searchPageSize = pageSize
        if let url = redisUrl ?? env("REDIS_URL"), !url.isEmpty {
            let node = nodeId ?? env("NODE_ID") ?? "\(config.http.host):\(config.http.port)"
            config.cluster = ClusterSettings(redisURL: url, nodeID: node, leaseTTL: leaseTtl, replicaAcks: replicaAcks)
            config.cluster?.commitWindow = redisCommitWindow
            config.cluster?.replicaAcksStrict = redisReplicaAcksStrict || env("REDIS_REPLICA_ACKS_STRICT") == "1"
            logger.info(
                "cluster mode",
                metadata: [
                    "node": "\(node)", "lease-ttl": "\(leaseTtl)",
                    "redis": "\(config.cluster.map { "\($0.topology)" } ?? "")",
                    "replica-acks": "\(config.cluster?.replicaAcks ?? 0)",
                    "replica-acks-strict": "\(config.cluster?.replicaAcksStrict ?? false)",
                    "commit-window": "\(redisCommitWindow)",
                ])
        }

        var github = GitHubSettings()
        github.baseURL = githubApiUrl ?? env("GITHUB_API_URL") ?? github.baseURL
        github.token = env("GITHUB_TOKEN").flatMap { $0.isEmpty ? nil : $0 }
        github.cacheTTL = cacheTtl
        github.clientShare = upstreamClientShare
        github.cacheMaxAge = cacheMaxAge
        github.cacheMaxEntries = cacheMaxEntries
        github.cachePath = cacheFile == "none" ? nil : cacheFile
        if let id = env("GITHUB_CLIENT_ID"), !id.isEmpty, let secret = env("GITHUB_CLIENT_SECRET"), !secret.isEmpty {
            var signIn = SignInOptions(clientID: id, clientSecret: secret)
            signIn.webURL = env("GITHUB_WEB_URL").flatMap { $0.isEmpty ? nil : $0 } ?? signIn.webURL
            signIn.publicURL = publicUrl ?? env("PUBLIC_URL").flatMap { $0.isEmpty ? nil : $0 }
            signIn.secretKey = env("BFF_SECRET_KEY").flatMap { $0.isEmpty ? nil : $0 }
            signIn.loginTTL = loginTtl
            signIn.stateDirectory = stateDir
            signIn.maxLogins = maxLogins
            signIn.maxPendingSignIns = maxPendingSignIns
            signIn.maxPersonalClients = maxPersonalClients
            github.signIn = signIn
            logger.info("sign-in with GitHub on", metadata: ["web": "\(signIn.webURL)"])
        } else if env("GITHUB_CLIENT_ID").map({ !$0.isEmpty }) == true {
            throw ValidationError("GITHUB_CLIENT_ID is set but GITHUB_CLIENT_SECRET is not: sign-in needs both")
        }

        let signals = ShutdownSignals()  // block before any thread starts, so only sigwait sees them
        let app = try Application.live(configuration: config, github: github, logger: logger)
        try app.start()
        print("bff listening on http://\(config.http.host):\(app.port)")
        fflush(nil)
        let signal = signals.wait()
        logger.info("shutting down", metadata: ["signal": "\(signal)"])
        app.shutdown()
    }

    /// `--max-connections`, fitted to the open-file limit: past it `accept` would fail with EMFILE
    /// instead of answering 503. The default shrinks to fit, at debug level only (`--help` says so: the
    /// usual hard limits, 4096 or 1024, made it a notice on every start that nobody asked for); an
    /// explicit value that does not fit is refused, since the operator asked for a capacity the process
    /// cannot have.
    private func connectionLimit(logger: Logger) throws -> Int {
        let wanted = maxConnections ?? 25_000
        guard let soft = raiseOpenFileLimit(to: wanted + reservedDescriptors), soft < wanted + reservedDescriptors
        else { return wanted }
        let fits = soft - reservedDescriptors
        if maxConnections != nil || fits < 1 {
            throw ValidationError(
                "--max-connections \(wanted) needs \(wanted + reservedDescriptors) open files; the hard limit allows \(soft) (raise it with ulimit -n or LimitNOFILE=, or lower --max-connections to \(max(fits, 1)) or less)"
            )
        }
        logger.debug(
            "max-connections lowered to fit the open-file hard limit",
            metadata: ["max-connections": "\(fits)", "open-file-limit": "\(soft)"])
        return fits
    }

    private func env(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }
}

/// Descriptors kept for what is not a client connection: listeners, loop wake-ups, the cache file,
/// Redis and GitHub connections, log files.
let reservedDescriptors = 256

/// Raises the soft open-file limit (each connection is a descriptor) toward `wanted`, as far as the
/// hard limit allows; returns the soft limit in force (nil if it cannot be read).
func raiseOpenFileLimit(to wanted: Int) -> Int? {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
    let target = min(rlim_t(wanted), limit.rlim_max)
    if limit.rlim_cur < target {
        limit.rlim_cur = target
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) != 0 {
            _ = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
    }
    return limit.rlim_cur >= rlim_t(Int.max) ? Int.max : Int(limit.rlim_cur)
}
