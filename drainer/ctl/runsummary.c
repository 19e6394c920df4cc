/* The -o json summaries of a fleet run and of a driver's rollout (runsummary.h), built
 * from the fleet's and the rollout runner's records. Owns nothing; prints nothing: the document goes back to the caller. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "drainer/base/macro.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/rollout-runner.h"
#include "drainer/ctl/runsummary.h"

cJSON *run_summary_new(bool in_list, const char *node, const char *verb, const char *result) {
        cJSON *j = cJSON_CreateObject();

        if (!j)
                return NULL;
        if (!in_list)
                cJSON_AddNumberToObject(j, "schemaVersion", RUN_SUMMARY_SCHEMA_VERSION);
        if (node)
                cJSON_AddStringToObject(j, "node", node);
        if (verb)
                cJSON_AddStringToObject(j, "verb", verb);
        if (result)
                cJSON_AddStringToObject(j, "result", result);
        return j;
}

cJSON *run_summary_error(const char *verb, const char *node, int exit_code, const char *error,
                         const char *message) {
        cJSON *j = run_summary_new(false, node, verb, exit_code == 0 ? "done" : "error");

        if (!j)
                return NULL;
        if (error)
                cJSON_AddStringToObject(j, "error", error);
        cJSON_AddStringToObject(j, "message", message && *message ? message : "failed");
        /* nothing was read from the Node: neither nodeReady nor changed is claimed */
        cJSON_AddNumberToObject(j, "exitCode", exit_code);
        return j;
}

cJSON *run_summary_list_new(const char *verb, const char *selector, unsigned max_parallel, int exit_code) {
        cJSON *j = cJSON_CreateObject();

        if (!j)
                return NULL;
        cJSON_AddNumberToObject(j, "schemaVersion", RUN_SUMMARY_SCHEMA_VERSION);
        cJSON_AddStringToObject(j, "kind", "List");
        cJSON_AddStringToObject(j, "verb", verb);
        if (selector)
                cJSON_AddStringToObject(j, "selector", selector);
        if (max_parallel)
                cJSON_AddNumberToObject(j, "maxParallel", max_parallel);
        cJSON_AddArrayToObject(j, "items");
        cJSON_AddNumberToObject(j, "exitCode", exit_code);
        return j;
}

cJSON *run_summary_seamless(const char *node, const char *verb, int command_status, const char *daemonset,
                            const char *reason, int exit_code) {
        cJSON *j = cJSON_CreateObject();
        cJSON *sj = j ? cJSON_AddObjectToObject(j, "seamlessUpgrade") : NULL;

        if (!sj) {
                cJSON_Delete(j);
                return NULL;
        }
        cJSON_AddNumberToObject(j, "schemaVersion", RUN_SUMMARY_SCHEMA_VERSION);
        cJSON_AddStringToObject(j, "node", node);
        cJSON_AddStringToObject(j, "verb", verb);
        cJSON_AddStringToObject(j, "result", command_status == 0 ? "done" : "error");
        cJSON_AddBoolToObject(j, "changed", false);
        cJSON_AddNumberToObject(j, "podsEvicted", 0);
        cJSON_AddNumberToObject(j, "commandExitStatus", command_status);
        cJSON_AddBoolToObject(sj, "seamless", true);
        cJSON_AddStringToObject(sj, "daemonset", daemonset);
        cJSON_AddStringToObject(sj, "reason", reason);
        cJSON_AddNumberToObject(j, "exitCode", exit_code);
        return j;
}

cJSON *run_summary_refused(const char *node, const char *verb, const char *driver, const char *message,
                           int exit_code) {
        cJSON *j = run_summary_new(false, node, verb, NULL);

        if (!j)
                return NULL;
        cJSON_AddStringToObject(j, "driver", driver);
        cJSON_AddStringToObject(j, "result", "refused");
        cJSON_AddBoolToObject(j, "changed", false);
        cJSON_AddStringToObject(j, "message", message);
        cJSON_AddNumberToObject(j, "exitCode", exit_code);
        return j;
}

bool fleet_node_blocker_listed(const struct fleet_node *n, const struct plan_blocker *b) {
        return !n->summary.changed || blocker_kind_holds_at_every_eviction(b->kind);
}

static const char *result_string(int result) {
        return result == 0            ? "done"
               : result == -ETIMEDOUT ? "timeout"
               : result == -EPERM     ? "refused"
               : result == -EINTR     ? "interrupted"
                                      : "error";
}

