/* The drain plan: classification of a node's pods into ordered eviction
 * groups, the claims that must be released, the driver pods and how each is
 * stopped, the PodDisruptionBudgets that hold evictions back, and every
 * preflight blocker. Pure: built from records, printed as text or JSON. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "drainer/dra/claims.h"
#include "drainer/dra/driverstop.h"
#include "drainer/dra/taintrule.h"
#include "drainer/drain/device.h"
#include "drainer/drain/state.h"
#include "drainer/kube/objects.h"

struct selector;
struct node_input;
struct seamless_answer;

/* Eviction groups, in the order a drain acts. Within the claim holders and the
 * rest, non-critical pods go before system-cluster-critical/system-node-critical
 * ones (priorityClassName), as Karpenter orders. */
enum evict_group {
        EVICT_GROUP_CLAIM_HOLDERS,          /* phase evict-claim-holders, first */
        EVICT_GROUP_CLAIM_HOLDERS_CRITICAL, /* phase evict-claim-holders, after the above are accepted */
        EVICT_GROUP_REST,                   /* phase evict-rest */
        EVICT_GROUP_REST_CRITICAL,
        EVICT_GROUP_DRIVERS, /* phase stop-drivers, if the strategy evicts driver pods (taint) */
        EVICT_GROUP_NONE,    /* stays: mirror, DaemonSet without claims, finished, filtered */
        _EVICT_GROUP_MAX,
        _EVICT_GROUP_INVALID = -EINVAL,
};
const char *evict_group_to_string(enum evict_group g); /* "claim-holders", "claim-holders-critical", "rest",
                                                        * "rest-critical", "drivers", "none" */

enum blocker_kind {
        BLOCKER_UNMANAGED,          /* no controller, needs --force */
        BLOCKER_EMPTYDIR,           /* emptyDir, needs --delete-emptydir-data */
        BLOCKER_DS_CLAIM_TOLERATES, /* claim-holding DaemonSet pod tolerating the drain taint: it would come back */
        BLOCKER_DRIVER_TOLERATES, /* the strategy cannot stop this driver pod (taint: it tolerates the drain
                                   * taint; driver_stop_ops.pod_blocker) */
        BLOCKER_DRIVER_UNHEALTHY, /* driver pod not Running+Ready (plan_build, unless ignore_driver_health),
                                   * or its health probe failed (added by the caller) */
        BLOCKER_MULTIPLE_PDBS,    /* a running pod covered by more than one PDB: the Eviction API answers 500
                                   * "This pod has more than one PodDisruptionBudget..." on every try */
        BLOCKER_CLAIM_HOLDER_FILTERED, /* holds claims, kept by --pod-selector: wait-released cannot end */
        BLOCKER_DRAIN_EXCLUSIVE, /* a node drain and a driver drain (--driver) of the node exclude each other */
        BLOCKER_DRIVER_STOP_KEY, /* --driver without --driver-stop: the driver DaemonSet's nodeSelector has
                                  * no single key to stop it by (added by the caller, driverkey.h) */
        BLOCKER_DEVICE_UNKNOWN,  /* --device: the node publishes no such device (added by the caller) */
        _BLOCKER_KIND_MAX,
        _BLOCKER_KIND_INVALID = -EINVAL,
};
/* "unmanaged", "emptydir", "daemonset-claim-tolerates", "driver-tolerates", "driver-unhealthy",
 * "multiple-pdbs", "claim-holder-filtered", "drain-exclusive", "driver-stop-key", "device-unknown"; NULL if out
 * of range */
const char *blocker_kind_to_string(enum blocker_kind k);
/* Whether a blocker of this kind is a rule of the evictions themselves (every kind
 * but driver-unhealthy): it holds at every eviction of every phase, not only in
 * preflight, whatever drainer.io/state says. */
bool blocker_kind_holds_at_every_eviction(enum blocker_kind k);

