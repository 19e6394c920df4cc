/* The drain drive: preflight, cordon (or the DeviceTaintRules), the evictions in
 * their groups, the wait until the evicted pods are gone and no claim is on the
 * node, then the drivers' stop (DESIGN.md's phases, one step per reconcile). It
 * never stops a driver while a claim is on the node and never force-deletes a
 * claim holder. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/log.h"
#include "drainer/base/text.h"
#include "engine-int.h"

/* What a wait for pods to go adds when the node is not Ready: its kubelet is down,
 * unreachable or failing, and only the kubelet finishes a deleted pod (it stops the
 * containers, unprepares the claims, then deletes the object); drainer never
 * force-deletes to get past it. The node lifecycle controller marks a silent node
 * Unknown after its grace period (node-monitor-grace-period, 50 s by default). */
#define NOT_READY_NOTE                                                                               \
        "the node is not Ready (its kubelet is down or not reporting): its pods finish terminating " \
        "only once it is back; until then nothing unprepares their ResourceClaims, so they are not " \
        "released"

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

/* ---- evictions ---- */

/* Evicts the pods of group g that need it; true once every pod of the group is
 * accepted for eviction (or already terminating). */
static bool evict_group(struct engine *e, enum evict_group g) {
        return evictor_evict(e->evictor, &e->plan, g);
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
                engine_retry_at(e, timesrc_now(e->ts) + (uint64_t)(due - now));
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
                engine_finish(e, -ENOMEM, "out of memory");
                return true;
        }
        r = drain_patch_out_of_service(n, now, m, &body);
        if (r < 0) {
                engine_finish(e, r, "cannot build the node patch: %s", strerror(-r));
                return true;
        }
        engine_set_message(e, "%s", m);
        if (!e->said_out_of_service) /* once, also when a 409 makes the patch go again */
                engine_tell(e, n, ENGINE_NOTICE_OUT_OF_SERVICE, m);
        e->said_out_of_service = true;
        engine_patch_node(e, body);
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
                engine_tell(e, n, ENGINE_NOTICE_NOT_READY, m);
        } else if (n->ready && !e->said_ready &&
                   (e->said_not_ready || (e->st.message && strstr(e->st.message, NOT_READY_NOTE)))) {
                e->said_not_ready = false;
                e->said_ready = true;
                engine_tell(e, n, ENGINE_NOTICE_READY,
                            "the node is Ready again: its kubelet finishes the evicted pods and releases "
                            "their ResourceClaims");
        }
}

/* Another drain of this node that excludes this one (DESIGN.md: a node drain and a
 * driver drain of the same node exclude each other): refused in preflight. */