static void add_message(cJSON *j, const struct fleet_node *n, const struct run_summary_options *o) {
        _cleanup_free_ char *m = NULL;

        if (o->message)
                cJSON_AddStringToObject(j, "message", o->message);
        else if (n->message)
                cJSON_AddStringToObject(j, "message", n->message);
        else if (o->result == -EINTR && !n->total.changed && !n->has_phase)
                cJSON_AddStringToObject(j, "message", "interrupted before it changed anything on the node");
        else if (o->result == -EINTR &&
                 /* the engine never finished: what its progress last said */
                 asprintf(&m,
                          "interrupted in phase %s%s%s%s: the state is on node %s; run the same command "
                          "again to resume",
                          n->has_phase ? drain_phase_to_string(n->phase) : "preflight",
                          n->progress_message ? " (" : "", strempty(n->progress_message),
                          n->progress_message ? ")" : "", n->node) >= 0)
                cJSON_AddStringToObject(j, "message", m);
}

/* --driver: the drivers, and how new claims were kept off their devices. */
static void add_scope(cJSON *j, const struct fleet_node *n) {
        const struct drain_profile *pr = n->profile;
        cJSON *sc = cJSON_AddObjectToObject(j, "scope"),
              *dr = sc ? cJSON_AddArrayToObject(sc, "drivers") : NULL;

        for (size_t i = 0; dr && i < pr->n_drivers; i++)
                cJSON_AddItemToArray(dr, cJSON_CreateString(pr->drivers[i]));
        if (sc && n->summary_valid && n->summary.isolation < _PLAN_ISOLATION_MAX)
                cJSON_AddStringToObject(sc, "isolation",
                                        n->summary.isolation == PLAN_ISOLATE_TAINT_RULE ? "deviceTaintRule"
                                                                                        : "cordon");
}

/* The Node as last seen: not Ready means its kubelet can neither finish the evicted pods
 * nor unprepare their claims; the out-of-service taint, and who applied it. */
static void add_node(cJSON *j, const struct fleet_node *n) {
        if (n->summary_valid && n->summary.node_seen) {
                cJSON_AddBoolToObject(j, "nodeReady", !n->summary.node_not_ready);
                if (n->summary.out_of_service)
                        cJSON_AddStringToObject(j, "outOfServiceTaint",
                                                n->summary.out_of_service_by_drainer
                                                        ? "applied by drainer"
                                                        : "applied by someone else");
        } else if (n->progress_seen && n->node_seen) {
                /* interrupted: the last progress */
                cJSON_AddBoolToObject(j, "nodeReady", !n->node_not_ready);
                if (n->out_of_service)
                        cJSON_AddStringToObject(j, "outOfServiceTaint", "on the node");
        } else
                /* never read (the API server did not answer, no such node): unknown, not true */
                cJSON_AddNullToObject(j, "nodeReady");
}

cJSON *fleet_node_summary_json(const struct fleet_node *n, const struct run_summary_options *o) {
        const struct plan *plan = n->summary.plan;
        cJSON *j = run_summary_new(o->in_list, n->node, o->verb, result_string(o->result)), *phases;

        if (!j)
                return NULL;
        if (o->result < 0 && o->result != -EINTR && o->error)
                cJSON_AddStringToObject(j, "error", o->error);
        add_message(j, n, o);
        /* false only for a refusal in preflight (or nothing to do): the node is as it was. */
        cJSON_AddBoolToObject(j, "changed", n->total.changed);
        if (o->rerun)
                cJSON_AddStringToObject(j, "rerun", o->rerun);
        if (n->summary.has_phase)
                cJSON_AddStringToObject(j, "phase", drain_phase_to_string(n->summary.last_phase));
        else if (o->result == -EINTR && n->has_phase) /* interrupted: its last progress */
                cJSON_AddStringToObject(j, "phase", drain_phase_to_string(n->phase));
        if (n->profile->n_drivers > 0)
                add_scope(j, n);
        phases = cJSON_AddArrayToObject(j, "phases");
        for (int p = 0; p < _DRAIN_PHASE_MAX; p++)
                if (n->total.phase_seen[p]) {
                        cJSON *ph = cJSON_CreateObject();

                        cJSON_AddStringToObject(ph, "name", drain_phase_to_string(p));
                        cJSON_AddNumberToObject(ph, "seconds", (double)n->total.phase_usec[p] / 1e6);
                        cJSON_AddItemToArray(phases, ph);
                }
        add_node(j, n);
        cJSON_AddNumberToObject(j, "podsEvicted", (double)n->total.pods_evicted);
        cJSON_AddNumberToObject(j, "claimsWaitedFor", (double)n->total.claims_waited);
        /* Evictions answered NamespaceTerminating: retried until the namespace controller
         * marked the pod deleted, then waited for (kubectl drain's rule). */
        if (n->n_ns_terminating > 0) {
                cJSON *nt = cJSON_AddArrayToObject(j, "waitedForNamespaceDeletion");

                for (size_t i = 0; nt && i < n->n_ns_terminating; i++)
                        cJSON_AddItemToArray(nt, cJSON_CreateString(n->ns_terminating[i]));
        }
        if (n->command_status >= 0)
                cJSON_AddNumberToObject(j, "commandExitStatus", n->command_status);
        if (o->result == -EPERM && plan && plan->n_blockers > 0) {
                cJSON *b = cJSON_AddArrayToObject(j, "blockers");

                for (size_t i = 0; i < plan->n_blockers; i++)
                        if (fleet_node_blocker_listed(n, &plan->blockers[i]))
                                cJSON_AddItemToArray(b, cJSON_CreateString(plan->blockers[i].message));
        }
        cJSON_AddNumberToObject(j, "seconds", (double)(o->now_usec - n->started_usec) / 1e6);
        return j;
}

