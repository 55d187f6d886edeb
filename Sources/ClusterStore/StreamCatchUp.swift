/// The catch-up of one event stream on any node, in the order that loses nothing and repeats
/// nothing: subscribe to the session's feed first, then read the history, then write the history
/// and the live events that arrived meanwhile, each id once and in order.
///
/// A pure state machine (no I/O); the stream's owner drives it on its loop:
/// 1. `init(lastEventID:)`, `SessionEventFeed.subscribe`; live events go to `live(_:)`, which
///    holds them back while catching up;
/// 2. on `onSubscribed`: `SessionStore.replay(after: lastWritten)` and hand the answer to
///    `replayed(_:)`; it returns what to write, or `.snapshot` (then write the snapshot and call
///    `snapshotWritten(seq:)`, which returns the held-back events newer than it);
/// 3. after a feed reconnect (`onSubscribed` again): `restart()`, then step 2 again.
public struct StreamCatchUp: Sendable, Equatable {
    /// What to do after the history's answer.
    public enum Step: Sendable, Equatable {
        /// Write these events, in order.
        case write([StoredEvent])
        /// The history does not cover the stream's position: write a fresh snapshot.
        case snapshot
    }

    /// The id of the last event (or snapshot) written to the stream.
    public private(set) var lastWritten: UInt64
    /// True between subscribing (or `restart()`) and the history's answer.
    public private(set) var isCatchingUp = true
    private var held: [StoredEvent] = []

    /// A stream whose client has seen everything up to `lastEventID` (0: nothing).
    public init(lastEventID: UInt64) { lastWritten = lastEventID }

    /// A live event from the feed: the events to write now (none while catching up, and none
    /// that were written already).
    public mutating func live(_ event: StoredEvent) -> [StoredEvent] {
        if isCatchingUp {
            held.append(event)
            return []
        }
        return take([event])
    }

    /// The history's answer to `replay(after: lastWritten)`.
    public mutating func replayed(_ result: ReplayResult) -> Step {
        switch result {
        case .snapshotNeeded:
            return .snapshot
        case .upToDate:
            isCatchingUp = false
            return .write(takeHeld([]))
        case .events(let events):
            isCatchingUp = false
            return .write(takeHeld(events))
        }
    }

    /// A snapshot at `seq` was written: the held-back events newer than it, to write after it.
    public mutating func snapshotWritten(seq: UInt64) -> [StoredEvent] {
        lastWritten = max(lastWritten, seq)
        isCatchingUp = false
        return takeHeld([])
    }

    /// The feed reconnected (events may have been missed): hold live events back again until
    /// the next `replayed(_:)`.
    public mutating func restart() { isCatchingUp = true }

    private mutating func takeHeld(_ history: [StoredEvent]) -> [StoredEvent] {
        let all = (history + held).sorted { $0.id < $1.id }
        held.removeAll()
        return take(all)
    }

    private mutating func take(_ events: [StoredEvent]) -> [StoredEvent] {
        var out: [StoredEvent] = []
        for e in events where e.id > lastWritten {
            out.append(e)
            lastWritten = e.id
        }
        return out
    }
}
