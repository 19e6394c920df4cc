/* The model of `drainer status NODE` (statusview.h): one node's records sorted,
 * classified as a drain sees them, and their -o json document. Reads only what it is
 * given; owns the two arrays of classes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/macro.h"
#include "drainer/ctl/statusview.h"
#include "drainer/dra/recjson.h"
#include "drainer/drain/device.h"
#include "drainer/drain/state.h"
#include "drainer/kube/objects.h"

const enum pod_class status_class_order[_POD_CLASS_MAX] = {
        POD_CLASS_CLAIM_HOLDER, POD_CLASS_WORKLOAD, POD_CLASS_DRIVER,
        POD_CLASS_DAEMONSET,    POD_CLASS_MIRROR,   POD_CLASS_FINISHED,
};

const char *const status_class_json_key[_POD_CLASS_MAX] = {
        [POD_CLASS_DRIVER] = "driver",     [POD_CLASS_CLAIM_HOLDER] = "claimHolders",
        [POD_CLASS_WORKLOAD] = "workload", [POD_CLASS_DAEMONSET] = "daemonSet",
        [POD_CLASS_MIRROR] = "mirror",     [POD_CLASS_FINISHED] = "finished",
};

static int cmp_pod(const void *a, const void *b) {
        const struct pod_rec *x = *(const struct pod_rec *const *)a, *y = *(const struct pod_rec *const *)b;
        int r = strcmp(x->ns, y->ns);

        return r ? r : strcmp(x->name, y->name);
}

static int cmp_claim(const void *a, const void *b) {
        const struct claim_rec *x = *(const struct claim_rec *const *)a,
                               *y = *(const struct claim_rec *const *)b;
        int r = strcmp(x->ns, y->ns);

        return r ? r : strcmp(x->name, y->name);
}

/* Who put the node in its current schedulability: drainer records the state
 * before it cordons. */
static const char *cordon_owner(const struct node_rec *n) {
        const char *was = kv_get(n->annotations, n->n_annotations, "drainer.io/was-unschedulable");

        if (!n->unschedulable)
                return NULL;
        if (streq_ptr(was, "false"))
                return "drainer";
        return "someone else";
}

int status_view_build(const struct node_input *in, const struct driver_filter *f, struct status_view *ret) {
        struct status_view v = { .in = in, .cordoned_by = cordon_owner(in->node) };

        if (in->n_pods > 0)
                qsort(in->pods, in->n_pods, sizeof(*in->pods), cmp_pod);
        if (in->n_claims > 0)
                qsort(in->claims, in->n_claims, sizeof(*in->claims), cmp_claim);
        v.cls = calloc(in->n_pods + 1, sizeof(*v.cls));
        v.why = calloc(in->n_claims + 1, sizeof(*v.why));
        if (!v.cls || !v.why) {
                status_view_done(&v);
                return -ENOMEM;
        }
        for (size_t i = 0; i < in->n_pods; i++)
                v.cls[i] = pod_classify(in->pods[i], f);
        for (size_t i = 0; i < in->n_claims; i++) {
                v.why[i] =
                        claim_on_node(in->claims[i], in->node->name, (const struct pod_rec *const *)in->pods,
                                      in->n_pods, (const struct slice_rec *const *)in->slices, in->n_slices);
                if (v.why[i] != CLAIM_NOT_ON_NODE)
                        v.n_on_node++;
        }
        *ret = v;
        return 0;
}

void status_view_done(struct status_view *v) {
        free(v->cls);
        free(v->why);
        *v = (struct status_view){};
}

bool status_view_claim_held_by_driver(const struct status_view *v, size_t i) {
        for (size_t k = 0; k < v->in->n_pods; k++)
                if (v->cls[k] == POD_CLASS_DRIVER && claim_reserved_by_pod(v->in->claims[i], v->in->pods[k]))
                        return true;
        return false;
}

const char *status_view_claim_note(const struct status_view *v, size_t i) {
        if (status_view_claim_held_by_driver(v, i))
                return ", held by the driver";
        if (claim_podgroup_unused(v->in->claims[i], v->in->node->name,
                                  (const struct pod_rec *const *)v->in->pods, v->in->n_pods))
                return ", its PodGroup's, used by no pod here";
        if (claim_skips_unprepare(v->in->claims[i], NULL, 0))
                return ", no driver needed (its devices skip NodeUnprepareResources)";
        return "";
}

size_t status_view_count(const struct status_view *v, enum pod_class c) {
        size_t count = 0;

        for (size_t i = 0; i < v->in->n_pods; i++)
                count += v->cls[i] == c;
        return count;
}

