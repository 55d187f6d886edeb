// hiredis (0.14) with a libevent adapter of our own (below), and a raw mode for subscription connections
// (every reply handed over in order: hiredis 0.14 knows no sharded pub/sub). Only the RedisClient module
// imports this module.
#ifndef CHIREDIS_SHIM_H
#define CHIREDIS_SHIM_H
// System headers first, as in CLibevent's shim: libevent's event-config.h defines _GNU_SOURCE, and
// system headers seen after it would be compiled with other feature macros than Swift's Glibc module.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/time.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <netdb.h>
#include <sys/ioctl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

// By their path under the include root (Debian and Homebrew install them in `hiredis/`), not through
// hiredis.pc: its cflags add -D_FILE_OFFSET_BITS=64, which SwiftPM refuses for a system library
// ("prohibited flag(s)", a warning on every build), and the -I it adds is needed only for bare names.
// hiredis's own headers include each other with quotes, found beside them. (-D_FILE_OFFSET_BITS=64
// changes nothing on 64-bit Linux, where off_t is 64 bits anyway.)
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <event2/event.h>

/// hiredis's libevent adapter, with one change: the read event is persistent. The stock adapter's read
/// event is one-shot, so after every read libevent removes it and hiredis adds it back: with the base's
/// epoll changelist that is one `epoll_ctl` per read for nothing (hiredis 1.x's adapter is persistent
/// too). `redisAsyncHandleRead` and `redisAsyncHandleWrite` do the work, as in the stock adapter.
typedef struct chiredis_events chiredis_events;

/// A raw context's reader: every reply, in order, or NULL once when reading failed (EOF, socket error,
/// protocol error: `ac->c.errstr` says which). On NULL the callee must free the context
/// (`redisAsyncFree`). The reply is freed after the call.
typedef void (*chiredis_reply_fn)(redisAsyncContext *ac, void *reply);

struct chiredis_events {
    redisAsyncContext *context;
    struct event *rev, *wev;
    /// Raw mode (`chiredis_attach_raw`): replies go to `raw`, not through hiredis's callback lists.
    chiredis_reply_fn raw;
    /// Set while a raw read is dispatching (`busy`), and when the context was freed meanwhile (`dead`):
    /// then the read frees this struct itself once it returns.
    int busy, dead;
};

static void chiredis_read_event(evutil_socket_t fd, short event, void *arg) {
    (void)fd; (void)event;
    redisAsyncHandleRead(((chiredis_events *)arg)->context);
}

static void chiredis_write_event(evutil_socket_t fd, short event, void *arg) {
    (void)fd; (void)event;
    redisAsyncHandleWrite(((chiredis_events *)arg)->context);
}

// Adding a pending persistent event is a no-op in libevent, so hiredis's add after each read costs nothing.
static void chiredis_add_read(void *privdata) { event_add(((chiredis_events *)privdata)->rev, NULL); }
static void chiredis_del_read(void *privdata) { event_del(((chiredis_events *)privdata)->rev); }
static void chiredis_add_write(void *privdata) { event_add(((chiredis_events *)privdata)->wev, NULL); }
static void chiredis_del_write(void *privdata) { event_del(((chiredis_events *)privdata)->wev); }

static void chiredis_cleanup(void *privdata) {
    chiredis_events *e = (chiredis_events *)privdata;
    event_free(e->rev);
    event_free(e->wev);
    if (e->busy) e->dead = 1; else free(e);
}

/// The raw read event: completes the connect if needed (as hiredis's write path does), reads what the
/// socket has, and hands every complete reply to `raw` in order. Nothing goes through hiredis's reply
/// or subscription callbacks, so replies it does not know (RESP2 `ssubscribe`, `smessage`,
/// `sunsubscribe` of Redis 7's sharded pub/sub, which hiredis 0.14 would assert on) reach the caller.
static void chiredis_raw_read_event(evutil_socket_t fd, short event, void *arg) {
    (void)fd; (void)event;
    chiredis_events *e = (chiredis_events *)arg;
    redisAsyncContext *ac = e->context;
    e->busy = 1;
    if (!(ac->c.flags & REDIS_CONNECTED)) {
        redisAsyncHandleWrite(ac);  // finishes connect(2), or fails it and frees the context
        if (e->dead || !(ac->c.flags & REDIS_CONNECTED)) goto out;
    }
    if (redisBufferRead(&ac->c) == REDIS_ERR) {
        e->raw(ac, NULL);
        goto out;
    }
    for (;;) {
        void *reply = NULL;
        if (redisGetReplyFromReader(&ac->c, &reply) == REDIS_ERR) {
            e->raw(ac, NULL);
            break;
        }
        if (reply == NULL) break;
        e->raw(ac, reply);
        freeReplyObject(reply);
        if (e->dead) break;
    }
out:
    e->busy = 0;
    if (e->dead) free(e);
}

