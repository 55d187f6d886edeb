extension Application {
    /// Runs the idle-session expiry on every loop now, instead of at its next timer tick, then calls
    /// `done` (on the last loop to finish). With a manual `SessionClock`, tests advance the time and call
    /// this rather than waiting for wall time. Any thread.
    func expireIdleSessionsNow(then done: @escaping @Sendable () -> Void) {
        let loops = loopSessions
        @Sendable func run(_ index: Int) {
            guard index < loops.count else { return done() }
            let sl = loops[index]
            sl.loop.execute {
                sl.expireIdleSessions()
                run(index + 1)
            }
        }
        run(0)
    }
}
