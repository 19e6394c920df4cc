/* The drain engine: watches the node, its pods, all ResourceClaims and the
 * node's ResourceSlices, and on every change re-derives the next safe step
 * from the state on the Node (DESIGN.md's phases). Owns its informers,
 * evictions, timers and the one Node patch in flight. It never stops a
 * driver while a claim is on the node and never force-deletes a claim holder.
 * It posts no Event: what happened goes to the caller's on_notice. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "drainer/client.h"
#include "drainer/engine.h"
#include "drainer/evictor.h"
#include "drainer/hashmap.h"
#include "drainer/health.h"
#include "drainer/json.h"
#include "drainer/log.h"
#include "drainer/metrics.h"
#include "drainer/nodeview.h"
#include "drainer/objects.h"
#include "drainer/taintrule.h"
#include "drainer/timesrc.h"

#define HEALTH_RECHECK_USEC (2 * USEC_PER_SEC)
#define HEALTH_TIMEOUT_USEC (5 * USEC_PER_SEC)
/* After a 409 on the Node patch, how long to wait for the watch to bring the newer Node
 * before patching from the cached one again. */
#define CONFLICT_WAIT_USEC  (5 * USEC_PER_SEC)
/* How long a stop waits for the answer to a Node patch in flight. */
#define STOP_WAIT_USEC      (3 * USEC_PER_SEC)
/* Progress messages reach the Node at most this often (DESIGN.md), the last always. */
#define PROGRESS_WRITE_USEC (10 * USEC_PER_SEC)
#define MAX_HELD            64
#define MAX_DRIVER_KEYS     16

struct probe_result {
        int error;
        enum health_status status;
        uint64_t at;
};

struct engine {
        struct kube_client *client;  /* borrowed */
        struct transport *transport; /* borrowed */
        struct timesrc *ts;          /* borrowed */
        struct engine_options o;
        struct engine_callbacks cb;
        void *userdata;

        struct node_view *view; /* owned; NULL once closed */
        unsigned parts;         /* what the view holds for this goal */
        bool view_closing;
        bool pdbs_failed; /* budgets could not be listed: the drain goes on without them */
        struct dtimer kick, retry, deadline, stop_wait;
        bool kick_armed;

        struct evictor *evictor; /* owned */
        struct hashmap *probes;  /* pod uid -> struct probe_result, owned */
        struct health_probe *probe;
        char *probe_uid;
        struct hashmap *claims_seen; /* "ns/name" -> CLAIM_ON_NODE or CLAIM_RELEASED */
        struct hashmap *accepted;    /* "ns/name" of pods whose eviction this run had accepted, until gone */

        struct kube_call *node_call; /* the Node patch in flight */
        bool status_patch;           /* ... is one of nodes/NAME/status (--node-conditions) */
        bool patching_phase;         /* ... moves drainer.io/state to patch_phase */
        enum drain_phase patch_phase;
        /* The phase our last answered patch wrote, until the cache shows that version:
         * what the Node shows when a stop comes in between (engine_node_phase). */
        bool has_written_phase;
        enum drain_phase written_phase;

        /* The configured driver-stop strategy's instance for this run (owned). Only its
         * configuration is ever acted on: a recorded stop is undone only when its
         * strategy's undo_allowed() says this configuration may. */
        struct driver_stop *stop;
        char *await_rv;          /* resourceVersion our last patch produced, until the cache has it */
        char *patch_rv;          /* resourceVersion the Node patch in flight is conditional on */
        char *conflict_rv;       /* ... of a patch refused with 409, until the cache moves past it */
        uint64_t conflict_until; /* then patch again anyway (monotonic µs) */
        uint64_t wrote_at;       /* when this run last patched the Node (monotonic µs) */
        bool wrote;
        bool finish_sent; /* uncordon: the final patch went out */

        struct plan plan;
        bool has_plan;
        bool said_no_dra;    /* the cluster serves no DRA API: said once */
        bool said_not_ready; /* a DrainerNodeNotReady Event went out for this not-Ready spell */
        bool said_ready;     /* ... and a DrainerNodeReady Event after it */
        bool said_out_of_service, said_out_of_service_removed;
        struct drain_state st;
        bool has_st;

        bool started, finished, stopping, observed;
        bool changed;     /* this run sent a Node patch, an eviction or a unit job */
        char *needs_flag; /* a refusal by configuration: the flag that allows the recorded action */
        bool has_phase;
        enum drain_phase phase;
        uint64_t phase_entered, started_at;
        struct engine_summary summary;
        char *message;
        char *final_message;

        /* --driver: the scope (the first driver's name: its drainer.io/KEY.NAME keys hold
         * the state), the Node as the scope sees it, and the DeviceTaintRules. */
        const char *scope; /* borrowed from o.plan.drivers, NULL: a node drain */
        struct drain_scope_view sv;
        bool has_sv;
        struct taint_rule_discovery *disc; /* until its answer */
        bool disc_done;
        struct taint_rule_api rule_api;
        struct kube_call *rule_call; /* the rule POST, GET or DELETE in flight */
        size_t rules_done;           /* rules created (drain) or deleted (uncordon) by this run */
        bool rules_ok;               /* every rule answered: in place / gone */
        /* The rule at rules_done: its create answered 409 (what is there is read and
         * judged before it counts as in place); read (rule_obj the rule as the API server
         * returned it, NULL: 404, gone). */
        bool rule_conflict, rule_read;
        cJSON *rule_obj;  /* owned */
        char *rules_left; /* uncordon: the rules named on the Node but not drainer's, left alone */

        struct engine_held held[MAX_HELD];
        size_t n_held;
        struct engine_held ns_terminating[MAX_HELD]; /* for the summary */

        /* metrics (metrics.h, the default registry) */
        bool m_state_seen;                /* the Node's state was read at least once */
        bool m_phase_here;                /* the current phase was entered while this run watched */
        int64_t m_phase_since;            /* its drainer.io/state-since, µs; 0 if unknown */
        char *m_drivers[MAX_DRIVER_KEYS]; /* the driver label values this engine set */
        size_t n_m_drivers;
};

static void reconcile(struct engine *e);

/* ---- small helpers ---- */

static void set_message(struct engine *e, const char *fmt, ...) _printf_(2, 3);
static void set_message(struct engine *e, const char *fmt, ...) {
        char *m = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        if (!m)
                return;
        free(e->message);
        e->message = m;
}

/* What a wait for pods to go adds when the node is not Ready: its kubelet is down,
 * unreachable or failing, and only the kubelet finishes a deleted pod (it stops the
 * containers, unprepares the claims, then deletes the object); drainer never
 * force-deletes to get past it. The node lifecycle controller marks a silent node
 * Unknown after its grace period (node-monitor-grace-period, 50 s by default). */
#define NOT_READY_NOTE                                                                               \
        "the node is not Ready (its kubelet is down or not reporting): its pods finish terminating " \
        "only once it is back; until then nothing unprepares their ResourceClaims, so they are not " \
        "released"

static bool out_of_service_tainted(const struct node_rec *n) {
        return node_rec_find_taint(n, OUT_OF_SERVICE_TAINT_KEY, OUT_OF_SERVICE_TAINT_EFFECT) != NULL;
}

/* When --out-of-service applies the taint (realtime µs), 0 if unknown. */
static int64_t out_of_service_due(const struct engine *e, const struct node_rec *n) {
        if (n->ready || n->not_ready_since_usec <= 0)
                return 0;
        return n->not_ready_since_usec + (int64_t)e->o.out_of_service_after_usec;
}

/* "; NOT_READY_NOTE[; what --out-of-service does about it]" when the node is not
 * Ready, "" else. In buf (cut at size). The due time is a time, not a countdown, so
 * the message does not change every second. */
static const char *not_ready_note(const struct engine *e, const struct node_rec *n, char *buf, size_t size) {
        char when[64] = "?";

        buf[0] = 0;
        if (n->ready)
                return buf;
        if (out_of_service_tainted(n))
                snprintf(buf, size,
                         "; the node is not Ready and has the taint " OUT_OF_SERVICE_TAINT_KEY "%s: the "
                         "control plane deletes its pods and releases their claims without the kubelet",
                         e->st.out_of_service_usec > 0 ? " (applied by drainer, --out-of-service)"
                                                       : " (not applied by drainer)");
        else if (e->o.out_of_service && out_of_service_due(e, n) > 0) {
                (void)timesrc_format_rfc3339(out_of_service_due(e, n), when, sizeof(when));
                snprintf(buf, size,
                         "; " NOT_READY_NOTE "; --out-of-service: the taint " OUT_OF_SERVICE_TAINT_KEY
                         "=" OUT_OF_SERVICE_TAINT_VALUE ":" OUT_OF_SERVICE_TAINT_EFFECT
                         " goes on at %s, once the node has been not Ready for --out-of-service-after",
                         when);
        } else
                snprintf(buf, size, "; " NOT_READY_NOTE);
        return buf;
}

#define NS_TERMINATING_NOTE \
        "waiting for the namespace controller to delete pods of namespaces being deleted: "

/* "; NS_TERMINATING_NOTE ns/a, ns/b" for the pods whose eviction was answered
 * NamespaceTerminating and that are still on the node (held, or deleting now), as
 * kubectl waits for them; "" when there are none. Cut at size. */
static const char *ns_terminating_note(struct engine *e, char *buf, size_t size) {
        struct evictor_held nt[MAX_HELD];
        size_t k = evictor_ns_terminating(e->evictor, nt, MAX_HELD), len = 0, shown = 0;

        buf[0] = 0;
        for (size_t i = 0; i < k && len < size; i++) {
                bool present = false;

                for (size_t j = 0; j < e->plan.n_pods && !present; j++)
                        present = streq(e->plan.pods[j].pod->ns, nt[i].ns) &&
                                  streq(e->plan.pods[j].pod->name, nt[i].name);
                if (!present)
                        continue;
                len += snprintf(buf + len, size - len, "%s%s/%s", shown++ ? ", " : "; " NS_TERMINATING_NOTE,
                                nt[i].ns, nt[i].name);
        }
        return buf;
}

static void kick(struct engine *e) {
        if (e->finished || e->stopping || e->kick_armed)
                return;
        e->kick_armed = true;
        dtimer_start(&e->kick, 0);
}

static void on_kick(struct dtimer *t) {
        struct engine *e = container_of(t, struct engine, kick);

        e->kick_armed = false;
        reconcile(e);
}

static void on_retry_timer(struct dtimer *t) {
        reconcile(container_of(t, struct engine, retry));
}

/* Arms the retry timer for the earliest of its current due time and at. */
static void retry_at(struct engine *e, uint64_t at) {
        uint64_t now = timesrc_now(e->ts);

        if (e->retry.armed && e->retry.due <= at)
                return;
        dtimer_start(&e->retry, at > now ? at - now : 0);
}

/* The view has its first lists. PodDisruptionBudgets that cannot be listed are
 * done without: the Eviction API enforces them anyway; only preflight's check of
 * pods under several and the names in "held" messages are lost. */
static bool synced(const struct engine *e) {
        unsigned parts = e->parts;

        if (e->pdbs_failed)
                parts &= ~NODE_VIEW_PDBS;
        if (e->scope && !e->disc_done)
                return false;
        return e->view && node_view_synced(e->view, parts);
}

/* What happened, to the caller (who announces it: engine.h). Without a Node seen
 * there is nothing to say it about. */
static void notify(struct engine *e, const struct node_rec *n, enum engine_notice_kind kind,
                   enum drain_phase phase, const char *message) {
        if (n && e->cb.on_notice)
                e->cb.on_notice(e, &(const struct engine_notice){ kind, n, phase, message }, e->userdata);
}

static void notice(struct engine *e, const struct node_rec *n, enum engine_notice_kind kind,
                   const char *message) {
        notify(e, n, kind, e->phase, message);
}

/* ---- metrics ---- */

static const char *goal_label(const struct engine *e) {
        return e->o.goal == ENGINE_GOAL_DRAIN ? "drain" : "uncordon";
}

static void metrics_finished(struct engine *e, int result, uint64_t usec) {
        const char *const *l = METRIC_LABELS(goal_label(e), result == 0            ? "done"
                                                            : result == -ETIMEDOUT ? "timeout"
                                                            : result == -EPERM     ? "refused"
                                                                                   : "error");

        if (result == -ECANCELED)
                return;
        metrics_add(metrics_family(DRAINER_METRIC_DRAINS), l, 1);
        metrics_observe(metrics_family(DRAINER_METRIC_DRAIN_DURATION), l, (double)usec / USEC_PER_SEC);
        /* Back in service: forget the node's series, so that there are only as many as
         * nodes out of service. */
        if (result == 0 && e->o.goal == ENGINE_GOAL_UNCORDON)
                metrics_remove_label(metrics_default(), "node", e->o.node);
}

/* Called before note_phase() takes the new state in: the phase gauges, and the
 * duration of the phase the node left. A phase entered before this run counts
 * from its drainer.io/state-since (second precision), else from the monotonic
 * clock. */
