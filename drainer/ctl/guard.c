/* The guard controller (guard.h): one run per driver termination it is asked
 * about. Owns the run's timers and, unless it borrows a shared one, its node view;
 * decides from what the view holds (the Node first, then its pods, claims and
 * slices) and says so through its handlers. Never prints, never writes to the API,
 * never runs the loop. */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/macro.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/guard.h"
#include "drainer/dra/nodeview.h"
#include "drainer/drain/plan.h"
#include "drainer/kube/objects.h"

#define GUARD_MARGIN_USEC (5 * USEC_PER_SEC)
#define GUARD_MAX_NAMES   16 /* names per list in a line */
/* Events within this long are one evaluation (a list of many claims). */
#define GUARD_SETTLE_USEC (20 * USEC_PER_MSEC)

/* What the guard watches once the node turns out to be draining; the Node alone
 * before (all a rolling update needs). */
#define GUARD_DRAINING_PARTS (NODE_VIEW_PODS | NODE_VIEW_CLAIMS | NODE_VIEW_SLICES)

/* Taints that mean "this node is being drained", whatever their value and effect, and
 * whose drain each says: Cluster Autoscaler's scale-down taint, Karpenter's (v1, and
 * v0.3x's key), drainer's. */
static const struct {
        const char *key, *who;
} drain_taints[] = {
        { "ToBeDeletedByClusterAutoscaler", "Cluster Autoscaler" },
        { "karpenter.sh/disrupted", "Karpenter" },
        { "karpenter.sh/disruption", "Karpenter" },
        { "drainer.io/draining", "drainer" },
};

struct guard_run {
        struct kube_client *client;     /* borrowed */
        struct timesrc *ts;             /* borrowed */
        const struct guard_config *cfg; /* borrowed */
        const struct guard_handlers *h;
        void *userdata;
        struct node_view *view; /* owned; borrowed when shared_view */
        bool shared_view;
        struct dtimer settle;   /* coalesces view events into one evaluation */
        struct dtimer deadline; /* gives up */
        struct dtimer report;   /* on_done (or closed) on the turn after the decision */
        uint64_t started;       /* monotonic µs */
        uint64_t deadline_at;   /* monotonic µs */
        bool waiting;           /* the node is draining: pods, claims, slices are watched */
        bool own_pod_checked;
        bool finished, stopping;
        enum guard_outcome outcome;
        char *result;      /* the last line: why the run ended */
        char *last_held;   /* what the last "waiting" line said (names) */
        char *last_counts; /* the same in counts: what an answer may say */
        void (*closed)(void *userdata);
        void *closed_userdata;
};

static const char *const outcome_names[_GUARD_OUTCOME_MAX] = {
        [GUARD_RELEASED] = "released",
        [GUARD_TIMED_OUT] = "timed-out",
        [GUARD_FAILED] = "failed",
};

const char *guard_outcome_to_string(enum guard_outcome o) {
        return o >= 0 && o < _GUARD_OUTCOME_MAX ? outcome_names[o] : NULL;
}

_printf_(3, 4) static void note(struct guard_run *g, enum log_level level, const char *fmt, ...) {
        _cleanup_free_ char *line = NULL;
        va_list ap;

        if (!g->h->on_note)
                return;
        va_start(ap, fmt);
        if (vasprintf(&line, fmt, ap) < 0)
                line = NULL;
        va_end(ap);
        g->h->on_note(g, level, line ? line : "out of memory", g->userdata);
}

/* Ends the run: the line is noted at level and kept as the result; on_done follows
 * on the next turn (callers still use g). */
_printf_(4, 5) static void finish(struct guard_run *g, enum guard_outcome outcome, enum log_level level,
                                  const char *fmt, ...) {
        va_list ap;

        if (g->finished)
                return;
        g->finished = true;
        g->outcome = outcome;
        dtimer_stop(&g->settle);
        dtimer_stop(&g->deadline);
        va_start(ap, fmt);
        if (vasprintf(&g->result, fmt, ap) < 0)
                g->result = NULL;
        va_end(ap);
        if (g->h->on_note)
                g->h->on_note(g, level, g->result ? g->result : "out of memory", g->userdata);
        dtimer_start(&g->report, 0);
}

double guard_run_elapsed_seconds(struct guard_run *g) {
        return (double)(timesrc_now(g->ts) - g->started) / (double)USEC_PER_SEC;
}

const char *guard_run_held_counts(const struct guard_run *g) {
        return g->last_counts;
}

bool guard_run_finished(const struct guard_run *g) {
        return g->finished;
}

void guard_run_fail(struct guard_run *g, const char *line) {
        finish(g, GUARD_FAILED, LOG_LEVEL_WARNING, "%s", line);
}

/* The kubelet kills the hook when the grace period ends; stop a margin before, so
 * that what was still held gets said. Short grace periods keep half. */
