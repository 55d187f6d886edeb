import Glibc

extension HTTPServer {
    /// Everything the server can be told. Every limit has a default and is enforced with the right
    /// status and a problem body.
    public struct Configuration: Sendable {
        /// Address to bind ("127.0.0.1", "0.0.0.0", "::").
        public var host = "127.0.0.1"
        /// Port to bind; 0 picks an ephemeral port (read `HTTPServer.port` after `start()`).
        public var port = 8080
        /// Event-loop threads, each with its own listening socket (`SO_REUSEPORT`). Defaults to the
        /// CPUs the process may use (`CPUBudget.current`: affinity mask and cgroup quota).
        public var threads = CPUBudget.current.count
        /// `listen()` backlog.
        public var backlog: Int32 = 1024
        /// Largest request body accepted; larger gets `413` (problem JSON).
        public var maxBodyBytes = 64 * 1024
        /// Largest total size of request headers; larger gets `431` (problem JSON).
        public var maxHeaderBytes = 16 * 1024
        /// A keep-alive connection with no traffic for this long is closed; 0 disables. Streaming
        /// responses are exempt (their peer need not send anything; `writeTimeout` covers them).
        public var idleTimeout: Double = 60
        /// A response (streaming or not) whose peer accepts no bytes at all for this long while bytes
        /// wait to be sent is closed, like nginx's `send_timeout`; 0 disables. Writing more to a
        /// stalled stream does not restart the clock: only bytes the peer accepts do.
        public var writeTimeout: Double = 60
        /// Time allowed to receive a whole request once its first byte arrived; then `408`; 0 disables.
        public var requestReadTimeout: Double = 10
        /// Most open connections (all loops); past it a request gets `503` and the connection closes.
        public var maxConnections = 25_000
        /// Most open connections per client (peer address; trusted proxies are not counted): past it a
        /// client's new connections are closed at once, unanswered (`--max-connections-per-client`).
        public var maxConnectionsPerClient = 256
        /// The proxies whose `Forwarded`/`X-Forwarded-For` name the client (`--trusted-proxies`).
        public var trustedProxies = TrustedProxies()
        /// Folder of static files served for paths no route matches; nil serves none.
        public var publicDirectory: String?
        /// Seconds between re-scans of `publicDirectory` for changed files (off the loops); 0 never re-scans.
        public var staticRescanInterval: Double = 2
        /// Most bytes of static files held in memory (files past it are not served; see `StaticFiles`).
        public var staticMaxBytes = 64 << 20
        /// Extra headers on static HTML files (e.g. Content-Security-Policy).
        public var htmlHeaders: [(String, String)] = []
        /// Headers added to every response.
        public var commonHeaders: [(String, String)] = [("X-Content-Type-Options", "nosniff")]
        /// Complete responses are written to the connection in one piece where evhttp's rules allow
        /// (`RawReply`), and so are stream chunks (`clibevent_stream_chunk`); false sends all of them
        /// through evhttp's own functions (the same bytes; tests compare the two).
        public var directReplies = true

        public init() {}

        /// Hard limits handed to evhttp's own parser (it would answer past them in HTML). They are
        /// out of reach: `RequestFraming` refuses bodies past the soft limit from their announced
        /// length and heads at twice the soft limit, with problem documents, before evhttp reads them;
        /// between the soft and twice the soft header limit the request handler answers `431`.
        var hardBodyLimit: Int { max(maxBodyBytes * 2, maxBodyBytes + 64 * 1024) }
        var hardHeaderLimit: Int { maxHeaderBytes * 2 + 1024 }
    }

    /// Lifecycle state, as `/readyz` reports it.
    public enum State: Int, Sendable {
        case starting = 0
        case running = 1
        case draining = 2
        case stopped = 3
    }
}
