/* Compact records built from Kubernetes JSON. Each builder runs twice over the
 * borrowed cJSON tree: once to measure, once to fill a single allocation laid
 * out as struct, arrays, strings. Records own nothing else, so free() is
 * enough; they never point into the cJSON tree. The JSON is whatever the API
 * server (and so anyone who may write the object) sent: a builder that takes
 * another decision on the second pass fails the record (-EBADMSG), it never
 * writes past the allocation or reaches an assert. */
#include <assert.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "drainer/base/timesrc.h"
#include "drainer/kube/objects.h"

/* ---- packing ---- */

struct packer {
        char *base; /* NULL while measuring */
        size_t off;
        size_t size;   /* allocated bytes, when filling */
        bool overflow; /* the fill asked for more than the measure did */
};

#define PACK_ALIGN alignof(max_align_t)

static size_t align_up(size_t n) {
        return (n + PACK_ALIGN - 1) & ~(PACK_ALIGN - 1);
}

/* Room for n elements; NULL while measuring or for n == 0 (write through
 * ELEM(), which falls back to a scratch element). */
static void *pk_array(struct packer *pk, size_t n, size_t elem) {
        void *p = NULL;

        if (n == 0)
                return NULL;
        pk->off = align_up(pk->off);
        if (pk->base) {
                if (pk->overflow || n > (pk->size - MIN(pk->off, pk->size)) / elem) {
                        pk->overflow = true;
                        return NULL;
                }
                p = pk->base + pk->off;
        }
        pk->off += n * elem;
        return p;
}

#define ELEM(arr, i, scratch) ((arr) ? &(arr)[i] : &(scratch))

/* Copies s (may be NULL) into the record. */
static const char *pk_str(struct packer *pk, const char *s) {
        size_t l;
        char *d = NULL;

        if (!s)
                return NULL;
        l = strlen(s) + 1;
        if (pk->base) {
                if (pk->overflow || pk->off > pk->size || l > pk->size - pk->off) {
                        pk->overflow = true;
                        return NULL;
                }
                d = memcpy(pk->base + pk->off, s, l);
        }
        pk->off += l;
        return d;
}

/* Optional strings: "" is stored as NULL. */
static const char *pk_opt(struct packer *pk, const char *s) {
        return s && *s ? pk_str(pk, s) : NULL;
}

/* Runs build() to measure, allocates, runs it again to fill. build() must
 * take the same decisions both times, from the JSON only, never from what the
 * record holds so far (it is zero while measuring). Should it not, the record
 * is refused with -EBADMSG rather than trusted. */
