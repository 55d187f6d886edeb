// The parts of libevent the EventHTTP module uses. Only EventHTTP imports this module.
// SwiftPM does not rebuild EventHTTP when only this header changes (its static inline functions are
// compiled into their Swift callers): touch a Swift file that calls what changed.
#ifndef CLIBEVENT_SHIM_H
#define CLIBEVENT_SHIM_H
// System headers first: libevent's event-config.h defines _GNU_SOURCE, and system headers seen
// after it would be compiled with other feature macros than Swift's Glibc module (two different
// `fd_set`s, which clean builds reject). Included here, they are imported from the Glibc module.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
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
// `struct evhttp_request`'s fields (public header), under another name: included as it is, the
// complete type would make Swift import every `struct evhttp_request *` of the evhttp API as a
// typed pointer instead of the `OpaquePointer` EventHTTP uses. Only the raw-reply helpers below
// read it (a cast of the same pointer).
#define evhttp_request clibevent_evhttp_request_fields
#include <event2/http_struct.h>
#undef evhttp_request
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
// MARK: a complete response written in one piece (HTTPResponder's raw path, RawReply.swift)
//
// `evhttp_send_reply` (http.c, libevent 2.1.12) = `evhttp_response_code_` + `evhttp_send`:
// `evhttp_make_header` prints the status line and every output header with its own
// `evbuffer_add_printf`, then `evhttp_write_buffer(evcon, evhttp_send_done, NULL)` sets the
// connection's done-callback, `bufferevent_setcb(bev, NULL, evhttp_write_cb, evhttp_error_cb,
// evcon)` and `bufferevent_enable(bev, EV_READ|EV_WRITE)`. bff writes the whole response itself
// and then does what `evhttp_write_buffer` does, with the callbacks the bufferevent already has
// (evhttp's own two are static), and lets `evhttp_send_reply_end` set the done-callback: not
// chunked and the output not empty, it sets `evcon->cb = evhttp_send_done`, which (once the
// bytes are written) frees the request and closes the connection or reads the next request,
// deciding from the input headers, the version and the output headers as after
// `evhttp_send_reply`; bff writes the bytes before that call, so with the output empty it calls
// `evhttp_send_done` at once. Reads fields of `struct evhttp_request` (event2/http_struct.h, a public
// header whose layout is fixed within a libevent release): `clibevent_raw_reply_supported`
// checks at start-up that the library is the release these headers describe.

/// What `clibevent_raw_reply_check` found; 0 means "use evhttp_send_reply".
enum {
    CLIBEVENT_RAW_OK = 1,         // the response may be written raw
    CLIBEVENT_RAW_HTTP11 = 2,     // HTTP/1.1 (else HTTP/1.0)
    CLIBEVENT_RAW_KEEPALIVE = 4,  // the request's `Connection` starts with "keep-alive" (evhttp_is_connection_keepalive)
    CLIBEVENT_RAW_CLOSE = 8,      // the request's `Connection` is "close" (evhttp_is_connection_close)
};

/// True when the running libevent is the release this module was compiled against (the layout of
/// `struct evhttp_request` the raw path reads is that release's).
static inline int clibevent_raw_reply_supported(void) {
    return event_get_version_number() == LIBEVENT_VERSION_NUMBER;
}

/// Whether `req` may be answered by `clibevent_raw_reply_finish` after the caller wrote the
/// response to `clibevent_raw_reply_output(req)`: a request on a live connection, HTTP/1.0 or 1.1,
/// not HEAD or CONNECT (evhttp_response_needs_body), not a proxy request (evhttp would drop a
/// `Connection: close`), no chunked request body left flagged in `req->chunked` (evhttp_send_reply_end
/// would append a last chunk), and the bufferevent's callbacks evhttp's (argument = the connection).
/// Returns CLIBEVENT_RAW_* bits, 0 if not.
static inline int clibevent_raw_reply_check(struct evhttp_request *request) {
    struct clibevent_evhttp_request_fields *req = (struct clibevent_evhttp_request_fields *)request;
    struct evhttp_connection *evcon = req->evcon;
    if (evcon == NULL || req->major != 1 || (req->minor != 0 && req->minor != 1)) return 0;
    if (req->chunked || (req->flags & EVHTTP_PROXY_REQUEST) || req->kind != EVHTTP_REQUEST) return 0;
    if (req->type == EVHTTP_REQ_HEAD || req->type == EVHTTP_REQ_CONNECT) return 0;
    bufferevent_data_cb writecb = NULL;
    bufferevent_event_cb eventcb = NULL;
    void *arg = NULL;
    bufferevent_getcb(evhttp_connection_get_bufferevent(evcon), NULL, &writecb, &eventcb, &arg);
    if (writecb == NULL || eventcb == NULL || arg != (void *)evcon) return 0;
    int bits = CLIBEVENT_RAW_OK;
    if (req->minor == 1) bits |= CLIBEVENT_RAW_HTTP11;
    // the first `Connection` field, as evhttp_find_header finds it for evhttp
    const char *connection = evhttp_find_header(req->input_headers, "Connection");
    if (connection != NULL) {
        if (evutil_ascii_strncasecmp(connection, "keep-alive", 10) == 0) bits |= CLIBEVENT_RAW_KEEPALIVE;
        if (evutil_ascii_strcasecmp(connection, "close") == 0) bits |= CLIBEVENT_RAW_CLOSE;
    }
    return bits;
}