/* ---- a driver's rollout ---- */

static cJSON *rollout_node_json(const struct driver_rollout_node_status *st) {
        cJSON *j = cJSON_CreateObject();

        if (!j)
                return NULL;
        cJSON_AddStringToObject(j, "node", st->name);
        cJSON_AddStringToObject(j, "result", driver_rollout_result_to_string(st->result));
        if (st->step[0])
                cJSON_AddStringToObject(j, "step", st->step);
        if (st->replaced[0])
                cJSON_AddStringToObject(j, "replacedPod", st->replaced);
        if (st->has_out)
                cJSON_AddNumberToObject(j, "driverOutSeconds", (double)st->out_usec / USEC_PER_SEC);
        if (st->result == DRIVER_ROLLOUT_UPDATED)
                cJSON_AddNumberToObject(j, "podsKeptRunning", (double)st->pods_kept);
        if (st->message)
                cJSON_AddStringToObject(j, "message", st->message);
        return j;
}

void driver_rollout_count(const struct driver_rollout *ro, size_t *ret_updated, size_t *ret_skipped) {
        size_t n = driver_rollout_n_nodes(ro);

        *ret_updated = *ret_skipped = 0;
        for (size_t i = 0; i < n; i++) {
                struct driver_rollout_node_status st;

                driver_rollout_node_status(ro, i, &st);
                *ret_updated += st.result == DRIVER_ROLLOUT_UPDATED;
                *ret_skipped += st.result == DRIVER_ROLLOUT_SKIPPED;
        }
}

enum driver_rollout_result driver_rollout_worst(const struct driver_rollout *ro) {
        size_t n = driver_rollout_n_nodes(ro);
        bool timeout = false, refused = false;

        for (size_t i = 0; i < n; i++) {
                struct driver_rollout_node_status st;

                driver_rollout_node_status(ro, i, &st);
                if (st.result == DRIVER_ROLLOUT_FAILED)
                        return DRIVER_ROLLOUT_FAILED;
                timeout |= st.result == DRIVER_ROLLOUT_TIMEOUT;
                refused |= st.result == DRIVER_ROLLOUT_REFUSED;
        }
        return timeout ? DRIVER_ROLLOUT_TIMEOUT : refused ? DRIVER_ROLLOUT_REFUSED : DRIVER_ROLLOUT_UPDATED;
}

cJSON *driver_rollout_summary_json(const struct driver_rollout *ro, const char *daemonset,
                                   const char *driver, unsigned max_parallel, double seconds,
                                   bool interrupted, int exit_code) {
        size_t n = driver_rollout_n_nodes(ro), updated, skipped;
        cJSON *j = cJSON_CreateObject(), *items = j ? cJSON_AddArrayToObject(j, "nodes") : NULL;

        if (!items) {
                cJSON_Delete(j);
                return NULL;
        }
        driver_rollout_count(ro, &updated, &skipped);
        cJSON_AddStringToObject(j, "daemonset", daemonset);
        cJSON_AddStringToObject(j, "driver", driver);
        cJSON_AddStringToObject(j, "revision", strna(driver_rollout_revision(ro)));
        cJSON_AddNumberToObject(j, "maxParallel", max_parallel);
        for (size_t i = 0; i < n; i++) {
                struct driver_rollout_node_status st;

                driver_rollout_node_status(ro, i, &st);
                cJSON_AddItemToArray(items, rollout_node_json(&st));
        }
        cJSON_AddNumberToObject(j, "updated", (double)updated);
        cJSON_AddNumberToObject(j, "skipped", (double)skipped);
        cJSON_AddNumberToObject(j, "seconds", seconds);
        cJSON_AddBoolToObject(j, "interrupted", interrupted);
        cJSON_AddNumberToObject(j, "exitCode", exit_code);
        return j;
}