#define PACK_RECORD(type, obj, ret, build)                                                 \
        ({                                                                                 \
                struct packer _pk = { .off = sizeof(type) };                               \
                type _tmp = {}, *_rec;                                                     \
                int _r = build(obj, &_pk, &_tmp);                                          \
                if (_r >= 0) {                                                             \
                        size_t _size = _pk.off;                                            \
                        _rec = calloc(1, _size);                                           \
                        if (!_rec)                                                         \
                                _r = -ENOMEM;                                              \
                        else {                                                             \
                                _pk = (struct packer){ .base = (char *)_rec,               \
                                                       .off = sizeof(type),                \
                                                       .size = _size };                    \
                                _r = build(obj, &_pk, _rec);                               \
                                if (_r >= 0 && (_pk.overflow || _pk.off != _size)) {       \
                                        log_debug("%s: the two passes disagree (%zu, %zu " \
                                                  "bytes), refusing the record",           \
                                                  #build, _size, _pk.off);                 \
                                        _r = -EBADMSG;                                     \
                                }                                                          \
                                if (_r < 0)                                                \
                                        free(_rec);                                        \
                                else {                                                     \
                                        _rec->alloc_size = _size;                          \
                                        *(ret) = _rec;                                     \
                                }                                                          \
                        }                                                                  \
                }                                                                          \
                _r;                                                                        \
        })

/* status.conditions[type==t].status == "True" */
static bool condition_true(const cJSON *status, const char *t) {
        const cJSON *c;

        cJSON_ArrayForEach(
                c, json_get_arr(status,
                                "conditions")) if (streq_ptr(json_get_str(c, "type"),
                                                             t)) return streq_ptr(json_get_str(c, "status"),
                                                                                  "True");
        return false;
}

/* When condition t last became what it is now (lastTransitionTime, µs since the
 * epoch), if its status is not "True"; 0 when it is True, absent, or the time is
 * missing or unparsable. */
static int64_t condition_not_true_since(const cJSON *status, const char *t) {
        const cJSON *c;
        int64_t at;

        cJSON_ArrayForEach(c, json_get_arr(status, "conditions")) {
                if (!streq_ptr(json_get_str(c, "type"), t))
                        continue;
                if (streq_ptr(json_get_str(c, "status"), "True") ||
                    timesrc_parse_rfc3339(json_get_str(c, "lastTransitionTime"), &at) < 0 || at <= 0)
                        return 0;
                return at;
        }
        return 0;
}

/* String-valued members of a map (labels, annotations) whose key starts with
 * prefix (NULL: all). */
static int pack_kv(struct packer *pk, const cJSON *map, const char *prefix, const struct kv **ret,
                   size_t *ret_n) {
        size_t n = 0, i = 0, plen = prefix ? strlen(prefix) : 0;
        const cJSON *c;
        struct kv *a, scratch;

        cJSON_ArrayForEach(c, map) if (c->string && cJSON_IsString(c) &&
                                       (!prefix || strncmp(c->string, prefix, plen) == 0)) n++;
        a = pk_array(pk, n, sizeof(struct kv));
        cJSON_ArrayForEach(c, map) {
                struct kv *e;

                if (!c->string || !cJSON_IsString(c) || (prefix && strncmp(c->string, prefix, plen) != 0))
                        continue;
                e = ELEM(a, i++, scratch);
                e->key = pk_str(pk, c->string);
                e->value = pk_str(pk, c->valuestring);
        }
        *ret = a;
        *ret_n = n;
        return 0;
}

/* The controller ownerReference, or NULL. */
static const cJSON *controller_ref(const cJSON *metadata) {
        const cJSON *o;

        cJSON_ArrayForEach(
                o, json_get_arr(metadata, "ownerReferences")) if (json_get_true(o, "controller")) return o;
        return NULL;
}

static int required_meta(const cJSON *obj, bool namespaced, const cJSON **ret_meta) {
        const cJSON *meta = json_get_obj(obj, "metadata");
        const char *name = json_get_str(meta, "name"), *ns = json_get_str(meta, "namespace");

        if (!meta || !name || !*name || (namespaced && (!ns || !*ns)))
                return -EBADMSG;
        *ret_meta = meta;
        return 0;
}

/* ---- pods ---- */

static const char *const pod_phase_table[_POD_PHASE_MAX] = {
        [POD_PENDING] = "Pending", [POD_RUNNING] = "Running", [POD_SUCCEEDED] = "Succeeded",
        [POD_FAILED] = "Failed",   [POD_UNKNOWN] = "Unknown",
};

DEFINE_STRING_TABLE_LOOKUP(pod_phase, enum pod_phase, _POD_PHASE_MAX, _POD_PHASE_INVALID)

/* status.resourceClaimStatuses[name==name].resourceClaimName: the claim
 * generated from a template, NULL while not generated or when none is needed. */
static const char *generated_claim_name(const cJSON *status, const char *name) {
        const cJSON *s;

        if (!name)
                return NULL; /* a reference without a name matches no status entry */
        cJSON_ArrayForEach(s, json_get_arr(status, "resourceClaimStatuses")) if (
                streq_ptr(json_get_str(s, "name"), name)) return json_get_str(s, "resourceClaimName");
        return NULL;
}

static int pack_tolerations(struct packer *pk, const cJSON *spec, struct pod_rec *p) {
        const cJSON *arr = json_get_arr(spec, "tolerations"), *t;
        size_t n = json_count(arr), i = 0;
        struct toleration *a = pk_array(pk, n, sizeof(struct toleration)), scratch;

        cJSON_ArrayForEach(t, arr) {
                struct toleration *e = ELEM(a, i++, scratch);

                e->key = pk_opt(pk, json_get_str(t, "key"));
                e->op = pk_opt(pk, json_get_str(t, "operator"));
                e->value = pk_opt(pk, json_get_str(t, "value"));
                e->effect = pk_opt(pk, json_get_str(t, "effect"));
                if (!json_get_int64(t, "tolerationSeconds", &e->seconds))
                        e->seconds = -1;
        }
        p->tolerations = a;
        p->n_tolerations = n;
        return 0;
}

/* A kubelet plugin's directory, ROOT/plugins/NAME[/...] (not plugins_registry): NAME,
 * the DRA driver's name (a DNS subdomain: checked loosely, a dot and no odd bytes). */
static bool plugin_dir_driver(const char *path, char *buf, size_t size) {
        const char *p = path, *end;
        size_t len;

        while (p && (p = strstr(p, "/plugins/"))) {
                p += strlen("/plugins/");
                end = strchr(p, '/');
                len = end ? (size_t)(end - p) : strlen(p);
                if (len == 0 || len >= size || !memchr(p, '.', len) ||
                    strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789-.") < len)
                        continue;
                memcpy(buf, p, len);
                buf[len] = 0;
                return true;
        }
        return false;
}

/* Calls f for each allocatedResourcesStatus[].resources[] entry of every container
 * status (regular, init, ephemeral) whose health is Unhealthy. */
static size_t foreach_unhealthy(const cJSON *status,
                                void (*f)(const cJSON *rs, const cJSON *res, void *userdata),
                                void *userdata) {
        static const char *const lists[] = { "containerStatuses", "initContainerStatuses",
                                             "ephemeralContainerStatuses" };
        const cJSON *cs, *rs, *res;
        size_t n = 0;

        for (size_t k = 0; k < ELEMENTSOF(lists); k++)
                cJSON_ArrayForEach(cs, json_get_arr(status, lists[k])) cJSON_ArrayForEach(
                        rs, json_get_arr(cs, "allocatedResourcesStatus"))
                        cJSON_ArrayForEach(
                                res,
                                json_get_arr(rs, "resources")) if (streq_ptr(json_get_str(res, "health"),
                                                                             "Unhealthy") &&
                                                                   json_get_str(rs, "name") &&
                                                                   json_get_str(res, "resourceID")) {
                        if (f)
                                f(rs, res, userdata);
                        n++;
                }
        return n;
}

struct unhealthy_fill {
        struct packer *pk;
        struct resource_health *a;
        size_t i;
};

static void fill_unhealthy(const cJSON *rs, const cJSON *res, void *userdata) {
        struct unhealthy_fill *u = userdata;
        struct resource_health scratch, *e = ELEM(u->a, u->i++, scratch);

        e->resource = pk_str(u->pk, json_get_str(rs, "name"));
        e->id = pk_str(u->pk, json_get_str(res, "resourceID"));
}

static int pack_unhealthy(struct packer *pk, const cJSON *status, struct pod_rec *p) {
        size_t n = foreach_unhealthy(status, NULL, NULL);
        struct unhealthy_fill u = { .pk = pk };

        u.a = pk_array(pk, n, sizeof(struct resource_health));
        foreach_unhealthy(status, fill_unhealthy, &u);
        p->unhealthy = u.a;
        p->n_unhealthy = n;
        return 0;
}

static int pod_build(const cJSON *obj, struct packer *pk, struct pod_rec *p) {
        const cJSON *meta, *spec, *status, *ctl, *arr, *c;
        int64_t v;
        size_t n, i;
        int r;

        r = required_meta(obj, true, &meta);
        if (r < 0)
                return r;
        spec = json_get_obj(obj, "spec");
        status = json_get_obj(obj, "status");

        /* Arrays first (aligned), strings after. */
        r = pack_kv(pk, json_get_obj(meta, "labels"), NULL, &p->labels, &p->n_labels);
        if (r < 0)
                return r;
        r = pack_tolerations(pk, spec, p);
        if (r < 0)
                return r;

        ctl = controller_ref(meta);
        p->has_controller = ctl;
        if (ctl) {
                struct owner_ref *o = pk_array(pk, 1, sizeof(struct owner_ref)), scratch;
                struct owner_ref *e = ELEM(o, 0, scratch);

                e->api_version = pk_opt(pk, json_get_str(ctl, "apiVersion"));
                e->kind = pk_opt(pk, json_get_str(ctl, "kind"));
                e->name = pk_opt(pk, json_get_str(ctl, "name"));
                e->uid = pk_opt(pk, json_get_str(ctl, "uid"));
                e->controller = true;
                p->controller = o;
        }

        r = pack_unhealthy(pk, status, p);
        if (r < 0)
                return r;

        arr = json_get_arr(spec, "resourceClaims");
        n = json_count(arr);
        i = 0;
        {
                struct pod_claim_ref *a = pk_array(pk, n, sizeof(struct pod_claim_ref)), scratch;

                cJSON_ArrayForEach(c, arr) {
                        struct pod_claim_ref *e = ELEM(a, i++, scratch);
                        const char *name = json_get_str(c, "name"),
                                   *claim = json_get_str(c, "resourceClaimName");
                        const char *tmpl = json_get_str(c, "resourceClaimTemplateName");

                        e->name = pk_opt(pk, name);
                        e->from_template = !claim && tmpl && *tmpl;
                        if (claim && *claim)
                                e->claim_name = pk_str(pk, claim);
                        else if (e->from_template)
                                e->claim_name = pk_opt(pk, generated_claim_name(status, name));
                        else
                                e->claim_name = NULL;
                }
                p->claims = a;
                p->n_claims = n;
        }

        p->ns = pk_str(pk, json_get_str(meta, "namespace"));
        p->name = pk_str(pk, json_get_str(meta, "name"));
        p->uid = pk_opt(pk, json_get_str(meta, "uid"));
        p->resource_version = pk_opt(pk, json_get_str(meta, "resourceVersion"));
        p->node_name = pk_opt(pk, json_get_str(spec, "nodeName"));
        p->pod_ip = pk_opt(pk, json_get_str(status, "podIP"));
        p->priority_class_name = pk_opt(pk, json_get_str(spec, "priorityClassName"));
        p->extended_claim_name = pk_opt(
                pk, json_get_str(json_get_obj(status, "extendedResourceClaimStatus"), "resourceClaimName"));

        {
                const char *phase = json_get_str(status, "phase");

                if (!phase || !*phase)
                        p->phase = POD_PENDING;
                else {
                        p->phase = pod_phase_from_string(phase);
                        if (p->phase == _POD_PHASE_INVALID)
                                p->phase = POD_UNKNOWN;
                }
        }
        p->ready = condition_true(status, "Ready");
        p->deleting =
                json_get(meta, "deletionTimestamp") && !cJSON_IsNull(json_get(meta, "deletionTimestamp"));
        if (!json_get_int64(meta, "deletionGracePeriodSeconds", &p->deletion_grace_seconds))
                p->deletion_grace_seconds = -1;
        if (!json_get_str(meta, "deletionTimestamp") ||
            timesrc_parse_rfc3339(json_get_str(meta, "deletionTimestamp"), &p->deletion_usec) < 0)
                p->deletion_usec = 0;
        if (!json_get_int64(spec, "terminationGracePeriodSeconds", &p->termination_grace_seconds))
                p->termination_grace_seconds = 30;
        p->mirror = json_get(json_get_obj(meta, "annotations"), "kubernetes.io/config.mirror");
        p->priority = json_get_int64(spec, "priority", &v) ? (int32_t)v : 0;

        p->has_emptydir = false;
        cJSON_ArrayForEach(c, json_get_arr(spec, "volumes")) if (json_get_obj(c, "emptyDir")) {
                p->has_emptydir = true;
                break;
        }

        p->plugin_driver = NULL;
        cJSON_ArrayForEach(c, json_get_arr(spec, "volumes")) {
                char name[256];

                if (plugin_dir_driver(json_get_str(json_get_obj(c, "hostPath"), "path"), name,
                                      sizeof(name))) {
                        p->plugin_driver = pk_opt(pk, name);
                        break;
                }
        }

        p->grpc_probe_port = 0;
        p->grpc_probe_service = NULL;
        cJSON_ArrayForEach(c, json_get_arr(spec, "containers")) {
                const cJSON *grpc = json_get_obj(json_get_obj(c, "livenessProbe"), "grpc");

                if (grpc && json_get_int64(grpc, "port", &v)) {
                        p->grpc_probe_port = (int32_t)v;
                        p->grpc_probe_service = pk_opt(pk, json_get_str(grpc, "service"));
                        break;
                }
        }

        return 0;
}

bool pod_rec_daemonset(const struct pod_rec *p) {
        return p->controller && streq_ptr(p->controller->kind, "DaemonSet");
}

int pod_rec_from_json(const cJSON *obj, struct pod_rec **ret) {
        assert(ret);
        return PACK_RECORD(struct pod_rec, obj, ret, pod_build);
}

/* ---- resource claims ---- */

/* allocation.nodeSelector: the single node of "one term, one matchFields
 * metadata.name In [NODE]" (the allocator's createNodeSelector for node-local
 * devices), else NULL with *ret_other set when a selector exists at all. */
static const char *node_local_selector(const cJSON *sel, bool *ret_other) {
        const cJSON *terms, *term, *fields, *f, *values, *exprs;

        *ret_other = false;
        if (!sel || cJSON_IsNull(sel))
                return NULL;
        *ret_other = true;

        terms = json_get_arr(sel, "nodeSelectorTerms");
        if (cJSON_GetArraySize(terms) != 1)
                return NULL;
        term = terms->child;
        exprs = json_get_arr(term, "matchExpressions");
        if (cJSON_GetArraySize(exprs) != 0)
                return NULL;
        fields = json_get_arr(term, "matchFields");
        if (cJSON_GetArraySize(fields) != 1)
                return NULL;
        f = fields->child;
        if (!streq_ptr(json_get_str(f, "key"), "metadata.name") ||
            !streq_ptr(json_get_str(f, "operator"), "In"))
                return NULL;
        values = json_get_arr(f, "values");
        if (cJSON_GetArraySize(values) != 1 || !cJSON_IsString(values->child) ||
            !*values->child->valuestring)
                return NULL;

        *ret_other = false;
        return values->child->valuestring;
}

/* skipNodeOperations lists "*" or "NodeUnprepareResources" (unknown values are ignored,
 * as the kubelet does). */
static bool skips_unprepare(const cJSON *ops) {
        const cJSON *op;

        cJSON_ArrayForEach(op, ops) {
                if (cJSON_IsString(op) &&
                    (streq(op->valuestring, "*") || streq(op->valuestring, "NodeUnprepareResources")))
                        return true;
        }
        return false;
}

static int claim_build(const cJSON *obj, struct packer *pk, struct claim_rec *c) {
        const cJSON *meta, *status, *alloc, *arr, *e, *ctl;
        const char *node;
        size_t n, i;
        int r;

        r = required_meta(obj, true, &meta);
        if (r < 0)
                return r;
        status = json_get_obj(obj, "status");
        alloc = json_get_obj(status, "allocation");

        arr = json_get_arr(json_get_obj(alloc, "devices"), "results");
        n = json_count(arr);
        i = 0;
        c->admin_access_any = false;
        {
                struct claim_device *a = pk_array(pk, n, sizeof(struct claim_device)), scratch;

                cJSON_ArrayForEach(e, arr) {
                        struct claim_device *d = ELEM(a, i++, scratch);

                        d->request = pk_opt(pk, json_get_str(e, "request"));
                        d->driver = pk_opt(pk, json_get_str(e, "driver"));
                        d->pool = pk_opt(pk, json_get_str(e, "pool"));
                        d->device = pk_opt(pk, json_get_str(e, "device"));
                        d->admin_access = json_get_true(e, "adminAccess");
                        d->skip_unprepare = skips_unprepare(json_get_arr(e, "skipNodeOperations"));
                        if (json_get_true(e, "adminAccess"))
                                c->admin_access_any = true;
                }
                c->devices = a;
                c->n_devices = n;
        }

        arr = json_get_arr(status, "reservedFor");
        n = json_count(arr);
        i = 0;
        {
                struct claim_consumer *a = pk_array(pk, n, sizeof(struct claim_consumer)), scratch;

                cJSON_ArrayForEach(e, arr) {
                        struct claim_consumer *d = ELEM(a, i++, scratch);

                        d->api_group = pk_opt(pk, json_get_str(e, "apiGroup"));
                        d->resource = pk_opt(pk, json_get_str(e, "resource"));
                        d->name = pk_opt(pk, json_get_str(e, "name"));
                        d->uid = pk_opt(pk, json_get_str(e, "uid"));
                }
                c->reserved = a;
                c->n_reserved = n;
        }

        c->ns = pk_str(pk, json_get_str(meta, "namespace"));
        c->name = pk_str(pk, json_get_str(meta, "name"));
        c->uid = pk_opt(pk, json_get_str(meta, "uid"));
        c->resource_version = pk_opt(pk, json_get_str(meta, "resourceVersion"));
        c->deleting =
                json_get(meta, "deletionTimestamp") && !cJSON_IsNull(json_get(meta, "deletionTimestamp"));
        c->allocated = alloc;
        node = node_local_selector(alloc ? json_get(alloc, "nodeSelector") : NULL, &c->selector_other);
        c->selector_node = pk_opt(pk, node);

        ctl = controller_ref(meta);
        c->owner_pod = c->owner_pod_uid = NULL;
        if (ctl && streq_ptr(json_get_str(ctl, "kind"), "Pod")) {
                c->owner_pod = pk_opt(pk, json_get_str(ctl, "name"));
                c->owner_pod_uid = pk_opt(pk, json_get_str(ctl, "uid"));
        }
        c->extended_resource = streq_ptr(json_get_str(json_get_obj(meta, "annotations"),
                                                      "resource.kubernetes.io/extended-resource-claim"),
                                         "true");
        return 0;
}

int claim_rec_from_json(const cJSON *obj, struct claim_rec **ret) {
        assert(ret);
        return PACK_RECORD(struct claim_rec, obj, ret, claim_build);
}

/* ---- nodes ---- */

static const char *const lifecycle_types[_NODE_CONDITION_MAX] = {
        [NODE_CONDITION_DRAIN_IN_PROGRESS] = "DrainInProgress",
        [NODE_CONDITION_DRAINED] = "Drained",
};

const char *node_lifecycle_condition_type(enum node_lifecycle_condition c) {
        return c >= 0 && c < _NODE_CONDITION_MAX ? lifecycle_types[c] : NULL;
}

static int node_build(const cJSON *obj, struct packer *pk, struct node_rec *n) {
        const cJSON *meta, *spec, *status, *arr, *t;
        size_t cnt, i = 0;
        int r;

        r = required_meta(obj, false, &meta);
        if (r < 0)
                return r;
        spec = json_get_obj(obj, "spec");
        status = json_get_obj(obj, "status");

        r = pack_kv(pk, json_get_obj(meta, "labels"), NULL, &n->labels, &n->n_labels);
        if (r < 0)
                return r;
        r = pack_kv(pk, json_get_obj(meta, "annotations"), "drainer.io/", &n->annotations,
                    &n->n_annotations);
        if (r < 0)
                return r;

        arr = json_get_arr(spec, "taints");
        cnt = json_count(arr);
        {
                struct node_taint *a = pk_array(pk, cnt, sizeof(struct node_taint)), scratch;

                cJSON_ArrayForEach(t, arr) {
                        struct node_taint *e = ELEM(a, i++, scratch);

                        e->key = pk_opt(pk, json_get_str(t, "key"));
                        e->value = pk_opt(pk, json_get_str(t, "value"));
                        e->effect = pk_opt(pk, json_get_str(t, "effect"));
                        e->time_added = pk_opt(pk, json_get_str(t, "timeAdded"));
                }
                n->taints = a;
                n->n_taints = cnt;
        }

        n->name = pk_str(pk, json_get_str(meta, "name"));
        n->uid = pk_opt(pk, json_get_str(meta, "uid"));
        n->resource_version = pk_opt(pk, json_get_str(meta, "resourceVersion"));
        n->kubelet_version = pk_opt(pk, json_get_str(json_get_obj(status, "nodeInfo"), "kubeletVersion"));
        n->unschedulable = json_get_true(spec, "unschedulable");
        n->ready = condition_true(status, "Ready");
        n->not_ready_since_usec = n->ready ? 0 : condition_not_true_since(status, "Ready");
        /* The first condition of a type counts; a duplicate (anyone who may patch
         * nodes/status can write one) is ignored. Decided from the JSON, not from
         * the record, which is empty while measuring. */
        bool seen[_NODE_CONDITION_MAX] = {};
        cJSON_ArrayForEach(t, json_get_arr(status, "conditions")) {
                for (size_t c = 0; c < _NODE_CONDITION_MAX; c++)
                        if (!seen[c] && streq_ptr(json_get_str(t, "type"), lifecycle_types[c])) {
                                seen[c] = true;
                                n->lifecycle[c].status = pk_opt(pk, json_get_str(t, "status"));
                                n->lifecycle[c].reason = pk_opt(pk, json_get_str(t, "reason"));
                        }
        }
        return 0;
}

int node_rec_from_json(const cJSON *obj, struct node_rec **ret) {
        assert(ret);
        return PACK_RECORD(struct node_rec, obj, ret, node_build);
}

/* ---- resource slices ---- */

/* A device's first NoSchedule or NoExecute taint as "KEY=VALUE:EFFECT" in buf, or NULL
 * (v1beta1 keeps a device's taints under "basic"). */
static const char *device_taint(const cJSON *dev, char *buf, size_t size) {
        const cJSON *taints = json_get_arr(dev, "taints"), *t;

        if (!taints)
                taints = json_get_arr(json_get_obj(dev, "basic"), "taints");
        cJSON_ArrayForEach(t, taints) {
                const char *key = json_get_str(t, "key"), *value = json_get_str(t, "value"),
                           *effect = json_get_str(t, "effect");

                if (!key || !*key || !(streq_ptr(effect, "NoSchedule") || streq_ptr(effect, "NoExecute")))
                        continue;
                if (value && *value)
                        snprintf(buf, size, "%s=%s:%s", key, value, effect);
                else
                        snprintf(buf, size, "%s:%s", key, effect);
                return buf;
        }
        return NULL;
}

static int slice_build(const cJSON *obj, struct packer *pk, struct slice_rec *s) {
        const cJSON *meta, *spec, *pool;
        int r;

        r = required_meta(obj, false, &meta);
        if (r < 0)
                return r;
        spec = json_get_obj(obj, "spec");
        pool = json_get_obj(spec, "pool");
        if (!json_get_str(spec, "driver") || !*json_get_str(spec, "driver") || !json_get_str(pool, "name") ||
            !*json_get_str(pool, "name"))
                return -EBADMSG;

        s->name = pk_str(pk, json_get_str(meta, "name"));
        s->resource_version = pk_opt(pk, json_get_str(meta, "resourceVersion"));
        s->driver = pk_str(pk, json_get_str(spec, "driver"));
        s->pool = pk_str(pk, json_get_str(pool, "name"));
        s->node_name = pk_opt(pk, json_get_str(spec, "nodeName"));
        if (!json_get_int64(pool, "generation", &s->pool_generation))
                s->pool_generation = 0;
        if (!json_get_int64(pool, "resourceSliceCount", &s->pool_slice_count))
                s->pool_slice_count = 0;
        s->n_devices = json_count(json_get_arr(spec, "devices"));
        {
                /* the names, for --device: which devices the slice publishes; their
                 * taints, for device health */
                const char **a = pk_array(pk, s->n_devices, sizeof(char *)), *scratch;
                const char **t = pk_array(pk, s->n_devices, sizeof(char *)), *scratch_t;
                const cJSON *e;
                size_t i = 0;

                cJSON_ArrayForEach(e, json_get_arr(spec, "devices")) {
                        const char **d = ELEM(a, i, scratch), **dt = ELEM(t, i, scratch_t);
                        char taint[512];

                        i++;
                        *d = pk_opt(pk, json_get_str(e, "name"));
                        *dt = pk_opt(pk, device_taint(e, taint, sizeof(taint)));
                }
                s->devices = a;
                s->device_taints = t;
        }
        s->all_nodes = json_get_true(spec, "allNodes");
        s->has_node_selector =
                json_get_obj(spec, "nodeSelector") || json_get_true(spec, "perDeviceNodeSelection");
        return 0;
}

int slice_rec_from_json(const cJSON *obj, struct slice_rec **ret) {
        assert(ret);
        return PACK_RECORD(struct slice_rec, obj, ret, slice_build);
}

/* ---- leases ---- */

/* A MicroTime (or Time) field as µs since the epoch; 0 when unset or unparsable. */
static int64_t jtime(const cJSON *o, const char *k) {
        int64_t t;

        return timesrc_parse_rfc3339(json_get_str(o, k), &t) >= 0 ? t : 0;
}

static int lease_build(const cJSON *obj, struct packer *pk, struct lease_rec *l) {
        const cJSON *meta, *spec;
        int r;

        r = required_meta(obj, true, &meta);
        if (r < 0)
                return r;
        spec = json_get_obj(obj, "spec");

        l->ns = pk_str(pk, json_get_str(meta, "namespace"));
        l->name = pk_str(pk, json_get_str(meta, "name"));
        l->resource_version = pk_opt(pk, json_get_str(meta, "resourceVersion"));
        l->holder = pk_opt(pk, json_get_str(spec, "holderIdentity"));
        if (!json_get_int64(spec, "leaseDurationSeconds", &l->duration_seconds))
                l->duration_seconds = 0;
        if (!json_get_int64(spec, "leaseTransitions", &l->transitions))
                l->transitions = 0;
        l->acquire_time_usec = jtime(spec, "acquireTime");
        l->renew_time_usec = jtime(spec, "renewTime");
        return 0;
}

int lease_rec_from_json(const cJSON *obj, struct lease_rec **ret) {
        assert(ret);
        return PACK_RECORD(struct lease_rec, obj, ret, lease_build);
}

/* ---- common ---- */

/* ---- PodDisruptionBudget (policy/v1) ---- */

/* A status count: 0 when unset, clamped to int32 (what the API's int32 fields hold). */
static int32_t get_int32(const cJSON *o, const char *k) {
        double v;

        if (!json_get_double(o, k, &v) || v != v)
                return 0;
        if (v > INT32_MAX)
                return INT32_MAX;
        if (v < INT32_MIN)
                return INT32_MIN;
        return (int32_t)v;
}

/* Writes the requirements of a metav1.LabelSelector in selector string form.
 * Keys and values are validated first, so nothing in them can be read as
 * syntax ("a,b" as a value would otherwise become two requirements). -EINVAL
 * where LabelSelectorAsSelector fails: unknown operator, In/NotIn without
 * values, Exists/DoesNotExist with values, a bad key or value. */
static int write_label_selector(FILE *f, const cJSON *sel) {
        const cJSON *ml = json_get(sel, "matchLabels"), *me = json_get(sel, "matchExpressions"), *e;
        bool first = true;

        if (ml && !cJSON_IsNull(ml)) {
                if (!cJSON_IsObject(ml))
                        return -EINVAL;
                cJSON_ArrayForEach(e, ml) {
                        if (!cJSON_IsString(e) || !label_key_is_valid(e->string) ||
                            !label_value_is_valid(e->valuestring))
                                return -EINVAL;
                        fprintf(f, "%s%s=%s", first ? "" : ",", e->string, e->valuestring);
                        first = false;
                }
        }

        if (me && !cJSON_IsNull(me)) {
                if (!cJSON_IsArray(me))
                        return -EINVAL;
                cJSON_ArrayForEach(e, me) {
                        const char *key = json_get_str(e, "key"), *op = json_get_str(e, "operator");
                        const cJSON *values = json_get(e, "values"), *v;
                        int n = cJSON_IsArray(values) ? cJSON_GetArraySize(values) : 0;
                        bool set;

                        if (!key || !label_key_is_valid(key) || !op)
                                return -EINVAL;
                        if (values && !cJSON_IsNull(values) && !cJSON_IsArray(values))
                                return -EINVAL;
                        cJSON_ArrayForEach(v, values) {
                                if (!cJSON_IsString(v) || !label_value_is_valid(v->valuestring))
                                        return -EINVAL;
                        }

                        set = streq(op, "In") || streq(op, "NotIn");
                        if (set ? n == 0 : n != 0)
                                return -EINVAL;
                        fputs(first ? "" : ",", f);
                        first = false;
                        if (streq(op, "Exists"))
                                fputs(key, f);
                        else if (streq(op, "DoesNotExist"))
                                fprintf(f, "!%s", key);
                        else if (set) {
                                bool vfirst = true;

                                fprintf(f, "%s %s (", key, streq(op, "In") ? "in" : "notin");
                                cJSON_ArrayForEach(v, values) {
                                        fprintf(f, "%s%s", vfirst ? "" : ",", v->valuestring);
                                        vfirst = false;
                                }
                                fputc(')', f);
                        } else
                                return -EINVAL;
                }
        }
        return 0;
}

/* spec.selector as a parsed selector: NULL (matches nothing) for an invalid one. */
static int pdb_selector(const cJSON *sel, const char *ns, const char *name, struct selector **ret) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        FILE *f;
        int r, k;

        f = open_memstream(&buf, &size);
        if (!f)
                return -ENOMEM;
        r = write_label_selector(f, sel);
        k = ferror(f);
        if (fclose(f) != 0 || k)
                return -ENOMEM;
        if (r >= 0)
                r = selector_parse(buf, ret, NULL);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                log_debug("PodDisruptionBudget %s/%s: invalid spec.selector, it covers no pod", ns, name);
                *ret = NULL;
        }
        return 0;
}

