/* The engine's Node patch pipeline: one patch in flight, conditional on the cached
 * resourceVersion; a 409 waits for the watch to bring the newer Node; the progress
 * message, the refusals written on the Node, and drainer.io/driver-stop, the record
 * of how the drivers were stopped (which a later run undoes only if this
 * configuration allows it). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "engine-int.h"

/* ---- the Node patch ---- */

static void on_node_patched(const struct kube_result *res, void *userdata) {
        struct engine *e = userdata;
        const char *rv;

        e->node_call = NULL;
        engine_note_idle(e);
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
                        return engine_finish(
                                e, res->error,
                                "--node-conditions: patching nodes/%s/status failed: %s (drainer's role "
                                "needs patch on nodes/status)",
                                e->o.node, res->message ? res->message : strerror(-res->error));
                log_debug("patching nodes/%s/status failed: %s, retrying", e->o.node, strna(res->message));
                return engine_retry_at(e, timesrc_now(e->ts) + 2 * USEC_PER_SEC);
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
                engine_retry_at(e, e->conflict_until);
                return engine_schedule_reconcile(e);
        }
        if (res->error < 0) {
                if (res->error == -EACCES || res->error == -EINVAL || res->error == -ENOENT)
                        return engine_finish(e, res->error, "patching node %s failed: %s", e->o.node,
                                             res->message ? res->message : strerror(-res->error));
                /* The client already retried transient errors; try again a bit later. */
                log_debug("patching node %s failed: %s, retrying", e->o.node, strna(res->message));
                return engine_retry_at(e, timesrc_now(e->ts) + 2 * USEC_PER_SEC);
        }
        rv = json_str(res->json, "metadata.resourceVersion");
        free(e->await_rv);
        e->await_rv = rv ? strdup(rv) : NULL;
        engine_schedule_reconcile(e);
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
                return engine_finish(e, -ENOMEM, "out of memory");
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
                return engine_finish(e, r, "cannot patch node %s: %s", e->o.node, strerror(-r));
        e->changed = true;
        e->wrote = true;
        e->wrote_at = timesrc_now(e->ts);
}

void engine_patch_node(struct engine *e, char *body) {
        patch_node_at(e, false, body);
}

void engine_patch_phase(struct engine *e, const struct node_rec *n, enum drain_phase p, const char *msg) {
        char *body = NULL;
        int r = drain_patch_phase(n, p, timesrc_realtime(e->ts), msg, &body);

        if (r < 0)
                return engine_finish(e, r, "cannot build the node patch: %s", strerror(-r));
        engine_patch_node(e, body);
        if (e->node_call) {
                e->patching_phase = true;
                e->patch_phase = p;
        }
}

/* A strategy's SET_LABEL (value NULL: remove the label). */
void engine_patch_label(struct engine *e, const struct node_rec *n, const char *key, const char *value) {
        char *body = NULL;
        int r = drain_patch_label(n, key, value, &body);

        if (r < 0)
                return engine_finish(e, r, "cannot build the node patch: %s", strerror(-r));
        engine_patch_node(e, body);
}

/* --node-conditions: the conditions follow the recorded phase before the phase's
 * first action (and once the drain is over); true when a patch went out. */
