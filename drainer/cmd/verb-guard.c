/* `drainer guard`: the preStop hook of a DRA driver's DaemonSet, the verb: its
 * flags, where its lines go and its exit codes; the deciding (hold the driver's
 * termination while the node is being drained and a ResourceClaim or another
 * claim-holding pod is left on it) is the guard controller's (ctl/guard.c). Run as
 * an exec hook it does that once and exits; with --listen it is a native sidecar of
 * the driver's pod and runs the controller for each GET of /guard (the driver
 * container's httpGet preStop hook), answering when it would have exited: every
 * request in flight reads one shared view (one list and watch per resource, kept
 * 10 s after the last request), and an answer gives counts, never the names of
 * other namespaces' objects. Watches, never polls, and writes nothing. */
#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "drainargs.h"
#include "drainer/base/log.h"
#include "drainer/base/selector.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/guard.h"
#include "drainer/dra/nodeview.h"
#include "drainer/obs/httpd.h"
#include "verbs.h"

#define GUARD_PATH             "/guard"
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

struct guard_opts {
        const char *node;
        const char *listen;     /* --listen HOST:PORT, or NULL: one run (the exec form) */
        int64_t grace_seconds;  /* --grace-period-seconds, -1 if not given */
        uint64_t deadline_usec; /* --deadline, 0 if not given */
        const char *driver_selectors[MAX_DRIVER_SELECTORS + 1];
        size_t n_driver_selectors;
        const char *driver_namespaces[MAX_DRIVER_NAMESPACES + 1];
        size_t n_driver_namespaces;
};

struct guard_server;

/* --listen: one GET /guard and the run that answers it. */
struct guard_request {
        struct guard_server *server;       /* borrowed */
        struct httpd_request *req;         /* until answered */
        struct guard_run *run;             /* owned */
        struct guard_request *prev, *next; /* in server->requests */
};

/* --listen: the endpoint, the view its runs share, and the runs. */
struct guard_server {
        struct app *app;                /* borrowed */
        const struct guard_config *cfg; /* borrowed */
        struct httpd *httpd;            /* owned */
        struct guard_request *requests; /* owned: not answered yet, or closing */
        unsigned n_requests;
        struct node_view *view; /* owned: what every run reads; NULL until a request */
        unsigned views_closing;
        struct dtimer keep; /* closes the view GUARD_VIEW_KEEP_USEC after the last run */
        bool view_failed;   /* a list or watch of the view failed: not kept for later runs */
        bool stopping, httpd_closed, done;
        struct dtimer linger; /* on a stop: lets the last answers go out before the close */
        bool timers_ready;
        uint64_t stop_at;
};

/* The verb's state (verbs.h): the flags, what the controller is given, and either
 * the one run (the exec form) or the server. */
struct guard_verb {
        struct guard_opts opts;
        struct selector **sels; /* owned */
        size_t n_sels;
        char *own_pod; /* owned: "$POD_NAMESPACE/$POD_NAME", or NULL */
        struct guard_config cfg;
        struct app *app;       /* borrowed */
        struct guard_run *run; /* owned: the exec form's one run */
        struct guard_server server;
        uv_signal_t sigint, sigterm;
        bool signals_ready;
        unsigned closing; /* what stop closes and has not called back yet */
};

static int on_guard_opt(int opt, const char *arg, void *userdata) {
        struct guard_opts *o = userdata;
        char *end;

        switch (opt) {
        case 'N':
                o->node = arg;
                return 0;
        case 'G': {
                long long v;

                errno = 0;
                v = strtoll(arg, &end, 10);
                if (errno || *end || end == arg || v < 1 || v > 86400)
                        return log_error_errno(
                                EINVAL, "--grace-period-seconds: invalid value \"%s\" (1..86400)", arg);
                o->grace_seconds = v;
                return 0;
        }
        case 'T':
                if (timesrc_parse_duration(arg, &o->deadline_usec) < 0 || o->deadline_usec == 0)
                        return log_error_errno(EINVAL, "--deadline: invalid duration \"%s\" (e.g. 90s, 5m)",
                                               arg);
                return 0;
        case 'L': {
                _cleanup_free_ char *host = NULL;
                uint16_t port;

                if (httpd_parse_address(arg, &host, &port) < 0)
                        return log_error_errno(EINVAL,
                                               "--listen: invalid address \"%s\" (HOST:PORT, [V6]:PORT or "
                                               ":PORT; port 0: any free one)",
                                               arg);
                o->listen = arg;
                return 0;
        }
        case 'D':
                return driver_selector_add(o->driver_selectors, &o->n_driver_selectors, arg);
        case 'S':
                return driver_namespace_add(o->driver_namespaces, &o->n_driver_namespaces, arg);
        }
        return -EINVAL;
}