static bool refuse_conflict(struct engine *e) {
        const struct node_rec *real = node_view_node(e->view);
        const char *other;

        if (real && e->o.plan.n_devices > 0) {
                _cleanup_free_ char *o =
                        drain_devices_conflict(real, e->scope, e->o.plan.devices, e->o.plan.n_devices);

                if (!o)
                        return false;
                if (streq(o, "node"))
                        engine_finish(e, -EPERM,
                                      "refused: node %s is being drained: a device drain waits until that "
                                      "drain is undone (drainer uncordon %s); nothing was changed",
                                      e->o.node, e->o.node);
                else if (!strchr(o, '/'))
                        engine_finish(e, -EPERM,
                                      "refused: DRA driver %s of node %s is out of service (a driver drain, "
                                      "which holds all its devices): a drain of its devices waits until it "
                                      "is back (drainer uncordon %s --driver %s); nothing was changed",
                                      o, e->o.node, e->o.node, o);
                else
                        engine_finish(e, -EPERM,
                                      "refused: another device drain of node %s holds %s, which overlaps "
                                      "this one: it waits until that drain is undone (drainer uncordon %s "
                                      "--device ... with that drain's devices); nothing was changed",
                                      e->o.node, o, e->o.node);
                return true;
        }
        other = real ? drain_scope_conflict(real, e->scope) : NULL;
        if (!other && real && e->scope) {
                /* a driver drain holds all of the driver's devices: one of them out of
                 * service by a device drain is an overlap */
                _cleanup_free_ char *list = drain_devices_of_driver(real, e->scope);

                if (!list)
                        return false;
                engine_finish(e, -EPERM,
                              "refused: device %s of node %s is out of service (a device drain): a drain "
                              "of DRA driver %s waits until it is back (drainer uncordon %s --device ...); "
                              "nothing was changed",
                              list, e->o.node, e->scope, e->o.node);
                return true;
        }
        if (!other)
                return false;
        if (!e->scope && drain_scope_is_device(other)) {
                const char *list = NULL;
                _cleanup_free_ char *k = NULL;

                if (asprintf(&k, DRAINER_ANN_DEVICES ".%s", other) >= 0)
                        list = kv_get(real->annotations, real->n_annotations, k);
                else
                        k = NULL;
                engine_finish(e, -EPERM,
                              "refused: device %s of node %s is out of service (a device drain): a node "
                              "drain waits until it is back (drainer uncordon %s --device ...); nothing was "
                              "changed",
                              strna(list), e->o.node, e->o.node);
                return true;
        }
        if (e->scope)
                engine_finish(e, -EPERM,
                              "refused: node %s is being drained (" DRAINER_ANN_STATE
                              "=%s): a drain of DRA driver %s "
                              "waits until that drain is undone (drainer uncordon %s); nothing was changed",
                              e->o.node,
                              strna(kv_get(real->annotations, real->n_annotations, DRAINER_ANN_STATE)),
                              e->scope, e->o.node);
        else
                engine_finish(e, -EPERM,
                              "refused: DRA driver %s of node %s is out of service (" DRAINER_ANN_STATE
                              ".%s): a node "
                              "drain waits until it is back (drainer uncordon %s --driver %s); nothing was "
                              "changed",
                              other, e->o.node, other, e->o.node, other);
        return true;
}

/* --device: each device is published on the node (its ResourceSlices), or the drain is
 * refused before anything changes. True: go on. */
static bool refuse_devices(struct engine *e, const struct node_rec *n) {
        struct node_input in;
        char m[768];
        int r;

        if (node_view_collect(e->view, &in) < 0) {
                engine_finish(e, -ENOMEM, "out of memory");
                return false;
        }
        r = drain_devices_on_node(e->o.plan.devices, e->o.plan.n_devices, in.slices, in.n_slices, n->name, m,
                                  sizeof(m));
        node_input_done(&in);
        if (r < 0) {
                engine_finish(e, -EPERM, "refused: %s; nothing was changed", m);
                return false;
        }
        return true;
}

/* The drain taint and the cordon (kept if already there; someone may have removed
 * them during the drain), in the same write as evict-claim-holders: the evictions
 * start once the node is seen cordoned and tainted (drain_evict). */
static void patch_cordon(struct engine *e, const struct node_rec *n) {
        char *body = NULL;
        int r = drain_patch_cordon(n, timesrc_realtime(e->ts), &body);

        if (r < 0)
                return engine_finish(e, r, "cannot build the node patch: %s", strerror(-r));
        engine_patch_node(e, body);
        e->cordon_sent = true;
}

/* The trail's "cordoned" line, once the node is seen cordoned by this run's cordon (or
 * in the phase cordon, a drain of an older drainer resumed). */
static void say_cordoned(struct engine *e, const struct node_rec *n) {
        if (e->said_cordoned || engine_uses_rules(e))
                return;
        e->said_cordoned = true;
        engine_trail(e, ENGINE_TRAIL_CORDONED, NULL, n->name);
}

/* The rules that hold in every phase, whatever drainer.io/state says: true when the
 * run was refused. */
static bool refused_in_phase(struct engine *e, const struct node_rec *n, enum drain_phase ph) {
        const struct driver_stop_record *rec;

        /* The eviction rules hold at every eviction of every phase, whatever drainer.io/state
         * says: a phase written by hand must not skip preflight's rules, nor may a pod that
         * came later. (A deleting pod raises none: nothing more is sent for it.) */
        if (drain_phase_in_stage(ph, DRAIN_STAGE_TAKING) && plan_eviction_blockers(&e->plan) > 0) {
                engine_refuse_blockers(e, n, ph);
                return true;
        }
        /* Drivers are stopped as configured, and that is what the record must say. */
        if ((ph == DRAIN_PHASE_WAIT_RELEASED || ph == DRAIN_PHASE_STOP_DRIVERS) && !e->o.skip_driver_stop &&
            (rec = engine_stop_not_configured(e))) {
                engine_refuse_record(e, n, rec, true);
                return true;
        }
        return false;
}

