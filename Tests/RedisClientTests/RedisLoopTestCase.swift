import EventLoop
import RedisTestSupport
import Synchronization
import XCTest

/// What the RedisClient suites share: a real `redis-server` (free port) and a running event loop per
/// test, both stopped after it. Has no tests of its own.
class RedisLoopTestCase: XCTestCase {
    var server: RedisServerProcess!
    var loop: EventLoop!

    override func setUp() async throws {
        server = try RedisServerProcess()
        loop = startedLoop()
    }

    override func tearDown() async throws {
        let probe = lagProbe
        loop.execute { probe.timer.withLock { $0 = nil } }  // before the stop (jobs run in order)
        loop.stop()
        server.kill()
    }

    /// The loop's lag probe while a test runs one (`startLagProbe`).
    private let lagProbe = LagProbeBox()
    private final class LagProbeBox: Sendable { let timer = Mutex<LoopTimer?>(nil) }

    /// Starts the loop's lag probe (every node runs one, `EventLoop.startLagProbe`: its readings let Redis
    /// verdicts tell a starved loop from a silent Redis) for the rest of the test.
    func startLagProbe(every seconds: Double) {
        let (loop, probe): (EventLoop, LagProbeBox) = (self.loop, lagProbe)
        loop.execute { probe.timer.withLock { $0 = loop.startLagProbe(every: seconds) { _ in } } }
    }

    /// Runs `send` on the loop (it sends commands to the stopped Redis), waits until the loop has written
    /// them (its flush was queued first), then stalls this process with Redis for `seconds`
    /// (`RedisServerProcess.stallWithThisProcess`): a whole host paused, commands in flight.
    func sendThenStall(for seconds: Double, continueServer: Bool = true, _ send: @escaping @Sendable () -> Void)
        async throws
    {
        let loop: EventLoop = self.loop
        await withCheckedContinuation { (sent: CheckedContinuation<Void, Never>) in
            loop.execute {
                send()
                loop.runSoon { sent.resume() }
            }
        }
        try server.stallWithThisProcess(for: seconds, continueServer: continueServer)
    }
}