/* How a drain keeps new work off what it takes out of service. */
enum plan_isolation {
        PLAN_ISOLATE_CORDON,          /* a node drain: cordon + the drain taint */
        PLAN_ISOLATE_TAINT_RULE,      /* --driver: a NoSchedule DeviceTaintRule per pool of the driver */
        PLAN_ISOLATE_CORDON_FALLBACK, /* --driver, no DeviceTaintRule served: cordon the node after all */
        _PLAN_ISOLATION_MAX,
};

struct plan_options {
        const struct selector
                *pod_selector; /* --pod-selector: only matching pods are evicted (NULL = all) */
        const struct selector *const *driver_selectors; /* parsed --driver-selector, or the defaults */
        size_t n_driver_selectors;
        const char *const *driver_namespaces; /* --driver-namespace: driver pods only there (none: any) */
        size_t n_driver_namespaces;
        bool force; /* evict pods without a controller */
        bool delete_emptydir_data;
        const struct driver_stop_ops *driver_stop; /* how drivers are stopped; NULL: the default (taint) */
        const char *driver_stop_arg;               /* its ARG: label key / unit */
        const char *driver_stop_arg_from;          /* where the ARG was read ("DaemonSet ns/x"), or NULL */
        bool ignore_driver_health;
        /* --driver NAME (ResourceSlice spec.driver): the drain is scoped to these drivers'
         * devices: only pods holding claims allocated from them are evicted, only those
         * claims are waited for; every other pod stays ("holds no ResourceClaim of the
         * drivers drained"). n_drivers 0: a node drain. */
        const char *const *drivers;
        size_t n_drivers;
        /* --device DRIVER/POOL/DEVICE: the drain is scoped to these devices: only the pods
         * whose claims hold one are evicted, only those claims are waited for; every
         * other pod, the DRA driver pods included, stays. n_devices 0: no device scope. */
        const struct drain_device *devices;
        size_t n_devices;
        enum plan_isolation isolation;
        const char *taint_rule_api; /* TAINT_RULE: e.g. "resource.k8s.io/v1beta2", for the text */
};

/* Whether DRA driver name driver is one of the scope's (any, without a scope; NULL: no). */
bool plan_driver_in_scope(const char *driver, const struct plan_options *o);
/* Whether claim c has a device of one of the scope's drivers (any claim without a scope). */
bool plan_claim_in_scope(const struct claim_rec *c, const struct plan_options *o);

struct plan_pod {
        const struct pod_rec *pod; /* borrowed from the caller's cache */
        enum pod_class cls;
        enum evict_group group;
        bool critical;
        const char
                *skip_reason; /* why it stays (group NONE), e.g. "mirror pod", "DaemonSet pod", "finished",
                                      * "does not match --pod-selector"; NULL otherwise */
        const struct pdb_rec *pdbs[4]; /* PDBs covering it (the first 4, in the caller's order) */
        size_t n_pdbs;
        size_t n_pdbs_all; /* how many cover it (may exceed 4) */
};

/* A pod that names a PodGroup's claim, on any node (plan_claim_add_group_pod). */
struct plan_group_pod {
        char *name; /* in the claim's namespace */
        char *node; /* spec.nodeName; NULL: not scheduled yet */
        bool finished;
};

struct plan_claim {
        const struct claim_rec *claim;
        enum claim_on_node_reason why;
        bool driver_own; /* reserved only by driver pods: does not hold the drain back */
        /* every device of the drained drivers skips NodeUnprepareResources
         * (claim_skips_unprepare; node and driver drains only): does not hold the drain back */
        bool no_node_ops;
        const struct claim_consumer *podgroup; /* its reservedFor entry of a PodGroup, NULL if none */
        /* reserved for that PodGroup and used by no pod of the node that has not finished
         * (claim_podgroup_unused): the kubelet has unprepared it here */
        bool podgroup_unused;
        /* podgroup_unused in a node or driver drain: does not hold the drain back. A device
         * drain waits until its device is free, that is until the PodGroup is deleted. */
        bool podgroup_released;
        /* With podgroup: the pods of the namespace, on any node, that name the claim, once
         * the planner read them (group_pods_read); group_pods_error: why they could not be
         * read. Owned (plan_done). */
        struct plan_group_pod *group_pods;
        size_t n_group_pods;
        bool group_pods_read;
        char *group_pods_error;
};

