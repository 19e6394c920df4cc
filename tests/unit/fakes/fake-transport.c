/* Scripted fake transport (see fake-transport.h). Owns copies of everything it
 * is given and records; delivers only from its own timers or from the test's
 * calls, never from inside submit, as the transport contract requires. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "drainer/base/macro.h"
#include "drainer/base/timesrc.h"
#include "fakes/fake-transport.h"

struct expectation {
        char *method, *prefix;
        int error;
        long status;
        char *body;
        char *headers[FAKE_MAX_HEADERS];
        char *chunks[FAKE_MAX_CHUNKS];
        size_t n_chunks;
        uint64_t delay_usec, chunk_interval_usec;
        bool hold_open, unanswered;
        unsigned left; /* FAKE_FOREVER: unlimited */
};

enum call_phase {
        PHASE_UNMATCHED,
        PHASE_SCHEDULED, /* waiting for delay_usec */
        PHASE_STREAMING, /* chunks being delivered */
        PHASE_HELD,      /* open stream, all chunks delivered */
};

struct http_call {
        struct fake_transport *f;
        struct http_call *next; /* in flight, oldest first */
        uint64_t id;
        struct dtimer timer;
        size_t req; /* index into f->reqs */
        int exp;    /* index into f->exps, -1 if unmatched */
        http_data_fn on_data;
        http_done_fn on_done;
        void *userdata;
        bool stream, cancelled;
        enum call_phase phase;
        size_t piece; /* next piece to stream: 0 = body (if any), then chunks */
};

struct fake_transport {
        struct transport base;
        struct timesrc *ts;
        struct http_call *calls; /* in flight */
        uint64_t next_id;
        struct fake_request **reqs;
        size_t n_reqs;
        struct expectation *exps;
        size_t n_exps;
        uint64_t cancels;
        struct dtimer close_timer;
        void (*close_cb)(struct transport *t, void *userdata);
        void *close_userdata;
        bool closed;
};

static char *xstrdup(const char *s) {
        char *p;

        if (!s)
                return NULL;
        p = strdup(s);
        assert(p);
        return p;
}

static bool starts_with(const char *s, const char *prefix) {
        return !prefix || strncmp(s, prefix, strlen(prefix)) == 0;
}

static bool exp_matches(const struct expectation *e, const struct fake_request *r) {
        return e->left > 0 && (!e->method || streq(e->method, r->method)) && starts_with(r->path, e->prefix);
}

static void call_arm(struct http_call *call, uint64_t after) {
        dtimer_start(&call->timer, after);
}

/* Finite expectations first, in queue order; then unlimited ones (defaults). */
static int find_expectation(struct fake_transport *f, const struct fake_request *r) {
        for (int pass = 0; pass < 2; pass++)
                for (size_t i = 0; i < f->n_exps; i++) {
                        struct expectation *e = &f->exps[i];

                        if ((e->left == FAKE_FOREVER) == (pass == 1) && exp_matches(e, r))
                                return (int)i;
                }
        return -1;
}

static void call_match(struct http_call *call, int exp) {
        struct fake_transport *f = call->f;
        struct expectation *e = &f->exps[exp];

        if (e->left != FAKE_FOREVER)
                e->left--;
        call->exp = exp;
        f->reqs[call->req]->matched = exp;
        call->phase = PHASE_SCHEDULED;
        if (!call->cancelled)
                call_arm(call, e->delay_usec);
}

static void call_unlink(struct http_call *call) {
        struct fake_transport *f = call->f;

        for (struct http_call **p = &f->calls; *p; p = &(*p)->next)
                if (*p == call) {
                        *p = call->next;
                        return;
                }
        assert(!"fake transport: call not in flight");
}

static uint64_t parse_retry_after(const struct expectation *e) {
        for (size_t i = 0; i < FAKE_MAX_HEADERS && e->headers[i]; i++)
                if (strncasecmp(e->headers[i], "Retry-After:", 12) == 0)
                        return (uint64_t)strtoull(e->headers[i] + 12, NULL, 10) * USEC_PER_SEC;
        return 0;
}