/* Preflight's view of the drivers' health: their pods' health endpoints, then the
 * strategy's own (systemd: the unit is active). 1: healthy, go on; 0: not yet, or
 * refused or finished. */
static int preflight_drivers(struct engine *e) {
        const struct pod_rec *bad = NULL;
        int r;

        r = engine_drivers_probed(e, false, &bad);
        if (r == 0) {
                engine_set_message(e, "preflight: probing the DRA driver's health");
                return 0;
        }
        if (r < 0) {
                char m[512];

                snprintf(m, sizeof(m),
                         "DRA driver pod %s/%s does not answer SERVING on its health endpoint "
                         "(use --ignore-driver-health to override)",
                         bad->ns, bad->name);
                plan_add_blocker(&e->plan, BLOCKER_DRIVER_UNHEALTHY, bad, m);
                engine_refuse_preflight(e);
                return 0;
        }
        if (e->stop->ops->preflight && !e->o.plan.ignore_driver_health) {
                struct driver_stop_action a = {};

                r = e->stop->ops->preflight(e->stop, &a);
                if (r == 0) {
                        engine_set_message(e, "%s", a.message);
                        return 0;
                }
                if (r == -EIO) {
                        plan_add_blocker(&e->plan, BLOCKER_DRIVER_UNHEALTHY, NULL, a.message);
                        engine_refuse_preflight(e);
                        return 0;
                }
                if (r < 0) {
                        engine_finish(e, r, "%s", a.message);
                        return 0;
                }
        }
        return 1;
}

/* waiting (serve got a slot: nothing was changed yet) and preflight: refused, or the
 * first change, the cordon (or, driver-scoped, the record of the rules). */
static void drain_preflight(struct engine *e, const struct node_rec *n) {
        if (refuse_conflict(e))
                return;
        if (e->plan.n_blockers > 0)
                return engine_refuse_preflight(e);
        if (e->o.plan.n_devices > 0 && !refuse_devices(e, n))
                return;
        if (preflight_drivers(e) <= 0)
                return;
        if (engine_uses_rules(e))
                return engine_isolate(e, n);
        if (e->scope)
                engine_set_message(
                        e,
                        "the API server serves no DeviceTaintRule (resource.k8s.io v1 or v1beta2): "
                        "cordoning node %s instead (--driver %s)",
                        n->name, e->scope);
        else
                engine_set_message(e, "cordoning");
        patch_cordon(e, n);
}

/* cordon: left once the rules are in place, or the node is seen cordoned and tainted
 * (a node drain records it only with its DeviceTaintRules: a cordon goes with
 * evict-claim-holders, and a Node in cordon is a drain of an older drainer resumed). */
static void drain_cordon(struct engine *e, const struct node_rec *n) {
        if (engine_uses_rules(e)) {
                if (!engine_create_rules(e, n))
                        return;
                return engine_patch_phase(e, n, DRAIN_PHASE_EVICT_CLAIM_HOLDERS,
                                          e->o.plan.n_devices > 0
                                                  ? "DeviceTaintRules in place; evicting the pods whose "
                                                    "ResourceClaims hold the devices"
                                                  : "DeviceTaintRules in place; evicting the pods that hold "
                                                    "ResourceClaims of the driver");
        }
        if (!node_cordoned(n))
                return patch_cordon(e, n);
        say_cordoned(e, n);
        engine_patch_phase(e, n, DRAIN_PHASE_EVICT_CLAIM_HOLDERS,
                           "evicting the pods that hold ResourceClaims");
}

/* restore-drivers and uncordon: asked to drain a node that was being restored, cordon
 * again (idempotent). */
static void drain_again(struct engine *e, const struct node_rec *n) {
        if (engine_uses_rules(e))
                return engine_isolate(e, n);
        patch_cordon(e, n);
}

/* Whether the record names a DRA driver that was stopped: a driver published on the
 * node, its DaemonSet, or a unit (a taint or a label that stopped nothing does not
 * count). */
