/// One loop's request counts (by route, method and status) and latency histograms (by route):
/// plain arrays owned by the loop, so recording a request takes no lock and no atomic operation.
/// `/metrics` merges a copy of every loop's (`HTTPServer.requestMetricsExposition`), in the
/// Prometheus text format swift-prometheus used before: `http_requests_total` and
/// `http_request_duration_seconds`; plus `http_direct_replies_total`, the complete responses written
/// in one piece (`RawReply`) rather than through evhttp's header list.
///
/// Threading: a value; each loop mutates its own on its thread and hands out copies.
struct RequestMetrics: Sendable {
    /// Route index of requests that matched no route (404/405 before any handler).
    static let unmatchedRoute = -1
    /// Route index of static files.
    static let staticRoute = -2

    /// Upper bounds of the latency buckets, nanoseconds, and their `le` labels.
    static let bucketNanos: [Int64] = [
        50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000, 25_000_000, 50_000_000,
        100_000_000, 250_000_000, 500_000_000, 1_000_000_000, 2_500_000_000, 5_000_000_000, 10_000_000_000,
    ]
    static let bucketLabels = [
        "0.00005", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25",
        "0.5", "1.0", "2.5", "5.0", "10.0",
    ]

    struct Counter: Sendable {
        let method: HTTPMethod
        let status: Int
        var count: Int
    }

    struct Route: Sendable {
        let name: String
        /// Requests per bucket (not cumulative); the last one is +Inf.
        var buckets = [Int](repeating: 0, count: RequestMetrics.bucketNanos.count + 1)
        var sumNanos: Int64 = 0
        var count = 0
        /// A handful per route, found by a linear scan.
        var counters: [Counter] = []
    }

    /// By `routeIndex + 2` (so the two negative indices fit).
    private(set) var routes: [Route?] = []
    /// Complete responses `RawReply` wrote (the others went through evhttp's header list).
    var directReplies = 0

    /// Records one answered request.
    mutating func record(route: String, routeIndex: Int, method: HTTPMethod, status: Int, nanos: Int64) {
        let slot = routeIndex + 2
        if slot >= routes.count { routes.append(contentsOf: repeatElement(nil, count: slot + 1 - routes.count)) }
        if routes[slot] == nil { routes[slot] = Route(name: route) }
        routes[slot]!.add(method: method, status: status, nanos: nanos)
    }

    /// Adds another loop's figures (the same router, so the same route indices).
    mutating func merge(_ other: RequestMetrics) {
        directReplies += other.directReplies
        if other.routes.count > routes.count {
            routes.append(contentsOf: repeatElement(nil, count: other.routes.count - routes.count))
        }
        for (slot, theirs) in other.routes.enumerated() {
            guard let theirs else { continue }
            guard var mine = routes[slot] else {
                routes[slot] = theirs
                continue
            }
            for i in mine.buckets.indices { mine.buckets[i] += theirs.buckets[i] }
            mine.sumNanos += theirs.sumNanos
            mine.count += theirs.count
            for c in theirs.counters {
                if let i = mine.counters.firstIndex(where: { $0.method == c.method && $0.status == c.status }) {
                    mine.counters[i].count += c.count
                } else {
                    mine.counters.append(c)
                }
            }
            routes[slot] = mine
        }
    }

    /// The Prometheus text exposition of the three metric families (empty before the first request).
    func exposition() -> String {
        let present = routes.compactMap { $0 }
        guard !present.isEmpty else { return "" }
        var out = "# TYPE http_requests_total counter\n"
        for r in present {
            for c in r.counters {
                out +=
                    "http_requests_total{route=\"\(r.name)\",method=\"\(c.method.rawValue)\",status=\"\(c.status)\"} "
                out += "\(c.count)\n"
            }
        }
        out += "# TYPE http_request_duration_seconds histogram\n"
        for r in present {
            var cumulative = 0
            for (i, label) in RequestMetrics.bucketLabels.enumerated() {
                cumulative += r.buckets[i]
                out += "http_request_duration_seconds_bucket{route=\"\(r.name)\",le=\"\(label)\"} \(cumulative)\n"
            }
            out += "http_request_duration_seconds_bucket{route=\"\(r.name)\",le=\"+Inf\"} \(r.count)\n"
            out += "http_request_duration_seconds_sum{route=\"\(r.name)\"} \(Double(r.sumNanos) / 1e9)\n"
            out += "http_request_duration_seconds_count{route=\"\(r.name)\"} \(r.count)\n"
        }
        out += "# TYPE http_direct_replies_total counter\nhttp_direct_replies_total \(directReplies)\n"
        return out
    }
}

extension RequestMetrics.Route {
    fileprivate mutating func add(method: HTTPMethod, status: Int, nanos: Int64) {
        var b = 0
        let bounds = RequestMetrics.bucketNanos
        while b < bounds.count && nanos > bounds[b] { b += 1 }
        buckets[b] += 1
        sumNanos += nanos
        count += 1
        for i in counters.indices where counters[i].method == method && counters[i].status == status {
            counters[i].count += 1
            return
        }
        counters.append(.init(method: method, status: status, count: 1))
    }
}
