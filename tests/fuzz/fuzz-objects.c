/* Fuzzes the record builders of objects.h (pod, claim, node, slice, lease,
 * PodDisruptionBudget) over API JSON, and kstatus.h over the same (as
 * an error body). The input is one object, a List
 * ("items"), or a watch event ("object"); every builder runs on every object.
 * A record must be one allocation holding every string and array it points
 * to, name what metadata.name says, and work with the helpers that read it.
 * A Node's lifecycle conditions are those of the first condition of each type,
 * however often and with whatever values the type repeats (the seeds
 * node-duplicate-*.json start it there). */
#include <errno.h>

#include <cjson/cJSON.h>

#include "drainer/base/selector.h"
#include "drainer/kube/kstatus.h"
#include "drainer/kube/objects.h"
#include "fuzz-common.h"

#define MAX_OBJECTS 64

struct span {
        const char *lo, *hi;
};

static void check_in(const struct span *s, const void *p, size_t n, const char *what) {
        const char *c = p;

        if (!p)
                return;
        fuzz_check(c >= s->lo && c + n <= s->hi, "%s points outside its record", what);
}

static void check_str(const struct span *s, const char *p, const char *what) {
        if (!p)
                return;
        fuzz_check(p >= s->lo && p < s->hi, "%s points outside its record", what);
        check_in(s, p, strlen(p) + 1, what); /* strlen itself is checked by ASan */
}

static void check_opt(const struct span *s, const char *p, const char *what) {
        check_str(s, p, what);
        fuzz_check(!p || *p, "optional %s is \"\" instead of NULL", what);
}

static void check_kv(const struct span *s, const struct kv *kv, size_t n, const char *what) {
        fuzz_check(!!kv == !!n, "%s: array and count disagree", what);
        check_in(s, kv, n * sizeof(*kv), what);
        for (size_t i = 0; i < n; i++) {
                fuzz_check(kv[i].key && kv[i].value, "%s[%zu]: NULL key or value", what, i);
                check_str(s, kv[i].key, what);
                check_str(s, kv[i].value, what);
                fuzz_check(kv_get(kv, n, kv[i].key), "%s: kv_get misses its own key", what);
        }
}

static const char *meta_str(const cJSON *obj, const char *key) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, key);

        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void check_meta(const cJSON *obj, const char *name, const char *ns, bool namespaced) {
        fuzz_check(name && streq_ptr(name, meta_str(obj, "name")), "record name differs from metadata.name");
        if (namespaced)
                fuzz_check(ns && streq_ptr(ns, meta_str(obj, "namespace")),
                           "record namespace differs from metadata.namespace");
}

#define SPAN(rec) ((struct span){ (const char *)(rec), (const char *)(rec) + (rec)->alloc_size })

static void check_pod(const cJSON *obj, const struct pod_rec *p) {
        struct span s = SPAN(p);

        fuzz_check(pod_rec_size(p) == p->alloc_size && p->alloc_size >= sizeof(*p), "pod size");
        check_meta(obj, p->name, p->ns, true);
        check_str(&s, p->ns, "pod ns");
        check_str(&s, p->name, "pod name");
        check_opt(&s, p->uid, "pod uid");
        check_opt(&s, p->resource_version, "pod resourceVersion");
        check_opt(&s, p->node_name, "pod nodeName");
        check_opt(&s, p->pod_ip, "pod podIP");
        check_opt(&s, p->priority_class_name, "pod priorityClassName");
        check_opt(&s, p->extended_claim_name, "pod extended claim");
        check_opt(&s, p->grpc_probe_service, "pod grpc service");
        fuzz_check(p->phase >= 0 && p->phase < _POD_PHASE_MAX, "pod phase %d", (int)p->phase);
        fuzz_check(pod_phase_to_string(p->phase), "pod phase name");
        fuzz_check(p->has_controller == !!p->controller, "pod controller flag");
        if (p->controller) {
                check_in(&s, p->controller, sizeof(*p->controller), "pod controller");
                check_opt(&s, p->controller->api_version, "controller apiVersion");
                check_opt(&s, p->controller->kind, "controller kind");
                check_opt(&s, p->controller->name, "controller name");
                check_opt(&s, p->controller->uid, "controller uid");
        }
        fuzz_check(!!p->claims == !!p->n_claims, "pod claims array/count");
        check_in(&s, p->claims, p->n_claims * sizeof(*p->claims), "pod claims");
        for (size_t i = 0; i < p->n_claims; i++) {
                check_opt(&s, p->claims[i].name, "claim ref name");
                check_opt(&s, p->claims[i].claim_name, "claim ref claim name");
        }
        check_kv(&s, p->labels, p->n_labels, "pod labels");
        fuzz_check(!!p->tolerations == !!p->n_tolerations, "pod tolerations array/count");
        check_in(&s, p->tolerations, p->n_tolerations * sizeof(*p->tolerations), "pod tolerations");
        for (size_t i = 0; i < p->n_tolerations; i++) {
                check_opt(&s, p->tolerations[i].key, "toleration key");
                check_opt(&s, p->tolerations[i].op, "toleration op");
                check_opt(&s, p->tolerations[i].value, "toleration value");
                check_opt(&s, p->tolerations[i].effect, "toleration effect");
        }
}

