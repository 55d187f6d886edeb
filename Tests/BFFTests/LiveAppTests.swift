import EventHTTP
import Foundation
import XCTest

/// The `LiveApp` helper's own promises. A `LiveApp` shuts its app down when its last reference goes; if
/// that happened in a job on one of the app's loops, the loop could not join itself and its thread ended
/// unjoined (ThreadSanitizer's "thread leak" after `ClusterStoredStateTests`, whose job captured the app).
final class LiveAppTests: XCTestCase {
    func testEveryLoopThreadIsJoinedWhenTheLiveAppGoes() throws {
        var t: LiveApp? = try LiveApp { $0.http.threads = 3 }
        let server = try XCTUnwrap(t).app.server
        XCTAssertEqual(server.unjoinedLoopThreads, 3)
        t = nil
        XCTAssertEqual(server.state, .stopped)
        XCTAssertEqual(server.unjoinedLoopThreads, 0)
    }

    /// Each call's closure is released on the calling thread by the time `onOwner` returns. Against a job
    /// that kept the closure this fails only when the loop lets go of its jobs after the caller: a race
    /// (measured: 4 of 5 runs of this test failed; 20 calls per run).
    func testOnOwnerReleasesWhatItsClosureCapturedOnTheCallingThread() throws {
        let t = try LiveApp()
        let id = try t.createSession()
        for call in 1...20 {
            let record = ReleaseRecord()
            do {
                let probe = ReleaseProbe(loops: t.app.server.loops, record: record)
                XCTAssertEqual(try t.onOwner(of: id) { _ in probe.loops.count }, 2)
            }
            XCTAssertEqual(record.releasedOnALoop, false, "call \(call): released on the test's thread by now")
        }
    }
}

/// Records where a `ReleaseProbe` went (nil: not yet).
private final class ReleaseRecord: @unchecked Sendable {
    private let lock = NSLock()
    private var onLoop: Bool?
    var releasedOnALoop: Bool? { lock.withLock { onLoop } }
    func released(onALoop: Bool) { lock.withLock { onLoop = onALoop } }
}

/// Tells its record, when released, whether that happened on one of `loops`.
private final class ReleaseProbe: @unchecked Sendable {
    let loops: [EventLoop]
    let record: ReleaseRecord
    init(loops: [EventLoop], record: ReleaseRecord) {
        self.loops = loops
        self.record = record
    }
    deinit { record.released(onALoop: loops.contains(where: \.inEventLoop)) }
}
