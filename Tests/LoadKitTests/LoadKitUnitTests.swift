import LoadKit
import WireClient
import XCTest

/// Pure tests of LoadKit's small helpers.
final class LoadKitUnitTests: XCTestCase {
    func testInputSeqIsFoundWithoutAFullParse() {
        XCTAssertEqual(LoadSession.inputSeq(in: "{\"inputSeq\":42,\"outputs\":{}}"), 42)
        XCTAssertEqual(LoadSession.inputSeq(in: "{\"outputs\":{},\"inputSeq\": 7}"), 7)
        XCTAssertNil(LoadSession.inputSeq(in: "{\"seq\":3}"))
    }

    func testZipfMixFavoursTheHead() {
        var mix = QueryMix(seed: 1)
        var counts: [String: Int] = [:]
        for _ in 0..<10_000 { counts[mix.nextQuery(), default: 0] += 1 }
        let first = counts[QueryMix.vocabulary[0]] ?? 0
        let tenth = counts[QueryMix.vocabulary[9]] ?? 0
        XCTAssertGreaterThan(first, 1_500)  // 1/H(50) ≈ 22 %
        XCTAssertGreaterThan(first, tenth * 5)
    }

    func testTargetParsesURLs() throws {
        let t = try Target(url: "http://127.0.0.1:9000/prefix/")
        XCTAssertEqual(t.port, 9000)
        XCTAssertEqual(t.basePath, "/prefix")
        XCTAssertThrowsError(try Target(url: "https://example.com"))
    }

    func testLatencyHistogramSummaryOfKnownValues() {
        var h = LatencyHistogram()
        XCTAssertEqual(h.summary.count, 0)
        XCTAssertEqual(h.summary.max, 0, "no samples, all zero")
        for us in 1...1000 { h.record(nanoseconds: UInt64(us) * 1_000) }  // 1 µs … 1 ms, one each
        let s = h.summary
        XCTAssertEqual(s.count, 1000)
        // HdrHistogram keeps 3 significant digits: each figure within 0.1 % (+ one 0.512 µs bucket).
        func close(_ actual: Double, _ expected: Double, _ what: String) {
            XCTAssertEqual(actual, expected, accuracy: expected * 0.001 + 0.512, "\(what): \(s.line)")
        }
        close(s.p50, 500, "p50")
        close(s.p90, 900, "p90")
        close(s.p99, 990, "p99")
        close(s.p999, 999, "p99.9")
        close(s.max, 1000, "max")
        close(s.mean, 500.5, "mean")
        h.record(nanoseconds: 0)  // clamped to the lowest trackable value, 1 µs
        h.record(nanoseconds: 2_000_000_000)
        XCTAssertEqual(h.count, 1002)
        XCTAssertEqual(h.summary.max, 2_000_000, accuracy: 2_000)
    }

    func testLoopCloseClosesConnectionsAndDropsTimers() throws {
        let loop = try LoadLoop()
        var fired = false
        loop.schedule(after: 0.05) { fired = true }
        let pool = RequestPool(loop: loop, target: try Target(url: "http://127.0.0.1:9"), size: 1)
        var result: Result<WireResponse, WireError>?
        pool.submit("GET", "/") { result = $0 }
        loop.close()
        XCTAssertFalse(loop.run(timeout: 0.1) { fired })
        if case .success? = result { XCTFail("nothing listens on port 9") }
    }

    func testPoolRetiresAClosingConnectionBeforeTheCompletionSubmitsAgain() throws {
        let server = try ScriptedServer { _, client in
            client.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            client.close()
        }
        defer { server.stop() }
        let loop = try LoadLoop()
        defer { loop.close() }
        let pool = RequestPool(loop: loop, target: try Target(url: "http://127.0.0.1:\(server.port)"), size: 1)
        var statuses: [Int] = []
        var failures: [WireError] = []
        func next() {
            pool.submit("GET", "/") { result in
                switch result {
                case .success(let response):
                    statuses.append(response.status)
                    if statuses.count < 5 { next() }  // resubmitted from the completion
                case .failure(let error): failures.append(error)
                }
            }
        }
        next()
        XCTAssertTrue(loop.run(timeout: 5) { statuses.count == 5 || !failures.isEmpty })
        XCTAssertEqual(statuses, [200, 200, 200, 200, 200])
        XCTAssertEqual(failures, [])
    }

    func testLoopRunsTimersInDeadlineOrder() throws {
        let loop = try LoadLoop()
        var order: [Int] = []
        let now = LoadLoop.now()
        loop.schedule(at: now + 3_000_000) { order.append(3) }
        loop.schedule(at: now + 1_000_000) { order.append(1) }
        loop.schedule(at: now + 2_000_000) { order.append(2) }
        XCTAssertTrue(loop.run(timeout: 2) { order.count == 3 })
        XCTAssertEqual(order, [1, 2, 3])
        XCTAssertGreaterThanOrEqual(LoadLoop.now() - now, 3_000_000)
    }

    /// `readBatchNanos`: events that arrive while the loop sleeps after a batch are read in one batch, not
    /// with a wake-up each. Seven events written 20 ms apart, starting while the first one is read, arrive
    /// during the 1 s sleep after its batch: two batches in all (without the sleep, up to eight).
    func testReadsThatArriveDuringTheSleepAfterABatchAreReadTogether() throws {
        let clients = Lock<[ScriptedServer.Client]>([])
        let server = try ScriptedServer { _, client in
            client.write("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            clients.withLock { $0.append(client) }
        }
        defer { server.stop() }
        @Sendable func chunk(_ n: Int) -> String {
            let piece = "data: \(n)\n\n"
            return String(piece.utf8.count, radix: 16) + "\r\n" + piece + "\r\n"
        }
        let loop = try LoadLoop()
        defer { loop.close() }
        let target = try Target(url: "http://127.0.0.1:\(server.port)")
        var heads = 0
        var received: [String] = []
        var streams: [StreamClient] = []
        var writers: [ScriptedServer.Client] = []
        for _ in 0..<8 {
            let stream = try StreamClient(loop: loop, target: target, path: "/events")
            stream.onHead = { _ in heads += 1 }
            stream.onEvent = { event, _ in
                received.append(event.data)
                guard event.data == "0" else { return }
                // Still inside the first event's batch: the loop sleeps once this batch is done.
                let rest = writers
                Thread {
                    for n in 1..<8 {
                        rest[n].write(chunk(n))
                        usleep(20_000)
                    }
                }.start()
            }
            streams.append(stream)
        }
        XCTAssertTrue(loop.run(timeout: 10) { heads == 8 && clients.withLock { $0.count } == 8 })
        writers = clients.withLock { $0 }
        loop.readBatchNanos = 1_000_000_000
        let before = loop.socketBatches
        writers[0].write(chunk(0))
        XCTAssertTrue(loop.run(timeout: 10) { received.count == 8 })
        XCTAssertEqual(Set(received), Set((0..<8).map(String.init)))
        XCTAssertEqual(loop.socketBatches - before, 2, "the first event's batch, then the other seven in one")
        withExtendedLifetime(streams) {}
    }
}
