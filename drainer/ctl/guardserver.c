/* The guard as a server: the endpoint (obs/httpd.c, one route), one guard run
 * (guard.c) per GET /guard, the node view the runs share and the stop that answers
 * what waits. Owns the endpoint, the runs and the view; prints nothing (its lines go
 * to on_note), knows no signal and no exit code. Watches, never polls, writes
 * nothing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/log.h"
#include "drainer/base/macro.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/guard.h"
#include "drainer/ctl/guardserver.h"
#include "drainer/dra/nodeview.h"
#include "drainer/obs/httpd.h"

/* The kubelet sends one request per container whose preStop is the guard; each
 * request is a run of its own, all of them on the server's one view. */
#define GUARD_MAX_CONNECTIONS  8
#define GUARD_MAX_PER_ADDRESS  4
/* How long the server keeps its view (and its watches) after the last request:
 * requests that follow each other read it instead of listing again. */
#define GUARD_VIEW_KEEP_USEC   (10 * USEC_PER_SEC)
/* How long a stop waits for the answers it gave to leave (the kubelet stops a native
 * sidecar after the pod's other containers: nobody should be waiting by then). */
#define GUARD_STOP_LINGER_USEC (1 * USEC_PER_SEC)

/* One GET /guard and the run that answers it. */
struct guard_request {
        struct guard_server *server;       /* borrowed */
        struct httpd_request *req;         /* until answered */
        struct guard_run *run;             /* owned */
        struct guard_request *prev, *next; /* in server->requests */
};

struct guard_server {
        struct kube_client *client;     /* borrowed */
        struct timesrc *ts;             /* borrowed */
        const struct guard_config *cfg; /* borrowed */
        const struct guard_server_handlers *h;
        void *userdata;
        struct httpd *httpd;            /* owned */
        struct guard_request *requests; /* owned: not answered yet, or closing */
        unsigned n_requests;
        struct node_view *view; /* owned: what every run reads; NULL until a request */
        unsigned views_closing;
        struct dtimer keep; /* closes the view GUARD_VIEW_KEEP_USEC after the last run */
        bool view_failed;   /* a list or watch of the view failed: not kept for later runs */
        bool stopping, httpd_closed, done;
        struct dtimer linger; /* on a stop: the endpoint's close, when the answers are out */
        bool timers_ready;
};

static void note(struct guard_server *s, enum log_level level, int error, const char *line) {
        if (s->h->on_note)
                s->h->on_note(s, level, error, line, s->userdata);
}

/* The answer: 200 when the driver may stop (not draining, or released), 504 when
 * the run gave up at its deadline (still held: counted), 503 on an error (the API
 * cannot be read, RBAC, the guard stopping). The kubelet ignores the status of a
 * lifecycle hook: it matters to people, and to curl -f. */
static unsigned http_status_of(enum guard_outcome outcome) {
        switch (outcome) {
        case GUARD_RELEASED:
                return 200;
        case GUARD_TIMED_OUT:
                return 504;
        default:
                return 503;
        }
}

static void maybe_done(struct guard_server *s) {
        if (s->stopping && s->httpd_closed && s->n_requests == 0 && !s->view && s->views_closing == 0 &&
            !s->done) {
                s->done = true;
                s->h->on_stopped(s, s->userdata);
        }
}

static void on_view_closed(void *userdata) {
        struct guard_server *s = userdata;

        s->views_closing--;
        maybe_done(s);
}

static void close_view(struct guard_server *s) {
        dtimer_stop(&s->keep);
        if (!s->view)
                return;
        s->views_closing++;
        node_view_close(s->view, on_view_closed, s);
        s->view = NULL;
        s->view_failed = false;
}

static void on_keep(struct dtimer *t) {
        struct guard_server *s = container_of(t, struct guard_server, keep);

        if (s->n_requests == 0)
                close_view(s);
}

/* The server's view calls every run that reads it. */
static void on_view_change(struct node_view *nv, void *userdata) {
        for (struct guard_request *q = ((struct guard_server *)userdata)->requests; q; q = q->next)
                guard_run_view_changed(q->run);
}

static void on_view_synced(struct node_view *nv, unsigned part, void *userdata) {
        for (struct guard_request *q = ((struct guard_server *)userdata)->requests; q; q = q->next)
                guard_run_view_synced(q->run, part);
}

static void on_view_error(struct node_view *nv, unsigned part, int error, const char *message,
                          void *userdata) {
        struct guard_server *s = userdata;

        s->view_failed = true;
        for (struct guard_request *q = s->requests; q; q = q->next)
                guard_run_view_error(q->run, part, error, message);
}

static void on_request_closed(void *userdata) {
        struct guard_request *q = userdata;
        struct guard_server *s = q->server;

        if (q->prev)
                q->prev->next = q->next;
        else
                s->requests = q->next;
        if (q->next)
                q->next->prev = q->prev;
        s->n_requests--;
        guard_run_free(q->run);
        free(q);
        /* A view that failed is not kept: the next request lists afresh. */
        if (s->n_requests == 0 && s->view) {
                if (s->stopping)
                        close_view(s);
                else
                        dtimer_start(&s->keep, s->view_failed ? 0 : GUARD_VIEW_KEEP_USEC);
        }
        maybe_done(s);
}

static void on_run_note(struct guard_run *g, enum log_level level, const char *line, void *userdata) {
        struct guard_request *q = userdata;

        note(q->server, level, 0, line);
}

