import Features
import Foundation
import ViewModels
import XCTest

/// A test owner: effect results are queued here and run on the test's task when it calls `runNext()`,
/// so a test decides exactly when each result is applied. Thread-safe (a lock) because effects enqueue
/// from other threads.
final class ManualExecutor: @unchecked Sendable {
    private let lock = NSLock()
    private var jobs: [@Sendable () -> Void] = []
    private var waiter: CheckedContinuation<Bool, Never>?
    private var waiterID = 0

    /// The executor to give a view model.
    var executor: OwnerExecutor { { [self] job in enqueue(job) } }

    /// Jobs queued and not yet run.
    var pendingCount: Int { lock.withLock { jobs.count } }

    private func enqueue(_ job: @escaping @Sendable () -> Void) {
        lock.lock()
        jobs.append(job)
        let w = waiter
        waiter = nil
        lock.unlock()
        w?.resume(returning: true)
    }

    /// Waits (at most `timeout` seconds, a guard against hangs, not a synchronisation) until a job is
    /// queued, then runs it on the caller. Fails the test if none arrives.
    func runNext(timeout: Double = 5, file: StaticString = #filePath, line: UInt = #line) async {
        while true {
            if let job = takeJob() {
                job()
                return
            }
            let arrived = await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
                guard let id = install(c) else { return c.resume(returning: true) }
                Task { [self] in
                    try? await Task.sleep(for: .seconds(timeout))
                    expire(id)
                }
            }
            if !arrived {
                XCTFail("no effect result reached the owner within \(timeout) s", file: file, line: line)
                return
            }
        }
    }

    private func takeJob() -> (@Sendable () -> Void)? {
        lock.withLock { jobs.isEmpty ? nil : jobs.removeFirst() }
    }

    /// Installs the waiter unless a job is already queued; returns its id.
    private func install(_ c: CheckedContinuation<Bool, Never>) -> Int? {
        lock.withLock {
            guard jobs.isEmpty else { return nil }
            waiterID += 1
            waiter = c
            return waiterID
        }
    }

    private func expire(_ id: Int) {
        let w: CheckedContinuation<Bool, Never>? = lock.withLock {
            guard waiterID == id, let w = waiter else { return nil }
            waiter = nil
            return w
        }
        w?.resume(returning: false)
    }
}