static void metrics_phase(struct engine *e, uint64_t now) {
        bool has = e->st.has_phase, seen = e->m_state_seen;
        const char *node = e->o.node, *drv = e->scope ? e->scope : "";

        e->m_state_seen = true;
        if (has == e->has_phase && (!has || e->st.phase == e->phase))
                return;
        if (e->has_phase) {
                double secs = -1;

                if (e->m_phase_here)
                        secs = (double)(now - e->phase_entered) / USEC_PER_SEC;
                else if (e->m_phase_since > 0)
                        secs = (double)(timesrc_realtime(e->ts) - e->m_phase_since) / USEC_PER_SEC;
                if (secs >= 0)
                        metrics_observe(metrics_family(DRAINER_METRIC_PHASE_DURATION),
                                        METRIC_LABELS(drain_phase_to_string(e->phase)), secs);
        }
        /* this drain's own series only: a driver drain's (driver label NAME) and the node
         * drain's (driver "") of one node are apart, and may be another engine's */
        if (e->has_phase) {
                metrics_remove(metrics_family(DRAINER_METRIC_PHASE),
                               METRIC_LABELS(node, drv, drain_phase_to_string(e->phase)));
                metrics_remove(metrics_family(DRAINER_METRIC_PHASE_START),
                               METRIC_LABELS(node, drv, drain_phase_to_string(e->phase)));
        }
        e->m_phase_here = seen;
        e->m_phase_since = e->st.state_since_usec;
        if (!has)
                return;
        metrics_set(metrics_family(DRAINER_METRIC_PHASE),
                    METRIC_LABELS(node, drv, drain_phase_to_string(e->st.phase)), 1);
        metrics_set(metrics_family(DRAINER_METRIC_PHASE_START),
                    METRIC_LABELS(node, drv, drain_phase_to_string(e->st.phase)),
                    (double)(e->m_phase_since > 0 ? e->m_phase_since : timesrc_realtime(e->ts)) /
                            USEC_PER_SEC);
}

static void metrics_drivers(struct engine *e);

/* The node's gauges, after each reconcile and at the end. */
static void metrics_node(struct engine *e) {
        const char *node = e->o.node;
        struct evictor_stats es;

        if (!e->has_plan)
                return;
        evictor_get_stats(e->evictor, &es);
        metrics_set(metrics_family(DRAINER_METRIC_CLAIMS), METRIC_LABELS(node),
                    (double)e->plan.n_claims_blocking);
        for (int g = 0; g < EVICT_GROUP_NONE; g++)
                metrics_set(metrics_family(DRAINER_METRIC_PODS_PENDING),
                            METRIC_LABELS(node, evict_group_to_string(g)), (double)e->plan.n_per_group[g]);
        metrics_set(metrics_family(DRAINER_METRIC_EVICTIONS_PDB), METRIC_LABELS(node),
                    (double)es.held_by_pdb);
        metrics_drivers(e);
}

static void finish(struct engine *e, int result, const char *fmt, ...) _printf_(3, 4);
static void finish(struct engine *e, int result, const char *fmt, ...) {
        const struct node_rec *n;
        va_list ap;
        char *m = NULL;
        uint64_t now;

        if (e->finished)
                return;
        e->finished = true;
        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        free(e->final_message);
        e->final_message = m;

        now = timesrc_now(e->ts);
        if (e->has_phase)
                e->summary.phase_usec[e->phase] += now - e->phase_entered;
        e->summary.result = result;
        e->summary.has_phase = e->has_phase;
        e->summary.last_phase = e->phase;
        {
                struct evictor_stats es;

                evictor_get_stats(e->evictor, &es);
                e->summary.pods_evicted = es.accepted;
                e->changed = e->changed || es.submitted > 0;
        }
        {
                struct evictor_held nt[MAX_HELD];
                size_t k = evictor_ns_terminating(e->evictor, nt, MAX_HELD);

                for (size_t i = 0; i < k; i++)
                        e->ns_terminating[i] =
                                (struct engine_held){ nt[i].ns, nt[i].name, nt[i].reason, true };
                e->summary.ns_terminating = e->ns_terminating;
                e->summary.n_ns_terminating = k;
        }
        e->summary.claims_waited = hashmap_size(e->claims_seen);
        e->summary.total_usec = now - e->started_at;
        e->summary.message = e->final_message;
        e->summary.plan = e->has_plan ? &e->plan : NULL;
        e->summary.needs_flag = e->needs_flag;
        e->summary.changed = e->changed;
        e->summary.changed = e->summary.changed || e->stop->host_actions > 0;
        n = node_view_node(e->view);
        if (n) {
                e->summary.node_not_ready = !n->ready;
                e->summary.out_of_service = out_of_service_tainted(n);
                e->summary.out_of_service_by_drainer =
                        e->summary.out_of_service && e->has_st && e->st.out_of_service_usec > 0;
        }
        for (int p = DRAIN_PHASE_CORDON; p < _DRAIN_PHASE_MAX; p++)
                e->summary.changed = e->summary.changed || e->summary.phase_seen[p];
        metrics_node(e);
        metrics_finished(e, result, e->summary.total_usec);

        if (result == 0)
                notice(e, n, ENGINE_NOTICE_DONE, strna(m));
        else if (result == -EPERM)
                notice(e, n, ENGINE_NOTICE_REFUSED, strna(m));
        else if (result != -ECANCELED)
                notice(e, n, ENGINE_NOTICE_FAILED, strna(m));

        dtimer_stop(&e->retry);
        dtimer_stop(&e->deadline);
        if (e->cb.on_finished)
                e->cb.on_finished(e, &e->summary, e->userdata);
}

static void on_stop_wait(struct dtimer *t) {
        struct engine *e = container_of(t, struct engine, stop_wait);

        if (e->node_call)
                kube_call_cancel(e->node_call); /* no answer in time: the Node may show either */
}

static void on_deadline(struct dtimer *t) {
        struct engine *e = container_of(t, struct engine, deadline);
        char remained[1024] = "";
        size_t len = 0;

        if (e->has_plan) {
                size_t pods = 0;

                for (int g = 0; g < EVICT_GROUP_NONE; g++)
                        pods += e->plan.n_per_group[g];
                len += snprintf(remained + len, sizeof(remained) - len,
                                "%zu pods and %zu claims on the node", pods, e->plan.n_claims_blocking);
                /* Which: a pod that never terminates or a claim that stays allocated is
                 * what the admin has to look at. */
                for (size_t i = 0, k = 0; i < e->plan.n_pods && len < sizeof(remained) - 1; i++) {
                        const struct plan_pod *pp = &e->plan.pods[i];

                        if (pp->group >= EVICT_GROUP_NONE)
                                continue;
                        len += snprintf(remained + len, sizeof(remained) - len, "%s%s/%s%s",
                                        k++ == 0 ? " (" : ", ", pp->pod->ns, pp->pod->name,
                                        pp->cls == POD_CLASS_DRIVER ? " DRA driver"
                                        : pp->pod->deleting         ? " terminating"
                                                                    : "");
                }
                for (size_t i = 0, k = 0; i < e->plan.n_claims && len < sizeof(remained) - 1; i++) {
                        const struct claim_rec *c = e->plan.claims[i].claim;

                        if (e->plan.claims[i].driver_own)
                                continue;
                        len += snprintf(remained + len, sizeof(remained) - len, "%sResourceClaim %s/%s",
                                        k++ == 0 && pods == 0 ? " (" : ", ", c->ns, c->name);
                }
                if ((pods > 0 || e->plan.n_claims_blocking > 0) && len < sizeof(remained) - 1)
                        len += snprintf(remained + len, sizeof(remained) - len, ")");
                for (size_t i = 0; i < e->n_held && len < sizeof(remained) - 1; i++)
                        len += snprintf(remained + len, sizeof(remained) - len, "%s%s/%s held: %s",
                                        i == 0 ? "; " : ", ", e->held[i].ns, e->held[i].name,
                                        strna(e->held[i].reason));
        }
        finish(e, -ETIMEDOUT, "timed out in phase %s: %s%s%s",
               e->has_phase ? drain_phase_to_string(e->phase) : "preflight", remained,
               e->message ? "; last: " : "", strempty(e->message));
}

/* ---- the Node patch ---- */

static void on_node_patched(const struct kube_result *res, void *userdata) {
        struct engine *e = userdata;
        const char *rv;

        e->node_call = NULL;
        if (e->patching_phase && res->error == 0) {
                e->has_written_phase = true;
                e->written_phase = e->patch_phase;
        }
        e->patching_phase = false;
        if (e->stopping) {
                /* the answer a stop waited for: the Node's state is known, nothing follows */
                dtimer_stop(&e->stop_wait);
                return;
        }
        if (res->error == -ECANCELED)
                return;
        if (e->status_patch && res->error < 0) {
                e->status_patch = false;
                if (res->error == -EACCES || res->error == -EINVAL || res->error == -ENOENT)
                        return finish(
                                e, res->error,
                                "--node-conditions: patching nodes/%s/status failed: %s (drainer's role "
                                "needs patch on nodes/status)",
                                e->o.node, res->message ? res->message : strerror(-res->error));
                log_debug("patching nodes/%s/status failed: %s, retrying", e->o.node, strna(res->message));
                return retry_at(e, timesrc_now(e->ts) + 2 * USEC_PER_SEC);
        }
        e->status_patch = false;
        if (res->error == -EBUSY || res->error == -EEXIST) {
                /* 409: the Node changed under us; the informer brings the new version.
                 * Until it has, a patch built from the cache would be refused again:
                 * wait for it (reconcile), or CONFLICT_WAIT_USEC if the watch is slow. */
                log_debug("node %s changed concurrently, waiting for its new version", e->o.node);
                free(e->conflict_rv);
                e->conflict_rv = TAKE_PTR(e->patch_rv);
                e->conflict_until = timesrc_now(e->ts) + CONFLICT_WAIT_USEC;
                retry_at(e, e->conflict_until);
                return kick(e);
        }
        if (res->error < 0) {
                if (res->error == -EACCES || res->error == -EINVAL || res->error == -ENOENT)
                        return finish(e, res->error, "patching node %s failed: %s", e->o.node,
                                      res->message ? res->message : strerror(-res->error));
                /* The client already retried transient errors; try again a bit later. */
                log_debug("patching node %s failed: %s, retrying", e->o.node, strna(res->message));
                return retry_at(e, timesrc_now(e->ts) + 2 * USEC_PER_SEC);
        }
        rv = json_str(res->json, "metadata.resourceVersion");
        free(e->await_rv);
        e->await_rv = rv ? strdup(rv) : NULL;
        kick(e);
}

/* Sends one patch to the Node, or (status) its status subresource (takes ownership
 * of body): a merge patch of the Node, a strategic merge patch of its status (the
 * conditions list merges by type). */
static void patch_node_at(struct engine *e, bool status, char *body) {
        _cleanup_free_ char *path = NULL, *ename = kube_query_escape(e->o.node);
        const struct node_rec *n;
        int r;

        if (!body || !ename || asprintf(&path, "/api/v1/nodes/%s%s", ename, status ? "/status" : "") < 0 ||
            (!status && drain_scope_patch(e->scope, &body) < 0)) {
                free(body);
                return finish(e, -ENOMEM, "out of memory");
        }
        n = node_view_node(e->view);
        free(e->patch_rv);
        e->patch_rv = n && n->resource_version ? strdup(n->resource_version) : NULL;
        e->status_patch = status;
        e->patching_phase = false;
        r = kube_patch(e->client, path, status ? KUBE_PATCH_STRATEGIC : KUBE_PATCH_MERGE, body,
                       on_node_patched, e, &e->node_call);
        free(body);
        if (r < 0)
                return finish(e, r, "cannot patch node %s: %s", e->o.node, strerror(-r));
        e->changed = true;
        e->wrote = true;
        e->wrote_at = timesrc_now(e->ts);
}

static void patch_node(struct engine *e, char *body) {
        patch_node_at(e, false, body);
}

/* --node-conditions: the conditions follow the recorded phase before the phase's
 * first action (and once the drain is over); true when a patch went out. */
static bool sync_conditions(struct engine *e, const struct node_rec *n) {
        char *body = NULL;
        int r;

        /* The conditions say the node is being drained: a driver's drain is not that. */
        if (!e->o.node_conditions || e->scope)
                return false;
        r = drain_patch_conditions(n, e->st.has_phase, e->st.phase, timesrc_realtime(e->ts), &body);
        if (r < 0) {
                finish(e, r, "cannot build the node conditions patch: %s", strerror(-r));
                return true;
        }
        if (r == 0)
                return false;
        patch_node_at(e, true, body);
        return true;
}

static void patch_phase(struct engine *e, const struct node_rec *n, enum drain_phase p, const char *msg) {
        char *body = NULL;
        int r = drain_patch_phase(n, p, timesrc_realtime(e->ts), msg, &body);

        if (r < 0)
                return finish(e, r, "cannot build the node patch: %s", strerror(-r));
        patch_node(e, body);
        if (e->node_call) {
                e->patching_phase = true;
                e->patch_phase = p;
        }
}