struct plan_blocker {
        enum blocker_kind kind;
        const struct pod_rec *pod; /* may be NULL */
        char *message; /* e.g. "cannot delete Pods with local storage (use --delete-emptydir-data to override): ns/a" */
};

struct plan {
        const struct node_rec *node;
        struct plan_pod *pods; /* sorted: by group, then ns/name */
        size_t n_pods;
        size_t n_per_group[_EVICT_GROUP_MAX];
        struct plan_claim *claims; /* claims on the node, sorted ns/name */
        size_t n_claims;
        size_t n_claims_blocking; /* claims that hold it back (plan_claim_blocks) */
        struct plan_blocker *blockers;
        size_t n_blockers, a_blockers;
        const struct pdb_rec **pdbs; /* PDBs covering at least one evicted pod */
        size_t n_pdbs;
        /* What may go wrong around the drain without holding it back (e.g. a peer that
         * deletes the node sooner than the drain needs), owned; plan_add_warning() */
        char **warnings;
        size_t n_warnings;
};

/* Builds the plan from borrowed records (which must outlive it). Pods not bound to
 * node->name are ignored; NULL entries in the arrays are skipped. Blockers come in
 * the order of plan->pods. Pods already deleting stay in their group (the engine
 * waits for them) but raise no unmanaged / emptyDir / PDB blocker: nothing is sent
 * for them. Returns 0 or -ENOMEM. */
int plan_build(const struct node_rec *node, const struct pod_rec *const *pods, size_t n_pods,
               const struct claim_rec *const *claims, size_t n_claims, const struct slice_rec *const *slices,
               size_t n_slices, const struct pdb_rec *const *pdbs, size_t n_pdbs,
               const struct plan_options *o, struct plan *ret);
void plan_done(struct plan *p);

/* kubectl drain --skip-wait-for-delete-timeout: whether the drain stops waiting for
 * pod pp, deleted more than skip_usec ago (now_usec and the deletionTimestamp in µs
 * since the epoch). Never a claim holder or a DRA driver pod (their claims must be
 * released, and the driver outlive them); skip_usec 0: never. */
bool plan_pod_wait_skipped(const struct plan_pod *pp, int64_t now_usec, uint64_t skip_usec);

/* How many of the plan's blockers hold at every eviction
 * (blocker_kind_holds_at_every_eviction). */
size_t plan_eviction_blockers(const struct plan *p);

/* Adds a blocker (e.g. BLOCKER_DRIVER_UNHEALTHY from a failed health probe); the
 * message is copied. Returns 0 or -ENOMEM. */
int plan_add_blocker(struct plan *p, enum blocker_kind kind, const struct pod_rec *pod, const char *message);

/* Adds a warning (copied, control characters escaped: it may quote the API). Returns 0
 * or -ENOMEM. */
int plan_add_warning(struct plan *p, const char *message);

/* How long the node's drain needs at least once it starts, in seconds: the longest
 * termination grace period of its claim holders, then of its DRA driver pods (they go
 * after every claim is released); each part in ret_holders, ret_drivers (may be NULL). */
int64_t plan_grace_needed(const struct plan *p, int64_t *ret_holders, int64_t *ret_drivers);

/* Records a pod that names PodGroup claim pc (node NULL: not scheduled), copied (the
 * caller sets group_pods_read); plan_claim_group_pods_failed() keeps why they could not
 * be read (copied, control characters escaped). Both return 0 or -ENOMEM. */
