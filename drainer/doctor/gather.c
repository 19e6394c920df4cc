/* The reads of `drainer doctor` (lists at once, then what they lead to:
 * SubjectAccessReviews, DaemonSets, gRPC probes, pods of cordoned nodes) and
 * the picture of the cluster they make. Owns the picture's records and the
 * calls in flight; makes no finding (drainer/doctor/rules.c does) and never
 * writes: a SubjectAccessReview stores nothing. */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/hashmap.h"
#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "drainer/base/text.h"
#include "drainer/doctor/doctor-gather.h"
#include "drainer/dra/health.h"
#include "drainer/kube/client.h"
#include "drainer/kube/objects.h"

#define MAX_INFLIGHT       32 /* SubjectAccessReviews and health probes at once */
#define PROBE_TIMEOUT_USEC (UINT64_C(3) * 1000000)
#define POD_TEXT_MAX       (64u << 10)
#define MAP_MAX            (1u << 20) /* nodes, subjects */

/* Appends p to a DOCTOR_ARRAY; 0 or -ENOMEM (p stays the caller's then). */
#define array_push(a, p)                                                                   \
        ({                                                                                 \
                int _r = 0;                                                                \
                if ((a)->n == (a)->alloc) {                                                \
                        size_t _n = (a)->alloc ? (a)->alloc * 2 : 16;                      \
                        __typeof__((a)->v) _v = reallocarray((a)->v, _n, sizeof(*(a)->v)); \
                        if (_v) {                                                          \
                                (a)->v = _v;                                               \
                                (a)->alloc = _n;                                           \
                        } else                                                             \
                                _r = -ENOMEM;                                              \
                }                                                                          \
                if (_r == 0)                                                               \
                        (a)->v[(a)->n++] = (p);                                            \
                _r;                                                                        \
        })

static int idx_push(size_t **v, size_t *n, size_t x) {
        size_t *p = realloc(*v, (*n + 1) * sizeof(**v));

        if (!p)
                return -ENOMEM;
        *v = p;
        (*v)[(*n)++] = x;
        return 0;
}

/* ---- subjects ---- */

static const char *const doctor_subject_kind_table[_DOCTOR_SUBJECT_KIND_MAX] = {
        [DOCTOR_SUBJECT_USER] = "User",
        [DOCTOR_SUBJECT_GROUP] = "Group",
        [DOCTOR_SUBJECT_SERVICE_ACCOUNT] = "ServiceAccount",
};

DEFINE_STRING_TABLE_LOOKUP(doctor_subject_kind, enum doctor_subject_kind, _DOCTOR_SUBJECT_KIND_MAX,
                           _DOCTOR_SUBJECT_KIND_INVALID)

static const char *const role_names[_DOCTOR_SUBJECT_ROLE_MAX] = {
        [DOCTOR_ROLE_OTHER] = "other",
        [DOCTOR_ROLE_ADMIN] = "cluster-admin",
        [DOCTOR_ROLE_CONTROL_PLANE] = "control-plane",
        [DOCTOR_ROLE_DRIVER] = "dra-driver",
};

const char *doctor_subject_role_to_string(enum doctor_subject_role r) {
        return r >= 0 && r < _DOCTOR_SUBJECT_ROLE_MAX ? role_names[r] : NULL;
}

