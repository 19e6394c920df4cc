/* Compact records of the Kubernetes objects drainer caches: only the fields it
 * uses, each record one allocation (the struct, then its arrays, then its
 * strings), built from the cJSON of a Pod, ResourceClaim (resource.k8s.io/v1),
 * Node, ResourceSlice, Lease (coordination.k8s.io/v1) or PodDisruptionBudget
 * (policy/v1). Records are immutable once built; an update replaces the record. */
#pragma once

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/base/macro.h"
#include "drainer/base/selector.h" /* struct kv, kv_get(), struct selector */

/* Optional strings are NULL when absent or empty; label values keep "". */

struct owner_ref {
        const char *api_version, *kind, *name, *uid;
        bool controller;
};

struct pod_claim_ref {
        const char *name;       /* spec.resourceClaims[].name */
        const char *claim_name; /* resourceClaimName, or the generated name from
                                 * status.resourceClaimStatuses, or NULL if not generated
                                 * yet / not needed */
        bool from_template;     /* resourceClaimTemplateName set */
};

/* core/v1 Toleration */
struct toleration {
        const char *key; /* NULL: all keys (with op "Exists") */
        const char *op;  /* "Exists" or "Equal" (NULL means Equal) */
        const char *value;
        const char *effect; /* NULL: all effects */
        int64_t seconds;    /* tolerationSeconds, -1 if unset */
};

enum pod_phase {
        POD_PENDING,
        POD_RUNNING,
        POD_SUCCEEDED,
        POD_FAILED,
        POD_UNKNOWN,
        _POD_PHASE_MAX,
        _POD_PHASE_INVALID = -EINVAL,
};

const char *pod_phase_to_string(enum pod_phase p);   /* "Pending", ...; NULL if out of range */
enum pod_phase pod_phase_from_string(const char *s); /* _POD_PHASE_INVALID if unknown */

/* An entry of a container's status.allocatedResourcesStatus[].resources[] that says
 * Unhealthy (KEP-4680: the kubelet fills it from the DRA driver's health stream). */
struct resource_health {
        const char *resource; /* its allocatedResourcesStatus[].name: "claim:NAME" or "claim:NAME/REQUEST" */
        const char *id;       /* resourceID: "DRIVER/POOL/DEVICE", or the device's first CDI ID */
};

struct pod_rec {
        const char *ns, *name, *uid, *resource_version, *node_name, *pod_ip, *priority_class_name;
        enum pod_phase phase;           /* missing phase reads as POD_PENDING, unknown as POD_UNKNOWN */
        bool ready;                     /* condition Ready is True */
        bool deleting;                  /* deletionTimestamp set */
        int64_t deletion_grace_seconds; /* metadata.deletionGracePeriodSeconds, -1 if unset */
        int64_t deletion_usec; /* metadata.deletionTimestamp (µs since the epoch), 0 if unset/bad */
        int64_t termination_grace_seconds; /* spec, default 30 */
        bool mirror;                       /* annotation kubernetes.io/config.mirror */
        bool has_emptydir;
        /* The DRA driver whose kubelet plugin this pod runs, from a hostPath volume
         * .../plugins/NAME (the plugin's directory under the kubelet's root, as the
         * kubeletplugin helper and every known driver mount it); NULL if none. */
        const char *plugin_driver;
        bool has_controller;
        const struct owner_ref *controller; /* the controller ownerReference, NULL if none */
        size_t n_claims;
        const struct pod_claim_ref *claims;
        const char *extended_claim_name; /* status.extendedResourceClaimStatus.resourceClaimName */
        size_t n_labels;
        const struct kv *labels;
        int32_t priority; /* spec.priority, 0 if unset */

        size_t n_tolerations;
        const struct toleration *tolerations;
        /* First container livenessProbe.grpc (how DRA drivers expose grpc.health.v1):
         * port, 0 if none; service, NULL if unset. */
        int32_t grpc_probe_port;
        const char *grpc_probe_service;
        /* Every container's allocated resources reported Unhealthy (init and ephemeral
         * containers' too; one entry per container that reports it). */
        size_t n_unhealthy;
        const struct resource_health *unhealthy;

        size_t alloc_size; /* bytes of the single allocation */
};

struct claim_device {
        const char *request, *driver, *pool, *device;
        bool admin_access;
        /* skipNodeOperations lists "*" or "NodeUnprepareResources": the kubelet never asks
         * the driver to unprepare this device (DESIGN.md "Claims without node operations") */
        bool skip_unprepare;
};