static const char *content_type(const struct expectation *e) {
        for (size_t i = 0; i < FAKE_MAX_HEADERS && e->headers[i]; i++)
                if (strncasecmp(e->headers[i], "Content-Type:", 13) == 0) {
                        const char *v = e->headers[i] + 13;

                        while (*v == ' ')
                                v++;
                        return v;
                }
        return "application/json";
}

/* Runs the done callback and releases the call. */
static void call_complete(struct http_call *call, int error) {
        struct fake_transport *f = call->f;
        const struct expectation *e = call->exp >= 0 ? &f->exps[call->exp] : NULL;
        struct http_response resp = {};

        call_unlink(call);
        dtimer_stop(&call->timer);
        if (error == 0 && e) {
                resp.status = e->status ? e->status : 200;
                if (!call->stream && e->body) {
                        resp.body = e->body;
                        resp.body_len = strlen(e->body);
                } else if (!call->stream) {
                        resp.body = "";
                }
                resp.retry_after_usec = parse_retry_after(e);
                resp.content_type = content_type(e);
        }
        resp.unanswered = error == -ECONNRESET && e && e->unanswered;
        call->on_done(call, error, error == 0 || resp.unanswered ? &resp : NULL, call->userdata);
        dtimer_done(&call->timer);
        free(call);
}

/* Feeds one piece; returns false if the call completed (aborted by on_data). */
static bool feed(struct http_call *call, const char *data) {
        int r = call->on_data ? call->on_data(call, data, strlen(data), call->userdata) : 0;

        if (r < 0) {
                call_complete(call, r);
                return false;
        }
        return true;
}

static void call_step(struct http_call *call) {
        struct fake_transport *f = call->f;
        const struct expectation *e;
        size_t n_pieces;

        if (call->cancelled)
                return call_complete(call, -ECANCELED);
        if (call->phase == PHASE_UNMATCHED || call->phase == PHASE_HELD)
                return;
        e = &f->exps[call->exp];
        if (call->phase == PHASE_SCHEDULED) {
                if (e->error < 0)
                        return call_complete(call, e->error);
                if (!call->stream)
                        return call_complete(call, 0);
                call->phase = PHASE_STREAMING;
                call->piece = e->body ? 0 : 1;
        }
        n_pieces = 1 + e->n_chunks;
        while (call->piece < n_pieces) {
                const char *data = call->piece == 0 ? e->body : e->chunks[call->piece - 1];

                call->piece++;
                if (!feed(call, data))
                        return;
                if (e->chunk_interval_usec > 0 && call->piece < n_pieces)
                        return call_arm(call, e->chunk_interval_usec);
        }
        if (e->hold_open) {
                call->phase = PHASE_HELD;
                return;
        }
        call_complete(call, 0);
}

static void on_call_timer(struct dtimer *t) {
        call_step(container_of(t, struct http_call, timer));
}

static struct http_call *find_call(struct fake_transport *f, uint64_t id) {
        for (struct http_call *c = f->calls; c; c = c->next)
                if (c->id == id)
                        return c;
        return NULL;
}

