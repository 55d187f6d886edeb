import Glibc

/// The cross-thread job queue of an `EventLoop`: a pthread mutex around an array.
///
/// A pthread mutex rather than `Synchronization.Mutex`: on Linux the latter is a raw futex that
/// ThreadSanitizer cannot see, so every handoff looked like a data race under `--sanitize=thread`.
/// Uncontended, both cost about the same.
final class JobQueue: @unchecked Sendable {
    private var mutex = pthread_mutex_t()
    private var jobs: [@Sendable () -> Void] = []

    init() { pthread_mutex_init(&mutex, nil) }
    deinit { pthread_mutex_destroy(&mutex) }

    /// Appends a job; true when the queue was empty (the loop needs a wake-up).
    func append(_ job: @escaping @Sendable () -> Void) -> Bool {
        pthread_mutex_lock(&mutex)
        jobs.append(job)
        let wasEmpty = jobs.count == 1
        pthread_mutex_unlock(&mutex)
        return wasEmpty
    }

    /// Takes every queued job, oldest first.
    func takeAll() -> [@Sendable () -> Void] {
        pthread_mutex_lock(&mutex)
        let taken = jobs
        jobs.removeAll(keepingCapacity: true)
        pthread_mutex_unlock(&mutex)
        return taken
    }
}
