import Primitives
import XCTest

final class RecentAskersTests: XCTestCase {
    /// Two entries answer "when did someone other than me last ask" for every client: checked against the
    /// full history of asks, over a sequence that repeats and alternates clients.
    func testTheLatestAskOfOthersIsRightForEveryClientWithTwoEntries() {
        var askers = RecentAskers()
        var history: [(key: String, at: Double)] = []
        let sequence = ["a", "a", "b", "a", "c", "c", "b", "b", "b", "a", "d", "a"]
        for (i, key) in sequence.enumerated() {
            askers.record(key, at: Double(i))
            history.append((key, Double(i)))
            for client in ["a", "b", "c", "d", "e"] {
                XCTAssertEqual(
                    askers.lastAsk(ofOthersThan: client), history.last { $0.key != client }?.at,
                    "after ask \(i), for \(client)")
            }
        }
    }

    func testContendedUntilTheOthersLastAskIsAHorizonOld() {
        var askers = RecentAskers()
        XCTAssertNil(askers.contended(for: "a", now: 0, horizon: 60), "nobody asked")
        askers.record("a", at: 0)
        XCTAssertNil(askers.contended(for: "a", now: 1, horizon: 60), "only itself")
        XCTAssertEqual(askers.contended(for: "b", now: 1, horizon: 60), 60, "a asked: b shares")
        askers.record("b", at: 10)
        askers.record("a", at: 20)
        XCTAssertEqual(askers.contended(for: "a", now: 20, horizon: 60), 70)
        XCTAssertEqual(askers.contended(for: "b", now: 20, horizon: 60), 80)
        XCTAssertEqual(askers.contended(for: "a", now: 69.9, horizon: 60), 70)
        XCTAssertNil(askers.contended(for: "a", now: 70, horizon: 60), "b's ask is a horizon old")
    }
}