/* ---- evictions ---- */

/* Evicts the pods of group g that need it; true once every pod of the group is
 * accepted for eviction (or already terminating). */
static bool evict_group(struct engine *e, enum evict_group g) {
        return evictor_evict(e->evictor, &e->plan, g);
}

static void trail(struct engine *e, enum engine_trail_kind kind, const char *ns, const char *name) {
        if (e->cb.on_trail)
                e->cb.on_trail(
                        e,
                        &(const struct engine_trail){
                                .kind = kind, .ns = ns, .name = name, .deleted = e->o.disable_eviction },
                        e->userdata);
}

static void on_evictor_answer(struct evictor *v, const struct evictor_answer *a, void *userdata) {
        struct engine *e = userdata;

        if (a->error == -EACCES)
                return finish(e, a->error, "evicting %s/%s is forbidden: %s", a->ns, a->name,
                              strna(a->reason));
        if (a->error == 0 && !a->gone && e->cb.on_trail) {
                char key[512];

                snprintf(key, sizeof(key), "%s/%s", a->ns, a->name);
                if (!hashmap_get(e->accepted, key) && hashmap_put(e->accepted, key, (void *)1, NULL) >= 0)
                        trail(e, ENGINE_TRAIL_EVICTING, a->ns, a->name);
        }
        kick(e);
}

static void on_evictor_due(struct evictor *v, void *userdata) {
        kick(userdata);
}

static size_t pods_left(const struct plan *p, bool with_drivers) {
        size_t n = 0;

        for (int g = 0; g < EVICT_GROUP_DRIVERS; g++)
                n += p->n_per_group[g];
        if (with_drivers)
                n += p->n_per_group[EVICT_GROUP_DRIVERS];
        return n;
}

/* Pods being deleted that already reached a terminal phase and that the drain does
 * not evict itself (left out by --pod-selector): pods the kubelet has not removed yet
 * (it deletes them right after). DESIGN.md waits until evicted pods are gone, as
 * kubectl drain does, and the driver must not go before they do. The finished pods
 * the drain evicts are counted in their group already. */
static size_t finished_deleting(const struct plan *p) {
        size_t n = 0;

        for (size_t i = 0; i < p->n_pods; i++)
                n += p->pods[i].cls == POD_CLASS_FINISHED && p->pods[i].group == EVICT_GROUP_NONE &&
                     p->pods[i].pod->deleting;
        return n;
}

/* Evicted pods deleted longer than --skip-wait-for-delete-timeout ago that the wait
 * no longer counts (never claim holders, plan_pod_wait_skipped). */
static size_t wait_skipped(struct engine *e) {
        int64_t now = timesrc_realtime(e->ts);
        size_t n = 0;

        if (!e->o.skip_wait_for_delete_usec)
                return 0;
        for (size_t i = 0; i < e->plan.n_pods; i++)
                n += e->plan.pods[i].group < EVICT_GROUP_DRIVERS &&
                     plan_pod_wait_skipped(&e->plan.pods[i], now, e->o.skip_wait_for_delete_usec);
        return n;
}

static size_t driver_pods(const struct plan *p, bool healthy_only) {
        size_t n = 0;

        for (size_t i = 0; i < p->n_pods; i++) {
                const struct pod_rec *pod = p->pods[i].pod;

                if (p->pods[i].cls != POD_CLASS_DRIVER)
                        continue;
                if (healthy_only && (pod->deleting || pod->phase != POD_RUNNING || !pod->ready))
                        continue;
                n++;
        }
        return n;
}

/* ---- health probes ---- */

static void on_probe_done(int error, enum health_status status, const char *message, void *userdata) {
        struct engine *e = userdata;
        struct probe_result *pr;

        e->probe = NULL;
        if (error == -ECANCELED) {
                e->probe_uid = mfree(e->probe_uid);
                return;
        }
        pr = calloc(1, sizeof(*pr));
        if (pr) {
                pr->error = error;
                pr->status = status;
                pr->at = timesrc_now(e->ts);
                if (hashmap_put(e->probes, e->probe_uid, pr, NULL) < 0)
                        free(pr);
        }
        if (error < 0 || status != HEALTH_SERVING)
                log_debug("health probe of driver pod uid %s: %s", e->probe_uid,
                          error < 0 ? (message ? message : strerror(-error))
                                    : health_status_to_string(status));
        e->probe_uid = mfree(e->probe_uid);
        kick(e);
}

/* Returns 1 when every driver pod of the node answered SERVING, 0 while a probe is
 * pending, or -EIO (the pod in *ret_bad) when one answered otherwise. Preflight
 * (!restoring) refuses on the first bad answer; restoring re-probes a bad answer
 * every HEALTH_RECHECK_USEC until it serves. */
static int drivers_probed(struct engine *e, bool restoring, const struct pod_rec **ret_bad) {
        uint64_t now = timesrc_now(e->ts);

        if (!e->o.driver_health || e->o.plan.ignore_driver_health)
                return 1;
        for (size_t i = 0; i < e->plan.n_pods; i++) {
                const struct pod_rec *pod = e->plan.pods[i].pod;
                struct probe_result *pr;

                if (e->plan.pods[i].cls != POD_CLASS_DRIVER || pod->deleting)
                        continue;
                *ret_bad = pod;
                pr = hashmap_get(e->probes, pod->uid);
                if (pr) {
                        if (pr->error == 0 && pr->status == HEALTH_SERVING)
                                continue;
                        if (!restoring)
                                return -EIO;
                        if (now - pr->at < HEALTH_RECHECK_USEC) {
                                retry_at(e, pr->at + HEALTH_RECHECK_USEC);
                                return 0;
                        }
                        free(hashmap_remove(e->probes, pod->uid));
                }
                if (e->probe)
                        return 0;
                if (e->o.driver_health->port > 0 && !pod->pod_ip)
                        return 0; /* no IP yet: the pod update will kick us */
                e->probe_uid = strdup(pod->uid);
                if (!e->probe_uid ||
                    health_probe_start(e->transport, e->o.driver_health, pod->pod_ip, HEALTH_TIMEOUT_USEC,
                                       on_probe_done, e, &e->probe) < 0) {
                        e->probe_uid = mfree(e->probe_uid);
                        return -EIO;
                }
                return 0;
        }
        return 1;
}

/* ---- the phases ---- */

static bool node_cordoned(const struct node_rec *n) {
        return n->unschedulable && node_rec_find_taint(n, DRAIN_TAINT_KEY, DRAIN_TAINT_EFFECT);
}

static void refuse(struct engine *e) {
        char msg[2048];
        size_t len = 0;

        len += snprintf(msg, sizeof(msg), "refused by preflight (%zu blocker%s, nothing was changed)",
                        e->plan.n_blockers, e->plan.n_blockers == 1 ? "" : "s");
        for (size_t i = 0; i < e->plan.n_blockers && len < sizeof(msg) - 1; i++)
                len += snprintf(msg + len, sizeof(msg) - len, "; %s", e->plan.blockers[i].message);
        finish(e, -EPERM, "%s", msg);
}

/* Whether drainer.io/message already reads msg (cut as drain_patch_message cuts). */
static bool message_is(const struct drain_state *st, const char *msg) {
        size_t l;

        if (!st->message)
                return false;
        l = strlen(st->message);
        return strncmp(st->message, msg, l) == 0 && (msg[l] == 0 || l + 4 >= DRAIN_MESSAGE_MAX);
}

/* The progress of a drain or restore in drainer.io/message (what `kubectl describe
 * node` shows, e.g. that evicted pods wait for a node that is not Ready): a message
 * that is not on the Node yet is written PROGRESS_WRITE_USEC after this run's start
 * or its last write of the Node at the earliest, and the last one always (the retry
 * timer comes back for it). Phase changes carry their own message. */
static void write_progress(struct engine *e, const struct node_rec *n) {
        uint64_t now = timesrc_now(e->ts), at;
        char *body = NULL;
        int r;

        if (!e->message || !e->st.has_phase || !drain_phase_changes_node(e->st.phase) ||
            message_is(&e->st, e->message))
                return;
        at = (e->wrote ? e->wrote_at : e->started_at) + PROGRESS_WRITE_USEC;
        if (now < at)
                return retry_at(e, at);
        r = drain_patch_message(n, e->message, &body);
        if (r < 0)
                return finish(e, r, "cannot build the node patch: %s", strerror(-r));
        patch_node(e, body);
}

/* A refusal after preflight, with the node in a phase of a drain: nothing more is
 * done, drainer.io/message says why (one patch of the message only), then finish()
 * posts the DrainerBlocked Event. A rerun that is allowed resumes from the phase. */
static void refuse_on_node(struct engine *e, const struct node_rec *n, const char *msg) {
        char *body = NULL;
        int r;

        if (message_is(&e->st, msg))
                return finish(e, -EPERM, "%s", msg);
        set_message(e, "%s", msg);
        r = drain_patch_message(n, msg, &body);
        if (r < 0)
                return finish(e, r, "cannot build the node patch: %s", strerror(-r));
        patch_node(e, body);
}

/* Blockers that hold at every eviction, found in a phase after preflight (written by
 * hand, or a pod that came later): the run stops before evicting anything more. */
static void refuse_blockers(struct engine *e, const struct node_rec *n, enum drain_phase ph) {
        size_t nb = plan_eviction_blockers(&e->plan), len = 0;
        char msg[DRAIN_MESSAGE_MAX];

        len += snprintf(msg, sizeof(msg),
                        "refused in phase %s (%zu blocker%s; evicting nothing more, the node stays in this "
                        "phase: rerun with the right flags to resume, or uncordon it)",
                        drain_phase_to_string(ph), nb, nb == 1 ? "" : "s");
        for (size_t i = 0; i < e->plan.n_blockers && len < sizeof(msg) - 1; i++)
                if (blocker_kind_holds_at_every_eviction(e->plan.blockers[i].kind))
                        len += snprintf(msg + len, sizeof(msg) - len, "; %s", e->plan.blockers[i].message);
        refuse_on_node(e, n, msg);
}

/* ---- recorded driver stops and this process's configuration ----
 *
 * drainer.io/driver-stop says what a drain did to each driver, so that a later run
 * can undo it; anyone who may patch the Node can write it too. So it never chooses
 * what drainer does: a recorded stop is undone only if this process's configuration
 * (--driver-stop, --config) allows it, one rule per strategy, here and nowhere else. */

/* Whether a record says what this configuration does to stop the drivers (the same
 * strategy and key or unit): what a drain may go on from. */
static bool stop_is_configured(const struct plan_options *o, const struct driver_stop_record *r) {
        return driver_stop_is_configured(o->driver_stop, o->driver_stop_arg, r);
}

/* Refuses (nothing started or changed) because of record r: stop = the drain would
 * stop the drivers differently from what is recorded, else the undo is not allowed. */
static void refuse_record(struct engine *e, const struct node_rec *n, const struct driver_stop_record *r,
                          bool stop) {
        _cleanup_free_ char *flag = NULL, *have = NULL, *msg = NULL;
        const char *arg = e->o.plan.driver_stop_arg;
        int k;

        if (asprintf(&flag, "--driver-stop %s%s%s", r->ops->name, r->arg ? ":" : "", strempty(r->arg)) < 0 ||
            asprintf(&have, "--driver-stop %s%s%s", e->stop->ops->name, arg ? ":" : "", strempty(arg)) < 0)
                return finish(e, -ENOMEM, "out of memory");
        if (stop)
                k = asprintf(&msg,
                             "refused: %s records \"%s\", but this run's configuration says %s; nothing was "
                             "stopped. To go on as recorded, run again with %s",
                             DRAINER_ANN_DRIVER_STOP, flag + strlen("--driver-stop "), have, flag);
        else
                k = asprintf(&msg,
                             "refused: %s records \"%s\", which this run's configuration (%s) does not "
                             "allow to undo; nothing was started or changed. If that is what the drain did, "
                             "run again with %s",
                             DRAINER_ANN_DRIVER_STOP, flag + strlen("--driver-stop "), have, flag);
        if (k < 0)
                return finish(e, -ENOMEM, "out of memory");
        if (!e->needs_flag)
                e->needs_flag = TAKE_PTR(flag);
        refuse_on_node(e, n, msg);
}

/* The first recorded stop this configuration may not undo, or NULL. */
static const struct driver_stop_record *undo_refused(const struct engine *e) {
        for (size_t s = 0; s < e->st.n_stops; s++) {
                const struct driver_stop_record *r = &e->st.stops[s];

                if (!r->ops->undo_allowed(e->stop->ops, e->o.plan.driver_stop_arg, r))
                        return r;
        }
        return NULL;
}

/* The first recorded stop that is not this configuration's own, or NULL. */
static const struct driver_stop_record *stop_not_configured(const struct engine *e) {
        for (size_t s = 0; s < e->st.n_stops; s++)
                if (!stop_is_configured(&e->o.plan, &e->st.stops[s]))
                        return &e->st.stops[s];
        return NULL;
}

