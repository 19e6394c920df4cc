/* The JSON merge patches that move a drain on: cordon, phases, messages, taints,
 * labels, the out-of-service taint, the finish, the node lifecycle conditions.
 * Each reads the node record it patches and returns the body; pure, owns only
 * what it returns, never talks to the API server. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "drainer/base/text.h"
#include "drainer/base/timesrc.h"
#include "drainer/drain/state.h"
#include "drainer/kube/objects.h"
#include "state-int.h"

/* ---- patches ---- */

/* {"metadata":{"resourceVersion":RV}}: every patch is conditional on the
 * version the engine decided from. */
static int patch_new(const struct node_rec *n, cJSON **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        cJSON *meta;

        assert(n);
        if (!n->resource_version)
                return log_debug_errno(EINVAL,
                                       "node \"%s\" has no resourceVersion, refusing an "
                                       "unconditional patch",
                                       strna(n->name));
        root = cJSON_CreateObject();
        if (!root)
                return -ENOMEM;
        meta = cJSON_AddObjectToObject(root, "metadata");
        if (!meta || !cJSON_AddStringToObject(meta, "resourceVersion", n->resource_version))
                return -ENOMEM;
        *ret = TAKE_PTR(root);
        return 0;
}

/* The object at root.parent.name, created if needed. */
static cJSON *sub_object(cJSON *root, const char *parent, const char *name) {
        cJSON *p = cJSON_GetObjectItemCaseSensitive(root, parent), *o;

        if (!p)
                p = cJSON_AddObjectToObject(root, parent);
        if (!p)
                return NULL;
        if (!name)
                return p;
        o = cJSON_GetObjectItemCaseSensitive(p, name);
        return o ? o : cJSON_AddObjectToObject(p, name);
}

/* Sets metadata.annotations[key] to value, or null (removal) when value is NULL. */
static int set_annotation(cJSON *root, const char *key, const char *value) {
        cJSON *ann = sub_object(root, "metadata", "annotations");

        if (!ann)
                return -ENOMEM;
        cJSON_DeleteItemFromObjectCaseSensitive(ann, key); /* set once, whoever asks twice */
        if (!(value ? cJSON_AddStringToObject(ann, key, value) : cJSON_AddNullToObject(ann, key)))
                return -ENOMEM;
        return 0;
}

static int set_time_annotation(cJSON *root, const char *key, int64_t usec) {
        char buf[64];
        int r;

        r = timesrc_format_rfc3339(usec, buf, sizeof buf);
        if (r < 0)
                return r;
        return set_annotation(root, key, buf);
}

/* drainer.io/message, cut to DRAIN_MESSAGE_MAX at a character boundary. */
static int set_message(cJSON *root, const char *message) {
        _cleanup_free_ char *m = NULL;

        if (!message)
                return set_annotation(root, DRAINER_ANN_MESSAGE, NULL);
        m = strndup(message, utf8_prefix(message, DRAIN_MESSAGE_MAX));
        if (!m)
                return -ENOMEM;
        return set_annotation(root, DRAINER_ANN_MESSAGE, m);
}

static int set_phase(cJSON *root, enum drain_phase phase, int64_t now_usec) {
        const char *p = drain_phase_to_string(phase);
        int r;

        if (!p)
                return -EINVAL;
        r = set_annotation(root, DRAINER_ANN_STATE, p);
        if (r < 0)
                return r;
        return set_time_annotation(root, DRAINER_ANN_STATE_SINCE, now_usec);
}

static bool is_drain_taint(const struct node_taint *t) {
        return streq_ptr(t->key, DRAIN_TAINT_KEY) && streq_ptr(t->effect, DRAIN_TAINT_EFFECT);
}

