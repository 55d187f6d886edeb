/// A reference to an object that lives on one event loop, which may travel to other threads (in a
/// closure, in another loop's data) but may be opened only on its loop, as SwiftNIO's `NIOLoopBound`.
/// Where `LoopBound` is a box whose value the holder may change, this is a plain struct around a
/// reference that never changes: no allocation, two words.
///
/// Use it where an object on one loop is held by another: the holder keeps the reference and hands
/// work to the object's loop (`run`), and `value` traps anywhere but on `loop`, so "touched on its loop
/// only" is checked at the first wrong access instead of racing silently.
///
/// Threading: `value` on `loop`'s thread only; `loop`, `run`, `isSame` anywhere.
// @unchecked: the loop check on every access is what makes the non-Sendable object safe to carry.
public struct LoopOwned<Object>: @unchecked Sendable {
    /// The loop whose thread owns the object.
    public let loop: EventLoop
    @usableFromInline let object: Object

    /// Wraps `object` (a class instance), which lives on `loop` (made on any thread: objects are often built for a loop).
    public init(_ object: Object, loop: EventLoop) {
        self.loop = loop
        self.object = object
    }

    /// The object; traps (`precondition`) when used off `loop`'s thread.
    public var value: Object {
        precondition(loop.inEventLoop, "LoopOwned value used off \(loop)")
        return object
    }

    /// Runs `work` with the object on its loop: now when called there, else after a hop (FIFO per
    /// calling thread, as `runOrExecute`). Any thread.
    @inlinable
    public func run(_ work: @escaping @Sendable (Object) -> Void) {
        loop.runOrExecute(with: self) { owned in work(owned.value) }
    }

    /// `run` for hot paths: `work` is a function of the object and `value`, so a non-capturing closure
    /// literal needs no heap-allocated context when it runs inline; only a hop allocates one. Any thread.
    @inlinable
    public func run<Value: Sendable>(with value: Value, _ work: @escaping @Sendable (Object, Value) -> Void) {
        if loop.inEventLoop {
            work(object, value)
        } else {
            let owned = self
            loop.execute { work(owned.value, value) }
        }
    }

    /// True when both refer to the same object (compares identities; opens nothing). Any thread. `Object`
    /// is a class, or a class-bound protocol's existential.
    public func isSame(as other: LoopOwned<Object>) -> Bool { (object as AnyObject) === (other.object as AnyObject) }
}