/* A driver drained by `drain --driver` (drainer.io/state.NAME): {driver, state}. */
static void add_driver_out(const char *driver, size_t len, const char *phase, void *userdata) {
        cJSON *o = cJSON_CreateObject();
        char name[256];

        snprintf(name, sizeof(name), "%.*s", (int)len, driver);
        if (!o || !cJSON_AddStringToObject(o, "driver", name) ||
            !cJSON_AddStringToObject(o, "state", strna(phase)) || !cJSON_AddItemToArray(userdata, o))
                cJSON_Delete(o);
}

/* Devices drained by `drain --device`: {devices, state}. */
static void add_devices_out(const char *devices, const char *phase, const char *scope, void *userdata) {
        cJSON *o = cJSON_CreateObject();

        if (!o || !cJSON_AddStringToObject(o, "devices", devices ? devices : scope) ||
            !cJSON_AddStringToObject(o, "state", strna(phase)) || !cJSON_AddItemToArray(userdata, o))
                cJSON_Delete(o);
}

static cJSON *node_json(const struct status_view *v, cJSON *root) {
        const struct node_rec *n = v->in->node;
        cJSON *jn = cJSON_AddObjectToObject(root, "node"), *taints, *ann;

        cJSON_AddStringToObject(jn, "name", n->name);
        cJSON_AddBoolToObject(jn, "unschedulable", n->unschedulable);
        cJSON_AddBoolToObject(jn, "ready", n->ready);
        if (v->cordoned_by)
                cJSON_AddStringToObject(jn, "cordonedBy", v->cordoned_by);
        else
                cJSON_AddNullToObject(jn, "cordonedBy");
        taints = cJSON_AddArrayToObject(jn, "taints");
        for (size_t i = 0; i < n->n_taints; i++) {
                cJSON *t = cJSON_CreateObject();

                cJSON_AddStringToObject(t, "key", strna(n->taints[i].key));
                if (n->taints[i].value)
                        cJSON_AddStringToObject(t, "value", n->taints[i].value);
                cJSON_AddStringToObject(t, "effect", strna(n->taints[i].effect));
                cJSON_AddItemToArray(taints, t);
        }
        drain_scope_foreach(n, add_driver_out, cJSON_AddArrayToObject(jn, "driversOutOfService"));
        drain_devices_foreach(n, add_devices_out, cJSON_AddArrayToObject(jn, "devicesOutOfService"));
        ann = cJSON_AddObjectToObject(jn, "drainerAnnotations");
        for (size_t i = 0; i < n->n_annotations; i++)
                cJSON_AddStringToObject(ann, n->annotations[i].key, n->annotations[i].value);
        return jn;
}

cJSON *status_view_to_json(const struct status_view *v) {
        const struct node_input *s = v->in;
        cJSON *root = cJSON_CreateObject(), *jp, *jc, *js;

        if (!root)
                return NULL;
        if (s->dra_api)
                cJSON_AddStringToObject(root, "draApi", s->dra_api);
        else
                cJSON_AddNullToObject(root, "draApi");
        cJSON_AddBoolToObject(root, "draServed", !s->dra_off);
        node_json(v, root);
        jp = cJSON_AddObjectToObject(root, "pods");
        for (size_t k = 0; k < ELEMENTSOF(status_class_order); k++) {
                cJSON *arr = cJSON_AddArrayToObject(jp, status_class_json_key[status_class_order[k]]);

                for (size_t i = 0; i < s->n_pods; i++)
                        if (v->cls[i] == status_class_order[k])
                                cJSON_AddItemToArray(arr, pod_rec_to_json(s->pods[i]));
        }
        jc = cJSON_AddArrayToObject(root, "claims");
        for (size_t i = 0; i < s->n_claims; i++)
                if (v->why[i] != CLAIM_NOT_ON_NODE)
                        cJSON_AddItemToArray(jc, claim_rec_to_json(s->claims[i], v->why[i],
                                                                   status_view_claim_held_by_driver(v, i)));
        js = cJSON_AddArrayToObject(root, "resourceSlices");
        for (size_t i = 0; i < s->n_slices; i++) {
                const struct slice_rec *sl = s->slices[i];
                cJSON *o = cJSON_CreateObject();

                cJSON_AddStringToObject(o, "name", sl->name);
                cJSON_AddStringToObject(o, "driver", sl->driver);
                cJSON_AddStringToObject(o, "pool", sl->pool);
                cJSON_AddNumberToObject(o, "devices", (double)sl->n_devices);
                cJSON_AddItemToArray(js, o);
        }
        return root;
}
