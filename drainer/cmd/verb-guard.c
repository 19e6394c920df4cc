/* `drainer guard`: the preStop hook of a DRA driver's DaemonSet. If the node is
 * being drained (cordoned, or tainted by Cluster Autoscaler, Karpenter or
 * drainer), holds the driver pod's termination until no ResourceClaim is on the
 * node and no other claim-holding pod is left; otherwise returns at once. Run as
 * an exec hook it does that once and exits; with --listen it is a native sidecar
 * of the driver's pod and does it for each GET of /guard (the driver container's
 * httpGet preStop hook), answering when it would have exited: every request in
 * flight reads one shared view (one list and watch per resource, kept 10 s after
 * the last request), and an answer gives counts, never the names of other
 * namespaces' objects. Watches, never polls, and writes nothing. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "drainargs.h"
#include "drainer/claims.h"
#include "drainer/httpd.h"
#include "drainer/log.h"
#include "drainer/nodeview.h"
#include "drainer/objects.h"
#include "drainer/plan.h"
#include "drainer/selector.h"
#include "drainer/timesrc.h"
#include "verbs.h"

#define GUARD_DEFAULT_GRACE_SECONDS 30
#define GUARD_MARGIN_USEC           (5 * USEC_PER_SEC)
#define GUARD_MAX_NAMES             16 /* names per list in a log line */
#define GUARD_PATH                  "/guard"
/* The kubelet sends one request per container whose preStop is the guard; each
 * request is a run of its own, all of them on the server's one view. */
#define GUARD_MAX_CONNECTIONS       8
#define GUARD_MAX_PER_ADDRESS       4
/* How long the server keeps its view (and its watches) after the last request:
 * requests that follow each other read it instead of listing again. */
#define GUARD_VIEW_KEEP_USEC        (10 * USEC_PER_SEC)

/* What the guard watches once the node turns out to be draining; the Node alone
 * before (all a rolling update needs). */
#define G_DRAINING (NODE_VIEW_PODS | NODE_VIEW_CLAIMS | NODE_VIEW_SLICES)

/* Taints that mean "this node is being drained", whatever their value and effect:
 * Cluster Autoscaler's scale-down taint, Karpenter's (v1, and v0.3x's key), drainer's. */
static const char *const drain_taints[] = {
        "ToBeDeletedByClusterAutoscaler",
        "karpenter.sh/disrupted",
        "karpenter.sh/disruption",
        "drainer.io/draining",
};

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

struct guard {
        struct app *app;               /* borrowed */
        struct guard_server *srv;      /* borrowed; NULL in the exec form */
        struct httpd_request *req;     /* the request this run answers (--listen) */
        struct guard *prev, *next;     /* in srv->runs */
        struct dtimer report;          /* answers the request on the turn after finish() */
        char *result;                  /* one line: why the run ended */
        const struct guard_opts *o;    /* borrowed */
        const char *pod_ns, *pod_name; /* this pod ($POD_NAMESPACE/$POD_NAME), or NULL */
        char *own_key;                 /* "ns/name" of this pod, or NULL */
        struct selector **sels;        /* owned */
        size_t n_sels;
        struct node_view *view; /* owned; borrowed from srv->view when shared_view */
        bool shared_view;
        bool view_closed;
        struct dtimer kick, deadline;
        uint64_t started;     /* monotonic µs */
        uint64_t deadline_at; /* monotonic µs */
        bool waiting;         /* the node is draining: pods, claims, slices are watched */
        bool own_pod_checked;
        char *last_held;   /* what the last "waiting" line said (names) */
        char *last_counts; /* the same in counts: what an answer may say */
        bool done;
        int exit_code;
};

/* --listen: the server and its runs. */
struct guard_server {
        struct app *app;            /* borrowed */
        const struct guard_opts *o; /* borrowed */
        struct httpd *httpd;        /* owned */
        struct guard *runs;         /* owned, one per request not yet answered or closing */
        unsigned n_runs;
        struct node_view *view; /* owned: what every run reads; NULL until a request */
        unsigned views_closing;
        struct dtimer keep; /* closes the view GUARD_VIEW_KEEP_USEC after the last run */
        bool view_failed;   /* a list or watch of the view failed: not kept for later runs */
        bool stopping, httpd_closed, done;
        struct dtimer linger; /* on a stop: lets the last answers go out before the close */
        uint64_t stop_at;
};