int pdb_rec_from_json(const cJSON *obj, struct pdb_rec **ret) {
        _cleanup_(selector_freep) struct selector *sel = NULL;
        const cJSON *meta, *spec, *status, *s;
        const char *ns, *name, *rv;
        size_t l_ns, l_name, l_rv, size;
        struct pdb_rec *b;
        char *p;
        int r;

        assert(ret);

        meta = json_get_obj(obj, "metadata");
        ns = json_get_str(meta, "namespace");
        name = json_get_str(meta, "name");
        if (!ns || !name)
                return -EBADMSG;
        rv = json_get_str(meta, "resourceVersion");
        spec = json_get_obj(obj, "spec");
        status = json_get_obj(obj, "status");

        /* policy/v1: null selector = no pod, {} = every pod of the namespace
         * (LabelSelectorAsSelector gives labels.Nothing() / labels.Everything()). */
        s = json_get(spec, "selector");
        if (cJSON_IsObject(s)) {
                r = pdb_selector(s, ns, name, &sel);
                if (r < 0)
                        return r;
        }

        l_ns = strlen(ns) + 1;
        l_name = strlen(name) + 1;
        l_rv = rv ? strlen(rv) + 1 : 0;
        size = sizeof(struct pdb_rec) + l_ns + l_name + l_rv;
        b = calloc(1, size);
        if (!b)
                return -ENOMEM;
        p = (char *)(b + 1);
        b->ns = memcpy(p, ns, l_ns);
        p += l_ns;
        b->name = memcpy(p, name, l_name);
        p += l_name;
        b->resource_version = rv ? memcpy(p, rv, l_rv) : NULL;
        b->selector = TAKE_PTR(sel);
        b->disruptions_allowed = get_int32(status, "disruptionsAllowed");
        b->current_healthy = get_int32(status, "currentHealthy");
        b->desired_healthy = get_int32(status, "desiredHealthy");
        b->expected_pods = get_int32(status, "expectedPods");
        b->alloc_size = size;

        *ret = b;
        return 0;
}

