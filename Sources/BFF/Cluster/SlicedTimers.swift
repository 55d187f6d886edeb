import ClusterStore
import EventHTTP

/// One loop's timers grouped into slices of `width` seconds: work due in the same slice runs in one
/// callback, so in one loop iteration. For many per-session timers whose exact moment does not matter
/// (lease renewals, `LeaseKeeper`, see `LeaseTimers` below): the round trips they start in one iteration reach Redis as one
/// call (`RedisSessionStore.renew` batches them), and the loop wakes once per slice instead of once per
/// timer. A deadline is rounded up to the end of its slice (at most `width` late; callers ask early
/// enough). One libevent timer per non-empty slice.
///
/// Threading: the loop's thread only (like `LoopTimer`).
final class SlicedTimers {
    private final class Slice {
        var works: [Int: () -> Void] = [:]
        /// Lease keepers armed on this slice (`LeaseTimers`).
        var keepers: [Weak] = []
        var timer: LoopTimer?
    }

    /// A keeper referred to weakly: a keeper dropped without `stop` does not go on renewing.
    struct Weak {
        weak var keeper: LeaseKeeper?
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

    /// The slice `seconds` from now falls in, with its index (made, and its timer armed, if there is none).
    private func slice(after seconds: Double) -> (index: Int64, slice: Slice) {
        let now = self.now()
        let index = Int64(((now + max(0, seconds)) / width).rounded(.up))
        if let existing = slices[index] { return (index, existing) }
        let slice = Slice()
        slices[index] = slice
        slice.timer = loop.schedule(after: max(0, Double(index) * width - now)) { [weak self] in
            self?.fire(index)
        }
        return (index, slice)
    }

    /// Runs `work` at the end of the slice `seconds` from now falls in; returns what cancels it.
    func schedule(after seconds: Double, _ work: @escaping () -> Void) -> () -> Void {
        let (index, slice) = slice(after: seconds)
        let id = nextID
        nextID += 1
        slice.works[id] = work
        return { [weak self, weak slice] in
            guard let self, let slice, slice.works.removeValue(forKey: id) != nil else { return }
            if slice.works.isEmpty, slice.keepers.isEmpty, self.slices[index] === slice {
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
        for weak in slice.keepers { weak.keeper?.timerFired() }
    }
}

/// The lease keepers' timers, in the same slices: the renewals due in one slice are asked for in one loop
/// iteration (one `renewMany` call per master), and arming one allocates nothing but its place in the
/// slice's array (no closure per timer, no cancel closure). Nothing to disarm: a stopped keeper ignores
/// its timer (`LeaseKeeper.timerFired`), and a keeper let go is not held by it.
extension SlicedTimers: LeaseTimers {
    func arm(_ keeper: LeaseKeeper, after seconds: Double) {
        slice(after: seconds).slice.keepers.append(Weak(keeper: keeper))
    }

    func disarm(_ keeper: LeaseKeeper) {}
}