static uint64_t deadline_for_grace(int64_t grace_seconds) {
        uint64_t g = (uint64_t)grace_seconds * USEC_PER_SEC;

        return MAX(g > GUARD_MARGIN_USEC ? g - GUARD_MARGIN_USEC : 0, g / 2);
}

/* Why the node counts as draining, naming whose drain a taint says, or NULL. */
static const char *draining_reason(const struct node_rec *n, char *buf, size_t size) {
        for (size_t i = 0; i < ELEMENTSOF(drain_taints); i++) {
                const struct node_taint *t = node_rec_find_taint(n, drain_taints[i].key, NULL);

                if (t) {
                        snprintf(buf, size, "%s: tainted %s%s%s:%s", drain_taints[i].who, t->key,
                                 t->value ? "=" : "", strempty(t->value), strna(t->effect));
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
static int held_summary(struct guard_run *g, const struct node_rec *n, char **ret_named, char **ret_counts) {
        const struct guard_config *cfg = g->cfg;
        struct node_input in;
        struct plan_options po = {
                .driver_selectors = cfg->driver_selectors,
                .n_driver_selectors = cfg->n_driver_selectors,
                .driver_namespaces = cfg->driver_namespaces,
                .n_driver_namespaces = cfg->n_driver_namespaces,
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
        /* Claims reserved only by driver pods are the drivers' own, claims whose devices
         * skip NodeUnprepareResources need no driver, and a PodGroup's claim that no pod of
         * the node uses is unprepared here (DESIGN.md): none of them holds the driver. */
        for (size_t i = 0; i < p.n_claims; i++)
                if (plan_claim_blocks(&p.claims[i]))
                        add_name(claim_names, sizeof(claim_names), &n_claims, p.claims[i].claim->ns,
                                 p.claims[i].claim->name);
        /* Terminating ones included: they are gone only once the kubelet unprepared their claims. */
        for (size_t i = 0; i < p.n_pods; i++) {
                const struct pod_rec *pod = p.pods[i].pod;
                char key[512];

                if (p.pods[i].cls != POD_CLASS_CLAIM_HOLDER)
                        continue;
                snprintf(key, sizeof(key), "%s/%s", pod->ns, pod->name);
                if (cfg->own_pod && streq(key, cfg->own_pod))
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
static void check_own_pod(struct guard_run *g) {
        const struct guard_config *cfg = g->cfg;
        const struct pod_rec *p;
        int64_t grace;
        uint64_t now;

        if (g->own_pod_checked || !cfg->own_pod || cfg->deadline_usec || cfg->grace_seconds >= 0)
                return;
        g->own_pod_checked = true;
        p = node_view_pod(g->view, cfg->own_pod);
        if (!p) {
                note(g, LOG_LEVEL_WARNING,
                     "pod %s is not on node \"%s\": using a grace period of %d s, ignoring", cfg->own_pod,
                     cfg->node, GUARD_DEFAULT_GRACE_SECONDS);
                return;
        }
        grace = p->deleting && p->deletion_grace_seconds >= 0 ? p->deletion_grace_seconds
                                                              : p->termination_grace_seconds;
        if (grace < 1)
                grace = 1;
        g->deadline_at = g->started + deadline_for_grace(grace);
        note(g, LOG_LEVEL_INFO, "grace period of pod %s: %lld s; giving up %.0f s after the start",
             cfg->own_pod, (long long)grace, (double)(g->deadline_at - g->started) / (double)USEC_PER_SEC);
        now = timesrc_now(g->ts);
        dtimer_start(&g->deadline, g->deadline_at <= now ? 0 : g->deadline_at - now);
}

static int start_watching(struct guard_run *g, unsigned parts) {
        int r = node_view_start(g->view, parts);

        if (r < 0)
                note(g, LOG_LEVEL_ERROR, "Cannot start watching %s: %s",
                     parts == NODE_VIEW_NODE ? "the node" : "its pods, claims and slices", strerror(-r));
        return r;
}

static void evaluate(struct guard_run *g) {
        _cleanup_free_ char *held = NULL, *counts = NULL;
        const char *node = g->cfg->node;
        const struct node_rec *n;
        const char *why;
        char buf[256];
        int r;

        if (g->finished || !g->view || !node_view_synced(g->view, NODE_VIEW_NODE))
                return;
        n = node_view_node(g->view);
        if (!n) {
                if (!g->waiting)
                        return finish(g, GUARD_FAILED, LOG_LEVEL_ERROR, "node \"%s\" not found", node);
                return finish(g, GUARD_RELEASED, LOG_LEVEL_INFO,
                              "node \"%s\" was deleted: nothing left to guard, letting the driver stop",
                              node);
        }
        why = draining_reason(n, buf, sizeof(buf));
        if (!why) {
                if (g->waiting)
                        return finish(g, GUARD_RELEASED, LOG_LEVEL_INFO,
                                      "node \"%s\" is no longer being drained: letting the driver stop",
                                      n->name);
                return finish(g, GUARD_RELEASED, LOG_LEVEL_INFO,
                              "node \"%s\" is not being drained (a restart or a rolling update): "
                              "letting the driver stop",
                              n->name);
        }
        if (!g->waiting) {
                note(g, LOG_LEVEL_INFO,
                     "node \"%s\" is being drained (%s): holding the driver until no ResourceClaim is on "
                     "the node and no claim-holding pod is left",
                     n->name, why);
                g->waiting = true;
                if (start_watching(g, GUARD_DRAINING_PARTS) < 0)
                        return finish(g, GUARD_FAILED, LOG_LEVEL_ERROR,
                                      "cannot watch the pods, claims and slices of node \"%s\"", n->name);
                /* A shared view may have them already: then no callback is coming. */
        }
        if (!node_view_synced(g->view, GUARD_DRAINING_PARTS))
                return;
        check_own_pod(g);
        r = held_summary(g, n, &held, &counts);
        if (r < 0)
                return finish(g, GUARD_FAILED, LOG_LEVEL_ERROR, "out of memory");
        if (r == 0)
                return finish(g, GUARD_RELEASED, LOG_LEVEL_INFO,
                              "node \"%s\": no ResourceClaim is on the node and no claim-holding pod is "
                              "left (waited %.1f s): letting the driver stop",
                              n->name, guard_run_elapsed_seconds(g));
        if (!streq_ptr(held, g->last_held)) {
                note(g, LOG_LEVEL_INFO, "waiting: %s", held);
                free(g->last_held);
                g->last_held = TAKE_PTR(held);
                free(g->last_counts);
                g->last_counts = TAKE_PTR(counts);
        }
}

static void on_settle(struct dtimer *t) {
        evaluate(container_of(t, struct guard_run, settle));
}

void guard_run_view_changed(struct guard_run *g) {
        if (!g->finished && !g->settle.armed)
                dtimer_start(&g->settle, GUARD_SETTLE_USEC);
}

void guard_run_view_synced(struct guard_run *g, unsigned part) {
        /* Evaluate the Node at once: a rolling update should not wait for a watch to open. */
        if (part == NODE_VIEW_NODE && !g->waiting) {
                evaluate(g);
                /* Decided on the Node alone: its watch is not needed (a shared view's owner
                 * keeps its own). */
                if (g->finished && !g->shared_view && g->view)
                        node_view_stop_part(g->view, NODE_VIEW_NODE);
                return;
        }
        guard_run_view_changed(g);
}

void guard_run_view_error(struct guard_run *g, unsigned part, int error, const char *message) {
        if (g->finished)
                return;
        /* Missing RBAC will not fix itself; anything else before we know the node is an API
         * error too (the client already retried). Once waiting, the informer retries. */
        if (error == -EACCES || !node_view_synced(g->view, NODE_VIEW_NODE))
                return finish(g, GUARD_FAILED, LOG_LEVEL_ERROR, "watching %s: %s",
                              strna(node_view_part_name(part)), message ? message : strerror(-error));
        note(g, LOG_LEVEL_WARNING, "watching %s: %s, retrying", strna(node_view_part_name(part)),
             message ? message : strerror(-error));
}

static void on_deadline(struct dtimer *t) {
        struct guard_run *g = container_of(t, struct guard_run, deadline);
        _cleanup_free_ char *held = NULL, *counts = NULL;
        const struct node_rec *n;
        bool synced;

        if (g->finished)
                return;
        synced = node_view_synced(g->view, NODE_VIEW_NODE | (g->waiting ? GUARD_DRAINING_PARTS : 0));
        n = synced ? node_view_node(g->view) : NULL;
        if (!synced || !n)
                return finish(g, GUARD_FAILED, LOG_LEVEL_ERROR,
                              "gave up after %.1f s: could not read node \"%s\" and its claims "
                              "from the API server",
                              guard_run_elapsed_seconds(g), g->cfg->node);
        if (!g->waiting) {
                evaluate(g);
                return;
        }
        if (held_summary(g, n, &held, &counts) < 0)
                return finish(g, GUARD_FAILED, LOG_LEVEL_ERROR, "out of memory");
        if (!held) {
                evaluate(g);
                return;
        }
        note(g, LOG_LEVEL_INFO, "still held: %s", held);
        finish(g, GUARD_TIMED_OUT, LOG_LEVEL_ERROR,
               "gave up after %.1f s, before the driver pod would be killed: still held: %s",
               guard_run_elapsed_seconds(g), counts);
}

/* The turn after the decision: on_done; or, once stopping with nothing to wait for
 * (a shared view), closed. */
static void on_report(struct dtimer *t) {
        struct guard_run *g = container_of(t, struct guard_run, report);

        if (g->stopping) {
                if (g->closed)
                        g->closed(g->closed_userdata);
                return;
        }
        g->h->on_done(g, g->outcome, g->result ? g->result : "out of memory", g->userdata);
}

static void on_own_view_change(struct node_view *v, void *userdata) {
        guard_run_view_changed(userdata);
}

static void on_own_view_synced(struct node_view *v, unsigned part, void *userdata) {
        guard_run_view_synced(userdata, part);
}

static void on_own_view_error(struct node_view *v, unsigned part, int error, const char *message,
                              void *userdata) {
        guard_run_view_error(userdata, part, error, message);
}

int guard_run_new(struct kube_client *client, struct timesrc *ts, const struct guard_config *cfg,
                  const struct guard_handlers *h, void *userdata, struct guard_run **ret) {
        struct guard_run *g;

        assert(cfg && cfg->node && h && h->on_done);
        g = calloc(1, sizeof(*g));
        if (!g)
                return -ENOMEM;
        *g = (struct guard_run){
                .client = client,
                .ts = ts,
                .cfg = cfg,
                .h = h,
                .userdata = userdata,
                .outcome = GUARD_FAILED,
        };
        if (dtimer_init(&g->settle, ts, on_settle) < 0 || dtimer_init(&g->deadline, ts, on_deadline) < 0 ||
            dtimer_init(&g->report, ts, on_report) < 0) {
                guard_run_free(g);
                return -ENOMEM;
        }
        *ret = g;
        return 0;
}

int guard_run_start(struct guard_run *g, struct node_view *shared) {
        static const struct node_view_handlers own = {
                .on_change = on_own_view_change,
                .on_synced = on_own_view_synced,
                .on_error = on_own_view_error,
        };
        const struct guard_config *cfg = g->cfg;
        uint64_t d;
        int r;

        assert(!g->view && !g->finished);
        g->started = timesrc_now(g->ts);
        if (shared) {
                g->view = shared;
                g->shared_view = true;
        } else {
                r = node_view_new(g->client, g->ts, &(const struct node_view_options){ .node = cfg->node },
                                  &own, g, &g->view);
                if (r < 0) {
                        finish(g, GUARD_FAILED, LOG_LEVEL_ERROR, "cannot set up the informers: %s",
                               strerror(-r));
                        return r;
                }
        }
        if (cfg->deadline_usec)
                d = cfg->deadline_usec;
        else
                d = deadline_for_grace(cfg->grace_seconds >= 0 ? cfg->grace_seconds
                                                               : GUARD_DEFAULT_GRACE_SECONDS);
        g->deadline_at = g->started + d;
        dtimer_start(&g->deadline, d);
        if (!cfg->deadline_usec && cfg->grace_seconds < 0 && cfg->own_pod)
                note(g, LOG_LEVEL_INFO,
                     "guarding the DRA driver on node \"%s\", pod %s (gives up 5 s before the end of "
                     "its grace period)",
                     cfg->node, cfg->own_pod);
        else
                note(g, LOG_LEVEL_INFO, "guarding the DRA driver on node \"%s\" (gives up after %.0f s)",
                     cfg->node, (double)d / (double)USEC_PER_SEC);
        r = start_watching(g, NODE_VIEW_NODE);
        if (r < 0) {
                finish(g, GUARD_FAILED, LOG_LEVEL_ERROR, "cannot watch node \"%s\"", cfg->node);
                return r;
        }
        if (node_view_synced(g->view, NODE_VIEW_NODE))
                guard_run_view_changed(
                        g); /* a shared view that has the Node already: no callback is coming */
        return 0;
}

static void on_own_view_closed(void *userdata) {
        struct guard_run *g = userdata;

        if (g->closed)
                g->closed(g->closed_userdata);
}

void guard_run_stop(struct guard_run *g, void (*closed)(void *userdata), void *userdata) {
        assert(!g->stopping);
        g->stopping = true;
        g->finished = true;
        g->closed = closed;
        g->closed_userdata = userdata;
        dtimer_stop(&g->settle);
        dtimer_stop(&g->deadline);
        if (g->view && !g->shared_view) {
                dtimer_stop(&g->report);
                node_view_close(g->view, on_own_view_closed, g);
        } else
                dtimer_start(&g->report, 0); /* closed on the next turn */
        g->view = NULL;
}

struct guard_run *guard_run_free(struct guard_run *g) {
        if (!g)
                return NULL;
        if (g->settle.src)
                dtimer_done(&g->settle);
        if (g->deadline.src)
                dtimer_done(&g->deadline);
        if (g->report.src)
                dtimer_done(&g->report);
        free(g->last_held);
        free(g->last_counts);
        free(g->result);
        free(g);
        return NULL;
}
