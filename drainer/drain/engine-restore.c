/* The restore drive: the drain taint off, each recorded driver stop undone (only
 * what this configuration allows), the drivers healthy again (pods Ready, health
 * probes SERVING, ResourceSlices published), then the uncordon that clears
 * drainer's record. It uncordons only a node drainer cordoned. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/log.h"
#include "drainer/base/text.h"
#include "engine-int.h"

/* ---- health probes ---- */

static void on_probe_done(int error, enum health_status status, const char *message, void *userdata) {
        struct engine *e = userdata;
        struct probe_result *pr;

        e->probe = NULL;
        engine_note_idle(e);
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
        engine_schedule_reconcile(e);
}

/* Returns 1 when every driver pod of the node answered SERVING, 0 while a probe is
 * pending, or -EIO (the pod in *ret_bad) when one answered otherwise. Preflight
 * (!restoring) refuses on the first bad answer; restoring re-probes a bad answer
 * every HEALTH_RECHECK_USEC until it serves. */
int engine_drivers_probed(struct engine *e, bool restoring, const struct pod_rec **ret_bad) {
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
                                engine_retry_at(e, pr->at + HEALTH_RECHECK_USEC);
                                return 0;
                        }
                        free(hashmap_remove(e->probes, pod->uid));
                }
                if (e->probe)
                        return 0;
                if (e->o.driver_health->port > 0 && !pod->pod_ip)
                        return 0; /* no IP yet: the pod update brings a reconcile */
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

/* The end of a restore: one patch clears everything; uncordon only what we cordoned
 * (a drain with rules cordoned nothing). */
static void restore_finish(struct engine *e, const struct node_rec *n, const struct drain_state *st) {
        bool uncordon = !engine_uses_rules(e) &&
                        (e->o.force_uncordon || (st->has_was_unschedulable && !st->was_unschedulable));
        char *body = NULL;
        int r = drain_patch_finish(n, uncordon, false, &body);

        if (r < 0)
                return engine_finish(e, r, "cannot build the node patch: %s", strerror(-r));
        e->finish_sent = true;
        engine_set_message(e, e->o.plan.n_devices > 0 ? "the DeviceTaintRules are gone: clearing the record"
                              : e->scope && engine_uses_rules(e) ? "the driver is back: clearing the record"
                              : uncordon                         ? "uncordoning"
                                         : "leaving the node cordoned, as it was before the drain");
        engine_patch_node(e, body);
}

