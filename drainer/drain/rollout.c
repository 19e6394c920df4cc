/* The decisions of `drainer rollout` (see rollout.h): pure functions over the
 * observed DaemonSet, ControllerRevisions, Node, pods, claims and slices. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/json.h"
#include "drainer/base/macro.h"
#include "drainer/base/text.h"
#include "drainer/dra/claims.h"
#include "drainer/drain/rollout.h"
#include "drainer/drain/state.h"

static const char *const step_names[_ROLLOUT_STEP_MAX] = {
        [ROLLOUT_STEP_DONE] = "done",       [ROLLOUT_STEP_DRAIN] = "drain",
        [ROLLOUT_STEP_REPLACE] = "replace", [ROLLOUT_STEP_WAIT] = "wait",
        [ROLLOUT_STEP_RESTORE] = "restore", [ROLLOUT_STEP_CLEAR] = "clear",
        [ROLLOUT_STEP_FOREIGN] = "foreign",
};

const char *rollout_step_to_string(enum rollout_step s) {
        return s >= 0 && s < _ROLLOUT_STEP_MAX ? step_names[s] : NULL;
}

int rollout_daemonset_parse(const cJSON *ds, struct rollout_daemonset *ret, char *msg, size_t size) {
        struct rollout_daemonset d = {
                .ns = json_str(ds, "metadata.namespace"),
                .name = json_str(ds, "metadata.name"),
                .uid = json_str(ds, "metadata.uid"),
                .strategy = json_str(ds, "spec.updateStrategy.type"),
                .generation = json_int(ds, "metadata.generation", 0),
                .observed = json_int(ds, "status.observedGeneration", 0),
        };

        assert(ret);
        if (!d.ns || !d.name || !d.uid) {
                snprintf(msg, size, "the DaemonSet has no namespace, name or uid");
                return -EINVAL;
        }
        /* apps/v1 defaults the type to RollingUpdate. */
        if (!d.strategy)
                d.strategy = "RollingUpdate";
        d.on_delete = streq(d.strategy, "OnDelete");
        *ret = d;
        return 0;
}

int rollout_preflight(const struct rollout_daemonset *ds, char *msg, size_t size) {
        if (!ds->on_delete) {
                snprintf(
                        msg, size,
                        "DaemonSet %s/%s has updateStrategy %s: its controller would replace the driver "
                        "pods itself, without draining their claims first; set it to OnDelete before "
                        "the update (kubectl -n %s patch daemonset %s --type merge -p "
                        "'{\"spec\":{\"updateStrategy\":{\"type\":\"OnDelete\",\"rollingUpdate\":null}}}'), "
                        "then change the pod template and run the rollout",
                        ds->ns, ds->name, ds->strategy, ds->ns, ds->name);
                return -EPERM;
        }
        if (ds->observed < ds->generation) {
                snprintf(msg, size,
                         "DaemonSet %s/%s: its controller has not observed generation %lld yet (observed "
                         "%lld)",
                         ds->ns, ds->name, (long long)ds->generation, (long long)ds->observed);
                return -EAGAIN;
        }
        return 0;
}

static bool owned_by(const cJSON *obj, const char *uid) {
        const cJSON *ref;

        cJSON_ArrayForEach(
                ref, json_path(obj, "metadata.ownerReferences")) if (json_bool(ref, "controller", false) &&
                                                                     streq_ptr(json_str(ref, "uid"),
                                                                               uid)) return true;
        return false;
}

int rollout_update_revision(const cJSON *items, const char *ds_uid, const char **ret) {
        const cJSON *it, *best = NULL;
        int64_t best_rev = -1;
        const char *hash;

        cJSON_ArrayForEach(it, items) {
                int64_t rev = json_int(it, "revision", -1);

                if (!owned_by(it, ds_uid) || rev <= best_rev)
                        continue;
                best = it;
                best_rev = rev;
        }
        if (!best)
                return -ENOENT;
        hash = json_get_str(json_path(best, "metadata.labels"), ROLLOUT_HASH_LABEL);
        if (!hash)
                return -EINVAL;
        *ret = hash;
        return 0;
}

const char *rollout_pod_revision(const struct pod_rec *p) {
        return kv_get(p->labels, p->n_labels, ROLLOUT_HASH_LABEL);
}

