/* `drainer doctor`: a read-only audit of the cluster against the upstream DRA
 * cluster-admin good practices. Reads concurrently (nodes, slices, claims,
 * RBAC bindings, driver and drainer pods, kube-system), then asks what needs
 * the first answers (SubjectAccessReviews, DaemonSets, gRPC health, pods of
 * cordoned nodes) and, with --prometheus, the guide's queries. Never writes:
 * a SubjectAccessReview is a question, not an object. Rules live in doctor.c. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/app.h"
#include "drainer/claims.h"
#include "drainer/client.h"
#include "drainer/doctor-prom.h"
#include "drainer/doctor-rules.h"
#include "drainer/hashmap.h"
#include "drainer/health.h"
#include "drainer/json.h"
#include "drainer/log.h"
#include "drainer/objects.h"
#include "drainer/selector.h"
#include "drainer/transport.h"
#include "drainer/verbs.h"

#define MAX_DRIVER_SELECTORS 16
#define MAX_INFLIGHT         32 /* SubjectAccessReviews and health probes at once */
#define PROBE_TIMEOUT_USEC   (UINT64_C(3) * 1000000)
#define POD_TEXT_MAX         (64u << 10)
#define DRAINER_POD_SELECTOR "app.kubernetes.io/name=drainer"

struct doctor_opts {
        const char *node;
        const char *prometheus;
        const char *driver_selectors[MAX_DRIVER_SELECTORS + 1];
        size_t n_driver_selectors;
};

static int on_doctor_opt(int opt, const char *arg, void *userdata) {
        struct doctor_opts *o = userdata;

        switch (opt) {
        case 'N':
                o->node = arg;
                return 0;
        case 'P':
                if (strncmp(arg, "http://", 7) != 0 && strncmp(arg, "https://", 8) != 0)
                        return log_error_errno(
                                EINVAL, "--prometheus: expected an http:// or https:// URL, got \"%s\"",
                                arg);
                o->prometheus = arg;
                return 0;
        case 'D':
                if (o->n_driver_selectors >= MAX_DRIVER_SELECTORS)
                        return log_error_errno(EINVAL, "--driver-selector: at most %d selectors",
                                               MAX_DRIVER_SELECTORS);
                o->driver_selectors[o->n_driver_selectors++] = arg;
                return 0;
        }
        return -EINVAL;
}

/* ---- what is read ---- */

struct ptr_array {
        void **v;
        size_t n, alloc;
};

static int ptr_push(struct ptr_array *a, void *p) {
        if (a->n == a->alloc) {
                size_t n = a->alloc ? a->alloc * 2 : 16;
                void **v = realloc(a->v, n * sizeof(*v));

                if (!v)
                        return -ENOMEM;
                a->v = v;
                a->alloc = n;
        }
        a->v[a->n++] = p;
        return 0;
}

static int idx_push(size_t **v, size_t *n, size_t x) {
        size_t *p = realloc(*v, (*n + 1) * sizeof(**v));

        if (!p)
                return -ENOMEM;
        *v = p;
        (*v)[(*n)++] = x;
        return 0;
}

static int str_push_unique(char ***v, size_t *n, const char *s) {
        char **p, *c;

        for (size_t i = 0; i < *n; i++)
                if (streq((*v)[i], s))
                        return 0;
        c = strdup(s);
        p = c ? realloc(*v, (*n + 1) * sizeof(**v)) : NULL;
        if (!p) {
                free(c);
                return -ENOMEM;
        }
        *v = p;
        (*v)[(*n)++] = c;
        return 1;
}

static void strv_free_n(char **v, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

/* asprintf() that returns the string, or NULL when out of memory. */
static char *strf(const char *fmt, ...) _printf_(1, 2);
static char *strf(const char *fmt, ...) {
        va_list ap;
        char *s;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&s, fmt, ap);
        va_end(ap);
        return r < 0 ? NULL : s;
}

/* A pod as doctor needs it: the compact record, plus what the record leaves out. */
struct dpod {
        struct pod_rec *rec;
        char *sa;   /* "namespace/serviceAccountName" */
        char *text; /* containers' command, args and env values, space-separated */
        /* gRPC health probe */
        bool probed;
        int probe_error;
        enum health_status probe_status;
        char *probe_message;
};