static bool startswith(const char *s, const char *prefix) {
        return s && strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Whether NS/NAME is one of the "namespace/name" entries. */
static bool sa_listed(const char *ns, size_t ns_len, const char *name, const char *const *sas, size_t n) {
        for (size_t i = 0; ns && name && i < n; i++) {
                const char *slash = strchr(sas[i], '/');

                if (slash && (size_t)(slash - sas[i]) == ns_len && strncmp(sas[i], ns, ns_len) == 0 &&
                    streq(slash + 1, name))
                        return true;
        }
        return false;
}

enum doctor_subject_role doctor_subject_role(const struct doctor_subject *s, bool cluster_admin_bound,
                                             const char *const *driver_sas, size_t n) {
        switch (s->kind) {
        case DOCTOR_SUBJECT_GROUP:
                if (streq_ptr(s->name, "system:masters"))
                        return DOCTOR_ROLE_ADMIN;
                if (cluster_admin_bound)
                        return DOCTOR_ROLE_ADMIN;
                /* The kubelets (their ResourceSlices are wiped by the kubelet, under the Node authorizer). */
                if (streq_ptr(s->name, "system:nodes"))
                        return DOCTOR_ROLE_CONTROL_PLANE;
                return DOCTOR_ROLE_OTHER;
        case DOCTOR_SUBJECT_USER:
                if (cluster_admin_bound)
                        return DOCTOR_ROLE_ADMIN;
                if (streq_ptr(s->name, "system:kube-controller-manager") ||
                    streq_ptr(s->name, "system:kube-scheduler") || streq_ptr(s->name, "system:apiserver") ||
                    startswith(s->name, "system:node:"))
                        return DOCTOR_ROLE_CONTROL_PLANE;
                /* A ServiceAccount named as a User: system:serviceaccount:NS:NAME. */
                if (startswith(s->name, "system:serviceaccount:kube-system:"))
                        return DOCTOR_ROLE_CONTROL_PLANE;
                if (startswith(s->name, "system:serviceaccount:")) {
                        const char *ns = s->name + strlen("system:serviceaccount:"),
                                   *colon = strchr(ns, ':');

                        if (colon && sa_listed(ns, (size_t)(colon - ns), colon + 1, driver_sas, n))
                                return DOCTOR_ROLE_DRIVER;
                }
                return DOCTOR_ROLE_OTHER;
        case DOCTOR_SUBJECT_SERVICE_ACCOUNT:
                if (cluster_admin_bound)
                        return DOCTOR_ROLE_ADMIN;
                if (streq_ptr(s->ns, "kube-system"))
                        return DOCTOR_ROLE_CONTROL_PLANE;
                if (s->ns && sa_listed(s->ns, strlen(s->ns), s->name, driver_sas, n))
                        return DOCTOR_ROLE_DRIVER;
                return DOCTOR_ROLE_OTHER;
        default:
                return DOCTOR_ROLE_OTHER;
        }
}

char *doctor_subject_to_string(const struct doctor_subject *s) {
        char *out;
        int r;

        if (s->kind == DOCTOR_SUBJECT_SERVICE_ACCOUNT)
                r = asprintf(&out, "ServiceAccount %s/%s", strna(s->ns), strna(s->name));
        else
                r = asprintf(&out, "%s %s", strna(doctor_subject_kind_to_string(s->kind)), strna(s->name));
        return r < 0 ? NULL : out;
}

cJSON *doctor_sar_request(const struct doctor_subject *s, const char *ns, const char *group,
                          const char *resource, const char *verb) {
        _cleanup_(cJSON_Deletep) cJSON *root = cJSON_CreateObject();
        _cleanup_free_ char *user = NULL;
        cJSON *spec, *attrs;

        if (!root)
                return NULL;
        if (!cJSON_AddStringToObject(root, "apiVersion", "authorization.k8s.io/v1") ||
            !cJSON_AddStringToObject(root, "kind", "SubjectAccessReview") ||
            !(spec = cJSON_AddObjectToObject(root, "spec")))
                return NULL;
        switch (s->kind) {
        case DOCTOR_SUBJECT_USER:
                if (!cJSON_AddStringToObject(spec, "user", strempty(s->name)))
                        return NULL;
                break;
        case DOCTOR_SUBJECT_GROUP: {
                cJSON *groups = cJSON_AddArrayToObject(spec, "groups");
                cJSON *g = cJSON_CreateString(strempty(s->name));

                if (!groups || !g) {
                        cJSON_Delete(g);
                        return NULL;
                }
                cJSON_AddItemToArray(groups, g);
                break;
        }
        case DOCTOR_SUBJECT_SERVICE_ACCOUNT:
                if (asprintf(&user, "system:serviceaccount:%s:%s", strempty(s->ns), strempty(s->name)) < 0) {
                        user = NULL;
                        return NULL;
                }
                if (!cJSON_AddStringToObject(spec, "user", user))
                        return NULL;
                break;
        default:
                return NULL;
        }
        attrs = cJSON_AddObjectToObject(spec, "resourceAttributes");
        if (!attrs || (ns && !cJSON_AddStringToObject(attrs, "namespace", ns)) ||
            !cJSON_AddStringToObject(attrs, "group", group) ||
            !cJSON_AddStringToObject(attrs, "resource", resource) ||
            !cJSON_AddStringToObject(attrs, "verb", verb))
                return NULL;
        return TAKE_PTR(root);
}

int doctor_sar_parse(const cJSON *answer, bool *ret_allowed, const char **ret_reason) {
        const cJSON *status = json_path(answer, "status"), *allowed = json_path(status, "allowed");

        if (!cJSON_IsObject(status))
                return -EBADMSG;
        /* "allowed" is omitted when false (omitempty). */
        if (allowed && !cJSON_IsBool(allowed))
                return -EBADMSG;
        *ret_allowed = cJSON_IsTrue(allowed);
        if (ret_reason)
                *ret_reason = json_str(status, "reason");
        return 0;
}

/* ---- control-plane client settings ---- */

static int parse_flag_value(const char *flag, const char *v, struct doctor_client_conn *c) {
        char *end;

        errno = 0;
        if (streq(flag, "--kube-api-qps")) {
                double q = strtod(v, &end);

                if (errno || end == v || *end || !(q >= 0) || !isfinite(q))
                        return -EINVAL;
                c->qps = q;
                c->have_qps = true;
        } else {
                long b = strtol(v, &end, 10);

                if (errno || end == v || *end || b < 0 || b > 1000000)
                        return -EINVAL;
                c->burst = (int)b;
                c->have_burst = true;
        }
        return 0;
}

int doctor_client_conn_from_pod(const cJSON *pod, struct doctor_client_conn *ret) {
        static const char *const lists[] = { "command", "args" };
        struct doctor_client_conn c = {};
        const cJSON *container;

        cJSON_ArrayForEach(container, json_path(pod, "spec.containers")) {
                for (size_t l = 0; l < ELEMENTSOF(lists); l++) {
                        const cJSON *a, *list = json_path(container, lists[l]);

                        cJSON_ArrayForEach(a, list) {
                                const char *s = cJSON_IsString(a) ? a->valuestring : NULL;

                                if (!s)
                                        continue;
                                for (size_t k = 0; k < 2; k++) {
                                        const char *flag = k == 0 ? "--kube-api-qps" : "--kube-api-burst";
                                        size_t n = strlen(flag);
                                        int r;

                                        if (strncmp(s, flag, n) != 0 || (s[n] != '=' && s[n] != 0))
                                                continue;
                                        if (s[n] == '=')
                                                r = parse_flag_value(flag, s + n + 1, &c);
                                        else if (a->next && cJSON_IsString(a->next))
                                                r = parse_flag_value(flag, a->next->valuestring, &c);
                                        else
                                                r = -EINVAL;
                                        if (r < 0)
                                                return r;
                                }
                                if (streq(s, "--config") || startswith(s, "--config="))
                                        c.config_file = true;
                        }
                }
        }
        *ret = c;
        return 0;
}

/* ---- the lists ---- */

static const struct {
        const char *what;
        bool required;
} lists[_DOCTOR_LIST_MAX] = {
        [DOCTOR_LIST_NODES] = { "list nodes", true },
        [DOCTOR_LIST_SLICES] = { "list resourceslices", true },
        [DOCTOR_LIST_CLAIMS] = { "list resourceclaims", true },
        /* Without them the permission checks say so, but everything else still counts. */
        [DOCTOR_LIST_CLUSTER_ROLE_BINDINGS] = { "list clusterrolebindings", false },
        [DOCTOR_LIST_ROLE_BINDINGS] = { "list rolebindings", false },
        [DOCTOR_LIST_DRAINER_PODS] = { "list drainer pods", true },
        [DOCTOR_LIST_SYSTEM_PODS] = { "list kube-system pods", false },
        [DOCTOR_LIST_NODECLAIMS] = { "list Karpenter's nodeclaims", false },
        [DOCTOR_LIST_DRIVER_PODS] = { "list DRA driver pods", true },
};

const char *doctor_list_to_string(enum doctor_list l) {
        return l >= 0 && l < _DOCTOR_LIST_MAX ? lists[l].what : NULL;
}

bool doctor_list_required(enum doctor_list l) {
        return l >= 0 && l < _DOCTOR_LIST_MAX && lists[l].required;
}

const char *const doctor_write_resources[_DOCTOR_RES_WRITE_MAX] = { "deviceclasses", "resourceslices" };
const char *const doctor_write_verbs[DOCTOR_N_WRITE_VERBS] = { "create", "update", "patch", "delete" };
const char *const doctor_claim_resources[_DOCTOR_RES_CLAIM_MAX] = { "resourceclaims",
                                                                    "resourceclaimtemplates" };

static void pod_free(struct doctor_pod *p) {
        if (!p)
                return;
        pod_rec_free(p->rec);
        free(p->sa);
        free(p->text);
        free(p->probe_message);
        free(p);
}

static int text_append(char **buf, size_t *len, const char *s) {
        size_t n = strlen(s);
        char *p;

        if (*len + n + 2 > POD_TEXT_MAX)
                return 0; /* enough to spot a driver name */
        p = realloc(*buf, *len + n + 2);
        if (!p)
                return -ENOMEM;
        memcpy(p + *len, s, n);
        p[*len + n] = ' ';
        p[*len + n + 1] = 0;
        *buf = p;
        *len += n + 1;
        return 0;
}

static int pod_from_json(const cJSON *obj, struct doctor_pod **ret) {
        struct doctor_pod *p = calloc(1, sizeof(*p));
        const char *sa = json_str(obj, "spec.serviceAccountName");
        const cJSON *c;
        size_t len = 0;
        int r;

        if (!p)
                return -ENOMEM;
        r = pod_rec_from_json(obj, &p->rec);
        if (r < 0) {
                free(p);
                return r;
        }
        p->sa = text_printf("%s/%s", p->rec->ns, sa ? sa : "default");
        if (!p->sa) {
                pod_free(p);
                return -ENOMEM;
        }
        p->text = strdup("");
        if (!p->text) {
                pod_free(p);
                return -ENOMEM;
        }
        cJSON_ArrayForEach(c, json_path(obj, "spec.containers")) {
                static const char *const fields[] = { "command", "args" };
                const cJSON *a;

                for (size_t l = 0; l < ELEMENTSOF(fields); l++)
                        cJSON_ArrayForEach(a, json_path(c, fields[l])) {
                                if (cJSON_IsString(a) && text_append(&p->text, &len, a->valuestring) < 0) {
                                        pod_free(p);
                                        return -ENOMEM;
                                }
                        }
                cJSON_ArrayForEach(a, json_path(c, "env")) {
                        const char *v = json_str(a, "value");

                        if (v && text_append(&p->text, &len, v) < 0) {
                                pod_free(p);
                                return -ENOMEM;
                        }
                }
        }
        *ret = p;
        return 0;
}

bool doctor_pod_running(const struct doctor_pod *p) {
        return p->rec->phase == POD_RUNNING && !p->rec->deleting;
}

static void binding_free(struct doctor_binding *b) {
        if (!b)
                return;
        free(b->ns);
        free(b->name);
        free(b->role_kind);
        free(b->role_name);
        free(b->label);
        free(b->rbac);
        free(b);
}

static void subject_free(struct doctor_subject_ent *e) {
        if (!e)
                return;
        free((char *)e->s.name);
        free((char *)e->s.ns);
        free(e->label);
        free(e->bindings);
        strv_free_n(e->reasons, e->n_reasons);
        strv_free_n(e->claim_ns, e->n_claim_ns);
        free(e->claims_ns);
        free(e);
}

static void cp_pod_free(struct doctor_cp_pod *c) {
        if (!c)
                return;
        free(c->component);
        free(c->ns_name);
        free(c);
}

static struct doctor_subject_ent *subject_get(struct doctor_data *d, const struct doctor_subject *s) {
        _cleanup_free_ char *label = doctor_subject_to_string(s);
        struct doctor_subject_ent *e;

        if (!label)
                return NULL;
        e = hashmap_get(d->subject_by_label, label);
        if (e)
                return e;
        e = calloc(1, sizeof(*e));
        if (!e)
                return NULL;
        e->s.kind = s->kind;
        e->s.name = strdup(strempty(s->name));
        e->s.ns = s->ns ? strdup(s->ns) : NULL;
        e->label = TAKE_PTR(label);
        if (!e->s.name || (s->ns && !e->s.ns) || hashmap_put(d->subject_by_label, e->label, e, NULL) < 0) {
                subject_free(e);
                return NULL;
        }
        if (array_push(&d->subjects, e) < 0) {
                hashmap_remove(d->subject_by_label, e->label);
                subject_free(e);
                return NULL;
        }
        return e;
}

static int add_binding(struct doctor_data *d, bool cluster, const cJSON *item) {
        const char *name = json_str(item, "metadata.name"), *ns = json_str(item, "metadata.namespace");
        const char *rk = json_str(item, "roleRef.kind"), *rn = json_str(item, "roleRef.name");
        struct doctor_binding *b;
        const cJSON *sub;
        size_t idx;

        if (!name || !rk || !rn || (!cluster && !ns))
                return -EBADMSG;
        b = calloc(1, sizeof(*b));
        if (!b)
                return -ENOMEM;
        b->cluster = cluster;
        b->name = strdup(name);
        b->ns = ns ? strdup(ns) : NULL;
        b->role_kind = strdup(rk);
        b->role_name = strdup(rn);
        /* How RBAC's SubjectAccessReview reasons name a binding: ClusterRoleBinding "NAME",
         * RoleBinding "NAME/NAMESPACE" (plugin/pkg/auth/authorizer/rbac). */
        if (cluster) {
                b->label = text_printf("ClusterRoleBinding %s -> %s %s", name, rk, rn);
                b->rbac = text_printf("ClusterRoleBinding \"%s\"", name);
        } else {
                b->label = text_printf("RoleBinding %s/%s -> %s %s", ns, name, rk, rn);
                b->rbac = text_printf("RoleBinding \"%s/%s\"", name, ns);
        }
        if (!b->label || !b->rbac || !b->name || (ns && !b->ns) || !b->role_kind || !b->role_name ||
            array_push(&d->bindings, b) < 0) {
                binding_free(b);
                return -ENOMEM;
        }
        idx = d->bindings.n - 1;
        cJSON_ArrayForEach(sub, json_path(item, "subjects")) {
                struct doctor_subject s = {
                        .kind = doctor_subject_kind_from_string(json_str(sub, "kind")),
                        .name = json_str(sub, "name"),
                        .ns = json_str(sub, "namespace"),
                };
                struct doctor_subject_ent *e;

                if (s.kind < 0 || !s.name)
                        continue;
                if (s.kind != DOCTOR_SUBJECT_SERVICE_ACCOUNT)
                        s.ns = NULL;
                else if (!s.ns)
                        s.ns = ns; /* a RoleBinding's ServiceAccount defaults to its namespace */
                if (s.kind == DOCTOR_SUBJECT_SERVICE_ACCOUNT && !s.ns)
                        continue;
                e = subject_get(d, &s);
                if (!e || idx_push(&e->bindings, &e->n_bindings, idx) < 0)
                        return -ENOMEM;
                if (cluster && streq(rk, "ClusterRole") && streq(rn, "cluster-admin"))
                        e->cluster_admin = true;
                if (!cluster && strv_push_unique(&e->claim_ns, &e->n_claim_ns, ns) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int add_driver_pod(struct doctor_data *d, const cJSON *item) {
        struct doctor_pod *p;
        int r;

        r = pod_from_json(item, &p);
        if (r < 0)
                return r;
        /* Several selectors may match one pod. */
        for (size_t i = 0; i < d->driver_pods.n; i++)
                if (streq_ptr(d->driver_pods.v[i]->rec->uid, p->rec->uid)) {
                        pod_free(p);
                        return 0;
                }
        r = array_push(&d->driver_pods, p);
        if (r < 0)
                pod_free(p);
        return r;
}

static int add_drainer_pod(struct doctor_data *d, const cJSON *item) {
        struct doctor_pod *p;
        int r = pod_from_json(item, &p);

        if (r < 0)
                return r;
        r = array_push(&d->drainer_pods, p);
        if (r < 0)
                pod_free(p);
        return r;
}

static int add_system_pod(struct doctor_data *d, const cJSON *item) {
        static const char *const components[] = { "kube-controller-manager", "kube-scheduler" };
        const char *label = json_str(item, "metadata.labels.component"),
                   *name = json_str(item, "metadata.name");
        const char *ns = json_str(item, "metadata.namespace");
        struct doctor_cp_pod *c;

        if (!name || !ns)
                return -EBADMSG;
        if (json_path(item, "metadata.deletionTimestamp"))
                return 0; /* going away */
        for (size_t i = 0; i < ELEMENTSOF(components); i++) {
                size_t n = strlen(components[i]);

                /* kubeadm labels them component=NAME; other installers at least name the
                 * mirror pod of the static pod NAME-<node>. */
                if (!streq_ptr(label, components[i]) &&
                    !(strncmp(name, components[i], n) == 0 && (name[n] == 0 || name[n] == '-') &&
                      cJSON_GetObjectItemCaseSensitive(json_path(item, "metadata.annotations"),
                                                       "kubernetes.io/config.mirror")))
                        continue;
                c = calloc(1, sizeof(*c));
                if (!c)
                        return -ENOMEM;
                c->component = strdup(components[i]);
                c->ns_name = text_printf("%s/%s", ns, name);
                c->error = doctor_client_conn_from_pod(item, &c->conn);
                if (!c->component || !c->ns_name || array_push(&d->cp_pods, c) < 0) {
                        cp_pod_free(c);
                        return -ENOMEM;
                }
                return 0;
        }
        return 0;
}

static void nodeclaim_free(struct doctor_nodeclaim *c) {
        if (!c)
                return;
        free(c->name);
        free(c->node);
        free(c->tgp);
        free(c);
}

/* A NodeClaim not (yet) on a node is kept: the rules skip it. */
static int add_nodeclaim(struct doctor_data *d, const cJSON *item) {
        const char *name = json_str(item, "metadata.name"), *node = json_str(item, "status.nodeName"),
                   *tgp = json_str(item, "spec.terminationGracePeriod");
        struct doctor_nodeclaim *c;

        if (!name)
                return -EBADMSG;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->name = strdup(name);
        c->node = node ? strdup(node) : NULL;
        c->tgp = tgp ? strdup(tgp) : NULL;
        if (!c->name || (node && !c->node) || (tgp && !c->tgp) || array_push(&d->nodeclaims, c) < 0) {
                nodeclaim_free(c);
                return -ENOMEM;
        }
        return 0;
}

/* Builds a compact record of item with from_json and appends it; 0, -EBADMSG or -ENOMEM. */
#define ADD_REC(array, item, from_json, rec_free)                       \
        ({                                                              \
                __typeof__(*(array)->v) _arec;                          \
                int _ar = from_json((item), &_arec);                    \
                if (_ar >= 0 && (_ar = array_push((array), _arec)) < 0) \
                        rec_free(_arec);                                \
                _ar;                                                    \
        })

int doctor_data_add(struct doctor_data *d, enum doctor_list l, const cJSON *item) {
        switch (l) {
        case DOCTOR_LIST_NODES:
                return ADD_REC(&d->nodes, item, node_rec_from_json, node_rec_free);
        case DOCTOR_LIST_SLICES:
                return ADD_REC(&d->slices, item, slice_rec_from_json, slice_rec_free);
        case DOCTOR_LIST_CLAIMS:
                return ADD_REC(&d->claims, item, claim_rec_from_json, claim_rec_free);
        case DOCTOR_LIST_CLUSTER_ROLE_BINDINGS:
                return add_binding(d, true, item);
        case DOCTOR_LIST_ROLE_BINDINGS:
                return add_binding(d, false, item);
        case DOCTOR_LIST_DRAINER_PODS:
                return add_drainer_pod(d, item);
        case DOCTOR_LIST_SYSTEM_PODS:
                return add_system_pod(d, item);
        case DOCTOR_LIST_NODECLAIMS:
                return add_nodeclaim(d, item);
        case DOCTOR_LIST_DRIVER_PODS:
                return add_driver_pod(d, item);
        default:
                return -EINVAL;
        }
}

int doctor_data_list_done(struct doctor_data *d, enum doctor_list l, int error, const char *message) {
        struct doctor_list_status *s = &d->lists[l];

        assert(l >= 0 && l < _DOCTOR_LIST_MAX);
        if (error >= 0 || s->error < 0)
                return 0;
        s->error = error;
        if (error == -ECANCELED)
                return 0;
        s->message = strdup(message ? message : strerror(-error));
        return s->message ? 0 : -ENOMEM;
}

/* ---- what the lists lead to ---- */

const struct node_rec *doctor_data_node(const struct doctor_data *d, const char *name) {
        return name ? hashmap_get(d->node_by_name, name) : NULL;
}

bool doctor_data_in_scope(const struct doctor_data *d, const char *node) {
        return !d->node || streq_ptr(node, d->node);
}

bool doctor_data_group_on_node(const struct doctor_data *d, const struct doctor_group *g, const char *node) {
        for (size_t k = 0; k < g->n_pods; k++)
                if (streq_ptr(d->driver_pods.v[g->pods[k]]->rec->node_name, node))
                        return true;
        return false;
}

static bool group_mentions(const struct doctor_data *d, const struct doctor_group *g, const char *driver) {
        for (size_t k = 0; k < g->n_pods; k++)
                if (strstr(d->driver_pods.v[g->pods[k]]->text, driver))
                        return true;
        return false;
}

static void group_free(struct doctor_group *g) {
        if (!g)
                return;
        free(g->kind);
        free(g->ns);
        free(g->name);
        free(g->pods);
        cJSON_Delete(g->ds);
        free(g->ds_message);
        free(g);
}

static void driver_free(struct doctor_driver *dr) {
        if (!dr)
                return;
        free(dr->name);
        strv_free_n(dr->nodes, dr->n_nodes);
        free(dr->groups);
        free(dr);
}

/* Groups the driver pods by their controller. */
static int build_groups(struct doctor_data *d) {
        for (size_t i = 0; i < d->driver_pods.n; i++) {
                const struct doctor_pod *p = d->driver_pods.v[i];
                const struct owner_ref *c = p->rec->controller;
                struct doctor_group *g = NULL;

                for (size_t k = 0; k < d->groups.n && !g; k++) {
                        struct doctor_group *x = d->groups.v[k];

                        if (c && x->kind && streq(x->ns, p->rec->ns) && streq_ptr(x->kind, c->kind) &&
                            streq_ptr(x->name, c->name))
                                g = x;
                }
                if (!g) {
                        g = calloc(1, sizeof(*g));
                        if (!g || array_push(&d->groups, g) < 0) {
                                free(g);
                                return -ENOMEM;
                        }
                        g->ns = strdup(p->rec->ns);
                        g->kind = c && c->kind ? strdup(c->kind) : NULL;
                        g->name = strdup(c && c->name ? c->name : p->rec->name);
                        if (!g->ns || !g->name || (c && c->kind && !g->kind))
                                return -ENOMEM;
                }
                if (idx_push(&g->pods, &g->n_pods, i) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int cmp_driver(const void *a, const void *b) {
        return strcmp((*(const struct doctor_driver *const *)a)->name,
                      (*(const struct doctor_driver *const *)b)->name);
}

/* The drivers named in ResourceSlices, each with the nodes of its node-local
 * slices and the driver pod groups that run there: those on its nodes, narrowed
 * to the ones whose command, args or env name the driver when several do. */
static int build_drivers(struct doctor_data *d) {
        for (size_t i = 0; i < d->slices.n; i++) {
                const struct slice_rec *s = d->slices.v[i];
                struct doctor_driver *dr = NULL;

                for (size_t k = 0; k < d->drivers.n && !dr; k++)
                        if (streq(d->drivers.v[k]->name, s->driver))
                                dr = d->drivers.v[k];
                if (!dr) {
                        dr = calloc(1, sizeof(*dr));
                        if (!dr || array_push(&d->drivers, dr) < 0) {
                                free(dr);
                                return -ENOMEM;
                        }
                        dr->name = strdup(s->driver);
                        if (!dr->name)
                                return -ENOMEM;
                }
                dr->n_slices++;
                if (!s->node_name)
                        dr->n_other_slices++;
                else if (strv_push_unique(&dr->nodes, &dr->n_nodes, s->node_name) < 0)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < d->drivers.n; i++) {
                struct doctor_driver *dr = d->drivers.v[i];
                size_t named = 0;

                for (size_t k = 0; k < d->groups.n; k++) {
                        bool on = false;

                        for (size_t j = 0; j < dr->n_nodes && !on; j++)
                                on = doctor_data_group_on_node(d, d->groups.v[k], dr->nodes[j]);
                        if (on && idx_push(&dr->groups, &dr->n_groups, k) < 0)
                                return -ENOMEM;
                        if (on)
                                named += group_mentions(d, d->groups.v[k], dr->name);
                }
                if (named > 0 && named < dr->n_groups) {
                        size_t w = 0;

                        for (size_t k = 0; k < dr->n_groups; k++)
                                if (group_mentions(d, d->groups.v[dr->groups[k]], dr->name))
                                        dr->groups[w++] = dr->groups[k];
                        dr->n_groups = w;
                }
        }
        if (d->drivers.n > 1)
                qsort(d->drivers.v, d->drivers.n, sizeof(*d->drivers.v), cmp_driver);
        return 0;
}

struct doctor_sar_job {
        size_t subject;
        int kind; /* 0 write, 1 claims in all namespaces, 2 claims in one namespace */
        size_t res, verb, ns;
};

/* Who is asked: every subject but those the permission rules exempt. */
static int plan_sars(struct doctor_data *d) {
        size_t n = 0;

        for (size_t i = 0; i < d->subjects.n; i++) {
                struct doctor_subject_ent *e = d->subjects.v[i];

                e->role = doctor_subject_role(&e->s, e->cluster_admin, (const char *const *)d->driver_sas,
                                              d->n_driver_sas);
                if (e->role != DOCTOR_ROLE_OTHER)
                        continue;
                n += _DOCTOR_RES_WRITE_MAX * DOCTOR_N_WRITE_VERBS + _DOCTOR_RES_CLAIM_MAX +
                     e->n_claim_ns * _DOCTOR_RES_CLAIM_MAX;
                if (e->n_claim_ns > 0 && !(e->claims_ns = calloc(e->n_claim_ns, sizeof(*e->claims_ns))))
                        return -ENOMEM;
        }
        d->sars = calloc(n + 1, sizeof(*d->sars));
        if (!d->sars)
                return -ENOMEM;
        for (size_t i = 0; i < d->subjects.n; i++) {
                struct doctor_subject_ent *e = d->subjects.v[i];

                if (e->role != DOCTOR_ROLE_OTHER)
                        continue;
                for (size_t res = 0; res < _DOCTOR_RES_WRITE_MAX; res++)
                        for (size_t v = 0; v < DOCTOR_N_WRITE_VERBS; v++)
                                d->sars[d->n_sars++] = (struct doctor_sar_job){
                                        .subject = i, .kind = 0, .res = res, .verb = v
                                };
                for (size_t res = 0; res < _DOCTOR_RES_CLAIM_MAX; res++) {
                        d->sars[d->n_sars++] =
                                (struct doctor_sar_job){ .subject = i, .kind = 1, .res = res };
                        for (size_t k = 0; k < e->n_claim_ns; k++)
                                d->sars[d->n_sars++] = (struct doctor_sar_job){
                                        .subject = i, .kind = 2, .res = res, .ns = k
                                };
                }
        }
        return 0;
}

/* gRPC health of the driver pods of the drivers, in scope, that declare a grpc liveness probe. */
static int plan_probes(struct doctor_data *d) {
        for (size_t k = 0; k < d->drivers.n; k++) {
                const struct doctor_driver *dr = d->drivers.v[k];

                for (size_t j = 0; j < dr->n_groups; j++) {
                        const struct doctor_group *g = d->groups.v[dr->groups[j]];

                        for (size_t q = 0; q < g->n_pods; q++) {
                                const struct doctor_pod *p = d->driver_pods.v[g->pods[q]];
                                bool dup = false;

                                if (!doctor_pod_running(p) || !p->rec->pod_ip ||
                                    p->rec->grpc_probe_port <= 0 ||
                                    !doctor_data_in_scope(d, p->rec->node_name))
                                        continue;
                                for (size_t x = 0; x < d->n_probes; x++)
                                        dup = dup || d->probes[x] == g->pods[q];
                                if (!dup && idx_push(&d->probes, &d->n_probes, g->pods[q]) < 0)
                                        return -ENOMEM;
                        }
                }
        }
        return 0;
}

static void cordoned_free(struct doctor_cordoned *c) {
        if (!c)
                return;
        for (size_t k = 0; k < c->pods.n; k++)
                pod_rec_free(c->pods.v[k]);
        free(c->pods.v);
        free(c);
}

/* The NodeClaim of node with a terminationGracePeriod, or NULL. */
static const struct doctor_nodeclaim *nodeclaim_with_grace(const struct doctor_data *d, const char *node) {
        for (size_t i = 0; i < d->nodeclaims.n; i++)
                if (d->nodeclaims.v[i]->tgp && streq_ptr(d->nodeclaims.v[i]->node, node))
                        return d->nodeclaims.v[i];
        return NULL;
}

/* The nodes in scope whose pods are read: the cordoned ones (for the claims on them)
 * and Karpenter's whose NodeClaim sets a terminationGracePeriod (for their pods'
 * grace periods). */
static int plan_cordoned(struct doctor_data *d) {
        for (size_t i = 0; i < d->nodes.n; i++) {
                const struct node_rec *n = d->nodes.v[i];
                const struct doctor_nodeclaim *nc = nodeclaim_with_grace(d, n->name);
                struct doctor_cordoned *c;

                if ((!n->unschedulable && !nc) || !doctor_data_in_scope(d, n->name))
                        continue;
                c = calloc(1, sizeof(*c));
                if (!c || array_push(&d->cordoned, c) < 0) {
                        free(c);
                        return -ENOMEM;
                }
                c->node = n;
                c->cordoned = n->unschedulable;
                c->nodeclaim = nc;
        }
        return 0;
}

int doctor_data_index(struct doctor_data *d) {
        int r;

        for (size_t i = 0; i < d->nodes.n; i++) {
                r = hashmap_put(d->node_by_name, d->nodes.v[i]->name, d->nodes.v[i], NULL);
                if (r < 0)
                        return -ENOMEM;
        }
        if (d->node && !doctor_data_node(d, d->node))
                return -ENOENT;
        /* The ServiceAccounts the driver pods run as may write ResourceSlices. */
        for (size_t i = 0; i < d->driver_pods.n; i++)
                if (strv_push_unique(&d->driver_sas, &d->n_driver_sas, d->driver_pods.v[i]->sa) < 0)
                        return -ENOMEM;
        r = build_groups(d);
        if (r >= 0)
                r = build_drivers(d);
        if (r >= 0)
                r = plan_sars(d);
        if (r >= 0)
                r = plan_probes(d);
        if (r >= 0)
                r = plan_cordoned(d);
        return r;
}

/* ---- the answers ---- */

cJSON *doctor_data_sar_request(const struct doctor_data *d, size_t k) {
        const struct doctor_sar_job *j;
        const struct doctor_subject_ent *e;

        assert(k < d->n_sars);
        j = &d->sars[k];
        e = d->subjects.v[j->subject];
        if (j->kind == 0)
                return doctor_sar_request(&e->s, NULL, DOCTOR_DRA_GROUP, doctor_write_resources[j->res],
                                          doctor_write_verbs[j->verb]);
        return doctor_sar_request(&e->s, j->kind == 2 ? e->claim_ns[j->ns] : NULL, DOCTOR_DRA_GROUP,
                                  doctor_claim_resources[j->res], "create");
}

int doctor_data_sar_done(struct doctor_data *d, size_t k, int error, const char *message,
                         const cJSON *answer) {
        const struct doctor_sar_job *j;
        struct doctor_subject_ent *e;
        const char *reason = NULL;
        bool allowed = false;
        int r = error;

        assert(k < d->n_sars);
        j = &d->sars[k];
        e = d->subjects.v[j->subject];
        if (r >= 0)
                r = doctor_sar_parse(answer, &allowed, &reason);
        if (r < 0) {
                d->sar_failed++;
                if (d->sar_error == 0) {
                        d->sar_error = r;
                        d->sar_message = strdup(message ? message : strerror(-r));
                        if (!d->sar_message)
                                return -ENOMEM;
                }
                return 0;
        }
        if (!allowed)
                return 0;
        if (j->kind == 0)
                e->write[j->res][j->verb] = true;
        else if (j->kind == 1)
                e->claims_all[j->res] = true;
        else
                e->claims_ns[j->ns][j->res] = true;
        if (reason && strv_push_unique(&e->reasons, &e->n_reasons, reason) < 0)
                return -ENOMEM;
        return 0;
}

bool doctor_data_wants_daemonset(const struct doctor_data *d, size_t i) {
        assert(i < d->groups.n);
        if (!streq_ptr(d->groups.v[i]->kind, "DaemonSet"))
                return false;
        for (size_t k = 0; k < d->drivers.n; k++) {
                const struct doctor_driver *dr = d->drivers.v[k];

                for (size_t j = 0; j < dr->n_groups; j++)
                        if (dr->groups[j] == i)
                                return true;
        }
        return false;
}

int doctor_data_daemonset_done(struct doctor_data *d, size_t i, int error, const char *message,
                               const cJSON *ds) {
        struct doctor_group *g;

        assert(i < d->groups.n);
        g = d->groups.v[i];
        if (error < 0) {
                g->ds_error = error;
                g->ds_message = strdup(message ? message : strerror(-error));
                return g->ds_message ? 0 : -ENOMEM;
        }
        g->ds = cJSON_Duplicate(ds, true);
        if (!g->ds) {
                g->ds_error = -ENOMEM;
                return -ENOMEM;
        }
        return 0;
}

void doctor_data_probe_done(struct doctor_data *d, size_t k, int error, enum health_status status,
                            const char *message) {
        struct doctor_pod *p;

        assert(k < d->n_probes);
        p = d->driver_pods.v[d->probes[k]];
        p->probed = true;
        p->probe_error = error;
        p->probe_status = status;
        p->probe_message = message ? strdup(message) : NULL;
}

int doctor_data_add_cordoned_pod(struct doctor_data *d, size_t k, const cJSON *item) {
        assert(k < d->cordoned.n);
        return ADD_REC(&d->cordoned.v[k]->pods, item, pod_rec_from_json, pod_rec_free);
}

void doctor_data_cordoned_done(struct doctor_data *d, size_t k, int error) {
        assert(k < d->cordoned.n);
        d->cordoned.v[k]->error = error < 0 ? error : 0;
}

int doctor_data_init(struct doctor_data *d, const char *node) {
        *d = (struct doctor_data){ .node = node, .dra_api = DOCTOR_DRA_GROUP "/" DOCTOR_DRA_VERSION };
        /* dra_api: v1 until the gather has read what is served (dra_known). */
        d->node_by_name = hashmap_new(MAP_MAX);
        d->subject_by_label = hashmap_new(MAP_MAX);
        if (!d->node_by_name || !d->subject_by_label) {
                doctor_data_done(d);
                return -ENOMEM;
        }
        return 0;
}

#define FREE_ARRAY(a, free_fn)                         \
        do {                                           \
                for (size_t _i = 0; _i < (a)->n; _i++) \
                        free_fn((a)->v[_i]);           \
                free((a)->v);                          \
        } while (0)

cJSON *doctor_data_to_json(const struct doctor_data *d, const char *node, const char *prometheus) {
        cJSON *cl = cJSON_CreateObject(), *drv;

        if (!cl)
                return NULL;
        cJSON_AddNumberToObject(cl, "nodes", (double)d->nodes.n);
        cJSON_AddNumberToObject(cl, "resourceClaims", (double)d->claims.n);
        drv = cJSON_AddArrayToObject(cl, "drivers");
        for (size_t i = 0; drv && i < d->drivers.n; i++)
                cJSON_AddItemToArray(drv, cJSON_CreateString(d->drivers.v[i]->name));
        if (node)
                cJSON_AddStringToObject(cl, "node", node);
        else
                cJSON_AddNullToObject(cl, "node");
        if (prometheus)
                cJSON_AddStringToObject(cl, "prometheus", prometheus);
        else
                cJSON_AddNullToObject(cl, "prometheus");
        return cl;
}

void doctor_data_done(struct doctor_data *d) {
        FREE_ARRAY(&d->nodes, node_rec_free);
        FREE_ARRAY(&d->slices, slice_rec_free);
        FREE_ARRAY(&d->claims, claim_rec_free);
        FREE_ARRAY(&d->bindings, binding_free);
        FREE_ARRAY(&d->subjects, subject_free);
        FREE_ARRAY(&d->driver_pods, pod_free);
        FREE_ARRAY(&d->drainer_pods, pod_free);
        FREE_ARRAY(&d->cp_pods, cp_pod_free);
        FREE_ARRAY(&d->nodeclaims, nodeclaim_free);
        for (size_t i = 0; i < _DOCTOR_LIST_MAX; i++)
                free(d->lists[i].message);
        hashmap_free(d->subject_by_label, NULL);
        hashmap_free(d->node_by_name, NULL);
        strv_free_n(d->driver_sas, d->n_driver_sas);
        FREE_ARRAY(&d->groups, group_free);
        FREE_ARRAY(&d->drivers, driver_free);
        FREE_ARRAY(&d->cordoned, cordoned_free);
        free(d->sars);
        free(d->probes);
        free(d->sar_message);
        *d = (struct doctor_data){};
}

/* ---- the reads ---- */

/* One list: the phase-1 lists, and the pods of each cordoned node. */
struct list_call {
        struct doctor_gather *g;
        enum doctor_list list; /* _DOCTOR_LIST_INVALID: the pods of cordoned node k */
        size_t k;
        struct kube_call *call;
        bool done;
};

/* A GET of a DaemonSet, a SubjectAccessReview, or a probe. */
struct job_call {
        struct doctor_gather *g;
        size_t k;
        struct kube_call *call;
        struct health_probe *probe;
        bool done;
};

struct doctor_gather {
        struct kube_client *client;  /* borrowed */
        struct transport *transport; /* borrowed */
        struct doctor_data *d;       /* borrowed */
        doctor_gather_done_fn done;
        void *userdata;

        unsigned pending; /* calls in flight, plus one while a phase is being started */
        bool phase2, cancelled;
        int error;
        char *message;

        struct list_call lists[DOCTOR_LIST_DRIVER_PODS + DOCTOR_DRIVER_SELECTORS_MAX];
        size_t n_lists;
        const char *const *selectors; /* borrowed: the driver selectors, for phase 1 */
        struct kube_call *group_call; /* GET /apis/resource.k8s.io, before phase 1 */
        struct list_call *cordoned;   /* one per doctor_data.cordoned */
        struct job_call *ds, *sars, *probes;
        size_t next_sar, sar_inflight, next_probe, probe_inflight;
};

/* Keeps the first error; a NULL message means out of memory. */
static void set_error(struct doctor_gather *g, int error, char *message) {
        if (g->error < 0) {
                free(message);
                return;
        }
        g->error = error;
        g->message = message;
}

static void cancel_calls(struct doctor_gather *g) {
        struct doctor_data *d = g->d;

        if (g->group_call)
                kube_call_cancel(g->group_call);
        for (size_t i = 0; i < g->n_lists; i++)
                if (!g->lists[i].done && g->lists[i].call)
                        kube_call_cancel(g->lists[i].call);
        for (size_t i = 0; g->cordoned && i < d->cordoned.n; i++)
                if (!g->cordoned[i].done && g->cordoned[i].call)
                        kube_call_cancel(g->cordoned[i].call);
        for (size_t i = 0; g->ds && i < d->groups.n; i++)
                if (!g->ds[i].done && g->ds[i].call)
                        kube_call_cancel(g->ds[i].call);
        for (size_t i = 0; g->sars && i < g->next_sar; i++)
                if (!g->sars[i].done && g->sars[i].call)
                        kube_call_cancel(g->sars[i].call);
        for (size_t i = 0; g->probes && i < g->next_probe; i++)
                if (!g->probes[i].done && g->probes[i].probe)
                        health_probe_cancel(g->probes[i].probe);
}

static void gather_free(struct doctor_gather *g) {
        free(g->cordoned);
        free(g->ds);
        free(g->sars);
        free(g->probes);
        free(g->message);
        free(g);
}

static void start_phase2(struct doctor_gather *g);

/* One call (or the start of a phase) is over: on to what comes next. */
static void gather_unref(struct doctor_gather *g) {
        assert(g->pending > 0);
        if (--g->pending > 0)
                return;
        if (!g->phase2 && g->error == 0 && !g->cancelled) {
                /* Held while phase 2 starts: no answer can come from inside a start. */
                g->pending++;
                start_phase2(g);
                if (--g->pending > 0)
                        return;
        }
        g->done(g->cancelled && g->error == 0 ? -ECANCELED : g->error, g->message, g->userdata);
        gather_free(g);
}

static int on_list_page(const cJSON *items, void *userdata) {
        struct list_call *lc = userdata;
        const cJSON *item;

        cJSON_ArrayForEach(item, items) {
                int r = lc->list >= 0 ? doctor_data_add(lc->g->d, lc->list, item)
                                      : doctor_data_add_cordoned_pod(lc->g->d, lc->k, item);

                if (r == -ENOMEM)
                        return r;
                /* A malformed item is skipped, as an informer would. */
        }
        return 0;
}

static void on_list_done(const struct kube_result *res, void *userdata) {
        struct list_call *lc = userdata;
        struct doctor_gather *g = lc->g;

        lc->done = true;
        if (lc->list < 0) {
                doctor_data_cordoned_done(g->d, lc->k, res->error);
                if (res->error < 0)
                        log_debug("list pods of a cordoned node: %s",
                                  res->message ? res->message : strerror(-res->error));
        } else if (doctor_data_list_done(g->d, lc->list, res->error, res->message) < 0)
                set_error(g, -ENOMEM, NULL);
        else if (res->error < 0 && res->error != -ECANCELED) {
                if (doctor_list_required(lc->list)) {
                        /* One required read failed: the report cannot be made; stop the rest. */
                        set_error(g, res->error,
                                  text_printf("%s: %s", doctor_list_to_string(lc->list),
                                              res->message ? res->message : strerror(-res->error)));
                        cancel_calls(g);
                } else
                        log_debug("%s: %s", doctor_list_to_string(lc->list),
                                  strna(g->d->lists[lc->list].message));
        }
        gather_unref(g);
}

static int start_list(struct doctor_gather *g, struct list_call *lc, const char *path) {
        int r;

        r = kube_list(g->client, path, 500, NULL, on_list_page, on_list_done, lc, &lc->call);
        if (r < 0)
                return r;
        g->pending++;
        return 0;
}

/* "/api/v1/pods?labelSelector=SEL" (ns NULL: every namespace), or the
 * namespace's pods; NULL when out of memory. */
static char *pods_path(const char *ns, const char *param, const char *value) {
        _cleanup_free_ char *ens = ns ? kube_query_escape(ns) : NULL, *ev = NULL;

        if (ns && !ens)
                return NULL;
        if (value && !(ev = kube_query_escape(value)))
                return NULL;
        return text_printf("/api/v1/%s%s%spods%s%s%s", ns ? "namespaces/" : "", ns ? ens : "", ns ? "/" : "",
                           ev ? "?" : "", ev ? param : "", ev ? ev : "");
}

/* The driver pods come last: one list per selector. */
_Static_assert(DOCTOR_LIST_DRIVER_PODS == _DOCTOR_LIST_MAX - 1, "driver pods are the last list");

static int start_phase1(struct doctor_gather *g, const char *const *selectors) {
        struct doctor_data *d = g->d;
        char *paths[DOCTOR_LIST_DRIVER_PODS] = {};
        int r = 0;

        paths[DOCTOR_LIST_NODES] = strdup("/api/v1/nodes");
        if (d->dra_api) {
                paths[DOCTOR_LIST_SLICES] = text_printf("/apis/%s/resourceslices", d->dra_api);
                /* Claims cannot be filtered: a consistent, paginated list (served from the watch cache). */
                paths[DOCTOR_LIST_CLAIMS] = text_printf("/apis/%s/resourceclaims", d->dra_api);
        } else {
                /* No DRA API: no slices, no claims (read as empty lists). */
                paths[DOCTOR_LIST_SLICES] = strdup("");
                paths[DOCTOR_LIST_CLAIMS] = strdup("");
        }
        paths[DOCTOR_LIST_CLUSTER_ROLE_BINDINGS] =
                strdup("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings");
        paths[DOCTOR_LIST_ROLE_BINDINGS] = strdup("/apis/rbac.authorization.k8s.io/v1/rolebindings");
        paths[DOCTOR_LIST_DRAINER_PODS] = pods_path(NULL, "labelSelector=", DOCTOR_DRAINER_POD_SELECTOR);
        paths[DOCTOR_LIST_SYSTEM_PODS] = pods_path("kube-system", NULL, NULL);
        /* Karpenter's NodeClaims: their terminationGracePeriod against what a drain of
         * their node needs (404 where Karpenter is not installed). */
        paths[DOCTOR_LIST_NODECLAIMS] = strdup("/apis/karpenter.sh/v1/nodeclaims");
        for (size_t l = 0; l < ELEMENTSOF(paths); l++)
                if (!paths[l])
                        r = -ENOMEM;
        for (size_t l = 0; r >= 0 && l < ELEMENTSOF(paths); l++) {
                if (!*paths[l])
                        continue;
                g->lists[g->n_lists] = (struct list_call){ .g = g, .list = l };
                r = start_list(g, &g->lists[g->n_lists], paths[l]);
                if (r < 0)
                        set_error(g, r,
                                  text_printf("Cannot start listing %s: %s", lists[l].what, strerror(-r)));
                else
                        g->n_lists++;
        }
        for (size_t i = 0; r >= 0 && selectors[i] && i < DOCTOR_DRIVER_SELECTORS_MAX; i++) {
                _cleanup_free_ char *path = pods_path(NULL, "labelSelector=", selectors[i]);

                g->lists[g->n_lists] = (struct list_call){ .g = g, .list = DOCTOR_LIST_DRIVER_PODS };
                r = path ? start_list(g, &g->lists[g->n_lists], path) : -ENOMEM;
                if (r < 0)
                        set_error(g, r,
                                  text_printf("Cannot start listing %s: %s",
                                              lists[DOCTOR_LIST_DRIVER_PODS].what, strerror(-r)));
                else
                        g->n_lists++;
        }
        for (size_t l = 0; l < ELEMENTSOF(paths); l++)
                free(paths[l]);
        if (r < 0)
                cancel_calls(g);
        return r;
}

static void on_ds_done(const struct kube_result *res, void *userdata) {
        struct job_call *c = userdata;
        struct doctor_gather *g = c->g;

        c->done = true;
        if (doctor_data_daemonset_done(g->d, c->k, res->error, res->message, res->json) < 0)
                set_error(g, -ENOMEM, NULL);
        gather_unref(g);
}

static void sar_next(struct doctor_gather *g);

static void on_sar_done(const struct kube_result *res, void *userdata) {
        struct job_call *c = userdata;
        struct doctor_gather *g = c->g;

        c->done = true;
        if (doctor_data_sar_done(g->d, c->k, res->error, res->message, res->json) < 0)
                set_error(g, -ENOMEM, NULL);
        g->sar_inflight--;
        sar_next(g);
        gather_unref(g);
}

static void sar_next(struct doctor_gather *g) {
        struct doctor_data *d = g->d;

        while (!g->cancelled && g->sar_inflight < MAX_INFLIGHT && g->next_sar < d->n_sars) {
                size_t k = g->next_sar++;
                _cleanup_(cJSON_Deletep) cJSON *req = doctor_data_sar_request(d, k);
                _cleanup_free_ char *body = req ? cJSON_PrintUnformatted(req) : NULL;
                struct job_call *c = &g->sars[k];
                int r;

                *c = (struct job_call){ .g = g, .k = k };
                /* A SubjectAccessReview is a question: resending it is harmless. */
                r = body ? kube_call_start(
                                   g->client,
                                   &(struct kube_call_params){
                                           .method = "POST",
                                           .path = "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                                           .content_type = "application/json",
                                           .body = body,
                                           .body_len = strlen(body),
                                           .retry = true,
                                   },
                                   on_sar_done, c, &c->call)
                         : -ENOMEM;
                if (r < 0) {
                        c->done = true;
                        if (doctor_data_sar_done(d, k, r, NULL, NULL) < 0)
                                set_error(g, -ENOMEM, NULL);
                        continue;
                }
                g->sar_inflight++;
                g->pending++;
        }
}

static void probe_next(struct doctor_gather *g);

static void on_probe_done(int error, enum health_status status, const char *message, void *userdata) {
        struct job_call *c = userdata;
        struct doctor_gather *g = c->g;

        c->done = true;
        doctor_data_probe_done(g->d, c->k, error, status, message);
        g->probe_inflight--;
        probe_next(g);
        gather_unref(g);
}

static void probe_next(struct doctor_gather *g) {
        struct doctor_data *d = g->d;

        while (!g->cancelled && g->probe_inflight < MAX_INFLIGHT && g->next_probe < d->n_probes) {
                size_t k = g->next_probe++;
                const struct pod_rec *p = d->driver_pods.v[d->probes[k]]->rec;
                struct health_target t = {
                        .port = p->grpc_probe_port,
                        /* An unset service asks for the server as a whole, as the kubelet does. */
                        .service = (char *)(p->grpc_probe_service ? p->grpc_probe_service : ""),
                };
                struct job_call *c = &g->probes[k];
                int r;

                *c = (struct job_call){ .g = g, .k = k };
                r = health_probe_start(g->transport, &t, p->pod_ip, PROBE_TIMEOUT_USEC, on_probe_done, c,
                                       &c->probe);
                if (r < 0) {
                        c->done = true;
                        doctor_data_probe_done(d, k, r, HEALTH_UNKNOWN, NULL);
                        continue;
                }
                g->probe_inflight++;
                g->pending++;
        }
}

/* What the lists lead to: the drivers' DaemonSets, the SubjectAccessReviews,
 * the probes, the pods of cordoned nodes. Runs from the last list's callback;
 * an error stops the starts (what started is cancelled). */
static void start_phase2(struct doctor_gather *g) {
        struct doctor_data *d = g->d;
        int r;

        g->phase2 = true;
        r = doctor_data_index(d);
        if (r == -ENOENT) {
                set_error(g, r, text_printf("node \"%s\" not found", d->node));
                return;
        }
        if (r < 0) {
                set_error(g, r, NULL);
                return;
        }
        g->ds = calloc(d->groups.n + 1, sizeof(*g->ds));
        g->sars = calloc(d->n_sars + 1, sizeof(*g->sars));
        g->probes = calloc(d->n_probes + 1, sizeof(*g->probes));
        g->cordoned = calloc(d->cordoned.n + 1, sizeof(*g->cordoned));
        if (!g->ds || !g->sars || !g->probes || !g->cordoned) {
                set_error(g, -ENOMEM, NULL);
                return;
        }
        for (size_t i = 0; i < d->groups.n; i++) {
                const struct doctor_group *grp = d->groups.v[i];
                _cleanup_free_ char *path = NULL, *ens = NULL, *ename = NULL;
                struct job_call *c = &g->ds[i];

                *c = (struct job_call){ .g = g, .k = i, .done = true };
                if (!doctor_data_wants_daemonset(d, i))
                        continue;
                ens = kube_query_escape(grp->ns);
                ename = kube_query_escape(grp->name);
                path = ens && ename ? text_printf("/apis/apps/v1/namespaces/%s/daemonsets/%s", ens, ename)
                                    : NULL;
                r = path ? kube_get(g->client, path, on_ds_done, c, &c->call) : -ENOMEM;
                if (r < 0) {
                        set_error(g, r, r == -ENOMEM ? NULL : text_printf("Cannot check: %s", strerror(-r)));
                        break;
                }
                c->done = false;
                g->pending++;
        }
        if (g->error == 0)
                sar_next(g);
        if (g->error == 0)
                probe_next(g);
        for (size_t i = 0; g->error == 0 && i < d->cordoned.n; i++) {
                _cleanup_free_ char *fs = text_printf("spec.nodeName=%s", d->cordoned.v[i]->node->name);
                _cleanup_free_ char *path = fs ? pods_path(NULL, "fieldSelector=", fs) : NULL;
                struct list_call *lc = &g->cordoned[i];

                *lc = (struct list_call){ .g = g, .list = _DOCTOR_LIST_INVALID, .k = i, .done = true };
                r = path ? start_list(g, lc, path) : -ENOMEM;
                if (r < 0) {
                        set_error(g, r, r == -ENOMEM ? NULL : text_printf("Cannot check: %s", strerror(-r)));
                        break;
                }
                lc->done = false;
        }
        if (g->error < 0)
                cancel_calls(g);
}

/* The DRA API doctor reads slices and claims from: the newest version of
 * resource.k8s.io the API server serves (its APIGroup document; 404: none, DRA is
 * off), as drainer's informers find it (nodeview.c); every field doctor reads is the
 * same in the three. */
static const char *const dra_apis[] = {
        DOCTOR_DRA_GROUP "/v1",
        DOCTOR_DRA_GROUP "/v1beta2",
        DOCTOR_DRA_GROUP "/v1beta1",
};

static void on_group_done(const struct kube_result *res, void *userdata) {
        struct doctor_gather *g = userdata;
        struct doctor_data *d = g->d;
        const cJSON *v;

        g->group_call = NULL;
        if (g->cancelled || res->error == -ECANCELED)
                return gather_unref(g);
        d->dra_api = NULL;
        if (res->error < 0 && res->error != -ENOENT) {
                set_error(
                        g, res->error,
                        text_printf(
                                "Cannot read which versions of %s the API server serves (GET /apis/%s): %s",
                                DOCTOR_DRA_GROUP, DOCTOR_DRA_GROUP,
                                res->message ? res->message : strerror(-res->error)));
                return gather_unref(g);
        }
        for (size_t k = 0; res->error >= 0 && !d->dra_api && k < ELEMENTSOF(dra_apis); k++)
                cJSON_ArrayForEach(
                        v, json_get_arr(res->json,
                                        "versions")) if (streq_ptr(json_get_str(v, "groupVersion"),
                                                                   dra_apis[k])) d->dra_api = dra_apis[k];
        d->dra_known = true;
        if (!d->dra_api)
                log_debug("the API server serves no DRA API (%s v1, v1beta2, v1beta1)", DOCTOR_DRA_GROUP);
        g->pending++; /* held while phase 1 starts */
        (void)start_phase1(g, g->selectors);
        gather_unref(g); /* the hold */
        gather_unref(g); /* the group's GET */
}

int doctor_gather_start(struct kube_client *c, struct transport *t, struct doctor_data *d,
                        const char *const *driver_selectors, doctor_gather_done_fn done, void *userdata,
                        struct doctor_gather **ret) {
        struct doctor_gather *g = calloc(1, sizeof(*g));
        int r;

        if (!g)
                return -ENOMEM;
        *g = (struct doctor_gather){
                .client = c,
                .transport = t,
                .d = d,
                .done = done,
                .userdata = userdata,
        };
        g->selectors = driver_selectors;
        /* First which DRA API is served; phase 1 starts from its answer. */
        r = kube_get(c, "/apis/" DOCTOR_DRA_GROUP, on_group_done, g, &g->group_call);
        if (r < 0) {
                gather_free(g);
                return r;
        }
        g->pending = 1;
        if (ret)
                *ret = g;
        return 0;
}

void doctor_gather_cancel(struct doctor_gather *g) {
        if (g->cancelled)
                return;
        g->cancelled = true;
        cancel_calls(g);
}