static int ft_submit(struct transport *t, const struct http_request *req, http_data_fn on_data,
                     http_done_fn on_done, void *userdata, struct http_call **ret_call) {
        struct fake_transport *f = container_of(t, struct fake_transport, base);
        struct fake_request *r = calloc(1, sizeof(*r));
        struct http_call *call = calloc(1, sizeof(*call)), **tail;
        const char *p;
        int e;

        if (!req->method || !req->url || !on_done || (req->stream && !on_data) || f->closed) {
                free(r);
                free(call);
                return f->closed ? -ESHUTDOWN : -EINVAL;
        }
        assert(r && call);
        r->method = xstrdup(req->method);
        r->url = xstrdup(req->url);
        p = strstr(r->url, "://");
        p = p ? strchr(p + 3, '/') : strchr(r->url, '/');
        r->path = p ? p : r->url + strlen(r->url);
        for (size_t i = 0; req->headers && req->headers[i]; i++) {
                r->headers = realloc(r->headers, (r->n_headers + 1) * sizeof(char *));
                assert(r->headers);
                r->headers[r->n_headers++] = xstrdup(req->headers[i]);
        }
        if (req->body) {
                r->body = malloc(req->body_len + 1);
                assert(r->body);
                memcpy(r->body, req->body, req->body_len);
                r->body[req->body_len] = 0;
                r->body_len = req->body_len;
        }
        r->stream = req->stream;
        r->timeout_usec = req->timeout_usec;
        r->at_usec = timesrc_now(f->ts);
        r->matched = -1;
        f->reqs = realloc(f->reqs, (f->n_reqs + 1) * sizeof(*f->reqs));
        assert(f->reqs);
        f->reqs[f->n_reqs] = r;

        call->f = f;
        call->id = ++f->next_id;
        call->req = f->n_reqs++;
        call->exp = -1;
        call->on_data = on_data;
        call->on_done = on_done;
        call->userdata = userdata;
        call->stream = req->stream;
        call->phase = PHASE_UNMATCHED;
        e = dtimer_init(&call->timer, f->ts, on_call_timer);
        assert(e >= 0);
        for (tail = &f->calls; *tail; tail = &(*tail)->next)
                ;
        *tail = call;
        t->requests_total++;

        e = find_expectation(f, r);
        if (e >= 0)
                call_match(call, e);
        if (ret_call) /* optional, as with the real transport */
                *ret_call = call;
        return 0;
}

static void ft_cancel(struct transport *t, struct http_call *call) {
        struct fake_transport *f = container_of(t, struct fake_transport, base);

        bool in_flight = false;

        /* A no-op on a call whose done is running (it is unlinked by then). */
        for (struct http_call *c = f->calls; c; c = c->next)
                in_flight |= c == call;
        if (!in_flight || call->cancelled)
                return;
        call->cancelled = true;
        f->cancels++;
        call_arm(call, 0);
}

static void on_close_timer(struct dtimer *t) {
        struct fake_transport *f = container_of(t, struct fake_transport, close_timer);

        fake_transport_deliver(f);
        if (f->close_cb)
                f->close_cb(&f->base, f->close_userdata);
}

static void ft_close(struct transport *t, void (*close_cb)(struct transport *t, void *userdata),
                     void *userdata) {
        struct fake_transport *f = container_of(t, struct fake_transport, base);

        for (struct http_call *c = f->calls; c; c = c->next)
                if (!c->cancelled) {
                        c->cancelled = true;
                        f->cancels++;
                        call_arm(c, 0);
                }
        assert(!f->closed && "close called twice");
        f->closed = true;
        f->close_cb = close_cb;
        f->close_userdata = userdata;
        dtimer_start(&f->close_timer, 0);
}

static void ft_free(struct transport *t) {
        fake_transport_free(container_of(t, struct fake_transport, base));
}

static const struct transport_ops fake_ops = {
        .submit = ft_submit,
        .cancel = ft_cancel,
        .close = ft_close,
        .free = ft_free,
};

struct fake_transport *fake_transport_new(struct timesrc *ts) {
        struct fake_transport *f = calloc(1, sizeof(*f));

        if (!f)
                return NULL;
        f->base.ops = &fake_ops;
        f->ts = ts;
        if (dtimer_init(&f->close_timer, ts, on_close_timer) < 0) {
                free(f);
                return NULL;
        }
        return f;
}

struct transport *fake_transport_base(struct fake_transport *f) {
        return &f->base;
}

struct fake_transport *fake_transport_from_base(struct transport *t) {
        assert(t->ops == &fake_ops);
        return container_of(t, struct fake_transport, base);
}