/* How long a stop waits for the answers it gave to leave (the kubelet stops a native
 * sidecar after the pod's other containers: nobody should be waiting by then). */
#define GUARD_STOP_LINGER_USEC (1 * USEC_PER_SEC)

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
                if (parse_duration(arg, &o->deadline_usec) < 0 || o->deadline_usec == 0)
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

/* The kubelet kills the hook when the grace period ends; stop a margin before, so
 * that what was still held gets logged. Short grace periods keep half. */
static uint64_t deadline_for_grace(int64_t grace_seconds) {
        uint64_t g = (uint64_t)grace_seconds * USEC_PER_SEC;

        return MAX(g > GUARD_MARGIN_USEC ? g - GUARD_MARGIN_USEC : 0, g / 2);
}

/* Ends the run: logs the line at level, keeps it as the run's result. With a
 * request to answer, the answer goes out on the next turn (callers still use g). */
_printf_(4, 5) static void finish(struct guard *g, int exit_code, enum log_level level, const char *fmt,
                                  ...) {
        va_list ap;

        if (g->done)
                return;
        g->done = true;
        g->exit_code = exit_code;
        va_start(ap, fmt);
        if (vasprintf(&g->result, fmt, ap) < 0)
                g->result = NULL;
        va_end(ap);
        log_full_errno(level, 0, "%s", g->result ? g->result : "out of memory");
        if (g->req)
                dtimer_start(&g->report, 0);
}

static double seconds_since(struct guard *g, uint64_t t) {
        return (double)(timesrc_now(g->app->ts) - t) / (double)USEC_PER_SEC;
}

/* Why the node counts as draining, or NULL. */
static const char *draining_reason(const struct node_rec *n, char *buf, size_t size) {
        for (size_t i = 0; i < ELEMENTSOF(drain_taints); i++) {
                const struct node_taint *t = node_rec_find_taint(n, drain_taints[i], NULL);

                if (t) {
                        snprintf(buf, size, "tainted %s%s%s:%s", t->key, t->value ? "=" : "",
                                 strempty(t->value), strna(t->effect));
                        return buf;
                }
        }
        if (n->unschedulable) {
                snprintf(buf, size, "cordoned");
                return buf;
        }
        return NULL;
}

/* Appends "ns/name" to a comma-separated list in buf (at most GUARD_MAX_NAMES names;
 * the caller adds ", ..." for more); *count counts every name. */
static void add_name(char *buf, size_t size, size_t *count, const char *ns, const char *name) {
        size_t len = strlen(buf);

        if (*count < GUARD_MAX_NAMES && len < size)
                snprintf(buf + len, size - len, "%s%s/%s", *count ? ", " : "", ns, name);
        (*count)++;
}

/* What still holds the driver, named for the log: "2 ResourceClaims on the node
 * (a/x, a/y); 1 claim-holding pod (a/p)", and counted for an answer (which goes to
 * whoever can reach the endpoint: never the names of other namespaces' objects):
 * "2 ResourceClaims on the node; 1 claim-holding pod". Returns 0 when nothing
 * does, 1 with both set, or -ENOMEM. */
