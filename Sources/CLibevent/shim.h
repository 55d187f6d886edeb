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
#endif
