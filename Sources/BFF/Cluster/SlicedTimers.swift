import EventHTTP

/// One loop's timers grouped into slices of `width` seconds: work due in the same slice runs in one
/// callback, so in one loop iteration. For many per-session timers whose exact moment does not matter
/// (lease renewals, `LeaseKeeper`): the round trips they start in one iteration reach Redis as one
/// call (`RedisSessionStore.renew` batches them), and the loop wakes once per slice instead of once per
/// timer. A deadline is rounded up to the end of its slice (at most `width` late; callers ask early
/// enough). One libevent timer per non-empty slice.
///
/// Threading: the loop's thread only (like `LoopTimer`).
final class SlicedTimers {
    private final class Slice {
        var works: [Int: () -> Void] = [:]
        var timer: LoopTimer?
    }

    let loop: EventLoop
    let width: Double
    /// The clock the slices are cut from (seconds; monotonic). Injected by tests to put deadlines
    /// where they want them relative to slice ends.
    private let now: () -> Double
    private var slices: [Int64: Slice] = [:]
    private var nextID = 0

    init(loop: EventLoop, width: Double = 0.1, now: @escaping () -> Double = { Double(monotonicNanos()) / 1e9 }) {
        self.loop = loop
        self.width = width
        self.now = now
    }

    /// Runs `work` at the end of the slice `seconds` from now falls in; returns what cancels it.
    func schedule(after seconds: Double, _ work: @escaping () -> Void) -> () -> Void {
        let now = self.now()
        let index = Int64(((now + max(0, seconds)) / width).rounded(.up))
        let slice: Slice
        if let existing = slices[index] {
            slice = existing
        } else {
            slice = Slice()
            slices[index] = slice
            slice.timer = loop.schedule(after: max(0, Double(index) * width - now)) { [weak self] in
                self?.fire(index)
            }
        }
        let id = nextID
        nextID += 1
        slice.works[id] = work
        return { [weak self, weak slice] in
            guard let self, let slice, slice.works.removeValue(forKey: id) != nil else { return }
            if slice.works.isEmpty, self.slices[index] === slice {
                slice.timer?.cancel()
                self.slices[index] = nil
            }
        }
    }

    /// Timers waiting (slices with work), for tests.
    var pendingSlices: Int { slices.count }

    private func fire(_ index: Int64) {
        guard let slice = slices.removeValue(forKey: index) else { return }
        // In the order they were scheduled; one cancelled by an earlier one in this slice does not run.
        for id in slice.works.keys.sorted() {
            guard let work = slice.works.removeValue(forKey: id) else { continue }
            work()
        }
    }
}