static int held_summary(struct guard *g, const struct node_rec *n, char **ret_named, char **ret_counts) {
        struct node_input in;
        struct plan_options po = {
                .driver_selectors = (const struct selector *const *)g->sels,
                .n_driver_selectors = g->n_sels,
                .driver_namespaces = g->o->driver_namespaces,
                .n_driver_namespaces = g->o->n_driver_namespaces,
                .driver_stop = &driver_stop_none,
                .ignore_driver_health = true,
                .force = true,
                .delete_emptydir_data = true,
        };
        char claim_names[2048] = "", pod_names[2048] = "";
        size_t n_claims = 0, n_pods = 0;
        _cleanup_free_ char *named = NULL;
        struct plan p;
        int r;

        r = node_view_collect(g->view, &in);
        if (r < 0)
                return r;
        r = plan_build(n, in.pods, in.n_pods, in.claims, in.n_claims, in.slices, in.n_slices, NULL, 0, &po,
                       &p);
        node_input_done(&in);
        if (r < 0)
                return r;
        /* Claims reserved only by driver pods are the drivers' own: they do not hold the driver. */
        for (size_t i = 0; i < p.n_claims; i++)
                if (!p.claims[i].driver_own)
                        add_name(claim_names, sizeof(claim_names), &n_claims, p.claims[i].claim->ns,
                                 p.claims[i].claim->name);
        /* Terminating ones included: they are gone only once the kubelet unprepared their claims. */
        for (size_t i = 0; i < p.n_pods; i++) {
                const struct pod_rec *pod = p.pods[i].pod;
                char key[512];

                if (p.pods[i].cls != POD_CLASS_CLAIM_HOLDER)
                        continue;
                snprintf(key, sizeof(key), "%s/%s", pod->ns, pod->name);
                if (g->own_key && streq(key, g->own_key))
                        continue; /* never wait for ourselves */
                add_name(pod_names, sizeof(pod_names), &n_pods, pod->ns, pod->name);
        }
        plan_done(&p);
        if (n_claims == 0 && n_pods == 0)
                return 0;
        if (asprintf(&named, "%zu ResourceClaim%s on the node%s%s%s%s; %zu claim-holding pod%s%s%s%s%s",
                     n_claims, n_claims == 1 ? "" : "s", n_claims ? " (" : "", claim_names,
                     n_claims > GUARD_MAX_NAMES ? ", ..." : "", n_claims ? ")" : "", n_pods,
                     n_pods == 1 ? "" : "s", n_pods ? " (" : "", pod_names,
                     n_pods > GUARD_MAX_NAMES ? ", ..." : "", n_pods ? ")" : "") < 0)
                return -ENOMEM;
        if (asprintf(ret_counts, "%zu ResourceClaim%s on the node; %zu claim-holding pod%s", n_claims,
                     n_claims == 1 ? "" : "s", n_pods, n_pods == 1 ? "" : "s") < 0)
                return -ENOMEM;
        *ret_named = TAKE_PTR(named);
        return 1;
}

/* The grace period this pod has: the one of its deletion when it is being deleted
 * (an eviction may ask for less than the spec), else the spec's. */
static void check_own_pod(struct guard *g) {
        const struct pod_rec *p;
        int64_t grace;

        if (g->own_pod_checked || !g->own_key || g->o->deadline_usec || g->o->grace_seconds >= 0)
                return;
        g->own_pod_checked = true;
        p = node_view_pod(g->view, g->own_key);
        if (!p) {
                log_warning("pod %s is not on node \"%s\": using a grace period of %d s, ignoring",
                            g->own_key, g->o->node, GUARD_DEFAULT_GRACE_SECONDS);
                return;
        }
        grace = p->deleting && p->deletion_grace_seconds >= 0 ? p->deletion_grace_seconds
                                                              : p->termination_grace_seconds;
        if (grace < 1)
                grace = 1;
        g->deadline_at = g->started + deadline_for_grace(grace);
        log_info("grace period of pod %s: %lld s; giving up %.0f s after the start", g->own_key,
                 (long long)grace, (double)(g->deadline_at - g->started) / (double)USEC_PER_SEC);
        if (g->deadline_at <= timesrc_now(g->app->ts))
                dtimer_start(&g->deadline, 0);
        else
                dtimer_start(&g->deadline, g->deadline_at - timesrc_now(g->app->ts));
}

static int start_watching(struct guard *g, unsigned parts) {
        int r = node_view_start(g->view, parts);

        if (r < 0)
                log_error_errno(r, "Cannot start watching %s: %m",
                                parts == NODE_VIEW_NODE ? "the node" : "its pods, claims and slices");
        return r;
}