static int exit_code_of(enum guard_outcome outcome) {
        switch (outcome) {
        case GUARD_RELEASED:
                return EXIT_DONE;
        case GUARD_TIMED_OUT:
                return EXIT_TIMEOUT;
        default:
                return EXIT_ERROR;
        }
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

/* Every line of the controller goes to the log (a hook's output ends up in a log
 * file or an Event). */
static void on_run_note(struct guard_run *g, enum log_level level, const char *line, void *userdata) {
        log_full_errno(level, 0, "%s", line);
}

/* ---- the exec form: one run, its exit code ---- */

static void on_exec_done(struct guard_run *g, enum guard_outcome outcome, const char *result,
                         void *userdata) {
        struct guard_verb *v = userdata;

        app_quit(v->app, exit_code_of(outcome));
}

static const struct guard_handlers exec_handlers = {
        .on_note = on_run_note,
        .on_done = on_exec_done,
};

static void on_exec_signal(uv_signal_t *h, int signum) {
        struct guard_verb *v = h->data;
        _cleanup_free_ char *line = NULL;
        const char *counts;

        if (!v->run || guard_run_finished(v->run))
                return;
        counts = guard_run_held_counts(v->run);
        if (asprintf(&line, "interrupted by signal %d after %.1f s%s%s", signum,
                     guard_run_elapsed_seconds(v->run), counts ? ": still held: " : "",
                     strempty(counts)) < 0)
                line = NULL;
        guard_run_fail(v->run, line ? line : "interrupted by a signal");
}

static int exec_start(struct guard_verb *v) {
        int r;

        r = guard_run_new(v->app->client, v->app->ts, &v->cfg, &exec_handlers, v, &v->run);
        if (r < 0)
                return log_oom();
        /* A failure to start ends the run: on_exec_done says so. */
        (void)guard_run_start(v->run, NULL);
        return 0;
}

/* ---- the server form (--listen): one run per GET /guard ---- */

static void server_maybe_done(struct guard_server *s) {
        if (s->stopping && s->httpd_closed && s->n_requests == 0 && !s->view && s->views_closing == 0 &&
            !s->done) {
                s->done = true;
                app_quit(s->app, EXIT_DONE);
        }
}

static void on_server_view_closed(void *userdata) {
        struct guard_server *s = userdata;

        s->views_closing--;
        server_maybe_done(s);
}

static void server_close_view(struct guard_server *s) {
        dtimer_stop(&s->keep);
        if (!s->view)
                return;
        s->views_closing++;
        node_view_close(s->view, on_server_view_closed, s);
        s->view = NULL;
        s->view_failed = false;
}

static void on_keep(struct dtimer *t) {
        struct guard_server *s = container_of(t, struct guard_server, keep);

        if (s->n_requests == 0)
                server_close_view(s);
}

/* The server's view calls every run that reads it. */
static void on_server_view_change(struct node_view *nv, void *userdata) {
        for (struct guard_request *q = ((struct guard_server *)userdata)->requests; q; q = q->next)
                guard_run_view_changed(q->run);
}

static void on_server_view_synced(struct node_view *nv, unsigned part, void *userdata) {
        for (struct guard_request *q = ((struct guard_server *)userdata)->requests; q; q = q->next)
                guard_run_view_synced(q->run, part);
}

static void on_server_view_error(struct node_view *nv, unsigned part, int error, const char *message,
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
                        server_close_view(s);
                else
                        dtimer_start(&s->keep, s->view_failed ? 0 : GUARD_VIEW_KEEP_USEC);
        }
        server_maybe_done(s);
}

static void on_request_done(struct guard_run *g, enum guard_outcome outcome, const char *result,
                            void *userdata) {
        struct guard_request *q = userdata;
        _cleanup_free_ char *body = NULL;

        if (asprintf(&body, "%s\n", result) < 0)
                body = NULL;
        (void)httpd_request_reply(q->req, http_status_of(outcome), body);
        q->req = NULL;
        guard_run_stop(q->run, on_request_closed, q);
}

static const struct guard_handlers request_handlers = {
        .on_note = on_run_note,
        .on_done = on_request_done,
};

