import LoadKit
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
        let first = counts[QueryMix.vocabulary[0]] ?? 0, tenth = counts[QueryMix.vocabulary[9]] ?? 0
        XCTAssertGreaterThan(first, 1_500)  // 1/H(50) ≈ 22 %
        XCTAssertGreaterThan(first, tenth * 5)
    }

    func testTargetParsesURLs() throws {
        let t = try Target(url: "http://127.0.0.1:9000/prefix/")
        XCTAssertEqual(t.port, 9000)
        XCTAssertEqual(t.basePath, "/prefix")
        XCTAssertThrowsError(try Target(url: "https://example.com"))
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
}
