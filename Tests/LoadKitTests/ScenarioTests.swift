import Foundation
import LoadKit
import Synchronization
import XCTest

/// The scenarios against `GreetingTestServer` (the contract's greeting/status subset).
final class ScenarioTests: XCTestCase {
    func testLatencyOnAHealthyServerReportsEveryInputAndNoErrors() throws {
        try latencyOnAHealthyServer(busyPoll: false)
    }

    func testLatencyWithABusyPollingClientReportsEveryInputAndNoErrors() throws {
        try latencyOnAHealthyServer(busyPoll: true)
    }

    private func latencyOnAHealthyServer(busyPoll: Bool) throws {
        let server = try GreetingTestServer()
        defer { server.stop() }
        var options = LatencyScenario.Options()
        options.sessions = 10
        options.rate = 400
        options.duration = 1
        options.connections = 4
        options.progress = false
        options.busyPoll = busyPoll
        let report = try LatencyScenario.run(target: Target(url: "http://127.0.0.1:\(server.port)"), options: options)
        XCTAssertTrue(report.table.contains(busyPoll ? "busy-poll" : "sleep"), report.table)
        XCTAssertEqual(report.int("sent"), 400, report.table)
        XCTAssertEqual(report.int("accepted"), 400, report.table)
        XCTAssertEqual(report.int("errors"), 0, report.table)
        XCTAssertEqual(report.int("lost"), 0, report.table)
        // A session's inputs alternate between two names over 4 connections; on a busy machine two of
        // them can reach the server in the other order, and an input that repeats the name changes
        // nothing (`noChange`). What must hold: every accepted input either produced its event or is
        // counted as changing nothing; none is lost.
        let received = try XCTUnwrap(report.int("received"))
        let noChange = try XCTUnwrap(report.int("noChange"))
        XCTAssertEqual(received + noChange, 400, report.table)
        XCTAssertLessThan(noChange, 40, "reordering is the exception: \(report.table)")
        let latency = try XCTUnwrap(report.latency("latency"))
        XCTAssertEqual(latency.count, received)
        XCTAssertGreaterThan(latency.p50, 1, "a round trip over loopback takes more than 1 µs")
        XCTAssertLessThan(latency.p50, 200_000, report.table)
        XCTAssertLessThanOrEqual(latency.p50, latency.p99)
        XCTAssertTrue(report.json.text.contains("\"p99_9Us\""))
    }

    /// `--idempotency-keys`: every input carries a key of its own, as the browser's do; without it, none.
    func testLatencySendsAKeyOfItsOwnWithEachInputOnlyWhenAsked() throws {
        for withKeys in [false, true] {
            let server = try GreetingTestServer()
            defer { server.stop() }
            var options = LatencyScenario.Options()
            options.sessions = 4
            options.rate = 200
            options.duration = 0.5
            options.progress = false
            options.idempotencyKeys = withKeys
            let report = try LatencyScenario.run(
                target: Target(url: "http://127.0.0.1:\(server.port)"), options: options)
            XCTAssertEqual(report.int("accepted"), 100, report.table)
            let keys = server.inputKeys
            XCTAssertEqual(keys.count, 100)
            if withKeys {
                XCTAssertEqual(Set(keys.compactMap { $0 }).count, 100, "one key per input, none repeated")
            } else {
                XCTAssertEqual(keys.compactMap { $0 }, [], "no key unless asked")
            }
        }
    }

