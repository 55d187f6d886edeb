import CoreMetrics
import Glibc
import Prometheus

/// The application's metrics, in its own Prometheus registry (one per application instance).
package final class AppMetrics: Sendable {
    let registry: PrometheusCollectorRegistry
    /// Where the product makes its own metrics (they appear in the same `/metrics`).
    package let factory: PrometheusMetricsFactory
    let sessions: Meter
    let streams: Meter
    let inputs: CoreMetrics.Counter
    /// Upstream (GitHub) calls refused because their client had spent its share of the rate window
    /// (`--upstream-client-share`; in cluster mode counted over every node).
    package let upstreamClientRefusals: CoreMetrics.Counter
    let events: CoreMetrics.Counter
    let coalesced: CoreMetrics.Counter
    /// `bff_event_loop_threads`: the event loops this process runs (see `CPUBudget`).
    let eventLoopThreads: Meter
    /// `bff_event_loop_lag_seconds`: how late each loop ran a timer due every 0.5 s (`LoopSessions.lagProbe`).
    let loopLag: CoreMetrics.Timer
    /// `bff_signin_cross_site_refusals_total`: unsafe requests with the login cookie refused as cross-site.
    let crossSiteRefusals: CoreMetrics.Counter
    /// `bff_sessions_ended_total` by reason (the contract's: deleted, expired, shutdown, signed-out; and
    /// unused).
    private let ended: [String: CoreMetrics.Counter]

    init() {
        registry = PrometheusCollectorRegistry()
        var f = PrometheusMetricsFactory(registry: registry)
        f.defaultDurationHistogramBuckets = [
            .microseconds(50), .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1),
            .milliseconds(2.5), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
            .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5),
            .seconds(10),
        ]
        factory = f
        sessions = Meter(label: "bff_sessions", factory: f)
        streams = Meter(label: "bff_open_event_streams", factory: f)
        inputs = CoreMetrics.Counter(label: "bff_inputs_total", factory: f)
        upstreamClientRefusals = CoreMetrics.Counter(label: "bff_upstream_client_share_refusals_total", factory: f)
        events = CoreMetrics.Counter(label: "bff_events_total", factory: f)
        coalesced = CoreMetrics.Counter(label: "bff_coalesced_state_frames_total", factory: f)
        eventLoopThreads = Meter(label: "bff_event_loop_threads", factory: f)
        crossSiteRefusals = CoreMetrics.Counter(label: "bff_signin_cross_site_refusals_total", factory: f)
        loopLag = CoreMetrics.Timer(label: "bff_event_loop_lag_seconds", factory: f)
        var ended: [String: CoreMetrics.Counter] = [:]
        clientRefusalCounters = Dictionary(
            uniqueKeysWithValues: ["rate", "live"].map {
                (
                    $0,
                    CoreMetrics.Counter(
                        label: "bff_client_session_refusals_total", dimensions: [("limit", $0)], factory: f)
                )
            })
        for reason in ["deleted", "expired", "unused", "shutdown", "signed-out"] {
            ended[reason] = CoreMetrics.Counter(
                label: "bff_sessions_ended_total", dimensions: [("reason", reason)], factory: f)
        }
        self.ended = ended
    }

    func sessionEnded(reason: String) {
        ended[reason]?.increment()
    }

    /// `bff_client_session_refusals_total{limit}`: creations refused by a client's own limit (`rate`:
    /// creations a second, `live`: sessions held).
    private let clientRefusalCounters: [String: CoreMetrics.Counter]

    func clientRefusals(limit: String) { clientRefusalCounters[limit]?.increment() }

    /// The Prometheus text exposition, with process metrics appended.
    func render() -> [UInt8] {
        var out = registry.emitToBuffer()
        out.append(contentsOf: ProcessStats.exposition().utf8)
        return out
    }
}

/// Process-level metrics read from /proc (resident memory, open file descriptors, CPU time).
enum ProcessStats {
    /// Resident set size in bytes, from /proc/self/statm.
    static func residentBytes() -> Int {
        guard let f = fopen("/proc/self/statm", "r") else { return 0 }
        defer { fclose(f) }
        var size = 0
        var resident = 0
        guard
            withUnsafeMutablePointer(
                to: &size,
                { s in
                    withUnsafeMutablePointer(to: &resident) { r in
                        readTwo(f, s, r)
                    }
                })
        else { return 0 }
        return resident * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    private static func readTwo(
        _ f: UnsafeMutablePointer<FILE>, _ a: UnsafeMutablePointer<Int>, _ b: UnsafeMutablePointer<Int>
    ) -> Bool {
        var buf = [CChar](repeating: 0, count: 128)
        guard fgets(&buf, 128, f) != nil else { return false }
        let text = String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let parts = text.split(separator: " ")
        guard parts.count >= 2, let x = Int(parts[0]), let y = Int(parts[1]) else { return false }
        a.pointee = x
        b.pointee = y
        return true
    }

    static func openFileDescriptors() -> Int {
        guard let d = opendir("/proc/self/fd") else { return 0 }
        defer { closedir(d) }
        var n = 0
        while readdir(d) != nil { n += 1 }
        return max(0, n - 3)  // ".", ".." and the directory's own descriptor
    }

    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(
            usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    static func exposition() -> String {
        """
        # TYPE process_resident_memory_bytes gauge
        process_resident_memory_bytes \(residentBytes())
        # TYPE process_open_fds gauge
        process_open_fds \(openFileDescriptors())
        # TYPE process_cpu_seconds_total counter
        process_cpu_seconds_total \(cpuSeconds())

        """
    }
}