int plan_claim_add_group_pod(struct plan_claim *pc, const char *name, const char *node, bool finished);
int plan_claim_group_pods_failed(struct plan_claim *pc, const char *message);

/* The DRA driver names of the node's slices (spec.driver), for restore checks:
 * distinct, sorted, borrowed from the slices; at most max of them (the first in
 * sort order). Returns how many were stored in ret. */
size_t plan_driver_names(const struct slice_rec *const *slices, size_t n_slices, const char *node,
                         const char **ret, size_t max);

/* The plan's entry of claim ns/name (claims are sorted by namespace and name), or NULL. */
/* Does this claim on the node hold the drain (and the driver's stop) back: neither the
 * drivers' own, nor without node operations, nor a PodGroup's that no pod here uses? */
static inline bool plan_claim_blocks(const struct plan_claim *pc) {
        return !pc->driver_own && !pc->no_node_ops && !pc->podgroup_released;
}

const struct plan_claim *plan_find_claim(const struct plan *p, const char *ns, const char *name);

/* `drainer plan` output. plan_print_text returns 0, -EIO (write error) or -ENOMEM;
 * plan_to_json returns NULL only when out of memory. JSON: {node, unschedulable,
 * groups: [{name, pods: [{namespace, name, claims: ["ns/name"], pdbs: ["ns/name"],
 * deleting}]}] (the five eviction groups in order), claims: [{namespace, name,
 * reason, devices: [{driver, pool, device}], reservedFor: ["ns/name"], driverOwn, noNodeOperations,
 * podGroup ("ns/name" or null), podGroupUnused, podGroupPods ([{name, node, finished}],
 * or null when not read; podGroupPodsError then says why when a read failed), deleting}], drivers: [{namespace, name, strategy, daemonset}], stays: [{namespace,
 * name, reason}], pdbs: [{namespace, name, disruptionsAllowed, currentHealthy,
 * desiredHealthy, expectedPods}], blockers: [{kind, pod, message}], warnings: ["..."], ok}. */
int plan_print_text(const struct plan *p, const struct plan_options *o, FILE *f);
cJSON *plan_to_json(const struct plan *p, const struct plan_options *o);

/* What `drainer plan` prints of one node: the plan, and beside it the DRA API the
 * cluster serves, the Node's readiness (and, with out_of_service, when the taint
 * node.kubernetes.io/out-of-service would go on), and a driver's seamless upgrade. */
/* `plan --device`: what the device taint eviction controller said a NoExecute taint of
 * each device would hit (a rule with the effect None, made and deleted by the plan). */
struct plan_device_preview {
        bool asked;       /* a preview rule was sent */
        const char *note; /* why some device has no answer (or none was asked), or NULL */
        bool known[DRAIN_MAX_DEVICES];
        struct taint_rule_preview pv[DRAIN_MAX_DEVICES]; /* plan_options->devices[i]'s */
};

struct plan_report {
        const struct plan *plan;
        const struct plan_options *plan_options;
        const struct node_input *in; /* the node as read (in->node) and the DRA API */
        bool out_of_service;
        uint64_t out_of_service_after_usec;
        const struct seamless_answer *seam;        /* the driver's (plan_options->drivers[0]), or NULL */
        const struct plan_device_preview *preview; /* --device, or NULL */
};
/* plan_print_text's returns; plan_to_json's with draApi, draServed, nodeReady,
 * nodeNotReadySince, outOfService: {taint, afterSeconds, tainted, dueAt} and
 * seamlessUpgrade: {seamless, daemonset, reason}, and with --device noneEffectPreview:
 * {asked, note, devices: [{device, publishedDevices, allocatedDevices, pods, namespaces}]}
 * (a device without an answer: no counts). */
int plan_report_print(const struct plan_report *r, FILE *f);
cJSON *plan_report_to_json(const struct plan_report *r);