/* Records how the drivers are stopped; with_phase: in the same write as the move to
 * stop-drivers (from wait-released: the two follow each other at once). */
static void record_driver_stop(struct engine *e, const struct node_rec *n, bool with_phase) {
        /* Strings borrowed: rec is not freed. */
        struct driver_stop_record rec = { .ops = e->stop->ops, .arg = e->stop->arg };
        const char *names[DRIVER_STOP_MAX_DRIVERS];
        _cleanup_free_ char *ds = NULL;
        char *body = NULL;
        int r;

        if (rec.ops->fill_record)
                rec.ops->fill_record(rec.arg, n, &rec);
        for (size_t i = 0; i < e->plan.n_pods; i++) {
                const struct plan_pod *pp = &e->plan.pods[i];

                if (pp->cls == POD_CLASS_DRIVER && pp->pod->controller &&
                    streq_ptr(pp->pod->controller->kind, "DaemonSet")) {
                        if (asprintf(&ds, "%s/%s", pp->pod->ns, pp->pod->controller->name) < 0)
                                return finish(e, -ENOMEM, "out of memory");
                        break;
                }
        }
        rec.daemonset = ds;
        {
                /* The DRA driver names published for this node: restore waits for them again. */
                struct node_input in;

                if (node_view_collect(e->view, &in) < 0)
                        return finish(e, -ENOMEM, "out of memory");
                size_t k =
                        plan_driver_names(in.slices, in.n_slices, n->name, names, DRIVER_STOP_MAX_DRIVERS);

                /* --driver: only the scope's drivers are stopped, and waited for again */
                for (size_t j = 0; j < k; j++) {
                        bool in_scope = e->o.plan.n_drivers == 0;

                        for (size_t d = 0; d < e->o.plan.n_drivers && !in_scope; d++)
                                in_scope = streq(names[j], e->o.plan.drivers[d]);
                        if (in_scope)
                                rec.drivers[rec.n_drivers++] = (char *)names[j];
                }
                r = with_phase ? drain_patch_driver_stop_phase(n, &rec, 1, DRAIN_PHASE_STOP_DRIVERS,
                                                               timesrc_realtime(e->ts),
                                                               "stopping the DRA drivers", &body)
                               : drain_patch_driver_stop(n, &rec, 1, &body);
                node_input_done(&in);
        }
        if (r < 0)
                return finish(e, r, "cannot build the node patch: %s", strerror(-r));
        patch_node(e, body);
}

/* What the strategy's ops are shown of the node. */
static struct driver_stop_view driver_view(struct engine *e, const struct node_rec *n) {
        return (struct driver_stop_view){
                .node = n,
                .driver_pods = driver_pods(&e->plan, false),
                .driver_pods_ready = driver_pods(&e->plan, true),
        };
}

/* A strategy's SET_LABEL (value NULL: remove the label). */
static void patch_label(struct engine *e, const struct node_rec *n, const char *key, const char *value) {
        char *body = NULL;
        int r = drain_patch_label(n, key, value, &body);

        if (r < 0)
                return finish(e, r, "cannot build the node patch: %s", strerror(-r));
        patch_node(e, body);
}

/* --out-of-service, during a drain: once the node has been not Ready for
 * --out-of-service-after (from its Ready condition's lastTransitionTime: what the pod
 * GC itself reads, on the Node drainer already watches), apply upstream's
 * out-of-service taint and record that drainer did, in one write, with a Warning
 * Event. Never while the node is Ready, never twice, never over a taint someone else
 * applied. Returns whether a patch went out. Before the time, arms the retry timer. */
static bool apply_out_of_service(struct engine *e, const struct node_rec *n) {
        int64_t now = timesrc_realtime(e->ts), due = out_of_service_due(e, n);
        _cleanup_free_ char *m = NULL;
        char since[64] = "?";
        char *body = NULL;
        int r;

        if (n->ready || due <= 0 || out_of_service_tainted(n))
                return false;
        if (now < due) {
                retry_at(e, timesrc_now(e->ts) + (uint64_t)(due - now));
                return false;
        }
        (void)timesrc_format_rfc3339(n->not_ready_since_usec, since, sizeof(since));
        if (asprintf(&m,
                     "--out-of-service: node %s is not Ready since %s (longer than --out-of-service-after "
                     "%.0f s): applied the taint " OUT_OF_SERVICE_TAINT_KEY "=" OUT_OF_SERVICE_TAINT_VALUE
                     ":" OUT_OF_SERVICE_TAINT_EFFECT ": the control plane now deletes its pods and "
                     "releases their ResourceClaims without the kubelet's unprepare (only safe if the "
                     "machine is off); drainer uncordon removes the taint once the node is Ready again",
                     n->name, since, (double)e->o.out_of_service_after_usec / USEC_PER_SEC) < 0) {
                finish(e, -ENOMEM, "out of memory");
                return true;
        }
        r = drain_patch_out_of_service(n, now, m, &body);
        if (r < 0) {
                finish(e, r, "cannot build the node patch: %s", strerror(-r));
                return true;
        }
        set_message(e, "%s", m);
        if (!e->said_out_of_service) /* once, also when a 409 makes the patch go again */
                notice(e, n, ENGINE_NOTICE_OUT_OF_SERVICE, m);
        e->said_out_of_service = true;
        patch_node(e, body);
        return true;
}

/* A drain's node going not Ready, and Ready again: an Event each (its message on the
 * Node follows with the progress). "Ready again" also for a run that finds the node
 * Ready while drainer.io/message still says it was not (the run that saw it go was
 * interrupted). */
static void note_readiness(struct engine *e, const struct node_rec *n, enum drain_phase ph) {
        char note[DRAIN_MESSAGE_MAX];

        if (!drain_phase_in_stage(ph, DRAIN_STAGE_TAKING))
                return;
        if (!n->ready && !e->said_not_ready) {
                _cleanup_free_ char *m = NULL;

                e->said_not_ready = true;
                e->said_ready = false;
                not_ready_note(e, n, note, sizeof(note));
                if (asprintf(&m,
                             "%s; the drain keeps waiting (its --timeout applies) and goes on once the "
                             "kubelet is back%s",
                             note + 2 /* "; " */,
                             e->o.out_of_service ? "" : " (for a machine that is off: --out-of-service)") <
                    0)
                        return;
                notice(e, n, ENGINE_NOTICE_NOT_READY, m);
        } else if (n->ready && !e->said_ready &&
                   (e->said_not_ready || (e->st.message && strstr(e->st.message, NOT_READY_NOTE)))) {
                e->said_not_ready = false;
                e->said_ready = true;
                notice(e, n, ENGINE_NOTICE_READY,
                       "the node is Ready again: its kubelet finishes the evicted pods and releases "
                       "their ResourceClaims");
        }
}

/* ---- driver-scoped drains: DeviceTaintRules (--driver) ---- */

#define MAX_RULE_POOLS 8

/* Whether this drain keeps new claims off the drivers' devices with DeviceTaintRules
 * (else by cordoning the node: a node drain, or the fallback where the API server
 * serves none). A recorded drain goes on the way it started: only a cordon records
 * was-unschedulable. */
static bool uses_rules(const struct engine *e) {
        if (!e->scope)
                return false;
        if (e->has_st && e->st.has_phase && drain_phase_changes_node(e->st.phase))
                return !e->st.has_was_unschedulable;
        return e->o.plan.isolation == PLAN_ISOLATE_TAINT_RULE;
}

/* New work is kept off: the node cordoned and tainted, or (rules) the rules were made
 * in phase cordon, which a drain leaves only once every one was answered. */
static bool isolated(const struct engine *e, const struct node_rec *n) {
        return uses_rules(e) || node_cordoned(n);
}

static void on_rules_discovered(int error, const struct taint_rule_api *api, void *userdata) {
        struct engine *e = userdata;

        e->disc = NULL;
        if (error == -ECANCELED)
                return;
        if (error < 0)
                return finish(e, error, "cannot ask the API server whether it serves DeviceTaintRules: %s",
                              strerror(-error));
        e->rule_api = *api;
        e->o.plan.isolation = api->served ? PLAN_ISOLATE_TAINT_RULE : PLAN_ISOLATE_CORDON_FALLBACK;
        e->o.plan.taint_rule_api = api->served ? e->rule_api.api_version : NULL;
        e->summary.isolation = e->o.plan.isolation;
        e->disc_done = true;
        kick(e);
}

static void rule_forget(struct engine *e) {
        cJSON_Delete(e->rule_obj);
        e->rule_obj = NULL;
        e->rule_read = e->rule_conflict = false;
}

/* A rule request failed: fatal (permissions, a bad request), or retried in 2 s. */
static void rule_failed(struct engine *e, const struct kube_result *res) {
        if (res->error == -EACCES || res->error == -EINVAL)
                return finish(e, res->error, "DeviceTaintRule: %s",
                              res->message ? res->message : strerror(-res->error));
        log_debug("DeviceTaintRule request failed: %s, retrying", strna(res->message));
        retry_at(e, timesrc_now(e->ts) + 2 * USEC_PER_SEC);
}

static void on_rule_created(const struct kube_result *res, void *userdata) {
        struct engine *e = userdata;

        e->rule_call = NULL;
        if (res->error == -ECANCELED)
                return;
        /* 409: a rule of that name is there (an earlier run of this drain made it, or
         * someone else did): it counts only once read and found to be ours. */
        if (res->error == -EEXIST || res->error == -EBUSY)
                e->rule_conflict = true;
        else if (res->error < 0)
                return rule_failed(e, res);
        else
                e->rules_done++;
        e->changed = true;
        kick(e);
}

static void on_rule_read(const struct kube_result *res, void *userdata) {
        struct engine *e = userdata;

        e->rule_call = NULL;
        if (res->error == -ECANCELED)
                return;
        if (res->error < 0 && res->error != -ENOENT)
                return rule_failed(e, res);
        cJSON_Delete(e->rule_obj);
        e->rule_obj = res->error == 0 && res->json ? cJSON_Duplicate(res->json, true) : NULL;
        if (res->error == 0 && !e->rule_obj)
                return finish(e, -ENOMEM, "out of memory");
        e->rule_read = true;
        kick(e);
}

static void on_rule_deleted(const struct kube_result *res, void *userdata) {
        struct engine *e = userdata;

        e->rule_call = NULL;
        if (res->error == -ECANCELED)
                return;
        /* 409: the preconditions failed (another object of that name, or the rule changed
         * since it was read): read it again and judge again. 404: gone already. */
        if (res->error == -EEXIST || res->error == -EBUSY) {
                rule_forget(e);
                return kick(e);
        }
        if (res->error < 0 && res->error != -ENOENT)
                return rule_failed(e, res);
        rule_forget(e);
        e->changed = true;
        e->rules_done++;
        kick(e);
}

static int read_rule(struct engine *e, const char *name, size_t len) {
        _cleanup_free_ char *path = NULL;

        if (asprintf(&path, "%s/devicetaintrules/%.*s", e->rule_api.prefix, (int)len, name) < 0)
                return -ENOMEM;
        return kube_get(e->client, path, on_rule_read, e, &e->rule_call);
}

/* The pools of driver on the node (borrowed from the view's slices). */
static size_t node_pools(struct engine *e, const char *node, const char *driver, struct node_input *in,
                         const char **pools, size_t max) {
        if (node_view_collect(e->view, in) < 0)
                return 0;
        return taint_rule_pools(in->slices, in->n_slices, node, driver, pools, max);
}

/* The rules of the scope, in order: for each driver, one per pool of its ResourceSlices
 * on the node. Calls f for each (strings valid during the call); stops when f returns
 * non-zero and returns that, else 0; -ENOMEM. */
static int foreach_rule(struct engine *e, const struct node_rec *n,
                        int (*f)(struct engine *e, const char *name, const char *driver, const char *pool,
                                 void *userdata),
                        void *userdata) {
        struct node_input in;
        int r = 0;

        if (node_view_collect(e->view, &in) < 0)
                return -ENOMEM;
        for (size_t d = 0; d < e->o.plan.n_drivers && r == 0; d++) {
                const char *pools[MAX_RULE_POOLS];
                size_t np = taint_rule_pools(in.slices, in.n_slices, n->name, e->o.plan.drivers[d], pools,
                                             MAX_RULE_POOLS);

                for (size_t i = 0; i < np && r == 0; i++) {
                        _cleanup_free_ char *name = NULL;

                        r = taint_rule_name(n->name, e->o.plan.drivers[d], i, &name);
                        if (r < 0)
                                break;
                        r = f(e, name, e->o.plan.drivers[d], pools[i], userdata);
                }
        }
        node_input_done(&in);
        return r;
}

static int add_rule_name(struct engine *e, const char *name, const char *driver, const char *pool,
                         void *userdata) {
        FILE *f = userdata;

        fprintf(f, "%s%s", ftell(f) > 0 ? "," : "", name);
        return 0;
}