static void evaluate(struct guard *g) {
        _cleanup_free_ char *held = NULL, *counts = NULL;
        const struct node_rec *n;
        const char *why;
        char buf[256];
        int r;

        if (g->done || !node_view_synced(g->view, NODE_VIEW_NODE))
                return;
        n = node_view_node(g->view);
        if (!n) {
                if (!g->waiting)
                        return finish(g, EXIT_ERROR, LOG_LEVEL_ERROR, "node \"%s\" not found", g->o->node);
                return finish(g, EXIT_DONE, LOG_LEVEL_INFO,
                              "node \"%s\" was deleted: nothing left to guard, letting the driver stop",
                              g->o->node);
        }
        why = draining_reason(n, buf, sizeof(buf));
        if (!why) {
                if (g->waiting)
                        return finish(g, EXIT_DONE, LOG_LEVEL_INFO,
                                      "node \"%s\" is no longer being drained: letting the driver stop",
                                      n->name);
                return finish(g, EXIT_DONE, LOG_LEVEL_INFO,
                              "node \"%s\" is not being drained (a restart or a rolling update): "
                              "letting the driver stop",
                              n->name);
        }
        if (!g->waiting) {
                log_info(
                        "node \"%s\" is being drained (%s): holding the driver until no ResourceClaim is on "
                        "the node and no claim-holding pod is left",
                        n->name, why);
                g->waiting = true;
                if (start_watching(g, G_DRAINING) < 0)
                        return finish(g, EXIT_ERROR, LOG_LEVEL_ERROR,
                                      "cannot watch the pods, claims and slices of node \"%s\"", n->name);
                /* A shared view may have them already: then no callback is coming. */
        }
        if (!node_view_synced(g->view, G_DRAINING))
                return;
        check_own_pod(g);
        r = held_summary(g, n, &held, &counts);
        if (r < 0)
                return finish(g, EXIT_ERROR, LOG_LEVEL_ERROR, "out of memory");
        if (r == 0)
                return finish(g, EXIT_DONE, LOG_LEVEL_INFO,
                              "node \"%s\": no ResourceClaim is on the node and no claim-holding pod is "
                              "left (waited %.1f s): letting the driver stop",
                              n->name, seconds_since(g, g->started));
        if (!streq_ptr(held, g->last_held)) {
                log_info("waiting: %s", held);
                free(g->last_held);
                g->last_held = TAKE_PTR(held);
                free(g->last_counts);
                g->last_counts = TAKE_PTR(counts);
        }
}

static void on_kick(struct dtimer *t) {
        evaluate(container_of(t, struct guard, kick));
}

/* Coalesces a burst of events (a list of many claims) into one evaluation. */
static void changed(struct guard *g) {
        if (!g->done && !g->kick.armed)
                dtimer_start(&g->kick, 20 * USEC_PER_MSEC);
}

static void on_deadline(struct dtimer *t) {
        struct guard *g = container_of(t, struct guard, deadline);
        _cleanup_free_ char *held = NULL, *counts = NULL;
        const struct node_rec *n;
        bool synced;

        if (g->done)
                return;
        synced = node_view_synced(g->view, NODE_VIEW_NODE | (g->waiting ? G_DRAINING : 0));
        n = synced ? node_view_node(g->view) : NULL;
        if (!synced || !n)
                return finish(g, EXIT_ERROR, LOG_LEVEL_ERROR,
                              "gave up after %.1f s: could not read node \"%s\" and its claims "
                              "from the API server",
                              seconds_since(g, g->started), g->o->node);
        if (!g->waiting) {
                evaluate(g);
                return;
        }
        if (held_summary(g, n, &held, &counts) < 0)
                return finish(g, EXIT_ERROR, LOG_LEVEL_ERROR, "out of memory");
        if (!held) {
                evaluate(g);
                return;
        }
        log_info("still held: %s", held);
        finish(g, EXIT_TIMEOUT, LOG_LEVEL_ERROR,
               "gave up after %.1f s, before the driver pod would be killed: still held: %s",
               seconds_since(g, g->started), counts);
}

static void on_view_change(struct node_view *v, void *userdata) {
        changed(userdata);
}

