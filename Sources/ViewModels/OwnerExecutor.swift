/// Runs a closure on a view model's owner (its thread or event loop), later, in submission order.
///
/// Production passes the event loop's `execute`; tests pass a queue they drain. This is how an effect
/// that finished on another thread hands its result back: the view model itself is never touched off
/// its owner.
public typealias OwnerExecutor = @Sendable (@escaping @Sendable () -> Void) -> Void

/// A weak reference to an owner-bound object that may travel to other threads but is only dereferenced
/// on the owner (inside a closure given to the owner's `OwnerExecutor`).
///
/// ViewModels knows no threads or loops, so the owner rule cannot be checked here as `LoopBound` checks
/// it: the box is created by the store on its owner, carried by effect tasks, and opened only inside the
/// closure the store gives its `OwnerExecutor`. The reference is weak, so a store gone meanwhile is nil.
// Unchecked: the compiler cannot see the owner rule above; `value` is read only on the owner.
final class OwnerBound<Value: AnyObject>: @unchecked Sendable {
    /// The object; read on the owner only. `nil` once it is gone (late effect results are dropped).
    weak let value: Value?

    init(_ value: Value) { self.value = value }
}