/* status.reservedFor[] */
struct claim_consumer {
        const char *api_group; /* NULL for the core group (pods) */
        const char *resource, *name, *uid;
};

struct claim_rec {
        const char *ns, *name, *uid, *resource_version;
        bool deleting;  /* deletionTimestamp set */
        bool allocated; /* status.allocation set */
        /* status.allocation.nodeSelector is exactly one term with exactly one
         * matchFields {key: metadata.name, operator: In, values: [ONE]} (how the
         * allocator writes node-local allocations): that node name; else NULL. */
        const char *selector_node;
        bool selector_other; /* a nodeSelector exists but is not that exact shape */
        size_t n_devices;
        const struct claim_device *devices; /* status.allocation.devices.results[] */
        size_t n_reserved;
        const struct claim_consumer *reserved;
        const char *owner_pod;     /* controller ownerReference of kind Pod: name, or NULL */
        const char *owner_pod_uid; /* ... and its uid */
        bool admin_access_any;     /* some result has adminAccess: true */
        bool extended_resource;    /* annotation resource.kubernetes.io/extended-resource-claim=true */

        size_t alloc_size;
};

struct node_taint {
        const char *key, *value, *effect;
        const char *time_added; /* RFC 3339, or NULL; kept so rewriting the list (merge patches
                                 * replace it) does not restart NoExecute toleration timers */
};

/* The node lifecycle conditions of KEP-5683 (Kubernetes 1.37) that --node-conditions
 * writes: DrainInProgress and Drained. "The admin is responsible for setting and
 * clearing" them (k8s.io/api core/v1 NodeConditionType); upstream tools read them. */
enum node_lifecycle_condition {
        NODE_CONDITION_DRAIN_IN_PROGRESS,
        NODE_CONDITION_DRAINED,
        _NODE_CONDITION_MAX,
};

/* "DrainInProgress", "Drained" */
const char *node_lifecycle_condition_type(enum node_lifecycle_condition c);

struct node_condition_rec {
        const char *status; /* "True", "False", "Unknown"; NULL when the Node has no such condition */
        const char *reason; /* NULL if absent */
};

struct node_rec {
        const char *name, *uid, *resource_version;
        bool unschedulable;
        bool ready; /* condition Ready is True */
        /* Not ready: the Ready condition's lastTransitionTime (µs since the epoch), i.e.
         * since when it is False or Unknown; 0 when Ready, or the time is unknown. */
        int64_t not_ready_since_usec;
        size_t n_taints;
        const struct node_taint *taints;
        size_t n_labels;
        const struct kv *labels;
        size_t n_annotations;
        const struct kv *annotations; /* only drainer.io/ annotations are kept */
        const char *kubelet_version;  /* status.nodeInfo.kubeletVersion */
        struct node_condition_rec lifecycle[_NODE_CONDITION_MAX];

        size_t alloc_size;
};

struct slice_rec {
        const char *name, *resource_version, *driver, *pool;
        const char *node_name; /* NULL unless spec.nodeName */
        int64_t pool_generation;
        int64_t pool_slice_count; /* spec.pool.resourceSliceCount */
        size_t n_devices;
        const char *const *devices; /* spec.devices[].name (an entry NULL without one) */
        /* Per device, as devices: its first taint with the effect NoSchedule or NoExecute
         * in the slice (the driver's own: KEP-5055, a device it publishes as failed), as
         * "KEY=VALUE:EFFECT" ("KEY:EFFECT" without a value); NULL: none. */
        const char *const *device_taints;
        bool all_nodes;         /* spec.allNodes */
        bool has_node_selector; /* spec.nodeSelector or spec.perDeviceNodeSelection */

        size_t alloc_size;
};

/* coordination.k8s.io/v1 Lease (the --max-parallel slots). Times are µs since the
 * epoch, 0 when unset or unparsable (MicroTime "2026-11-29T15:00:00.123456Z"). */
struct lease_rec {
        const char *ns, *name, *resource_version;
        const char *holder;        /* spec.holderIdentity, NULL if absent or empty */
        int64_t duration_seconds;  /* spec.leaseDurationSeconds, 0 if unset */
        int64_t acquire_time_usec; /* spec.acquireTime */
        int64_t renew_time_usec;   /* spec.renewTime */
        int64_t transitions;       /* spec.leaseTransitions, 0 if unset */

        size_t alloc_size;
};