static int add_taint(cJSON *arr, const char *key, const char *value, const char *effect,
                     const char *time_added) {
        cJSON *o = cJSON_CreateObject();

        if (!o || !cJSON_AddItemToArray(arr, o)) {
                cJSON_Delete(o);
                return -ENOMEM;
        }
        if ((key && !cJSON_AddStringToObject(o, "key", key)) ||
            (value && !cJSON_AddStringToObject(o, "value", value)) ||
            (effect && !cJSON_AddStringToObject(o, "effect", effect)) ||
            (time_added && !cJSON_AddStringToObject(o, "timeAdded", time_added)))
                return -ENOMEM;
        return 0;
}

static bool is_out_of_service_taint(const struct node_taint *t) {
        return streq_ptr(t->key, OUT_OF_SERVICE_TAINT_KEY) &&
               streq_ptr(t->effect, OUT_OF_SERVICE_TAINT_EFFECT);
}

/* spec.taints with the drain taint (drain) and the out-of-service taint (oos) each
 * present (1), absent (0) or as they are (-1). A merge patch replaces the whole list
 * (core/v1 has no merge key for taints), so when it changes the list is n's, in
 * order, plus or minus ours; when it does not, the field stays out of the patch and
 * nobody's taints are rewritten. */
static int set_taints(cJSON *root, const struct node_rec *n, int drain, int oos) {
        bool has_drain = node_rec_find_taint(n, DRAIN_TAINT_KEY, DRAIN_TAINT_EFFECT);
        bool has_oos = node_rec_find_taint(n, OUT_OF_SERVICE_TAINT_KEY, OUT_OF_SERVICE_TAINT_EFFECT);
        cJSON *spec, *arr;
        int r;

        if ((drain < 0 || (drain > 0) == has_drain) && (oos < 0 || (oos > 0) == has_oos))
                return 0;
        spec = sub_object(root, "spec", NULL);
        if (!spec)
                return -ENOMEM;
        arr = cJSON_CreateArray();
        if (!arr)
                return -ENOMEM;
        if (!cJSON_AddItemToObject(spec, "taints", arr)) {
                cJSON_Delete(arr);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n->n_taints; i++) {
                if ((drain >= 0 && is_drain_taint(&n->taints[i])) ||
                    (oos >= 0 && is_out_of_service_taint(&n->taints[i])))
                        continue;
                r = add_taint(arr, n->taints[i].key, n->taints[i].value, n->taints[i].effect,
                              n->taints[i].time_added);
                if (r < 0)
                        return r;
        }
        /* A kept taint stays as it was, its value and timeAdded included. */
        for (size_t i = 0; i < n->n_taints; i++) {
                bool keep = (drain > 0 && is_drain_taint(&n->taints[i])) ||
                            (oos > 0 && is_out_of_service_taint(&n->taints[i]));

                if (!keep)
                        continue;
                r = add_taint(arr, n->taints[i].key, n->taints[i].value, n->taints[i].effect,
                              n->taints[i].time_added);
                if (r < 0)
                        return r;
        }
        if (drain > 0 && !has_drain) {
                r = add_taint(arr, DRAIN_TAINT_KEY, NULL, DRAIN_TAINT_EFFECT, NULL);
                if (r < 0)
                        return r;
        }
        if (oos > 0 && !has_oos) {
                r = add_taint(arr, OUT_OF_SERVICE_TAINT_KEY, OUT_OF_SERVICE_TAINT_VALUE,
                              OUT_OF_SERVICE_TAINT_EFFECT, NULL);
                if (r < 0)
                        return r;
        }
        if (cJSON_GetArraySize(arr) == 0) {
                /* null removes the field; [] would leave an empty list behind. */
                cJSON *null = cJSON_CreateNull();

                if (!null || !cJSON_ReplaceItemInObjectCaseSensitive(spec, "taints", null)) {
                        cJSON_Delete(null);
                        return -ENOMEM;
                }
        }
        return 0;
}

static int set_drain_taint(cJSON *root, const struct node_rec *n, bool present) {
        return set_taints(root, n, present, -1);
}

