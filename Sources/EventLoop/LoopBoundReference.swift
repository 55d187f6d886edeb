/// A reference to an object that only one event loop's thread may use, as SwiftNIO's `NIOLoopBound`: the
/// reference is `Sendable`, so closures may carry it to any thread (a handler that hops to another loop
/// and back), but `value` anywhere but on `loop` traps. It costs no allocation (a struct of two
/// references), and one relaxed atomic load and `pthread_self()` per `value`.
///
/// For a value that is not an object, or one that must change in place through a `let`, use the box
/// `LoopBound`.
///
/// Threading: `value` on `loop`'s thread only; `loop` anywhere. Made on `loop`'s thread (it traps
/// elsewhere), so the object it refers to is already the loop's.
// Unchecked, as `LoopBound`: the compiler cannot see the loop rule, `value` checks it at run time.
public struct LoopBoundReference<Object>: @unchecked Sendable {
    /// The loop whose thread may use the object.
    public let loop: EventLoop
    /// The object, unchecked: for code in this module that has just checked the loop.
    @usableFromInline let object: Object

    /// Refers to `object`, owned by `loop`; traps off `loop`'s thread.
    @inlinable
    public init(_ object: Object, loop: EventLoop) {
        precondition(loop.inEventLoop, "LoopBoundReference made off \(loop)")
        self.loop = loop
        self.object = object
    }

    /// Refers to `object` without checking the thread: for this module's callers that run on `loop`
    /// by construction (a request's responder, made in evhttp's callback).
    package init(onLoop object: Object, loop: EventLoop) {
        self.loop = loop
        self.object = object
    }

    /// Refers to `object`, made on any thread for `loop`, which alone will use it: objects built before
    /// their loop runs (the shared `status` view model, made with the application).
    public init(_ object: Object, madeFor loop: EventLoop) {
        self.loop = loop
        self.object = object
    }

    /// True when the caller may use the object (it runs on `loop`'s thread). Any thread.
    public var isOnLoop: Bool { loop.inEventLoop }

    /// The object; traps (`precondition`) when used off `loop`'s thread.
    @inlinable
    public var value: Object {
        precondition(loop.inEventLoop, "LoopBoundReference used off \(loop)")
        return object
    }

    /// Runs `work` with the object on its loop: now when called there, else after a hop (FIFO per
    /// calling thread, as `runOrExecute`). Any thread.
    @inlinable
    public func run(_ work: @escaping @Sendable (Object) -> Void) {
        run(with: ()) { object, _ in work(object) }
    }

    /// `run` for hot paths (every event to every stream): `work` is a function of the object and
    /// `value`, so a non-capturing closure literal needs no heap-allocated context when it runs inline;
    /// only a hop allocates one. Any thread.
    @inlinable
    public func run<Value: Sendable>(with value: Value, _ work: @escaping @Sendable (Object, Value) -> Void) {
        if loop.inEventLoop {
            work(object, value)
        } else {
            let reference = self
            loop.execute { work(reference.value, value) }
        }
    }

    /// True when both refer to the same object (compares identities; uses neither). Any thread.
    /// `Object` is a class, or a class-bound protocol's existential.
    public func isSame(as other: LoopBoundReference<Object>) -> Bool {
        (object as AnyObject) === (other.object as AnyObject)
    }
}
