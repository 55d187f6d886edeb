import EventHTTP
import Foundation
import Glibc
import XCTest

/// `LoopBound` opens on its loop only, `runOrExecute` runs inline on its loop and in order when hopping,
/// and `runSoon` runs within the current loop iteration.
final class LoopBoundTests: XCTestCase {
    private var loops: [(loop: EventLoop, thread: pthread_t)] = []

    override func tearDown() {
        for (loop, thread) in loops {
            loop.stop()
            pthread_join(thread, nil)
        }
        loops = []
    }

    private func startedLoop() -> EventLoop {
        let loop = EventLoop(index: loops.count)
        loops.append((loop, loop.startThread(name: "loop-bound-test-\(loops.count)")))
        return loop
    }

    /// Runs `body` on `loop` and returns its result once it has run (the loop's answer is the event awaited).
    private func on<T: Sendable>(_ loop: EventLoop, _ body: @escaping @Sendable () -> T) -> T {
        let slot = Slot<T>()
        loop.execute {
            slot.value = body()
            slot.done.signal()
        }
        XCTAssertEqual(slot.done.wait(timeout: .now() + 5), DispatchTimeoutResult.success, "the loop did not answer")
        return slot.value!
    }

    /// A `LoopBoundReference` made on its loop travels to another loop (it is `Sendable`), is closed
    /// there, and opens to the same object back on its own loop.
    func testLoopBoundReferenceTravelsAndOpensOnItsLoopOnly() {
        final class Counter { var n = 0 }
        let a = startedLoop()
        let b = startedLoop()
        let reference = on(a) { () -> LoopBoundReference<Counter> in
            let r = LoopBoundReference(Counter(), loop: a)
            r.value.n = 41
            return r
        }
        XCTAssertFalse(reference.isOnLoop, "the test's thread is not the loop's")
        XCTAssertFalse(on(b) { reference.isOnLoop }, "another loop's thread is not the loop's")
        XCTAssertEqual(
            on(a) {
                reference.value.n += 1
                return reference.value.n
            }, 42, "the same object, changed through the reference")
    }

    func testLoopBoundIsOpenOnItsLoopOnly() {
        let a = startedLoop()
        let b = startedLoop()
        let bound = LoopBound(0, loop: a)
        XCTAssertFalse(bound.isOnLoop, "the test's thread is not the loop's")
        XCTAssertFalse(on(b) { bound.isOnLoop }, "another loop's thread is not the loop's")
        XCTAssertFalse(EventLoop().inEventLoop, "a loop that never ran is nobody's")
        let background = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var elsewhere = true
        DispatchQueue.global().async {
            elsewhere = bound.isOnLoop
            background.signal()
        }
        background.wait()
        XCTAssertFalse(elsewhere, "a pool thread is not the loop's")

        XCTAssertTrue(on(a) { bound.isOnLoop })
        XCTAssertEqual(
            on(a) {
                bound.value += 41
                bound.value += 1
                return bound.value
            }, 42)
    }

    func testRunOrExecuteRunsInlineOnItsLoop() {
        let loop = startedLoop()
        let log = LoopBound([String](), loop: loop)
        let seen = on(loop) {
            log.value.append("before")
            loop.runOrExecute { log.value.append("inline") }
            log.value.append("after")
            return log.value
        }
        XCTAssertEqual(seen, ["before", "inline", "after"], "on its loop the work runs before the call returns")
    }

    func testRunOrExecuteHopsInOrderFromElsewhere() {
        let loop = startedLoop()
        let other = startedLoop()
        let log = LoopBound([Int](), loop: loop)
        for i in 0..<500 { loop.runOrExecute { log.value.append(i) } }  // from the test's thread
        on(other) {
            for i in 500..<1000 { loop.runOrExecute { log.value.append(i) } }  // from another loop
        }
        // Every job opened `log`, which traps off `loop`: each ran on the loop, in the order given.
        XCTAssertEqual(on(loop) { log.value }, Array(0..<1000))
    }

    func testRunSoonRunsInTheSameIterationInOrderBeforeTheLoopWaitsAgain() {
        let loop = startedLoop()
        let log = LoopBound([String](), loop: loop)
        let finished = DispatchSemaphore(value: 0)
        // From a timer's callback (not from a job of `execute`, whose drain runs jobs queued meanwhile):
        // work the loop hands itself with `execute` runs in a later iteration, once `epoll_wait` reports
        // the eventfd; `runSoon` jobs, queued after it, run in this one, before it, in the order queued,
        // and a job a job queues runs too.
        loop.execute {
            _ = loop.schedule(after: 0) {
                loop.execute {
                    log.value.append("execute")
                    finished.signal()
                }
                loop.runSoon { log.value.append("soon 1") }
                loop.runSoon {
                    log.value.append("soon 2")
                    loop.runSoon { log.value.append("soon 3, queued by soon 2") }
                }
                log.value.append("caller")
            }
        }
        XCTAssertEqual(finished.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(on(loop) { log.value }, ["caller", "soon 1", "soon 2", "soon 3, queued by soon 2", "execute"])
    }
}

/// One answer handed from a loop to the test's thread (the semaphore orders the write before the read).
private final class Slot<T>: @unchecked Sendable {
    var value: T?
    let done = DispatchSemaphore(value: 0)
}