/// Attaches an async context to a libevent base; `raw` NULL: hiredis's own reply dispatch.
static inline int chiredis_attach_with(redisAsyncContext *ac, struct event_base *base, chiredis_reply_fn raw) {
    if (ac->ev.data != NULL) return REDIS_ERR;
    chiredis_events *e = (chiredis_events *)calloc(1, sizeof(*e));
    if (e == NULL) return REDIS_ERR;
    e->context = ac;
    e->raw = raw;
    e->rev = event_new(base, ac->c.fd, EV_READ | EV_PERSIST, raw ? chiredis_raw_read_event : chiredis_read_event, e);
    e->wev = event_new(base, ac->c.fd, EV_WRITE, chiredis_write_event, e);
    if (e->rev == NULL || e->wev == NULL) {
        if (e->rev) event_free(e->rev);
        if (e->wev) event_free(e->wev);
        free(e);
        return REDIS_ERR;
    }
    ac->ev.addRead = chiredis_add_read;
    ac->ev.delRead = chiredis_del_read;
    ac->ev.addWrite = chiredis_add_write;
    ac->ev.delWrite = chiredis_del_write;
    ac->ev.cleanup = chiredis_cleanup;
    ac->ev.data = e;
    event_add(e->rev, NULL);
    event_add(e->wev, NULL);
    return REDIS_OK;
}

/// Attaches an async context to a libevent base (what `redisLibeventAttach` does, with a persistent
/// read event). Returns REDIS_OK or REDIS_ERR.
static inline int chiredis_attach(redisAsyncContext *ac, struct event_base *base) {
    return chiredis_attach_with(ac, base, NULL);
}

/// Attaches in raw mode: every reply goes to `raw` (see `chiredis_raw_read_event`). Commands are
/// queued with `chiredis_append_raw` and written by `redisAsyncHandleWrite`, never with the
/// `redisAsync…Command` functions (their callbacks would never run).
static inline int chiredis_attach_raw(redisAsyncContext *ac, struct event_base *base, chiredis_reply_fn raw) {
    return chiredis_attach_with(ac, base, raw);
}

/// Queues a formatted command on a raw context's output buffer (no callback is registered).
static inline int chiredis_append_raw(redisAsyncContext *ac, const char *cmd, size_t len) {
    return redisAppendFormattedCommand(&ac->c, cmd, len);
}

/// Bytes received on the context's socket that it has not read yet (0 if none or unknown). A command's
/// timer may fire while its reply waits there: one read event reads 16 KB, and after a long loop iteration
/// the timers run in the same iteration as that one read. Redis has answered; the loop has not got to it.
static inline int chiredis_unread_bytes(const redisAsyncContext *ac) {
    int available = 0;
    if (ac == NULL || ac->c.fd < 0 || ioctl(ac->c.fd, FIONREAD, &available) != 0) return 0;
    return available;
}

/// What the kernel knows of the TCP path under the context's socket, for telling a Redis that is slow or
/// stopped (its host still acknowledges every byte) from a path that is gone. Fills
/// `out` with: [0] 1 if the connection is established, [1] consecutive retransmissions of the oldest
/// unacknowledged segment or unanswered window probes (0 once an ACK comes), [2] segments sent and not
/// yet acknowledged, [3] milliseconds since the last ACK came. Returns 0, or -1 when unknown (no socket,
/// not TCP).
static inline int chiredis_tcp_path(const redisAsyncContext *ac, unsigned out[4]) {
    struct tcp_info info;
    socklen_t len = sizeof(info);
    if (ac == NULL || ac->c.fd < 0 || getsockopt(ac->c.fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return -1;
    out[0] = info.tcpi_state == TCP_ESTABLISHED;
    out[1] = info.tcpi_retransmits > info.tcpi_probes ? info.tcpi_retransmits : info.tcpi_probes;
    out[2] = info.tcpi_unacked;
    out[3] = info.tcpi_last_ack_recv;
    return 0;
}

/// The reply's elements without pointer arithmetic in Swift.
static inline redisReply *chiredis_element(const redisReply *r, size_t i) { return r->element[i]; }
#endif
