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
#include "drainer/informer.h"
#include "drainer/log.h"
#include "drainer/objects.h"
#include "drainer/plan.h"
#include "drainer/selector.h"
#include "drainer/timesrc.h"
#include "drainer/verbs.h"

#define GUARD_DEFAULT_GRACE_SECONDS 30
#define GUARD_MARGIN_USEC           (5 * USEC_PER_SEC)
#define GUARD_MAX_NAMES             16 /* names per list in a log line */

/* The informers a guard uses, in the order they start: the Node first (the only
 * one a rolling update needs), the others once the node turns out to be draining. */
enum {
        G_NODE,
        G_PODS,
        G_CLAIMS,
        G_SLICES,
        _G_MAX,
};

static const enum informer_kind guard_kinds[_G_MAX] = {
        [G_NODE] = INFORMER_NODES,
        [G_PODS] = INFORMER_PODS,
        [G_CLAIMS] = INFORMER_CLAIMS,
        [G_SLICES] = INFORMER_SLICES,
};

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
        char *node_fs, *pod_fs;
        struct informer *inf[_G_MAX]; /* owned */
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
        _cleanup_free_ const void **pods = NULL, **claims = NULL, **slices = NULL;
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
        size_t n_claims = 0, n_pods = 0, np, nc, ns;
        struct plan p;
        int r;

        if (informer_collect(g->inf[G_PODS], &pods, &np) < 0 ||
            informer_collect(g->inf[G_CLAIMS], &claims, &nc) < 0 ||
            informer_collect(g->inf[G_SLICES], &slices, &ns) < 0)
                return -ENOMEM;
        r = plan_build(n, (const struct pod_rec *const *)pods, np, (const struct claim_rec *const *)claims,
                       nc, (const struct slice_rec *const *)slices, ns, NULL, 0, &po, &p);
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
        p = informer_get(g->inf[G_PODS], g->own_key);
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

static int start_informer(struct guard *g, size_t k) {
        int r = informer_start(g->inf[k]);

        if (r < 0)
                log_error_errno(r, "Cannot start watching %s: %m", informer_kind_to_string(guard_kinds[k]));
        return r;
}

static void evaluate(struct guard *g) {
        _cleanup_free_ char *held = NULL;
        const struct node_rec *n;
        const char *why;
        char buf[256];
        int r;

        if (g->done || !informer_synced(g->inf[G_NODE]))
                return;
        n = informer_get(g->inf[G_NODE], g->o->node);
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
                for (size_t k = G_PODS; k < _G_MAX; k++)
                        if (start_informer(g, k) < 0)
                                return finish(g, EXIT_ERROR);
                return;
        }
        for (size_t k = G_PODS; k < _G_MAX; k++)
                if (!informer_synced(g->inf[k]))
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
        bool synced = true;

        if (g->done)
                return;
        for (size_t k = 0; k < (g->waiting ? _G_MAX : 1); k++)
                synced = synced && informer_synced(g->inf[k]);
        n = synced ? informer_get(g->inf[G_NODE], g->o->node) : NULL;
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

static void on_inf_add(struct informer *inf, const void *rec, void *userdata) {
        changed(userdata);
}
static void on_inf_update(struct informer *inf, const void *old, const void *rec, void *userdata) {
        changed(userdata);
}
static void on_inf_synced(struct informer *inf, void *userdata) {
        struct guard *g = userdata;

        /* Evaluate the Node at once: a rolling update should not wait for a watch to open. */
        if (inf == g->inf[G_NODE] && !g->waiting) {
                evaluate(g);
                if (g->done)
                        informer_stop(inf); /* no watch needed */
                return;
        }
        changed(g);
}

static const char *guard_inf_name(struct guard *g, struct informer *inf) {
        for (size_t k = 0; k < _G_MAX; k++)
                if (g->inf[k] == inf)
                        return informer_kind_to_string(guard_kinds[k]);
        return "?";
}

