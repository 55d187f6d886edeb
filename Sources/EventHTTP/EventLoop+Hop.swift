extension EventLoop {
    /// Runs `work` now when called on this loop's thread, else hands it to this loop with `execute`.
    /// The one helper for "run here or hop to the owner loop". Any thread.
    ///
    /// Order: jobs hopping from one thread run in the order they were given (the loop's queue is FIFO);
    /// a job run inline runs before jobs already queued for this loop, as a direct call would.
    @inline(__always)
    public func runOrExecute(_ work: @escaping @Sendable () -> Void) {
        if inEventLoop { work() } else { execute(work) }
    }
}
