import CoreMetrics
import Synchronization

/// The server's own metrics, recorded through swift-metrics with an injected factory (so each
/// server instance can report to its own registry, and tests can run several servers).
///
/// Threading: the shared meters are thread-safe; the request counts and latencies are kept per loop
/// (`RequestMetrics` in `LoopHTTP`) and merged when read.
final class ServerMetrics: Sendable {
    let factory: any MetricsFactory
    let openConnections: Meter
    let openStreams: Meter
    let readTimeouts: CoreMetrics.Counter
    let rejectedConnections: CoreMetrics.Counter
    /// Streaming responses closed because their peer accepted no bytes for the write time-out.
    let streamWriteTimeouts: CoreMetrics.Counter
    /// Connections closed because their peer sent more than one request's limits while a response
    /// (typically a stream) was still being answered.
    let unreadInputCloses: CoreMetrics.Counter
    /// Connections closed at accept because their client had `--max-connections-per-client` open.
    let clientConnectionRefusals: CoreMetrics.Counter
    /// Open connections per client, across loops.
    let clientConnections = ClientConnections()
    /// Exact count of open connections across loops (the limit is checked against it).
    let connectionCount = Atomic<Int>(0)
    /// Requests handed to handlers and not yet answered (including open streams), across loops.
    let inFlight = Atomic<Int>(0)

    init(factory: any MetricsFactory) {
        self.factory = factory
        openConnections = Meter(label: "http_open_connections", factory: factory)
        openStreams = Meter(label: "http_open_streams", factory: factory)
        readTimeouts = CoreMetrics.Counter(label: "http_request_read_timeouts_total", factory: factory)
        rejectedConnections = CoreMetrics.Counter(label: "http_rejected_connections_total", factory: factory)
        streamWriteTimeouts = CoreMetrics.Counter(label: "http_stream_write_timeouts_total", factory: factory)
        unreadInputCloses = CoreMetrics.Counter(label: "http_unread_input_closes_total", factory: factory)
        clientConnectionRefusals = CoreMetrics.Counter(
            label: "http_client_connection_refusals_total", factory: factory)
    }
}