/* The out-of-service taint goes with the drain taint only when drainer recorded it
 * (drainer.io/out-of-service): a taint someone else applied is theirs to remove. */
static int remove_drain_taints(cJSON *root, const struct node_rec *n) {
        bool ours = kv_get(n->annotations, n->n_annotations, DRAINER_ANN_OUT_OF_SERVICE);
        int r;

        r = set_taints(root, n, 0, ours ? 0 : -1);
        if (r < 0 || !ours)
                return r;
        return set_annotation(root, DRAINER_ANN_OUT_OF_SERVICE, NULL);
}

static int set_unschedulable(cJSON *root, bool value) {
        cJSON *spec = sub_object(root, "spec", NULL);

        return spec && cJSON_AddBoolToObject(spec, "unschedulable", value) ? 0 : -ENOMEM;
}

static int patch_print(const cJSON *root, char **ret) {
        char *s = cJSON_PrintUnformatted(root);

        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

/* The start of a drain, in ONE patch: started-at (kept if set, else now), state,
 * state-since=now and the message; a node drain (cordon) also records who cordoned
 * and cordons and taints the node, in state evict-claim-holders; a driver-scoped one
 * (!cordon) records its DeviceTaintRules instead, in state cordon, and leaves the
 * node itself alone. */
static int patch_start(const struct node_rec *n, int64_t now_usec, bool cordon, const char *rules,
                       const char *message, char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        const char *v;
        int64_t t;
        int r;

        assert(ret);
        r = patch_new(n, &root);
        if (r < 0)
                return r;

        /* Who cordoned is recorded once: after a crash between two attempts the
         * node is already unschedulable by our hand and must not read as the user's. */
        if (cordon) {
                v = kv_get(n->annotations, n->n_annotations, DRAINER_ANN_WAS_UNSCHEDULABLE);
                if (v && !streq(v, "true") && !streq(v, "false"))
                        return log_debug_errno(EBADMSG, "node \"%s\": bad %s, not cordoning", n->name,
                                               DRAINER_ANN_WAS_UNSCHEDULABLE);
                if (!v) {
                        r = set_annotation(root, DRAINER_ANN_WAS_UNSCHEDULABLE,
                                           n->unschedulable ? "true" : "false");
                        if (r < 0)
                                return r;
                }
        }
        v = kv_get(n->annotations, n->n_annotations, DRAINER_ANN_STARTED_AT);
        if (v && (timesrc_parse_rfc3339(v, &t) < 0 || t <= 0))
                return log_debug_errno(EBADMSG, "node \"%s\": bad %s, not starting the drain",
                                       strna(n->name), DRAINER_ANN_STARTED_AT);
        if (!v) {
                r = set_time_annotation(root, DRAINER_ANN_STARTED_AT, now_usec);
                if (r < 0)
                        return r;
        }
        /* A cordon and the evictions that follow it at once: one write (a crash after it
         * resumes the evictions, and they wait until the node is seen cordoned). */
        r = set_phase(root, cordon ? DRAIN_PHASE_EVICT_CLAIM_HOLDERS : DRAIN_PHASE_CORDON, now_usec);
        if (r < 0)
                return r;
        if (!cordon) {
                r = set_annotation(root, DRAINER_ANN_TAINT_RULES, rules && *rules ? rules : NULL);
                if (r < 0)
                        return r;
        }
        r = set_message(root, message);
        if (r < 0)
                return r;
        if (cordon) {
                r = set_unschedulable(root, true);
                if (r < 0)
                        return r;
                r = set_drain_taint(root, n, true);
                if (r < 0)
                        return r;
        }
        return patch_print(root, ret);
}

int drain_patch_cordon(const struct node_rec *n, int64_t now_usec, char **ret) {
        /* A message from before (e.g. serve's "waiting for a slot") is over now. */
        return patch_start(n, now_usec, true, NULL, "cordoned; evicting the pods that hold ResourceClaims",
                           ret);
}

int drain_patch_phase(const struct node_rec *n, enum drain_phase phase, int64_t now_usec,
                      const char *message, char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        int r;

        assert(ret);
        if (!drain_phase_to_string(phase))
                return -EINVAL;
        r = patch_new(n, &root);
        if (r < 0)
                return r;
        r = set_phase(root, phase, now_usec);
        if (r < 0)
                return r;
        r = set_message(root, message);
        if (r < 0)
                return r;
        return patch_print(root, ret);
}

int drain_patch_message(const struct node_rec *n, const char *message, char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        int r;

        assert(ret);
        r = patch_new(n, &root);
        if (r < 0)
                return r;
        r = set_message(root, message);
        if (r < 0)
                return r;
        return patch_print(root, ret);
}

int drain_patch_driver_stop(const struct node_rec *n, const struct driver_stop_record *stops, size_t n_stops,
                            char **ret) {
        return drain_patch_driver_stop_phase(n, stops, n_stops, _DRAIN_PHASE_INVALID, 0, NULL, ret);
}

int drain_patch_driver_stop_phase(const struct node_rec *n, const struct driver_stop_record *stops,
                                  size_t n_stops, enum drain_phase phase, int64_t now_usec,
                                  const char *message, char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL, *arr = NULL;
        _cleanup_free_ char *value = NULL;
        int r;

        assert(ret);
        assert(stops || n_stops == 0);
        if (n_stops > DRAIN_STATE_MAX_STOPS)
                return -EINVAL;
        r = patch_new(n, &root);
        if (r < 0)
                return r;
        if (n_stops > 0) {
                arr = cJSON_CreateArray();
                if (!arr)
                        return -ENOMEM;
                for (size_t i = 0; i < n_stops; i++) {
                        r = drain_stop_to_json(&stops[i], arr);
                        if (r < 0)
                                return r;
                }
                value = cJSON_PrintUnformatted(arr);
                if (!value)
                        return -ENOMEM;
        }
        r = set_annotation(root, DRAINER_ANN_DRIVER_STOP, value);
        if (r < 0)
                return r;
        if (phase != _DRAIN_PHASE_INVALID) {
                if (!drain_phase_to_string(phase))
                        return -EINVAL;
                r = set_phase(root, phase, now_usec);
                if (r < 0)
                        return r;
                r = set_message(root, message);
                if (r < 0)
                        return r;
        }
        return patch_print(root, ret);
}

int drain_patch_label(const struct node_rec *n, const char *key, const char *value, char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        cJSON *labels;
        int r;

        assert(ret);
        if (!label_key_is_valid(key) || (value && !label_value_is_valid(value)))
                return -EINVAL;
        r = patch_new(n, &root);
        if (r < 0)
                return r;
        labels = sub_object(root, "metadata", "labels");
        if (!labels ||
            !(value ? cJSON_AddStringToObject(labels, key, value) : cJSON_AddNullToObject(labels, key)))
                return -ENOMEM;
        return patch_print(root, ret);
}

int drain_patch_remove_taint(const struct node_rec *n, int64_t now_usec, const char *message, char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        int r;

        assert(ret);
        r = patch_new(n, &root);
        if (r < 0)
                return r;
        r = set_phase(root, DRAIN_PHASE_RESTORE_DRIVERS, now_usec);
        if (r < 0)
                return r;
        if (message) {
                r = set_message(root, message);
                if (r < 0)
                        return r;
        }
        r = remove_drain_taints(root, n);
        if (r < 0)
                return r;
        return patch_print(root, ret);
}

int drain_patch_finish(const struct node_rec *n, bool uncordon, bool keep_request, char **ret) {
        static const char *const keys[] = {
                DRAINER_ANN_STATE,       DRAINER_ANN_STATE_SINCE,
                DRAINER_ANN_STARTED_AT,  DRAINER_ANN_WAS_UNSCHEDULABLE,
                DRAINER_ANN_DRIVER_STOP, DRAINER_ANN_MESSAGE,
        };
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        int r;

        assert(ret);
        r = patch_new(n, &root);
        if (r < 0)
                return r;
        if (!keep_request) {
                r = set_annotation(root, DRAINER_ANN_REQUEST, NULL);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                r = set_annotation(root, keys[i], NULL);
                if (r < 0)
                        return r;
        }
        /* Every other drainer.io/ annotation too (e.g. serve's shutdown-boot-id): the node
         * leaves drainer's hands clean. node_rec keeps only drainer.io/ annotations. A
         * request kept keeps who asked for it. */
        for (size_t i = 0; i < n->n_annotations; i++) {
                if (streq(n->annotations[i].key, DRAINER_ANN_REQUEST) ||
                    (keep_request && streq(n->annotations[i].key, DRAINER_ANN_REQUESTED_BY)) ||
                    cJSON_GetObjectItemCaseSensitive(json_path(root, "metadata.annotations"),
                                                     n->annotations[i].key))
                        continue;
                r = set_annotation(root, n->annotations[i].key, NULL);
                if (r < 0)
                        return r;
        }
        if (uncordon) {
                r = set_unschedulable(root, false);
                if (r < 0)
                        return r;
        }
        r = remove_drain_taints(root, n);
        if (r < 0)
                return r;
        return patch_print(root, ret);
}

int drain_patch_out_of_service(const struct node_rec *n, int64_t now_usec, const char *message, char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        int r;

        assert(ret);
        r = patch_new(n, &root);
        if (r < 0)
                return r;
        r = set_time_annotation(root, DRAINER_ANN_OUT_OF_SERVICE, now_usec);
        if (r < 0)
                return r;
        if (message) {
                r = set_message(root, message);
                if (r < 0)
                        return r;
        }
        r = set_taints(root, n, -1, 1);
        if (r < 0)
                return r;
        return patch_print(root, ret);
}

int drain_patch_request(const struct node_rec *n, const char *value, char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        int r;

        assert(ret);
        if (value && drain_request_from_string(value) <= DRAIN_REQUEST_NONE)
                return -EINVAL;
        r = patch_new(n, &root);
        if (r < 0)
                return r;
        r = set_annotation(root, DRAINER_ANN_REQUEST, value);
        if (r < 0)
                return r;
        return patch_print(root, ret);
}

/* ---- node lifecycle conditions (--node-conditions) ---- */

#define CONDITION_REASON_PREFIX "Drainer"

struct condition_want {
        const char *status, *reason, *message;
};

static void conditions_wanted(bool has_phase, enum drain_phase phase,
                              struct condition_want w[_NODE_CONDITION_MAX]) {
        static const struct condition_want
                draining[] = {
                        [NODE_CONDITION_DRAIN_IN_PROGRESS] = { "True", "DrainerDraining",
                                                               "drainer is draining the node in the DRA-safe "
                                                               "order (its phase: annotation drainer.io/state)" },
                        [NODE_CONDITION_DRAINED] = { "False", "DrainerDraining", "drainer is draining the node" },
                },
                drained[] = {
                        [NODE_CONDITION_DRAIN_IN_PROGRESS] = { "False", "DrainerDrained",
                                                               "drainer drained the node" },
                        [NODE_CONDITION_DRAINED] = { "True", "DrainerDrained",
                                                     "drained by drainer: no pods, no ResourceClaims, no "
                                                     "DRA driver running" },
                },
                restoring[] = {
                        [NODE_CONDITION_DRAIN_IN_PROGRESS] = { "False", "DrainerRestoring",
                                                               "drainer is restoring the node" },
                        [NODE_CONDITION_DRAINED] = { "False", "DrainerRestoring",
                                                     "drainer is restoring the DRA drivers and uncordoning" },
                },
                idle[] = {
                        [NODE_CONDITION_DRAIN_IN_PROGRESS] = { "False", "DrainerRestored",
                                                               "no drain by drainer is in progress" },
                        [NODE_CONDITION_DRAINED] = { "False", "DrainerRestored",
                                                     "drainer restored the node (or no drain by drainer is "
                                                     "recorded on it)" },
                };
        const struct condition_want *src = idle;

        if (has_phase && drain_phase_in_stage(phase, DRAIN_STAGE_TAKING))
                src = draining;
        else if (has_phase && drain_phase_in_stage(phase, DRAIN_STAGE_DRAINED))
                src = drained;
        else if (has_phase && drain_phase_in_stage(phase, DRAIN_STAGE_RESTORING))
                src = restoring;
        memcpy(w, src, sizeof(struct condition_want) * _NODE_CONDITION_MAX);
}

int drain_patch_conditions(const struct node_rec *n, bool has_phase, enum drain_phase phase,
                           int64_t now_usec, char **ret) {
        struct condition_want w[_NODE_CONDITION_MAX];
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        cJSON *list = NULL;
        char now[64];
        bool idle;
        int r;

        assert(n);
        assert(ret);
        conditions_wanted(has_phase, phase, w);
        idle = streq(w[0].reason, "DrainerRestored");
        r = timesrc_format_rfc3339(now_usec, now, sizeof(now));
        if (r < 0)
                return r;
        for (size_t c = 0; c < _NODE_CONDITION_MAX; c++) {
                const struct node_condition_rec *have = &n->lifecycle[c];
                cJSON *item;

                if (streq_ptr(have->status, w[c].status) && streq_ptr(have->reason, w[c].reason))
                        continue;
                /* No drain: only our own conditions are set back, never someone else's,
                 * and a node that never had them gets none. */
                if (idle &&
                    (!have->status || !have->reason ||
                     strncmp(have->reason, CONDITION_REASON_PREFIX, strlen(CONDITION_REASON_PREFIX)) != 0))
                        continue;
                if (!root) {
                        cJSON *status;

                        root = cJSON_CreateObject();
                        status = root ? cJSON_AddObjectToObject(root, "status") : NULL;
                        list = status ? cJSON_AddArrayToObject(status, "conditions") : NULL;
                        if (!list)
                                return -ENOMEM;
                }
                item = cJSON_CreateObject();
                if (!item)
                        return -ENOMEM;
                cJSON_AddItemToArray(list, item);
                if (!cJSON_AddStringToObject(item, "type", node_lifecycle_condition_type(c)) ||
                    !cJSON_AddStringToObject(item, "status", w[c].status) ||
                    !cJSON_AddStringToObject(item, "reason", w[c].reason) ||
                    !cJSON_AddStringToObject(item, "message", w[c].message) ||
                    !cJSON_AddStringToObject(item, "lastHeartbeatTime", now))
                        return -ENOMEM;
                if (!streq_ptr(have->status, w[c].status) &&
                    !cJSON_AddStringToObject(item, "lastTransitionTime", now))
                        return -ENOMEM;
        }
        if (!root) {
                *ret = NULL;
                return 0;
        }
        *ret = cJSON_PrintUnformatted(root);
        return *ret ? 1 : -ENOMEM;
}

int drain_patch_taint_rules(const struct node_rec *n, const char *rules, const char *message, char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        int r;

        assert(ret);
        r = patch_new(n, &root);
        if (r < 0)
                return r;
        r = set_annotation(root, DRAINER_ANN_TAINT_RULES, rules && *rules ? rules : NULL);
        if (r < 0)
                return r;
        r = message ? set_message(root, message) : 0;
        if (r < 0)
                return r;
        return patch_print(root, ret);
}

int drain_patch_isolate(const struct node_rec *n, int64_t now_usec, const char *rules, const char *message,
                        char **ret) {
        return patch_start(n, now_usec, false, rules, message, ret);
}
