import CLibevent

extension EventLoop {
    /// Makes `run()` return after the current iteration. Safe from any thread (hops to the loop).
    /// For loops started with `startThread(name:)` outside an `HTTPServer` (RedisClient's tests).
    package func stop() {
        execute { [self] in _ = event_base_loopbreak(base) }
    }
}