static void on_view_synced(struct node_view *v, unsigned part, void *userdata) {
        struct guard *g = userdata;

        /* Evaluate the Node at once: a rolling update should not wait for a watch to open. */
        if (part == NODE_VIEW_NODE && !g->waiting) {
                evaluate(g);
                if (g->done)
                        node_view_stop_part(v, NODE_VIEW_NODE); /* no watch needed */
                return;
        }
        changed(g);
}

static void on_view_error(struct node_view *v, unsigned part, int error, const char *message,
                          void *userdata) {
        struct guard *g = userdata;

        if (g->done)
                return;
        /* Missing RBAC will not fix itself; anything else before we know the node is an API
         * error too (the client already retried). Once waiting, the informer retries. */
        if (error == -EACCES || !node_view_synced(v, NODE_VIEW_NODE))
                return finish(g, EXIT_ERROR, LOG_LEVEL_ERROR, "watching %s: %s",
                              strna(node_view_part_name(part)), message ? message : strerror(-error));
        log_warning("watching %s: %s, retrying", strna(node_view_part_name(part)),
                    message ? message : strerror(-error));
}

/* ---- one run ---- */

static void run_free(struct guard *g) {
        if (g->kick.src)
                dtimer_done(&g->kick);
        if (g->deadline.src)
                dtimer_done(&g->deadline);
        if (g->report.src)
                dtimer_done(&g->report);
        selectors_free(g->sels, g->n_sels);
        free(g->own_key);
        free(g->last_held);
        free(g->last_counts);
        free(g->result);
        free(g);
}

static void on_report(struct dtimer *t);

/* A run of the guard: watches start now (on shared, the server's view, when given),
 * the deadline counts from now. Returns 0 with *ret set (the run may have finished
 * already, e.g. on a bad selector), or -ENOMEM. */
static int run_new(struct app *a, const struct guard_opts *o, struct node_view *shared, struct guard **ret) {
        static const struct node_view_handlers h = {
                .on_change = on_view_change,
                .on_synced = on_view_synced,
                .on_error = on_view_error,
        };
        struct guard *g;
        uint64_t d;
        int r;

        g = calloc(1, sizeof(*g));
        if (!g)
                return -ENOMEM;
        g->app = a;
        g->o = o;
        g->pod_ns = getenv("POD_NAMESPACE");
        g->pod_name = getenv("POD_NAME");
        g->exit_code = EXIT_ERROR;
        g->view_closed = true;
        if (dtimer_init(&g->kick, a->ts, on_kick) < 0 || dtimer_init(&g->deadline, a->ts, on_deadline) < 0 ||
            dtimer_init(&g->report, a->ts, on_report) < 0) {
                run_free(g);
                return -ENOMEM;
        }
        *ret = g;
        g->started = timesrc_now(a->ts);
        /* The selectors were checked when the flags were parsed. */
        r = driver_selectors_parse(o->driver_selectors, o->n_driver_selectors, &g->sels, &g->n_sels);
        if (r < 0) {
                finish(g, EXIT_USAGE, LOG_LEVEL_ERROR, "invalid --driver-selector");
                return 0;
        }
        if (g->pod_name && *g->pod_name && g->pod_ns && *g->pod_ns &&
            asprintf(&g->own_key, "%s/%s", g->pod_ns, g->pod_name) < 0)
                g->own_key = NULL;
        if (shared) {
                g->view = shared;
                g->shared_view = true;
        } else {
                r = node_view_new(a->client, a->ts, &(const struct node_view_options){ .node = o->node }, &h,
                                  g, &g->view);
                if (r < 0) {
                        finish(g, EXIT_ERROR, LOG_LEVEL_ERROR, "cannot set up the informers: %s",
                               strerror(-r));
                        return 0;
                }
                g->view_closed = false;
        }
        if (o->deadline_usec)
                d = o->deadline_usec;
        else
                d = deadline_for_grace(o->grace_seconds >= 0 ? o->grace_seconds
                                                             : GUARD_DEFAULT_GRACE_SECONDS);
        g->deadline_at = g->started + d;
        dtimer_start(&g->deadline, d);
        if (!o->deadline_usec && o->grace_seconds < 0 && g->own_key)
                log_info("guarding the DRA driver on node \"%s\", pod %s (gives up 5 s before the end of "
                         "its grace period)",
                         o->node, g->own_key);
        else
                log_info("guarding the DRA driver on node \"%s\" (gives up after %.0f s)", o->node,
                         (double)d / (double)USEC_PER_SEC);
        if (start_watching(g, NODE_VIEW_NODE) < 0)
                finish(g, EXIT_ERROR, LOG_LEVEL_ERROR, "cannot watch node \"%s\"", o->node);
        else if (node_view_synced(g->view, NODE_VIEW_NODE))
                changed(g); /* a shared view that has the Node already: no callback is coming */
        return 0;
}

