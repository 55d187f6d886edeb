import JSON
import WireClient

#if canImport(Glibc)
    import Glibc
#endif

/// `search`: S sessions, each with a stream, issuing a realistic search mix through the
/// `search` view model: Zipf-popular queries (`query` then `submit`), sometimes `loadMore`,
/// sometimes a `sort` change, with an exponential think time. Reports searches done, events,
/// latency (scheduled action → the event that ends loading), the p99 of cached searches (same key already served in this run)
/// (same query, sort and page seen earlier in the run: served from cache when the cache
/// works), searches per upstream request and rate-limit errors seen in events.
///
/// Runs entirely on the calling thread (its own `LoadLoop`).
public struct SearchScenario {
    /// Tunables.
    public struct Options: Sendable {
        /// Sessions (each with one stream).
        public var sessions = 20
        /// Seconds of load.
        public var duration = 10.0
        /// Mean think time between a session's actions, seconds.
        public var think = 0.5
        /// The GitHub simulator's base URL, for the upstream request count (`GET /_sim/stats`).
        public var simURL: String?
        /// Keep-alive connections for the POSTs.
        public var connections = 8
        /// Random seed.
        public var seed: UInt64 = 42
        /// Print a progress line to stderr every second.
        public var progress = true
        /// Delete the sessions afterwards.
        public var cleanup = true
        /// Defaults.
        public init() {}
    }

    private final class Session {
        let base: String
        var stream: StreamClient?
        var waitingFor: Int?  // inputSeq of the action whose results we await
        var scheduled: UInt64 = 0
        var repeatSearch = false
        var key = ""
        var finishedWithError = false
        var query: String?
        var sort = "best-match"
        var page = 1
        var hasMore = false
        var finishedSeq = 0  // the latest inputSeq whose search finished (results or error)
        var finishedAt: UInt64 = 0
        init(id: String) { base = "/api/sessions/\(id)/search/" }
    }