bool engine_sync_conditions(struct engine *e, const struct node_rec *n) {
        char *body = NULL;
        int r;

        /* The conditions say the node is being drained: a driver's drain is not that. */
        if (!e->o.node_conditions || e->scope)
                return false;
        r = drain_patch_conditions(n, e->st.has_phase, e->st.phase, timesrc_realtime(e->ts), &body);
        if (r < 0) {
                engine_finish(e, r, "cannot build the node conditions patch: %s", strerror(-r));
                return true;
        }
        if (r == 0)
                return false;
        patch_node_at(e, true, body);
        return true;
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
void engine_write_progress(struct engine *e, const struct node_rec *n) {
        uint64_t now = timesrc_now(e->ts), at;
        char *body = NULL;
        int r;

        if (!e->message || !e->st.has_phase || !drain_phase_changes_node(e->st.phase) ||
            message_is(&e->st, e->message))
                return;
        at = (e->wrote ? e->wrote_at : e->started_at) + PROGRESS_WRITE_USEC;
        if (now < at)
                return engine_retry_at(e, at);
        r = drain_patch_message(n, e->message, &body);
        if (r < 0)
                return engine_finish(e, r, "cannot build the node patch: %s", strerror(-r));
        engine_patch_node(e, body);
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

bool engine_patch_settled(struct engine *e, const struct node_rec *n) {
        if (e->node_call)
                return false; /* one Node patch at a time; its answer schedules the next reconcile */
        if (e->await_rv) {
                if (!rv_reached(n->resource_version, e->await_rv))
                        return false; /* the cache has not caught up with our own patch yet */
                e->await_rv = mfree(e->await_rv);
        }
        if (e->conflict_rv) {
                if (streq_ptr(n->resource_version, e->conflict_rv) && timesrc_now(e->ts) < e->conflict_until)
                        return false; /* a patch from this version was refused with 409: wait for a newer one */
                e->conflict_rv = mfree(e->conflict_rv);
        }
        return true;
}

/* ---- refusals written on the Node ---- */

void engine_refuse_preflight(struct engine *e) {
        char msg[2048];
        size_t len = 0;

        len += snprintf(msg, sizeof(msg), "refused by preflight (%zu blocker%s, nothing was changed)",
                        e->plan.n_blockers, e->plan.n_blockers == 1 ? "" : "s");
        for (size_t i = 0; i < e->plan.n_blockers && len < sizeof(msg) - 1; i++)
                len += snprintf(msg + len, sizeof(msg) - len, "; %s", e->plan.blockers[i].message);
        engine_finish(e, -EPERM, "%s", msg);
}

/* A refusal after preflight, with the node in a phase of a drain: nothing more is
 * done, drainer.io/message says why (one patch of the message only), then engine_finish()
 * posts the DrainerBlocked Event. A rerun that is allowed resumes from the phase. */
void engine_refuse_on_node(struct engine *e, const struct node_rec *n, const char *msg) {
        char *body = NULL;
        int r;

        if (message_is(&e->st, msg))
                return engine_finish(e, -EPERM, "%s", msg);
        engine_set_message(e, "%s", msg);
        r = drain_patch_message(n, msg, &body);
        if (r < 0)
                return engine_finish(e, r, "cannot build the node patch: %s", strerror(-r));
        engine_patch_node(e, body);
}

/* Blockers that hold at every eviction, found in a phase after preflight (written by
 * hand, or a pod that came later): the run stops before evicting anything more. */
void engine_refuse_blockers(struct engine *e, const struct node_rec *n, enum drain_phase ph) {
        size_t nb = plan_eviction_blockers(&e->plan), len = 0;
        char msg[DRAIN_MESSAGE_MAX];

        len += snprintf(msg, sizeof(msg),
                        "refused in phase %s (%zu blocker%s; evicting nothing more, the node stays in this "
                        "phase: rerun with the right flags to resume, or uncordon it)",
                        drain_phase_to_string(ph), nb, nb == 1 ? "" : "s");
        for (size_t i = 0; i < e->plan.n_blockers && len < sizeof(msg) - 1; i++)
                if (blocker_kind_holds_at_every_eviction(e->plan.blockers[i].kind))
                        len += snprintf(msg + len, sizeof(msg) - len, "; %s", e->plan.blockers[i].message);
        engine_refuse_on_node(e, n, msg);
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
void engine_refuse_record(struct engine *e, const struct node_rec *n, const struct driver_stop_record *r,
                          bool stop) {
        _cleanup_free_ char *flag = NULL, *have = NULL, *msg = NULL;
        const char *arg = e->o.plan.driver_stop_arg;
        int k;

        if (asprintf(&flag, "--driver-stop %s%s%s", r->ops->name, r->arg ? ":" : "", strempty(r->arg)) < 0 ||
            asprintf(&have, "--driver-stop %s%s%s", e->stop->ops->name, arg ? ":" : "", strempty(arg)) < 0)
                return engine_finish(e, -ENOMEM, "out of memory");
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
                return engine_finish(e, -ENOMEM, "out of memory");
        if (!e->needs_flag)
                e->needs_flag = TAKE_PTR(flag);
        engine_refuse_on_node(e, n, msg);
}

/* The first recorded stop this configuration may not undo, or NULL. */
const struct driver_stop_record *engine_undo_refused(const struct engine *e) {
        for (size_t s = 0; s < e->st.n_stops; s++) {
                const struct driver_stop_record *r = &e->st.stops[s];

                if (!r->ops->undo_allowed(e->stop->ops, e->o.plan.driver_stop_arg, r))
                        return r;
        }
        return NULL;
}

/* The first recorded stop that is not this configuration's own, or NULL. */
const struct driver_stop_record *engine_stop_not_configured(const struct engine *e) {
        for (size_t s = 0; s < e->st.n_stops; s++)
                if (!stop_is_configured(&e->o.plan, &e->st.stops[s]))
                        return &e->st.stops[s];
        return NULL;
}

/* Records how the drivers are stopped; with_phase: in the same write as the move to
 * stop-drivers (from wait-released: the two follow each other at once). */
void engine_record_driver_stop(struct engine *e, const struct node_rec *n, bool with_phase) {
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
                                return engine_finish(e, -ENOMEM, "out of memory");
                        break;
                }
        }
        rec.daemonset = ds;
        {
                /* The DRA driver names published for this node: restore waits for them again. */
                struct node_input in;

                if (node_view_collect(e->view, &in) < 0)
                        return engine_finish(e, -ENOMEM, "out of memory");
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
                return engine_finish(e, r, "cannot build the node patch: %s", strerror(-r));
        engine_patch_node(e, body);
}

size_t engine_driver_pods(const struct plan *p, bool healthy_only) {
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

/* What the strategy's ops are shown of the node. */
struct driver_stop_view engine_driver_view(struct engine *e, const struct node_rec *n) {
        return (struct driver_stop_view){
                .node = n,
                .driver_pods = engine_driver_pods(&e->plan, false),
                .driver_pods_ready = engine_driver_pods(&e->plan, true),
        };
}
