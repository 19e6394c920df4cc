/* `drainer rollout NAMESPACE/DAEMONSET`: the decisions of a DRA
 * driver's rollout across the cluster, node by node, for a driver without seamless
 * upgrade. Pure functions over what was observed (the DaemonSet, its
 * ControllerRevisions, the Node and its pods, claims and slices); the rollout runner
 * (ctl/rollout.c, rollout-runner.h) carries the steps out with the engine (the driver-scoped drain
 * and restore of --driver), the Eviction API and the drain slots.
 *
 * One node's rollout, each step level-triggered from the Node's state, so that a
 * rollout killed anywhere resumes where its Node stands:
 *
 *   drain    write drainer.io/rollout.DRIVER=HASH (the update revision), then the
 *            driver-scoped drain (--driver DRIVER --driver-stop none): a NoSchedule
 *            DeviceTaintRule (or the cordon fallback), the driver's claim holders
 *            evicted, until no claim of the driver is on the node (state drained);
 *   replace  evict the old plugin pod (its own grace period, never 0) once the
 *            Node says drained and no claim of the driver is on the node: the
 *            DaemonSet (updateStrategy OnDelete) creates the update revision's pod;
 *   wait     until no pod of an old revision is left on the node and the new one is
 *            Running and Ready;
 *   restore  the driver-scoped uncordon: health (gRPC probe if configured), its
 *            ResourceSlices published again, then the rules deleted and every
 *            drainer.io/KEY.DRIVER key (the rollout key too) removed.
 *
 * The update revision is what the DaemonSet controller creates pods from
 * (pkg/controller/daemon/update.go constructHistory): its ControllerRevision whose
 * revision is the highest of those it controls, label controller-revision-hash;
 * the controller stamps the same label on every pod it creates. It is known only
 * once status.observedGeneration has reached metadata.generation. */
#pragma once

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/kube/objects.h"

/* The record of a node's rollout: drainer.io/rollout.DRIVER = the revision hash it
 * rolls the node to, written before the drain starts (a rollout key without a driver
 * state: the drain was not started yet, or it has just ended). */
#define ROLLOUT_ANN_PREFIX "drainer.io/rollout."
#define ROLLOUT_HASH_LABEL "controller-revision-hash"

/* The DaemonSet as rollout needs it. Strings borrowed from the JSON it was read from. */
struct rollout_daemonset {
        const char *ns, *name, *uid;
        bool on_delete;       /* spec.updateStrategy.type OnDelete */
        const char *strategy; /* spec.updateStrategy.type as written, "RollingUpdate" if unset */
        int64_t generation;   /* metadata.generation */
        int64_t observed;     /* status.observedGeneration */
};

/* Reads ds (apps/v1 DaemonSet). 0, or -EINVAL with msg naming what is missing. */
int rollout_daemonset_parse(const cJSON *ds, struct rollout_daemonset *ret, char *msg, size_t size);

/* Preflight: 0 when the DaemonSet may be rolled out by drainer; -EPERM with msg the
 * refusal and how to set OnDelete (a RollingUpdate would replace the plugin pods
 * itself, under the drained workloads' feet); -EAGAIN while the controller has not
 * observed the newest spec (observedGeneration < generation). */
int rollout_preflight(const struct rollout_daemonset *ds, char *msg, size_t size);

/* The update revision's hash from the items of a ControllerRevision list (apps/v1):
 * of those whose controller ownerReference has ds_uid, the highest .revision. 0 with
 * *ret borrowed from items; -ENOENT when none is the DaemonSet's; -EINVAL when the
 * newest has no controller-revision-hash label. */
int rollout_update_revision(const cJSON *items, const char *ds_uid, const char **ret);

/* A pod's revision hash (label controller-revision-hash), or NULL. */
const char *rollout_pod_revision(const struct pod_rec *p);
/* Whether p is a pod of the DaemonSet (its controller ownerReference's uid). */
bool rollout_pod_of(const struct pod_rec *p, const char *ds_uid);

