import Foundation
import Glibc
import WireClient
import XCTest

/// The real `bff` binary, started under `taskset -c 0`, runs one event loop and says so (log and /metrics).
final class DefaultThreadsTests: XCTestCase {
    func testBffUnderTasksetRunsOneLoop() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        // The bff built with these tests (beside the test bundle): not a fixed .build/debug, which under
        // another scratch path (scripts/tsan.sh's .build-tsan) is missing or an older build.
        let bff = ChildProcess.buildFolder + "/bff"
        guard FileManager.default.isExecutableFile(atPath: bff) else {
            throw XCTSkip("no built bff binary at \(bff) (swift build --build-tests builds it)")
        }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/taskset") else { throw XCTSkip("no taskset") }
        let process = try ChildProcess(
            "/usr/bin/taskset", ["-c", "0", bff, "--port", "0", "--cache-file", "none", "--log-level", "info"],
            directory: root.path)
        // "bff listening on http://127.0.0.1:PORT" on stdout once it serves.
        let port = try XCTUnwrap(process.waitForPort(marker: "listening on"), process.stderrText)
        let metrics = try WireConnection.get(port: port, path: "/metrics").text
        XCTAssertTrue(metrics.contains("\nbff_event_loop_threads 1"), metrics)
        process.send(SIGTERM)
        XCTAssertEqual(process.waitForExit(timeout: 10), 0)
        let log = process.stderrText
        XCTAssertTrue(log.contains("threads=1 threadsReason=CPUs this process may use: affinity mask allows 1 of"), log)
    }
}
