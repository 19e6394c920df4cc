/* Driver-scoped drains (--driver NAME): the DeviceTaintRules (resource.k8s.io,
 * KEP-5055) that keep new allocations off one DRA driver's devices of a node while
 * the driver is out of service, and whether the API server serves them. Pure
 * builders plus one asynchronous discovery; the engine sends the rules. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "drainer/base/macro.h"

struct kube_client;
struct kube_call;
struct slice_rec;

/* The taint every rule of drainer carries (effect NoSchedule: allocated claims stay,
 * no new one is allocated on the devices). */
#define TAINT_RULE_TAINT_KEY     "drainer.io/draining"
#define TAINT_RULE_TAINT_EFFECT  "NoSchedule"
/* Label and annotation of drainer's rules: who made them, for which node (a node name
 * may be longer than a label value). */
#define TAINT_RULE_LABEL_MANAGED "app.kubernetes.io/managed-by"
#define TAINT_RULE_ANN_NODE      "drainer.io/node"

/* Where DeviceTaintRules are served: the API prefix ("/apis/resource.k8s.io/v1" or
 * ".../v1beta2"; 1.36 serves v1beta2 only with the DRADeviceTaintRules gate and
 * --runtime-config resource.k8s.io/v1beta2/devicetaintrules=true, 1.37 serves v1), or
 * none. */
struct taint_rule_api {
        bool served;
        char prefix[64];      /* e.g. "/apis/resource.k8s.io/v1beta2" */
        char api_version[48]; /* e.g. "resource.k8s.io/v1beta2" */
};

/* Asks the server (GET /apis/resource.k8s.io/v1, then v1beta2: API discovery) where
 * devicetaintrules are served; done runs once with 0 and *api filled (served false:
 * none: 404s, or groups without the resource), or a negative errno (the API server
 * could not be asked; -ECANCELED when cancelled). */
typedef void (*taint_rule_discover_fn)(int error, const struct taint_rule_api *api, void *userdata);
struct taint_rule_discovery;
int taint_rule_discover(struct kube_client *c, taint_rule_discover_fn done, void *userdata,
                        struct taint_rule_discovery **ret);
/* Cancels (done runs with -ECANCELED, from the loop). NULL ok. */
void taint_rule_discovery_cancel(struct taint_rule_discovery *d);

/* Whether a discovery document (an APIResourceList) lists devicetaintrules. */
bool taint_rule_listed(const void *resource_list_json);

/* The pools of driver on node (its ResourceSlices with spec.nodeName == node):
 * distinct, sorted, borrowed from the slices, at most max. Returns how many. */
size_t taint_rule_pools(const struct slice_rec *const *slices, size_t n_slices, const char *node,
                        const char *driver, const char **ret, size_t max);

/* The rule's name for (node, driver, pool index i): "drainer-LEN-NODE-DRIVER-I", LEN the
 * length of NODE in decimal, or, if that would be longer than a DNS subdomain allows
 * (253), -EINVAL. Returns 0, -EINVAL or -ENOMEM; *ret malloc'd. Names of two nodes never
 * collide (the prefix "drainer-LEN-" says where NODE ends), which the admission policy
 * drainer-own-node-taintrules (deploy/node-policy.yaml) checks for the caller's node. */
int taint_rule_name(const char *node, const char *driver, size_t i, char **ret);

enum taint_rule_naming {
        TAINT_RULE_NAME_FOREIGN, /* not drainer's name for (node, driver) */
        TAINT_RULE_NAME_CURRENT, /* "drainer-LEN-NODE-DRIVER-I" */
        /* "drainer-NODE-DRIVER-I", of drainer before the length prefix: a prefix of another
         * node's names too (node-1 vs node-1-b), so only ever trusted together with the
         * rule's content (taint_rule_check). */
        TAINT_RULE_NAME_LEGACY,
};
/* Whether name is drainer's name of a rule for (node, driver), I any decimal index. */
enum taint_rule_naming taint_rule_naming(const char *name, const char *node, const char *driver);

