/* `drainer guard`: the preStop hook of a DRA driver's DaemonSet. If the node is
 * being drained (cordoned, or tainted by Cluster Autoscaler, Karpenter or
 * drainer), holds the driver pod's termination until no ResourceClaim is on the
 * node and no other claim-holding pod is left; otherwise returns at once. Owns
 * its informers for one run; watches, never polls, and writes nothing. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/app.h"
#include "drainer/claims.h"
#include "drainer/drainargs.h"
#include "drainer/log.h"
#include "drainer/nodeview.h"
#include "drainer/objects.h"
#include "drainer/plan.h"
#include "drainer/selector.h"
#include "drainer/timesrc.h"
#include "drainer/verbs.h"

#define GUARD_DEFAULT_GRACE_SECONDS 30
#define GUARD_MARGIN_USEC           (5 * USEC_PER_SEC)
#define GUARD_MAX_NAMES             16 /* names per list in a log line */

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
        int64_t grace_seconds;  /* --grace-period-seconds, -1 if not given */
        uint64_t deadline_usec; /* --deadline, 0 if not given */
        const char *driver_selectors[MAX_DRIVER_SELECTORS + 1];
        size_t n_driver_selectors;
        const char *driver_namespaces[MAX_DRIVER_NAMESPACES + 1];
        size_t n_driver_namespaces;
};

