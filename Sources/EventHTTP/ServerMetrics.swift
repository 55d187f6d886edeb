import CoreMetrics
import Synchronization

/// The server's own metrics, recorded through swift-metrics with an injected factory (so each
/// server instance can report to its own registry, and tests can run several servers).
///
/// Threading: the shared meters are thread-safe; the per-route caches live in `LoopHTTP` (one per loop).
final class ServerMetrics: Sendable {
    let factory: any MetricsFactory
    let openConnections: Meter
    let openStreams: Meter
    let readTimeouts: CoreMetrics.Counter
    let rejectedConnections: CoreMetrics.Counter
    /// Streaming responses closed because their peer accepted no bytes for the write time-out.
    let streamWriteTimeouts: CoreMetrics.Counter
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
    }
}

/// Per-loop cache of the request metrics by route, method and status, indexed by small integers so a
/// request costs no string hashing, no dictionary lookup and no factory lookup.
struct RouteMetricsCache {
    /// Route index of requests that matched no route (404/405 before any handler).
    static let unmatchedRoute = -1
    /// Route index of static files.
    static let staticRoute = -2

    /// One route's meters: its latency timer and a counter per (method, status) seen so far
    /// (a handful per route, found by a linear scan).
    private final class RouteMeters {
        let timer: CoreMetrics.Timer
        var counters: [(key: Int, counter: CoreMetrics.Counter)] = []
        init(timer: CoreMetrics.Timer) { self.timer = timer }
    }

    /// By `routeIndex + 2` (so the two negative indices above fit).
    private var routes: [RouteMeters?] = []

    mutating func record(
        factory: any MetricsFactory, route: String, routeIndex: Int, method: HTTPMethod, status: Int, nanos: Int64
    ) {
        let slot = routeIndex + 2
        if slot >= routes.count { routes.append(contentsOf: repeatElement(nil, count: slot + 1 - routes.count)) }
        let meters: RouteMeters
        if let m = routes[slot] {
            meters = m
        } else {
            meters = RouteMeters(
                timer: CoreMetrics.Timer(
                    label: "http_request_duration_seconds", dimensions: [("route", route)], factory: factory))
            routes[slot] = meters
        }
        let key = method.index << 10 | (status & 0x3FF)
        if let entry = meters.counters.first(where: { $0.key == key }) {
            entry.counter.increment()
        } else {
            let c = CoreMetrics.Counter(
                label: "http_requests_total",
                dimensions: [("route", route), ("method", method.rawValue), ("status", String(status))],
                factory: factory)
            meters.counters.append((key, c))
            c.increment()
        }
        meters.timer.recordNanoseconds(nanos)
    }
}