bool rollout_pod_of(const struct pod_rec *p, const char *ds_uid) {
        return p->controller && streq_ptr(p->controller->kind, "DaemonSet") &&
               streq_ptr(p->controller->uid, ds_uid);
}

const char *rollout_record_key(const char *driver, char *buf, size_t size) {
        snprintf(buf, size, ROLLOUT_ANN_PREFIX "%s", driver);
        return buf;
}

int rollout_patch_record(const char *driver, const char *hash, char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = cJSON_CreateObject();
        cJSON *ann = root ? cJSON_AddObjectToObject(cJSON_AddObjectToObject(root, "metadata"), "annotations")
                          : NULL;
        char key[256];

        if (!ann)
                return -ENOMEM;
        rollout_record_key(driver, key, sizeof(key));
        if (!(hash ? cJSON_AddStringToObject(ann, key, hash) : cJSON_AddNullToObject(ann, key)))
                return -ENOMEM;
        *ret = cJSON_PrintUnformatted(root);
        return *ret ? 0 : -ENOMEM;
}

/* Whether claim c has a device of driver. */
static bool claim_of_driver(const struct claim_rec *c, const char *driver) {
        for (size_t i = 0; i < c->n_devices; i++)
                if (streq_ptr(c->devices[i].driver, driver))
                        return true;
        return false;
}

void rollout_node_facts(const struct rollout_node_input *in, struct rollout_node_facts *ret) {
        struct rollout_node_facts f = {};
        const struct node_rec *n = in->node;
        char key[256];
        const char *state;

        for (size_t i = 0; i < in->n_pods; i++) {
                const struct pod_rec *p = in->pods[i];

                if (!rollout_pod_of(p, in->ds_uid) || !streq_ptr(p->node_name, n->name))
                        continue;
                if (!streq_ptr(rollout_pod_revision(p), in->target)) {
                        f.old_pods++;
                        if (p->deleting)
                                f.old_deleting++;
                        else if (!f.old)
                                f.old = p;
                        continue;
                }
                if (p->deleting)
                        continue;
                f.new_pods++;
                if (p->phase == POD_RUNNING && p->ready)
                        f.new_ready++;
        }
        for (size_t i = 0; i < in->n_claims; i++) {
                const struct claim_rec *c = in->claims[i];

                /* Neither a claim whose devices of the driver skip NodeUnprepareResources
                 * nor a PodGroup's that no pod here uses needs the driver (DESIGN.md). */
                if (claim_of_driver(c, in->driver) &&
                    claim_on_node(c, n->name, in->pods, in->n_pods, in->slices, in->n_slices) !=
                            CLAIM_NOT_ON_NODE &&
                    !claim_skips_unprepare(c, &in->driver, 1) &&
                    !claim_podgroup_unused(c, n->name, in->pods, in->n_pods))
                        f.claims++;
        }
        for (size_t i = 0; i < in->n_slices && !f.slices; i++)
                f.slices = streq_ptr(in->slices[i]->driver, in->driver) &&
                           streq_ptr(in->slices[i]->node_name, n->name);

        snprintf(key, sizeof(key), DRAINER_ANN_STATE ".%s", in->driver);
        state = kv_get(n->annotations, n->n_annotations, key);
        f.has_state = state != NULL;
        f.phase = state ? drain_phase_from_string(state) : _DRAIN_PHASE_INVALID;
        f.record =
                kv_get(n->annotations, n->n_annotations, rollout_record_key(in->driver, key, sizeof(key)));
        f.has_record = f.record != NULL;
        f.node_drain = kv_get(n->annotations, n->n_annotations, DRAINER_ANN_STATE);
        *ret = f;
}

enum rollout_step rollout_node_step(const struct rollout_node_input *in, char *msg, size_t size) {
        struct rollout_node_facts f;
        const char *node = in->node->name, *drv = in->driver;
        bool new_up;

        rollout_node_facts(in, &f);
        new_up = f.old_pods == 0 && f.new_ready > 0;

