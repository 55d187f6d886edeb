import JSON
import WireClient

#if canImport(Glibc)
    import Glibc
#endif

/// `search`: S sessions, each with a stream, issuing a realistic search mix through the
/// `search` view model: Zipf-popular queries (`query` then `submit`), sometimes `loadMore`,
/// sometimes a `sort` change, one action per think time (by default uniform in 10…30 s, a
/// person reading results; `ThinkTime.exponential` is the older closed-loop stress mix).
/// Every search that ends is classified by what the user got (`SearchOutcome`: fresh, cached,
/// stale-marked, rate-limited, failed); POST errors and time-outs count as failed. Reports the
/// counts, the success rate (searches that showed results), latency (scheduled action → the
/// event that ends loading), the latency of cached searches, and searches that showed results
/// per upstream request.
///
package struct SearchScenario {
    /// Tunables.
    package struct Options: Sendable {
        /// Sessions (each with one stream).
        package var sessions = 20
        /// Seconds of load.
        package var duration = 10.0
        /// Seconds of load before `duration` whose searches are not counted (the cache fills; the
        /// upstream count starts after it too). 0: count from the start.
        package var warmup = 0.0
        /// Time between a session's actions.
        package var think = ThinkTime.uniform(min: 10, max: 30)
        /// Queries in the Zipf vocabulary (50: the 50 words; more: a long tail of word pairs).
        package var terms = QueryMix.vocabulary.count
        /// Probability that a query is typed as a variant (case, spaces) of its canonical form.
        package var variants = 0.0
        /// The GitHub simulator's base URL, for the upstream request count (`GET /_sim/stats`).
        package var simURL: String?
        /// Keep-alive connections for the POSTs.
        package var connections = 8
        /// Random seed.
        package var seed: UInt64 = 42
        /// Print a progress line to stderr every second.
        package var progress = true
        /// Delete the sessions afterwards.
        package var cleanup = true
        /// Each session a person of its own: before the load, session `i`'s person `load-user-i` signs in
        /// through the simulator (`simURL`, which must be the server's GitHub), and every request of the
        /// session carries their login cookie, so their uncached searches spend their own budget.
        package var signedIn = false
        /// Defaults.
        package init() {}
    }

    /// How long a simulated user waits between actions.
    package enum ThinkTime: Sendable, Equatable {
        /// Uniformly random in `min…max` seconds; each user's first action comes at a uniformly
        /// random time in `0…max`, so users do not act in lockstep.
        case uniform(min: Double, max: Double)
        /// Exponentially distributed with this mean (the first action after one such wait too).
        case exponential(mean: Double)
    }

    private final class Session {
        let base: String
        var stream: StreamClient?
        var waitingFor: Int?  // inputSeq of the action whose results we await
        var scheduled: UInt64 = 0
        var repeatSearch = false
        var key = ""
        var view = SearchStreamState()
        var outcome = SearchOutcome.failed
        var query: String?
        var sort = "best-match"
        var page = 1
        var finishedSeq = 0  // the latest inputSeq whose search finished (results or error)
        var finishedAt: UInt64 = 0
        /// Sent with every request of the session (its person's login cookie, if signed in).
        var headers: [(String, String)] = []
        init(id: String) { base = "/api/sessions/\(id)/search/" }
    }

    /// Runs the scenario against `target`.
    package static func run(target: Target, options: Options) throws -> LoadReport {
        let loop = try LoadLoop()
        defer { loop.close() }
        let pool = RequestPool(loop: loop, target: target, size: options.connections)
        SystemProbe.raiseOpenFileLimit(to: options.sessions + options.connections + 256)
        var cookies: [(String, String)] = []
        if options.signedIn {
            guard let simURL = options.simURL else {
                throw SignInFlow.Failure(description: "signing people in needs the simulator's URL (--sim-url)")
            }
            let simulator = try Target(url: simURL)
            for i in 0..<options.sessions {
                cookies.append(try SignInFlow.signIn(target: target, simulator: simulator, login: "load-user-\(i)"))
            }
        }
        let personal = cookies
        var upstreamBefore = upstreamRequests(simURL: options.simURL)
        let ids = try LoadSession.create(options.sessions, loop: loop, pool: pool) { i in
            personal.isEmpty ? [] : [personal[i]]
        }
        let sessions = ids.enumerated().map { i, id in
            let s = Session(id: id)
            if !personal.isEmpty { s.headers = [personal[i]] }
            return s
        }
        var mix = QueryMix(seed: options.seed, terms: options.terms, variants: options.variants)
        var all = LatencyHistogram()
        var repeats = LatencyHistogram()
        var outcomes = SearchOutcomeCounts()
        var events = 0
        var postErrors = 0
        var timeouts = 0
        var served = Set<String>()  // keys (query|sort|page) that already returned results in this run
        var running = true
        let start = LoadLoop.now()
        let measuredFrom = start + UInt64(options.warmup * 1e9)
        let end = measuredFrom + UInt64(options.duration * 1e9)

        /// Posts one input of the session's current action. With `then`, a 202 runs `then` (the
        /// action's next input) instead of awaiting results, so inputs reach the server in order.
        func post(_ session: Session, _ input: String, _ body: String, then: (() -> Void)? = nil) {
            let action = session.scheduled
            pool.submit(
                "POST", session.base + input, headers: [("Content-Type", "application/json")] + session.headers,
                body: Array(body.utf8)
            ) { result in
                // A reply for an action that already timed out must not touch the next action.
                let current = session.scheduled == action && session.waitingFor != nil
                guard case .success(let r) = result, r.status == 202 else {
                    if action >= measuredFrom { postErrors += 1 }
                    if current {
                        if action >= measuredFrom { outcomes.record(.failed) }
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
            if session.scheduled >= measuredFrom {  // warm-up searches are not counted
                all.record(nanoseconds: arrival &- session.scheduled)
                outcomes.record(session.outcome)
                if session.outcome.showedResults && session.repeatSearch {
                    repeats.record(nanoseconds: arrival &- session.scheduled)
                }
            }
            if session.outcome.showedResults { served.insert(session.key) }
            session.waitingFor = nil
            scheduleNext(session)
        }
        func act(_ session: Session) {
            guard running, LoadLoop.now() < end else { return }
            session.scheduled = LoadLoop.now()
            if session.view.isRateLimited {
                // The page shows a disabled search and a countdown: the user's attempt ends there, with
                // no request (the view model would ignore it and send no event).
                if session.scheduled >= measuredFrom { outcomes.record(.rateLimited) }
                scheduleNext(session)
                return
            }
            session.waitingFor = -1  // until the 202 tells the inputSeq
            let u = mix.nextUniform()
            if session.query != nil && session.view.hasMore && u < 0.2 {
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
            // Keyed by the query as GitHub reads it (case and spaces do not matter), so "cached"
            // means "this search already showed results in this run", however it was typed.
            session.key = "\(SearchScenario.canonical(session.query ?? ""))|\(session.sort)|\(session.page)"
            session.repeatSearch = served.contains(session.key)
            let deadline = session.scheduled
            loop.schedule(after: 10) {
                if session.scheduled == deadline && session.waitingFor != nil {
                    if deadline >= measuredFrom {
                        timeouts += 1
                        outcomes.record(.failed)
                    }
                    session.waitingFor = nil
                    scheduleNext(session)
                }
            }
        }
        func scheduleNext(_ session: Session, first: Bool = false) {
            let wait: Double
            switch options.think {
            case .uniform(let low, let high):
                wait = first ? high * mix.nextUniform() : low + (high - low) * mix.nextUniform()
            case .exponential(let mean):
                wait = -mean * Glibc.log(1 - mix.nextUniform())
            }
            loop.schedule(after: wait) { act(session) }
        }
        for (index, id) in ids.enumerated() {
            let session = sessions[index]
            let stream = try StreamClient(
                loop: loop, target: target, path: "/api/sessions/\(id)/events", headers: session.headers)
            stream.onEvent = { event, now in
                events += 1
                if event.event == "snapshot" {
                    if let value = try? JSONValue.parse(event.data),
                        let search = value["viewModels"]?["search"]?.objectValue
                    {
                        session.view.apply(outputs: search)
                    }
                    return
                }
                guard event.event == "search" else { return }
                let ended = session.view.apply(eventData: event.data)
                guard ended, let seq = LoadSession.inputSeq(in: event.data) else { return }
                session.outcome = session.view.outcome(keySeenBefore: session.repeatSearch)
                session.finishedSeq = max(session.finishedSeq, seq)
                session.finishedAt = now
                if let awaited = session.waitingFor, awaited > 0, seq >= awaited { complete(session, at: now) }
            }
            session.stream = stream
            scheduleNext(session, first: true)
        }
        LoadSession.startProgress(loop: loop, enabled: options.progress, started: start) {
            "searches \(outcomes.total)  results \(outcomes.showedResults)  stale \(outcomes[.stale])  "
                + "rateLimited \(outcomes[.rateLimited])  failed \(outcomes[.failed])  "
                + "p99 \(LatencySummary.format(all.summary.p99))"
        }
        if options.warmup > 0 {
            loop.schedule(after: options.warmup) { upstreamBefore = upstreamRequests(simURL: options.simURL) }
        }
        loop.run(timeout: options.warmup + options.duration)
        running = false
        loop.run(timeout: 5) { sessions.allSatisfy { $0.waitingFor == nil } }
        let upstreamAfter = upstreamRequests(simURL: options.simURL)

        var report = LoadReport(scenario: "search")
        report.add("sessions", .int(options.sessions))
        report.add("signedIn", .text(options.signedIn ? "every session its own person" : "anonymous"))
        report.add("warmup", .number(options.warmup, unit: "s (not counted)"))
        report.add("duration", .number(options.duration, unit: "s"))
        report.add("think", .text(SearchScenario.describe(options.think)))
        report.add(
            "queryMix", .text("\(min(options.terms, QueryMix.maximumTerms)) terms, variants \(options.variants)"))
        report.add("searches", .int(outcomes.total))
        report.add("showedResults", .int(outcomes.showedResults))
        report.add("successRate", .number(outcomes.successRate * 100, unit: "% of searches showed results"))
        report.add("fresh", .int(outcomes[.fresh]))
        report.add("cached", .int(outcomes[.cached]))
        report.add("stale", .int(outcomes[.stale]))
        report.add("rateLimited", .int(outcomes[.rateLimited]))
        report.add("failed", .int(outcomes[.failed]))
        report.add("eventsReceived", .int(events))
        report.add("latency", .latency(all.summary))
        report.add("cachedSearchLatency", .latency(repeats.summary))
        report.add("postErrors", .int(postErrors))
        report.add("timeouts", .int(timeouts))
        if let upstreamBefore, let upstreamAfter {
            let upstream = upstreamAfter - upstreamBefore
            report.add("upstreamRequests", .int(upstream))
            report.add(
                "searchesPerUpstreamRequest",
                .number(
                    outcomes.showedResultsPerUpstreamRequest(upstream),
                    unit: "(searches that showed results / _sim/stats requests)"))
        } else {
            report.add("upstreamRequests", .text("unavailable (no --sim-url, or its /_sim/stats has no requests)"))
        }
        for session in sessions { session.stream?.close() }
        if options.cleanup {
            // A signed-in session answers only its person's cookie: signing them out ends their sessions.
            if personal.isEmpty {
                LoadSession.delete(ids, loop: loop, pool: pool)
            } else {
                for cookie in personal { try? SignInFlow.signOut(target: target, cookie: cookie) }
            }
        }
        pool.close()
        return report
    }

    /// `query` as GitHub reads it for the load tool's bookkeeping: trimmed, inner spaces collapsed,
    /// lower-cased.
    static func canonical(_ query: String) -> String {
        query.lowercased().split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ")
    }

    static func describe(_ think: ThinkTime) -> String {
        switch think {
        case .uniform(let low, let high): return "uniform \(low)…\(high) s"
        case .exponential(let mean): return "exponential, mean \(mean) s"
        }
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