enum rollout_step {
        ROLLOUT_STEP_DONE,    /* on the update revision, Ready, no state left: nothing to do */
        ROLLOUT_STEP_DRAIN,   /* (record and) run or resume the driver-scoped drain */
        ROLLOUT_STEP_REPLACE, /* evict the old plugin pod */
        ROLLOUT_STEP_WAIT,    /* the old pod is going / the new one not Ready yet */
        ROLLOUT_STEP_RESTORE, /* run or resume the driver-scoped restore */
        ROLLOUT_STEP_CLEAR,   /* only the rollout key is left: remove it */
        ROLLOUT_STEP_FOREIGN, /* a drain of this driver (or the node) not this rollout's: refuse */
        _ROLLOUT_STEP_MAX,
        _ROLLOUT_STEP_INVALID = -EINVAL,
};

/* "done", "drain", "replace", "wait", "restore", "clear", "foreign" */
const char *rollout_step_to_string(enum rollout_step s);

/* What a node's step is decided from (all borrowed). */
struct rollout_node_input {
        const struct node_rec *node;
        const char *driver; /* the DRA driver's name (ResourceSlice spec.driver) */
        const char *ds_uid;
        const char *target; /* the update revision's hash */
        const struct pod_rec *const *pods;
        size_t n_pods;
        const struct claim_rec *const *claims;
        size_t n_claims;
        const struct slice_rec *const *slices;
        size_t n_slices;
};

/* What a node's pods, claims and slices say, for the step and for messages. */
struct rollout_node_facts {
        size_t old_pods;           /* pods of the DaemonSet of another revision (deleting ones too) */
        size_t old_deleting;       /* ... of them being deleted */
        const struct pod_rec *old; /* one old pod not being deleted, or NULL */
        size_t new_pods;           /* of the update revision, not deleting */
        size_t new_ready;          /* ... Running and Ready */
        size_t claims;             /* claims with a device of the driver on the node that
                                    * need it (not those whose devices of it skip
                                    * NodeUnprepareResources, nor a PodGroup's no pod
                                    * here uses) */
        bool slices;               /* a ResourceSlice of the driver with spec.nodeName == node */
        bool has_state;            /* drainer.io/state.DRIVER is set */
        int phase;                 /* its phase (enum drain_phase), when has_state */
        bool has_record;           /* drainer.io/rollout.DRIVER is set */
        const char *record;        /* its value (borrowed), or NULL */
        const char *node_drain;    /* a node drain's drainer.io/state, or NULL */
};

void rollout_node_facts(const struct rollout_node_input *in, struct rollout_node_facts *ret);

/* The next step of one node (see above); msg says why, for the progress. Decided
 * from the Node's state, so it is the same after a crash:
 *   - a node drain running, or drainer.io/state.DRIVER without this rollout's record:
 *     FOREIGN (someone else's drain: never taken over);
 *   - no state, no record: DONE when no old pod is left and a new one is Ready (also
 *     when the DaemonSet has no pod here), else DRAIN;
 *   - a record without state: DRAIN while an old pod is here, CLEAR once the new pod
 *     is Ready, else WAIT;
 *   - state before drained: DRAIN (the engine resumes);
 *   - drained: REPLACE while an old pod is not being deleted, WAIT until no old pod is
 *     left and a new one is Ready, then RESTORE;
 *   - restore-drivers or uncordon: RESTORE.
 * REPLACE is never returned while a claim of the driver is on the node: the
 * driver stays until they are released (DRAIN instead: the engine waits for them). */
enum rollout_step rollout_node_step(const struct rollout_node_input *in, char *msg, size_t size);

/* The annotation key of the rollout record: "drainer.io/rollout.DRIVER" in buf. */
const char *rollout_record_key(const char *driver, char *buf, size_t size);
/* A merge patch of the Node that sets (hash) or removes (hash NULL) the record. */
int rollout_patch_record(const char *driver, const char *hash, char **ret);

/* Whether a node's --timeout is over. It counts from started (monotonic µs), when the
 * node's step started with its drain slot taken; 0 means not started: the wait for a
 * slot (another node's rollout or drain) counts nothing. */
bool rollout_timed_out(uint64_t started, uint64_t now, uint64_t timeout);
/* Whether a node that failed keeps its drain slot: while its Node records a drain of
 * the driver (drainer.io/state.DRIVER) or of the node (drainer.io/state), something of
 * it is out of service and the slot says so to every other drainer (until the Lease
 * expires, once nobody renews it). Otherwise nothing was changed: it gives it back. */
bool rollout_failed_keeps_slot(const struct node_rec *n, const char *driver);