void engine_drive_restore(struct engine *e, const struct node_rec *n) {
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
                        return engine_finish(e, -ENOMEM, "out of memory");
                return engine_refuse_on_node(e, n, m);
        }
        if (oos_ours && !e->said_out_of_service_removed) {
                /* Every path below removes it in its next write. */
                e->said_out_of_service_removed = true;
                engine_tell(e, n, ENGINE_NOTICE_OUT_OF_SERVICE_REMOVED,
                            "the node is Ready again: removing the taint " OUT_OF_SERVICE_TAINT_KEY
                            " that drainer applied (--out-of-service)");
        }
        if (!st->has_phase) {
                bool leftovers = tainted || n->n_annotations > 0;
                bool uncordon;

                if (e->o.plan.n_devices > 0 && (e->finish_sent || !leftovers)) {
                        _cleanup_free_ char *list =
                                drain_devices_format(e->o.plan.devices, e->o.plan.n_devices);

                        return engine_finish(
                                e, 0, "device %s of node %s is %s%s%s", strna(list), n->name,
                                e->finish_sent ? "back in service: drainer's DeviceTaintRule deleted"
                                               : "in service; nothing to do",
                                e->rules_left ? "; left alone, not drainer's: DeviceTaintRule " : "",
                                strempty(e->rules_left));
                }
                if (e->finish_sent && e->scope)
                        return engine_finish(
                                e, 0, "DRA driver %s of node %s is back in service%s%s", e->scope, n->name,
                                e->rules_left ? "; left alone, not drainer's: DeviceTaintRule " : "",
                                strempty(e->rules_left));
                if (e->scope && !leftovers)
                        return engine_finish(e, 0, "DRA driver %s of node %s is in service; nothing to do",
                                             e->scope, n->name);
                if (e->finish_sent)
                        return engine_finish(
                                e, 0, "node %s: %s", n->name,
                                n->unschedulable ? "drainer's changes are undone; it stays cordoned, as it "
                                                   "was before drainer touched it"
                                                 : "schedulable again");
                if (!leftovers && !n->unschedulable)
                        return engine_finish(e, 0, "node %s is schedulable; nothing to do", n->name);
                if (!leftovers && !e->o.force_uncordon)
                        return engine_finish(
                                e, -EPERM,
                                "node %s was cordoned by someone else (drainer recorded no drain): leaving "
                                "it cordoned; use --force-uncordon to uncordon it anyway",
                                n->name);
                /* Leftovers without a phase (a taint, annotations): clean them up, and
                 * uncordon only what drainer cordoned. */
                uncordon = e->o.force_uncordon || (st->has_was_unschedulable && !st->was_unschedulable);
                r = drain_patch_finish(n, uncordon, false, &body);
                if (r < 0)
                        return engine_finish(e, r, "cannot build the node patch: %s", strerror(-r));
                e->finish_sent = true;
                return engine_patch_node(e, body);
        }

        if (!drain_phase_changes_node(st->phase)) {
                /* Waiting for a slot or refused: drainer changed nothing but annotations. */
                r = drain_patch_finish(n, false, false, &body);
                if (r < 0)
                        return engine_finish(e, r, "cannot build the node patch: %s", strerror(-r));
                e->finish_sent = true;
                return engine_patch_node(e, body);
        }
        /* Before anything changes: each recorded stop must be one this configuration may undo. */
        if (!drain_phase_drivers_back(st->phase) && (rec = engine_undo_refused(e)))
                return engine_refuse_record(e, n, rec, false);
        if (!drain_phase_in_stage(st->phase, DRAIN_STAGE_RESTORING)) {
                /* The move to restore-drivers and its first step, the drain taint's removal,
                 * in one write. */
                if (!tainted)
                        return engine_patch_phase(e, n, DRAIN_PHASE_RESTORE_DRIVERS,
                                                  "restoring the DRA drivers");
                r = drain_patch_remove_taint(n, timesrc_realtime(e->ts), "restoring the DRA drivers", &body);
                if (r < 0)
                        return engine_finish(e, r, "cannot build the node patch: %s", strerror(-r));
                return engine_patch_node(e, body);
        }

        if (st->phase == DRAIN_PHASE_RESTORE_DRIVERS) {
                /* The drain taint goes first, whatever the strategy: it keeps every DaemonSet pod
                 * that does not tolerate it away, the driver's included (its nodeSelector matching
                 * again after a label strategy is not enough). The node stays cordoned, so only
                 * DaemonSet pods come back before the uncordon. */
                if (tainted) {
                        r = drain_patch_remove_taint(n, timesrc_realtime(e->ts), NULL, &body);
                        if (r < 0)
                                return engine_finish(e, r, "cannot build the node patch: %s", strerror(-r));
                        return engine_patch_node(e, body);
                }
                /* Undo each stop, then wait until every driver is healthy again. */
                struct driver_stop_view v = engine_driver_view(e, n);
                size_t healthy = v.driver_pods_ready;

                for (size_t s = 0; s < st->n_stops; s++) {
                        const struct driver_stop_record *sr = &st->stops[s];
                        /* engine_undo_refused() let only this configuration's unit and label key through. */
                        struct driver_stop *own = sr->ops == e->stop->ops ? e->stop : NULL;
                        struct driver_stop_action a = {};
                        char msg[DRIVER_STOP_MESSAGE_MAX] = "";

                        sr->ops->undo(own, sr, &v, &a);
                        if (a.what == DRIVER_STOP_SET_LABEL)
                                return engine_patch_label(e, n, a.key, a.value);
                        if (a.what == DRIVER_STOP_FAIL)
                                return engine_finish(e, a.error, "%s", a.message);
                        if (!sr->ops->undone(own, sr, &v, msg, sizeof(msg))) {
                                engine_set_message(e, "%s", msg);
                                return;
                        }
                }
                if (healthy < engine_driver_pods(&e->plan, false)) {
                        size_t k = engine_driver_pods(&e->plan, false) - healthy;

                        engine_set_message(e, "waiting for %zu DRA driver %s to be Ready", k,
                                           text_plural(k, "pod", "pods"));
                        return;
                }
                r = engine_drivers_probed(e, true, &bad);
                if (r <= 0) {
                        engine_set_message(e, "waiting for DRA driver pod %s/%s to answer SERVING",
                                           bad ? bad->ns : "?", bad ? bad->name : "?");
                        return;
                }
                if (!slices_back(e, n, &missing)) {
                        engine_set_message(
                                e, "waiting for the ResourceSlices of driver %s to be published again",
                                missing);
                        return;
                }
                /* A node's uncordon follows at once: in the same write as the end. The phase
                 * uncordon is recorded while DeviceTaintRules are deleted. */
                if (!engine_uses_rules(e))
                        return restore_finish(e, n, st);
                return engine_patch_phase(e, n, DRAIN_PHASE_UNCORDON, "DRA drivers healthy; uncordoning");
        }

        /* DRAIN_PHASE_UNCORDON: the DeviceTaintRules go last (the driver is back, its slices
         * published); then one patch clears everything. */
        if (engine_uses_rules(e) && !engine_delete_rules(e, n))
                return;
        restore_finish(e, n, st);
}
