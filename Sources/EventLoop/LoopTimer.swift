import CLibevent

/// A one-shot or repeating timer on an `EventLoop`. Create, fire and cancel it on that loop only.
///
/// The timer keeps itself alive while armed; `cancel()` (or firing, for a one-shot) releases it.
public final class LoopTimer {
    private var event: OpaquePointer?
    private var work: (() -> Void)?
    private let repeats: Bool
    private var selfRetain: Unmanaged<LoopTimer>?

    convenience init(loop: EventLoop, interval: Double, repeats: Bool, work: @escaping () -> Void) {
        self.init(loop: loop, timeval: loop.timeout(interval), repeats: repeats, work: work)
    }

    init(loop: EventLoop, timeval: timeval, repeats: Bool, work: @escaping () -> Void) {
        self.repeats = repeats
        self.work = work
        let retained = Unmanaged.passRetained(self)
        selfRetain = retained
        event = event_new(
            loop.base, -1, repeats ? Int16(EV_PERSIST) : 0,
            { _, _, arg in
                Unmanaged<LoopTimer>.fromOpaque(arg!).takeUnretainedValue().fire()
            }, retained.toOpaque())
        var tv = timeval
        event_add(event, &tv)
    }

    private func fire() {
        let w = work
        if !repeats { cancel() }
        w?()
    }

    /// Disarms the timer; its closure will not run again. Idempotent.
    public func cancel() {
        guard let e = event else { return }
        event = nil
        event_free(e)  // event_free deletes a pending event first
        work = nil
        selfRetain?.release()
        selfRetain = nil
    }
}
