import Foundation
import Glibc
import WireClient
import XCTest

/// The built executables as real processes: signals, exit codes, a fresh working directory.
final class ProcessTests: XCTestCase {
    private var bff: String { ChildProcess.buildFolder + "/bff" }
    private var githubSim: String { ChildProcess.buildFolder + "/github-sim" }

    private func startSimulator() throws -> (ChildProcess, Int) {
        let sim = try ChildProcess(githubSim, ["--port", "0", "--repositories", "300"])
        let port = try XCTUnwrap(sim.waitForPort(marker: "github-sim:"), "github-sim printed no port")
        return (sim, port)
    }

    private func startBFF(directory: String, simPort: Int, extra: [String] = []) throws -> (ChildProcess, Int) {
        let p = try ChildProcess(
            bff, ["--port", "0", "--threads", "1"] + extra, directory: directory,
            environment: ["GITHUB_API_URL": "http://127.0.0.1:\(simPort)", "LOG_LEVEL": "info"])
        let port = try XCTUnwrap(p.waitForPort(marker: "bff listening"), "bff printed no port: \(p.stderrText)")
        return (p, port)
    }

    /// The signal is sent as soon as the banner is out, several times: github-sim used to print its
    /// banner before ignoring the signals and registering Dispatch sources for them, so a signal
    /// right after it killed the process (status 143) or was discarded while ignored (it never exited).
    func testBothExecutablesExitZeroWithinThreeSecondsOfSIGINTAndSIGTERM() throws {
        for signal in [SIGINT, SIGTERM] {
            for round in 0..<5 {
                let (sim, _) = try startSimulator()
                sim.send(signal)
                XCTAssertEqual(sim.waitForExit(timeout: 3), 0, "github-sim after signal \(signal), round \(round)")
            }
            let (sim, simPort) = try startSimulator()
            for round in 0..<2 {
                let dir = try temporaryFolder()
                let (server, _) = try startBFF(directory: dir, simPort: simPort, extra: ["--cache-file", "none"])
                server.send(signal)
                XCTAssertEqual(server.waitForExit(timeout: 3), 0, "bff after signal \(signal), round \(round)")
            }
            sim.send(signal)
            XCTAssertEqual(sim.waitForExit(timeout: 3), 0, "github-sim after signal \(signal)")
        }
    }

    /// `scripts/run.sh --demo` in its own process group (what a terminal's Ctrl-C reaches), using the
    /// debug binaries through BFF_BIN_DIR instead of installing and building a release.
    func testRunScriptDemoExitsOnCtrlCToItsProcessGroup() throws {
        let dir = try temporaryFolder()
        let script = try ChildProcess(
            "/bin/bash",
            [
                ChildProcess.packageRoot + "/scripts/run.sh", "--demo", "--port", "0", "--threads", "1",
                "--cache-file", "none", "--public-dir", dir,
            ],
            environment: ["BFF_BIN_DIR": ChildProcess.buildFolder, "SIM_PORT": String(ChildProcess.freePort())],
            ownProcessGroup: true)
        let port = try XCTUnwrap(script.waitForPort(marker: "bff listening"), script.stderrText)
        XCTAssertEqual(try WireConnection.get(port: port, path: "/healthz").status, 200)
        script.send(SIGINT, toGroup: true)
        XCTAssertEqual(script.waitForExit(timeout: 5), 0, "run.sh did not exit: \(script.stderrText)")
        // every process of the group (bff, github-sim, curl) is gone too, reaped ones included
        let deadline = Date().addingTimeInterval(3)
        while kill(-script.pid, 0) == 0 && Date() < deadline { usleep(10_000) }
        XCTAssertEqual(kill(-script.pid, 0), -1, "a process of the group is still running")
        XCTAssertEqual(errno, ESRCH)
    }

    /// A fresh clone has no `var/`: the default cache file's folder is created (0700) and a restart
    /// serves the cached page.
    func testDefaultCacheFileWorksFromAFreshFolderAcrossARestart() throws {
        let (sim, simPort) = try startSimulator()
        defer {
            sim.send(SIGTERM)
            _ = sim.waitForExit(timeout: 3)
        }
        let dir = try temporaryFolder()
        let path = "/api/search/repositories?q=swift&per_page=5"
        do {
            let (server, port) = try startBFF(directory: dir, simPort: simPort)
            let first = try WireConnection.get(port: port, path: path)
            XCTAssertEqual(first.status, 200, "\(first)")
            XCTAssertEqual(first.header("X-Cache"), "miss")
            server.send(SIGTERM)
            XCTAssertEqual(server.waitForExit(timeout: 3), 0)
            XCTAssertFalse(server.stderrText.contains("unable to open"), server.stderrText)
        }
        var info = stat()
        XCTAssertEqual(stat(dir + "/var", &info), 0, "var/ was not created")
        XCTAssertEqual(info.st_mode & 0o777, 0o700)
        XCTAssertTrue(FileManager.default.fileExists(atPath: dir + "/var/search-cache.sqlite"))

        let (server, port) = try startBFF(directory: dir, simPort: simPort)
        let second = try WireConnection.get(port: port, path: path)
        XCTAssertEqual(second.status, 200)
        XCTAssertEqual(second.header("X-Cache"), "hit", "the restarted process did not find the cached page")
        XCTAssertEqual(second.body, try WireConnection.get(port: port, path: path).body)
        server.send(SIGINT)
        XCTAssertEqual(server.waitForExit(timeout: 3), 0)
    }

    private func temporaryFolder() throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("bff-process-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: url) }
        return url.path
    }
}