/* A PodDisruptionBudget (policy/v1), compact. Selector semantics are policy/v1's
 * (metav1.LabelSelectorAsSelector, and the Eviction API since kubernetes#119732):
 * a null/absent spec.selector matches no pod, an empty one ({}) every pod of
 * the namespace; an invalid one (bad key/value/operator, In without values)
 * matches no pod, as the Eviction API skips such a PDB. */
struct pdb_rec {
        const char *ns, *name, *resource_version;
        struct selector
                *selector; /* from spec.selector (matchLabels + matchExpressions); NULL = matches nothing
                                    * (a nil selector), empty = every pod of the namespace */
        int32_t disruptions_allowed, current_healthy, desired_healthy, expected_pods;
        size_t alloc_size;
};
/* 0, -EBADMSG without metadata.namespace/name, or -ENOMEM. An invalid selector is
 * not an error: the record gets selector NULL. */
int pdb_rec_from_json(const cJSON *obj, struct pdb_rec **ret);
void pdb_rec_free(struct pdb_rec *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct pdb_rec *, pdb_rec_free);
size_t pdb_rec_size(const struct pdb_rec *p);
bool pdb_matches_pod(const struct pdb_rec *b, const struct pod_rec *p);

/* A Cluster API Machine (cluster.x-k8s.io/v1beta2), compact: what the pre-drain hook
 * owner needs (ctl/machinehook.c). */
#define MACHINE_HOOK_ANNOTATION             "pre-drain.delete.hook.machine.cluster.x-k8s.io/drainer"
#define MACHINE_EXCLUDE_DRAINING_ANNOTATION "machine.cluster.x-k8s.io/exclude-node-draining"
struct machine_rec {
        const char *ns, *name, *uid, *resource_version;
        bool deleting;              /* metadata.deletionTimestamp set */
        const char *node_name;      /* status.nodeRef.name, NULL if unset */
        bool has_hook;              /* MACHINE_HOOK_ANNOTATION present (a string) */
        const char *hook_value;     /* its value ("" kept), NULL without the hook */
        bool exclude_node_draining; /* MACHINE_EXCLUDE_DRAINING_ANNOTATION present */
        size_t alloc_size;
};
/* 0, -EBADMSG without metadata.namespace/name, or -ENOMEM. */
int machine_rec_from_json(const cJSON *obj, struct machine_rec **ret);
void machine_rec_free(struct machine_rec *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct machine_rec *, machine_rec_free);
size_t machine_rec_size(const struct machine_rec *m);

/* Each returns 0 and a new record, -EBADMSG if a required field is missing or
 * of the wrong type (metadata.name; metadata.namespace for pods, claims and leases;
 * spec.driver and spec.pool.name for slices), or -ENOMEM. Fields drainer does
 * not need are ignored, so are optional fields of an unexpected type. */
/* Whether a DaemonSet is the pod's controller (its controller ownerReference). */
bool pod_rec_daemonset(const struct pod_rec *p);
int pod_rec_from_json(const cJSON *obj, struct pod_rec **ret);
int claim_rec_from_json(const cJSON *obj, struct claim_rec **ret);
int node_rec_from_json(const cJSON *obj, struct node_rec **ret);
int slice_rec_from_json(const cJSON *obj, struct slice_rec **ret);
int lease_rec_from_json(const cJSON *obj, struct lease_rec **ret);

/* NULL ok. */
void pod_rec_free(struct pod_rec *p);
void claim_rec_free(struct claim_rec *c);
void node_rec_free(struct node_rec *n);
void slice_rec_free(struct slice_rec *s);
void lease_rec_free(struct lease_rec *l);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct pod_rec *, pod_rec_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct claim_rec *, claim_rec_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct node_rec *, node_rec_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct slice_rec *, slice_rec_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct lease_rec *, lease_rec_free);

/* Bytes held by a record (0 for NULL), for cache accounting. */
size_t pod_rec_size(const struct pod_rec *p);
size_t claim_rec_size(const struct claim_rec *c);
size_t node_rec_size(const struct node_rec *n);
size_t slice_rec_size(const struct slice_rec *s);
size_t lease_rec_size(const struct lease_rec *l);

/* Whether one of n tolerations tolerates the taint (core/v1
 * Toleration.ToleratesTaint: effect and key match when set; "Exists" matches
 * any value, "Equal" or unset needs the same value). */
bool tolerations_tolerate(const struct toleration *t, size_t n, const struct node_taint *taint);

/* The taint with this key (and effect, if effect is not NULL), or NULL. */
const struct node_taint *node_rec_find_taint(const struct node_rec *n, const char *key, const char *effect);