/* Stops the run's timers and lets its cancelled list/watch calls finish; closed
 * runs g->view_closed (the view calls back on a later turn, never from here). */
static void run_stop(struct guard *g, void (*closed)(void *userdata)) {
        g->done = true;
        dtimer_stop(&g->kick);
        dtimer_stop(&g->deadline);
        dtimer_stop(&g->report);
        if (g->view && !g->shared_view) {
                node_view_close(g->view, closed, g);
                g->view = NULL;
        } else {
                g->view = NULL;
                g->view_closed = true;
        }
}

/* ---- the exec form: one run, its exit code ---- */

struct exec_run {
        struct guard *g;
        uv_signal_t sigint, sigterm;
        unsigned signals_closed;
};

static void on_exec_signal(uv_signal_t *h, int signum) {
        struct guard *g = ((struct exec_run *)h->data)->g;

        if (!g->done)
                finish(g, EXIT_ERROR, LOG_LEVEL_WARNING, "interrupted by signal %d after %.1f s%s%s", signum,
                       seconds_since(g, g->started), g->last_counts ? ": still held: " : "",
                       strempty(g->last_counts));
}

static void on_exec_signal_closed(uv_handle_t *h) {
        ((struct exec_run *)h->data)->signals_closed++;
}

static void on_view_closed(void *userdata) {
        ((struct guard *)userdata)->view_closed = true;
}

static int guard_exec(struct app *a, const struct guard_opts *o) {
        struct exec_run e = {};
        int r;

        if (run_new(a, o, NULL, &e.g) < 0) {
                log_oom();
                return EXIT_ERROR;
        }
        uv_signal_init(&a->loop, &e.sigint);
        uv_signal_init(&a->loop, &e.sigterm);
        e.sigint.data = e.sigterm.data = &e;
        uv_signal_start(&e.sigint, on_exec_signal, SIGINT);
        uv_signal_start(&e.sigterm, on_exec_signal, SIGTERM);
        app_run_until(a, &e.g->done);

        uv_close((uv_handle_t *)&e.sigint, on_exec_signal_closed);
        uv_close((uv_handle_t *)&e.sigterm, on_exec_signal_closed);
        r = e.g->exit_code;
        run_stop(e.g, on_view_closed);
        /* The cancelled list/watch calls and the signal handles (on this stack) finish here. */
        while ((!e.g->view_closed || e.signals_closed < 2) && uv_run(&a->loop, UV_RUN_ONCE) != 0)
                ;
        run_free(e.g);
        return r;
}

/* ---- the server form (--listen): one run per GET /guard ---- */

/* The answer: 200 when the driver may stop (not draining, or released), 504 when
 * the run gave up at its deadline (still held: named), 503 on an error (the API
 * cannot be read, RBAC, the guard stopping). The kubelet ignores the status of a
 * lifecycle hook: it matters to people, and to curl -f. */
static unsigned status_of(int exit_code) {
        switch (exit_code) {
        case EXIT_DONE:
                return 200;
        case EXIT_TIMEOUT:
                return 504;
        default:
                return 503;
        }
}

static void server_maybe_done(struct guard_server *s) {
        if (s->stopping && s->httpd_closed && s->n_runs == 0 && !s->view && s->views_closing == 0)
                s->done = true;
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

        if (s->n_runs == 0)
                server_close_view(s);
}

/* The server's view calls every run that reads it. */
static void on_server_view_change(struct node_view *v, void *userdata) {
        for (struct guard *g = ((struct guard_server *)userdata)->runs; g; g = g->next)
                changed(g);
}

