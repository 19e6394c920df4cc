/* The rollout runner: a DRA driver's DaemonSet (updateStrategy OnDelete) rolled out
 * node by node, each node's step decided again from its Node, pods, claims and slices
 * (drain/rollout.h has the steps and why each is safe) and carried out with the engine
 * (the driver-scoped drain and restore of the drain profile), the Eviction API and the
 * drain slots. Everything asynchronous on the loop of the caller: reads by callback,
 * waits by timers of the time source; no output, no exit code: progress and the
 * outcome through the callbacks below, each node's result through
 * driver_rollout_node_status(). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/base/macro.h"

struct announcer;
struct drain_profile;
struct kube_client;
struct slots;
struct timesrc;
struct transport;
struct driver_rollout;

/* A rollout refused because the DaemonSet is not OnDelete (or a node is drained by
 * someone else) ends with -EPERM; a node whose driver does not come back within the
 * timeout with -ETIMEDOUT. */
struct driver_rollout_options {
        const char *ds_namespace, *ds_name; /* the driver's DaemonSet (copied) */
        const char *driver;                 /* the DRA driver's name, as in its slices (copied) */
        unsigned max_parallel;              /* nodes in progress at once in this process (>= 1) */
        uint64_t timeout_usec;              /* per node, from the moment it holds its slot */
        /* Borrowed, must outlive the runner: the engine options of each node's drain and
         * restore (scoped to driver, driver-stop none). */
        const struct drain_profile *profile;
        struct transport *transport; /* borrowed: the engine's health probes */
        struct slots *slots;         /* borrowed; NULL: no cluster-wide drain slots */
        const char *lease_namespace; /* where the slots are, for messages; may be NULL */
        struct announcer *announcer; /* borrowed; NULL: no Events */
};

enum driver_rollout_result {
        DRIVER_ROLLOUT_NOT_STARTED, /* not visited (the rollout stopped before it) */
        DRIVER_ROLLOUT_INTERRUPTED, /* in progress when the runner was stopped */
        DRIVER_ROLLOUT_SKIPPED,     /* already on the update revision */
        DRIVER_ROLLOUT_UPDATED,
        DRIVER_ROLLOUT_TIMEOUT, /* the node's step not done within the timeout */
        DRIVER_ROLLOUT_REFUSED, /* someone else's drain of the node or the driver */
        DRIVER_ROLLOUT_FAILED,
        _DRIVER_ROLLOUT_RESULT_MAX,
};

/* "not-started", "interrupted", "skipped", "updated", "timeout", "refused", "failed" */
const char *driver_rollout_result_to_string(enum driver_rollout_result result);

/* One node as the runner left it (strings borrowed: valid until the runner is freed). */
struct driver_rollout_node_status {
        const char *name;
        enum driver_rollout_result result;
        int error;            /* the negative errno of a node that failed, else 0 */
        const char *step;     /* the last step decided (rollout_step_to_string), "" if none */
        const char *message;  /* the last progress or the end, or NULL */
        const char *replaced; /* "ns/name" of the old plugin pod this run evicted, "" if none */
        bool has_out;         /* out_usec is known: the driver went out and came back */
        uint64_t out_usec;    /* the driver out of service: old pod evicted -> back */
        size_t pods_kept;     /* the node's other pods running throughout (same UIDs) */
};

struct driver_rollout_callbacks {
        /* The DaemonSet was read and checked: revision is the update revision's hash,
         * n_nodes the nodes to visit, in order. */
        void (*on_planned)(struct driver_rollout *rollout, const char *revision, size_t n_nodes,
                           void *userdata);
        /* A node's progress changed (a new message). */
        void (*on_progress)(struct driver_rollout *rollout, const char *node, const char *message,
                            void *userdata);
        /* A node ended: error 0 (updated or skipped) or negative errno; the message says so. */
        void (*on_node_done)(struct driver_rollout *rollout, const char *node, int error,
                             const char *message, void *userdata);
        /* Once, from the loop: every node was visited, or the first failure stopped the
         * rollout (error 0: each node's status says how it ended), or the rollout could
         * not start (error: -EPERM refused, -ETIMEDOUT the DaemonSet controller never
         * observed the newest spec, another negative errno a read that failed; message
         * says why). Not after driver_rollout_stop(). */
        void (*on_finished)(struct driver_rollout *rollout, int error, const char *message, void *userdata);
};

/* Copies what it needs of o. 0, -EINVAL (a bad option) or -ENOMEM. */
int driver_rollout_new(struct kube_client *client, struct timesrc *ts,
                       const struct driver_rollout_options *o, const struct driver_rollout_callbacks *cb,
                       void *userdata, struct driver_rollout **ret);
/* Reads the DaemonSet, its revisions and nodes, then runs the nodes. Returns at once:
 * 0, or a negative errno (nothing started). */
int driver_rollout_start(struct driver_rollout *rollout);
/* Something the runner cannot see changed (the drain slots): it re-evaluates. */
void driver_rollout_poke(struct driver_rollout *rollout);
/* Stops everything it started (engines, calls, watches, timers): nodes in progress end
 * as interrupted, their Nodes keep their state for the next run. stopped runs once,
 * from the loop (never from inside this call), when the last of it has closed; then
 * the runner may be freed. */
void driver_rollout_stop(struct driver_rollout *rollout, void (*stopped)(void *userdata), void *userdata);

const char *driver_rollout_revision(const struct driver_rollout *rollout); /* NULL before on_planned */
size_t driver_rollout_n_nodes(const struct driver_rollout *rollout);
void driver_rollout_node_status(const struct driver_rollout *rollout, size_t i,
                                struct driver_rollout_node_status *ret);

/* Only once stopped (or never started). NULL ok. */
void driver_rollout_free(struct driver_rollout *rollout);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct driver_rollout *, driver_rollout_free);