static bool drivers_were_stopped(const struct engine *e) {
        for (size_t i = 0; i < e->st.n_stops; i++) {
                const struct driver_stop_record *r = &e->st.stops[i];

                if (r->ops && r->ops != &driver_stop_none &&
                    (r->ops->needs_units || r->n_drivers > 0 || r->daemonset))
                        return true;
        }
        return false;
}

/* What the drain did to the drivers, as the end of "node N is drained...": only what
 * is true (there may have been none). */
static const char *drivers_stopped_note(const struct engine *e) {
        if (e->o.skip_driver_stop)
                return " (drivers left running: --skip-driver-stop)";
        if (e->stop->ops == &driver_stop_none)
                return " (DRA drivers left running: --driver-stop none)";
        if (!drivers_were_stopped(e))
                return " (no DRA driver was on the node to stop)";
        return " and its DRA drivers are stopped";
}

/* drained: drainer.io/state=drained is a claim, not a fact (it may be written by hand):
 * a node with pods to evict or claims on it, not cordoned, or with a driver pod when
 * the strategy removes them, is drained again from the evictions on. */
static void drain_check_drained(struct engine *e, const struct node_rec *n) {
        if (!engine_isolated(e, n) ||
            pods_left(&e->plan, false) + finished_deleting(&e->plan) - wait_skipped(e) > 0 ||
            e->plan.n_claims_blocking > 0 ||
            (!e->o.skip_driver_stop && e->stop->ops->removes_driver_pods &&
             engine_driver_pods(&e->plan, false) > 0)) {
                if (!engine_isolated(e, n))
                        return patch_cordon(e, n);
                return engine_patch_phase(
                        e, n, DRAIN_PHASE_EVICT_CLAIM_HOLDERS,
                        "recorded as drained, but pods, ResourceClaims or DRA drivers are on "
                        "the node: draining it again");
        }
        if (e->o.plan.n_devices > 0) {
                _cleanup_free_ char *list = drain_devices_format(e->o.plan.devices, e->o.plan.n_devices);

                return engine_finish(e, 0,
                                     "device %s of node %s is out of service: no ResourceClaim holds it, "
                                     "a DeviceTaintRule keeps new ones off; the node and its DRA driver "
                                     "stay in service",
                                     strna(list), n->name);
        }
        if (e->scope)
                return engine_finish(e, 0, "DRA driver %s of node %s is out of service%s", e->scope, n->name,
                                     e->o.skip_driver_stop ? " (left running: --skip-driver-stop)"
                                                           : ": its claims released, the driver stopped");
        engine_finish(e, 0, "node %s is drained%s", n->name, drivers_stopped_note(e));
}

/* "; held: ns/pod (REASON)" for the first pod whose eviction is being retried with a
 * reason (a PodDisruptionBudget's 429 names the budget), so that the Node's message, and
 * what a hook owner tells from it, say why the phase does not move; "" when none is. */
static const char *held_note(struct engine *e, char *buf, size_t size) {
        struct evictor_held held[MAX_HELD];
        size_t k = evictor_held(e->evictor, held, MAX_HELD);

        buf[0] = 0;
        for (size_t i = 0; i < k; i++) {
                if (held[i].ns_terminating || !held[i].reason)
                        continue;
                snprintf(buf, size, "; held: %s/%s (%.160s)", held[i].ns, held[i].name, held[i].reason);
                break;
        }
        return buf;
}

/* What the evictions of one reconcile left, for the phase that follows them. */
struct drain_pass {
        size_t left;                            /* pods the wait still counts */
        bool released;                          /* none, and no ResourceClaim on the node */
        bool claim_holders_accepted;            /* every claim holder's eviction accepted */
        bool rest_accepted;                     /* ... and every other pod's */
        char not_ready[DRAIN_MESSAGE_MAX];      /* not_ready_note() */
        char ns_terminating[DRAIN_MESSAGE_MAX]; /* ns_terminating_note() */
        char held[DRAIN_MESSAGE_MAX];           /* held_note() */
};

/* The phases that evict (evict-claim-holders to stop-drivers): the isolation kept,
 * --out-of-service, then the evictions of the phase's groups. False when a patch went
 * out or the run ended: the phase's own step waits for the next reconcile. */