/* drainer.io/taint-rules of this drain, comma-joined (malloc'd; "" for none). */
static int rule_names(struct engine *e, const struct node_rec *n, char **ret) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        int r;

        if (!f)
                return -ENOMEM;
        r = foreach_rule(e, n, add_rule_name, f);
        if ((fclose(f) != 0 || r < 0)) {
                free(buf);
                return r < 0 ? r : -ENOMEM;
        }
        *ret = buf;
        return 0;
}

struct rule_at {
        size_t i, want;
        const struct node_rec *n;
};

/* Whether name is in the comma-joined list. */
static bool listed(const char *list, const char *name) {
        size_t l = strlen(name);

        for (const char *p = list; p && *p;) {
                size_t k = strcspn(p, ",");

                if (k == l && strncmp(p, name, l) == 0)
                        return true;
                p += k;
                if (*p == ',')
                        p++;
        }
        return false;
}

static int create_rule(struct engine *e, const char *name, const char *driver, const char *pool,
                       void *userdata) {
        struct rule_at *at = userdata;
        _cleanup_free_ char *body = NULL, *path = NULL;
        char why[256];
        int r;

        if (at->i++ < at->want)
                return 0;
        /* Recorded before it is created (a drain an older drainer recorded under other
         * names, or pools that changed since): the uncordon deletes what the record names. */
        if (!listed(e->st.taint_rules, name)) {
                char *patch = NULL;

                if (asprintf(&body, "%s%s%s", e->st.taint_rules ? e->st.taint_rules : "",
                             e->st.taint_rules && *e->st.taint_rules ? "," : "", name) < 0) {
                        body = NULL;
                        return -ENOMEM;
                }
                r = drain_patch_taint_rules(at->n, body, NULL, &patch);
                if (r < 0)
                        return r;
                patch_node(e, patch);
                return 1;
        }
        if (e->rule_conflict && e->rule_read) {
                const char *pools[1] = { pool };

                /* What holds the name must be exactly what this drain would have made:
                 * else nothing keeps new claims off the driver's devices. */
                if (!e->rule_obj) { /* gone since: create it again */
                        rule_forget(e);
                } else if (taint_rule_check(e->rule_obj, name, e->o.node, driver, pools, 1, why,
                                            sizeof(why)) < 0) {
                        finish(e, -EEXIST,
                               "DeviceTaintRule %s already exists and is not drainer's rule for driver %s "
                               "of node %s (%s): nothing keeps new claims off the driver's devices, so the "
                               "drain stops here; find out who made it, delete it, then run the drain again "
                               "(or drainer uncordon %s --driver %s)",
                               name, driver, e->o.node, why, e->o.node, driver);
                        return -EEXIST;
                } else {
                        rule_forget(e);
                        e->rules_done++;
                        at->want++;
                        return 0; /* on to the next one */
                }
        }
        if (e->rule_conflict) {
                r = read_rule(e, name, strlen(name));
                return r < 0 ? r : 1;
        }
        r = taint_rule_body(&e->rule_api, name, e->o.node, driver, pool, &body);
        if (r < 0)
                return r;
        if (asprintf(&path, "%s/devicetaintrules", e->rule_api.prefix) < 0)
                return -ENOMEM;
        r = kube_create(e->client, path, body, on_rule_created, e, &e->rule_call);
        return r < 0 ? r : 1;
}

/* Creates the scope's rules one after the other; true once each was answered. */
static bool create_rules(struct engine *e, const struct node_rec *n) {
        struct rule_at at = { .want = e->rules_done, .n = n };
        int r;

        if (e->rules_ok)
                return true;
        if (e->rule_call || e->node_call)
                return false;
        r = foreach_rule(e, n, create_rule, &at);
        if (r == -EEXIST && e->finished)
                return false;
        if (r < 0) {
                finish(e, r, "cannot create the DeviceTaintRule: %s", strerror(-r));
                return false;
        }
        if (r > 0) {
                set_message(e, "creating DeviceTaintRule %zu of the drivers' pools", e->rules_done + 1);
                return false;
        }
        e->rules_ok = true;
        return true;
}

/* The rule read for the name drainer.io/taint-rules names is drainer's rule
 * for this node and one of the scope's drivers (its name, annotation, label, selector of
 * the driver and a pool of the driver's ResourceSlices on the node, taint): 0, or
 * -EPERM with why. */
static int judge_rule(struct engine *e, const char *name, char *why, size_t why_size) {
        snprintf(why, why_size, "its name is not drainer's for node %s and driver %s", e->o.node,
                 strna(e->scope));
        for (size_t d = 0; d < e->o.plan.n_drivers; d++) {
                const char *driver = e->o.plan.drivers[d], *pools[MAX_RULE_POOLS];
                struct node_input in = {};
                size_t np;
                int r;

                if (taint_rule_naming(name, e->o.node, driver) == TAINT_RULE_NAME_FOREIGN)
                        continue;
                np = node_pools(e, e->o.node, driver, &in, pools, MAX_RULE_POOLS);
                r = taint_rule_check(e->rule_obj, name, e->o.node, driver, pools, np, why, why_size);
                node_input_done(&in);
                return r;
        }
        return -EPERM;
}

/* A rule the Node names that is not drainer's: left alone, said (a warning and a
 * notice naming it), and kept for the final message; the record goes with the rest. */
static void leave_rule(struct engine *e, const struct node_rec *n, const char *name, const char *why) {
        _cleanup_free_ char *m = NULL;
        char *left = NULL;

        if (asprintf(&m,
                     "DeviceTaintRule %s, named in " DRAINER_ANN_TAINT_RULES ".%s of node %s, is not "
                     "drainer's rule for this node and driver (%s): left alone, not deleted",
                     name, strna(e->scope), e->o.node, why) < 0) {
                m = NULL;
                return;
        }
        log_warning("%s", m);
        notice(e, n, ENGINE_NOTICE_FOREIGN_RULE, m);
        if (asprintf(&left, "%s%s%s (%s)", e->rules_left ? e->rules_left : "", e->rules_left ? "; " : "",
                     name, why) >= 0) {
                free(e->rules_left);
                e->rules_left = left;
        }
}

/* The i-th name of a comma-joined list (len bytes), or NULL. */
static const char *nth_name(const char *list, size_t i, size_t *ret_len) {
        for (const char *p = list; p && *p;) {
                size_t l = strcspn(p, ",");

                if (i-- == 0) {
                        *ret_len = l;
                        return p;
                }
                p += l;
                if (*p == ',')
                        p++;
        }
        return NULL;
}

/* DeleteOptions with preconditions on uid and resourceVersion (malloc'd), or NULL. */
static char *delete_preconditions(const char *uid, const char *rv) {
        cJSON *o = cJSON_CreateObject(), *pre;
        char *s = NULL;

        if (o && cJSON_AddStringToObject(o, "kind", "DeleteOptions") &&
            cJSON_AddStringToObject(o, "apiVersion", "v1") &&
            (pre = cJSON_AddObjectToObject(o, "preconditions")) &&
            cJSON_AddStringToObject(pre, "uid", uid) &&
            (!rv || cJSON_AddStringToObject(pre, "resourceVersion", rv)))
                s = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        return s;
}

/* One step for the rule the record names at rules_done: read it, judge it, delete it.
 * 0: done with it (gone, deleted or left alone); 1: a request is out; < 0: finished. */
static int delete_rule(struct engine *e, const struct node_rec *n, const char *name) {
        _cleanup_free_ char *path = NULL, *opts = NULL;
        char why[256];
        int r;

        if (!e->rule_read) {
                r = read_rule(e, name, strlen(name));
                if (r < 0) {
                        finish(e, r, "cannot read DeviceTaintRule %s: %s", name, strerror(-r));
                        return r;
                }
                set_message(e, "reading DeviceTaintRule %s", name);
                return 1;
        }
        if (!e->rule_obj) /* 404: gone already */
                return 0;
        if (judge_rule(e, name, why, sizeof(why)) < 0) {
                leave_rule(e, n, name, why);
                return 0;
        }
        /* The uid and resourceVersion read are the preconditions: a rule deleted and made
         * again by someone else in between, or changed since, is read and judged again. */
        opts = delete_preconditions(json_str(e->rule_obj, "metadata.uid"),
                                    json_str(e->rule_obj, "metadata.resourceVersion"));
        if (!opts || asprintf(&path, "%s/devicetaintrules/%s", e->rule_api.prefix, name) < 0) {
                finish(e, -ENOMEM, "out of memory");
                return -ENOMEM;
        }
        r = kube_delete(e->client, path, opts, on_rule_deleted, e, &e->rule_call);
        if (r < 0) {
                finish(e, r, "cannot delete DeviceTaintRule %s: %s", name, strerror(-r));
                return r;
        }
        set_message(e, "deleting DeviceTaintRule %s", name);
        return 1;
}

/* Deletes the rules drainer.io/taint-rules names, one after the other, each only once
 * read back from the API server and found to be drainer's rule for this node and driver
 * (judge_rule), with its uid and resourceVersion as preconditions. The annotation is no
 * authority (anyone who may patch the Node writes it): a rule that is not drainer's is
 * left alone and said, and the record goes with the rest. True once each is gone or
 * left. */
static bool delete_rules(struct engine *e, const struct node_rec *n) {
        const char *list = e->st.taint_rules, *p;
        size_t l;

        if (e->rules_ok || !list || !*list)
                return true;
        if (e->rule_call)
                return false;
        if (!e->rule_api.served) {
                finish(e, -EOPNOTSUPP,
                       "the API server serves no DeviceTaintRule (resource.k8s.io v1 or v1beta2) any more: "
                       "cannot delete %s; delete them by hand once it does, then run the uncordon again",
                       list);
                return false;
        }
        while ((p = nth_name(list, e->rules_done, &l))) {
                _cleanup_free_ char *name = strndup(p, l);
                int r;

                if (!name) {
                        finish(e, -ENOMEM, "out of memory");
                        return false;
                }
                r = delete_rule(e, n, name);
                if (r != 0)
                        return false;
                rule_forget(e);
                e->rules_done++;
        }
        e->rules_ok = true;
        return true;
}

/* The start of a driver-scoped drain with rules: the record of the rules and state
 * cordon in one write (the rules follow in phase cordon). */
static void isolate(struct engine *e, const struct node_rec *n) {
        _cleanup_free_ char *names = NULL;
        char *body = NULL;
        int r;

        r = rule_names(e, n, &names);
        if (r < 0)
                return finish(e, r, "out of memory");
        r = drain_patch_isolate(n, timesrc_realtime(e->ts), names,
                                "keeping new claims off the driver's devices (DeviceTaintRule)", &body);
        if (r < 0)
                return finish(e, r, "cannot build the node patch: %s", strerror(-r));
        e->rules_ok = false;
        e->rules_done = 0;
        rule_forget(e);
        patch_node(e, body);
}

/* Another drain of this node that excludes this one (DESIGN.md: a node drain and a
 * driver drain of the same node exclude each other): refused in preflight. */
static bool refuse_conflict(struct engine *e) {
        const struct node_rec *real = node_view_node(e->view);
        const char *other = real ? drain_scope_conflict(real, e->scope) : NULL;

        if (!other)
                return false;
        if (e->scope)
                finish(e, -EPERM,
                       "refused: node %s is being drained (" DRAINER_ANN_STATE
                       "=%s): a drain of DRA driver %s "
                       "waits until that drain is undone (drainer uncordon %s); nothing was changed",
                       e->o.node, strna(kv_get(real->annotations, real->n_annotations, DRAINER_ANN_STATE)),
                       e->scope, e->o.node);
        else
                finish(e, -EPERM,
                       "refused: DRA driver %s of node %s is out of service (" DRAINER_ANN_STATE
                       ".%s): a node "
                       "drain waits until it is back (drainer uncordon %s --driver %s); nothing was changed",
                       other, e->o.node, other, e->o.node, other);
        return true;
}

