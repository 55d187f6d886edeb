import Foundation
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
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/taskset")
        process.arguments = ["-c", "0", bff, "--port", "0", "--cache-file", "none", "--log-level", "info"]
        process.currentDirectoryURL = root
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        // "bff listening on http://127.0.0.1:PORT" on stdout once it serves.
        var line = ""
        let handle = out.fileHandleForReading
        while !line.contains("\n") {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            line += String(decoding: chunk, as: UTF8.self)
        }
        let port = try XCTUnwrap(
            Int(line.split(separator: ":").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""))
        let metrics = try WireConnection.get(port: port, path: "/metrics").text
        XCTAssertTrue(metrics.contains("\nbff_event_loop_threads 1"), metrics)
        process.terminate()
        process.waitUntilExit()
        let log = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertTrue(log.contains("threads=1 threadsReason=CPUs this process may use: affinity mask allows 1 of"), log)
    }
}