static bool drain_evict(struct engine *e, const struct node_rec *n, enum drain_phase ph,
                        struct drain_pass *pass) {
        /* The drain taint must stay for the whole drain: someone may have removed it. */
        if (!engine_isolated(e, n)) {
                patch_cordon(e, n);
                return false;
        }
        if (e->cordon_sent)
                say_cordoned(e, n);

        /* A node not Ready long enough, with --out-of-service: the taint first (the
         * evictions of a dead node's pods would wait on budgets its pods no longer count
         * toward). Only while something is left on the node. */
        pass->left = pods_left(&e->plan, false) + finished_deleting(&e->plan) - wait_skipped(e);
        pass->released = pass->left == 0 && e->plan.n_claims_blocking == 0;
        if (!pass->released && e->o.out_of_service && apply_out_of_service(e, n))
                return false;
        not_ready_note(e, n, pass->not_ready, sizeof(pass->not_ready));

        /* Evictions: claim holders first; critical ones after the others are accepted;
         * the rest once every claim holder is accepted. New pods are evicted too. */
        pass->claim_holders_accepted = evict_group(e, EVICT_GROUP_CLAIM_HOLDERS) &&
                                       evict_group(e, EVICT_GROUP_CLAIM_HOLDERS_CRITICAL);
        pass->rest_accepted = false;
        if (drain_phase_evicts_rest(ph) && pass->claim_holders_accepted)
                pass->rest_accepted =
                        evict_group(e, EVICT_GROUP_REST) && evict_group(e, EVICT_GROUP_REST_CRITICAL);

        ns_terminating_note(e, pass->ns_terminating, sizeof(pass->ns_terminating));
        held_note(e, pass->held, sizeof(pass->held));
        return true;
}

static void drain_evict_claim_holders(struct engine *e, const struct node_rec *n,
                                      const struct drain_pass *pass) {
        engine_set_message(e, "evicting claim holders: %zu left%s%s%s",
                           e->plan.n_per_group[EVICT_GROUP_CLAIM_HOLDERS] +
                                   e->plan.n_per_group[EVICT_GROUP_CLAIM_HOLDERS_CRITICAL],
                           pass->not_ready, pass->ns_terminating, pass->held);
        if (pass->claim_holders_accepted)
                engine_patch_phase(e, n, DRAIN_PHASE_EVICT_REST, "evicting the remaining workload pods");
}

static void drain_evict_rest(struct engine *e, const struct node_rec *n, const struct drain_pass *pass) {
        engine_set_message(e, "evicting the rest: %zu left%s%s%s",
                           e->plan.n_per_group[EVICT_GROUP_REST] +
                                   e->plan.n_per_group[EVICT_GROUP_REST_CRITICAL],
                           pass->not_ready, pass->ns_terminating, pass->held);
        if (pass->claim_holders_accepted && pass->rest_accepted)
                engine_patch_phase(e, n, DRAIN_PHASE_WAIT_RELEASED,
                                   "waiting until the evicted pods are gone and no ResourceClaim is on "
                                   "the node");
}

/* A device drain waits for a PodGroup's claim that no pod of the node uses until the
 * PodGroup is deleted (DESIGN.md "Claims of a PodGroup"): says so, naming the first. */
static const char *podgroup_note(const struct engine *e, char *buf, size_t size) {
        for (size_t i = 0; i < e->plan.n_claims; i++) {
                const struct plan_claim *pc = &e->plan.claims[i];

                if (!pc->podgroup_unused || !plan_claim_blocks(pc))
                        continue;
                snprintf(buf, size,
                         "; ResourceClaim %s/%s keeps its device until its PodGroup %s/%s is deleted",
                         pc->claim->ns, pc->claim->name, pc->claim->ns, strna(pc->podgroup->name));
                return buf;
        }
        return "";
}

/* wait-released and stop-drivers hold the safety condition of DESIGN.md (left and
 * released, in pass: evictions change no cache before the next reconcile). */