    /// Three ports serving the same sessions (like cluster nodes): the sessions are created and
    /// deleted on `--url`, every input goes to `--post-url` and every stream to `--stream-url`, and
    /// nothing goes anywhere else. Without the two options everything goes to `--url` (as before).
    func testLatencySplitsCreationInputsAndStreamsOverThreeBaseURLs() throws {
        let owner = try GreetingTestServer()
        let poster = try GreetingTestServer(sharing: owner)
        let streamer = try GreetingTestServer(sharing: owner)
        defer { for server in [owner, poster, streamer] { server.stop() } }
        func url(_ server: GreetingTestServer) -> String { "http://127.0.0.1:\(server.port)" }
        var options = LatencyScenario.Options()
        options.sessions = 10
        options.rate = 400
        options.duration = 1
        options.connections = 4
        options.progress = false
        options.postTarget = try Target(url: url(poster))
        options.streamTarget = try Target(url: url(streamer))
        let report = try LatencyScenario.run(target: Target(url: url(owner)), options: options)
        XCTAssertEqual(report.int("accepted"), 400, report.table)
        XCTAssertEqual(report.int("errors"), 0, report.table)
        XCTAssertEqual(report.int("streamErrors"), 0, report.table)
        XCTAssertEqual(report.int("lost"), 0, report.table)
        // Events reach the streams on the third port: the inputs posted to the second one arrive there.
        XCTAssertEqual((report.int("received") ?? 0) + (report.int("noChange") ?? 0), 400, report.table)
        XCTAssertGreaterThan(report.int("received") ?? 0, 360, report.table)
        typealias Counts = [GreetingTestServer.Kind: Int]
        func counts(_ server: GreetingTestServer) -> Counts {
            Dictionary(
                uniqueKeysWithValues: [.create, .stream, .input, .delete, .other].map { ($0, server.handled($0)) })
        }
        XCTAssertEqual(counts(owner), [.create: 10, .stream: 0, .input: 0, .delete: 10, .other: 0])
        XCTAssertEqual(counts(poster), [.create: 0, .stream: 0, .input: 400, .delete: 0, .other: 0])
        XCTAssertEqual(counts(streamer), [.create: 0, .stream: 10, .input: 0, .delete: 0, .other: 0])
        guard case .text(let created)? = report["createdOn"], case .text(let posted)? = report["postedTo"],
            case .text(let streamed)? = report["streamedFrom"]
        else { return XCTFail(report.table) }
        XCTAssertEqual([created, posted, streamed], [url(owner), url(poster), url(streamer)])

        // Defaults: one base URL for everything.
        options.postTarget = nil
        options.streamTarget = nil
        options.duration = 0.25
        let single = try LatencyScenario.run(target: Target(url: url(streamer)), options: options)
        XCTAssertEqual(single.int("accepted"), 100, single.table)
        XCTAssertEqual(single.int("lost"), 0, single.table)
        XCTAssertEqual(counts(streamer), [.create: 10, .stream: 20, .input: 100, .delete: 10, .other: 0])
        XCTAssertEqual(counts(poster)[.input], 400, "the second run sent nothing to the first run's --post-url")
    }

    func testLatencyReportsErrorsWhenTheServerStopsMidRun() throws {
        let server = try GreetingTestServer()
        server.stopAfterInputs = 100
        defer { server.stop() }
        var options = LatencyScenario.Options()
        options.sessions = 5
        options.rate = 200
        options.duration = 1
        options.connections = 2
        options.grace = 0.5
        options.progress = false
        options.cleanup = false
        let report = try LatencyScenario.run(target: Target(url: "http://127.0.0.1:\(server.port)"), options: options)
        XCTAssertEqual(report.int("sent"), 200, report.table)
        XCTAssertLessThanOrEqual(report.int("accepted") ?? 0, 100, report.table)
        XCTAssertGreaterThanOrEqual(report.int("errors") ?? 0, 100, report.table)
        XCTAssertEqual(report.int("streamErrors"), 5, report.table)
        // Every input ended one way or the other, and every accepted one is accounted for.
        let accepted = try XCTUnwrap(report.int("accepted"))
        let errors = try XCTUnwrap(report.int("errors"))
        XCTAssertEqual(accepted + errors, 200, report.table)
        XCTAssertEqual(
            accepted, (report.int("received") ?? 0) + (report.int("lost") ?? 0) + (report.int("noChange") ?? 0),
            report.table)
    }

