// The parts of libevent the EventHTTP module uses. Only EventHTTP imports this module.
#ifndef CLIBEVENT_SHIM_H
#define CLIBEVENT_SHIM_H
// System headers first: libevent's event-config.h defines _GNU_SOURCE, and system headers seen
// after it would be compiled with other feature macros than Swift's Glibc module (two different
// `fd_set`s, which clean builds reject). Included here, they are imported from the Glibc module.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/time.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <netdb.h>

#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>

/// Iterates the headers of an evhttp key/value queue without exposing the TAILQ macros to Swift.
static inline struct evkeyval *clibevent_headers_first(struct evkeyvalq *q) { return q->tqh_first; }
static inline struct evkeyval *clibevent_headers_next(struct evkeyval *kv) { return kv->next.tqe_next; }

/// A non-blocking, close-on-exec eventfd used to wake a loop from another thread.
static inline int clibevent_wakefd_new(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }
static inline void clibevent_wakefd_signal(int fd) { eventfd_write(fd, 1); }
static inline void clibevent_wakefd_drain(int fd) { eventfd_t v; (void)eventfd_read(fd, &v); }

/// CPUs in the calling process's affinity mask (sched_getaffinity), or -1. Here because glibc
/// declares it only under _GNU_SOURCE, which Swift's Glibc module is not built with.
int sched_getaffinity(pid_t pid, size_t cpusetsize, void *mask);
static inline int clibevent_affinity_cpu_count(void) {
    unsigned long mask[1024 / (8 * sizeof(unsigned long))];
    if (sched_getaffinity(0, sizeof mask, mask) != 0) return -1;
    int count = 0;
    for (size_t i = 0; i < sizeof mask / sizeof mask[0]; i++) count += __builtin_popcountl(mask[i]);
    return count;
}
#endif