void fake_transport_free(struct fake_transport *f) {
        if (!f)
                return;
        assert(!f->calls && "fake transport freed with calls in flight");
        dtimer_done(&f->close_timer);
        for (size_t i = 0; i < f->n_reqs; i++) {
                struct fake_request *r = f->reqs[i];

                free(r->method);
                free(r->url);
                for (size_t j = 0; j < r->n_headers; j++)
                        free(r->headers[j]);
                free(r->headers);
                free(r->body);
                free(r);
        }
        free(f->reqs);
        for (size_t i = 0; i < f->n_exps; i++) {
                struct expectation *e = &f->exps[i];

                free(e->method);
                free(e->prefix);
                free(e->body);
                for (size_t j = 0; j < FAKE_MAX_HEADERS; j++)
                        free(e->headers[j]);
                for (size_t j = 0; j < e->n_chunks; j++)
                        free(e->chunks[j]);
        }
        free(f->exps);
        free(f);
}

int fake_transport_expect(struct fake_transport *f, const char *method, const char *path_prefix,
                          const struct fake_reply *reply) {
        struct expectation *e;
        int idx = (int)f->n_exps;

        f->exps = realloc(f->exps, (f->n_exps + 1) * sizeof(*f->exps));
        assert(f->exps);
        e = &f->exps[f->n_exps++];
        *e = (struct expectation){
                .method = xstrdup(method),
                .prefix = xstrdup(path_prefix),
                .error = reply->error,
                .status = reply->status,
                .body = xstrdup(reply->body),
                .delay_usec = reply->delay_usec,
                .chunk_interval_usec = reply->chunk_interval_usec,
                .hold_open = reply->hold_open,
                .unanswered = reply->unanswered,
                .left = reply->times ? reply->times : 1,
        };
        for (size_t i = 0; i < FAKE_MAX_HEADERS && reply->headers[i]; i++)
                e->headers[i] = xstrdup(reply->headers[i]);
        for (size_t i = 0; i < FAKE_MAX_CHUNKS && reply->chunks[i]; i++)
                e->chunks[e->n_chunks++] = xstrdup(reply->chunks[i]);

        /* Requests that arrived before their answer was scripted. */
        for (struct http_call *c = f->calls; c && f->exps[idx].left > 0; c = c->next)
                if (c->phase == PHASE_UNMATCHED && !c->cancelled &&
                    exp_matches(&f->exps[idx], f->reqs[c->req]))
                        call_match(c, idx);
        return idx;
}

int fake_transport_expect_json(struct fake_transport *f, const char *method, const char *path_prefix,
                               long status, const char *body) {
        return fake_transport_expect(f, method, path_prefix,
                                     &(struct fake_reply){ .status = status, .body = body });
}

int fake_transport_expect_error(struct fake_transport *f, const char *method, const char *path_prefix,
                                int error, unsigned times) {
        return fake_transport_expect(f, method, path_prefix,
                                     &(struct fake_reply){ .error = error, .times = times });
}

static bool call_ready(const struct fake_transport *f, const struct http_call *c) {
        if (c->cancelled)
                return true;
        if (c->phase != PHASE_SCHEDULED && c->phase != PHASE_STREAMING)
                return false;
        return c->timer.armed && c->timer.due <= timesrc_now(f->ts);
}

size_t fake_transport_deliver(struct fake_transport *f) {
        size_t n = 0;

        for (;;) {
                struct http_call *c;
                uint64_t id;

                for (c = f->calls; c && !call_ready(f, c); c = c->next)
                        ;
                if (!c)
                        return n;
                id = c->id;
                dtimer_stop(&c->timer);
                call_step(c);
                if (!find_call(f, id))
                        n++;
        }
}

/* Ids of the open streams under prefix, so the list may change while we work on them. */
static size_t held_ids(struct fake_transport *f, const char *prefix, uint64_t **ret) {
        size_t n = 0;
        uint64_t *ids = NULL;

        for (struct http_call *c = f->calls; c; c = c->next)
                if (c->phase == PHASE_HELD && !c->cancelled && starts_with(f->reqs[c->req]->path, prefix)) {
                        ids = realloc(ids, (n + 1) * sizeof(*ids));
                        assert(ids);
                        ids[n++] = c->id;
                }
        *ret = ids;
        return n;
}