    func testLatencyDoesNotCountInputsAfterARejectionAsLost() throws {
        let server = try GreetingTestServer()
        server.rejectEvery = 7
        defer { server.stop() }
        var options = LatencyScenario.Options()
        options.sessions = 4
        options.rate = 280
        options.duration = 1
        options.connections = 1
        options.progress = false
        let report = try LatencyScenario.run(target: Target(url: "http://127.0.0.1:\(server.port)"), options: options)
        XCTAssertEqual(report.int("sent"), 280, report.table)
        XCTAssertEqual(report.int("errors"), 40, report.table)
        XCTAssertEqual(report.int("accepted"), 240, report.table)
        XCTAssertEqual(report.int("lost"), 0, report.table)
        let noChange = try XCTUnwrap(report.int("noChange"))
        XCTAssertGreaterThan(noChange, 0, report.table)
        XCTAssertEqual((report.int("received") ?? 0) + noChange, 240, report.table)
        guard case .text(let statuses)? = report["statusCounts"] else { return XCTFail(report.table) }
        XCTAssertEqual(statuses, "202:240 429:40")
    }

    func testStreamsOpensAllAndMeasuresBroadcastFanOut() throws {
        let server = try GreetingTestServer()
        defer { server.stop() }
        let report = try runStreams(60, on: server) { $0.pid = getpid() }
        XCTAssertEqual(report.int("succeeded"), 60, report.table)
        XCTAssertEqual(report.int("failed"), 0, report.table)
        XCTAssertEqual(report.int("broadcastReceived"), 60, report.table)
        XCTAssertEqual(report.latency("establish")?.count, 60)
        XCTAssertNotNil(report.int("bytesPerSessionStream"), report.table)
    }

    func testStreamsDeletesEverySessionAndRetriesABusyServer() throws {
        let server = try GreetingTestServer()
        server.busyDeletes = 7
        defer { server.stop() }
        let report = try runStreams(30, on: server) { $0.concurrency = 8 }
        XCTAssertEqual(report.int("deleted"), 30, report.table)
        XCTAssertEqual(report.int("deleteRetries"), 7, report.table)
        XCTAssertEqual(report.int("deleteFailed"), 0, report.table)
        XCTAssertEqual(report.latency("deleteLatency")?.count, 30)
        XCTAssertEqual(server.sessionCount, 0)
    }

    func testStreamsCountsADeleteThatFailsAsFailed() throws {
        let server = try GreetingTestServer()
        defer { server.stop() }
        _ = try runStreams(5, on: server) { $0.cleanup = false }
        // Ids the server does not have: each delete a failure, with its status; the run's kept sessions stay.
        let loop = try LoadLoop()
        defer { loop.close() }
        let pool = RequestPool(loop: loop, target: try Target(url: "http://127.0.0.1:\(server.port)"), size: 2)
        let outcome = LoadSession.delete(["s-none-1", "s-none-2"], loop: loop, pool: pool, timeout: 10)
        XCTAssertEqual(outcome.deleted, 0)
        XCTAssertEqual(outcome.failed, 2)
        XCTAssertEqual(outcome.failureSamples.first?.hasPrefix("HTTP 404"), true, "\(outcome.failureSamples)")
        XCTAssertEqual(server.sessionCount, 5)
    }

