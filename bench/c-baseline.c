/*
 * c-baseline: the smallest libevent evhttp server that answers GET /bench/json, as the ceiling the
 * Swift server's own /bench/json route (bff --bench-routes) is measured against.
 *
 * Single-threaded: one event_base, one evhttp, run on the calling thread. Same response bytes as
 * bff: `{"ok":true,"service":"bff"}` with Content-Type: application/json. Any other path gets 404.
 *
 *   cc -O2 -o c-baseline bench/c-baseline.c $(pkg-config --cflags --libs libevent)
 *   ./c-baseline 8090              # listens on 127.0.0.1:8090; SIGINT/SIGTERM stop it
 *   ./c-baseline 8090 changelist   # the same with EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST, the
 *                                  # event_base configuration bff itself uses (like for like)
 */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char body[] = "{\"ok\":true,\"service\":\"bff\"}";

static void bench_json_cb(struct evhttp_request *req, void *arg) {
    (void)arg;
    if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET");
        evhttp_send_error(req, 405, "Method Not Allowed");
        return;
    }
    struct evkeyvalq *headers = evhttp_request_get_output_headers(req);
    evhttp_add_header(headers, "Content-Type", "application/json");
    struct evbuffer *out = evhttp_request_get_output_buffer(req);
    evbuffer_add_reference(out, body, sizeof body - 1, NULL, NULL);
    evhttp_send_reply(req, 200, "OK", NULL);
}

static void not_found_cb(struct evhttp_request *req, void *arg) {
    (void)arg;
    evhttp_send_error(req, 404, "Not Found");
}

static void stop_cb(evutil_socket_t sig, short events, void *arg) {
    (void)sig;
    (void)events;
    event_base_loopexit((struct event_base *)arg, NULL);
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "changelist") != 0)) {
        fprintf(stderr, "usage: %s PORT [changelist]\n", argv[0]);
        return 2;
    }
    char *end = NULL;
    long port = strtol(argv[1], &end, 10);
    if (end == argv[1] || *end != '\0' || port < 1 || port > 65535) {
        fprintf(stderr, "c-baseline: bad port '%s'\n", argv[1]);
        return 2;
    }

    struct event_config *cfg = event_config_new();
    if (cfg == NULL) {
        fprintf(stderr, "c-baseline: event_config_new failed\n");
        return 1;
    }
    if (argc == 3) event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    struct event_base *base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    if (base == NULL) {
        fprintf(stderr, "c-baseline: event_base_new failed\n");
        return 1;
    }
    struct evhttp *http = evhttp_new(base);
    if (http == NULL) {
        fprintf(stderr, "c-baseline: evhttp_new failed\n");
        return 1;
    }
    evhttp_set_cb(http, "/bench/json", bench_json_cb, NULL);
    evhttp_set_gencb(http, not_found_cb, NULL);
    if (evhttp_bind_socket(http, "127.0.0.1", (ev_uint16_t)port) != 0) {
        perror("c-baseline: evhttp_bind_socket");
        return 1;
    }

    struct event *sigint = evsignal_new(base, SIGINT, stop_cb, base);
    struct event *sigterm = evsignal_new(base, SIGTERM, stop_cb, base);
    if (sigint == NULL || sigterm == NULL || evsignal_add(sigint, NULL) != 0 || evsignal_add(sigterm, NULL) != 0) {
        fprintf(stderr, "c-baseline: cannot install signal handlers\n");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);

    fprintf(stderr, "c-baseline: listening on 127.0.0.1:%ld\n", port);
    event_base_dispatch(base);

    event_free(sigint);
    event_free(sigterm);
    evhttp_free(http);
    event_base_free(base);
    return 0;
}
