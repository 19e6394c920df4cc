/* A pod and a ResourceClaim as `drainer status -o json` shows them (the records of
 * kube/objects.h, with what dra/claims.h says of them). NULL only for out of memory. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "drainer/dra/claims.h"

/* {namespace, name, phase, ready, terminating, controller: {kind, name},
 * priorityClassName, claims: [name]} */
cJSON *pod_rec_to_json(const struct pod_rec *p);
/* {namespace, name, reason (why it is on the node), allocated, deleting, heldByDriver,
 * devices: [{request, driver, pool, device, adminAccess}], reservedFor: [{resource,
 * name, uid}]} */
cJSON *claim_rec_to_json(const struct claim_rec *c, enum claim_on_node_reason why, bool driver_own);
