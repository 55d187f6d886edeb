import Foundation
import Glibc
import XCTest

/// The real `bff` refuses out-of-range flags at start (exit 64, a line naming the flag) and fits
/// `--max-connections` to the open-file limit it runs under.
final class FlagValidationTests: XCTestCase {
    private var bff: String { ChildProcess.buildFolder + "/bff" }

    func testOutOfRangeNumericFlagsStopTheServerWithTheFlagsName() throws {
        let cases: [(String, String)] = [
            ("--idle-timeout=-1", "--idle-timeout"),
            ("--write-timeout=nan", "--write-timeout"),
            ("--session-idle-timeout=0", "--session-idle-timeout"),
            ("--keep-alive=0", "--keep-alive"),
            ("--history-events=0", "--history-events"),
            ("--max-sessions=0", "--max-sessions"),
            ("--max-streams-per-session=-3", "--max-streams-per-session"),
            ("--input-burst=0", "--input-burst"),
            ("--max-body-bytes=0", "--max-body-bytes"),
            ("--cache-max-entries=0", "--cache-max-entries"),
            ("--max-connections=0", "--max-connections"),
            ("--redis-commit-window=0.5", "--redis-commit-window"),
            ("--redis-commit-window=nan", "--redis-commit-window"),
        ]
        for (flag, name) in cases {
            let p = try ChildProcess(bff, ["--port", "0", "--cache-file", "none", flag])
            XCTAssertEqual(p.waitForExit(timeout: 10), 64, flag)
            let err = p.stderrText
            XCTAssertTrue(err.contains("\(name) must be"), "\(flag): \(err)")
            XCTAssertFalse(err.contains("listening"), flag)
        }
    }

    /// Under a low open-file limit the default `--max-connections` shrinks to fit (and says so at debug level), and
    /// the server serves; an explicit value that cannot fit is refused before anything listens.
    func testMaxConnectionsFitsTheOpenFileLimit() throws {
        let prlimit = "/usr/bin/prlimit"
        guard FileManager.default.isExecutableFile(atPath: prlimit) else { throw XCTSkip("no prlimit") }

        let fitted = try ChildProcess(
            prlimit,
            [
                "--nofile=1000:1000", bff, "--port", "0", "--cache-file", "none", "--threads", "1", "--log-level",
                "debug",
            ])
        let port = fitted.waitForPort(marker: "listening on")
        XCTAssertNotNil(port, fitted.stderrText)
        XCTAssertTrue(fitted.stderrText.contains("max-connections lowered"), fitted.stderrText)
        XCTAssertTrue(fitted.stderrText.contains("max-connections=744"), fitted.stderrText)
        fitted.send(SIGTERM)
        XCTAssertEqual(fitted.waitForExit(timeout: 10), 0)

        let refused = try ChildProcess(
            prlimit, ["--nofile=1000:1000", bff, "--port", "0", "--cache-file", "none", "--max-connections", "5000"])
        XCTAssertEqual(refused.waitForExit(timeout: 10), 64)
        XCTAssertTrue(refused.stderrText.contains("hard limit allows 1000"), refused.stderrText)
    }
}
