/* One-shot reads of everything a node's drain depends on, concurrently, into
 * compact records. Owns the records; borrows the app's client. The first
 * failure cancels the other reads. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/app.h"
#include "drainer/buf.h"
#include "drainer/client.h"
#include "drainer/json.h"
#include "drainer/objects.h"
#include "drainer/plan.h"
#include "drainer/snapshot.h"

/* At most BUF_CAP_OBJECTS records of a kind, as an informer holds: more is -E2BIG. */
static int rec_array_push(struct rec_array *a, void *rec) {
        int r = buf_grow_array(&a->items, &a->alloc, a->n + 1, sizeof(void *), BUF_CAP_OBJECTS);

        if (r < 0)
                return r;
        a->items[a->n++] = rec;
        return 0;
}

static void rec_array_free(struct rec_array *a, void (*free_rec)(void *)) {
        for (size_t i = 0; i < a->n; i++)
                free_rec(a->items[i]);
        free(a->items);
}

static void call_finished(struct snapshot *s, const struct kube_result *res, const char *what) {
        if (res->error < 0 && s->error == 0) {
                s->error = res->error;
                if (asprintf(&s->error_what, "%s: %s", what,
                             res->message ? res->message : strerror(-res->error)) < 0)
                        s->error_what = NULL;
                /* One failure decides the outcome: stop the rest. */
                kube_client_cancel_all(s->app->client);
        }
        if (--s->pending == 0)
                s->done = true;
}

static void on_node(const struct kube_result *res, void *userdata) {
        struct snapshot *s = userdata;

        if (res->error == 0) {
                int r = node_rec_from_json(res->json, &s->node);

                if (r < 0) {
                        struct kube_result bad = { .error = r, .message = "malformed Node object" };

                        return call_finished(s, &bad, "get node");
                }
        }
        call_finished(s, res, "get node");
}

#define DEFINE_PAGE_FN(type, field)                                                        \
        static int on_##field##_page(const cJSON *items, void *userdata) {                 \
                struct snapshot *s = userdata;                                             \
                const cJSON *item;                                                         \
                cJSON_ArrayForEach(item, items) {                                          \
                        struct type *rec;                                                  \
                        int r = type##_from_json(item, &rec);                              \
                        if (r == -ENOMEM)                                                  \
                                return r;                                                  \
                        if (r < 0)                                                         \
                                continue; /* malformed item: skip, as an informer would */ \
                        r = rec_array_push(&s->field, rec);                                \
                        if (r < 0) {                                                       \
                                type##_free(rec);                                          \
                                return r;                                                  \
                        }                                                                  \
                }                                                                          \
                return 0;                                                                  \
        }                                                                                  \
        static void on_##field##_done(const struct kube_result *res, void *userdata) {     \
                call_finished(userdata, res, "list " #field);                              \
        }

DEFINE_PAGE_FN(pod_rec, pods)
DEFINE_PAGE_FN(claim_rec, claims)
DEFINE_PAGE_FN(slice_rec, slices)
DEFINE_PAGE_FN(pdb_rec, pdbs)

static void free_pod(void *p) {
        pod_rec_free(p);
}
static void free_claim(void *p) {
        claim_rec_free(p);
}
static void free_slice(void *p) {
        slice_rec_free(p);
}
static void free_pdb(void *p) {
        pdb_rec_free(p);
}

void snapshot_done(struct snapshot *s) {
        node_rec_free(s->node);
        rec_array_free(&s->pods, free_pod);
        rec_array_free(&s->claims, free_claim);
        rec_array_free(&s->slices, free_slice);
        rec_array_free(&s->pdbs, free_pdb);
        free(s->error_what);
}

/* Starts the four reads; the caller runs the loop until s->done. */
int snapshot_start(struct snapshot *s) {
        _cleanup_free_ char *node_path = NULL, *pods_path = NULL, *slices_path = NULL, *fs = NULL,
                            *sfs = NULL, *ename = NULL;
        int r;

        ename = kube_query_escape(s->node_name);
        if (!ename || asprintf(&fs, "spec.nodeName=%s", s->node_name) < 0)
                return -ENOMEM;
        free(ename);
        ename = kube_query_escape(s->node_name);
        sfs = kube_query_escape(fs);
        if (!ename || !sfs || asprintf(&node_path, "/api/v1/nodes/%s", ename) < 0 ||
            asprintf(&pods_path, "/api/v1/pods?fieldSelector=%s", sfs) < 0 ||
            asprintf(&slices_path, "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=%s", sfs) < 0)
                return -ENOMEM;

        r = kube_get(s->app->client, node_path, on_node, s, NULL);
        if (r < 0)
                return r;
        s->pending++;
        r = kube_list(s->app->client, pods_path, 500, NULL, on_pods_page, on_pods_done, s, NULL);
        if (r < 0)
                return r;
        s->pending++;
        /* Claims cannot be filtered by node: read them from the watch cache, paginated. */
        /* No resourceVersion: a consistent list, which kube-apiserver (ConsistentListFromCache, 1.31+)
         * serves from its watch cache AND paginates; resourceVersion=0 would return every claim in one
         * response, and its parsed tree alone would exceed our memory budget at 10,000 claims. */
        r = kube_list(s->app->client, "/apis/resource.k8s.io/v1/resourceclaims", 500, NULL, on_claims_page,
                      on_claims_done, s, NULL);
        if (r < 0)
                return r;
        s->pending++;
        r = kube_list(s->app->client, slices_path, 500, NULL, on_slices_page, on_slices_done, s, NULL);
        if (r < 0)
                return r;
        s->pending++;
        if (s->with_pdbs) {
                r = kube_list(s->app->client, "/apis/policy/v1/poddisruptionbudgets", 500, NULL,
                              on_pdbs_page, on_pdbs_done, s, NULL);
                if (r < 0)
                        return r;
                s->pending++;
        }
        return 0;
}