/* Whether rule (a DeviceTaintRule as the API server returned it) is drainer's rule for
 * node and driver, exactly as taint_rule_body() writes it: metadata.name == name and
 * drainer's name for (node, driver) (taint_rule_naming), label managed-by=drainer,
 * annotation drainer.io/node=NODE, a uid, spec.deviceSelector exactly {driver, pool}
 * with pool one of pools[] (n_pools of them), spec.taint drainer.io/draining:NoSchedule
 * without a value (timeAdded, which the API server sets, and status are not compared),
 * and nothing else in spec. Returns 0, or -EPERM with why (a phrase naming the first
 * difference) filled. */
int taint_rule_check(const void *rule_json, const char *name, const char *node, const char *driver,
                     const char *const *pools, size_t n_pools, char *why, size_t why_size);
/* The DeviceTaintRule as JSON text (malloc'd): apiVersion api->api_version, the name,
 * label managed-by=drainer, annotation drainer.io/node=NODE, deviceSelector {driver,
 * pool}, taint {key drainer.io/draining, effect NoSchedule}. 0 or -ENOMEM. */
int taint_rule_body(const struct taint_rule_api *api, const char *name, const char *node, const char *driver,
                    const char *pool, char **ret);

/* Device-scoped drains (--device DRIVER/POOL/DEVICE): one rule per device, named
 * "drainer-LEN-NODE-DRIVER-I" as a driver's rules are (so the admission policy
 * drainer-own-node-taintrules holds them unchanged), with I a 19-digit number from a
 * hash of POOL/DEVICE (never a pool index of a driver drain, which is small), and
 * deviceSelector {driver, pool, device}: a driver drain's rule has no device and one of
 * a device drain always has one, so neither is ever taken for the other. */
int taint_rule_device_name(const char *node, const char *driver, const char *pool, const char *device,
                           char **ret);
/* As taint_rule_body, with spec.deviceSelector.device. */
int taint_rule_device_body(const struct taint_rule_api *api, const char *name, const char *node,
                           const char *driver, const char *pool, const char *device, char **ret);
/* As taint_rule_check, for the rule of exactly (driver, pool, device) named name (which
 * must be taint_rule_device_name's): 0 or -EPERM with why. */
int taint_rule_device_check(const void *rule_json, const char *name, const char *node, const char *driver,
                            const char *pool, const char *device, char *why, size_t why_size);

/* `plan --device`'s preview (KEP-5055 effect None, resource.k8s.io v1 from 1.37, v1beta2
 * on 1.36): a rule with the taint drainer.io/draining:None selecting one device, which
 * taints nothing; the device taint eviction controller writes once, into its
 * status.conditions, what a NoExecute taint would hit (condition EvictionInProgress,
 * reason NoEffect, observedGeneration the rule's generation, message "N published
 * devices selected. M allocated devices selected. P pods would be evicted in Q
 * namespaces ..."). The name is the device drain's with a 20-digit index ("2" and the
 * device drain's 19 digits): never a drain's rule, still drainer's name for (node,
 * driver). */
#define TAINT_RULE_PREVIEW_EFFECT "None"
int taint_rule_preview_name(const char *node, const char *driver, const char *pool, const char *device,
                            char **ret);
/* As taint_rule_device_body, with the effect None. */
int taint_rule_preview_body(const struct taint_rule_api *api, const char *name, const char *node,
                            const char *driver, const char *pool, const char *device, char **ret);
/* As taint_rule_device_check, for the preview rule (effect None) named name. */
int taint_rule_preview_check(const void *rule_json, const char *name, const char *node, const char *driver,
                             const char *pool, const char *device, char *why, size_t why_size);

/* What the controller says a NoExecute taint of the rule's devices would do. */
struct taint_rule_preview {
        long published;  /* devices of ResourceSlices the rule selects */
        long allocated;  /* of them, allocated to a claim */
        long pods;       /* pods that would be evicted */
        long namespaces; /* in how many namespaces */
};
/* Reads the controller's answer from rule (a DeviceTaintRule as the API server returned
 * it). 0 and *ret filled; -EAGAIN: no answer for the rule's current generation yet;
 * -EBADMSG: a condition for it whose message says none of this (reason not NoEffect, or
 * the text changed). Never trusts a number it cannot read whole. */
int taint_rule_preview_parse(const void *rule_json, struct taint_rule_preview *ret);