static void drive_drain(struct engine *e, const struct node_rec *n) {
        const struct drain_state *st = &e->st;
        enum drain_phase ph = st->has_phase ? st->phase : DRAIN_PHASE_PREFLIGHT;
        const struct driver_stop_record *rec;
        const struct pod_rec *bad = NULL;
        char *body = NULL;
        int r;

        /* The eviction rules hold at every eviction of every phase, whatever drainer.io/state
         * says: a phase written by hand must not skip preflight's rules, nor may a pod that
         * came later. (A deleting pod raises none: nothing more is sent for it.) */
        if (drain_phase_in_stage(ph, DRAIN_STAGE_TAKING) && plan_eviction_blockers(&e->plan) > 0)
                return refuse_blockers(e, n, ph);
        /* Drivers are stopped as configured, and that is what the record must say. */
        if ((ph == DRAIN_PHASE_WAIT_RELEASED || ph == DRAIN_PHASE_STOP_DRIVERS) && !e->o.skip_driver_stop &&
            (rec = stop_not_configured(e)))
                return refuse_record(e, n, rec, true);
        note_readiness(e, n, ph);

        switch (ph) {
        case DRAIN_PHASE_WAITING: /* serve got a slot: nothing was changed yet */
        case DRAIN_PHASE_PREFLIGHT:
                if (refuse_conflict(e))
                        return;
                if (e->plan.n_blockers > 0)
                        return refuse(e);
                r = drivers_probed(e, false, &bad);
                if (r == 0) {
                        set_message(e, "preflight: probing the DRA driver's health");
                        return;
                }
                if (r < 0) {
                        char m[512];

                        snprintf(m, sizeof(m),
                                 "DRA driver pod %s/%s does not answer SERVING on its health endpoint "
                                 "(use --ignore-driver-health to override)",
                                 bad->ns, bad->name);
                        plan_add_blocker(&e->plan, BLOCKER_DRIVER_UNHEALTHY, bad, m);
                        return refuse(e);
                }
                /* The strategy's own view of the driver's health (systemd: the unit is active). */
                if (e->stop->ops->preflight && !e->o.plan.ignore_driver_health) {
                        struct driver_stop_action a = {};

                        r = e->stop->ops->preflight(e->stop, &a);
                        if (r == 0) {
                                set_message(e, "%s", a.message);
                                return;
                        }
                        if (r == -EIO) {
                                plan_add_blocker(&e->plan, BLOCKER_DRIVER_UNHEALTHY, NULL, a.message);
                                return refuse(e);
                        }
                        if (r < 0)
                                return finish(e, r, "%s", a.message);
                }
                if (uses_rules(e))
                        return isolate(e, n);
                if (e->scope)
                        set_message(
                                e,
                                "the API server serves no DeviceTaintRule (resource.k8s.io v1 or v1beta2): "
                                "cordoning node %s instead (--driver %s)",
                                n->name, e->scope);
                else
                        set_message(e, "cordoning");
                r = drain_patch_cordon(n, timesrc_realtime(e->ts), &body);
                if (r < 0)
                        return finish(e, r, "cannot build the node patch: %s", strerror(-r));
                return patch_node(e, body);

        case DRAIN_PHASE_CORDON:
                if (uses_rules(e)) {
                        if (!create_rules(e, n))
                                return;
                        return patch_phase(e, n, DRAIN_PHASE_EVICT_CLAIM_HOLDERS,
                                           "DeviceTaintRules in place; evicting the pods that hold "
                                           "ResourceClaims of the driver");
                }
                if (!node_cordoned(n)) {
                        r = drain_patch_cordon(n, timesrc_realtime(e->ts), &body);
                        if (r < 0)
                                return finish(e, r, "cannot build the node patch: %s", strerror(-r));
                        return patch_node(e, body);
                }
                return patch_phase(e, n, DRAIN_PHASE_EVICT_CLAIM_HOLDERS,
                                   "evicting the pods that hold ResourceClaims");

        case DRAIN_PHASE_RESTORE_DRIVERS:
        case DRAIN_PHASE_UNCORDON:
                /* Asked to drain a node that was being restored: cordon again (idempotent). */
                if (uses_rules(e))
                        return isolate(e, n);
                r = drain_patch_cordon(n, timesrc_realtime(e->ts), &body);
                if (r < 0)
                        return finish(e, r, "cannot build the node patch: %s", strerror(-r));
                return patch_node(e, body);

        case DRAIN_PHASE_DRAINED:
                /* drainer.io/state=drained is a claim, not a fact (it may be written by hand):
                 * a node with pods to evict or claims on it, not cordoned, or with a driver pod
                 * when the strategy removes them, is drained again from the evictions on. */
                if (!isolated(e, n) ||
                    pods_left(&e->plan, false) + finished_deleting(&e->plan) - wait_skipped(e) > 0 ||
                    e->plan.n_claims_blocking > 0 ||
                    (!e->o.skip_driver_stop && e->stop->ops->removes_driver_pods &&
                     driver_pods(&e->plan, false) > 0)) {
                        if (!isolated(e, n)) {
                                r = drain_patch_cordon(n, timesrc_realtime(e->ts), &body);
                                if (r < 0)
                                        return finish(e, r, "cannot build the node patch: %s", strerror(-r));
                                return patch_node(e, body);
                        }
                        return patch_phase(
                                e, n, DRAIN_PHASE_EVICT_CLAIM_HOLDERS,
                                "recorded as drained, but pods, ResourceClaims or DRA drivers are on "
                                "the node: draining it again");
                }
                if (e->scope)
                        return finish(e, 0, "DRA driver %s of node %s is out of service%s", e->scope,
                                      n->name,
                                      e->o.skip_driver_stop ? " (left running: --skip-driver-stop)"
                                                            : ": its claims released, the driver stopped");
                return finish(e, 0, "node %s is drained%s", n->name,
                              e->o.skip_driver_stop ? " (drivers left running: --skip-driver-stop)"
                                                    : " and its DRA drivers are stopped");
        default:
                break;
        }

        /* The drain taint must stay for the whole drain: someone may have removed it. */
        if (!isolated(e, n)) {
                r = drain_patch_cordon(n, timesrc_realtime(e->ts), &body);
                if (r < 0)
                        return finish(e, r, "cannot build the node patch: %s", strerror(-r));
                return patch_node(e, body);
        }

        /* A node not Ready long enough, with --out-of-service: the taint first (the
         * evictions of a dead node's pods would wait on budgets its pods no longer count
         * toward). Only while something is left on the node. */
        size_t left = pods_left(&e->plan, false) + finished_deleting(&e->plan) - wait_skipped(e);
        bool released = left == 0 && e->plan.n_claims_blocking == 0;
        char nrnote[DRAIN_MESSAGE_MAX];

        if (!released && e->o.out_of_service && apply_out_of_service(e, n))
                return;
        not_ready_note(e, n, nrnote, sizeof(nrnote));

        /* Evictions: claim holders first; critical ones after the others are accepted;
         * the rest once every claim holder is accepted. New pods are evicted too. */
        bool ch = evict_group(e, EVICT_GROUP_CLAIM_HOLDERS);
        bool chc = ch && evict_group(e, EVICT_GROUP_CLAIM_HOLDERS_CRITICAL);
        bool rest = false;

        if (drain_phase_evicts_rest(ph) && chc) {
                rest = evict_group(e, EVICT_GROUP_REST);
                rest = rest && evict_group(e, EVICT_GROUP_REST_CRITICAL);
        }

        char nsnote[DRAIN_MESSAGE_MAX];

        ns_terminating_note(e, nsnote, sizeof(nsnote));
        switch (ph) {
        case DRAIN_PHASE_EVICT_CLAIM_HOLDERS:
                set_message(e, "evicting claim holders: %zu left%s%s",
                            e->plan.n_per_group[EVICT_GROUP_CLAIM_HOLDERS] +
                                    e->plan.n_per_group[EVICT_GROUP_CLAIM_HOLDERS_CRITICAL],
                            nrnote, nsnote);
                if (chc)
                        return patch_phase(e, n, DRAIN_PHASE_EVICT_REST,
                                           "evicting the remaining workload pods");
                return;
        case DRAIN_PHASE_EVICT_REST:
                set_message(e, "evicting the rest: %zu left%s%s",
                            e->plan.n_per_group[EVICT_GROUP_REST] +
                                    e->plan.n_per_group[EVICT_GROUP_REST_CRITICAL],
                            nrnote, nsnote);
                if (chc && rest)
                        return patch_phase(
                                e, n, DRAIN_PHASE_WAIT_RELEASED,
                                "waiting until the evicted pods are gone and no ResourceClaim is on "
                                "the node");
                return;
        default:
                break;
        }

        /* wait-released and stop-drivers: the safety condition of DESIGN.md (left and
         * released, above: evictions change no cache before the next reconcile). */

        if (ph == DRAIN_PHASE_WAIT_RELEASED) {
                set_message(e, "waiting: %zu pods and %zu ResourceClaims left on the node%s%s", left,
                            e->plan.n_claims_blocking, released ? "" : nrnote, nsnote);
                if (!released)
                        return;
                if (e->o.skip_driver_stop)
                        return patch_phase(e, n, DRAIN_PHASE_DRAINED,
                                           "drained; DRA drivers left running (--skip-driver-stop)");
                if (st->n_stops == 0)
                        return record_driver_stop(e, n, true);
                return patch_phase(e, n, DRAIN_PHASE_STOP_DRIVERS, "stopping the DRA drivers");
        }

        if (ph == DRAIN_PHASE_STOP_DRIVERS) {
                /* Nothing is stopped before it is recorded (a phase written by hand may come
                 * without the record). */
                if (st->n_stops == 0)
                        return record_driver_stop(e, n, false);
                if (!released) {
                        /* Never stop a driver while a claim is on the node: wait (and the pods
                         * that came back are being evicted above). */
                        set_message(e,
                                    "not stopping the drivers: %zu pods and %zu ResourceClaims are on the "
                                    "node%s",
                                    left, e->plan.n_claims_blocking, nrnote);
                        return;
                }
                {
                        struct driver_stop_view v = driver_view(e, n);
                        struct driver_stop_action a = {};
                        char msg[DRIVER_STOP_MESSAGE_MAX] = "";

                        e->stop->ops->stop(e->stop, &v, &a);
                        switch (a.what) {
                        case DRIVER_STOP_EVICT:
                                evict_group(e, EVICT_GROUP_DRIVERS);
                                break;
                        case DRIVER_STOP_SET_LABEL:
                                return patch_label(e, n, a.key, a.value);
                        case DRIVER_STOP_FAIL:
                                return finish(e, a.error, "%s", a.message);
                        default:
                                break;
                        }
                        if (!e->stop->ops->stopped(e->stop, &v, msg, sizeof(msg))) {
                                set_message(e, "%s", msg);
                                return;
                        }
                }
                patch_phase(e, n, DRAIN_PHASE_DRAINED,
                            "drained: no pods, no ResourceClaims, DRA drivers stopped");
        }
}

static bool slices_back(struct engine *e, const struct node_rec *n, const char **ret_missing) {
        for (size_t s = 0; s < e->st.n_stops; s++)
                for (size_t d = 0; d < e->st.stops[s].n_drivers; d++) {
                        const char *want = e->st.stops[s].drivers[d];
                        const struct slice_rec *sl;
                        size_t i = 0;
                        bool found = false;

                        while (!found && node_view_iterate_slices(e->view, &i, &sl))
                                found = streq_ptr(sl->driver, want) && streq_ptr(sl->node_name, n->name);
                        if (!found) {
                                *ret_missing = want;
                                return false;
                        }
                }
        return true;
}

