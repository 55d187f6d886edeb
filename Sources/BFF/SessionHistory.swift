/// The recent events of one session, for `Last-Event-ID` replay: bounded by count and bytes (the
/// bounds, the same for every session, are passed to `append` rather than stored in each history).
/// Owned by the session's loop.
struct SessionHistory {
    struct Entry {
        let seq: Int
        let frame: [UInt8]
        let isSignal: Bool
    }

    private var entries: [Entry] = []
    private var head = 0  // index of the oldest entry once the ring is full
    private var bytes = 0

    init() {}

    /// Records an event; the oldest ones fall out past `maxEvents` (at least 1) or `maxBytes`.
    mutating func append(_ entry: Entry, maxEvents: Int, maxBytes: Int) {
        let maxEvents = max(1, maxEvents)
        bytes += entry.frame.count
        if entries.count < maxEvents && head == 0 {
            entries.append(entry)
        } else {
            bytes -= entries[head].frame.count
            entries[head] = entry
            head = (head + 1) % entries.count
        }
        while bytes > maxBytes && count > 1 { dropOldest() }
    }

    private mutating func dropOldest() {
        // rebuild in order without the oldest; rare (only when frames are large)
        var ordered = self.ordered
        let removed = ordered.removeFirst()
        bytes -= removed.frame.count
        entries = ordered
        head = 0
    }

    var count: Int { entries.count }

    private var ordered: [Entry] { Array(entries[head...]) + Array(entries[..<head]) }

    /// The frames after `lastSeen` when the history still holds all of them, else nil.
    func frames(after lastSeen: Int, currentSeq: Int) -> [Entry]? {
        if lastSeen == currentSeq { return [] }
        guard lastSeen < currentSeq, lastSeen >= 0 else { return nil }
        let all = ordered
        guard let first = all.first, first.seq <= lastSeen + 1 else { return nil }
        return all.filter { $0.seq > lastSeen }
    }
}