    /// Runs the scenario against `target`.
    public static func run(target: Target, options: Options) throws -> LoadReport {
        let loop = try LoadLoop()
        defer { loop.close() }
        let pool = RequestPool(loop: loop, target: target, size: options.connections)
        SystemProbe.raiseOpenFileLimit(to: options.sessions + options.connections + 256)
        let upstreamBefore = upstreamRequests(simURL: options.simURL)
        let ids = try LoadSession.create(options.sessions, loop: loop, pool: pool)
        let sessions = ids.map(Session.init)
        var mix = QueryMix(seed: options.seed)
        var all = LatencyHistogram()
        var repeats = LatencyHistogram()
        var searches = 0
        var events = 0
        var rateLimited = 0
        var searchErrors = 0
        var postErrors = 0
        var timeouts = 0
        var served = Set<String>()  // keys (query|sort|page) that already returned results in this run
        var running = true
        let start = LoadLoop.now()
        let end = start + UInt64(options.duration * 1e9)

        /// Posts one input of the session's current action. With `then`, a 202 runs `then` (the
        /// action's next input) instead of awaiting results, so inputs reach the server in order.
        func post(_ session: Session, _ input: String, _ body: String, then: (() -> Void)? = nil) {
            let action = session.scheduled
            pool.submit(
                "POST", session.base + input, headers: [("Content-Type", "application/json")],
                body: Array(body.utf8)
            ) { result in
                // A reply for an action that already timed out must not touch the next action.
                let current = session.scheduled == action && session.waitingFor != nil
                guard case .success(let r) = result, r.status == 202 else {
                    postErrors += 1
                    if current {
                        session.waitingFor = nil
                        scheduleNext(session)
                    }
                    return
                }
                guard current else { return }
                if let then { return then() }
                guard let seq = LoadSession.inputSeq(in: r.text) else { return }
                session.waitingFor = seq
                // The stream may deliver the result before the 202 arrives on the other connection.
                if session.finishedSeq >= seq { complete(session, at: session.finishedAt) }
            }
        }
        func complete(_ session: Session, at arrival: UInt64) {
            searches += 1
            all.record(nanoseconds: arrival &- session.scheduled)
            if !session.finishedWithError {
                if session.repeatSearch { repeats.record(nanoseconds: arrival &- session.scheduled) }
                served.insert(session.key)
            }
            session.waitingFor = nil
            scheduleNext(session)
        }
        func act(_ session: Session) {
            guard running, LoadLoop.now() < end else { return }
            session.scheduled = LoadLoop.now()
            session.waitingFor = -1  // until the 202 tells the inputSeq
            let u = mix.nextUniform()
            if session.query != nil && session.hasMore && u < 0.2 {
                session.page += 1
                post(session, "loadMore", "")
            } else if session.query != nil && u < 0.35 {
                let sorts = ["best-match", "stars", "forks", "updated"].filter { $0 != session.sort }
                session.sort = sorts[Int(mix.nextUniform() * Double(sorts.count))]
                session.page = 1
                post(session, "sort", "{\"value\":\"\(session.sort)\"}")
            } else {
                let query = mix.nextQuery()
                session.query = query
                session.page = 1
                // `submit` only after `query` was accepted: on two connections they could arrive reversed.
                post(session, "query", "{\"value\":\"\(query)\"}") { post(session, "submit", "") }
            }
            session.key = "\(session.query ?? "")|\(session.sort)|\(session.page)"
            session.repeatSearch = served.contains(session.key)
            let deadline = session.scheduled
            loop.schedule(after: 10) {
                if session.scheduled == deadline && session.waitingFor != nil {
                    timeouts += 1
                    session.waitingFor = nil
                    scheduleNext(session)
                }
            }
        }
        func scheduleNext(_ session: Session) {
            let wait = -options.think * Glibc.log(1 - mix.nextUniform())
            loop.schedule(after: wait) { act(session) }
        }
        for (index, id) in ids.enumerated() {
            let session = sessions[index]
            let stream = try StreamClient(loop: loop, target: target, path: "/api/sessions/\(id)/events")
            stream.onEvent = { event, now in
                events += 1
                guard event.event == "search" else { return }
                let data = event.data
                if data.contains("\"rateLimited\"") { rateLimited += 1 }
                if data.contains("\"hasMore\":true") { session.hasMore = true }
                if data.contains("\"hasMore\":false") { session.hasMore = false }
                let finished =
                    data.contains("\"isLoading\":false")
                    || (data.contains("\"repositories\"") && !data.contains("\"isLoading\":true"))
                    || data.contains("\"error\":{")
                guard finished, let seq = LoadSession.inputSeq(in: data) else { return }
                session.finishedWithError = data.contains("\"error\":{")
                if session.finishedWithError { searchErrors += 1 }
                session.finishedSeq = max(session.finishedSeq, seq)
                session.finishedAt = now
                if let awaited = session.waitingFor, awaited > 0, seq >= awaited { complete(session, at: now) }
            }
            session.stream = stream
            scheduleNext(session)
        }
        LoadSession.startProgress(loop: loop, enabled: options.progress, started: start) {
            "searches \(searches)  events \(events)  rateLimited \(rateLimited)  errors \(postErrors + searchErrors)  "
                + "p99 \(LatencySummary.format(all.summary.p99))"
        }
        loop.run(timeout: options.duration)
        running = false
        loop.run(timeout: 5) { sessions.allSatisfy { $0.waitingFor == nil } }
        let upstreamAfter = upstreamRequests(simURL: options.simURL)

        var report = LoadReport(scenario: "search")
        report.add("sessions", .int(options.sessions))
        report.add("searches", .int(searches))
        report.add("eventsReceived", .int(events))
        report.add("latency", .latency(all.summary))
        report.add("cachedSearchLatency", .latency(repeats.summary))
        report.add("rateLimitErrors", .int(rateLimited))
        report.add("searchErrors", .int(searchErrors))
        report.add("postErrors", .int(postErrors))
        report.add("timeouts", .int(timeouts))
        if let upstreamBefore, let upstreamAfter {
            let upstream = upstreamAfter - upstreamBefore
            report.add("upstreamRequests", .int(upstream))
            report.add(
                "searchesPerUpstreamRequest",
                .number(
                    upstream > 0 ? Double(searches) / Double(upstream) : 0,
                    unit: "(/_sim/stats requests)"))
        } else {
            report.add("upstreamRequests", .text("unavailable (no --sim-url, or its /_sim/stats has no requests)"))
        }
        for session in sessions { session.stream?.close() }
        if options.cleanup { LoadSession.delete(ids, loop: loop, pool: pool) }
        pool.close()
        return report
    }

    /// The simulator's upstream request count (`requests` in `GET {simURL}/_sim/stats`), if any.
    static func upstreamRequests(simURL: String?) -> Int? {
        guard let simURL, let sim = try? Target(url: simURL), let connection = try? sim.connect(timeout: 3) else {
            return nil
        }
        defer { connection.close() }
        guard let response = try? connection.request("GET", sim.basePath + "/_sim/stats"), response.status == 200,
            let stats = try? JSONValue.parse(response.body)
        else { return nil }
        return stats["requests"]?.intValue
    }
}