static void on_run_done(struct guard_run *g, enum guard_outcome outcome, const char *result,
                        void *userdata) {
        struct guard_request *q = userdata;
        _cleanup_free_ char *body = NULL;

        if (asprintf(&body, "%s\n", result) < 0)
                body = NULL;
        (void)httpd_request_reply(q->req, http_status_of(outcome), body);
        q->req = NULL;
        guard_run_stop(q->run, on_request_closed, q);
}

static void on_request(void *userdata, struct httpd_request *req) {
        static const struct node_view_handlers vh = {
                .on_change = on_view_change,
                .on_synced = on_view_synced,
                .on_error = on_view_error,
        };
        static const struct guard_handlers rh = {
                .on_note = on_run_note,
                .on_done = on_run_done,
        };
        struct guard_server *s = userdata;
        struct guard_request *q = NULL;
        int r = 0;

        if (!s->stopping && !s->view) {
                r = node_view_new(s->client, s->ts,
                                  &(const struct node_view_options){ .node = s->cfg->node }, &vh, s,
                                  &s->view);
                if (r < 0) {
                        char line[128];

                        snprintf(line, sizeof(line), "Cannot set up the informers: %s", strerror(-r));
                        note(s, LOG_LEVEL_ERROR, r, line);
                }
        }
        if (!s->stopping && r >= 0) {
                q = calloc(1, sizeof(*q));
                if (q && guard_run_new(s->client, s->ts, s->cfg, &rh, q, &q->run) < 0)
                        q = mfree(q);
        }
        if (!q) {
                (void)httpd_request_reply(req, 503,
                                          s->stopping ? "the guard is stopping\n"
                                          : r < 0     ? "cannot set up the informers\n"
                                                      : "out of memory\n");
                return;
        }
        dtimer_stop(&s->keep);
        q->server = s;
        q->req = req;
        q->next = s->requests;
        if (s->requests)
                s->requests->prev = q;
        s->requests = q;
        s->n_requests++;
        /* A failure to start ends the run: on_run_done answers it. */
        (void)guard_run_start(q->run, s->view);
}

static void on_httpd_closed(void *userdata) {
        struct guard_server *s = userdata;

        s->httpd_closed = true;
        maybe_done(s);
}

/* The stop's answers are out (no connection left), or GUARD_STOP_LINGER_USEC passed:
 * the endpoint closes. */
static void on_linger(struct dtimer *t) {
        struct guard_server *s = container_of(t, struct guard_server, linger);

        if (!s->httpd)
                return;
        dtimer_stop(&s->linger);
        httpd_close(TAKE_PTR(s->httpd), on_httpd_closed, s);
        maybe_done(s);
}

static void on_httpd_idle(void *userdata) {
        struct guard_server *s = userdata;

        /* from inside the endpoint's own call: close it on the next turn */
        dtimer_start(&s->linger, 0);
}

void guard_server_stop(struct guard_server *s, const char *why) {
        if (s->stopping)
                return;
        s->stopping = true;
        for (struct guard_request *q = s->requests; q; q = q->next) {
                _cleanup_free_ char *line = NULL;
                const char *counts = guard_run_held_counts(q->run);

                if (guard_run_finished(q->run))
                        continue;
                if (asprintf(&line, "the guard is stopping (%s)%s%s", why, counts ? ": still held: " : "",
                             strempty(counts)) < 0)
                        line = NULL;
                guard_run_fail(q->run, line ? line : "the guard is stopping");
        }
        /* The runs answer on the next turn; the view goes with the last of them. */
        if (s->n_requests == 0)
                close_view(s);
        if (httpd_connections(s->httpd) == 0) {
                on_linger(&s->linger);
                return;
        }
        httpd_notify_idle(s->httpd, on_httpd_idle, s);
        dtimer_start(&s->linger, GUARD_STOP_LINGER_USEC);
}

int guard_server_new(struct uv_loop_s *loop, struct kube_client *client, struct timesrc *ts,
                     const struct guard_config *cfg, const char *address,
                     const struct guard_server_handlers *h, void *userdata, struct guard_server **ret) {
        struct guard_server *s = calloc(1, sizeof(*s));
        int r;

        if (!s)
                return -ENOMEM;
        *s = (struct guard_server){ .client = client, .ts = ts, .cfg = cfg, .h = h, .userdata = userdata };
        if (dtimer_init(&s->linger, ts, on_linger) < 0) {
                free(s);
                return -ENOMEM;
        }
        if (dtimer_init(&s->keep, ts, on_keep) < 0) {
                dtimer_done(&s->linger);
                free(s);
                return -ENOMEM;
        }
        s->timers_ready = true;
        r = httpd_new(loop,
                      &(const struct httpd_options){
                              .address = address,
                              .ts = ts,
                              .handler_path = GUARD_SERVER_PATH,
                              .handler = on_request,
                              .userdata = s,
                              .max_connections = GUARD_MAX_CONNECTIONS,
                              .max_per_address = GUARD_MAX_PER_ADDRESS,
                      },
                      &s->httpd);
        if (r < 0) {
                guard_server_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

uint16_t guard_server_port(const struct guard_server *s) {
        return s->httpd ? httpd_port(s->httpd) : 0;
}

unsigned guard_server_pending(const struct guard_server *s) {
        return s->n_requests;
}

struct guard_server *guard_server_free(struct guard_server *s) {
        if (!s)
                return NULL;
        if (s->timers_ready) {
                dtimer_done(&s->linger);
                dtimer_done(&s->keep);
        }
        free(s);
        return NULL;
}