/// One chunk of a streaming response (after `evhttp_send_reply_start`), as `evhttp_send_reply_chunk`
/// (http.c, 2.1.12) queues it, in one piece: its `%x\r\n` size line (chunked responses), the bytes and
/// `\r\n`, written with one `evbuffer_reserve_space`/`evbuffer_commit_space` instead of a printf and two
/// more appends (each of which runs the buffer's callbacks). Skipped as evhttp skips it: no connection,
/// nothing to send, a response without a body. Unlike evhttp it does not ask for writability
/// (`evhttp_write_buffer`: the callbacks it sets are those `evhttp_send_reply_start` set already): the
/// caller writes to the socket at once and asks only if bytes remain (`ConnectionState`).
/// Returns 0 when the chunk could not be queued (no memory): the caller falls back to evhttp's way.
static inline int clibevent_stream_chunk(struct evhttp_request *request, const void *data, size_t len) {
    struct clibevent_evhttp_request_fields *req = (struct clibevent_evhttp_request_fields *)request;
    if (req->evcon == NULL || len == 0) return 1;
    // evhttp_response_needs_body
    if (req->response_code == 204 || req->response_code == 304 ||
        (req->response_code >= 100 && req->response_code < 200) || req->type == EVHTTP_REQ_HEAD)
        return 1;
    struct evbuffer *output = bufferevent_get_output(evhttp_connection_get_bufferevent(req->evcon));
    struct evbuffer_iovec vector;
    if (evbuffer_reserve_space(output, (ev_ssize_t)(len + 20), &vector, 1) < 1 || vector.iov_len < len + 20) return 0;
    char *p = (char *)vector.iov_base;
    if (req->chunked) {
        static const char hex[] = "0123456789abcdef";
        char digits[16];
        int n = 0;
        size_t v = len;
        do {
            digits[n++] = hex[v & 15];
            v >>= 4;
        } while (v != 0);
        while (n > 0) *p++ = digits[--n];
        *p++ = '\r';
        *p++ = '\n';
    }
    memcpy(p, data, len);
    p += len;
    if (req->chunked) {
        *p++ = '\r';
        *p++ = '\n';
    }
    vector.iov_len = (size_t)(p - (char *)vector.iov_base);
    return evbuffer_commit_space(output, &vector, 1) == 0;
}

/// Treats a request whose target was in absolute form (`GET http://host/path`) as one to this origin
/// server (RFC 9112 §3.2.2), not as a proxy request: evhttp flags those whose host is no vhost of
/// its own, and then closes the connection after the response unless `Proxy-Connection: keep-alive`.
static inline void clibevent_request_for_origin(struct evhttp_request *request) {
    ((struct clibevent_evhttp_request_fields *)request)->flags &= ~EVHTTP_PROXY_REQUEST;
}

/// The connection's output buffer, where the raw response goes (after a successful check).
static inline struct evbuffer *clibevent_raw_reply_output(struct evhttp_request *req) {
    return bufferevent_get_output(evhttp_connection_get_bufferevent(evhttp_request_get_connection(req)));
}

/// Completes a response whose bytes are in the output buffer: `evhttp_response_code_` without
/// the reason's copy (nothing reads it after the head is written), `evhttp_write_buffer`'s
/// callbacks and enable, then `evhttp_send_reply_end` (userdone, evcon->cb = evhttp_send_done).
///
/// The bytes are written to the socket first, here, not when epoll next reports the socket
/// writable. evhttp's way registers the socket for `EPOLLOUT` (an `epoll_ctl`), returns to
/// `epoll_wait`, writes, and unregisters it (a second `epoll_ctl`): per request, two system calls
/// and a loop iteration more. When the socket takes everything, `evhttp_send_reply_end` finds the
/// output empty and calls `evhttp_send_done` at once, as libevent does for a streamed response
/// that ends with nothing queued: the request is freed (`request` must not be used after this
/// call) and the connection reads its next request (a pipelined one from the next loop iteration:
/// `evhttp_start_read_` defers it) or is freed (`Connection: close`, HTTP/1.0 without keep-alive).
/// That turns `EV_WRITE` off again in the same iteration, so the enable never reaches epoll
/// (`EPOLL_USE_CHANGELIST`). What the socket does not take stays queued and goes out as before.
/// A failed write (the peer left) also leaves the bytes queued: the bufferevent's own write then
/// fails and evhttp's error callback frees the connection, as before.
static inline void clibevent_raw_reply_finish(struct evhttp_request *request, int code) {
    struct clibevent_evhttp_request_fields *req = (struct clibevent_evhttp_request_fields *)request;
    struct bufferevent *bev = evhttp_connection_get_bufferevent(req->evcon);
    bufferevent_data_cb writecb = NULL;
    bufferevent_event_cb eventcb = NULL;
    void *arg = NULL;
    bufferevent_getcb(bev, NULL, &writecb, &eventcb, &arg);
    req->kind = EVHTTP_RESPONSE;
    req->response_code = code;
    bufferevent_setcb(bev, NULL, writecb, eventcb, arg);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
    // The bufferevent freezes the start of its output so that only it drains it: lifted for this
    // one write on the loop thread (as `ConnectionState.flushOutput` does for stream chunks).
    struct evbuffer *output = bufferevent_get_output(bev);
    evutil_socket_t fd = bufferevent_getfd(bev);
    if (fd >= 0 && evbuffer_get_length(output) > 0) {
        evbuffer_unfreeze(output, 1);
        (void)evbuffer_write(output, fd);
        evbuffer_freeze(output, 1);
    }
    evhttp_send_reply_end(request);
}
#endif
