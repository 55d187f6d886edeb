import Features
import Foundation
import ViewModels

/// A `SearchClock` the test moves by hand: `now()` is what the test set; sleepers wake when `advance`
/// passes their deadline, or at once when their task is cancelled. Thread-safe (a lock).
final class TestClock: SearchClock, @unchecked Sendable {
    private let lock = NSLock()
    private var current: Double
    private var sleepers: [(deadline: Double, id: Int, continuation: CheckedContinuation<Void, Never>)] = []
    private var nextID = 0
    private var cancelledIDs: Set<Int> = []

    init(_ start: Double = 1_800_000_000) { current = start }

    func now() -> Double { lock.withLock { current } }

    /// Sleepers waiting now (tests use it to know a timer effect started).
    var sleeping: Int { lock.withLock { sleepers.count } }

    func sleep(until deadline: Double) async {
        let id = lock.withLock {
            nextID += 1
            return nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let resumeNow = lock.withLock {
                    if deadline <= current || cancelledIDs.contains(id) { return true }
                    sleepers.append((deadline, id, c))
                    return false
                }
                if resumeNow { c.resume() }
            }
        } onCancel: {
            let c: CheckedContinuation<Void, Never>? = lock.withLock {
                cancelledIDs.insert(id)
                guard let i = sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return sleepers.remove(at: i).continuation
            }
            c?.resume()
        }
    }

    /// Moves the time on and wakes every sleeper whose deadline has come.
    func advance(_ seconds: Double) {
        let due: [CheckedContinuation<Void, Never>] = lock.withLock {
            current += seconds
            let ready = sleepers.filter { $0.deadline <= current }
            sleepers.removeAll { $0.deadline <= current }
            return ready.map(\.continuation)
        }
        for c in due { c.resume() }
    }
}