struct guard {
        struct app *app;               /* borrowed */
        const struct guard_opts *o;    /* borrowed */
        const char *pod_ns, *pod_name; /* this pod ($POD_NAMESPACE/$POD_NAME), or NULL */
        char *own_key;                 /* "ns/name" of this pod, or NULL */
        struct selector **sels;        /* owned */
        size_t n_sels;
        struct node_view *view; /* owned */
        bool view_closed;
        struct dtimer kick, deadline;
        uv_signal_t sigint, sigterm;
        bool signals_ready;
        unsigned signals_closed;
        uint64_t started;     /* monotonic µs */
        uint64_t deadline_at; /* monotonic µs */
        bool waiting;         /* the node is draining: pods, claims, slices are watched */
        bool own_pod_checked;
        char *last_held; /* what the last "waiting" line said */
        bool done;
        int exit_code;
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
                if (parse_duration(arg, &o->deadline_usec) < 0 || o->deadline_usec == 0)
                        return log_error_errno(EINVAL, "--deadline: invalid duration \"%s\" (e.g. 90s, 5m)",
                                               arg);
                return 0;
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

static void finish(struct guard *g, int exit_code) {
        if (g->done)
                return;
        g->done = true;
        g->exit_code = exit_code;
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

/* What still holds the driver: "2 ResourceClaims on the node (a/x, a/y); 1
 * claim-holding pod (a/p)". Returns 0 when nothing does, 1 with *ret set, or -ENOMEM. */
static int held_summary(struct guard *g, const struct node_rec *n, char **ret) {
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
        if (asprintf(ret, "%zu ResourceClaim%s on the node%s%s%s%s; %zu claim-holding pod%s%s%s%s%s",
                     n_claims, n_claims == 1 ? "" : "s", n_claims ? " (" : "", claim_names,
                     n_claims > GUARD_MAX_NAMES ? ", ..." : "", n_claims ? ")" : "", n_pods,
                     n_pods == 1 ? "" : "s", n_pods ? " (" : "", pod_names,
                     n_pods > GUARD_MAX_NAMES ? ", ..." : "", n_pods ? ")" : "") < 0)
                return -ENOMEM;
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
        _cleanup_free_ char *held = NULL;
        const struct node_rec *n;
        const char *why;
        char buf[256];
        int r;

        if (g->done || !node_view_synced(g->view, NODE_VIEW_NODE))
                return;
        n = node_view_node(g->view);
        if (!n) {
                if (!g->waiting) {
                        log_error("node \"%s\" not found", g->o->node);
                        return finish(g, EXIT_ERROR);
                }
                log_info("node \"%s\" was deleted: nothing left to guard, letting the driver stop",
                         g->o->node);
                return finish(g, EXIT_DONE);
        }
        why = draining_reason(n, buf, sizeof(buf));
        if (!why) {
                if (g->waiting)
                        log_info("node \"%s\" is no longer being drained: letting the driver stop", n->name);
                else
                        log_info("node \"%s\" is not being drained (a restart or a rolling update): "
                                 "letting the driver stop",
                                 n->name);
                return finish(g, EXIT_DONE);
        }
        if (!g->waiting) {
                log_info(
                        "node \"%s\" is being drained (%s): holding the driver until no ResourceClaim is on "
                        "the node and no claim-holding pod is left",
                        n->name, why);
                g->waiting = true;
                if (start_watching(g, G_DRAINING) < 0)
                        return finish(g, EXIT_ERROR);
                return;
        }
        if (!node_view_synced(g->view, G_DRAINING))
                return;
        check_own_pod(g);
        r = held_summary(g, n, &held);
        if (r < 0) {
                log_oom();
                return finish(g, EXIT_ERROR);
        }
        if (r == 0) {
                log_info("node \"%s\": no ResourceClaim is on the node and no claim-holding pod is left "
                         "(waited %.1f s): letting the driver stop",
                         n->name, seconds_since(g, g->started));
                return finish(g, EXIT_DONE);
        }
        if (!streq_ptr(held, g->last_held)) {
                log_info("waiting: %s", held);
                free(g->last_held);
                g->last_held = TAKE_PTR(held);
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
        _cleanup_free_ char *held = NULL;
        const struct node_rec *n;
        bool synced;

        if (g->done)
                return;
        synced = node_view_synced(g->view, NODE_VIEW_NODE | (g->waiting ? G_DRAINING : 0));
        n = synced ? node_view_node(g->view) : NULL;
        if (!synced || !n) {
                log_error("gave up after %.1f s: could not read node \"%s\" and its claims "
                          "from the API server",
                          seconds_since(g, g->started), g->o->node);
                return finish(g, EXIT_ERROR);
        }
        if (!g->waiting) {
                evaluate(g);
                return;
        }
        if (held_summary(g, n, &held) < 0) {
                log_oom();
                return finish(g, EXIT_ERROR);
        }
        if (!held) {
                evaluate(g);
                return;
        }
        log_error("gave up after %.1f s, before the driver pod would be killed: still held: %s",
                  seconds_since(g, g->started), held);
        finish(g, EXIT_TIMEOUT);
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
        if (error == -EACCES || !node_view_synced(v, NODE_VIEW_NODE)) {
                log_error("watching %s: %s", strna(node_view_part_name(part)),
                          message ? message : strerror(-error));
                return finish(g, EXIT_ERROR);
        }
        log_warning("watching %s: %s, retrying", strna(node_view_part_name(part)),
                    message ? message : strerror(-error));
}

static void on_signal(uv_signal_t *h, int signum) {
        struct guard *g = h->data;

        if (g->done)
                return;
        log_warning("interrupted by signal %d after %.1f s%s%s", signum, seconds_since(g, g->started),
                    g->last_held ? ": still held: " : "", strempty(g->last_held));
        finish(g, EXIT_ERROR);
}

static void on_signal_closed(uv_handle_t *h) {
        struct guard *g = h->data;

        g->signals_closed++;
}

static void on_view_closed(void *userdata) {
        ((struct guard *)userdata)->view_closed = true;
}

static int guard_run(struct app *a, const struct guard_opts *o) {
        static const struct node_view_handlers h = {
                .on_change = on_view_change,
                .on_synced = on_view_synced,
                .on_error = on_view_error,
        };
        struct guard g = {
                .app = a,
                .o = o,
                .pod_ns = getenv("POD_NAMESPACE"),
                .pod_name = getenv("POD_NAME"),
                .exit_code = EXIT_ERROR,
        };
        uint64_t d;
        int r;

        r = driver_selectors_parse(o->driver_selectors, o->n_driver_selectors, &g.sels, &g.n_sels);
        if (r < 0)
                return EXIT_USAGE;
        if (g.pod_name && *g.pod_name && g.pod_ns && *g.pod_ns &&
            asprintf(&g.own_key, "%s/%s", g.pod_ns, g.pod_name) < 0)
                g.own_key = NULL;
        r = node_view_new(a->client, a->ts, &(const struct node_view_options){ .node = o->node }, &h, &g,
                          &g.view);
        if (r < 0) {
                log_error_errno(r, "Cannot set up the informers: %m");
                goto out;
        }
        if (dtimer_init(&g.kick, a->ts, on_kick) < 0 || dtimer_init(&g.deadline, a->ts, on_deadline) < 0) {
                log_oom();
                goto out;
        }

        g.started = timesrc_now(a->ts);
        if (o->deadline_usec)
                d = o->deadline_usec;
        else
                d = deadline_for_grace(o->grace_seconds >= 0 ? o->grace_seconds
                                                             : GUARD_DEFAULT_GRACE_SECONDS);
        g.deadline_at = g.started + d;
        dtimer_start(&g.deadline, d);
        if (!o->deadline_usec && o->grace_seconds < 0 && g.own_key)
                log_info("guarding the DRA driver on node \"%s\", pod %s (gives up 5 s before the end of "
                         "its grace period)",
                         o->node, g.own_key);
        else
                log_info("guarding the DRA driver on node \"%s\" (gives up after %.0f s)", o->node,
                         (double)d / (double)USEC_PER_SEC);

        uv_signal_init(&a->loop, &g.sigint);
        uv_signal_init(&a->loop, &g.sigterm);
        g.sigint.data = g.sigterm.data = &g;
        uv_signal_start(&g.sigint, on_signal, SIGINT);
        uv_signal_start(&g.sigterm, on_signal, SIGTERM);
        g.signals_ready = true;

        if (start_watching(&g, NODE_VIEW_NODE) >= 0)
                app_run_until(a, &g.done);

out:
        if (g.signals_ready) {
                uv_close((uv_handle_t *)&g.sigint, on_signal_closed);
                uv_close((uv_handle_t *)&g.sigterm, on_signal_closed);
        }
        /* Let the cancelled list/watch calls finish before the view goes. */
        if (g.view) {
                node_view_close(g.view, on_view_closed, &g);
                while (!g.view_closed && uv_run(&a->loop, UV_RUN_ONCE) != 0)
                        ;
        }
        /* The signal handles live in g, on this stack: their closes must finish here. */
        while (g.signals_ready && g.signals_closed < 2)
                if (uv_run(&a->loop, UV_RUN_ONCE) == 0)
                        break;
        if (g.kick.src)
                dtimer_done(&g.kick);
        if (g.deadline.src)
                dtimer_done(&g.deadline);
        selectors_free(g.sels, g.n_sels);
        free(g.own_key);
        free(g.last_held);
        return g.exit_code;
}

int verb_guard(int argc, char **argv, struct global_flags *gf) {
        static const struct option extra[] = {
                { "node", required_argument, NULL, 'N' },
                { "grace-period-seconds", required_argument, NULL, 'G' },
                { "deadline", required_argument, NULL, 'T' },
                { "driver-selector", required_argument, NULL, 'D' },
                { "driver-namespace", required_argument, NULL, 'S' },
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
        r = guard_run(&a, &o);
        app_done(&a);
        return r;
}
