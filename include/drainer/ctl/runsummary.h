/* The -o json summaries of a run of the fleet (fleet.h's fleet_node) and of a driver's
 * rollout (rollout-runner.h). A fleet run's: what the run did,
 * how it ended, the phases with their times, the Node as last seen, the blockers of a
 * refusal. Built from what the fleet knows; the caller adds what is its own (the kind of
 * failure as its exit code names it, the rerun command, the process's figures). */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "drainer/ctl/fleet.h"
#include "drainer/drain/plan.h"

/* The summary's schema: 1 since the metrics left it (--metrics-in-output). */
#define RUN_SUMMARY_SCHEMA_VERSION 1

/* The head of every summary: schemaVersion (not for an item of a list), node, verb and
 * result, each left out when NULL. NULL only for out of memory. */
cJSON *run_summary_new(bool in_list, const char *node, const char *verb, const char *result);

/* A failure before anything was read from the Node (bad flags, an invalid kubeconfig,
 * an API server that cannot be reached): {schemaVersion, node (when given), verb,
 * result "done" for exit code 0 else "error", error (when given), message ("failed"
 * when none), exitCode}, and nothing it did not observe. NULL only for out of memory. */
cJSON *run_summary_error(const char *verb, const char *node, int exit_code, const char *error,
                         const char *message);
/* A list of summaries (-l, several --driver): {schemaVersion, kind "List", verb,
 * selector (when given), maxParallel (when not 0), items [], exitCode}. NULL only for
 * out of memory. */
cJSON *run_summary_list_new(const char *verb, const char *selector, unsigned max_parallel, int exit_code);
/* maintain of a driver that upgrades seamlessly (the command ran, nothing was
 * drained): {seamlessUpgrade {seamless, daemonset, reason}, schemaVersion, node, verb,
 * result, changed, podsEvicted, commandExitStatus, exitCode}. NULL only for out of
 * memory. */
cJSON *run_summary_seamless(const char *node, const char *verb, int command_status, const char *daemonset,
                            const char *reason, int exit_code);
/* A driver's run refused before anything changed (its stop key could not be read):
 * {schemaVersion, node, verb, driver, result "refused", changed false, message,
 * exitCode}. NULL only for out of memory. */
cJSON *run_summary_refused(const char *node, const char *verb, const char *driver, const char *message,
                           int exit_code);

/* The blockers a refusal of n names: all of them in preflight; later, those that hold
 * at every eviction (a driver being stopped is unhealthy by design). */
bool fleet_node_blocker_listed(const struct fleet_node *n, const struct plan_blocker *b);

struct run_summary_options {
        const char *verb;
        /* 0, -ETIMEDOUT, -EPERM (refused), -EINTR (interrupted), else an error */
        int result;
        const char *error;   /* a failure's kind ("result" "error", "timeout", "refused"), or NULL */
        const char *message; /* instead of the run's own message (e.g. what the API server said) */
        const char *rerun;   /* the command that allows a recorded action, or NULL */
        uint64_t now_usec;   /* for "seconds", since the run's first start */
        bool in_list;        /* an item of a list: no schemaVersion */
};

/* n's summary. NULL only for out of memory. */
cJSON *fleet_node_summary_json(const struct fleet_node *n, const struct run_summary_options *o);

struct driver_rollout;

/* How many nodes of the rollout were updated, and how many were on the update revision
 * already. */
void driver_rollout_count(const struct driver_rollout *ro, size_t *ret_updated, size_t *ret_skipped);
/* The worst node decides how the rollout ended: DRIVER_ROLLOUT_FAILED if a node failed,
 * else _TIMEOUT if one timed out, else _REFUSED if one was refused, else
 * DRIVER_ROLLOUT_UPDATED (every node updated, skipped or not visited). */
enum driver_rollout_result driver_rollout_worst(const struct driver_rollout *ro);
/* The rollout's summary: {daemonset, driver, revision, maxParallel, nodes: [{node,
 * result, step, replacedPod, driverOutSeconds, podsKeptRunning, message}], updated,
 * skipped, seconds, interrupted, exitCode}. NULL only for out of memory. */
cJSON *driver_rollout_summary_json(const struct driver_rollout *ro, const char *daemonset,
                                   const char *driver, unsigned max_parallel, double seconds,
                                   bool interrupted, int exit_code);
