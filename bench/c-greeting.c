/*
 * c-greeting: the greeting subset of the bff contract as the smallest single-threaded libevent evhttp
 * program, the baseline `bench/latency.sh` measures bff's input-to-output latency against
 * (the same `bff-load latency` run against both, in the same run of the script).
 *
 * What it answers (enough for `bff-load latency`, nothing more):
 *   POST   /api/sessions                          201 {"id":"c123"}
 *   GET    /api/sessions/{id}/state               200 the snapshot, encoded per request (the same 290
 *                                                 bytes as a fresh bff session's; search and status
 *                                                 are constants here, bff's defaults)
 *   GET    /api/sessions/{id}/events              text/event-stream: retry, snapshot, then events
 *   POST   /api/sessions/{id}/greeting/name       202 {"inputSeq":N}; {"value":"..."} sets the name;
 *                                                 when buttonEnabled (name not empty) changes, an
 *                                                 event "greeting" {"inputSeq":N,"outputs":{...}}
 *   DELETE /api/sessions/{id}                     204, ends the session's stream
 * No validation beyond what it needs, no limits, no metrics, no logging: a floor, not a server.
 *
 *   cc -O2 -o c-greeting bench/c-greeting.c $(pkg-config --cflags --libs libevent)
 *   ./c-greeting 8092            # listens on 127.0.0.1:8092; SIGINT/SIGTERM stop it
 */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SESSIONS 100000

struct session {
    int live;
    long seq;          /* last event id */
    long input_seq;    /* last accepted input */
    int button_enabled;
    struct evhttp_request *stream; /* the open event stream, if any */
};

static struct session *sessions;
static int session_count;
static struct evbuffer *chunk;

static void reply_json(struct evhttp_request *req, int code, const char *reason, const char *json) {
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evbuffer_add(evhttp_request_get_output_buffer(req), json, strlen(json));
    evhttp_send_reply(req, code, reason, NULL);
}

/* GET /state: the snapshot, encoded per request from the session's fields. */
static void send_state(struct evhttp_request *req, struct session *s) {
    struct evkeyvalq *headers = evhttp_request_get_output_headers(req);
    evhttp_add_header(headers, "Content-Type", "application/json");
    evhttp_add_header(headers, "Cache-Control", "no-store");
    evbuffer_add_printf(evhttp_request_get_output_buffer(req),
                        "{\"seq\":%ld,\"viewModels\":{\"search\":{\"query\":\"\",\"sort\":\"best-match\","
                        "\"searchEnabled\":false,\"isLoading\":false,\"repositories\":[],\"totalCount\":0,"
                        "\"hasMore\":false,\"error\":null,\"stale\":false},\"greeting\":{\"buttonEnabled\":%s,"
                        "\"label\":null},\"status\":{\"reachable\":true,\"message\":null,\"rateLimit\":null}}}",
                        s->seq, s->button_enabled ? "true" : "false");
    evhttp_send_reply(req, 200, "OK", NULL);
}

static void stream_closed(struct evhttp_connection *evcon, void *arg) {
    (void)evcon;
    struct session *s = arg;
    s->stream = NULL;
}

/* "/api/sessions/c12/..." -> the session, and *rest points after the id ("" or "/events", ...). */
static struct session *session_of(const char *path, const char **rest) {
    const char *prefix = "/api/sessions/c";
    size_t n = strlen(prefix);
    if (strncmp(path, prefix, n) != 0) return NULL;
    char *end = NULL;
    long index = strtol(path + n, &end, 10);
    if (end == path + n || index < 0 || index >= session_count || !sessions[index].live) return NULL;
    *rest = end;
    return &sessions[index];
}

static void open_stream(struct evhttp_request *req, struct session *s) {
    struct evkeyvalq *headers = evhttp_request_get_output_headers(req);
    evhttp_add_header(headers, "Content-Type", "text/event-stream");
    evhttp_add_header(headers, "Cache-Control", "no-cache");
    evhttp_send_reply_start(req, 200, "OK");
    evbuffer_add_printf(chunk,
                        "retry: 2000\n\nid: %ld\nevent: snapshot\ndata: {\"seq\":%ld,\"viewModels\":{\"greeting\":"
                        "{\"buttonEnabled\":%s,\"label\":null}}}\n\n",
                        s->seq, s->seq, s->button_enabled ? "true" : "false");
    evhttp_send_reply_chunk(req, chunk);
    s->stream = req;
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), stream_closed, s);
}