static void on_server_view_synced(struct node_view *v, unsigned part, void *userdata) {
        for (struct guard *g = ((struct guard_server *)userdata)->runs; g; g = g->next) {
                if (part == NODE_VIEW_NODE && !g->waiting)
                        evaluate(g);
                else
                        changed(g);
        }
}

static void on_server_view_error(struct node_view *v, unsigned part, int error, const char *message,
                                 void *userdata) {
        struct guard_server *s = userdata;

        s->view_failed = true;
        for (struct guard *g = s->runs; g; g = g->next)
                on_view_error(v, part, error, message, g);
}

static void on_run_closed(void *userdata) {
        struct guard *g = userdata;
        struct guard_server *s = g->srv;

        if (g->prev)
                g->prev->next = g->next;
        else
                s->runs = g->next;
        if (g->next)
                g->next->prev = g->prev;
        s->n_runs--;
        run_free(g);
        /* A view that failed is not kept: the next request lists afresh. */
        if (s->n_runs == 0 && s->view && !s->stopping)
                dtimer_start(&s->keep, s->view_failed ? 0 : GUARD_VIEW_KEEP_USEC);
        server_maybe_done(s);
}

static void run_answer(struct guard *g) {
        _cleanup_free_ char *body = NULL;

        if (!g->req)
                return;
        if (asprintf(&body, "%s\n", g->result ? g->result : "out of memory") < 0)
                body = NULL;
        (void)httpd_request_reply(g->req, status_of(g->exit_code), body);
        g->req = NULL;
        run_stop(g, on_run_closed);
        if (g->view_closed)
                on_run_closed(g);
}

static void on_report(struct dtimer *t) {
        run_answer(container_of(t, struct guard, report));
}

static void on_guard_request(void *userdata, struct httpd_request *req) {
        static const struct node_view_handlers h = {
                .on_change = on_server_view_change,
                .on_synced = on_server_view_synced,
                .on_error = on_server_view_error,
        };
        struct guard_server *s = userdata;
        struct guard *g;
        int r = 0;

        if (!s->stopping && !s->view) {
                r = node_view_new(s->app->client, s->app->ts,
                                  &(const struct node_view_options){ .node = s->o->node }, &h, s, &s->view);
                if (r < 0)
                        log_error_errno(r, "Cannot set up the informers: %m");
        }
        if (s->stopping || r < 0 || run_new(s->app, s->o, s->view, &g) < 0) {
                (void)httpd_request_reply(req, 503,
                                          s->stopping ? "the guard is stopping\n"
                                          : r < 0     ? "cannot set up the informers\n"
                                                      : "out of memory\n");
                return;
        }
        dtimer_stop(&s->keep);
        g->srv = s;
        g->req = req;
        g->next = s->runs;
        if (s->runs)
                s->runs->prev = g;
        s->runs = g;
        s->n_runs++;
        if (g->done)
                dtimer_start(&g->report, 0);
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
        struct guard_server *s = h->data;

        if (s->stopping)
                return;
        s->stopping = true;
        log_info("stopping on signal %d (%u request%s waiting)", signum, s->n_runs,
                 s->n_runs == 1 ? "" : "s");
        for (struct guard *g = s->runs, *next; g; g = next) {
                next = g->next;
                if (!g->done)
                        finish(g, EXIT_ERROR, LOG_LEVEL_WARNING, "the guard is stopping (signal %d)%s%s",
                               signum, g->last_counts ? ": still held: " : "", strempty(g->last_counts));
                if (g->req)
                        run_answer(g);
        }
        server_close_view(s);
        s->stop_at = timesrc_now(s->app->ts);
        on_linger(&s->linger);
}

static void on_server_signal_closed(uv_handle_t *h) {
        (*(unsigned *)((uv_signal_t *)h)->data)++;
}