void pdb_rec_free(struct pdb_rec *b) {
        if (!b)
                return;
        selector_free(b->selector);
        free(b);
}

size_t pdb_rec_size(const struct pdb_rec *b) {
        return b ? b->alloc_size : 0;
}

bool pdb_matches_pod(const struct pdb_rec *b, const struct pod_rec *p) {
        assert(b);
        assert(p);

        return streq_ptr(b->ns, p->ns) && selector_matches(b->selector, p->labels, p->n_labels);
}

void pod_rec_free(struct pod_rec *p) {
        free(p);
}

void claim_rec_free(struct claim_rec *c) {
        free(c);
}

void node_rec_free(struct node_rec *n) {
        free(n);
}

void slice_rec_free(struct slice_rec *s) {
        free(s);
}

void lease_rec_free(struct lease_rec *l) {
        free(l);
}

size_t pod_rec_size(const struct pod_rec *p) {
        return p ? p->alloc_size : 0;
}

size_t claim_rec_size(const struct claim_rec *c) {
        return c ? c->alloc_size : 0;
}

size_t node_rec_size(const struct node_rec *n) {
        return n ? n->alloc_size : 0;
}

size_t slice_rec_size(const struct slice_rec *s) {
        return s ? s->alloc_size : 0;
}

size_t lease_rec_size(const struct lease_rec *l) {
        return l ? l->alloc_size : 0;
}

