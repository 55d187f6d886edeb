// The parts of libevent the EventHTTP module uses. Only EventHTTP imports this module.
#ifndef CLIBEVENT_SHIM_H
#define CLIBEVENT_SHIM_H
#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/http_struct.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

/// Iterates the headers of an evhttp key/value queue without exposing the TAILQ macros to Swift.
static inline struct evkeyval *clibevent_headers_first(struct evkeyvalq *q) { return TAILQ_FIRST(q); }
static inline struct evkeyval *clibevent_headers_next(struct evkeyval *kv) { return TAILQ_NEXT(kv, next); }
#endif