static void on_inf_error(struct informer *inf, int error, const char *message, void *userdata) {
        struct guard *g = userdata;

        if (g->done)
                return;
        /* Missing RBAC will not fix itself; anything else before we know the node is an API
         * error too (the client already retried). Once waiting, the informer retries. */
        if (error == -EACCES || !informer_synced(g->inf[G_NODE])) {
                log_error("watching %s: %s", guard_inf_name(g, inf), message ? message : strerror(-error));
                return finish(g, EXIT_ERROR);
        }
        log_warning("watching %s: %s, retrying", guard_inf_name(g, inf),
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

static int guard_run(struct app *a, const struct guard_opts *o) {
        static const struct informer_handlers h = {
                .on_add = on_inf_add,
                .on_update = on_inf_update,
                .on_delete = on_inf_add,
                .on_synced = on_inf_synced,
                .on_error = on_inf_error,
        };
        struct guard g = {
                .app = a,
                .o = o,
                .pod_ns = getenv("POD_NAMESPACE"),
                .pod_name = getenv("POD_NAME"),
                .exit_code = EXIT_ERROR,
        };
        struct informer_options io[_G_MAX] = {};
        uint64_t d;
        int r;

        r = driver_selectors_parse(o->driver_selectors, o->n_driver_selectors, &g.sels, &g.n_sels);
        if (r < 0)
                return EXIT_USAGE;
        if (g.pod_name && *g.pod_name && g.pod_ns && *g.pod_ns &&
            asprintf(&g.own_key, "%s/%s", g.pod_ns, g.pod_name) < 0)
                g.own_key = NULL;
        if (asprintf(&g.node_fs, "metadata.name=%s", o->node) < 0 ||
            asprintf(&g.pod_fs, "spec.nodeName=%s", o->node) < 0) {
                log_oom();
                goto out;
        }
        io[G_NODE] = (struct informer_options){ .kind = INFORMER_NODES, .field_selector = g.node_fs };
        io[G_PODS] = (struct informer_options){ .kind = INFORMER_PODS, .field_selector = g.pod_fs };
        /* Claims cannot be filtered by node: all of them, kept compact, in pages. */
        io[G_CLAIMS] = (struct informer_options){ .kind = INFORMER_CLAIMS };
        io[G_SLICES] = (struct informer_options){ .kind = INFORMER_SLICES, .field_selector = g.pod_fs };
        for (size_t k = 0; k < _G_MAX; k++) {
                r = informer_new(a->client, a->ts, &io[k], &h, &g, &g.inf[k]);
                if (r < 0) {
                        log_error_errno(r, "Cannot set up the informers: %m");
                        goto out;
                }
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

        if (start_informer(&g, G_NODE) >= 0)
                app_run_until(a, &g.done);

out:
        if (g.signals_ready) {
                uv_close((uv_handle_t *)&g.sigint, on_signal_closed);
                uv_close((uv_handle_t *)&g.sigterm, on_signal_closed);
        }
        for (size_t k = 0; k < _G_MAX; k++)
                if (g.inf[k])
                        informer_stop(g.inf[k]);
        /* Let the cancelled list/watch calls finish before freeing the informers. */
        for (;;) {
                bool idle = true;

                for (size_t k = 0; k < _G_MAX; k++)
                        if (g.inf[k] && !informer_idle(g.inf[k]))
                                idle = false;
                if (idle || uv_run(&a->loop, UV_RUN_ONCE) == 0)
                        break;
        }
        /* The signal handles live in g, on this stack: their closes must finish here. */
        while (g.signals_ready && g.signals_closed < 2)
                if (uv_run(&a->loop, UV_RUN_ONCE) == 0)
                        break;
        for (size_t k = 0; k < _G_MAX; k++)
                informer_free(g.inf[k]);
        if (g.kick.src)
                dtimer_done(&g.kick);
        if (g.deadline.src)
                dtimer_done(&g.deadline);
        selectors_free(g.sels, g.n_sels);
        free(g.own_key);
        free(g.node_fs);
        free(g.pod_fs);
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
