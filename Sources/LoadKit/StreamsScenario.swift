import Glibc
import WireClient

/// `streams`: K sessions each with one open stream; time to establish, server memory per
/// session+stream, then one broadcast through the shared `status` view model (test hook
/// `POST /api/_test/status`) and the time until every stream received it.
///
/// Several loaders, one broadcast (`broadcastReadyFile`, a cluster where every node has loaders of its own):
/// a loader then posts nothing; it writes the file once its streams are held and measured, and waits for
/// someone else's status change to reach every stream. It reports when the first and the last of its
/// streams got it in CLOCK_MONOTONIC nanoseconds (`broadcastFirstAtNs`, `broadcastLastAtNs`: one clock for
/// every process of the host), so whoever posted times the whole fan-out from its own post.
///
/// Runs entirely on the calling thread (its own `LoadLoop`).
package struct StreamsScenario {
    /// Tunables.
    package struct Options: Sendable {
        /// Streams (and sessions) to open.
        package var streams = 1000
        /// Server process id for RSS (else `/metrics`).
        package var pid: Int32?
        /// Seconds to hold the streams open before measuring memory.
        package var hold = 2.0
        /// Streams being established at once.
        package var concurrency = 200
        /// Keep-alive connections for session creation.
        package var connections = 16
        /// Seconds to wait for the broadcast to reach every stream.
        package var broadcastTimeout = 30.0
        /// Observe one broadcast posted by someone else instead of posting one (see the type's doc): written
        /// (the arming time, monotonic ns) once the streams are held; nil: post the broadcast and its reset.
        package var broadcastReadyFile: String?
        /// Seconds an observer waits for the broadcast to start (the other loaders may still be establishing).
        package var broadcastStartTimeout = 600.0
        /// An observer writes this file (the time, monotonic ns) once the broadcast reached every stream or
        /// `broadcastTimeout` passed.
        package var broadcastSeenFile: String?
        /// Keep the streams open after the broadcast until this file exists (at most `broadcastTimeout`
        /// more seconds), then close them and delete the sessions: with several loaders on one host, one
        /// loader's teardown then does not take the CPU the others' broadcasts still need.
        package var teardownAfterFile: String?
        /// Where the streams are opened (nil: the target, where the sessions are created). In a cluster the
        /// node that creates a session runs it: another node's streams are fed through Redis.
        package var streamTarget: Target?
        /// Print a progress line to stderr every second.
        package var progress = true
        /// Delete the sessions afterwards, `concurrency` at once (reported: `deleted`, `deleteFailed`, …).
        package var cleanup = true
        /// Seconds to sleep after each batch of socket events (`LoadLoop.readBatchNanos`; 0: none) while the
        /// streams are held and the broadcast is read; not while they are established or torn down.
        package var readBatch = 0.0
        /// Defaults.
        package init() {}
    }

    /// Runs the scenario against `target`.
    package static func run(target: Target, options: Options) throws -> LoadReport {
        let limit = SystemProbe.raiseOpenFileLimit(to: options.streams + options.connections + 256)
        let loop = try LoadLoop()
        defer { loop.close() }
        let pool = RequestPool(loop: loop, target: target, size: options.connections)
        let before = SystemProbe.serverResidentBytes(target: options.streamTarget ?? target, pid: options.pid)
        let started = LoadLoop.now()
        var phase = "creating sessions"
        var established = LatencyHistogram()
        var broadcastLatency = LatencyHistogram()
        var succeeded = 0
        var failed = 0
        var opening = 0
        var next = 0
        var closedEarly = 0
        var broadcastAt: UInt64?
        var broadcastReceived = 0
        var broadcastFirstAt = UInt64.max
        var broadcastLastAt: UInt64 = 0
        var streams: [StreamClient] = []
        var failureSamples: [String] = []
        LoadSession.startProgress(loop: loop, enabled: options.progress, started: started) {
            "\(phase): open \(succeeded)  failed \(failed)  broadcast received \(broadcastReceived)"
        }
        var creationRetries = 0
        let ids = try LoadSession.create(options.streams, loop: loop, pool: pool, retried: &creationRetries)
        phase = "opening streams"
        var streamRetries = 0
        /// Opens the stream of session `index`; a `503` with `Retry-After` (a busy cluster node) is tried again
        /// after that many seconds (at most 5, with jitter), up to 10 times, as `EventSource` would.
        func open(_ index: Int, attempt: Int) {
            do {
                let stream = try StreamClient(
                    loop: loop, target: options.streamTarget ?? target, path: "/api/sessions/\(ids[index])/events")
                var first = true
                var done = false
                var sawBroadcast = false
                func settle(ok: Bool, _ why: String) {
                    guard !done else { return }
                    done = true
                    opening -= 1
                    if ok {
                        succeeded += 1
                    } else {
                        failed += 1
                        if failureSamples.count < 3 { failureSamples.append(why) }
                    }
                    openMore()
                }
                stream.onEvent = { [unowned stream] event, now in
                    if first {
                        first = false
                        established.record(nanoseconds: now - stream.startedAt)
                        settle(ok: true, "")
                    }
                    // Count streams, not events: only this stream's first `status` after the broadcast.
                    if event.event == "status", !sawBroadcast, let at = broadcastAt {
                        sawBroadcast = true
                        broadcastReceived += 1
                        broadcastLatency.record(nanoseconds: now - at)
                        broadcastFirstAt = min(broadcastFirstAt, now)
                        broadcastLastAt = max(broadcastLastAt, now)
                    }
                }
                stream.onHead = { head in
                    guard head.status != 200 else { return }
                    if head.status == 503, attempt < 10, let wait = LoadSession.retryDelay(head) {
                        guard !done else { return }
                        done = true
                        streamRetries += 1
                        loop.schedule(after: wait) {
                            open(index, attempt: attempt + 1)
                        }
                        return
                    }
                    settle(ok: false, "HTTP \(head.status)")
                }
                stream.onClose = { error in
                    if done && !first && error != nil { closedEarly += 1 }
                    settle(ok: false, "\(error.map { "\($0)" } ?? "closed")")
                }
                streams.append(stream)
            } catch {
                opening -= 1
                failed += 1
                if failureSamples.count < 3 { failureSamples.append("\(error)") }
            }
        }
        func openMore() {
            while opening < options.concurrency && next < ids.count {
                let index = next
                next += 1
                opening += 1
                open(index, attempt: 1)
            }
        }
        openMore()
        loop.run(timeout: max(120, Double(ids.count) * 0.02)) { succeeded + failed == ids.count }
        phase = "holding"
        // Held streams only read (keep-alives, the broadcast): their reads are batched from here to the
        // teardown, establishment's request/response steps are not (their latency is measured).
        loop.readBatchNanos = UInt64(max(0, options.readBatch) * 1e9)
        loop.run(timeout: options.hold)
        let after = SystemProbe.serverResidentBytes(target: options.streamTarget ?? target, pid: options.pid)

        var report = LoadReport(scenario: "streams")
        report.add("streams", .int(options.streams))
        report.add("openFileLimit", .int(limit))
        report.add("succeeded", .int(succeeded))
        report.add("failed", .int(failed))
        report.add("creationRetries", .int(creationRetries))
        report.add("streamRetries", .int(streamRetries))
        if !failureSamples.isEmpty { report.add("failureSamples", .text(failureSamples.joined(separator: "; "))) }
        report.add("establish", .latency(established.summary))
        if let before, let after {
            report.add("rssBefore", .number(Double(before.bytes) / 1_048_576, unit: "MiB"))
            report.add("rssAfter", .number(Double(after.bytes) / 1_048_576, unit: "MiB"))
            if succeeded > 0 {
                report.add("bytesPerSessionStream", .int((after.bytes - before.bytes) / succeeded))
            }
            report.add("rssSource", .text(after.source))
        } else {
            report.add("rssSource", .text("unavailable (no --pid and no process_resident_memory_bytes in /metrics)"))
        }

        phase = "broadcast"
        let open = succeeded - closedEarly
        if let readyFile = options.broadcastReadyFile {
            broadcastAt = LoadLoop.now()
            try writeReady(readyFile, armedAt: broadcastAt!)
            loop.run(timeout: options.broadcastStartTimeout) { broadcastReceived > 0 || open == 0 }
            loop.run(timeout: options.broadcastTimeout) { broadcastReceived >= open }
            if let seenFile = options.broadcastSeenFile { try writeReady(seenFile, armedAt: LoadLoop.now()) }
            if let teardownFile = options.teardownAfterFile {
                let deadline = LoadLoop.now() + UInt64(options.broadcastTimeout * 1e9)
                while access(teardownFile, F_OK) != 0, LoadLoop.now() < deadline { loop.run(timeout: 0.01) }
            }
            report.add("broadcast", .text(broadcastReceived > 0 ? "observed (posted by another)" : "none came"))
            report.add("broadcastReceived", .int(broadcastReceived))
            if broadcastReceived > 0 {
                report.add("broadcastFirstAtNs", .int(Int(broadcastFirstAt)))
                report.add("broadcastLastAtNs", .int(Int(broadcastLastAt)))
            }
        } else {
            var hookStatus = 0
            broadcastAt = LoadLoop.now()
            pool.submit(
                "POST", "/api/_test/status", headers: [("Content-Type", "application/json")],
                body: Array("{\"reachable\":false,\"message\":\"load-test broadcast\"}".utf8)
            ) { result in
                if case .success(let r) = result { hookStatus = r.status } else { hookStatus = -1 }
            }
            loop.run(timeout: 10) { hookStatus != 0 }
            // 404: no such API route (a server without --test-hooks); 405: what a server whose unknown API paths
            // fell through to its static files answered to the POST (builds before the /api/ prefix was
            // route-only).
            if hookStatus == 404 || hookStatus == 405 {
                report.add("broadcast", .text("broadcast skipped: server has no test hook"))
            } else if hookStatus < 200 || hookStatus > 299 {
                report.add("broadcast", .text("broadcast failed: test hook answered \(hookStatus)"))
            } else {
                loop.run(timeout: options.broadcastTimeout) { broadcastReceived >= open }
                report.add("broadcastReceived", .int(broadcastReceived))
                report.add("broadcastAllReceived", .number(broadcastLatency.summary.max / 1000, unit: "ms"))
                report.add("broadcastLatency", .latency(broadcastLatency.summary))
                var resetDone = false
                pool.submit(
                    "POST", "/api/_test/status", headers: [("Content-Type", "application/json")],
                    body: Array("{\"reachable\":true,\"message\":null}".utf8)
                ) { _ in resetDone = true }
                loop.run(timeout: 5) { resetDone }  // closing the pool first would drop the reset
            }
        }
        report.add("streamsClosedEarly", .int(closedEarly))
        loop.readBatchNanos = 0
        for stream in streams { stream.close() }
        pool.close()
        if options.cleanup {
            // As many at once as streams were established at once: a whole crowd leaving together.
            phase = "deleting sessions"
            let deletes = RequestPool(loop: loop, target: target, size: options.concurrency)
            let d = LoadSession.delete(ids, loop: loop, pool: deletes, timeout: max(60, Double(ids.count) * 0.01))
            deletes.close()
            report.add("deleted", .int(d.deleted))
            report.add("deleteFailed", .int(d.failed))
            report.add("deleteRetries", .int(d.retried))
            report.add("deleteSeconds", .number(d.seconds, unit: "s"))
            report.add("deleteLatency", .latency(d.latency.summary))
            if !d.failureSamples.isEmpty {
                report.add("deleteFailureSamples", .text(d.failureSamples.joined(separator: "; ")))
            }
        }
        return report
    }

    /// Writes `path` (the arming time in monotonic nanoseconds and a newline) through a temporary file and a
    /// rename, so whoever waits for it never reads it half written.
    private static func writeReady(_ path: String, armedAt: UInt64) throws {
        let temporary = path + ".tmp"
        let fd = Glibc.open(temporary, O_CREAT | O_WRONLY | O_TRUNC, 0o644)
        guard fd >= 0 else { throw WireError.malformed("cannot write \(temporary): errno \(errno)") }
        let text = Array("\(armedAt)\n".utf8)
        let written = text.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        Glibc.close(fd)
        guard written == text.count, rename(temporary, path) == 0 else {
            throw WireError.malformed("cannot write \(path): errno \(errno)")
        }
    }
}