static void drive_uncordon(struct engine *e, const struct node_rec *n) {
        const struct drain_state *st = &e->st;
        /* drainer's own out-of-service taint goes with the drain taint (state.c). */
        bool oos_ours = st->out_of_service_usec > 0 && out_of_service_tainted(n);
        bool tainted = node_rec_find_taint(n, DRAIN_TAINT_KEY, NULL) != NULL || oos_ours;
        const struct driver_stop_record *rec;
        const struct pod_rec *bad = NULL;
        const char *missing = NULL;
        char *body = NULL;
        int r;

        /* The out-of-service taint drainer applied stays until the node is Ready again:
         * its pods were deleted without the kubelet, which must be back to clean up
         * (upstream's non-graceful shutdown: remove the taint once the node recovered).
         * Nothing is changed meanwhile, not even the drivers' restore. */
        if (oos_ours && !n->ready && !e->finish_sent) {
                _cleanup_free_ char *m = NULL;

                if (asprintf(&m,
                             "refused: node %s is not Ready and has the taint " OUT_OF_SERVICE_TAINT_KEY
                             " that drainer applied (--out-of-service); it is removed only once the node "
                             "is Ready again (its kubelet back): nothing was changed; run the uncordon "
                             "again then",
                             n->name) < 0)
                        return finish(e, -ENOMEM, "out of memory");
                return refuse_on_node(e, n, m);
        }
        if (oos_ours && !e->said_out_of_service_removed) {
                /* Every path below removes it in its next write. */
                e->said_out_of_service_removed = true;
                notice(e, n, ENGINE_NOTICE_OUT_OF_SERVICE_REMOVED,
                       "the node is Ready again: removing the taint " OUT_OF_SERVICE_TAINT_KEY
                       " that drainer applied (--out-of-service)");
        }
        if (!st->has_phase) {
                bool leftovers = tainted || n->n_annotations > 0;
                bool uncordon;

                if (e->finish_sent && e->scope)
                        return finish(e, 0, "DRA driver %s of node %s is back in service%s%s", e->scope,
                                      n->name,
                                      e->rules_left ? "; left alone, not drainer's: DeviceTaintRule " : "",
                                      strempty(e->rules_left));
                if (e->scope && !leftovers)
                        return finish(e, 0, "DRA driver %s of node %s is in service; nothing to do",
                                      e->scope, n->name);
                if (e->finish_sent)
                        return finish(e, 0, "node %s: %s", n->name,
                                      n->unschedulable
                                              ? "drainer's changes are undone; it stays cordoned, as it "
                                                "was before drainer touched it"
                                              : "schedulable again");
                if (!leftovers && !n->unschedulable)
                        return finish(e, 0, "node %s is schedulable; nothing to do", n->name);
                if (!leftovers && !e->o.force_uncordon)
                        return finish(
                                e, -EPERM,
                                "node %s was cordoned by someone else (drainer recorded no drain): leaving "
                                "it cordoned; use --force-uncordon to uncordon it anyway",
                                n->name);
                /* Leftovers without a phase (a taint, annotations): clean them up, and
                 * uncordon only what drainer cordoned. */
                uncordon = e->o.force_uncordon || (st->has_was_unschedulable && !st->was_unschedulable);
                r = drain_patch_finish(n, uncordon, false, &body);
                if (r < 0)
                        return finish(e, r, "cannot build the node patch: %s", strerror(-r));
                e->finish_sent = true;
                return patch_node(e, body);
        }

        if (!drain_phase_changes_node(st->phase)) {
                /* Waiting for a slot or refused: drainer changed nothing but annotations. */
                r = drain_patch_finish(n, false, false, &body);
                if (r < 0)
                        return finish(e, r, "cannot build the node patch: %s", strerror(-r));
                e->finish_sent = true;
                return patch_node(e, body);
        }
        /* Before anything changes: each recorded stop must be one this configuration may undo. */
        if (!drain_phase_drivers_back(st->phase) && (rec = undo_refused(e)))
                return refuse_record(e, n, rec, false);
        if (!drain_phase_in_stage(st->phase, DRAIN_STAGE_RESTORING)) {
                /* The move to restore-drivers and its first step, the drain taint's removal,
                 * in one write. */
                if (!tainted)
                        return patch_phase(e, n, DRAIN_PHASE_RESTORE_DRIVERS, "restoring the DRA drivers");
                r = drain_patch_remove_taint(n, timesrc_realtime(e->ts), "restoring the DRA drivers", &body);
                if (r < 0)
                        return finish(e, r, "cannot build the node patch: %s", strerror(-r));
                return patch_node(e, body);
        }

        if (st->phase == DRAIN_PHASE_RESTORE_DRIVERS) {
                /* The drain taint goes first, whatever the strategy: it keeps every DaemonSet pod
                 * that does not tolerate it away, the driver's included (its nodeSelector matching
                 * again after a label strategy is not enough). The node stays cordoned, so only
                 * DaemonSet pods come back before the uncordon. */
                if (tainted) {
                        r = drain_patch_remove_taint(n, timesrc_realtime(e->ts), NULL, &body);
                        if (r < 0)
                                return finish(e, r, "cannot build the node patch: %s", strerror(-r));
                        return patch_node(e, body);
                }
                /* Undo each stop, then wait until every driver is healthy again. */
                struct driver_stop_view v = driver_view(e, n);
                size_t healthy = v.driver_pods_ready;

                for (size_t s = 0; s < st->n_stops; s++) {
                        const struct driver_stop_record *sr = &st->stops[s];
                        /* undo_refused() let only this configuration's unit and label key through. */
                        struct driver_stop *own = sr->ops == e->stop->ops ? e->stop : NULL;
                        struct driver_stop_action a = {};
                        char msg[DRIVER_STOP_MESSAGE_MAX] = "";

                        sr->ops->undo(own, sr, &v, &a);
                        if (a.what == DRIVER_STOP_SET_LABEL)
                                return patch_label(e, n, a.key, a.value);
                        if (a.what == DRIVER_STOP_FAIL)
                                return finish(e, a.error, "%s", a.message);
                        if (!sr->ops->undone(own, sr, &v, msg, sizeof(msg))) {
                                set_message(e, "%s", msg);
                                return;
                        }
                }
                if (healthy < driver_pods(&e->plan, false)) {
                        set_message(e, "waiting for %zu DRA driver pods to be Ready",
                                    driver_pods(&e->plan, false) - healthy);
                        return;
                }
                r = drivers_probed(e, true, &bad);
                if (r <= 0) {
                        set_message(e, "waiting for DRA driver pod %s/%s to answer SERVING",
                                    bad ? bad->ns : "?", bad ? bad->name : "?");
                        return;
                }
                if (!slices_back(e, n, &missing)) {
                        set_message(e, "waiting for the ResourceSlices of driver %s to be published again",
                                    missing);
                        return;
                }
                return patch_phase(e, n, DRAIN_PHASE_UNCORDON, "DRA drivers healthy; uncordoning");
        }

        /* DRAIN_PHASE_UNCORDON: the DeviceTaintRules go last (the driver is back, its slices
         * published); then one patch clears everything; uncordon only what we cordoned (a
         * drain with rules cordoned nothing). */
        if (uses_rules(e) && !delete_rules(e, n))
                return;
        {
                bool uncordon = !uses_rules(e) && (e->o.force_uncordon ||
                                                   (st->has_was_unschedulable && !st->was_unschedulable));

                r = drain_patch_finish(n, uncordon, false, &body);
                if (r < 0)
                        return finish(e, r, "cannot build the node patch: %s", strerror(-r));
                e->finish_sent = true;
                set_message(e, e->scope && uses_rules(e) ? "the driver is back: clearing the record"
                               : uncordon                ? "uncordoning"
                                          : "leaving the node cordoned, as it was before the drain");
                patch_node(e, body);
        }
}

struct driver_keys {
        char key[MAX_DRIVER_KEYS][256];
        bool healthy[MAX_DRIVER_KEYS];
        size_t n;
};

static void driver_key_add(struct driver_keys *d, bool ok, const char *fmt, ...) _printf_(3, 4);
static void driver_key_add(struct driver_keys *d, bool ok, const char *fmt, ...) {
        char k[256];
        size_t j = 0;
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(k, sizeof(k), fmt, ap);
        va_end(ap);
        while (j < d->n && !streq(d->key[j], k))
                j++;
        if (j == d->n) {
                if (d->n == MAX_DRIVER_KEYS)
                        return;
                memcpy(d->key[d->n], k, sizeof(k));
                d->healthy[d->n++] = false;
        }
        d->healthy[j] = d->healthy[j] || ok;
}

/* drainer_driver_healthy{node, driver}: per driver DaemonSet ("ns/name"; a driver
 * pod without one by its own name), 1 when one of its pods on the node is Running,
 * Ready, not deleting and not answering otherwise than SERVING to a probe; a
 * DaemonSet recorded as stopped with no pod here reads 0; a systemd unit
 * ("systemd:UNIT") 1 when active. Series this engine set before and no longer
 * sees are removed. */
static void metrics_drivers(struct engine *e) {
        struct driver_keys d = {};

        for (size_t i = 0; i < e->plan.n_pods; i++) {
                const struct pod_rec *pod = e->plan.pods[i].pod;
                const struct probe_result *pr;
                bool ok;

                if (e->plan.pods[i].cls != POD_CLASS_DRIVER)
                        continue;
                pr = hashmap_get(e->probes, pod->uid);
                ok = !pod->deleting && pod->phase == POD_RUNNING && pod->ready &&
                     (!pr || (pr->error == 0 && pr->status == HEALTH_SERVING));
                if (pod->controller && streq_ptr(pod->controller->kind, "DaemonSet"))
                        driver_key_add(&d, ok, "%s/%s", pod->ns, pod->controller->name);
                else
                        driver_key_add(&d, ok, "%s/%s", pod->ns, pod->name);
        }
        for (size_t s = 0; e->has_st && s < e->st.n_stops; s++) {
                const struct driver_stop_record *r = &e->st.stops[s];
                char key[256];
                bool ok;

                if (r->daemonset)
                        driver_key_add(&d, false, "%s", r->daemonset);
                /* A driver that is not a pod (systemd: only the configured unit is ever asked about). */
                if (r->ops->health &&
                    r->ops->health(r->ops == e->stop->ops ? e->stop : NULL, r, key, sizeof(key), &ok))
                        driver_key_add(&d, ok, "%s", key);
        }
        {
                char key[256];
                bool ok;

                if (e->stop->ops->health && e->stop->ops->health(e->stop, NULL, key, sizeof(key), &ok))
                        driver_key_add(&d, ok, "%s", key);
        }

        for (size_t i = 0; i < d.n; i++)
                metrics_set(metrics_family(DRAINER_METRIC_DRIVER_HEALTHY),
                            METRIC_LABELS(e->o.node, d.key[i]), d.healthy[i] ? 1 : 0);
        for (size_t i = 0; i < e->n_m_drivers; i++) {
                size_t j = 0;

                while (j < d.n && !streq(d.key[j], e->m_drivers[i]))
                        j++;
                if (j == d.n)
                        metrics_remove(metrics_family(DRAINER_METRIC_DRIVER_HEALTHY),
                                       METRIC_LABELS(e->o.node, e->m_drivers[i]));
                free(e->m_drivers[i]);
        }
        e->n_m_drivers = 0;
        for (size_t i = 0; i < d.n; i++)
                if ((e->m_drivers[e->n_m_drivers] = strdup(d.key[i])))
                        e->n_m_drivers++;
}

/* ---- reconcile ---- */

#define CLAIM_ON_NODE  ((void *)1)
#define CLAIM_RELEASED ((void *)2)

static bool plan_has_pod(const struct plan *p, const char *key) {
        for (size_t i = 0; i < p->n_pods; i++) {
                size_t l = strlen(p->pods[i].pod->ns);

                if (strncmp(key, p->pods[i].pod->ns, l) == 0 && key[l] == '/' &&
                    streq(key + l + 1, p->pods[i].pod->name))
                        return true;
        }
        return false;
}

static bool plan_has_claim(const struct plan *p, const char *key) {
        for (size_t i = 0; i < p->n_claims; i++) {
                size_t l = strlen(p->claims[i].claim->ns);

                if (!p->claims[i].driver_own && strncmp(key, p->claims[i].claim->ns, l) == 0 &&
                    key[l] == '/' && streq(key + l + 1, p->claims[i].claim->name))
                        return true;
        }
        return false;
}

/* The trail of the new plan: the pods this run evicted that are gone, the claims
 * seen on the node that are not any more. */
static void trail_changes(struct engine *e) {
        const char *key;
        void *v;
        size_t i = 0;

        if (!e->cb.on_trail)
                return; /* (serve: nobody reads a trail, no scan of the plan per reconcile) */
        while (hashmap_iterate(e->accepted, &i, &key, &v))
                if (!plan_has_pod(&e->plan, key)) {
                        _cleanup_free_ char *k = strdup(key);
                        char *slash = k ? strchr(k, '/') : NULL;

                        if (!slash)
                                continue;
                        *slash = 0;
                        (void)hashmap_remove(e->accepted, key);
                        trail(e, ENGINE_TRAIL_POD_GONE, k, slash + 1);
                        i = 0; /* the map changed: start over (gone ones are removed) */
                }
        i = 0;
        while (hashmap_iterate(e->claims_seen, &i, &key, &v))
                if (v == CLAIM_ON_NODE && !plan_has_claim(&e->plan, key)) {
                        _cleanup_free_ char *k = strdup(key);
                        char *slash = k ? strchr(k, '/') : NULL;

                        (void)hashmap_put(e->claims_seen, key, CLAIM_RELEASED, NULL);
                        if (!slash)
                                continue;
                        *slash = 0;
                        trail(e, ENGINE_TRAIL_CLAIM_RELEASED, k, slash + 1);
                }
}

static int rebuild_plan(struct engine *e, const struct node_rec *n) {
        struct node_input in;
        struct plan p;
        int r;

        struct plan_options po = e->o.plan;

        r = node_view_collect(e->view, &in);
        if (r < 0)
                return r;
        if (in.dra_off) {
                /* No DRA API: no claims, no slices, and so no DRA drivers either (a pod
                 * the driver selectors match is a DaemonSet pod like any other, left as
                 * kubectl drain leaves it). */
                po.n_driver_selectors = 0;
                if (!e->said_no_dra)
                        log_warning(
                                "the API server serves no DRA API (resource.k8s.io v1, v1beta2 or v1beta1): "
                                "draining node %s as kubectl drain would, without claim logic",
                                e->o.node);
                e->said_no_dra = true;
        }
        r = plan_build(n, in.pods, in.n_pods, in.claims, in.n_claims, in.slices, in.n_slices, in.pdbs,
                       in.n_pdbs, &po, &p);
        node_input_done(&in);
        if (r < 0)
                return r;
        if (e->has_plan)
                plan_done(&e->plan);
        e->plan = p;
        e->has_plan = true;
        for (size_t i = 0; i < p.n_claims; i++)
                if (!p.claims[i].driver_own) {
                        char key[512];

                        snprintf(key, sizeof(key), "%s/%s", p.claims[i].claim->ns, p.claims[i].claim->name);
                        if (hashmap_get(e->claims_seen, key) != CLAIM_ON_NODE)
                                (void)hashmap_put(e->claims_seen, key, CLAIM_ON_NODE, NULL);
                }
        trail_changes(e);
        return 0;
}

/* What an admin acts on is told, not every phase (DESIGN.md): the start of a wait for
 * a slot, of a drain (its first phase after none, waiting or preflight) and of a
 * restore; done, refused and failed come from finish(). */
