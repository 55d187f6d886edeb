import JSON
import WireClient

/// `rest`: keep-alive request rate of `GET /api/sessions/{id}/state` and the stateless
/// `GET /api/search/repositories?q=…`. Closed loop by default (each connection sends its next
/// request when the previous answer arrives, like wrk); with `rate` > 0 an open-loop schedule
/// whose latency counts from each request's scheduled time.
///
/// The search share is 0 by default: every uncached search costs the target server a call of its
/// GitHub budget (30 a minute with a token), so a share of it spends that budget within seconds and
/// the server answers `503` rate-limited for the rest of GitHub's window (its users see "rate limit
/// exhausted" too). A share above 0 is announced on stderr at start and in the report (`warning`), and
/// the report says why non-2xx answers happened (`non2xxReasons`: each problem's `detail`, counted).
///
/// Runs entirely on the calling thread (its own `LoadLoop`).
package struct RestScenario {
    /// Tunables.
    package struct Options: Sendable {
        /// Keep-alive connections.
        package var connections = 16
        /// Seconds of load.
        package var duration = 10.0
        /// Requests per second in total; 0 for closed loop.
        package var rate = 0.0
        /// Share of requests that go to the stateless search endpoint (0…1); 0 by default (see the type).
        package var searchShare = 0.0
        /// Every search asks a query never asked before (`uniqueQuery`), so none is served from the
        /// server's cache and each costs it a call of its GitHub budget (an abusive client's load).
        package var searchUnique = false
        /// Print a progress line to stderr every second.
        package var progress = true
        /// Delete the session afterwards.
        package var cleanup = true
        /// Defaults.
        package init() {}
    }

    /// What a run with `searchShare` does to the target's GitHub budget, or nil for none.
    package static func upstreamWarning(searchShare: Double) -> String? {
        guard searchShare > 0 else { return nil }
        return "--search-share \(searchShare) sends about \(Int((searchShare * 100).rounded())) % of the requests to "
            + "GET /api/search/repositories: each query the server has not cached costs it a call of its GitHub "
            + "budget (30 a minute with a token, 10 without), so once that is spent its answers are 503 "
            + "(rate limited) and its users see \"rate limit exhausted\" until GitHub's reset"
    }

    /// The `n`th query of a run whose queries are all distinct: `unique-<n>-<run>`, `run` drawn once
    /// per run (lowercase hex), so repeated runs against one server do not meet its cache either.
    package static func uniqueQuery(_ n: Int, run: UInt64) -> String {
        "unique-\(n)-\(String(run, radix: 16))"
    }

    /// Runs the scenario against `target`.
    package static func run(target: Target, options: Options) throws -> LoadReport {
        let warning = upstreamWarning(searchShare: options.searchShare)
        if let warning { StandardError.write("bff-load rest: warning: \(warning)\n") }
        let loop = try LoadLoop()
        defer { loop.close() }
        let pool = RequestPool(loop: loop, target: target, size: options.connections)
        let ids = try LoadSession.create(1, loop: loop, pool: pool)
        var mix = QueryMix(seed: 7)
        let runID = UInt64.random(in: 1...UInt64.max)
        var latency = LatencyHistogram()
        var done = 0
        var sent = 0
        var non2xx = 0
        var errors = 0
        var searchCount = 0
        var stateCount = 0
        var statusCounts: [Int: Int] = [:]
        var reasons = Non2xxReasons()
        let start = LoadLoop.now()
        let cpuBefore = SystemProbe.ownCPUSeconds()
        let end = start + UInt64(options.duration * 1e9)
        func nextPath() -> (kind: String, path: String) {
            if mix.nextUniform() < options.searchShare {
                searchCount += 1
                let q = options.searchUnique ? Self.uniqueQuery(searchCount, run: runID) : mix.nextQuery()
                return ("search", "/api/search/repositories?q=\(q)")
            }
            stateCount += 1
            return ("state", "/api/sessions/\(ids[0])/state")
        }
        func send(scheduled: UInt64, closedLoop: Bool) {
            sent += 1
            let (kind, path) = nextPath()
            pool.submit("GET", path) { result in
                let now = LoadLoop.now()
                done += 1
                switch result {
                case .success(let r):
                    statusCounts[r.status, default: 0] += 1
                    if r.status < 200 || r.status > 299 {
                        non2xx += 1
                        reasons.count(kind, r)
                    }
                    latency.record(nanoseconds: now - scheduled)
                case .failure: errors += 1
                }
                if closedLoop && now < end { send(scheduled: now, closedLoop: true) }
            }
        }
        if options.rate > 0 {
            let interval = 1e9 / options.rate
            func tick() {
                let now = LoadLoop.now()
                while start + UInt64(Double(sent) * interval) <= now && now < end {
                    send(scheduled: start + UInt64(Double(sent) * interval), closedLoop: false)
                }
                if now < end { loop.schedule(at: start + UInt64(Double(sent) * interval), tick) }
            }
            loop.schedule(at: start, tick)
        } else {
            for _ in 0..<options.connections { send(scheduled: start, closedLoop: true) }
        }
        LoadSession.startProgress(loop: loop, enabled: options.progress, started: start) {
            let elapsed = Double(LoadLoop.now() - start) / 1e9
            return "done \(done)  \(Int(Double(done) / elapsed)) req/s  non2xx \(non2xx)  errors \(errors)  "
                + "p99 \(LatencySummary.format(latency.summary.p99))"
        }
        loop.run(timeout: options.duration + 30) { LoadLoop.now() >= end && done == sent }
        let elapsed = Double(LoadLoop.now() - start) / 1e9
        let cpu = SystemProbe.ownCPUSeconds() - cpuBefore
        var report = LoadReport(scenario: "rest")
        if let warning { report.add("warning", .text(warning)) }
        report.add("connections", .int(options.connections))
        report.add("mode", .text(options.rate > 0 ? "open loop at \(options.rate) req/s" : "closed loop"))
        report.add("requests", .int(done))
        report.add("stateRequests", .int(stateCount))
        report.add("searchRequests", .int(searchCount))
        if options.searchUnique { report.add("searchQueries", .text("unique (none can be cached)")) }
        report.add("requestsPerSecond", .number(Double(done) / elapsed, unit: "req/s"))
        report.add("non2xx", .int(non2xx))
        report.add("errors", .int(errors))
        report.add("latency", .latency(latency.summary))
        report.add("clientCPU", .number(cpu, unit: "s"))
        report.add("clientCPUPerRequest", .number(done > 0 ? cpu * 1e6 / Double(done) : 0, unit: "µs"))
        report.add(
            "statusCounts",
            .text(
                statusCounts.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }
                    .joined(separator: " ")))
        if non2xx > 0 { report.add("non2xxReasons", .text(reasons.summary)) }
        if options.cleanup { LoadSession.delete(ids, loop: loop, pool: pool) }
        pool.close()
        return report
    }
}