static void on_guard_request(void *userdata, struct httpd_request *req) {
        static const struct node_view_handlers h = {
                .on_change = on_server_view_change,
                .on_synced = on_server_view_synced,
                .on_error = on_server_view_error,
        };
        struct guard_server *s = userdata;
        struct guard_request *q = NULL;
        int r = 0;

        if (!s->stopping && !s->view) {
                r = node_view_new(s->app->client, s->app->ts,
                                  &(const struct node_view_options){ .node = s->cfg->node }, &h, s,
                                  &s->view);
                if (r < 0)
                        log_error_errno(r, "Cannot set up the informers: %m");
        }
        if (!s->stopping && r >= 0) {
                q = calloc(1, sizeof(*q));
                if (q &&
                    guard_run_new(s->app->client, s->app->ts, s->cfg, &request_handlers, q, &q->run) < 0)
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
        /* A failure to start ends the run: on_request_done answers it. */
        (void)guard_run_start(q->run, s->view);
}

static void on_httpd_closed(void *userdata) {
        struct guard_server *s = userdata;

        s->httpd_closed = true;
        server_maybe_done(s);
}

/* Closes the endpoint once no connection is left (the answers are out), or after
 * GUARD_STOP_LINGER_USEC. */
static void on_linger(struct dtimer *t) {
        struct guard_server *s = container_of(t, struct guard_server, linger);

        if (!s->httpd)
                return;
        if (httpd_connections(s->httpd) > 0 &&
            timesrc_now(s->app->ts) - s->stop_at < GUARD_STOP_LINGER_USEC) {
                dtimer_start(&s->linger, 20 * USEC_PER_MSEC);
                return;
        }
        httpd_close(s->httpd, on_httpd_closed, s);
        s->httpd = NULL;
        server_maybe_done(s);
}

/* SIGTERM (the kubelet stops a native sidecar after the pod's other containers):
 * every request still waiting is answered 503, then the server stops, exit 0. */
static void on_server_signal(uv_signal_t *h, int signum) {
        struct guard_server *s = &((struct guard_verb *)h->data)->server;

        if (s->stopping)
                return;
        s->stopping = true;
        log_info("stopping on signal %d (%u request%s waiting)", signum, s->n_requests,
                 s->n_requests == 1 ? "" : "s");
        for (struct guard_request *q = s->requests; q; q = q->next) {
                _cleanup_free_ char *line = NULL;
                const char *counts = guard_run_held_counts(q->run);

                if (guard_run_finished(q->run))
                        continue;
                if (asprintf(&line, "the guard is stopping (signal %d)%s%s", signum,
                             counts ? ": still held: " : "", strempty(counts)) < 0)
                        line = NULL;
                guard_run_fail(q->run, line ? line : "the guard is stopping");
        }
        /* The runs answer on the next turn; the view goes with the last of them. */
        if (s->n_requests == 0)
                server_close_view(s);
        s->stop_at = timesrc_now(s->app->ts);
        on_linger(&s->linger);
}

static int server_start(struct guard_verb *v) {
        struct guard_server *s = &v->server;
        struct app *a = v->app;
        int r;

        s->app = a;
        s->cfg = &v->cfg;
        if (dtimer_init(&s->linger, a->ts, on_linger) < 0)
                return log_oom();
        if (dtimer_init(&s->keep, a->ts, on_keep) < 0) {
                dtimer_done(&s->linger);
                return log_oom();
        }
        s->timers_ready = true;
        r = httpd_new(&a->loop,
                      &(const struct httpd_options){
                              .address = v->opts.listen,
                              .ts = a->ts,
                              .handler_path = GUARD_PATH,
                              .handler = on_guard_request,
                              .userdata = s,
                              .max_connections = GUARD_MAX_CONNECTIONS,
                              .max_per_address = GUARD_MAX_PER_ADDRESS,
                      },
                      &s->httpd);
        if (r < 0)
                /* app_done() lets the handles of the failed start close */
                return log_error_errno(r, "Cannot listen on %s: %m", v->opts.listen);
        log_info("guarding the DRA driver on node \"%s\": GET %s on %s (port %u) holds until its claims are "
                 "released while the node is being drained, answers at once otherwise",
                 v->cfg.node, GUARD_PATH, v->opts.listen, httpd_port(s->httpd));
        return 0;
}

/* ---- the verb ---- */

static int guard_parse(int argc, char **argv, struct global_flags *gf, void *state) {
        static const struct option extra[] = {
                { "node", required_argument, NULL, 'N' },
                { "grace-period-seconds", required_argument, NULL, 'G' },
                { "deadline", required_argument, NULL, 'T' },
                { "driver-selector", required_argument, NULL, 'D' },
                { "driver-namespace", required_argument, NULL, 'S' },
                { "listen", required_argument, NULL, 'L' },
                {},
        };
        struct guard_verb *v = state;
        struct guard_opts *o = &v->opts;
        const char *pod_ns = getenv("POD_NAMESPACE"), *pod_name = getenv("POD_NAME");
        int r;

        o->grace_seconds = -1;
        r = verb_parse(argc, argv, gf, extra, on_guard_opt, o);
        if (r <= 0)
                return r;
        if (argc - optind > 0) {
                log_error("drainer guard: unexpected argument \"%s\"; the node is --node NAME or $NODE_NAME",
                          argv[optind]);
                return -EINVAL;
        }
        if (o->deadline_usec && o->grace_seconds >= 0) {
                log_error("drainer guard: --deadline and --grace-period-seconds exclude each other");
                return -EINVAL;
        }
        if (!o->node)
                o->node = getenv("NODE_NAME");
        if (!o->node || !*o->node) {
                log_error(
                        "drainer guard: say which node: --node NAME or $NODE_NAME (fieldRef spec.nodeName)");
                return -EINVAL;
        }
        /* Checked before any request is made; the runs borrow them. */
        r = driver_selectors_parse(o->driver_selectors, o->n_driver_selectors, &v->sels, &v->n_sels);
        if (r < 0)
                return r;
        if (pod_name && *pod_name && pod_ns && *pod_ns &&
            asprintf(&v->own_pod, "%s/%s", pod_ns, pod_name) < 0)
                v->own_pod = NULL;
        v->cfg = (struct guard_config){
                .node = o->node,
                .deadline_usec = o->deadline_usec,
                .grace_seconds = o->grace_seconds,
                .own_pod = v->own_pod,
                .driver_selectors = (const struct selector *const *)v->sels,
                .n_driver_selectors = v->n_sels,
                .driver_namespaces = o->driver_namespaces,
                .n_driver_namespaces = o->n_driver_namespaces,
        };
        /* A hook's output ends up in a log file or an Event: always timestamped lines. */
        log_set_timestamps(true);
        return 1;
}

static int guard_start(struct app *a, void *state) {
        struct guard_verb *v = state;
        int r;

        v->app = a;
        r = v->opts.listen ? server_start(v) : exec_start(v);
        if (r < 0)
                return r;
        uv_signal_init(&a->loop, &v->sigint);
        uv_signal_init(&a->loop, &v->sigterm);
        v->sigint.data = v->sigterm.data = v;
        v->signals_ready = true;
        uv_signal_start(&v->sigint, v->opts.listen ? on_server_signal : on_exec_signal, SIGINT);
        uv_signal_start(&v->sigterm, v->opts.listen ? on_server_signal : on_exec_signal, SIGTERM);
        return 0;
}

static void guard_closed_one(struct guard_verb *v) {
        assert(v->closing > 0);
        if (--v->closing == 0)
                app_stopped(v->app);
}

static void on_exec_run_closed(void *userdata) {
        struct guard_verb *v = userdata;

        v->run = guard_run_free(v->run);
        guard_closed_one(v);
}

static void on_signal_closed(uv_handle_t *h) {
        guard_closed_one(h->data);
}

/* After app_quit: the exec form's run (its cancelled list/watch calls finish), the
 * signal handles. The server quits only once it has closed everything itself; a
 * failed start leaves its endpoint to app_done(). */
static void guard_stop(struct app *a, void *state) {
        struct guard_verb *v = state;

        v->closing = 1; /* this call's own, so that no close completes the stop early */
        if (v->run) {
                v->closing++;
                guard_run_stop(v->run, on_exec_run_closed, v);
        }
        if (v->signals_ready) {
                v->closing += 2;
                uv_close((uv_handle_t *)&v->sigint, on_signal_closed);
                uv_close((uv_handle_t *)&v->sigterm, on_signal_closed);
                v->signals_ready = false;
        }
        guard_closed_one(v);
}

static void guard_free(void *state) {
        struct guard_verb *v = state;

        if (v->server.timers_ready) {
                dtimer_done(&v->server.linger);
                dtimer_done(&v->server.keep);
        }
        guard_run_free(v->run);
        selectors_free(v->sels, v->n_sels);
        free(v->own_pod);
}

const struct verb_ops verb_guard_ops = {
        .state_size = sizeof(struct guard_verb),
        .parse = guard_parse,
        .start = guard_start,
        .stop = guard_stop,
        .free = guard_free,
};
