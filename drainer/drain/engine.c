/* The drain engine's lifecycle and its reconcile: owns the node view (informers),
 * the evictor, the timers and what the caller is told (notices, progress, the
 * summary, the metrics). On every change it re-derives the next safe step from the
 * state on the Node (DESIGN.md's phases) and hands it to a drive (engine-drain.c,
 * engine-restore.c). It posts no Event: what happened goes to the caller's on_notice. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "drainer/base/text.h"
#include "drainer/obs/metrics.h"
#include "engine-int.h"

static void reconcile(struct engine *e);

/* ---- small helpers ---- */

void engine_set_message(struct engine *e, const char *fmt, ...) {
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

void engine_schedule_reconcile(struct engine *e) {
        if (e->finished || e->stopping || e->reconcile_armed)
                return;
        e->reconcile_armed = true;
        dtimer_start(&e->reconcile_timer, 0);
}

void engine_note_idle(struct engine *e) {
        if (!e->stopping || e->idle_told || e->idle_timer.armed || !e->idle_timer.src || !engine_idle(e))
                return;
        dtimer_start(&e->idle_timer, 0);
}

static void on_idle_timer(struct dtimer *t) {
        struct engine *e = container_of(t, struct engine, idle_timer);

        if (e->idle_told || !engine_idle(e))
                return;
        e->idle_told = true;
        if (e->cb.on_idle)
                e->cb.on_idle(e, e->userdata); /* last: it may free the engine */
}

static void on_reconcile_timer(struct dtimer *t) {
        struct engine *e = container_of(t, struct engine, reconcile_timer);

        e->reconcile_armed = false;
        reconcile(e);
}

static void on_retry_timer(struct dtimer *t) {
        reconcile(container_of(t, struct engine, retry));
}

/* Arms the retry timer for the earliest of its current due time and at. */
void engine_retry_at(struct engine *e, uint64_t at) {
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

void engine_tell(struct engine *e, const struct node_rec *n, enum engine_notice_kind kind,
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

void engine_finish(struct engine *e, int result, const char *fmt, ...) {
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
                e->summary.node_seen = true;
                e->summary.node_not_ready = !n->ready;
                e->summary.out_of_service = out_of_service_tainted(n);
                e->summary.out_of_service_by_drainer =
                        e->summary.out_of_service && e->has_st && e->st.out_of_service_usec > 0;
        }
        for (int p = 0; p < _DRAIN_PHASE_MAX; p++)
                e->summary.changed =
                        e->summary.changed || (drain_phase_changes_node(p) && e->summary.phase_seen[p]);
        metrics_node(e);
        metrics_finished(e, result, e->summary.total_usec);

        if (result == 0)
                engine_tell(e, n, ENGINE_NOTICE_DONE, strna(m));
        else if (result == -EPERM)
                engine_tell(e, n, ENGINE_NOTICE_REFUSED, strna(m));
        else if (result != -ECANCELED)
                engine_tell(e, n, ENGINE_NOTICE_FAILED, strna(m));

        dtimer_stop(&e->retry);
        dtimer_stop(&e->deadline);
        dtimer_stop(&e->unread);
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
                len += snprintf(remained + len, sizeof(remained) - len, "%zu %s and %zu %s on the node",
                                pods, text_plural(pods, "pod", "pods"), e->plan.n_claims_blocking,
                                text_plural(e->plan.n_claims_blocking, "claim", "claims"));
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

                        if (!plan_claim_blocks(&e->plan.claims[i]))
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
        engine_finish(e, -ETIMEDOUT, "timed out in phase %s: %s%s%s",
                      e->has_phase ? drain_phase_to_string(e->phase) : "preflight", remained,
                      e->message ? "; last: " : "", strempty(e->message));
}

/* Nothing has been read of the Node since the start (the API server does not answer,
 * or not its watch): a one-shot run gives up here rather than wait for ever; once the
 * Node was read, only the deadline bounds the run. */
static void on_unread(struct dtimer *t) {
        struct engine *e = container_of(t, struct engine, unread);

        if (node_view_node(e->view))
                return;
        engine_finish(e, -ETIMEDOUT, "node %s not read in %.0f s: nothing was read, nothing was changed",
                      e->o.node, (double)e->o.unread_timeout_usec / USEC_PER_SEC);
}

void engine_trail(struct engine *e, enum engine_trail_kind kind, const char *ns, const char *name) {
        if (e->cb.on_trail)
                e->cb.on_trail(
                        e,
                        &(const struct engine_trail){
                                .kind = kind, .ns = ns, .name = name, .deleted = e->o.disable_eviction },
                        e->userdata);
}

static void on_evictor_answer(struct evictor *v, const struct evictor_answer *a, void *userdata) {
        struct engine *e = userdata;

        engine_note_idle(e);
        if (a->error == -EACCES)
                return engine_finish(e, a->error, "evicting %s/%s is forbidden: %s", a->ns, a->name,
                                     strna(a->reason));
        if (a->error == 0 && !a->gone && e->cb.on_trail) {
                char key[512];

                snprintf(key, sizeof(key), "%s/%s", a->ns, a->name);
                if (!hashmap_get(e->accepted, key) && hashmap_put(e->accepted, key, (void *)1, NULL) >= 0)
                        engine_trail(e, ENGINE_TRAIL_EVICTING, a->ns, a->name);
        }
        engine_schedule_reconcile(e);
}

static void on_evictor_due(struct evictor *v, void *userdata) {
        engine_schedule_reconcile(userdata);
}

static void on_evictor_idle(struct evictor *v, void *userdata) {
        engine_note_idle(userdata);
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

                if (plan_claim_blocks(&p->claims[i]) && strncmp(key, p->claims[i].claim->ns, l) == 0 &&
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
                        engine_trail(e, ENGINE_TRAIL_POD_GONE, k, slash + 1);
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
                        engine_trail(e, ENGINE_TRAIL_CLAIM_RELEASED, k, slash + 1);
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
                if (plan_claim_blocks(&p.claims[i])) {
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
 * restore; done, refused and failed come from engine_finish(). */
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
                engine_set_message(e, "%s", e->st.message);
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
                .drivers_left = engine_driver_pods(&e->plan, false),
                .message = e->message,
        };
        const struct node_rec *n = node_view_node(e->view);

        if (n) {
                pr.node_seen = true;
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

static void reconcile(struct engine *e) {
        _cleanup_free_ char *err = NULL;
        const struct node_rec *n;
        int r;

        if (e->finished || e->stopping || !synced(e))
                return;
        n = node_view_node(e->view);
        if (!n)
                return engine_finish(e, -ENOENT, "node \"%s\" not found", e->o.node);
        if (!engine_patch_settled(e, n))
                return;

        /* The Node as this drain's scope sees it: only its own drainer.io/ keys (a node
         * drain's, or drainer.io/KEY.DRIVER of --driver), under the plain names. */
        if (e->has_sv)
                drain_scope_view_done(&e->sv);
        e->has_sv = false;
        if (drain_scope_view_init(&e->sv, n, e->scope) < 0)
                return engine_finish(e, -ENOMEM, "out of memory");
        e->has_sv = true;
        n = &e->sv.node;
        if (e->has_st)
                drain_state_done(&e->st);
        e->has_st = false;
        r = drain_state_parse(n, &e->st, &err);
        if (r < 0)
                return engine_finish(e, r, "%s", err ? err : "malformed drainer annotations");
        e->has_st = true;
        r = rebuild_plan(e, n);
        if (r < 0)
                return engine_finish(e, r, "out of memory");
        note_phase(e, n);
        e->has_written_phase = false; /* the cache holds our last patch: it shows its phase */
        if (engine_sync_conditions(e, n))
                return;

        if (e->o.goal == ENGINE_GOAL_DRAIN)
                engine_drive_drain(e, n);
        else
                engine_drive_restore(e, n);
        if (!e->finished && !e->node_call)
                engine_write_progress(e, n);
        if (!e->finished)
                report(e);
}

/* ---- the node view ---- */

static void on_view_change(struct node_view *v, void *userdata) {
        engine_schedule_reconcile(userdata);
}

static void on_view_synced(struct node_view *v, unsigned part, void *userdata) {
        struct engine *e = userdata;

        /* After a relist our patch's version may never show up as such: stop waiting. */
        e->await_rv = mfree(e->await_rv);
        engine_schedule_reconcile(e);
}

static void on_view_error(struct node_view *v, unsigned part, int error, const char *message,
                          void *userdata) {
        struct engine *e = userdata;

        if (part == NODE_VIEW_PDBS) {
                /* Without budgets the drain still works (the Eviction API enforces them). */
                log_debug("listing PodDisruptionBudgets failed: %s, ignoring", strna(message));
                e->pdbs_failed = true;
                return engine_schedule_reconcile(e);
        }
        if (error == -EACCES)
                return engine_finish(e, error, "access denied while watching %s: %s",
                                     part == NODE_VIEW_CLAIMS ? "resourceclaims" : "the node or its pods",
                                     strna(message));
        log_debug("watch error: %s, retrying", message ? message : strerror(-error));
}

static void on_view_closed(void *userdata) {
        struct engine *e = userdata;

        e->view = NULL;
        engine_note_idle(e);
}

static void on_stop_changed(void *userdata) {
        engine_schedule_reconcile(userdata);
}

static void on_stop_wake_at(void *userdata, uint64_t at) {
        engine_retry_at(userdata, at);
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
        if (o->plan.n_devices > 0) {
                drain_devices_scope(o->plan.devices, o->plan.n_devices, e->dev_scope);
                e->scope = e->dev_scope;
        }
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
                                                           .on_due = on_evictor_due,
                                                           .on_idle = on_evictor_idle },
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
        /* An uncordon evicts nothing and stops no driver: it needs no budgets, and no
         * claims (a pod is a claim holder by its spec; the claims only ever decide when a
         * driver may stop, and an engine keeps the goal it was made with). Without a
         * cluster view to borrow them from, the claims are the one cluster-wide list of a
         * drain: a per-node uncordon does not pay it (DESIGN.md, "Load on the API
         * server"). */
        e->parts = o->goal == ENGINE_GOAL_DRAIN ? NODE_VIEW_ALL
                                                : NODE_VIEW_ALL & ~(NODE_VIEW_PDBS | NODE_VIEW_CLAIMS);
        r = node_view_new(client, ts,
                          &(const struct node_view_options){ .node = o->node, .shared = o->shared }, &h, e,
                          &e->view);
        if (r < 0) {
                engine_free(e);
                return r;
        }
        if ((r = dtimer_init(&e->reconcile_timer, ts, on_reconcile_timer)) < 0 ||
            (r = dtimer_init(&e->retry, ts, on_retry_timer)) < 0 ||
            (r = dtimer_init(&e->deadline, ts, on_deadline)) < 0 ||
            (r = dtimer_init(&e->unread, ts, on_unread)) < 0 ||
            (r = dtimer_init(&e->stop_wait, ts, on_stop_wait)) < 0 ||
            (r = dtimer_init(&e->idle_timer, ts, on_idle_timer)) < 0) {
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
                r = engine_discover_rules(e);
                if (r < 0)
                        return r;
        }
        if (e->o.timeout_usec > 0)
                dtimer_start(&e->deadline, e->o.timeout_usec);
        if (e->o.unread_timeout_usec > 0)
                dtimer_start(&e->unread, e->o.unread_timeout_usec);
        return 0;
}

void engine_stop(struct engine *e) {
        bool stopped = e->stopping;

        e->stopping = true;
        if (e->view && !e->view_closing) {
                e->view_closing = true;
                node_view_close(e->view, on_view_closed, e);
        }
        if (e->reconcile_timer.src) {
                dtimer_stop(&e->reconcile_timer);
                dtimer_stop(&e->retry);
                dtimer_stop(&e->deadline);
                dtimer_stop(&e->unread);
        }
        e->reconcile_armed = false;
        /* A Node patch already sent may already be applied: wait a moment for its answer,
         * so that what the run reports is what the Node shows (a drain interrupted right
         * after it wrote its next phase says that phase, the one a rerun resumes). */
        if (e->node_call && !stopped && e->reconcile_timer.src)
                dtimer_start(&e->stop_wait, STOP_WAIT_USEC);
        else if (e->node_call && !e->stop_wait.armed)
                kube_call_cancel(e->node_call); /* a later stop leaves that wait alone */
        if (e->rule_call)
                kube_call_cancel(e->rule_call);
        taint_rule_discovery_cancel(e->disc);
        if (e->evictor)
                evictor_cancel(e->evictor);
        if (e->probe)
                health_probe_cancel(e->probe);
        engine_note_idle(e);
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
        if (e->reconcile_timer.src) {
                dtimer_done(&e->reconcile_timer);
                dtimer_done(&e->retry);
                dtimer_done(&e->deadline);
                dtimer_done(&e->unread);
                dtimer_done(&e->stop_wait);
                if (e->idle_timer.src)
                        dtimer_done(&e->idle_timer);
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
