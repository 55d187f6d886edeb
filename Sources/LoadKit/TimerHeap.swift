/// A min-heap of actions keyed by a monotonic deadline in nanoseconds (ties run in insertion order).
///
/// Owned by one `LoadLoop`; touched only on its thread.
struct TimerHeap {
    private struct Entry {
        var deadline: UInt64
        var order: UInt64
        var action: () -> Void
        func before(_ other: Entry) -> Bool {
            deadline != other.deadline ? deadline < other.deadline : order < other.order
        }
    }

    private var entries: [Entry] = []
    private var counter: UInt64 = 0

    var isEmpty: Bool { entries.isEmpty }
    var nextDeadline: UInt64? { entries.first?.deadline }

    mutating func insert(_ deadline: UInt64, _ action: @escaping () -> Void) {
        counter += 1
        entries.append(Entry(deadline: deadline, order: counter, action: action))
        var i = entries.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard entries[i].before(entries[parent]) else { break }
            entries.swapAt(i, parent)
            i = parent
        }
    }

    /// Removes and returns the earliest action if it is due at `now`.
    mutating func popDue(_ now: UInt64) -> (() -> Void)? {
        guard let first = entries.first, first.deadline <= now else { return nil }
        let last = entries.removeLast()
        if !entries.isEmpty {
            entries[0] = last
            var i = 0
            while true {
                let l = 2 * i + 1
                let r = l + 1
                var m = i
                if l < entries.count && entries[l].before(entries[m]) { m = l }
                if r < entries.count && entries[r].before(entries[m]) { m = r }
                if m == i { break }
                entries.swapAt(i, m)
                i = m
            }
        }
        return first.action
    }
}
