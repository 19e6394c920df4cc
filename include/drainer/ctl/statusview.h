/* What `drainer status NODE` shows of one node: its pods sorted and sorted into the
 * classes a drain acts on, its ResourceClaims with why each is on the node, who
 * cordoned it, and the -o json document of all that. The text for a terminal is the
 * CLI's; the model and its JSON are built here, from a node_input (dra/nodeview.h). */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "drainer/dra/claims.h"
#include "drainer/dra/nodeview.h"

struct status_view {
        const struct node_input *in;    /* borrowed: its pods and claims sorted in place */
        enum pod_class *cls;            /* owned: each pod's class */
        enum claim_on_node_reason *why; /* owned: each claim's reason, CLAIM_NOT_ON_NODE too */
        size_t n_on_node;               /* claims whose reason is not CLAIM_NOT_ON_NODE */
        const char *cordoned_by;        /* "drainer", "someone else", or NULL: schedulable */
};

/* The order a drain acts in, which the status shows: claim holders, other workload,
 * the driver, DaemonSet, mirror and finished pods. */
extern const enum pod_class status_class_order[_POD_CLASS_MAX];
/* The JSON keys of the classes in "pods": driver, claimHolders, workload, ... */
extern const char *const status_class_json_key[_POD_CLASS_MAX];

/* Sorts in's pods and claims by namespace and name, classifies each pod with f (the
 * driver pods) and each claim against in->node. in->node must be set. Returns 0, or
 * -ENOMEM with nothing allocated. */
int status_view_build(const struct node_input *in, const struct driver_filter *f, struct status_view *ret);
void status_view_done(struct status_view *v);

/* Whether a driver pod of the node holds claim i (reserved for it). */
bool status_view_claim_held_by_driver(const struct status_view *v, size_t i);
/* What the text of status says after claim i's reason: ", held by the driver" (as
 * above), ", its PodGroup's, used by no pod here" (claim_podgroup_unused: unprepared
 * on the node, stays allocated until the PodGroup is deleted), ", no driver needed
 * (...)" (claim_skips_unprepare, every driver), or "". */
const char *status_view_claim_note(const struct status_view *v, size_t i);
/* How many of the node's pods have class c. */
size_t status_view_count(const struct status_view *v, enum pod_class c);

/* The -o json document: {draApi, draServed, node: {name, unschedulable, ready,
 * cordonedBy, taints, driversOutOfService, devicesOutOfService, drainerAnnotations},
 * pods: {CLASS: [...]}, claims: [...], resourceSlices: [{name, driver, pool,
 * devices}]}. NULL only for out of memory. */
cJSON *status_view_to_json(const struct status_view *v);