static void check_claim(const cJSON *obj, const struct claim_rec *c) {
        struct span s = SPAN(c);
        bool admin = false;

        fuzz_check(claim_rec_size(c) == c->alloc_size && c->alloc_size >= sizeof(*c), "claim size");
        check_meta(obj, c->name, c->ns, true);
        check_str(&s, c->ns, "claim ns");
        check_str(&s, c->name, "claim name");
        check_opt(&s, c->uid, "claim uid");
        check_opt(&s, c->resource_version, "claim resourceVersion");
        check_opt(&s, c->selector_node, "claim selector node");
        fuzz_check(!(c->selector_node && c->selector_other), "claim selector both node-local and other");
        check_opt(&s, c->owner_pod, "claim owner pod");
        check_opt(&s, c->owner_pod_uid, "claim owner pod uid");
        fuzz_check(!!c->devices == !!c->n_devices, "claim devices array/count");
        check_in(&s, c->devices, c->n_devices * sizeof(*c->devices), "claim devices");
        for (size_t i = 0; i < c->n_devices; i++) {
                check_opt(&s, c->devices[i].request, "device request");
                check_opt(&s, c->devices[i].driver, "device driver");
                check_opt(&s, c->devices[i].pool, "device pool");
                check_opt(&s, c->devices[i].device, "device");
                admin |= c->devices[i].admin_access;
        }
        fuzz_check(admin == c->admin_access_any, "claim admin_access_any disagrees with its devices");
        fuzz_check(!!c->reserved == !!c->n_reserved, "claim reserved array/count");
        check_in(&s, c->reserved, c->n_reserved * sizeof(*c->reserved), "claim reservedFor");
        for (size_t i = 0; i < c->n_reserved; i++) {
                check_opt(&s, c->reserved[i].api_group, "consumer apiGroup");
                check_opt(&s, c->reserved[i].resource, "consumer resource");
                check_opt(&s, c->reserved[i].name, "consumer name");
                check_opt(&s, c->reserved[i].uid, "consumer uid");
        }
}

/* The first status.conditions[] entry of type t, or NULL. */
static const cJSON *first_condition(const cJSON *obj, const char *t) {
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(obj, "status"), *c;
        const cJSON *conds = cJSON_GetObjectItemCaseSensitive(st, "conditions");

        if (!cJSON_IsObject(st) || !cJSON_IsArray(conds))
                return NULL;
        cJSON_ArrayForEach(c, conds) {
                const cJSON *type = cJSON_GetObjectItemCaseSensitive(c, "type");

                if (cJSON_IsString(type) && streq(type->valuestring, t))
                        return c;
        }
        return NULL;
}

static const char *opt_member(const cJSON *obj, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

        return cJSON_IsString(v) && *v->valuestring ? v->valuestring : NULL;
}