static void drain_wait_released(struct engine *e, const struct node_rec *n, const struct drain_pass *pass) {
        char pg[512];

        engine_set_message(e, "waiting: %zu %s and %zu %s left on the node%s%s%s", pass->left,
                           text_plural(pass->left, "pod", "pods"), e->plan.n_claims_blocking,
                           text_plural(e->plan.n_claims_blocking, "ResourceClaim", "ResourceClaims"),
                           pass->released ? "" : pass->not_ready, pass->ns_terminating,
                           podgroup_note(e, pg, sizeof(pg)));
        if (!pass->released)
                return;
        if (e->o.plan.n_devices > 0)
                return engine_patch_phase(e, n, DRAIN_PHASE_DRAINED,
                                          "drained: no ResourceClaim holds the devices; the DRA driver "
                                          "keeps running");
        if (e->o.skip_driver_stop)
                return engine_patch_phase(e, n, DRAIN_PHASE_DRAINED,
                                          "drained; DRA drivers left running (--skip-driver-stop)");
        if (e->st.n_stops == 0)
                return engine_record_driver_stop(e, n, true);
        engine_patch_phase(e, n, DRAIN_PHASE_STOP_DRIVERS, "stopping the DRA drivers");
}

static void drain_stop_drivers(struct engine *e, const struct node_rec *n, const struct drain_pass *pass) {
        struct driver_stop_view v;
        struct driver_stop_action a = {};
        char msg[DRIVER_STOP_MESSAGE_MAX] = "";

        /* Nothing is stopped before it is recorded (a phase written by hand may come
         * without the record). */
        if (e->st.n_stops == 0)
                return engine_record_driver_stop(e, n, false);
        if (!pass->released) {
                /* Never stop a driver while a claim is on the node: wait (and the pods
                 * that came back are being evicted, drain_evict). */
                engine_set_message(e, "not stopping the drivers: %zu %s and %zu %s on the node%s",
                                   pass->left, text_plural(pass->left, "pod", "pods"),
                                   e->plan.n_claims_blocking,
                                   text_plural(e->plan.n_claims_blocking, "ResourceClaim", "ResourceClaims"),
                                   pass->not_ready);
                return;
        }
        v = engine_driver_view(e, n);
        e->stop->ops->stop(e->stop, &v, &a);
        switch (a.what) {
        case DRIVER_STOP_EVICT:
                evict_group(e, EVICT_GROUP_DRIVERS);
                break;
        case DRIVER_STOP_SET_LABEL:
                return engine_patch_label(e, n, a.key, a.value);
        case DRIVER_STOP_FAIL:
                return engine_finish(e, a.error, "%s", a.message);
        default:
                break;
        }
        if (!e->stop->ops->stopped(e->stop, &v, msg, sizeof(msg))) {
                engine_set_message(e, "%s", msg);
                return;
        }
        engine_patch_phase(e, n, DRAIN_PHASE_DRAINED,
                           drivers_were_stopped(e)
                                   ? "drained: no pods, no ResourceClaims, DRA drivers stopped"
                                   : "drained: no pods, no ResourceClaims, no DRA driver "
                                     "to stop");
}

/* One step of the drain from the phase the Node records (none: preflight). */
void engine_drive_drain(struct engine *e, const struct node_rec *n) {
        enum drain_phase ph = e->st.has_phase ? e->st.phase : DRAIN_PHASE_PREFLIGHT;
        struct drain_pass pass;

        if (refused_in_phase(e, n, ph))
                return;
        note_readiness(e, n, ph);

        switch (ph) {
        case DRAIN_PHASE_WAITING:
        case DRAIN_PHASE_PREFLIGHT:
                return drain_preflight(e, n);
        case DRAIN_PHASE_CORDON:
                return drain_cordon(e, n);
        case DRAIN_PHASE_RESTORE_DRIVERS:
        case DRAIN_PHASE_UNCORDON:
                return drain_again(e, n);
        case DRAIN_PHASE_DRAINED:
                return drain_check_drained(e, n);
        default:
                break;
        }

        if (!drain_evict(e, n, ph, &pass))
                return;
        switch (ph) {
        case DRAIN_PHASE_EVICT_CLAIM_HOLDERS:
                return drain_evict_claim_holders(e, n, &pass);
        case DRAIN_PHASE_EVICT_REST:
                return drain_evict_rest(e, n, &pass);
        case DRAIN_PHASE_WAIT_RELEASED:
                return drain_wait_released(e, n, &pass);
        case DRAIN_PHASE_STOP_DRIVERS:
                return drain_stop_drivers(e, n, &pass);
        default:
                return;
        }
}