    func testSeveralLoadersObserveOneBroadcastPostedByAnother() throws {
        // Two "nodes" sharing their sessions, a loader on each; the test posts the one broadcast.
        let a = try GreetingTestServer()
        let b = try GreetingTestServer(sharing: a)
        defer {
            a.stop()
            b.stop()
        }
        let folder = NSTemporaryDirectory() + "observe-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let reports = Mutex<[Int: LoadReport]>([:])
        let loaders = [a, b].enumerated().map { i, server in
            Thread {
                var o = StreamsScenario.Options()
                o.streams = 20
                o.hold = 0
                o.progress = false
                o.broadcastReadyFile = "\(folder)/ready\(i)"
                o.broadcastStartTimeout = 30
                let target = try? Target(url: "http://127.0.0.1:\(server.port)")
                let report = target.flatMap { try? StreamsScenario.run(target: $0, options: o) }
                reports.withLock { $0[i] = report }
            }
        }
        for loader in loaders { loader.start() }
        let ready = ["\(folder)/ready0", "\(folder)/ready1"]
        let deadline = Date().addingTimeInterval(30)
        while !ready.allSatisfy({ FileManager.default.fileExists(atPath: $0) }), Date() < deadline {
            usleep(10_000)  // polls for the loaders' files; the post waits for both
        }
        XCTAssertTrue(ready.allSatisfy { FileManager.default.fileExists(atPath: $0) }, "a loader never got ready")
        XCTAssertEqual(a.handled(.statusHook) + b.handled(.statusHook), 0, "an observer posted a broadcast")
        let postedAt = LoadLoop.now()
        let loop = try LoadLoop()
        let pool = RequestPool(loop: loop, target: try Target(url: "http://127.0.0.1:\(a.port)"), size: 1)
        var status = 0
        pool.submit("POST", "/api/_test/status", body: Array("{}".utf8)) { r in
            if case .success(let response) = r { status = response.status }
        }
        loop.run(timeout: 10) { status != 0 }
        XCTAssertEqual(status, 200)
        while reports.withLock({ $0.count }) < 2, Date() < deadline.addingTimeInterval(30) { usleep(10_000) }
        pool.close()
        loop.close()
        for i in 0..<2 {
            guard let report = reports.withLock({ $0[i] }) else { return XCTFail("loader \(i) did not report") }
            XCTAssertEqual(report.int("broadcastReceived"), 20, report.table)
            let first = report.int("broadcastFirstAtNs") ?? 0
            let last = report.int("broadcastLastAtNs") ?? 0
            XCTAssertGreaterThanOrEqual(first, Int(postedAt), report.table)
            XCTAssertGreaterThanOrEqual(last, first, report.table)
            XCTAssertEqual(report.int("deleted"), 20, report.table)
        }
        XCTAssertEqual(a.handled(.statusHook) + b.handled(.statusHook), 1, "only the test's post")
    }

    func testStreamsSaysWhenTheServerHasNoBroadcastHook() throws {
        let server = try GreetingTestServer()
        server.hasStatusHook = false
        defer { server.stop() }
        let report = try runStreams(3, on: server)
        guard case .text(let text)? = report["broadcast"] else { return XCTFail(report.table) }
        XCTAssertEqual(text, "broadcast skipped: server has no test hook")
    }

    func testRestCountsRequestsAndStatuses() throws {
        let server = try GreetingTestServer()
        defer { server.stop() }
        var options = RestScenario.Options()
        options.connections = 4
        options.duration = 0.5
        options.progress = false
        let report = try RestScenario.run(target: Target(url: "http://127.0.0.1:\(server.port)"), options: options)
        let requests = try XCTUnwrap(report.int("requests"))
        XCTAssertGreaterThan(requests, 50, report.table)
        XCTAssertEqual(report.int("non2xx"), 0, report.table)
        XCTAssertEqual(report.int("errors"), 0, report.table)
        XCTAssertEqual((report.int("stateRequests") ?? 0) + (report.int("searchRequests") ?? 0), requests)
    }

    /// `streams` of `StreamsScenario` against `server`, held for no time and quiet, with `configure`'s changes.
    private func runStreams(
        _ streams: Int, on server: GreetingTestServer, _ configure: (inout StreamsScenario.Options) -> Void = { _ in }
    ) throws -> LoadReport {
        var options = StreamsScenario.Options()
        options.streams = streams
        options.hold = 0
        options.progress = false
        configure(&options)
        return try StreamsScenario.run(target: Target(url: "http://127.0.0.1:\(server.port)"), options: options)
    }
}