size_t fake_transport_push(struct fake_transport *f, const char *path_prefix, const char *chunk) {
        _cleanup_free_ uint64_t *ids = NULL;
        size_t n = held_ids(f, path_prefix, &ids), pushed = 0;

        for (size_t i = 0; i < n; i++) {
                struct http_call *c = find_call(f, ids[i]);

                if (c && c->phase == PHASE_HELD) {
                        feed(c, chunk);
                        pushed++;
                }
        }
        return pushed;
}

size_t fake_transport_end_streams(struct fake_transport *f, const char *path_prefix, int error) {
        _cleanup_free_ uint64_t *ids = NULL;
        size_t n = held_ids(f, path_prefix, &ids), ended = 0;

        for (size_t i = 0; i < n; i++) {
                struct http_call *c = find_call(f, ids[i]);

                if (c && c->phase == PHASE_HELD) {
                        call_complete(c, error);
                        ended++;
                }
        }
        return ended;
}

size_t fake_transport_n_requests(const struct fake_transport *f) {
        return f->n_reqs;
}

const struct fake_request *fake_transport_request(const struct fake_transport *f, size_t i) {
        return i < f->n_reqs ? f->reqs[i] : NULL;
}

size_t fake_transport_count(const struct fake_transport *f, const char *method, const char *path_prefix) {
        size_t n = 0;

        for (size_t i = 0; i < f->n_reqs; i++)
                if ((!method || streq(method, f->reqs[i]->method)) &&
                    starts_with(f->reqs[i]->path, path_prefix))
                        n++;
        return n;
}

const char *fake_request_header(const struct fake_request *r, const char *name) {
        size_t n = strlen(name);

        for (size_t i = 0; i < r->n_headers; i++)
                if (strncasecmp(r->headers[i], name, n) == 0 && r->headers[i][n] == ':') {
                        const char *v = r->headers[i] + n + 1;

                        while (*v == ' ')
                                v++;
                        return v;
                }
        return NULL;
}

char *fake_request_param(const struct fake_request *r, const char *name) {
        const char *q = strchr(r->path, '?');
        size_t n = strlen(name);

        while (q) {
                const char *k = q + 1, *end = strchr(k, '&');
                size_t len = end ? (size_t)(end - k) : strlen(k);

                if (len > n && strncmp(k, name, n) == 0 && k[n] == '=')
                        return strndup(k + n + 1, len - n - 1);
                if (len == n && strncmp(k, name, n) == 0)
                        return strdup("");
                q = end;
        }
        return NULL;
}

bool fake_request_has_param(const struct fake_request *r, const char *name) {
        char *v = fake_request_param(r, name);
        bool has = v != NULL;

        free(v);
        return has;
}

size_t fake_transport_in_flight(const struct fake_transport *f) {
        size_t n = 0;

        for (struct http_call *c = f->calls; c; c = c->next)
                n++;
        return n;
}

size_t fake_transport_unmatched(const struct fake_transport *f) {
        size_t n = 0;

        for (struct http_call *c = f->calls; c; c = c->next)
                n += c->phase == PHASE_UNMATCHED;
        return n;
}

size_t fake_transport_open_streams(const struct fake_transport *f) {
        size_t n = 0;

        for (struct http_call *c = f->calls; c; c = c->next)
                n += c->phase == PHASE_HELD && !c->cancelled;
        return n;
}

size_t fake_transport_expectations_left(const struct fake_transport *f) {
        size_t n = 0;

        for (size_t i = 0; i < f->n_exps; i++)
                n += f->exps[i].left > 0;
        return n;
}

uint64_t fake_transport_cancels(const struct fake_transport *f) {
        return f->cancels;
}