static void check_node(const cJSON *obj, const struct node_rec *n) {
        struct span s = SPAN(n);

        for (int c = 0; c < _NODE_CONDITION_MAX; c++) {
                const char *type = node_lifecycle_condition_type(c);
                const cJSON *first = first_condition(obj, type);

                check_opt(&s, n->lifecycle[c].status, "node lifecycle status");
                check_opt(&s, n->lifecycle[c].reason, "node lifecycle reason");
                fuzz_check(streq_ptr(n->lifecycle[c].status, opt_member(first, "status")) &&
                                   streq_ptr(n->lifecycle[c].reason, opt_member(first, "reason")),
                           "node condition %s is not the first of its type", type);
        }

        fuzz_check(node_rec_size(n) == n->alloc_size && n->alloc_size >= sizeof(*n), "node size");
        check_meta(obj, n->name, NULL, false);
        check_str(&s, n->name, "node name");
        check_opt(&s, n->uid, "node uid");
        check_opt(&s, n->resource_version, "node resourceVersion");
        check_opt(&s, n->kubelet_version, "node kubeletVersion");
        check_kv(&s, n->labels, n->n_labels, "node labels");
        check_kv(&s, n->annotations, n->n_annotations, "node annotations");
        for (size_t i = 0; i < n->n_annotations; i++)
                fuzz_check(strncmp(n->annotations[i].key, "drainer.io/", 11) == 0,
                           "node keeps a non-drainer.io annotation");
        fuzz_check(!!n->taints == !!n->n_taints, "node taints array/count");
        check_in(&s, n->taints, n->n_taints * sizeof(*n->taints), "node taints");
        for (size_t i = 0; i < n->n_taints; i++) {
                check_opt(&s, n->taints[i].key, "taint key");
                check_opt(&s, n->taints[i].value, "taint value");
                check_opt(&s, n->taints[i].effect, "taint effect");
                check_opt(&s, n->taints[i].time_added, "taint timeAdded");
                if (n->taints[i].key)
                        fuzz_check(node_rec_find_taint(n, n->taints[i].key, n->taints[i].effect),
                                   "node_rec_find_taint misses a taint of the node");
        }
}

static void check_slice(const cJSON *obj, const struct slice_rec *sl) {
        struct span s = SPAN(sl);

        fuzz_check(slice_rec_size(sl) == sl->alloc_size && sl->alloc_size >= sizeof(*sl), "slice size");
        check_meta(obj, sl->name, NULL, false);
        check_str(&s, sl->name, "slice name");
        check_opt(&s, sl->resource_version, "slice resourceVersion");
        check_str(&s, sl->driver, "slice driver");
        check_str(&s, sl->pool, "slice pool");
        fuzz_check(sl->driver && *sl->driver && sl->pool && *sl->pool, "slice without driver or pool");
        check_opt(&s, sl->node_name, "slice nodeName");
}

static void check_lease(const cJSON *obj, const struct lease_rec *l) {
        struct span s = SPAN(l);

        fuzz_check(lease_rec_size(l) == l->alloc_size && l->alloc_size >= sizeof(*l), "lease size");
        check_meta(obj, l->name, l->ns, true);
        check_str(&s, l->ns, "lease ns");
        check_str(&s, l->name, "lease name");
        check_opt(&s, l->resource_version, "lease resourceVersion");
        check_opt(&s, l->holder, "lease holder");
}

static void check_pdb(const cJSON *obj, const struct pdb_rec *b) {
        struct span s = SPAN(b);
        char *str = NULL;

        fuzz_check(pdb_rec_size(b) == b->alloc_size && b->alloc_size >= sizeof(*b), "pdb size");
        check_meta(obj, b->name, b->ns, true);
        check_str(&s, b->ns, "pdb ns");
        check_str(&s, b->name, "pdb name");
        check_str(&s, b->resource_version, "pdb resourceVersion");
        if (b->selector) {
                struct selector *again = NULL;
                char *str2 = NULL;
                int r;

                fuzz_check(selector_to_string(b->selector, &str) == 0, "pdb selector_to_string");
                r = selector_parse(str, &again, NULL);
                fuzz_check(r == 0, "pdb selector \"%s\" does not parse again: %d", str, r);
                fuzz_check(selector_to_string(again, &str2) == 0 && streq(str, str2),
                           "pdb selector \"%s\" reads back as \"%s\"", str, strna(str2));
                selector_free(again);
                free(str2);
        }
        free(str);
}

static int check_rc(int r, const char *what) {
        fuzz_check(r == 0 || r == -EBADMSG || r == -ENOMEM, "%s returned %d", what, r);
        return r;
}

