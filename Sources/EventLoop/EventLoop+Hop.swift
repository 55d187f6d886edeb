extension EventLoop {
    /// Runs `work` now when called on this loop's thread, else hands it to this loop with `execute`.
    /// The one helper for "run here or hop to the owner loop". Any thread.
    ///
    /// Order: jobs hopping from one thread run in the order they were given (the loop's queue is FIFO);
    /// a job run inline runs before jobs already queued for this loop, as a direct call would.
    @inlinable
    public func runOrExecute(_ work: @escaping @Sendable () -> Void) {
        if inEventLoop { work() } else { execute(work) }
    }

    /// `runOrExecute` for hot paths (every event to every stream): `work` is a function of `value`, so a
    /// non-capturing closure literal needs no heap-allocated context, and only the hop (which must keep
    /// `value` until the loop runs it) allocates one.
    @inlinable
    public func runOrExecute<Value: Sendable>(with value: Value, _ work: @escaping @Sendable (Value) -> Void) {
        if inEventLoop { work(value) } else { execute { work(value) } }
    }
}