static void set_name(struct evhttp_request *req, struct session *s) {
    /* {"value":"..."}: the name is empty exactly when the two quotes after "value": are adjacent. */
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    char body[512];
    size_t len = evbuffer_copyout(in, body, sizeof body - 1);
    body[len] = '\0';
    const char *value = strstr(body, "\"value\"");
    const char *quote = value ? strchr(value + 7, '"') : NULL;
    if (quote == NULL) {
        reply_json(req, 400, "Bad Request", "{\"detail\":\"expected {\\\"value\\\": string}\"}");
        return;
    }
    int enabled = quote[1] != '"';
    long input_seq = ++s->input_seq;
    if (enabled != s->button_enabled) {
        s->button_enabled = enabled;
        long seq = ++s->seq;
        if (s->stream != NULL) {
            evbuffer_add_printf(chunk,
                                "id: %ld\nevent: greeting\ndata: {\"inputSeq\":%ld,\"outputs\":{\"buttonEnabled\":%s}}\n\n",
                                seq, input_seq, enabled ? "true" : "false");
            evhttp_send_reply_chunk(s->stream, chunk);
        }
    }
    char reply[64];
    snprintf(reply, sizeof reply, "{\"inputSeq\":%ld}", input_seq);
    reply_json(req, 202, "Accepted", reply);
}

static void handle(struct evhttp_request *req, void *arg) {
    (void)arg;
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
    enum evhttp_cmd_type method = evhttp_request_get_command(req);
    if (path == NULL) {
        evhttp_send_error(req, 400, "Bad Request");
        return;
    }
    if (strcmp(path, "/api/sessions") == 0 && method == EVHTTP_REQ_POST) {
        if (session_count == MAX_SESSIONS) {
            evhttp_send_error(req, 503, "Service Unavailable");
            return;
        }
        int index = session_count++;
        sessions[index].live = 1;
        char reply[64];
        snprintf(reply, sizeof reply, "{\"id\":\"c%d\"}", index);
        reply_json(req, 201, "Created", reply);
        return;
    }
    const char *rest = NULL;
    struct session *s = session_of(path, &rest);
    if (s == NULL) {
        evhttp_send_error(req, 404, "Not Found");
    } else if (strcmp(rest, "/state") == 0 && method == EVHTTP_REQ_GET) {
        send_state(req, s);
    } else if (strcmp(rest, "/events") == 0 && method == EVHTTP_REQ_GET) {
        open_stream(req, s);
    } else if (strcmp(rest, "/greeting/name") == 0 && method == EVHTTP_REQ_POST) {
        set_name(req, s);
    } else if (rest[0] == '\0' && method == EVHTTP_REQ_DELETE) {
        s->live = 0;
        if (s->stream != NULL) {
            evhttp_connection_set_closecb(evhttp_request_get_connection(s->stream), NULL, NULL);
            evhttp_send_reply_end(s->stream);
            s->stream = NULL;
        }
        evhttp_send_reply(req, 204, "No Content", NULL);
    } else {
        evhttp_send_error(req, 405, "Method Not Allowed");
    }
}

static void stop_cb(evutil_socket_t sig, short events, void *arg) {
    (void)sig;
    (void)events;
    event_base_loopexit((struct event_base *)arg, NULL);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s PORT\n", argv[0]);
        return 2;
    }
    char *end = NULL;
    long port = strtol(argv[1], &end, 10);
    if (end == argv[1] || *end != '\0' || port < 1 || port > 65535) {
        fprintf(stderr, "c-greeting: bad port '%s'\n", argv[1]);
        return 2;
    }
    sessions = calloc(MAX_SESSIONS, sizeof *sessions);
    chunk = evbuffer_new();
    struct event_base *base = event_base_new();
    struct evhttp *http = base ? evhttp_new(base) : NULL;
    if (sessions == NULL || chunk == NULL || http == NULL) {
        fprintf(stderr, "c-greeting: out of memory\n");
        return 1;
    }
    evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_DELETE);
    evhttp_set_gencb(http, handle, NULL);
    if (evhttp_bind_socket(http, "127.0.0.1", (ev_uint16_t)port) != 0) {
        perror("c-greeting: evhttp_bind_socket");
        return 1;
    }
    struct event *sigint = evsignal_new(base, SIGINT, stop_cb, base);
    struct event *sigterm = evsignal_new(base, SIGTERM, stop_cb, base);
    if (sigint == NULL || sigterm == NULL || evsignal_add(sigint, NULL) != 0 || evsignal_add(sigterm, NULL) != 0) {
        fprintf(stderr, "c-greeting: cannot install signal handlers\n");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    fprintf(stderr, "c-greeting: listening on 127.0.0.1:%ld\n", port);
    event_base_dispatch(base);
    event_free(sigint);
    event_free(sigterm);
    evhttp_free(http);
    event_base_free(base);
    evbuffer_free(chunk);
    free(sessions);
    return 0;
}
