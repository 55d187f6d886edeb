import Glibc

/// SIGTERM/SIGINT handling by `sigwait` on the main thread (no async-signal-unsafe handlers): make one
/// before any thread starts (so only `wait` sees the signals), start the application, then `wait`.
/// SIGPIPE is ignored (a vanished client is an error on its socket, not the end of the process).
public struct ShutdownSignals {
    private var set = sigset_t()

    /// Blocks SIGTERM and SIGINT on this thread and every thread started after it.
    public init() {
        signal(SIGPIPE, SIG_IGN)
        sigemptyset(&set)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGINT)
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Waits for SIGTERM or SIGINT; returns which came.
    public func wait() -> Int32 {
        var s = set
        var sig: Int32 = 0
        sigwait(&s, &sig)
        return sig
    }
}
