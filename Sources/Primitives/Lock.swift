import CTSan
import Synchronization

/// A value behind a mutex: the project's one lock type.
///
/// Built on `Synchronization.Mutex` (no C mutex stored inline in a class and passed as
/// `&mutex`, whose address Swift does not promise to keep), and visible to ThreadSanitizer: the mutex
/// takes and gives back its futex inside the precompiled Swift runtime, which ThreadSanitizer does not
/// instrument, so a plain `Mutex` looks like no synchronisation at all and every guarded access from a
/// second thread is reported as a race. `Lock` annotates each hold with `__tsan_acquire` after locking
/// and `__tsan_release` before unlocking (`CTSan`); in a build without ThreadSanitizer those are null
/// weak symbols and each annotation is one predictable branch. `scripts/tsan-lock-check.sh` shows the
/// difference: the same program reports a race with `Mutex` and none with `Lock`.
///
/// A class, so that it can be shared by reference and captured by closures, with a stable address for
/// the annotations. Hold it briefly: no I/O, no waiting, no call that may take another `Lock`.
///
/// Threading: any thread.
public final class Lock<Value>: Sendable {
    @usableFromInline let mutex: Mutex<Value>

    /// A lock guarding `value`.
    public init(_ value: sending Value) {
        mutex = Mutex(value)
    }

    /// Runs `body` with exclusive access to the value and returns its result.
    @inlinable
    public func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        let address = UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
        return try mutex.withLock { (value: inout sending Value) throws(E) -> sending Result in
            ctsan_acquire(address)
            defer { ctsan_release(address) }
            return try body(&value)
        }
    }
}
