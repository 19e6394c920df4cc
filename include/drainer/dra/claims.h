/* The DRA rules of DESIGN.md "Terms" over compact records: which pods hold
 * claims, which ResourceClaims are on a node, and how drainer classifies the
 * pods of a node. Pure functions; no I/O. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include "drainer/base/selector.h"
#include "drainer/kube/objects.h"

/* A pod holds claims if it references a ResourceClaim by name, or a template
 * whose generated claim is named in status.resourceClaimStatuses, or has
 * status.extendedResourceClaimStatus. A template claim not generated yet (or
 * not needed: nil resourceClaimName) does not count. */
bool pod_holds_claims(const struct pod_rec *p);

/* Whether claim c is reserved for pod p (reservedFor entry of resource "pods"
 * in the core group whose uid is p's; by name when the entry has no uid; and
 * p must be in the claim's namespace). */
bool claim_reserved_by_pod(const struct claim_rec *c, const struct pod_rec *p);

enum claim_on_node_reason {
        CLAIM_NOT_ON_NODE,
        CLAIM_RESERVED_BY_NODE_POD,    /* reservedFor names a pod bound to the node */
        CLAIM_ALLOCATED_NODE_SELECTOR, /* allocation.nodeSelector is metadata.name In [node] */
        CLAIM_ALLOCATED_NODE_SLICE,    /* a device's (driver, pool) is a slice with nodeName == node */
        _CLAIM_ON_NODE_REASON_MAX,
        _CLAIM_ON_NODE_REASON_INVALID = -EINVAL,
};

/* "not-on-node", "reserved-by-node-pod", "allocated-node-selector", "allocated-node-slice" */
const char *claim_on_node_reason_to_string(enum claim_on_node_reason r);
enum claim_on_node_reason claim_on_node_reason_from_string(const char *s);

/* Is c on node, and why (the first reason in the order of the enum)? pods:
 * the pods bound to the node (a pod whose spec.nodeName is another node is
 * ignored, so passing more is harmless); slices: known ResourceSlices (only
 * those with spec.nodeName == node matter). A network-attached allocation
 * (no selector or another selector, no node slice) is not on the node unless
 * reserved by one of its pods. Arrays may be NULL when their count is 0. */
enum claim_on_node_reason claim_on_node(const struct claim_rec *c, const char *node,
                                        const struct pod_rec *const *pods, size_t n_pods,
                                        const struct slice_rec *const *slices, size_t n_slices);

/* Does c need none of these drivers to unprepare it (DESIGN.md "Claims without node
 * operations")? True when c has at least one allocated device of them and every such
 * device skips NodeUnprepareResources (skipNodeOperations "*" or
 * "NodeUnprepareResources", copied from its ResourceSlice at allocation): the kubelet
 * then never calls those drivers for it (with its DRAOptionalNodeOperations gate off it
 * refuses the claim instead of preparing it). drivers: NULL with n 0 for every driver. */
bool claim_skips_unprepare(const struct claim_rec *c, const char *const *drivers, size_t n_drivers);

/* The PodGroup c is reserved for, when no pod of the node uses c any more
 * (DESIGN.md "Claims of a PodGroup"): c has a reservedFor entry of resource
 * "podgroups" in group scheduling.k8s.io, none for a pod bound to node, and no pod
 * bound to node that has not finished (phase Succeeded or Failed) names c, by its
 * spec.resourceClaims (resourceClaimName or the name in resourceClaimStatuses) or
 * its extended-resource claim. The kubelet unprepares a claim on its node when the
 * last pod there that uses it has stopped, before that pod's status says so; the
 * reservation, and the allocation, stay until the PodGroup is deleted. NULL when
 * some pod of the node still uses c, or c is reserved for no PodGroup. */
/* Whether pod p names claim c: in c's namespace, by its spec.resourceClaims
 * (resourceClaimName, or the name a template's claim got in resourceClaimStatuses) or
 * its extended-resource claim. */
bool pod_uses_claim(const struct pod_rec *p, const struct claim_rec *c);

/* c's first reservedFor entry of a PodGroup (resource "podgroups" in group
 * scheduling.k8s.io), or NULL. */
const struct claim_consumer *claim_podgroup(const struct claim_rec *c);

const struct claim_consumer *claim_podgroup_unused(const struct claim_rec *c, const char *node,
                                                   const struct pod_rec *const *pods, size_t n_pods);

enum pod_class {
        POD_CLASS_DRIVER,       /* runs a DRA kubelet plugin (pod_is_driver) */
        POD_CLASS_MIRROR,       /* static pod's mirror: the API cannot evict it */
        POD_CLASS_DAEMONSET,    /* controller is a DaemonSet, holds no claims */
        POD_CLASS_CLAIM_HOLDER, /* holds claims (DaemonSet pods included: a blocker later) */
        POD_CLASS_WORKLOAD,     /* everything else */
        POD_CLASS_FINISHED,     /* Succeeded or Failed: nothing to evict */
        _POD_CLASS_MAX,
        _POD_CLASS_INVALID = -EINVAL,
};

/* "driver", "mirror", "daemonset", "claim-holder", "workload", "finished" */
const char *pod_class_to_string(enum pod_class c);
enum pod_class pod_class_from_string(const char *s);

/* Which pods are DRA driver pods (DESIGN.md "Terms"): those a DaemonSet controls
 * (controller ownerReference kind DaemonSet, apiVersion apps/v1) that match one of
 * the selectors and, when namespaces are given, run in one of them. A pod with a
 * driver's labels that no DaemonSet controls, or outside those namespaces, is not
 * a driver: it is ordinary workload. Selectors: n parsed selectors (NULL entries
 * are skipped; an empty selector matches every pod, so callers should refuse one). */
struct driver_filter {
        const struct selector *const *selectors;
        size_t n_selectors;
        const char *const *namespaces; /* --driver-namespace; none: any namespace */
        size_t n_namespaces;
};

/* f NULL: no pod is a driver. */
bool pod_is_driver(const struct pod_rec *p, const struct driver_filter *f);

/* Checks in this order: driver (pod_is_driver), mirror, finished, claim holder,
 * DaemonSet, workload. */
enum pod_class pod_classify(const struct pod_rec *p, const struct driver_filter *f);

/* Label selectors of the well-known DRA kubelet plugin pods, NULL-terminated:
 * app.kubernetes.io/component=kubeletplugin (dra-example-driver and others),
 * nvidia-dra-driver-gpu-component=kubelet-plugin,
 * dra-driver-nvidia-gpu-component=kubelet-plugin. Parse with
 * selectors_parse_strv(). */
extern const char *const claims_default_driver_selectors[];