static void dpod_free(struct dpod *p) {
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

static int dpod_from_json(const cJSON *obj, struct dpod **ret) {
        struct dpod *p = calloc(1, sizeof(*p));
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
        p->sa = strf("%s/%s", p->rec->ns, sa ? sa : "default");
        if (!p->sa) {
                dpod_free(p);
                return -ENOMEM;
        }
        p->text = strdup("");
        if (!p->text) {
                dpod_free(p);
                return -ENOMEM;
        }
        cJSON_ArrayForEach(c, json_path(obj, "spec.containers")) {
                static const char *const lists[] = { "command", "args" };
                const cJSON *a;

                for (size_t l = 0; l < ELEMENTSOF(lists); l++)
                        cJSON_ArrayForEach(a, json_path(c, lists[l])) {
                                if (cJSON_IsString(a) && text_append(&p->text, &len, a->valuestring) < 0) {
                                        dpod_free(p);
                                        return -ENOMEM;
                                }
                        }
                cJSON_ArrayForEach(a, json_path(c, "env")) {
                        const char *v = json_str(a, "value");

                        if (v && text_append(&p->text, &len, v) < 0) {
                                dpod_free(p);
                                return -ENOMEM;
                        }
                }
        }
        *ret = p;
        return 0;
}

static bool dpod_running(const struct dpod *p) {
        return p->rec->phase == POD_RUNNING && !p->rec->deleting;
}

/* A kube-system pod of kube-controller-manager or kube-scheduler. */
struct cp_pod {
        char *component, *ns_name;
        struct doctor_client_conn conn;
        int error;
};

/* A (Cluster)RoleBinding, as far as doctor names it. */
struct binding {
        bool cluster;
        char *ns, *name, *role_kind, *role_name;
        char *label; /* "ClusterRoleBinding NAME -> ClusterRole ROLE" */
        char *rbac;  /* how RBAC's SubjectAccessReview reasons name it */
};

enum { RES_DEVICECLASSES, RES_RESOURCESLICES, _RES_WRITE_MAX };
static const char *const write_resources[_RES_WRITE_MAX] = { "deviceclasses", "resourceslices" };
static const char *const write_verbs[] = { "create", "update", "patch", "delete" };
#define N_WRITE_VERBS ELEMENTSOF(write_verbs)
enum { RES_CLAIMS, RES_CLAIM_TEMPLATES, _RES_CLAIM_MAX };
static const char *const claim_resources[_RES_CLAIM_MAX] = { "resourceclaims", "resourceclaimtemplates" };

struct subject_ent {
        struct doctor_subject s; /* strings owned */
        char *label;
        size_t *bindings, n_bindings;
        bool cluster_admin;
        enum doctor_subject_role role;
        /* answers */
        bool write[_RES_WRITE_MAX][N_WRITE_VERBS];
        bool claims_all[_RES_CLAIM_MAX];
        char **reasons;
        size_t n_reasons;
        char **claim_ns; /* namespaces of the RoleBindings that name it */
        size_t n_claim_ns;
        bool (*claims_ns)[_RES_CLAIM_MAX]; /* per claim_ns */
};

static void subject_free(struct subject_ent *e) {
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

/* The pods of one controller that run a DRA kubelet plugin. */
struct dgroup {
        struct doctor *d;       /* borrowed */
        char *kind, *ns, *name; /* the controller; kind NULL: a pod without one (name = the pod's) */
        size_t *pods, n_pods;
        cJSON *ds; /* the DaemonSet; owned */
        int ds_error;
        char *ds_message;
        bool guard;
};

struct driver {
        char *name;
        char **nodes; /* of its node-local slices */
        size_t n_nodes;
        size_t n_slices, n_other_slices;
        size_t *groups, n_groups;
};

struct cordoned {
        const struct node_rec *node; /* borrowed */
        struct ptr_array pods;       /* pod_rec */
        int error;
};

struct list_call;
struct doctor;
typedef int (*item_fn)(struct doctor *d, struct list_call *lc, const cJSON *item);

struct list_call {
        struct doctor *d;
        const char *what;
        bool required;
        item_fn on_item;
        void *userdata;
        int error;
        char *message;
        bool done;
};

struct sar_job {
        size_t subject;
        int kind; /* 0 write, 1 claims in all namespaces, 2 claims in one namespace */
        size_t res, verb, ns;
};

struct doctor {
        struct app *app;
        const struct doctor_opts *o;
        unsigned pending;
        int fatal;
        char *fatal_what;

        struct list_call lc_nodes, lc_slices, lc_claims, lc_crbs, lc_rbs, lc_drainer, lc_system;
        struct list_call lc_driver[MAX_DRIVER_SELECTORS];
        size_t n_lc_driver;

        struct ptr_array nodes; /* node_rec */
        struct hashmap *node_by_name;
        struct ptr_array slices;   /* slice_rec */
        struct ptr_array claims;   /* claim_rec */
        struct ptr_array bindings; /* struct binding */
        struct ptr_array dpods;    /* driver pods: struct dpod (unique by uid) */
        struct ptr_array drainer;  /* drainer pods: struct dpod */
        struct ptr_array cps;      /* struct cp_pod */

        struct ptr_array subjects; /* struct subject_ent */
        struct hashmap *subject_by_label;
        char **driver_sas;
        size_t n_driver_sas;
        struct ptr_array groups;   /* struct dgroup */
        struct ptr_array drivers;  /* struct driver */
        struct ptr_array cordoned; /* struct cordoned */

        struct sar_job *sars;
        size_t n_sars, next_sar, sar_inflight, sar_failed;
        int sar_error;
        char *sar_message;

        size_t *probes, n_probes, next_probe, probe_inflight; /* indices into dpods */

        struct doctor_prom_results prom;
        int prom_error;
};

static void set_fatal(struct doctor *d, int error, const char *what, const char *message) {
        if (d->fatal < 0)
                return;
        d->fatal = error;
        d->fatal_what = strf("%s: %s", what, message ? message : strerror(-error));
        /* One required read failed: the report cannot be made; stop the rest. */
        kube_client_cancel_all(d->app->client);
}

static void wait_pending(struct doctor *d) {
        while (d->pending > 0)
                if (uv_run(&d->app->loop, UV_RUN_ONCE) == 0)
                        break;
}

static void on_prom_done(int error, void *userdata) {
        struct doctor *d = userdata;

        /* Not every query could be sent: the report cannot be made; stop the rest. */
        if (error < 0) {
                d->prom_error = error;
                kube_client_cancel_all(d->app->client);
        }
        d->pending--;
}

/* ---- phase 1: lists ---- */

static int on_list_page(const cJSON *items, void *userdata) {
        struct list_call *lc = userdata;
        const cJSON *item;

        cJSON_ArrayForEach(item, items) {
                int r = lc->on_item(lc->d, lc, item);

                if (r == -ENOMEM)
                        return r;
                /* A malformed item is skipped, as an informer would. */
        }
        return 0;
}

static void on_list_done(const struct kube_result *res, void *userdata) {
        struct list_call *lc = userdata;
        struct doctor *d = lc->d;

        lc->done = true;
        if (res->error < 0 && res->error != -ECANCELED) {
                lc->error = res->error;
                lc->message = strdup(res->message ? res->message : strerror(-res->error));
                if (lc->required)
                        set_fatal(d, res->error, lc->what, res->message);
                else
                        log_debug("%s: %s", lc->what, strna(lc->message));
        } else if (res->error == -ECANCELED)
                lc->error = res->error;
        d->pending--;
}

static int start_list(struct doctor *d, struct list_call *lc, const char *what, bool required,
                      const char *path, item_fn on_item) {
        int r;

        *lc = (struct list_call){ .d = d, .what = what, .required = required, .on_item = on_item };
        r = kube_list(d->app->client, path, 500, NULL, on_list_page, on_list_done, lc, NULL);
        if (r < 0)
                return log_error_errno(r, "Cannot start listing %s: %m", what);
        d->pending++;
        return 0;
}

static int on_node_item(struct doctor *d, struct list_call *lc, const cJSON *item) {
        struct node_rec *n;
        int r = node_rec_from_json(item, &n);

        if (r < 0)
                return r;
        r = ptr_push(&d->nodes, n);
        if (r < 0)
                node_rec_free(n);
        return r;
}

static int on_slice_item(struct doctor *d, struct list_call *lc, const cJSON *item) {
        struct slice_rec *s;
        int r = slice_rec_from_json(item, &s);

        if (r < 0)
                return r;
        r = ptr_push(&d->slices, s);
        if (r < 0)
                slice_rec_free(s);
        return r;
}

static int on_claim_item(struct doctor *d, struct list_call *lc, const cJSON *item) {
        struct claim_rec *c;
        int r = claim_rec_from_json(item, &c);

        if (r < 0)
                return r;
        r = ptr_push(&d->claims, c);
        if (r < 0)
                claim_rec_free(c);
        return r;
}

static void binding_free(struct binding *b) {
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

static struct subject_ent *subject_get(struct doctor *d, const struct doctor_subject *s, bool *ret_new) {
        _cleanup_free_ char *label = doctor_subject_to_string(s);
        struct subject_ent *e;

        if (!label)
                return NULL;
        e = hashmap_get(d->subject_by_label, label);
        if (e) {
                *ret_new = false;
                return e;
        }
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
        if (ptr_push(&d->subjects, e) < 0) {
                hashmap_remove(d->subject_by_label, e->label);
                subject_free(e);
                return NULL;
        }
        *ret_new = true;
        return e;
}

static int on_binding_item(struct doctor *d, struct list_call *lc, const cJSON *item) {
        bool cluster = lc == &d->lc_crbs;
        const char *name = json_str(item, "metadata.name"), *ns = json_str(item, "metadata.namespace");
        const char *rk = json_str(item, "roleRef.kind"), *rn = json_str(item, "roleRef.name");
        struct binding *b;
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
                b->label = strf("ClusterRoleBinding %s -> %s %s", name, rk, rn);
                b->rbac = strf("ClusterRoleBinding \"%s\"", name);
        } else {
                b->label = strf("RoleBinding %s/%s -> %s %s", ns, name, rk, rn);
                b->rbac = strf("RoleBinding \"%s/%s\"", name, ns);
        }
        if (!b->label || !b->rbac || !b->name || (ns && !b->ns) || !b->role_kind || !b->role_name ||
            ptr_push(&d->bindings, b) < 0) {
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
                struct subject_ent *e;
                bool is_new;

                if (s.kind < 0 || !s.name)
                        continue;
                if (s.kind != DOCTOR_SUBJECT_SERVICE_ACCOUNT)
                        s.ns = NULL;
                else if (!s.ns)
                        s.ns = ns; /* a RoleBinding's ServiceAccount defaults to its namespace */
                if (s.kind == DOCTOR_SUBJECT_SERVICE_ACCOUNT && !s.ns)
                        continue;
                e = subject_get(d, &s, &is_new);
                if (!e || idx_push(&e->bindings, &e->n_bindings, idx) < 0)
                        return -ENOMEM;
                if (cluster && streq(rk, "ClusterRole") && streq(rn, "cluster-admin"))
                        e->cluster_admin = true;
                if (!cluster && str_push_unique(&e->claim_ns, &e->n_claim_ns, ns) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int on_driver_pod_item(struct doctor *d, struct list_call *lc, const cJSON *item) {
        struct dpod *p;
        int r;

        r = dpod_from_json(item, &p);
        if (r < 0)
                return r;
        /* Several selectors may match one pod. */
        for (size_t i = 0; i < d->dpods.n; i++)
                if (streq_ptr(((struct dpod *)d->dpods.v[i])->rec->uid, p->rec->uid)) {
                        dpod_free(p);
                        return 0;
                }
        r = ptr_push(&d->dpods, p);
        if (r < 0)
                dpod_free(p);
        return r;
}

static int on_drainer_pod_item(struct doctor *d, struct list_call *lc, const cJSON *item) {
        struct dpod *p;
        int r = dpod_from_json(item, &p);

        if (r < 0)
                return r;
        r = ptr_push(&d->drainer, p);
        if (r < 0)
                dpod_free(p);
        return r;
}

static int on_system_pod_item(struct doctor *d, struct list_call *lc, const cJSON *item) {
        static const char *const components[] = { "kube-controller-manager", "kube-scheduler" };
        const char *label = json_str(item, "metadata.labels.component"),
                   *name = json_str(item, "metadata.name");
        const char *ns = json_str(item, "metadata.namespace");
        struct cp_pod *c;

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
                c->ns_name = strf("%s/%s", ns, name);
                c->error = doctor_client_conn_from_pod(item, &c->conn);
                if (!c->component || !c->ns_name || ptr_push(&d->cps, c) < 0) {
                        free(c->component);
                        free(c->ns_name);
                        free(c);
                        return -ENOMEM;
                }
                return 0;
        }
        return 0;
}

static int start_phase1(struct doctor *d, const char *const *selectors) {
        static const char *const paths[] = {
                "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                "/apis/rbac.authorization.k8s.io/v1/rolebindings",
        };
        _cleanup_free_ char *esel = NULL, *drainer_path = NULL;
        int r;

        r = start_list(d, &d->lc_nodes, "list nodes", true, "/api/v1/nodes", on_node_item);
        if (r >= 0)
                r = start_list(d, &d->lc_slices, "list resourceslices", true,
                               "/apis/resource.k8s.io/v1/resourceslices", on_slice_item);
        /* Claims cannot be filtered: a consistent, paginated list (served from the watch cache). */
        if (r >= 0)
                r = start_list(d, &d->lc_claims, "list resourceclaims", true,
                               "/apis/resource.k8s.io/v1/resourceclaims", on_claim_item);
        /* Without them the permission checks say so, but everything else still counts. */
        if (r >= 0)
                r = start_list(d, &d->lc_crbs, "list clusterrolebindings", false, paths[0], on_binding_item);
        if (r >= 0)
                r = start_list(d, &d->lc_rbs, "list rolebindings", false, paths[1], on_binding_item);
        esel = kube_query_escape(DRAINER_POD_SELECTOR);
        if (!esel || asprintf(&drainer_path, "/api/v1/pods?labelSelector=%s", esel) < 0)
                return log_oom();
        if (r >= 0)
                r = start_list(d, &d->lc_drainer, "list drainer pods", true, drainer_path,
                               on_drainer_pod_item);
        if (r >= 0)
                r = start_list(d, &d->lc_system, "list kube-system pods", false,
                               "/api/v1/namespaces/kube-system/pods", on_system_pod_item);
        for (size_t i = 0; r >= 0 && selectors[i] && i < MAX_DRIVER_SELECTORS; i++) {
                _cleanup_free_ char *e = kube_query_escape(selectors[i]), *path = NULL;

                if (!e || asprintf(&path, "/api/v1/pods?labelSelector=%s", e) < 0)
                        return log_oom();
                r = start_list(d, &d->lc_driver[i], "list DRA driver pods", true, path, on_driver_pod_item);
                d->n_lc_driver++;
        }
        return r;
}

/* ---- phase 2: what the lists lead to ---- */

static struct node_rec *node_find(struct doctor *d, const char *name) {
        return name ? hashmap_get(d->node_by_name, name) : NULL;
}

static bool in_scope(struct doctor *d, const char *node) {
        return !d->o->node || streq_ptr(node, d->o->node);
}

/* Groups the driver pods by their controller. */
static int build_groups(struct doctor *d) {
        for (size_t i = 0; i < d->dpods.n; i++) {
                const struct dpod *p = d->dpods.v[i];
                const struct owner_ref *c = p->rec->controller;
                struct dgroup *g = NULL;

                for (size_t k = 0; k < d->groups.n && !g; k++) {
                        struct dgroup *x = d->groups.v[k];

                        if (c && x->kind && streq(x->ns, p->rec->ns) && streq_ptr(x->kind, c->kind) &&
                            streq_ptr(x->name, c->name))
                                g = x;
                }
                if (!g) {
                        g = calloc(1, sizeof(*g));
                        if (!g || ptr_push(&d->groups, g) < 0) {
                                free(g);
                                return -ENOMEM;
                        }
                        g->d = d;
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

static bool group_on_node(struct doctor *d, const struct dgroup *g, const char *node) {
        for (size_t k = 0; k < g->n_pods; k++)
                if (streq_ptr(((struct dpod *)d->dpods.v[g->pods[k]])->rec->node_name, node))
                        return true;
        return false;
}

static bool group_mentions(struct doctor *d, const struct dgroup *g, const char *driver) {
        for (size_t k = 0; k < g->n_pods; k++)
                if (strstr(((struct dpod *)d->dpods.v[g->pods[k]])->text, driver))
                        return true;
        return false;
}

/* The drivers named in ResourceSlices, each with the nodes of its node-local
 * slices and the driver pod groups that run there: those on its nodes, narrowed
 * to the ones whose command, args or env name the driver when several do. */
static int build_drivers(struct doctor *d) {
        for (size_t i = 0; i < d->slices.n; i++) {
                const struct slice_rec *s = d->slices.v[i];
                struct driver *dr = NULL;

                for (size_t k = 0; k < d->drivers.n && !dr; k++)
                        if (streq(((struct driver *)d->drivers.v[k])->name, s->driver))
                                dr = d->drivers.v[k];
                if (!dr) {
                        dr = calloc(1, sizeof(*dr));
                        if (!dr || ptr_push(&d->drivers, dr) < 0) {
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
                else if (str_push_unique(&dr->nodes, &dr->n_nodes, s->node_name) < 0)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < d->drivers.n; i++) {
                struct driver *dr = d->drivers.v[i];
                size_t named = 0;

                for (size_t k = 0; k < d->groups.n; k++) {
                        bool on = false;

                        for (size_t j = 0; j < dr->n_nodes && !on; j++)
                                on = group_on_node(d, d->groups.v[k], dr->nodes[j]);
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
        return 0;
}

static void on_ds_done(const struct kube_result *res, void *userdata) {
        struct dgroup *g = userdata;
        struct doctor *d = g->d;

        if (res->error < 0) {
                g->ds_error = res->error;
                g->ds_message = strdup(res->message ? res->message : strerror(-res->error));
        } else {
                g->ds = cJSON_Duplicate(res->json, true);
                if (!g->ds)
                        g->ds_error = -ENOMEM;
        }
        d->pending--;
}

static void sar_next(struct doctor *d);

struct sar_call {
        struct doctor *d;
        size_t job;
};

static void on_sar_done(const struct kube_result *res, void *userdata) {
        struct sar_call *c = userdata;
        struct doctor *d = c->d;
        const struct sar_job *j = &d->sars[c->job];
        struct subject_ent *e = d->subjects.v[j->subject];
        const char *reason = NULL;
        bool allowed = false;
        int r = res->error;

        if (r >= 0)
                r = doctor_sar_parse(res->json, &allowed, &reason);
        if (r < 0) {
                d->sar_failed++;
                if (d->sar_error == 0) {
                        d->sar_error = r;
                        d->sar_message = strdup(res->message ? res->message : strerror(-r));
                }
        } else if (allowed) {
                if (j->kind == 0)
                        e->write[j->res][j->verb] = true;
                else if (j->kind == 1)
                        e->claims_all[j->res] = true;
                else
                        e->claims_ns[j->ns][j->res] = true;
                if (reason && str_push_unique(&e->reasons, &e->n_reasons, reason) < 0)
                        d->sar_error = -ENOMEM;
        }
        free(c);
        d->sar_inflight--;
        d->pending--;
        sar_next(d);
}

static void sar_next(struct doctor *d) {
        while (d->sar_inflight < MAX_INFLIGHT && d->next_sar < d->n_sars) {
                size_t k = d->next_sar++;
                const struct sar_job *j = &d->sars[k];
                struct subject_ent *e = d->subjects.v[j->subject];
                _cleanup_(cJSON_Deletep) cJSON *req = NULL;
                _cleanup_free_ char *body = NULL;
                struct sar_call *c;
                int r;

                if (j->kind == 0)
                        req = doctor_sar_request(&e->s, NULL, "resource.k8s.io", write_resources[j->res],
                                                 write_verbs[j->verb]);
                else
                        req = doctor_sar_request(&e->s, j->kind == 2 ? e->claim_ns[j->ns] : NULL,
                                                 "resource.k8s.io", claim_resources[j->res], "create");
                body = req ? cJSON_PrintUnformatted(req) : NULL;
                c = calloc(1, sizeof(*c));
                if (!body || !c) {
                        free(c);
                        d->sar_failed++;
                        d->sar_error = d->sar_error ?: -ENOMEM;
                        continue;
                }
                *c = (struct sar_call){ .d = d, .job = k };
                /* A SubjectAccessReview is a question: resending it is harmless. */
                r = kube_call_start(d->app->client,
                                    &(struct kube_call_params){
                                            .method = "POST",
                                            .path = "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                                            .content_type = "application/json",
                                            .body = body,
                                            .body_len = strlen(body),
                                            .retry = true,
                                    },
                                    on_sar_done, c, NULL);
                if (r < 0) {
                        free(c);
                        d->sar_failed++;
                        d->sar_error = d->sar_error ?: r;
                        continue;
                }
                d->sar_inflight++;
                d->pending++;
        }
}

static int plan_sars(struct doctor *d) {
        size_t n = 0;

        for (size_t i = 0; i < d->subjects.n; i++) {
                struct subject_ent *e = d->subjects.v[i];

                e->role = doctor_subject_role(&e->s, e->cluster_admin, (const char *const *)d->driver_sas,
                                              d->n_driver_sas);
                if (e->role != DOCTOR_ROLE_OTHER)
                        continue;
                n += _RES_WRITE_MAX * N_WRITE_VERBS + _RES_CLAIM_MAX + e->n_claim_ns * _RES_CLAIM_MAX;
                if (e->n_claim_ns > 0 && !(e->claims_ns = calloc(e->n_claim_ns, sizeof(*e->claims_ns))))
                        return -ENOMEM;
        }
        d->sars = calloc(n + 1, sizeof(*d->sars));
        if (!d->sars)
                return -ENOMEM;
        for (size_t i = 0; i < d->subjects.n; i++) {
                struct subject_ent *e = d->subjects.v[i];

                if (e->role != DOCTOR_ROLE_OTHER)
                        continue;
                for (size_t res = 0; res < _RES_WRITE_MAX; res++)
                        for (size_t v = 0; v < N_WRITE_VERBS; v++)
                                d->sars[d->n_sars++] =
                                        (struct sar_job){ .subject = i, .kind = 0, .res = res, .verb = v };
                for (size_t res = 0; res < _RES_CLAIM_MAX; res++) {
                        d->sars[d->n_sars++] = (struct sar_job){ .subject = i, .kind = 1, .res = res };
                        for (size_t k = 0; k < e->n_claim_ns; k++)
                                d->sars[d->n_sars++] =
                                        (struct sar_job){ .subject = i, .kind = 2, .res = res, .ns = k };
                }
        }
        return 0;
}

static void probe_next(struct doctor *d);

struct probe_call {
        struct doctor *d;
        struct dpod *p;
};

static void on_probe_done(int error, enum health_status status, const char *message, void *userdata) {
        struct probe_call *c = userdata;
        struct doctor *d = c->d;

        c->p->probed = true;
        c->p->probe_error = error;
        c->p->probe_status = status;
        c->p->probe_message = message ? strdup(message) : NULL;
        free(c);
        d->probe_inflight--;
        d->pending--;
        probe_next(d);
}

static void probe_next(struct doctor *d) {
        while (d->probe_inflight < MAX_INFLIGHT && d->next_probe < d->n_probes) {
                struct dpod *p = d->dpods.v[d->probes[d->next_probe++]];
                struct health_target t = {
                        .port = p->rec->grpc_probe_port,
                        /* An unset service asks for the server as a whole, as the kubelet does. */
                        .service = (char *)(p->rec->grpc_probe_service ? p->rec->grpc_probe_service : ""),
                };
                struct probe_call *c = calloc(1, sizeof(*c));
                int r;

                if (!c) {
                        p->probed = true;
                        p->probe_error = -ENOMEM;
                        continue;
                }
                *c = (struct probe_call){ .d = d, .p = p };
                r = health_probe_start(d->app->transport, &t, p->rec->pod_ip, PROBE_TIMEOUT_USEC,
                                       on_probe_done, c, NULL);
                if (r < 0) {
                        free(c);
                        p->probed = true;
                        p->probe_error = r;
                        continue;
                }
                d->probe_inflight++;
                d->pending++;
        }
}

static int on_cordoned_pod(struct doctor *d, struct list_call *lc, const cJSON *item) {
        struct cordoned *c = lc->userdata;
        struct pod_rec *p;
        int r = pod_rec_from_json(item, &p);

        if (r < 0)
                return r;
        r = ptr_push(&c->pods, p);
        if (r < 0)
                pod_rec_free(p);
        return r;
}

static int start_phase2(struct doctor *d, struct list_call **ret_lcs, size_t *ret_n) {
        struct list_call *lcs = NULL;
        size_t n_lcs = 0;
        int r;

        /* The ServiceAccounts the driver pods run as may write ResourceSlices. */
        for (size_t i = 0; i < d->dpods.n; i++)
                if (str_push_unique(&d->driver_sas, &d->n_driver_sas, ((struct dpod *)d->dpods.v[i])->sa) <
                    0)
                        return -ENOMEM;
        r = build_groups(d);
        if (r >= 0)
                r = build_drivers(d);
        if (r >= 0)
                r = plan_sars(d);
        if (r < 0)
                return r;

        for (size_t i = 0; i < d->groups.n; i++) {
                struct dgroup *g = d->groups.v[i];
                _cleanup_free_ char *path = NULL, *ens = NULL, *ename = NULL;
                bool used = false;

                for (size_t k = 0; k < d->drivers.n && !used; k++) {
                        const struct driver *dr = d->drivers.v[k];

                        for (size_t j = 0; j < dr->n_groups; j++)
                                used = used || dr->groups[j] == i;
                }
                if (!used || !streq_ptr(g->kind, "DaemonSet"))
                        continue;
                ens = kube_query_escape(g->ns);
                ename = kube_query_escape(g->name);
                if (!ens || !ename ||
                    asprintf(&path, "/apis/apps/v1/namespaces/%s/daemonsets/%s", ens, ename) < 0)
                        return -ENOMEM;
                r = kube_get(d->app->client, path, on_ds_done, g, NULL);
                if (r < 0)
                        return r;
                d->pending++;
        }

        sar_next(d);

        /* gRPC health of the driver pods of the drivers, in scope, that declare a grpc liveness probe. */
        for (size_t k = 0; k < d->drivers.n; k++) {
                const struct driver *dr = d->drivers.v[k];

                for (size_t j = 0; j < dr->n_groups; j++) {
                        const struct dgroup *g = d->groups.v[dr->groups[j]];

                        for (size_t q = 0; q < g->n_pods; q++) {
                                const struct dpod *p = d->dpods.v[g->pods[q]];
                                bool dup = false;

                                if (!dpod_running(p) || !p->rec->pod_ip || p->rec->grpc_probe_port <= 0 ||
                                    !in_scope(d, p->rec->node_name))
                                        continue;
                                for (size_t x = 0; x < d->n_probes; x++)
                                        dup = dup || d->probes[x] == g->pods[q];
                                if (!dup && idx_push(&d->probes, &d->n_probes, g->pods[q]) < 0)
                                        return -ENOMEM;
                        }
                }
        }
        probe_next(d);

        /* The pods of cordoned nodes, for the claims on them. */
        for (size_t i = 0; i < d->nodes.n; i++) {
                const struct node_rec *n = d->nodes.v[i];

                if (n->unschedulable && in_scope(d, n->name))
                        n_lcs++;
        }
        lcs = calloc(n_lcs + 1, sizeof(*lcs));
        if (!lcs)
                return -ENOMEM;
        *ret_lcs = lcs;
        *ret_n = 0;
        for (size_t i = 0; i < d->nodes.n; i++) {
                const struct node_rec *n = d->nodes.v[i];
                _cleanup_free_ char *fs = NULL, *efs = NULL, *path = NULL;
                struct cordoned *c;

                if (!n->unschedulable || !in_scope(d, n->name))
                        continue;
                c = calloc(1, sizeof(*c));
                if (!c || ptr_push(&d->cordoned, c) < 0) {
                        free(c);
                        return -ENOMEM;
                }
                c->node = n;
                fs = strf("spec.nodeName=%s", n->name);
                efs = fs ? kube_query_escape(fs) : NULL;
                path = efs ? strf("/api/v1/pods?fieldSelector=%s", efs) : NULL;
                if (!path)
                        return -ENOMEM;
                r = start_list(d, &lcs[*ret_n], "list pods of a cordoned node", false, path,
                               on_cordoned_pod);
                if (r < 0)
                        return r;
                lcs[(*ret_n)++].userdata = c;
        }
        return 0;
}

/* ---- the findings ---- */

static int list_error_finding(struct doctor_report *rep, enum doctor_section s, const char *check,
                              const struct list_call *lc, const char *fix) {
        struct doctor_finding *f = doctor_report_add(
                rep, s, DOCTOR_WARN, check, "", "cannot %s: %s: not checked", lc->what, strna(lc->message));

        if (!f || doctor_finding_set_fix(f, "%s", fix) < 0)
                return -ENOMEM;
        return 0;
}

#define RBAC_FIX                                                                                \
        "grant doctor's identity the ClusterRole of deploy/doctor (it lists bindings and asks " \
        "SubjectAccessReviews)"

static int report_permissions(struct doctor *d, struct doctor_report *rep) {
        size_t asked = 0, exempt[_DOCTOR_SUBJECT_ROLE_MAX] = {}, writers = 0, wide = 0, namespaced = 0;
        struct doctor_finding *f;

        if (d->lc_crbs.error < 0 || d->lc_rbs.error < 0)
                return list_error_finding(rep, DOCTOR_SECTION_PERMISSIONS, "dra-api-writers",
                                          d->lc_crbs.error < 0 ? &d->lc_crbs : &d->lc_rbs, RBAC_FIX);
        if (d->sar_failed > 0) {
                f = doctor_report_add(
                        rep, DOCTOR_SECTION_PERMISSIONS, DOCTOR_WARN, "dra-api-writers", "",
                        "%zu of %zu SubjectAccessReviews failed (%s): who may write DeviceClasses "
                        "and ResourceSlices is not fully known",
                        d->sar_failed, d->n_sars, strna(d->sar_message));
                if (!f || doctor_finding_set_fix(f, "%s", RBAC_FIX) < 0)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < d->subjects.n; i++) {
                struct subject_ent *e = d->subjects.v[i];
                char what[256] = "";

                exempt[e->role]++;
                if (e->role != DOCTOR_ROLE_OTHER)
                        continue;
                asked++;
                /* "create, update deviceclasses; create, update, patch, delete resourceslices" */
                for (size_t res = 0; res < _RES_WRITE_MAX; res++) {
                        bool first = true;

                        for (size_t v = 0; v < N_WRITE_VERBS; v++) {
                                if (!e->write[res][v])
                                        continue;
                                strcat(what, first ? (what[0] ? "; " : "") : ", ");
                                strcat(what, write_verbs[v]);
                                first = false;
                        }
                        if (!first) {
                                strcat(what, " ");
                                strcat(what, write_resources[res]);
                        }
                }
                if (!what[0])
                        continue;
                writers++;
                f = doctor_report_add(
                        rep, DOCTOR_SECTION_PERMISSIONS, DOCTOR_FAIL, "dra-api-writers", e->label,
                        "may %s: only cluster admins and DRA drivers should write DeviceClasses and "
                        "ResourceSlices (the API server: %s)",
                        what, e->n_reasons ? e->reasons[0] : "allowed");
                if (!f)
                        return -ENOMEM;
                /* Name the bindings the API server named; all of the subject's if none. */
                for (int pass = 0; pass < 2; pass++) {
                        size_t named = 0;

                        for (size_t b = 0; b < e->n_bindings; b++) {
                                const struct binding *bd = d->bindings.v[e->bindings[b]];
                                bool hit = pass == 1;

                                for (size_t k = 0; k < e->n_reasons && !hit; k++)
                                        hit = strstr(e->reasons[k], bd->rbac);
                                if (!hit)
                                        continue;
                                if (doctor_finding_add_object(f, "%s", bd->label) < 0)
                                        return -ENOMEM;
                                named++;
                        }
                        if (named > 0)
                                break;
                }
                if (doctor_finding_set_fix(
                            f,
                            "remove %s from these bindings, or drop create/update/patch/delete on "
                            "deviceclasses and resourceslices (resource.k8s.io) from the roles they "
                            "grant; if it is a DRA driver, run its pods as this ServiceAccount",
                            e->label) < 0)
                        return -ENOMEM;
        }
        if (writers == 0 && d->sar_failed == 0) {
                f = doctor_report_add(
                        rep, DOCTOR_SECTION_PERMISSIONS, DOCTOR_PASS, "dra-api-writers", "",
                        "of the %zu subjects of %zu (Cluster)RoleBindings, %zu are cluster admins, %zu "
                        "the control plane, %zu DRA driver ServiceAccounts; the API server says none "
                        "of the %zu others may write DeviceClasses or ResourceSlices",
                        d->subjects.n, d->bindings.n, exempt[DOCTOR_ROLE_ADMIN],
                        exempt[DOCTOR_ROLE_CONTROL_PLANE], exempt[DOCTOR_ROLE_DRIVER], asked);
                if (!f)
                        return -ENOMEM;
                /* The identities DRA driver pods run as (allowed to write ResourceSlices). */
                for (size_t i = 0; i < d->n_driver_sas; i++)
                        if (doctor_finding_add_object(f, "ServiceAccount %s (runs DRA driver pods)",
                                                      d->driver_sas[i]) < 0)
                                return -ENOMEM;
        }

        /* Who may use claims: namespaced, as the guide expects. */
        for (size_t i = 0; i < d->subjects.n; i++) {
                const struct subject_ent *e = d->subjects.v[i];

                if (e->role != DOCTOR_ROLE_OTHER)
                        continue;
                if (e->claims_all[RES_CLAIMS] || e->claims_all[RES_CLAIM_TEMPLATES]) {
                        wide++;
                        f = doctor_report_add(
                                rep, DOCTOR_SECTION_PERMISSIONS, DOCTOR_WARN, "claim-users", e->label,
                                "may create %s%s%s in every namespace: ResourceClaims and "
                                "ResourceClaimTemplates are namespaced, and the guide expects them "
                                "granted per namespace",
                                e->claims_all[RES_CLAIMS] ? "ResourceClaims" : "",
                                e->claims_all[RES_CLAIMS] && e->claims_all[RES_CLAIM_TEMPLATES] ? " and "
                                                                                                : "",
                                e->claims_all[RES_CLAIM_TEMPLATES] ? "ResourceClaimTemplates" : "");
                        if (!f)
                                return -ENOMEM;
                        for (size_t b = 0; b < e->n_bindings; b++) {
                                const struct binding *bd = d->bindings.v[e->bindings[b]];

                                if (bd->cluster && doctor_finding_add_object(f, "%s", bd->label) < 0)
                                        return -ENOMEM;
                        }
                        if (doctor_finding_set_fix(f,
                                                   "bind %s with RoleBindings in the namespaces where it "
                                                   "deploys workloads instead of a ClusterRoleBinding",
                                                   e->label) < 0)
                                return -ENOMEM;
                        continue;
                }
                for (size_t k = 0; e->claims_ns && k < e->n_claim_ns; k++)
                        if (e->claims_ns[k][RES_CLAIMS] || e->claims_ns[k][RES_CLAIM_TEMPLATES])
                                namespaced++;
        }
        if (wide == 0 && d->sar_failed == 0) {
                if (namespaced == 0)
                        f = doctor_report_add(
                                rep, DOCTOR_SECTION_PERMISSIONS, DOCTOR_PASS, "claim-users", "",
                                "besides cluster admins and the control plane nobody may create "
                                "ResourceClaims or ResourceClaimTemplates, in any namespace");
                else
                        f = doctor_report_add(
                                rep, DOCTOR_SECTION_PERMISSIONS, DOCTOR_PASS, "claim-users", "",
                                "%zu RoleBinding grants let subjects create ResourceClaims or "
                                "ResourceClaimTemplates, each in its own namespace, as the guide "
                                "expects; none in every namespace",
                                namespaced);
                if (!f)
                        return -ENOMEM;
                for (size_t i = 0; i < d->subjects.n; i++) {
                        const struct subject_ent *e = d->subjects.v[i];

                        for (size_t k = 0; e->role == DOCTOR_ROLE_OTHER && e->claims_ns && k < e->n_claim_ns;
                             k++)
                                if ((e->claims_ns[k][RES_CLAIMS] || e->claims_ns[k][RES_CLAIM_TEMPLATES]) &&
                                    doctor_finding_add_object(f, "%s in namespace %s", e->label,
                                                              e->claim_ns[k]) < 0)
                                        return -ENOMEM;
                }
        }
        return 0;
}

static int report_driver(struct doctor *d, struct doctor_report *rep, const struct driver *dr) {
        _cleanup_free_ char *subject = NULL;
        const struct dgroup *ds_group = NULL;
        struct doctor_finding *f;
        enum doctor_rollout rollout = DOCTOR_ROLLOUT_NO_SURGE;
        bool have_ds = false;

        subject = strf("driver %s", dr->name);
        if (!subject)
                return -ENOMEM;
        if (dr->n_nodes == 0) {
                f = doctor_report_add(
                        rep, DOCTOR_SECTION_DRIVER, DOCTOR_PASS, "driver-daemonset", subject,
                        "publishes no node-local ResourceSlices (%zu network-attached or all-node "
                        "slices): no kubelet plugin to check",
                        dr->n_slices);
                return f ? 0 : -ENOMEM;
        }

        /* Its deployment: a DaemonSet, found through its pods. */
        if (dr->n_groups == 0) {
                f = doctor_report_add(
                        rep, DOCTOR_SECTION_DRIVER, DOCTOR_WARN, "driver-daemonset", subject,
                        "no DRA driver pod found on its %zu nodes (by the driver selectors): its "
                        "deployment, liveness probe, upgrade strategy and drain guard are not checked",
                        dr->n_nodes);
                if (!f || doctor_finding_set_fix(
                                  f, "pass --driver-selector with the labels of its pods; if it does "
                                     "not run as a pod, make sure whatever runs it restarts it on "
                                     "failed gRPC health checks") < 0)
                        return -ENOMEM;
        }
        for (size_t j = 0; j < dr->n_groups; j++) {
                const struct dgroup *g = d->groups.v[dr->groups[j]];

                if (!streq_ptr(g->kind, "DaemonSet")) {
                        f = doctor_report_add(rep, DOCTOR_SECTION_DRIVER, DOCTOR_WARN, "driver-daemonset",
                                              subject, "its pods in %s are not run by a DaemonSet (%s%s%s)",
                                              g->ns, g->kind ? g->kind : "no controller", g->kind ? " " : "",
                                              g->kind ? g->name : "");
                        if (!f ||
                            doctor_finding_add_object(f, "%s %s/%s", g->kind ? g->kind : "Pod", g->ns,
                                                      g->name) < 0 ||
                            doctor_finding_set_fix(
                                    f, "deploy the driver as a DaemonSet on the nodes with its devices, "
                                       "as the guide describes") < 0)
                                return -ENOMEM;
                        continue;
                }
                if (g->ds_error < 0) {
                        f = doctor_report_add(rep, DOCTOR_SECTION_DRIVER, DOCTOR_WARN, "driver-daemonset",
                                              subject, "cannot read DaemonSet %s/%s: %s", g->ns, g->name,
                                              strna(g->ds_message));
                        if (!f || doctor_finding_add_object(f, "DaemonSet %s/%s", g->ns, g->name) < 0 ||
                            doctor_finding_set_fix(f, "%s", RBAC_FIX) < 0)
                                return -ENOMEM;
                        continue;
                }
                f = doctor_report_add(rep, DOCTOR_SECTION_DRIVER, DOCTOR_PASS, "driver-daemonset", subject,
                                      "DaemonSet %s/%s: %zu pods, slices on %zu nodes", g->ns, g->name,
                                      g->n_pods, dr->n_nodes);
                if (!f || doctor_finding_add_object(f, "DaemonSet %s/%s", g->ns, g->name) < 0)
                        return -ENOMEM;
                if (!ds_group)
                        ds_group = g;
        }

        for (size_t j = 0; j < dr->n_groups; j++) {
                const struct dgroup *g = d->groups.v[dr->groups[j]];
                const cJSON *c, *containers;
                enum doctor_probe best = DOCTOR_PROBE_NONE;
                const char *best_container = NULL, *surge;
                char list[512] = "";

                if (!g->ds)
                        continue;
                have_ds = true;
                containers = json_path(g->ds, "spec.template.spec.containers");

                /* Liveness probe: gRPC preferred. */
                cJSON_ArrayForEach(c, containers) {
                        enum doctor_probe p = doctor_container_liveness(c);

                        if (p != DOCTOR_PROBE_NONE &&
                            (best == DOCTOR_PROBE_NONE || p == DOCTOR_PROBE_GRPC) &&
                            best != DOCTOR_PROBE_GRPC) {
                                best = p;
                                best_container = json_str(c, "name");
                        }
                }
                if (best == DOCTOR_PROBE_GRPC)
                        f = doctor_report_add(rep, DOCTOR_SECTION_LIVENESS, DOCTOR_PASS, "liveness-probe",
                                              subject, "container %s has a gRPC liveness probe",
                                              strna(best_container));
                else if (best != DOCTOR_PROBE_NONE) {
                        f = doctor_report_add(rep, DOCTOR_SECTION_LIVENESS, DOCTOR_WARN, "liveness-probe",
                                              subject,
                                              "container %s has a liveness probe, but of type %s, not gRPC",
                                              strna(best_container), doctor_probe_to_string(best));
                        if (f &&
                            doctor_finding_set_fix(f, "probe the driver's gRPC health service instead "
                                                      "(livenessProbe.grpc with its port and service)") < 0)
                                return -ENOMEM;
                } else {
                        f = doctor_report_add(
                                rep, DOCTOR_SECTION_LIVENESS, DOCTOR_FAIL, "liveness-probe", subject,
                                "no container of DaemonSet %s/%s has a liveness probe: a hung driver "
                                "is never restarted",
                                g->ns, g->name);
                        if (f &&
                            doctor_finding_set_fix(f, "add livenessProbe.grpc (the port and service of the "
                                                      "driver's gRPC health server, e.g. 51515/liveness) to "
                                                      "the driver container") < 0)
                                return -ENOMEM;
                }
                if (!f || doctor_finding_add_object(f, "DaemonSet %s/%s", g->ns, g->name) < 0)
                        return -ENOMEM;

                /* Seamless upgrade: old and new plugin side by side during a rollout. */
                rollout = doctor_daemonset_rollout(g->ds, &surge);
                if (rollout == DOCTOR_ROLLOUT_SURGE)
                        f = doctor_report_add(rep, DOCTOR_SECTION_SEAMLESS_UPGRADE, DOCTOR_PASS,
                                              "rollout-strategy", subject,
                                              "RollingUpdate with maxSurge %s: the new driver pod starts "
                                              "before the old one stops",
                                              surge);
                else {
                        f = doctor_report_add(
                                rep, DOCTOR_SECTION_SEAMLESS_UPGRADE, DOCTOR_WARN, "rollout-strategy",
                                subject,
                                "%s: every driver update leaves each node without its driver for a "
                                "while (pods with claims cannot start, cleanup waits)",
                                doctor_rollout_to_string(rollout));
                        if (f && doctor_finding_set_fix(
                                         f, "if the driver supports seamless upgrades (kubeletplugin "
                                            "RollingUpdate), set updateStrategy.rollingUpdate "
                                            "maxSurge: 1, maxUnavailable: 0") < 0)
                                return -ENOMEM;
                }
                if (!f || doctor_finding_add_object(f, "DaemonSet %s/%s", g->ns, g->name) < 0)
                        return -ENOMEM;

                /* The drainer guard as preStop: other drain tools cannot stop it too early. */
                cJSON_ArrayForEach(c, containers) if (doctor_container_has_guard(c)) {
                        const char *name = json_str(c, "name");

                        if (strlen(list) + strlen(strna(name)) + 3 < sizeof list) {
                                strcat(list, list[0] ? ", " : "");
                                strcat(list, strna(name));
                        }
                }
                ((struct dgroup *)g)->guard = list[0] != 0;
                if (list[0])
                        f = doctor_report_add(
                                rep, DOCTOR_SECTION_DRAIN, DOCTOR_PASS, "drain-guard", subject,
                                "the drainer guard is the preStop hook of %s: the driver waits until "
                                "the node's claims are released",
                                list);
                else {
                        f = doctor_report_add(
                                rep, DOCTOR_SECTION_DRAIN, DOCTOR_WARN, "drain-guard", subject,
                                "no drainer guard as preStop hook: a drain by another tool (cluster "
                                "autoscaler, Karpenter, a script that evicts DaemonSet pods) may stop "
                                "the driver before the pods whose devices it must unprepare");
                        if (f && doctor_finding_set_fix(
                                         f, "add 'drainer guard' as the preStop hook of the driver "
                                            "container (deploy/driver-guard), or drain only with "
                                            "drainer") < 0)
                                return -ENOMEM;
                }
                if (!f || doctor_finding_add_object(f, "DaemonSet %s/%s", g->ns, g->name) < 0)
                        return -ENOMEM;
        }

        /* Its pods now: Running and Ready, and SERVING where they declare a gRPC liveness port. */
        if (dr->n_groups > 0) {
                size_t total = 0, probed = 0, bad = 0, unknown = 0;
                _cleanup_free_ char *first = NULL;

                f = doctor_report_add(rep, DOCTOR_SECTION_LIVENESS, DOCTOR_PASS, "driver-health", subject,
                                      "%s", "");
                if (!f)
                        return -ENOMEM;
                for (size_t j = 0; j < dr->n_groups; j++) {
                        const struct dgroup *g = d->groups.v[dr->groups[j]];

                        for (size_t q = 0; q < g->n_pods; q++) {
                                const struct dpod *p = d->dpods.v[g->pods[q]];
                                _cleanup_free_ char *why = NULL;
                                bool warn = false;

                                if (!in_scope(d, p->rec->node_name) || p->rec->deleting)
                                        continue;
                                total++;
                                if (p->rec->phase != POD_RUNNING || !p->rec->ready)
                                        why = strf("%s%s", strna(pod_phase_to_string(p->rec->phase)),
                                                   p->rec->ready ? "" : ", not Ready");
                                else if (p->probed && p->probe_error == -ECONNREFUSED)
                                        why = strf("gRPC health %s:%d refused the connection",
                                                   p->rec->pod_ip, p->rec->grpc_probe_port);
                                else if (p->probed && p->probe_error < 0) {
                                        warn = true;
                                        why = strf("gRPC health %s:%d not reachable from here (%s)",
                                                   p->rec->pod_ip, p->rec->grpc_probe_port,
                                                   p->probe_message ? p->probe_message
                                                                    : strerror(-p->probe_error));
                                } else if (p->probed && p->probe_status != HEALTH_SERVING)
                                        why = strf("gRPC health %s",
                                                   strna(health_status_to_string(p->probe_status)));
                                probed += p->probed && p->probe_error == 0 &&
                                          p->probe_status == HEALTH_SERVING;
                                if (!why)
                                        continue;
                                if (warn)
                                        unknown++;
                                else
                                        bad++;
                                if (!first)
                                        first = strdup(why);
                                if (doctor_finding_add_object(f, "Pod %s/%s on %s: %s", p->rec->ns,
                                                              p->rec->name, strna(p->rec->node_name),
                                                              why) < 0)
                                        return -ENOMEM;
                        }
                }
                free(f->message);
                if (bad > 0) {
                        f->status = DOCTOR_FAIL;
                        f->message = strf(
                                "%zu of %zu driver pods are not healthy (%s%s): pods with claims cannot "
                                "start there and finished ones are not cleaned up",
                                bad, total, strna(first), bad > 1 ? ", ..." : "");
                        if (doctor_finding_set_fix(
                                    f, "look at those pods (kubectl describe, logs); the liveness probe "
                                       "should restart a hung driver") < 0)
                                return -ENOMEM;
                } else if (unknown > 0) {
                        f->status = DOCTOR_WARN;
                        f->message =
                                strf("%zu driver pods are Running and Ready, but %zu could not be probed "
                                     "(%s): doctor runs outside the pod network?",
                                     total, unknown, strna(first));
                        if (doctor_finding_set_fix(
                                    f, "run doctor where pod IPs are reachable (a pod, a node) to "
                                       "probe the drivers' gRPC health") < 0)
                                return -ENOMEM;
                } else
                        f->message = strf(
                                "%zu driver pods%s%s Running and Ready; %zu answer SERVING on their gRPC "
                                "liveness port%s",
                                total, d->o->node ? " on " : "", d->o->node ? d->o->node : "", probed,
                                probed < total ? " (the others declare none)" : "");
                if (!f->message)
                        return -ENOMEM;
                if (doctor_finding_add_detail(f, "pods", (double)total) < 0 ||
                    doctor_finding_add_detail(f, "serving", (double)probed) < 0)
                        return -ENOMEM;
        }

        /* Seamless upgrade needs kubelet 1.33+ on every node where the driver runs. */
        {
                char **nodes = NULL;
                size_t n_nodes = 0, n_old = 0, n_unknown = 0;
                const char *first_ok = NULL;

                for (size_t j = 0; j < dr->n_nodes; j++)
                        if (in_scope(d, dr->nodes[j]) && str_push_unique(&nodes, &n_nodes, dr->nodes[j]) < 0)
                                goto oom;
                for (size_t j = 0; j < dr->n_groups; j++) {
                        const struct dgroup *g = d->groups.v[dr->groups[j]];

                        for (size_t q = 0; q < g->n_pods; q++) {
                                const char *nn = ((struct dpod *)d->dpods.v[g->pods[q]])->rec->node_name;

                                if (nn && in_scope(d, nn) && str_push_unique(&nodes, &n_nodes, nn) < 0)
                                        goto oom;
                        }
                }
                f = doctor_report_add(rep, DOCTOR_SECTION_SEAMLESS_UPGRADE, DOCTOR_PASS, "kubelet-versions",
                                      subject, "%s", "");
                if (!f)
                        goto oom;
                for (size_t j = 0; j < n_nodes; j++) {
                        const struct node_rec *n = node_find(d, nodes[j]);
                        const char *v = n ? n->kubelet_version : NULL;
                        int k = doctor_kubelet_seamless(v);

                        if (k > 0) {
                                first_ok = first_ok ? first_ok : v;
                                continue;
                        }
                        if (k == 0)
                                n_old++;
                        else
                                n_unknown++;
                        if (doctor_finding_add_object(f, "Node %s (kubelet %s)", nodes[j],
                                                      v ? v : "unknown") < 0)
                                goto oom;
                }
                free(f->message);
                f->message = NULL;
                if (n_old > 0 && have_ds && rollout == DOCTOR_ROLLOUT_SURGE) {
                        f->status = DOCTOR_FAIL;
                        f->message =
                                strf("%zu of %zu nodes of the driver run a kubelet older than 1.33, yet its "
                                     "DaemonSet surges: two instances of the plugin on such a kubelet break "
                                     "the driver during every rollout",
                                     n_old, n_nodes);
                } else if (n_old > 0) {
                        f->status = DOCTOR_WARN;
                        f->message =
                                strf("a mixed cluster: %zu of %zu nodes of the driver run a kubelet older "
                                     "than 1.33, where seamless driver upgrades are not available",
                                     n_old, n_nodes);
                } else if (n_unknown > 0) {
                        f->status = DOCTOR_WARN;
                        f->message = strf("%zu of %zu nodes of the driver report a kubelet version doctor "
                                          "cannot read",
                                          n_unknown, n_nodes);
                } else
                        f->message =
                                strf("all %zu nodes of the driver run kubelet 1.33 or newer (%s): seamless "
                                     "upgrades are possible",
                                     n_nodes, strna(first_ok));
                if (!f->message)
                        goto oom;
                if (n_old > 0 &&
                    doctor_finding_set_fix(f, "upgrade the kubelets of those nodes to 1.33 or newer%s",
                                           rollout == DOCTOR_ROLLOUT_SURGE && have_ds
                                                   ? ", or roll the driver out without maxSurge until then"
                                                   : " before relying on seamless driver upgrades") < 0)
                        goto oom;
                strv_free_n(nodes, n_nodes);
                return 0;
        oom:
                strv_free_n(nodes, n_nodes);
                return -ENOMEM;
        }
}

static bool node_has_dra(struct doctor *d, const char *node) {
        for (size_t k = 0; k < d->drivers.n; k++) {
                const struct driver *dr = d->drivers.v[k];

                for (size_t j = 0; j < dr->n_nodes; j++)
                        if (streq(dr->nodes[j], node))
                                return true;
        }
        return false;
}

static int report_drain(struct doctor *d, struct doctor_report *rep) {
        struct doctor_finding *uncovered = NULL, *f;
        size_t n_dra = 0, by_serve = 0, by_guard = 0, n_unfinished = 0, n_cordoned_claims = 0;
        const struct dpod *cluster_mode = NULL;

        for (size_t i = 0; i < d->drainer.n; i++) {
                const struct dpod *p = d->drainer.v[i];

                if (dpod_running(p) && strstr(p->text, "serve") && strstr(p->text, "--all-nodes"))
                        cluster_mode = p;
        }
        for (size_t i = 0; i < d->nodes.n; i++) {
                const struct node_rec *n = d->nodes.v[i];
                bool serve = false, guard = true, any_driver = false;

                if (!in_scope(d, n->name) || !node_has_dra(d, n->name))
                        continue;
                n_dra++;
                for (size_t k = 0; k < d->drainer.n && !serve; k++) {
                        const struct dpod *p = d->drainer.v[k];

                        serve = dpod_running(p) && streq_ptr(p->rec->node_name, n->name) &&
                                strstr(p->text, "serve");
                }
                for (size_t k = 0; k < d->groups.n; k++) {
                        const struct dgroup *g = d->groups.v[k];

                        if (!group_on_node(d, g, n->name))
                                continue;
                        any_driver = true;
                        guard = guard && g->guard;
                }
                guard = guard && any_driver;
                if (serve || cluster_mode) {
                        by_serve++;
                        continue;
                }
                if (guard) {
                        by_guard++;
                        continue;
                }
                if (!uncovered) {
                        uncovered = doctor_report_add(rep, DOCTOR_SECTION_DRAIN, DOCTOR_WARN,
                                                      "drain-coverage", "", "%s", "");
                        if (!uncovered)
                                return -ENOMEM;
                }
                if (doctor_finding_add_object(uncovered, "Node %s", n->name) < 0)
                        return -ENOMEM;
        }
        if (uncovered) {
                free(uncovered->subject);
                free(uncovered->message);
                uncovered->subject = NULL;
                uncovered->subject = strf("%zu nodes", uncovered->n_objects);
                uncovered->message =
                        strf("%zu of %zu nodes with DRA devices have neither a drainer serve "
                             "daemon nor the drainer guard on all their drivers: a drain there can "
                             "stop the driver before the claim holders",
                             uncovered->n_objects, n_dra);
                if (!uncovered->subject || !uncovered->message ||
                    doctor_finding_set_fix(uncovered,
                                           "run 'drainer serve' on them (deploy/, or deploy/cluster-mode), "
                                           "or install the drainer guard in the driver DaemonSets "
                                           "(deploy/driver-guard); a drainer under systemd on the host "
                                           "is invisible to doctor") < 0)
                        return -ENOMEM;
        }
        if (n_dra > 0 && (by_serve > 0 || by_guard > 0)) {
                f = doctor_report_add(
                        rep, DOCTOR_SECTION_DRAIN, DOCTOR_PASS, "drain-coverage", "",
                        "%zu of %zu nodes with DRA devices are covered: %zu by drainer serve%s, %zu by "
                        "the drainer guard",
                        by_serve + by_guard, n_dra, by_serve, cluster_mode ? " (cluster mode)" : "",
                        by_guard);
                if (!f || (cluster_mode && doctor_finding_add_object(f, "Pod %s/%s", cluster_mode->rec->ns,
                                                                     cluster_mode->rec->name) < 0))
                        return -ENOMEM;
        }

        for (size_t i = 0; i < d->nodes.n; i++) {
                const struct node_rec *n = d->nodes.v[i];
                const char *state = kv_get(n->annotations, n->n_annotations, "drainer.io/state");
                const char *req = kv_get(n->annotations, n->n_annotations, "drainer.io/request");
                const char *since = kv_get(n->annotations, n->n_annotations, "drainer.io/state-since");
                const char *msg = kv_get(n->annotations, n->n_annotations, "drainer.io/message");

                if (!in_scope(d, n->name) || n->n_annotations == 0)
                        continue;
                n_unfinished++;
                f = doctor_report_add(rep, DOCTOR_SECTION_DRAIN, DOCTOR_WARN, "unfinished-drain", n->name,
                                      "drainer state on the node: %s%s%s%s%s%s%s (%s)",
                                      state ? "phase " : "", state ? state : "", since ? " since " : "",
                                      strempty(since), req ? (state ? ", request " : "request ") : "",
                                      strempty(req), msg ? "" : "",
                                      n->unschedulable ? "cordoned" : "schedulable");
                if (!f || doctor_finding_add_object(f, "Node %s", n->name) < 0 ||
                    (msg && doctor_finding_add_object(f, "drainer.io/message: %s", msg) < 0) ||
                    doctor_finding_set_fix(
                            f,
                            "finish it ('drainer drain %s' resumes) or undo it ('drainer uncordon "
                            "%s'); if a drainer serve daemon works on it, let it",
                            n->name, n->name) < 0)
                        return -ENOMEM;
        }
        if (n_unfinished == 0) {
                f = doctor_report_add(rep, DOCTOR_SECTION_DRAIN, DOCTOR_PASS, "unfinished-drain", "",
                                      "no node%s%s holds drainer state of an unfinished drain",
                                      d->o->node ? " " : "", d->o->node ? d->o->node : "");
                if (!f)
                        return -ENOMEM;
        }

        for (size_t i = 0; i < d->cordoned.n; i++) {
                const struct cordoned *c = d->cordoned.v[i];
                const struct node_rec *n = c->node;
                size_t held = 0;

                if (kv_get(n->annotations, n->n_annotations, "drainer.io/state"))
                        continue; /* drainer is on it: unfinished-drain says so */
                if (c->error < 0) {
                        f = doctor_report_add(rep, DOCTOR_SECTION_DRAIN, DOCTOR_WARN, "cordoned-with-claims",
                                              n->name,
                                              "cordoned; cannot list its pods, claims on it not checked");
                        if (!f)
                                return -ENOMEM;
                        continue;
                }
                f = NULL;
                for (size_t k = 0; k < d->claims.n; k++) {
                        const struct claim_rec *cl = d->claims.v[k];

                        if (claim_on_node(cl, n->name, (const struct pod_rec *const *)c->pods.v, c->pods.n,
                                          (const struct slice_rec *const *)d->slices.v,
                                          d->slices.n) == CLAIM_NOT_ON_NODE)
                                continue;
                        if (!f) {
                                f = doctor_report_add(rep, DOCTOR_SECTION_DRAIN, DOCTOR_WARN,
                                                      "cordoned-with-claims", n->name, "%s", "");
                                if (!f || doctor_finding_add_object(f, "Node %s", n->name) < 0)
                                        return -ENOMEM;
                        }
                        held++;
                        if (doctor_finding_add_object(f, "ResourceClaim %s/%s", cl->ns, cl->name) < 0)
                                return -ENOMEM;
                }
                if (!f)
                        continue;
                n_cordoned_claims++;
                free(f->message);
                f->message =
                        strf("cordoned with %zu ResourceClaims still on it: a drain tool that stops the DRA "
                             "driver now leaves their pods Terminating with devices never freed",
                             held);
                if (!f->message ||
                    doctor_finding_set_fix(
                            f,
                            "drain it with 'drainer drain %s' (claim holders first, the driver "
                            "last), or uncordon it",
                            n->name) < 0)
                        return -ENOMEM;
        }
        if (n_cordoned_claims == 0) {
                f = doctor_report_add(
                        rep, DOCTOR_SECTION_DRAIN, DOCTOR_PASS, "cordoned-with-claims", "",
                        "%zu cordoned nodes%s%s, none with ResourceClaims still on it outside a "
                        "drainer drain",
                        d->cordoned.n, d->o->node ? " among " : "", d->o->node ? d->o->node : "");
                if (!f)
                        return -ENOMEM;
        }
        return 0;
}

static int report_tuning(struct doctor *d, struct doctor_report *rep) {
        static const char *const components[] = { "kube-controller-manager", "kube-scheduler" };
        int r;

        for (size_t i = 0; i < ELEMENTSOF(components); i++) {
                bool seen = false;

                for (size_t k = 0; k < d->cps.n; k++) {
                        const struct cp_pod *c = d->cps.v[k];

                        if (!streq(c->component, components[i]))
                                continue;
                        seen = true;
                        if (c->error < 0) {
                                struct doctor_finding *f = doctor_report_add(
                                        rep, DOCTOR_SECTION_TUNING, DOCTOR_WARN, "client-qps", components[i],
                                        "%s: cannot read --kube-api-qps/--kube-api-burst from its command "
                                        "line",
                                        c->ns_name);

                                if (!f || doctor_finding_add_object(f, "Pod %s", c->ns_name) < 0)
                                        return -ENOMEM;
                                continue;
                        }
                        r = doctor_report_client_qps(rep, components[i], c->ns_name, &c->conn, d->nodes.n,
                                                     d->claims.n, d->o->prometheus);
                        if (r < 0)
                                return r;
                }
                if (seen)
                        continue;
                if (d->lc_system.error < 0 && d->lc_system.error != -ECANCELED) {
                        r = list_error_finding(rep, DOCTOR_SECTION_TUNING, "client-qps", &d->lc_system,
                                               RBAC_FIX);
                        if (r < 0)
                                return r;
                        break;
                }
                r = doctor_report_client_qps(rep, components[i], NULL, NULL, d->nodes.n, d->claims.n,
                                             d->o->prometheus);
                if (r < 0)
                        return r;
        }
        if (d->o->prometheus) {
                r = doctor_report_prometheus(rep, d->o->prometheus, &d->prom);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int cmp_driver(const void *a, const void *b) {
        return strcmp((*(const struct driver *const *)a)->name, (*(const struct driver *const *)b)->name);
}

static int build_report(struct doctor *d, struct doctor_report *rep) {
        int r;

        if (d->drivers.n > 1)
                qsort(d->drivers.v, d->drivers.n, sizeof(void *), cmp_driver);
        r = report_permissions(d, rep);
        for (size_t i = 0; r >= 0 && i < d->drivers.n; i++)
                r = report_driver(d, rep, d->drivers.v[i]);
        if (r >= 0 && d->drivers.n == 0) {
                struct doctor_finding *f =
                        doctor_report_add(rep, DOCTOR_SECTION_DRIVER, DOCTOR_PASS, "driver-daemonset", "",
                                          "no ResourceSlice names a DRA driver: nothing "
                                          "to check");

                r = f ? 0 : -ENOMEM;
        }
        if (r >= 0)
                r = report_drain(d, rep);
        if (r >= 0)
                r = report_tuning(d, rep);
        if (r >= 0)
                doctor_report_sort(rep);
        return r;
}

static int print_report(struct doctor *d, const struct doctor_report *rep, enum output_format fmt) {
        if (fmt == OUTPUT_JSON) {
                _cleanup_(cJSON_Deletep) cJSON *root = doctor_report_to_json(rep);
                _cleanup_free_ char *out = NULL;
                cJSON *cl, *drv;

                if (!root)
                        return log_oom();
                cl = cJSON_AddObjectToObject(root, "cluster");
                if (!cl)
                        return log_oom();
                cJSON_AddNumberToObject(cl, "nodes", (double)d->nodes.n);
                cJSON_AddNumberToObject(cl, "resourceClaims", (double)d->claims.n);
                drv = cJSON_AddArrayToObject(cl, "drivers");
                for (size_t i = 0; drv && i < d->drivers.n; i++)
                        cJSON_AddItemToArray(drv,
                                             cJSON_CreateString(((struct driver *)d->drivers.v[i])->name));
                if (d->o->node)
                        cJSON_AddStringToObject(cl, "node", d->o->node);
                else
                        cJSON_AddNullToObject(cl, "node");
                if (d->o->prometheus)
                        cJSON_AddStringToObject(cl, "prometheus", d->o->prometheus);
                else
                        cJSON_AddNullToObject(cl, "prometheus");
                out = cJSON_Print(root);
                if (!out)
                        return log_oom();
                puts(out);
                fflush(stdout);
                return ferror(stdout) ? -EIO : 0;
        }
        printf("drainer doctor: %zu nodes, %zu ResourceClaims, %zu DRA drivers", d->nodes.n, d->claims.n,
               d->drivers.n);
        for (size_t i = 0; i < d->drivers.n; i++)
                printf("%s%s", i == 0 ? " (" : ", ", ((struct driver *)d->drivers.v[i])->name);
        printf("%s%s%s; Prometheus: %s\n", d->drivers.n ? ")" : "", d->o->node ? "; node " : "",
               d->o->node ? d->o->node : "",
               d->o->prometheus ? d->o->prometheus : "not asked (--prometheus URL)");
        printf("against \"Good practices for Dynamic Resource Allocation as a Cluster Admin\" "
               "(kubernetes.io/docs/concepts/cluster-administration/dra)\n\n");
        if (doctor_report_print_text(rep, stdout) < 0)
                return -EIO;
        printf("\n%zu FAIL, %zu WARN, %zu PASS\n", doctor_report_count(rep, DOCTOR_FAIL),
               doctor_report_count(rep, DOCTOR_WARN), doctor_report_count(rep, DOCTOR_PASS));
        fflush(stdout);
        return ferror(stdout) ? -EIO : 0;
}

static void doctor_free(struct doctor *d) {
        for (size_t i = 0; i < d->nodes.n; i++)
                node_rec_free(d->nodes.v[i]);
        free(d->nodes.v);
        hashmap_free(d->node_by_name, NULL);
        for (size_t i = 0; i < d->slices.n; i++)
                slice_rec_free(d->slices.v[i]);
        free(d->slices.v);
        for (size_t i = 0; i < d->claims.n; i++)
                claim_rec_free(d->claims.v[i]);
        free(d->claims.v);
        for (size_t i = 0; i < d->bindings.n; i++)
                binding_free(d->bindings.v[i]);
        free(d->bindings.v);
        for (size_t i = 0; i < d->dpods.n; i++)
                dpod_free(d->dpods.v[i]);
        free(d->dpods.v);
        for (size_t i = 0; i < d->drainer.n; i++)
                dpod_free(d->drainer.v[i]);
        free(d->drainer.v);
        for (size_t i = 0; i < d->cps.n; i++) {
                struct cp_pod *c = d->cps.v[i];

                free(c->component);
                free(c->ns_name);
                free(c);
        }
        free(d->cps.v);
        for (size_t i = 0; i < d->subjects.n; i++)
                subject_free(d->subjects.v[i]);
        free(d->subjects.v);
        hashmap_free(d->subject_by_label, NULL);
        strv_free_n(d->driver_sas, d->n_driver_sas);
        for (size_t i = 0; i < d->groups.n; i++) {
                struct dgroup *g = d->groups.v[i];

                free(g->kind);
                free(g->ns);
                free(g->name);
                free(g->pods);
                cJSON_Delete(g->ds);
                free(g->ds_message);
                free(g);
        }
        free(d->groups.v);
        for (size_t i = 0; i < d->drivers.n; i++) {
                struct driver *dr = d->drivers.v[i];

                free(dr->name);
                strv_free_n(dr->nodes, dr->n_nodes);
                free(dr->groups);
                free(dr);
        }
        free(d->drivers.v);
        for (size_t i = 0; i < d->cordoned.n; i++) {
                struct cordoned *c = d->cordoned.v[i];

                for (size_t k = 0; k < c->pods.n; k++)
                        pod_rec_free(c->pods.v[k]);
                free(c->pods.v);
                free(c);
        }
        free(d->cordoned.v);
        free(d->sars);
        free(d->sar_message);
        free(d->probes);
        doctor_prom_results_done(&d->prom);
        free(d->fatal_what);
        free(d->lc_nodes.message);
        free(d->lc_slices.message);
        free(d->lc_claims.message);
        free(d->lc_crbs.message);
        free(d->lc_rbs.message);
        free(d->lc_drainer.message);
        free(d->lc_system.message);
        for (size_t i = 0; i < d->n_lc_driver; i++)
                free(d->lc_driver[i].message);
}

static bool lists_done(const struct doctor *d) {
        const struct list_call *const lcs[] = { &d->lc_nodes, &d->lc_slices,  &d->lc_claims, &d->lc_crbs,
                                                &d->lc_rbs,   &d->lc_drainer, &d->lc_system };

        for (size_t i = 0; i < ELEMENTSOF(lcs); i++)
                if (!lcs[i]->done)
                        return false;
        for (size_t i = 0; i < d->n_lc_driver; i++)
                if (!d->lc_driver[i].done)
                        return false;
        return true;
}

static int run_doctor(struct app *a, const struct doctor_opts *o, enum output_format fmt) {
        struct doctor d = { .app = a, .o = o };
        struct doctor_report rep = {};
        struct list_call *lcs = NULL;
        size_t n_lcs = 0;
        const char *const *selectors =
                o->n_driver_selectors > 0 ? o->driver_selectors : claims_default_driver_selectors;
        int r;

        d.node_by_name = hashmap_new(1u << 20);
        d.subject_by_label = hashmap_new(1u << 20);
        if (!d.node_by_name || !d.subject_by_label) {
                r = log_oom();
                goto out;
        }
        r = start_phase1(&d, selectors);
        if (r >= 0 && o->prometheus) {
                r = doctor_prom_start(a->transport, o->prometheus, &d.prom, on_prom_done, &d);
                if (r < 0)
                        log_error_errno(r, "--prometheus %s: cannot start a query: %m", o->prometheus);
                else
                        d.pending++;
        }
        if (r < 0) {
                kube_client_cancel_all(a->client);
                wait_pending(&d);
                goto out;
        }
        /* Phase 2 needs the lists; Prometheus answers may still come in meanwhile. */
        while (d.pending > 0 && !lists_done(&d))
                if (uv_run(&a->loop, UV_RUN_ONCE) == 0)
                        break;
        if (d.prom_error < 0) {
                wait_pending(&d);
                r = log_error_errno(d.prom_error, "--prometheus %s: cannot start a query: %m",
                                    o->prometheus);
                goto out;
        }
        if (d.fatal < 0) {
                wait_pending(&d);
                r = log_error_errno(d.fatal, "%s", strna(d.fatal_what));
                goto out;
        }
        for (size_t i = 0; i < d.nodes.n; i++) {
                const struct node_rec *n = d.nodes.v[i];

                r = hashmap_put(d.node_by_name, n->name, d.nodes.v[i], NULL);
                if (r < 0) {
                        r = log_oom();
                        wait_pending(&d);
                        goto out;
                }
        }
        if (o->node && !node_find(&d, o->node)) {
                wait_pending(&d);
                r = log_error_errno(ENOENT, "node \"%s\" not found", o->node);
                goto out;
        }
        r = start_phase2(&d, &lcs, &n_lcs);
        wait_pending(&d);
        if (r >= 0 && d.prom_error < 0)
                r = log_error_errno(d.prom_error, "--prometheus %s: cannot start a query: %m",
                                    o->prometheus);
        else if (r < 0)
                r = log_error_errno(r, "Cannot check: %m");
        if (r < 0) {
                for (size_t i = 0; i < n_lcs; i++)
                        free(lcs[i].message);
                goto out;
        }
        for (size_t i = 0; i < n_lcs; i++) {
                struct cordoned *c = lcs[i].userdata;

                c->error = lcs[i].error;
                free(lcs[i].message);
        }
        r = build_report(&d, &rep);
        if (r < 0) {
                r = log_oom();
                goto out;
        }
        r = print_report(&d, &rep, fmt);
        if (r < 0)
                goto out;
        r = doctor_report_exit_code(&rep);
out:
        free(lcs);
        doctor_report_done(&rep);
        doctor_free(&d);
        return r;
}

int verb_doctor(int argc, char **argv, struct global_flags *g) {
        static const struct option extra[] = {
                { "node", required_argument, NULL, 'N' },
                { "prometheus", required_argument, NULL, 'P' },
                { "driver-selector", required_argument, NULL, 'D' },
                {},
        };
        struct doctor_opts o = {};
        struct app a;
        int r;

        r = verb_parse(argc, argv, g, extra, on_doctor_opt, &o);
        if (r <= 0)
                return r < 0 ? EXIT_USAGE : EXIT_DONE;
        if (argc - optind != 0) {
                log_error("drainer doctor: unexpected argument \"%s\" (use --node NODE); see 'drainer "
                          "doctor --help'",
                          argv[optind]);
                return EXIT_USAGE;
        }
        if (o.n_driver_selectors > 0) {
                _cleanup_free_ char *err = NULL;
                struct selector **sels;
                size_t n;

                r = selectors_parse_strv(o.driver_selectors, &sels, &n, &err);
                if (r < 0) {
                        log_error("--driver-selector: %s", err ? err : "invalid selector");
                        return EXIT_USAGE;
                }
                for (size_t i = 0; i < n; i++)
                        if (selector_is_empty(sels[i])) {
                                selectors_free(sels, n);
                                log_error("--driver-selector: an empty selector would match every pod");
                                return EXIT_USAGE;
                        }
                selectors_free(sels, n);
        }

        r = app_init(&a, g);
        if (r < 0) {
                app_done(&a);
                return EXIT_ERROR;
        }
        r = run_doctor(&a, &o, g->output);
        app_done(&a);
        if (r < 0)
                return app_exit_code(r);
        return r;
}