static int guard_serve(struct app *a, const struct guard_opts *o) {
        struct guard_server s = { .app = a, .o = o };
        uv_signal_t sigint, sigterm;
        unsigned signals_closed = 0;
        int r;

        if (dtimer_init(&s.linger, a->ts, on_linger) < 0) {
                log_oom();
                return EXIT_ERROR;
        }
        if (dtimer_init(&s.keep, a->ts, on_keep) < 0) {
                dtimer_done(&s.linger);
                log_oom();
                return EXIT_ERROR;
        }
        r = httpd_new(&a->loop,
                      &(const struct httpd_options){
                              .address = o->listen,
                              .ts = a->ts,
                              .handler_path = GUARD_PATH,
                              .handler = on_guard_request,
                              .userdata = &s,
                              .max_connections = GUARD_MAX_CONNECTIONS,
                              .max_per_address = GUARD_MAX_PER_ADDRESS,
                      },
                      &s.httpd);
        if (r < 0) {
                log_error_errno(r, "Cannot listen on %s: %m", o->listen);
                dtimer_done(&s.linger);
                dtimer_done(&s.keep);
                return EXIT_ERROR; /* app_done() lets the handles of the failed start close */
        }
        log_info("guarding the DRA driver on node \"%s\": GET %s on %s (port %u) holds until its claims are "
                 "released while the node is being drained, answers at once otherwise",
                 o->node, GUARD_PATH, o->listen, httpd_port(s.httpd));
        uv_signal_init(&a->loop, &sigint);
        uv_signal_init(&a->loop, &sigterm);
        sigint.data = sigterm.data = &s;
        uv_signal_start(&sigint, on_server_signal, SIGINT);
        uv_signal_start(&sigterm, on_server_signal, SIGTERM);
        app_run_until(a, &s.done);
        sigint.data = sigterm.data = &signals_closed;
        uv_close((uv_handle_t *)&sigint, on_server_signal_closed);
        uv_close((uv_handle_t *)&sigterm, on_server_signal_closed);
        while (signals_closed < 2 && uv_run(&a->loop, UV_RUN_ONCE) != 0)
                ;
        dtimer_done(&s.linger);
        dtimer_done(&s.keep);
        return EXIT_DONE;
}

int verb_guard(int argc, char **argv, struct global_flags *gf) {
        static const struct option extra[] = {
                { "node", required_argument, NULL, 'N' },
                { "grace-period-seconds", required_argument, NULL, 'G' },
                { "deadline", required_argument, NULL, 'T' },
                { "driver-selector", required_argument, NULL, 'D' },
                { "driver-namespace", required_argument, NULL, 'S' },
                { "listen", required_argument, NULL, 'L' },
                {},
        };
        struct guard_opts o = { .grace_seconds = -1 };
        struct app a;
        int r;

        r = verb_parse(argc, argv, gf, extra, on_guard_opt, &o);
        if (r <= 0)
                return r < 0 ? EXIT_USAGE : EXIT_DONE;
        if (argc - optind > 0) {
                log_error("drainer guard: unexpected argument \"%s\"; the node is --node NAME or $NODE_NAME",
                          argv[optind]);
                return EXIT_USAGE;
        }
        if (o.deadline_usec && o.grace_seconds >= 0) {
                log_error("drainer guard: --deadline and --grace-period-seconds exclude each other");
                return EXIT_USAGE;
        }
        if (!o.node)
                o.node = getenv("NODE_NAME");
        if (!o.node || !*o.node) {
                log_error(
                        "drainer guard: say which node: --node NAME or $NODE_NAME (fieldRef spec.nodeName)");
                return EXIT_USAGE;
        }
        if (o.n_driver_selectors > 0) {
                struct selector **sels;
                size_t n;

                /* Validate before any request is made. */
                if (driver_selectors_parse(o.driver_selectors, o.n_driver_selectors, &sels, &n) < 0)
                        return EXIT_USAGE;
                selectors_free(sels, n);
        }
        /* A hook's output ends up in a log file or an Event: always timestamped lines. */
        log_set_timestamps(true);

        r = app_init(&a, gf);
        if (r < 0) {
                app_done(&a);
                return EXIT_ERROR;
        }
        r = o.listen ? guard_serve(&a, &o) : guard_exec(&a, &o);
        app_done(&a);
        return r;
}