static void build_all(const cJSON *obj, struct pod_rec **pods, size_t *n_pods, struct node_rec **nodes,
                      size_t *n_nodes, struct pdb_rec **pdbs, size_t *n_pdbs) {
        struct pod_rec *p = NULL;
        struct claim_rec *c = NULL;
        struct node_rec *n = NULL;
        struct slice_rec *s = NULL;
        struct lease_rec *l = NULL;
        struct pdb_rec *b = NULL;

        if (check_rc(pod_rec_from_json(obj, &p), "pod_rec_from_json") == 0) {
                check_pod(obj, p);
                pods[(*n_pods)++] = p;
        }
        if (check_rc(claim_rec_from_json(obj, &c), "claim_rec_from_json") == 0) {
                check_claim(obj, c);
                claim_rec_free(c);
        }
        if (check_rc(node_rec_from_json(obj, &n), "node_rec_from_json") == 0) {
                check_node(obj, n);
                nodes[(*n_nodes)++] = n;
        }
        if (check_rc(slice_rec_from_json(obj, &s), "slice_rec_from_json") == 0) {
                check_slice(obj, s);
                slice_rec_free(s);
        }
        if (check_rc(lease_rec_from_json(obj, &l), "lease_rec_from_json") == 0) {
                check_lease(obj, l);
                lease_rec_free(l);
        }
        if (check_rc(pdb_rec_from_json(obj, &b), "pdb_rec_from_json") == 0) {
                check_pdb(obj, b);
                pdbs[(*n_pdbs)++] = b;
        }
        /* Every error body is a metav1.Status, read by the client. */
        {
                char *reason = NULL, *message = NULL;
                int r = kube_status_to_errno(obj, &reason, &message);

                fuzz_check(r <= 0, "kube_status_to_errno returned %d", r);
                fuzz_check(kube_status_retry_after_seconds(obj) >= 0, "negative Retry-After");
                free(reason);
                free(message);
        }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        fuzz_setup_logging();
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const cJSON *objs[MAX_OBJECTS], *items, *it;
        struct pod_rec *pods[MAX_OBJECTS];
        struct node_rec *nodes[MAX_OBJECTS];
        struct pdb_rec *pdbs[MAX_OBJECTS];
        size_t n_objs = 0, n_pods = 0, n_nodes = 0, n_pdbs = 0;
        cJSON *root;
        char *copy;

        /* Exactly the input bytes, not NUL-terminated: cJSON must honour the length. */
        copy = malloc(size ? size : 1);
        if (size)
                memcpy(copy, data, size);
        root = cJSON_ParseWithLength(copy, size);
        free(copy);
        if (!root)
                return 0;

        objs[n_objs++] = root;
        it = cJSON_GetObjectItemCaseSensitive(root, "object");
        if (cJSON_IsObject(it))
                objs[n_objs++] = it;
        items = cJSON_GetObjectItemCaseSensitive(root, "items");
        if (!cJSON_IsArray(items))
                items = NULL;
        cJSON_ArrayForEach(it, items) {
                if (n_objs == MAX_OBJECTS)
                        break;
                objs[n_objs++] = it;
        }

        /* NULL and non-objects are refused, never crash. */
        {
                struct pod_rec *p = NULL;

                fuzz_check(pod_rec_from_json(NULL, &p) == -EBADMSG && !p, "pod from NULL");
        }
        for (size_t i = 0; i < n_objs; i++)
                build_all(objs[i], pods, &n_pods, nodes, &n_nodes, pdbs, &n_pdbs);

        /* The helpers the plan uses across records. */
        for (size_t i = 0; i < n_pods; i++) {
                for (size_t k = 0; k < n_nodes; k++)
                        for (size_t t = 0; t < nodes[k]->n_taints; t++)
                                (void)tolerations_tolerate(pods[i]->tolerations, pods[i]->n_tolerations,
                                                           &nodes[k]->taints[t]);
                for (size_t k = 0; k < n_pdbs; k++) {
                        bool m = pdb_matches_pod(pdbs[k], pods[i]);

                        fuzz_check(!m || pdbs[k]->selector, "a PDB without a valid selector matched a pod");
                }
        }

        for (size_t i = 0; i < n_pods; i++)
                pod_rec_free(pods[i]);
        for (size_t i = 0; i < n_nodes; i++)
                node_rec_free(nodes[i]);
        for (size_t i = 0; i < n_pdbs; i++)
                pdb_rec_free(pdbs[i]);
        cJSON_Delete(root);
        return 0;
}
