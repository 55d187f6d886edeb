/// A value that only one event loop's thread may read or write, as SwiftNIO's `NIOLoopBoundBox`: the box
/// is `Sendable`, so it may be carried by closures to any thread, but opening it (`value`) anywhere but on
/// `loop` traps. It turns "used on its loop only, by convention" (an unchecked `Sendable` conformance on
/// every such type) into a checked rule that fails at the first wrong access instead of racing silently.
///
/// A class (a box), not a struct: a type that holds it in a `let` stays `Sendable` and can still change
/// the value. The check costs one relaxed atomic load and `pthread_self()` per access.
///
/// Threading: `value` on `loop`'s thread only; `loop` and `isOnLoop` anywhere. The box may be created on
/// any thread (loop-owned objects are built before their loops run), with a value that nothing else holds.
// Unchecked: the compiler cannot see the loop rule; `value` checks it at run time (the one place).
public final class LoopBound<Value>: @unchecked Sendable {
    /// The loop whose thread owns the value.
    public let loop: EventLoop
    private var stored: Value

    /// Boxes `value` for `loop`.
    public init(_ value: Value, loop: EventLoop) {
        self.loop = loop
        self.stored = value
    }

    /// True when the caller may open the box (it runs on `loop`'s thread). Any thread.
    public var isOnLoop: Bool { loop.inEventLoop }

    /// The value; traps (`precondition`) when used off `loop`'s thread.
    public var value: Value {
        _read {
            precondition(loop.inEventLoop, "LoopBound value read off \(loop)")
            yield stored
        }
        _modify {
            precondition(loop.inEventLoop, "LoopBound value written off \(loop)")
            yield &stored
        }
    }
}