        if (f.node_drain) {
                snprintf(msg, size,
                         "node %s is being drained (drainer.io/state=%s): a rollout does not take a "
                         "node drain over; finish it (drainer uncordon %s) and run the rollout again",
                         node, f.node_drain, node);
                return ROLLOUT_STEP_FOREIGN;
        }
        if (f.has_state && !f.has_record) {
                snprintf(msg, size,
                         "driver %s of node %s is out of service by another drain (drainer.io/state.%s), "
                         "not this rollout's; finish it (drainer uncordon %s --driver %s ...) and run "
                         "the rollout again",
                         drv, node, drv, node, drv);
                return ROLLOUT_STEP_FOREIGN;
        }
        if (!f.has_state) {
                if (!f.has_record) {
                        if (f.old_pods == 0) {
                                snprintf(msg, size, "node %s runs revision %s of driver %s%s", node,
                                         in->target, drv, f.new_pods ? "" : " (no driver pod here)");
                                return ROLLOUT_STEP_DONE;
                        }
                        snprintf(msg, size, "node %s: driver %s to revision %s, draining its claims", node,
                                 drv, in->target);
                        return ROLLOUT_STEP_DRAIN;
                }
                if (f.old_pods > 0) {
                        snprintf(msg, size, "node %s: draining the claims of driver %s", node, drv);
                        return ROLLOUT_STEP_DRAIN;
                }
                if (new_up) {
                        snprintf(msg, size, "node %s: driver %s on revision %s; clearing the record", node,
                                 drv, in->target);
                        return ROLLOUT_STEP_CLEAR;
                }
                snprintf(msg, size, "node %s: waiting for the driver pod of revision %s to be Ready", node,
                         in->target);
                return ROLLOUT_STEP_WAIT;
        }
        if (!drain_phase_in_stage(f.phase, DRAIN_STAGE_DRAINED) &&
            !drain_phase_in_stage(f.phase, DRAIN_STAGE_RESTORING)) {
                snprintf(msg, size, "node %s: draining the claims of driver %s (%s)", node, drv,
                         strna(drain_phase_to_string(f.phase)));
                return ROLLOUT_STEP_DRAIN;
        }
        if (f.phase == DRAIN_PHASE_DRAINED) {
                if (f.old) {
                        if (f.claims > 0) {
                                snprintf(msg, size,
                                         "node %s: %zu %s of driver %s still on the node: the driver "
                                         "stays until %s released",
                                         node, f.claims, text_plural(f.claims, "claim", "claims"), drv,
                                         text_plural(f.claims, "it is", "they are"));
                                return ROLLOUT_STEP_DRAIN;
                        }
                        snprintf(msg, size,
                                 "node %s: replacing driver pod %s/%s (revision %s) with revision %s", node,
                                 f.old->ns, f.old->name, strna(rollout_pod_revision(f.old)), in->target);
                        return ROLLOUT_STEP_REPLACE;
                }
                if (f.old_pods > 0) {
                        snprintf(msg, size, "node %s: waiting for the old driver pod to stop", node);
                        return ROLLOUT_STEP_WAIT;
                }
                if (!new_up) {
                        snprintf(msg, size, "node %s: waiting for the driver pod of revision %s to be Ready",
                                 node, in->target);
                        return ROLLOUT_STEP_WAIT;
                }
                snprintf(msg, size, "node %s: driver %s on revision %s is Ready; restoring", node, drv,
                         in->target);
                return ROLLOUT_STEP_RESTORE;
        }
        snprintf(msg, size, "node %s: restoring driver %s (%s)", node, drv,
                 strna(drain_phase_to_string(f.phase)));
        return ROLLOUT_STEP_RESTORE;
}

bool rollout_timed_out(uint64_t started, uint64_t now, uint64_t timeout) {
        return started > 0 && now >= started && now - started >= timeout;
}

bool rollout_failed_keeps_slot(const struct node_rec *n, const char *driver) {
        char key[256];

        if (!n)
                return true; /* cannot tell: keep it, the Lease expires by itself */
        if (kv_get(n->annotations, n->n_annotations, DRAINER_ANN_STATE))
                return true;
        if (snprintf(key, sizeof(key), DRAINER_ANN_STATE ".%s", strempty(driver)) >= (int)sizeof(key))
                return true;
        return kv_get(n->annotations, n->n_annotations, key) != NULL;
}