bool tolerations_tolerate(const struct toleration *t, size_t n, const struct node_taint *taint) {
        assert(t || n == 0);
        assert(taint);

        for (size_t i = 0; i < n; i++) {
                if (t[i].effect && !streq_ptr(t[i].effect, taint->effect))
                        continue;
                if (t[i].key && !streq_ptr(t[i].key, taint->key))
                        continue;
                if (streq_ptr(t[i].op, "Exists"))
                        return true;
                if ((!t[i].op || streq(t[i].op, "Equal")) &&
                    streq(strempty(t[i].value), strempty(taint->value)))
                        return true;
        }
        return false;
}

const struct node_taint *node_rec_find_taint(const struct node_rec *n, const char *key, const char *effect) {
        assert(n);
        assert(key);

        for (size_t i = 0; i < n->n_taints; i++)
                if (streq_ptr(n->taints[i].key, key) && (!effect || streq_ptr(n->taints[i].effect, effect)))
                        return &n->taints[i];
        return NULL;
}

/* ---- Cluster API Machines (cluster.x-k8s.io/v1beta2) ---- */

static int machine_build(const cJSON *obj, struct packer *pk, struct machine_rec *m) {
        const cJSON *meta, *ann, *hook;
        int r;

        r = required_meta(obj, true, &meta);
        if (r < 0)
                return r;
        m->ns = pk_str(pk, json_get_str(meta, "namespace"));
        m->name = pk_str(pk, json_get_str(meta, "name"));
        m->uid = pk_opt(pk, json_get_str(meta, "uid"));
        m->resource_version = pk_opt(pk, json_get_str(meta, "resourceVersion"));
        m->deleting = json_get_str(meta, "deletionTimestamp") != NULL;
        m->node_name =
                pk_opt(pk, json_get_str(json_get_obj(json_get_obj(obj, "status"), "nodeRef"), "name"));
        /* The value is kept as it is ("" included): the hook's removal tests it. */
        ann = json_get_obj(meta, "annotations");
        hook = json_get(ann, MACHINE_HOOK_ANNOTATION);
        m->has_hook = cJSON_IsString(hook);
        m->hook_value = m->has_hook ? pk_str(pk, hook->valuestring) : NULL;
        m->exclude_node_draining = json_get(ann, MACHINE_EXCLUDE_DRAINING_ANNOTATION) != NULL;
        return 0;
}

int machine_rec_from_json(const cJSON *obj, struct machine_rec **ret) {
        assert(ret);
        return PACK_RECORD(struct machine_rec, obj, ret, machine_build);
}

void machine_rec_free(struct machine_rec *m) {
        free(m);
}

size_t machine_rec_size(const struct machine_rec *m) {
        return m ? m->alloc_size : 0;
}
