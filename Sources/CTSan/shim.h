// ThreadSanitizer's synchronisation annotations, for `Primitives.Lock`. Only Primitives imports this module.
//
// `Synchronization.Mutex` locks with atomics and futex calls in the precompiled Swift runtime, which
// ThreadSanitizer does not instrument: it sees no happens-before between two holders of the lock and
// reports every access to the guarded value from a second thread as a race. `Lock` tells it, with
// `__tsan_acquire` after taking the mutex and `__tsan_release` before giving it back.
//
// The two functions exist only in a process linked with the ThreadSanitizer runtime (`-sanitize=thread`):
// declared weak, their address is null in every other build, where the inline helpers below cost one
// predictable branch each and call nothing.
#ifndef CTSAN_SHIM_H
#define CTSAN_SHIM_H

void __tsan_acquire(void *addr) __attribute__((weak));
void __tsan_release(void *addr) __attribute__((weak));

/// True when the ThreadSanitizer runtime is linked into this process.
static inline int ctsan_enabled(void) { return __tsan_acquire != 0; }

/// Tells ThreadSanitizer that the caller now holds the synchronisation object at `addr`.
static inline void ctsan_acquire(const void *addr) {
    if (__tsan_acquire) __tsan_acquire((void *)addr);
}

/// Tells ThreadSanitizer that the caller is about to let go of the synchronisation object at `addr`.
static inline void ctsan_release(const void *addr) {
    if (__tsan_release) __tsan_release((void *)addr);
}

#endif