static int phase_stage(bool has, enum drain_phase p) {
        if (!has || p == DRAIN_PHASE_PREFLIGHT)
                return -1;
        if (p == DRAIN_PHASE_WAITING)
                return ENGINE_NOTICE_WAITING;
        return drain_phase_in_stage(p, DRAIN_STAGE_RESTORING) ? ENGINE_NOTICE_RESTORE : ENGINE_NOTICE_DRAIN;
}

static void note_phase(struct engine *e, const struct node_rec *n) {
        uint64_t now = timesrc_now(e->ts);
        bool has = e->st.has_phase;
        enum drain_phase p = e->st.phase;
        int was = phase_stage(e->has_phase, e->phase), stage;

        bool first = !e->observed;

        /* The first reconcile is the observation of what a run found, even with no phase. */
        e->observed = true;
        metrics_phase(e, now);
        if (has == e->has_phase && (!has || p == e->phase))
                return;
        if (e->has_phase)
                e->summary.phase_usec[e->phase] += now - e->phase_entered;
        e->has_phase = has;
        e->phase = p;
        e->phase_entered = now;
        if (!has)
                return;
        e->summary.phase_seen[p] = true;
        if (e->st.message)
                set_message(e, "%s", e->st.message);
        /* The phase a run finds on the Node was announced by the run that entered it. */
        stage = phase_stage(true, p);
        if (!first && stage >= 0 && stage != was)
                notify(e, n, stage, p, e->st.message);
        if (e->cb.on_phase)
                e->cb.on_phase(e, p, e->st.message, e->userdata);
}

static void report(struct engine *e) {
        struct evictor_held held[MAX_HELD];
        struct evictor_stats es;
        struct engine_progress pr = {
                .phase = e->phase,
                .has_phase = e->has_phase,
                .claims_left = e->plan.n_claims_blocking,
                .drivers_left = driver_pods(&e->plan, false),
                .message = e->message,
        };
        const struct node_rec *n = node_view_node(e->view);

        if (n) {
                pr.node_not_ready = !n->ready;
                pr.out_of_service = out_of_service_tainted(n);
        }

        evictor_get_stats(e->evictor, &es);
        pr.evictions_accepted = es.accepted;
        pr.evictions_retried = es.retried;
        memcpy(pr.pods_left, e->plan.n_per_group, sizeof(pr.pods_left));
        e->n_held = evictor_held(e->evictor, held, MAX_HELD);
        for (size_t i = 0; i < e->n_held; i++)
                e->held[i] = (struct engine_held){ held[i].ns, held[i].name, held[i].reason,
                                                   held[i].ns_terminating };
        pr.held = e->held;
        pr.n_held = e->n_held;
        metrics_node(e);
        if (e->cb.on_progress)
                e->cb.on_progress(e, &pr, e->userdata);
}

/* Whether the cached Node is at least as new as the version our patch produced.
 * resourceVersions are opaque to clients, but kube-apiserver's are etcd revisions:
 * when both parse as integers, a larger one is newer. That matters because the watch
 * may deliver our version AND a later one (a status heartbeat) before the patch's own
 * answer arrives; waiting for equality would then wait forever. */
static bool rv_reached(const char *cached, const char *awaited) {
        char *e1, *e2;
        unsigned long long a, b;

        if (!cached || !awaited)
                return true;
        errno = 0;
        a = strtoull(cached, &e1, 10);
        b = strtoull(awaited, &e2, 10);
        if (errno == 0 && *cached && *awaited && !*e1 && !*e2)
                return a >= b;
        return streq(cached, awaited);
}

static void reconcile(struct engine *e) {
        _cleanup_free_ char *err = NULL;
        const struct node_rec *n;
        int r;

        if (e->finished || e->stopping || !synced(e))
                return;
        n = node_view_node(e->view);
        if (!n)
                return finish(e, -ENOENT, "node \"%s\" not found", e->o.node);
        if (e->node_call)
                return; /* one Node patch at a time; its answer kicks us again */
        if (e->await_rv) {
                if (!rv_reached(n->resource_version, e->await_rv))
                        return; /* the cache has not caught up with our own patch yet */
                e->await_rv = mfree(e->await_rv);
        }
        if (e->conflict_rv) {
                if (streq_ptr(n->resource_version, e->conflict_rv) && timesrc_now(e->ts) < e->conflict_until)
                        return; /* a patch from this version was refused with 409: wait for a newer one */
                e->conflict_rv = mfree(e->conflict_rv);
        }

        /* The Node as this drain's scope sees it: only its own drainer.io/ keys (a node
         * drain's, or drainer.io/KEY.DRIVER of --driver), under the plain names. */
        if (e->has_sv)
                drain_scope_view_done(&e->sv);
        e->has_sv = false;
        if (drain_scope_view_init(&e->sv, n, e->scope) < 0)
                return finish(e, -ENOMEM, "out of memory");
        e->has_sv = true;
        n = &e->sv.node;
        if (e->has_st)
                drain_state_done(&e->st);
        e->has_st = false;
        r = drain_state_parse(n, &e->st, &err);
        if (r < 0)
                return finish(e, r, "%s", err ? err : "malformed drainer annotations");
        e->has_st = true;
        r = rebuild_plan(e, n);
        if (r < 0)
                return finish(e, r, "out of memory");
        note_phase(e, n);
        e->has_written_phase = false; /* the cache holds our last patch: it shows its phase */
        if (sync_conditions(e, n))
                return;

        if (e->o.goal == ENGINE_GOAL_DRAIN)
                drive_drain(e, n);
        else
                drive_uncordon(e, n);
        if (!e->finished && !e->node_call)
                write_progress(e, n);
        if (!e->finished)
                report(e);
}

/* ---- the node view ---- */

static void on_view_change(struct node_view *v, void *userdata) {
        kick(userdata);
}

static void on_view_synced(struct node_view *v, unsigned part, void *userdata) {
        struct engine *e = userdata;

        /* After a relist our patch's version may never show up as such: stop waiting. */
        e->await_rv = mfree(e->await_rv);
        kick(e);
}

static void on_view_error(struct node_view *v, unsigned part, int error, const char *message,
                          void *userdata) {
        struct engine *e = userdata;

        if (part == NODE_VIEW_PDBS) {
                /* Without budgets the drain still works (the Eviction API enforces them). */
                log_debug("listing PodDisruptionBudgets failed: %s, ignoring", strna(message));
                e->pdbs_failed = true;
                return kick(e);
        }
        if (error == -EACCES)
                return finish(e, error, "access denied while watching %s: %s",
                              part == NODE_VIEW_CLAIMS ? "resourceclaims" : "the node or its pods",
                              strna(message));
        log_debug("watch error: %s, retrying", message ? message : strerror(-error));
}

static void on_view_closed(void *userdata) {
        struct engine *e = userdata;

        e->view = NULL;
}

static void on_stop_changed(void *userdata) {
        kick(userdata);
}

static void on_stop_wake_at(void *userdata, uint64_t at) {
        retry_at(userdata, at);
}

int engine_new(struct kube_client *client, struct transport *transport, struct timesrc *ts,
               const struct engine_options *o, const struct engine_callbacks *cb, void *userdata,
               struct engine **ret) {
        static const struct node_view_handlers h = {
                .on_change = on_view_change,
                .on_synced = on_view_synced,
                .on_error = on_view_error,
        };
        struct engine *e;
        int r;

        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->client = client;
        e->transport = transport;
        e->ts = ts;
        e->o = *o;
        if (cb)
                e->cb = *cb;
        e->userdata = userdata;
        e->scope = o->plan.n_drivers > 0 ? o->plan.drivers[0] : NULL;
        e->summary.isolation = e->scope ? _PLAN_ISOLATION_MAX : PLAN_ISOLATE_CORDON;
        r = driver_stop_new(o->plan.driver_stop, o->plan.driver_stop_arg,
                            &(const struct driver_stop_env){ .units = o->units,
                                                             .ts = ts,
                                                             .changed = on_stop_changed,
                                                             .wake_at = on_stop_wake_at,
                                                             .userdata = e },
                            &e->stop);
        if (r < 0) {
                free(e);
                return r;
        }
        r = evictor_new(client, ts,
                        &(const struct evictor_options){ .grace_seconds = o->grace_seconds,
                                                         .disable_eviction = o->disable_eviction },
                        &(const struct evictor_callbacks){ .on_answer = on_evictor_answer,
                                                           .on_due = on_evictor_due },
                        e, &e->evictor);
        if (r < 0) {
                engine_free(e);
                return r;
        }
        e->probes = hashmap_new(1024);
        e->claims_seen = hashmap_new(100000);
        e->accepted = hashmap_new(4096); /* a node's pods (max-pods is at most a few hundred) */
        if (!e->probes || !e->claims_seen || !e->accepted) {
                engine_free(e);
                return -ENOMEM;
        }
        /* An uncordon evicts nothing: it needs no budgets. */
        e->parts = o->goal == ENGINE_GOAL_DRAIN ? NODE_VIEW_ALL : NODE_VIEW_ALL & ~NODE_VIEW_PDBS;
        r = node_view_new(client, ts,
                          &(const struct node_view_options){ .node = o->node, .shared = o->shared }, &h, e,
                          &e->view);
        if (r < 0) {
                engine_free(e);
                return r;
        }
        if ((r = dtimer_init(&e->kick, ts, on_kick)) < 0 ||
            (r = dtimer_init(&e->retry, ts, on_retry_timer)) < 0 ||
            (r = dtimer_init(&e->deadline, ts, on_deadline)) < 0 ||
            (r = dtimer_init(&e->stop_wait, ts, on_stop_wait)) < 0) {
                engine_free(e);
                return r;
        }
        *ret = e;
        return 0;
}

int engine_start(struct engine *e) {
        int r;

        if (e->started)
                return -EBUSY;
        e->started = true;
        e->started_at = timesrc_now(e->ts);
        r = node_view_start(e->view, e->parts);
        if (r < 0)
                return r;
        if (e->scope) {
                r = taint_rule_discover(e->client, on_rules_discovered, e, &e->disc);
                if (r < 0)
                        return r;
        }
        if (e->o.timeout_usec > 0)
                dtimer_start(&e->deadline, e->o.timeout_usec);
        return 0;
}

void engine_stop(struct engine *e) {
        bool stopped = e->stopping;

        e->stopping = true;
        if (e->view && !e->view_closing) {
                e->view_closing = true;
                node_view_close(e->view, on_view_closed, e);
        }
        if (e->kick.src) {
                dtimer_stop(&e->kick);
                dtimer_stop(&e->retry);
                dtimer_stop(&e->deadline);
        }
        e->kick_armed = false;
        /* A Node patch already sent may already be applied: wait a moment for its answer,
         * so that what the run reports is what the Node shows (a drain interrupted right
         * after it wrote its next phase says that phase, the one a rerun resumes). */
        if (e->node_call && !stopped && e->kick.src)
                dtimer_start(&e->stop_wait, STOP_WAIT_USEC);
        else if (e->node_call)
                kube_call_cancel(e->node_call);
        if (e->rule_call)
                kube_call_cancel(e->rule_call);
        taint_rule_discovery_cancel(e->disc);
        if (e->evictor)
                evictor_cancel(e->evictor);
        if (e->probe)
                health_probe_cancel(e->probe);
}

bool engine_node_phase(const struct engine *e, enum drain_phase *ret) {
        if (e->has_written_phase) {
                *ret = e->written_phase;
                return true;
        }
        if (e->has_phase)
                *ret = e->phase;
        return e->has_phase;
}

bool engine_idle(const struct engine *e) {
        if (e->view || e->node_call || e->rule_call || e->disc || e->probe)
                return false;
        return !e->evictor || evictor_idle(e->evictor);
}

void engine_free(struct engine *e) {
        if (!e)
                return;
        /* Never stopped (engine_new failed half-way), or freed before idle: the view frees
         * itself once its calls have ended, and tells nobody. */
        if (e->view)
                node_view_close(e->view, NULL, NULL);
        if (e->kick.src) {
                dtimer_done(&e->kick);
                dtimer_done(&e->retry);
                dtimer_done(&e->deadline);
                dtimer_done(&e->stop_wait);
        }
        evictor_free(e->evictor);
        hashmap_free(e->probes, free);
        hashmap_free(e->claims_seen, NULL);
        hashmap_free(e->accepted, NULL);
        if (e->has_plan)
                plan_done(&e->plan);
        if (e->has_st)
                drain_state_done(&e->st);
        if (e->has_sv)
                drain_scope_view_done(&e->sv);
        free(e->probe_uid);
        driver_stop_free(e->stop); /* a unit call still running finishes into nothing */
        free(e->await_rv);
        free(e->patch_rv);
        free(e->conflict_rv);
        free(e->message);
        free(e->final_message);
        free(e->needs_flag);
        free(e->rules_left);
        cJSON_Delete(e->rule_obj);
        for (size_t i = 0; i < e->n_m_drivers; i++)
                free(e->m_drivers[i]);
        free(e);
}
