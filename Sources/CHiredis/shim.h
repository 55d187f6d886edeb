// hiredis (0.14) with its libevent adapter. Only the RedisClient module imports this module.
#ifndef CHIREDIS_SHIM_H
#define CHIREDIS_SHIM_H
// System headers first, as in CLibevent's shim: libevent's event-config.h defines _GNU_SOURCE, and
// system headers seen after it would be compiled with other feature macros than Swift's Glibc module.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/time.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <netdb.h>

// Debian's hiredis.pc gives -I/usr/include/hiredis, so the headers are included by their bare names.
#include <hiredis.h>
#include <async.h>
#include <adapters/libevent.h>

/// Attaches an async context to a libevent base (the adapter's functions are `static` in its header;
/// this one wrapper is what Swift calls). Returns REDIS_OK or REDIS_ERR.
static inline int chiredis_attach(redisAsyncContext *ac, struct event_base *base) {
    return redisLibeventAttach(ac, base);
}

/// The reply's elements without pointer arithmetic in Swift.
static inline redisReply *chiredis_element(const redisReply *r, size_t i) { return r->element[i]; }
#endif
