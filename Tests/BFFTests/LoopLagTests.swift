import Foundation
import WireClient
import XCTest

@testable import BFF

/// `bff_event_loop_lag_seconds` and its log line: a loop held up by a long callback runs its timers late,
/// and that is what the operator needs to tell a starved node from a slow Redis (leases were lost
/// "taken" while every renewal the node sent succeeded).
final class LoopLagTests: XCTestCase {
    func testAStalledLoopIsMeasuredAndLogged() throws {
        let logs = LogCollector()
        let app = try LiveApp(logger: logs.logger(level: .info))
        let id = try app.createSession()
        let before = try lagSamples(app)
        XCTAssertFalse(logs.all.contains("event loop ran its timers late"), "nothing late before the stall")
        // The session's loop is held for 1.5 s, as by a callback that works that long.
        try app.onOwner(of: id) { _ in _ = usleep(1_500_000) }
        // The probe runs right after the stall (its timer is due meanwhile); its sample is then in /metrics.
        let deadline = Date().addingTimeInterval(5)
        var after = try lagSamples(app)
        while after.late == before.late, Date() < deadline {
            try app.onOwner(of: id) { _ in }  // a round trip through the loop: the probe had its turn
            after = try lagSamples(app)
        }
        XCTAssertEqual(after.late - before.late, 1, "one probe ran at least 1 s late")
        XCTAssertGreaterThan(after.count, before.count)
        XCTAssertTrue(logs.all.contains("event loop ran its timers late"), logs.all)
    }

    /// The probes counted so far, and those 1 s late or more (the histogram's `le="1.0"` bucket subtracted).
    func lagSamples(_ app: LiveApp) throws -> (count: Int, late: Int) {
        let text = try WireConnection.get(port: app.port, path: "/metrics").text
        func value(_ prefix: String) -> Int {
            let line = text.split(separator: "\n").first { $0.hasPrefix(prefix) }
            return line.flatMap { Double($0.split(separator: " ").last ?? "") }.map { Int($0) } ?? -1
        }
        let count = value("bff_event_loop_lag_seconds_count ")
        let upToOne = value("bff_event_loop_lag_seconds_bucket{le=\"1.0\"} ")
        return (count, count - upToOne)
    }
}
