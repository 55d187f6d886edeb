import JSON
import WireClient

#if canImport(Glibc)
    import Glibc
#endif

/// `latency`: S sessions with open streams; greeting `name` inputs at a fixed total rate R,
/// alternating "" and a name so every input flips `buttonEnabled` and yields exactly one event
/// (unless the input before it was rejected: then it changes nothing and is counted as `noChange`).
/// Latency runs from each POST's *scheduled* send time to the arrival of the event carrying
/// its `inputSeq` (open loop: a slow server cannot hide latency by slowing the client).
/// `ackLatency` runs from the same scheduled time to the arrival of the input's `202`.
///
/// Sessions are created (and deleted) on `target`; the inputs go to `Options.postTarget` and the
/// streams to `Options.streamTarget` when set (both default to `target`). In cluster mode the node
/// that creates a session owns it, so `target` is the owner and the other two may name other nodes.
///
/// Runs entirely on the calling thread (its own `LoadLoop`).
package struct LatencyScenario {
    /// Tunables.
    package struct Options: Sendable {
        /// Sessions (each with one stream).
        package var sessions = 200
        /// Inputs per second in total.
        package var rate = 2000.0
        /// Seconds of load.
        package var duration = 10.0
        /// Keep-alive connections for the POSTs.
        package var connections = 16
        /// Seconds to wait for outstanding events after the last input.
        package var grace = 2.0
        /// Print a progress line to stderr every second.
        package var progress = true
        /// Delete the sessions afterwards.
        package var cleanup = true
        /// Spin instead of sleeping between events (see `LoadLoop.busyPoll`), for the load phase.
        package var busyPoll = false
        /// Send each input with an `Idempotency-Key` of its own (its number in the run), as the browser does.
        package var idempotencyKeys = false
        /// Sessions per event stream: 0, each session its own stream (`GET /api/sessions/{id}/events`); N,
        /// the sessions in groups of N, each group on one multiplexed stream (`GET /api/events?sessions=…`),
        /// as a browser's tabs share one connection.
        package var tabs = 0
        /// Where the inputs are POSTed (nil: the target the sessions are created on).
        package var postTarget: Target?
        /// Where the event streams are opened (nil: the target the sessions are created on).
        package var streamTarget: Target?
        /// A file to write every measured latency to (nil: none), one line per input whose event
        /// arrived: `<scheduled send time, µs after the first> <latency, µs>`, in arrival order, after
        /// a `#` header line. For pooling runs exactly (percentiles of percentiles are not
        /// percentiles) and for seeing when in a run the slow inputs were.
        package var samplesPath: String?
        /// Defaults.
        package init() {}
    }

    private final class Session {
        let inputPath: String
        var nameSet = false  // the value of the last input scheduled (they alternate)
        var accepted: [(seq: Int, value: Bool)] = []  // every 202, in arrival order
        var pending: [Int: UInt64] = [:]  // inputSeq -> scheduled time, event not yet seen
        var early: [Int: UInt64] = [:]  // inputSeq -> event arrival, 202 not yet seen
        init(id: String) { inputPath = "/api/sessions/\(id)/greeting/name" }
    }

    /// Runs the scenario against `target`.
    package static func run(target: Target, options: Options) throws -> LoadReport {
        let loop = try LoadLoop()
        defer { loop.close() }
        let pool = RequestPool(loop: loop, target: target, size: options.connections)
        let postTarget = options.postTarget ?? target
        let streamTarget = options.streamTarget ?? target
        // Inputs get their own pool only when they go elsewhere (the default is one pool, as before).
        let postPool =
            options.postTarget == nil
            ? pool : RequestPool(loop: loop, target: postTarget, size: options.connections)
        SystemProbe.raiseOpenFileLimit(to: options.sessions + 2 * options.connections + 256)
        // Opened first: a path it cannot write fails the run before any load, not after.
        let samplesFile = try options.samplesPath.map { path in
            guard let file = fopen(path, "w") else { throw WireError.system("fopen(\(path))", errno) }
            return file
        }
        defer { if let samplesFile { fclose(samplesFile) } }
        let ids = try LoadSession.create(options.sessions, loop: loop, pool: pool)
        let sessions = ids.map(Session.init)
        var latency = LatencyHistogram()
        var samples: [(scheduled: UInt64, latency: UInt64)] = []
        var ack = LatencyHistogram()  // scheduled time -> 202 received
        var lag = LatencyHistogram()
        var sent = 0
        var accepted = 0
        var received = 0
        var errors = 0
        var streamErrors = 0
        var unmatched = 0
        var statusCounts: [Int: Int] = [:]
        var snapshots = 0
        var streamRefusal: String?  // the first refused stream's status and detail
        var running = true
        var start: UInt64 = 0
        func measured(scheduled: UInt64, arrival: UInt64) {
            latency.record(nanoseconds: arrival &- scheduled)
            received += 1
            if options.samplesPath != nil { samples.append((scheduled &- start, arrival &- scheduled)) }
        }

        // Each stream with the sessions it carries: one each, or groups of `tabs` on a multiplexed stream
        // (whose events name their session: `"session":ID`).
        let groupSize = options.tabs > 0 ? options.tabs : 1
        let byID = Dictionary(uniqueKeysWithValues: zip(ids, sessions))
        var failedSessions = 0  // sessions whose stream was refused or closed before it answered
        var streams: [StreamClient] = []
        for start in stride(from: 0, to: ids.count, by: groupSize) {
            let group = Array(ids[start..<min(start + groupSize, ids.count)])
            let path =
                options.tabs > 0
                ? "/api/events?sessions=" + group.joined(separator: ",") : "/api/sessions/\(group[0])/events"
            let only = options.tabs > 0 ? nil : byID[group[0]]
            let stream = try StreamClient(loop: loop, target: streamTarget, path: path)
            stream.onEvent = { event, now in
                if event.event == "snapshot" {
                    snapshots += 1
                    return
                }
                guard event.event == "greeting", let seq = LoadSession.inputSeq(in: event.data),
                    let session = only
                        ?? LoadSession.string(after: "\"session\":\"", in: event.data).flatMap({ byID[$0] })
                else { return }
                if let scheduled = session.pending.removeValue(forKey: seq) {
                    measured(scheduled: scheduled, arrival: now)
                } else {
                    session.early[seq] = now
                }
            }
            stream.onHead = { head in
                guard head.status != 200 else { return }
                streamErrors += 1
                failedSessions += group.count
                if streamRefusal == nil { streamRefusal = LatencyScenario.refusal(head) }
            }
            stream.onClose = { error in
                guard running, let error else { return }
                streamErrors += 1
                if stream.head == nil { failedSessions += group.count }
                if streamRefusal == nil, stream.head == nil {
                    // bff closes connections past --max-connections-per-client at once, without a response
                    streamRefusal =
                        "closed before a response (\(error)): a per-client connection limit? "
                        + "--source spreads the run over several client addresses"
                }
            }
            streams.append(stream)
        }
        loop.run(timeout: 30) { snapshots + failedSessions >= sessions.count }
        guard snapshots == sessions.count else {
            throw WireError.malformed(
                "only \(snapshots) of \(sessions.count) streams delivered a snapshot"
                    + (streamRefusal.map { "; the first refused: \($0)" } ?? ""))
        }

        let interval = 1e9 / options.rate
        let total = Int(options.rate * options.duration)
        start = LoadLoop.now() + 1_000_000
        let cpuBefore = SystemProbe.ownCPUSeconds()
        let bodies = [Array("{\"value\":\"load\"}".utf8), Array("{\"value\":\"\"}".utf8)]
        var completed = 0
        func scheduled(_ k: Int) -> UInt64 { start + UInt64(Double(k) * interval) }
        func tick() {
            let now = LoadLoop.now()
            while sent < total && scheduled(sent) <= now {
                let due = scheduled(sent)
                lag.record(nanoseconds: now - due)
                let session = sessions[sent % sessions.count]
                session.nameSet.toggle()
                let value = session.nameSet
                sent += 1
                var headers = [("Content-Type", "application/json")]
                if options.idempotencyKeys { headers.append(("Idempotency-Key", "load-\(sent)")) }
                postPool.submit(
                    "POST", session.inputPath, headers: headers, body: bodies[value ? 0 : 1]
                ) { result in
                    completed += 1
                    switch result {
                    case .success(let response):
                        if response.status == 202 { ack.record(nanoseconds: LoadLoop.now() &- due) }
                        statusCounts[response.status, default: 0] += 1
                        guard response.status == 202, let seq = LoadSession.inputSeq(in: response.text) else {
                            errors += 1
                            return
                        }
                        accepted += 1
                        session.accepted.append((seq, value))
                        if let arrival = session.early.removeValue(forKey: seq) {
                            measured(scheduled: due, arrival: arrival)
                        } else {
                            session.pending[seq] = due
                        }
                    case .failure:
                        errors += 1
                    }
                }
            }
            if sent < total { loop.schedule(at: scheduled(sent), tick) }
        }
        loop.schedule(at: start, tick)
        LoadSession.startProgress(loop: loop, enabled: options.progress, started: start) {
            let s = latency.summary
            return "sent \(sent)  received \(received)  errors \(errors)  streamErrors \(streamErrors)  "
                + "queued \(postPool.queued)  p50 \(LatencySummary.format(s.p50))  p99 \(LatencySummary.format(s.p99))"
        }
        loop.busyPoll = options.busyPoll
        loop.run(timeout: options.duration + 60) { sent == total && completed == total }
        loop.busyPoll = false
        // An input yields an event only when it changes the name, i.e. when its value differs
        // from the last *accepted* input before it (in inputSeq order; the name starts empty).
        // A rejected input (429, …) leaves the name as it was, so the next one may change nothing.
        func expectedEvents(_ session: Session) -> Set<Int> {
            var expected = Set<Int>()
            var value = false
            for input in session.accepted.sorted(by: { $0.seq < $1.seq }) {
                if input.value != value { expected.insert(input.seq) }
                value = input.value
            }
            return expected
        }
        let expectedTotal = sessions.reduce(0) { $0 + expectedEvents($1).count }
        loop.run(timeout: options.grace) { received >= expectedTotal }
        running = false
        let cpu = SystemProbe.ownCPUSeconds() - cpuBefore
        var lost = 0
        var noChange = 0
        for session in sessions {
            let expected = expectedEvents(session)
            noChange += session.accepted.count - expected.count
            lost += session.pending.keys.reduce(0) { $0 + (expected.contains($1) ? 1 : 0) }
        }
        unmatched = sessions.reduce(0) { $0 + $1.early.count }

        var report = LoadReport(scenario: "latency")
        report.add("sessions", .int(sessions.count))
        report.add("streams", .int(streams.count))
        report.add("inputsKeyed", .text(options.idempotencyKeys ? "yes" : "no"))
        report.add("createdOn", .text(target.description))
        report.add("postedTo", .text(postTarget.description))
        report.add("streamedFrom", .text(streamTarget.description))
        report.add("rate", .number(options.rate, unit: "inputs/s"))
        report.add("duration", .number(options.duration, unit: "s"))
        report.add("sent", .int(sent))
        report.add("accepted", .int(accepted))
        report.add("received", .int(received))
        report.add("errors", .int(errors))
        report.add("streamErrors", .int(streamErrors))
        report.add("lost", .int(lost))
        report.add("noChange", .int(noChange))
        report.add("unmatchedEvents", .int(unmatched))
        report.add("latency", .latency(latency.summary))
        report.add("ackLatency", .latency(ack.summary))
        report.add("scheduleLag", .latency(lag.summary))
        report.add("clientCPU", .number(cpu, unit: "s"))
        report.add("clientCPUPerInput", .number(sent > 0 ? cpu * 1e6 / Double(sent) : 0, unit: "µs (POST + its event)"))
        report.add("clientWait", .text(options.busyPoll ? "busy-poll" : "sleep"))
        report.add(
            "statusCounts",
            .text(
                statusCounts.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }
                    .joined(separator: " ")))
        for stream in streams { stream.close() }
        if options.cleanup { LoadSession.delete(ids, loop: loop, pool: pool) }
        if postPool !== pool { postPool.close() }
        pool.close()
        if let file = samplesFile { try writeSamples(samples, to: file, path: options.samplesPath ?? "") }
        return report
    }

    /// Writes `samples` (ns) to `file` as `LatencyScenario.Options.samplesPath` describes (µs).
    /// "HTTP 429: <the problem's detail>" for a refused stream (the detail cut to 200 characters).
    static func refusal(_ head: WireResponse) -> String {
        let detail = (try? JSONValue.parse(head.body))?["detail"]?.stringValue.map { ": \($0.prefix(200))" }
        return "HTTP \(head.status)\(detail ?? "")"
    }

    private static func writeSamples(
        _ samples: [(scheduled: UInt64, latency: UInt64)], to file: UnsafeMutablePointer<FILE>, path: String
    ) throws {
        var text = "# scheduled_us latency_us\n"
        text.reserveCapacity(samples.count * 16 + 32)
        for s in samples { text += "\(s.scheduled / 1_000) \(s.latency / 1_000)\n" }
        let written = text.utf8CString.withUnsafeBufferPointer { fputs($0.baseAddress!, file) }
        guard written >= 0, fflush(file) == 0 else { throw WireError.system("writing \(path)", errno) }
    }
}
