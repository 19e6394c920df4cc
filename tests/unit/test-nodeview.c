/* The node view over the real client and informers, a fake clock and a scripted
 * fake transport: a view of its own lists and watches the Node by name, its pods
 * and slices by spec.nodeName, every claim, and lists budgets once; a once view
 * never watches; node views that borrow from one cluster view share one list and
 * one watch of Nodes, claims and budgets however many there are, while pods and
 * slices stay each view's own; Node events reach only the view of that node; a
 * view taking a synced shared part hears on_synced; claims stay watched for the
 * linger after the last view let go, then stop, and a later view relists rather
 * than trust an old cache; a close calls back from the loop, never from inside. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "drainer/base/timesrc.h"
#include "drainer/dra/nodeview.h"
#include "drainer/dra/snapshot.h"
#include "drainer/kube/client.h"
#include "drainer/kube/kubeconfig.h"
#include "fakes/fake-clock.h"
#include "fakes/fake-transport.h"
#include "fakes/test-env.h"

#define MS  USEC_PER_MSEC
#define SEC USEC_PER_SEC

#define NODES_ALL "/api/v1/nodes"
#define NODE1     "/api/v1/nodes?fieldSelector=metadata.name%3Dnode-1"
#define PODS(n)   "/api/v1/pods?fieldSelector=spec.nodeName%3D" n
#define SLICES(n) "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3D" n
#define CLAIMS    "/apis/resource.k8s.io/v1/resourceclaims"
#define PDBS      "/apis/policy/v1/poddisruptionbudgets"

struct view_log {
        unsigned changes, synced, errors, closed;
        unsigned synced_parts;
};

struct env {
        struct test_api *api;
        /* borrowed from api */
        struct fake_clock *clock;
        struct timesrc *ts;
        struct fake_transport *ft;
        struct kube_client *client;
        struct cluster_view *cv;
        bool cv_closed;
};

static int setup(void **state) {
        struct env *e = calloc(1, sizeof(*e));

        assert_non_null(e);
        e->api = test_api_new(&(struct test_api_options){ .user_yaml = "    token: view-token\n" });
        e->clock = e->api->clock;
        e->ts = e->api->ts;
        e->ft = e->api->ft;
        e->client = e->api->client;
        *state = e;
        return 0;
}

static void run(struct env *e, uint64_t usec, uint64_t step) {
        for (uint64_t t = 0; t <= usec; t += step) {
                fake_transport_deliver(e->ft);
                fake_clock_advance(e->clock, step);
        }
        fake_transport_deliver(e->ft);
}

static void on_closed(void *userdata) {
        *(bool *)userdata = true;
}

static int teardown(void **state) {
        struct env *e = *state;

        if (e->cv) {
                cluster_view_close(e->cv, on_closed, &e->cv_closed);
                for (int i = 0; i < 100 && !e->cv_closed; i++)
                        run(e, 0, MS);
                assert_true(e->cv_closed);
        }
        run(e, 10 * MS, MS);
        test_api_free(e->api);
        free(e);
        return 0;
}

static void on_change(struct node_view *v, void *userdata) {
        ((struct view_log *)userdata)->changes++;
}

static void on_synced(struct node_view *v, unsigned part, void *userdata) {
        struct view_log *l = userdata;

        l->synced++;
        l->synced_parts |= part;
}

static void on_error(struct node_view *v, unsigned part, int error, const char *message, void *userdata) {
        ((struct view_log *)userdata)->errors++;
}

static void on_view_closed(void *userdata) {
        ((struct view_log *)userdata)->closed++;
}

static const struct node_view_handlers handlers = {
        .on_change = on_change,
        .on_synced = on_synced,
        .on_error = on_error,
};

static char *node_json(const char *name, const char *rv) {
        char *s;

        assert_true(asprintf(&s,
                             "{\"metadata\":{\"name\":\"%s\",\"uid\":\"u-%s\",\"resourceVersion\":\"%s\"},"
                             "\"spec\":{},\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":"
                             "\"True\"}]}}",
                             name, name, rv) >= 0);
        return s;
}

static char *pod_json(const char *name, const char *node) {
        char *s;

        assert_true(asprintf(&s,
                             "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"demo\",\"uid\":\"uid-%s\","
                             "\"resourceVersion\":\"50\"},\"spec\":{\"nodeName\":\"%s\",\"containers\":[{"
                             "\"name\":\"c\",\"image\":\"x\"}]},\"status\":{\"phase\":\"Running\"}}",
                             name, name, node) >= 0);
        return s;
}

static char *claim_json(const char *name) {
        char *s;

        assert_true(asprintf(&s,
                             "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"demo\",\"uid\":\"c-%s\","
                             "\"resourceVersion\":\"70\"},\"spec\":{}}",
                             name, name) >= 0);
        return s;
}

/* A List of the NULL-terminated malloc'd items (freed here). */
static char *slice_json(const char *name, const char *node) {
        char *s;

        assert_true(
                asprintf(&s,
                         "{\"metadata\":{\"name\":\"%s\",\"resourceVersion\":\"60\"},\"spec\":{"
                         "\"driver\":\"gpu.example.com\",\"nodeName\":\"%s\",\"pool\":{\"name\":\"%s\","
                         "\"generation\":1,\"resourceSliceCount\":1},\"devices\":[{\"name\":\"gpu-0\"}]}}",
                         name, node, node) >= 0);
        return s;
}

/* A watch event of slice NAME on NODE, pushed to the watch of every slice. */
static void push_slice(struct env *e, const char *type, const char *name, const char *node) {
        char *obj = slice_json(name, node), *ev;

        assert_true(asprintf(&ev, "{\"type\":\"%s\",\"object\":%s}\n", type, obj) >= 0);
        free(obj);
        assert_int_equal(fake_transport_push(e->ft, "/apis/resource.k8s.io/v1/resourceslices?watch=1", ev),
                         1);
        free(ev);
}

static char *list_json(char **items) {
        size_t len = 256;
        char *s;

        for (char **i = items; *i; i++)
                len += strlen(*i) + 1;
        s = malloc(len);
        assert_non_null(s);
        strcpy(s, "{\"kind\":\"List\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"100\"},"
                  "\"items\":[");
        for (char **i = items; *i; i++) {
                if (i != items)
                        strcat(s, ",");
                strcat(s, *i);
                free(*i);
        }
        strcat(s, "]}");
        return s;
}

/* A list of path (answered with body, freed), and its watch held open (unless once). */
static void expect_list(struct env *e, const char *path, char *body, bool watch) {
        char list[512], w[512];

        snprintf(list, sizeof(list), "%s%slimit=", path, strchr(path, '?') ? "&" : "?");
        fake_transport_expect_json(e->ft, "GET", list, 200, body);
        free(body);
        if (!watch)
                return;
        snprintf(w, sizeof(w), "%s%swatch=1", path, strchr(path, '?') ? "&" : "?");
        fake_transport_expect(e->ft, "GET", w, &(struct fake_reply){ .hold_open = true });
}

static size_t requests(struct env *e, const char *path, bool watch) {
        char p[512];

        snprintf(p, sizeof(p), "%s%s%s", path, strchr(path, '?') ? "&" : "?", watch ? "watch=1" : "limit=");
        return fake_transport_count(e->ft, "GET", p);
}

static void close_view(struct env *e, struct node_view *v, struct view_log *l) {
        node_view_close(v, on_view_closed, l);
        assert_int_equal(l->closed, 0); /* never from inside the call */
        for (int i = 0; i < 50 && !l->closed; i++)
                run(e, 0, MS);
        assert_int_equal(l->closed, 1);
}

/* A view of its own: the five parts, by name and spec.nodeName; budgets listed once. */
static void test_own_view(void **state) {
        struct env *e = *state;
        struct view_log l = {};
        struct node_input in;
        struct node_view *v;

        expect_list(e, NODE1, list_json((char *[]){ node_json("node-1", "90"), NULL }), true);
        expect_list(e, PODS("node-1"), list_json((char *[]){ pod_json("a", "node-1"), NULL }), true);
        expect_list(e, CLAIMS, list_json((char *[]){ claim_json("c1"), claim_json("c2"), NULL }), true);
        expect_list(e, SLICES("node-1"), list_json((char *[]){ NULL }), true);
        expect_list(e, PDBS, list_json((char *[]){ NULL }), false);
        assert_int_equal(node_view_new(e->client, e->ts,
                                       &(const struct node_view_options){ .node = "node-1" }, &handlers, &l,
                                       &v),
                         0);
        assert_int_equal(node_view_start(v, NODE_VIEW_ALL), 0);
        assert_false(node_view_synced(v, NODE_VIEW_ALL));
        run(e, 10 * MS, MS);
        assert_true(node_view_synced(v, NODE_VIEW_ALL));
        assert_int_equal(l.synced_parts, NODE_VIEW_ALL);
        assert_string_equal(node_view_node(v)->name, "node-1");
        assert_non_null(node_view_pod(v, "demo/a"));
        assert_int_equal(node_view_collect(v, &in), 0);
        assert_int_equal(in.n_pods, 1);
        assert_int_equal(in.n_claims, 2);
        assert_int_equal(in.n_slices, 0);
        assert_int_equal(in.n_pdbs, 0);
        assert_ptr_equal(in.node, node_view_node(v));
        node_input_done(&in);
        assert_int_equal(requests(e, PDBS, true), 0);
        assert_int_equal(fake_transport_open_streams(e->ft), 4);
        close_view(e, v, &l);
        assert_int_equal(fake_transport_open_streams(e->ft), 0);
}

/* once: the Node read with a GET, every other part listed, nothing watched (status, plan). */
static void test_once_view(void **state) {
        struct env *e = *state;
        struct view_log l = {};
        struct node_view *v;
        char *node = node_json("node-1", "90");

        fake_transport_expect_json(e->ft, "GET", "/api/v1/nodes/node-1", 200, node);
        free(node);
        expect_list(e, PODS("node-1"), list_json((char *[]){ NULL }), false);
        expect_list(e, CLAIMS, list_json((char *[]){ NULL }), false);
        expect_list(e, SLICES("node-1"), list_json((char *[]){ NULL }), false);
        assert_int_equal(
                node_view_new(e->client, e->ts,
                              &(const struct node_view_options){ .node = "node-1", .once = NODE_VIEW_ALL },
                              &handlers, &l, &v),
                0);
        assert_int_equal(node_view_start(v, NODE_VIEW_ALL & ~NODE_VIEW_PDBS), 0);
        run(e, 100 * MS, MS);
        assert_true(node_view_synced(v, NODE_VIEW_ALL & ~NODE_VIEW_PDBS));
        assert_false(node_view_synced(v, NODE_VIEW_PDBS)); /* never started */
        assert_int_equal(fake_transport_n_requests(e->ft), 4);
        assert_int_equal(fake_transport_count(e->ft, "GET", "/api/v1/nodes/node-1"), 1);
        assert_int_equal(fake_transport_count(e->ft, "GET", "/api/v1/nodes?"), 0);
        assert_non_null(node_view_node(v));
        assert_string_equal(node_view_node(v)->name, "node-1");
        assert_string_equal(node_view_node(v)->resource_version, "90");
        close_view(e, v, &l);
}

/* once, a Node that does not exist: the GET's 404 is an empty Node part, synced, no error. */
static void test_once_view_no_node(void **state) {
        struct env *e = *state;
        struct view_log l = {};
        struct node_view *v;

        fake_transport_expect_json(e->ft, "GET", "/api/v1/nodes/node-9", 404,
                                   "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                                   "\"message\":\"nodes \\\"node-9\\\" not found\",\"reason\":\"NotFound\","
                                   "\"code\":404}");
        assert_int_equal(
                node_view_new(e->client, e->ts,
                              &(const struct node_view_options){ .node = "node-9", .once = NODE_VIEW_ALL },
                              &handlers, &l, &v),
                0);
        assert_int_equal(node_view_start(v, NODE_VIEW_NODE), 0);
        run(e, 100 * MS, MS);
        assert_true(node_view_synced(v, NODE_VIEW_NODE));
        assert_int_equal(l.synced_parts, NODE_VIEW_NODE);
        assert_int_equal(l.errors, 0);
        assert_null(node_view_node(v));
        assert_int_equal(fake_transport_n_requests(e->ft), 1);
        close_view(e, v, &l);
}

/* A cluster view (o) with one node view of each name borrowing from it, all started and listed. */
static void start_shared(struct env *e, const struct cluster_view_options *o, const char *const *names,
                         size_t n, struct view_log *l, struct node_view **v) {
        assert_int_equal(cluster_view_new(e->client, e->ts, o, &e->cv), 0);
        assert_int_equal(cluster_view_start(e->cv), 0);
        run(e, 5 * MS, MS);
        for (size_t i = 0; i < n; i++) {
                assert_int_equal(
                        node_view_new(e->client, e->ts,
                                      &(const struct node_view_options){ .node = names[i], .shared = e->cv },
                                      &handlers, &l[i], &v[i]),
                        0);
                assert_int_equal(node_view_start(v[i], NODE_VIEW_ALL), 0);
        }
        run(e, 10 * MS, MS);
}

/* Three node views on one cluster view: one list and one watch each of Nodes, claims
 * and budgets; pods and slices per node; a Node event only for its view. */
static void test_shared_one_watch_each(void **state) {
        static const char *const names[] = { "node-1", "node-2", "node-3" };
        struct env *e = *state;
        struct view_log l[3] = {};
        struct node_view *v[3];
        char *ev, *obj;

        expect_list(e, NODES_ALL,
                    list_json((char *[]){ node_json("node-1", "90"), node_json("node-2", "91"),
                                          node_json("node-3", "92"), NULL }),
                    true);
        expect_list(e, CLAIMS, list_json((char *[]){ claim_json("c1"), NULL }), true);
        expect_list(e, PDBS, list_json((char *[]){ NULL }), true);
        expect_list(e, PODS("node-1"), list_json((char *[]){ pod_json("a", "node-1"), NULL }), true);
        expect_list(e, PODS("node-2"), list_json((char *[]){ NULL }), true);
        expect_list(e, PODS("node-3"), list_json((char *[]){ NULL }), true);
        expect_list(e, SLICES("node-1"), list_json((char *[]){ NULL }), true);
        expect_list(e, SLICES("node-2"), list_json((char *[]){ NULL }), true);
        expect_list(e, SLICES("node-3"), list_json((char *[]){ NULL }), true);
        start_shared(e, &(const struct cluster_view_options){ .linger_usec = 10 * SEC }, names, 3, l, v);
        for (int i = 0; i < 3; i++) {
                assert_true(node_view_synced(v[i], NODE_VIEW_ALL));
                /* The Node was synced before the view took it: told all the same. */
                assert_true(l[i].synced_parts & NODE_VIEW_NODE);
                assert_string_equal(node_view_node(v[i])->name, names[i]);
        }
        assert_int_equal(requests(e, NODES_ALL, false), 1);
        assert_int_equal(requests(e, NODES_ALL, true), 1);
        assert_int_equal(requests(e, CLAIMS, false), 1);
        assert_int_equal(requests(e, CLAIMS, true), 1);
        assert_int_equal(requests(e, PDBS, false), 1);
        assert_int_equal(requests(e, PDBS, true), 1);
        for (int i = 0; i < 3; i++) {
                char p[256], sl[256];

                snprintf(p, sizeof(p), "/api/v1/pods?fieldSelector=spec.nodeName%%3D%s", names[i]);
                snprintf(sl, sizeof(sl),
                         "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%%3D%s",
                         names[i]);
                assert_int_equal(requests(e, p, true), 1);
                assert_int_equal(requests(e, sl, true), 1);
        }
        /* node-2 changes: only its view hears of it; a claim changes: all three. */
        for (int i = 0; i < 3; i++)
                l[i].changes = 0;
        obj = node_json("node-2", "95");
        assert_true(asprintf(&ev, "{\"type\":\"MODIFIED\",\"object\":%s}\n", obj) >= 0);
        free(obj);
        assert_int_equal(fake_transport_push(e->ft, NODES_ALL "?watch=1", ev), 1);
        free(ev);
        obj = claim_json("c9");
        assert_true(asprintf(&ev, "{\"type\":\"ADDED\",\"object\":%s}\n", obj) >= 0);
        free(obj);
        assert_int_equal(fake_transport_push(e->ft, CLAIMS "?watch=1", ev), 1);
        free(ev);
        assert_int_equal(l[0].changes, 1);
        assert_int_equal(l[1].changes, 2);
        assert_int_equal(l[2].changes, 1);
        /* A view closing does not stop what the others borrow. */
        close_view(e, v[0], &l[0]);
        assert_true(node_view_synced(v[1], NODE_VIEW_ALL));
        close_view(e, v[1], &l[1]);
        close_view(e, v[2], &l[2]);
        /* nodes; claims and budgets lingering; each node's pods and slices kept for its next run */
        assert_int_equal(fake_transport_open_streams(e->ft), 3 + 3 * 2);
}

/* The last view lets go: claims and budgets, and the node's own pods and slices, stay
 * watched for the linger, then stop; a view of the node within it takes them as they
 * are (no list), one after that lists them again (not an old cache as if it were
 * current). */
static void test_shared_linger(void **state) {
        struct env *e = *state;
        struct view_log l = {}, l2 = {};
        struct node_view *v;

        expect_list(e, NODES_ALL, list_json((char *[]){ node_json("node-1", "90"), NULL }), true);
        assert_int_equal(cluster_view_new(e->client, e->ts,
                                          &(const struct cluster_view_options){ .linger_usec = 10 * SEC },
                                          &e->cv),
                         0);
        assert_int_equal(cluster_view_start(e->cv), 0);
        run(e, 5 * MS, MS);
        for (int round = 0; round < 3; round++) {
                struct view_log *lg = round == 2 ? &l2 : &l;

                *lg = (struct view_log){};
                if (round != 1) {
                        expect_list(e, CLAIMS, list_json((char *[]){ claim_json("c1"), NULL }), true);
                        expect_list(e, PDBS, list_json((char *[]){ NULL }), true);
                        expect_list(e, PODS("node-1"),
                                    list_json((char *[]){ pod_json("a", "node-1"), NULL }), true);
                        expect_list(e, SLICES("node-1"), list_json((char *[]){ NULL }), true);
                }
                assert_int_equal(
                        node_view_new(e->client, e->ts,
                                      &(const struct node_view_options){ .node = "node-1", .shared = e->cv },
                                      &handlers, lg, &v),
                        0);
                assert_int_equal(node_view_start(v, NODE_VIEW_ALL), 0);
                if (round == 2)
                        assert_false(node_view_synced(v, NODE_VIEW_CLAIMS | NODE_VIEW_PODS));
                run(e, 10 * MS, MS);
                assert_true(node_view_synced(v, NODE_VIEW_ALL));
                /* the parked pods watch is the view's, with its cache, and says so */
                assert_non_null(node_view_pod(v, "demo/a"));
                assert_true(lg->synced_parts & NODE_VIEW_PODS);
                close_view(e, v, lg);
                /* round 0: back within the linger (round 1 borrows the warm cache);
                 * round 1: away for longer. */
                run(e, round == 0 ? 5 * SEC : 11 * SEC, 100 * MS);
        }
        assert_int_equal(requests(e, CLAIMS, false), 2);
        assert_int_equal(requests(e, CLAIMS, true), 2);
        assert_int_equal(requests(e, "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1", false), 2);
        assert_int_equal(requests(e, "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1", true), 2);
        /* After round 2 and the linger: only the Node watch is open. */
        assert_int_equal(fake_transport_open_streams(e->ft), 1);
}

/* share_slices: one list and one watch of every slice for all the views; each view
 * sees, hears of and collects only its node's. */
static void test_shared_slices(void **state) {
        static const char *const names[] = { "node-1", "node-2" };
        struct env *e = *state;
        struct view_log l[2] = {};
        struct node_view *v[2];
        struct node_input in;
        const struct slice_rec *sr;
        size_t it, k;

        expect_list(e, NODES_ALL,
                    list_json((char *[]){ node_json("node-1", "90"), node_json("node-2", "91"), NULL }),
                    true);
        expect_list(e, CLAIMS, list_json((char *[]){ NULL }), true);
        expect_list(e, PDBS, list_json((char *[]){ NULL }), true);
        expect_list(e, "/apis/resource.k8s.io/v1/resourceslices",
                    list_json((char *[]){ slice_json("s1", "node-1"), slice_json("s2", "node-2"),
                                          slice_json("s3", "node-2"), slice_json("s4", "node-3"), NULL }),
                    true);
        for (int i = 0; i < 2; i++)
                expect_list(e, i ? PODS("node-2") : PODS("node-1"), list_json((char *[]){ NULL }), true);
        start_shared(e,
                     &(const struct cluster_view_options){ .linger_usec = 10 * SEC, .share_slices = true },
                     names, 2, l, v);
        assert_int_equal(requests(e, "/apis/resource.k8s.io/v1/resourceslices", false), 1);
        assert_int_equal(requests(e, "/apis/resource.k8s.io/v1/resourceslices", true), 1);
        assert_int_equal(requests(e, SLICES("node-1"), false) + requests(e, SLICES("node-2"), false), 0);
        for (int i = 0; i < 2; i++) {
                assert_true(node_view_synced(v[i], NODE_VIEW_ALL));
                assert_int_equal(node_view_collect(v[i], &in), 0);
                assert_int_equal(in.n_slices, (size_t)i + 1);
                for (size_t j = 0; j < in.n_slices; j++)
                        assert_string_equal(in.slices[j]->node_name, names[i]);
                node_input_done(&in);
                for (it = 0, k = 0; node_view_iterate_slices(v[i], &it, &sr); k++)
                        assert_string_equal(sr->node_name, names[i]);
                assert_int_equal(k, (size_t)i + 1);
        }
        /* a slice of node-2 changes, one of node-3 is added: only node-2's view hears */
        l[0].changes = l[1].changes = 0;
        push_slice(e, "MODIFIED", "s2", "node-2");
        push_slice(e, "ADDED", "s5", "node-3");
        assert_int_equal(l[0].changes, 0);
        assert_int_equal(l[1].changes, 1);
        /* node-1 gets a slice, and s3 moves from node-2 to node-1: both views hear of the
         * move, and each collects its node's slices as they are now (the freed records of
         * before are not kept: ASan) */
        l[0].changes = l[1].changes = 0;
        push_slice(e, "ADDED", "s6", "node-1");
        push_slice(e, "MODIFIED", "s3", "node-1");
        assert_int_equal(l[0].changes, 2);
        assert_int_equal(l[1].changes, 1);
        for (int i = 0; i < 2; i++) {
                assert_int_equal(node_view_collect(v[i], &in), 0);
                assert_int_equal(in.n_slices, i ? 1u : 3u);
                for (size_t j = 0; j < in.n_slices; j++)
                        assert_string_equal(in.slices[j]->node_name, names[i]);
                node_input_done(&in);
        }
        close_view(e, v[0], &l[0]);
        close_view(e, v[1], &l[1]);
}

/* ---- node_snapshot: the once view behind a done callback ---- */

struct snap_log {
        unsigned done, closed;
        int error;
        char *what;
        size_t n_pods, n_claims;
        bool has_node;
};

static void on_snapshot(struct node_snapshot *s, int error, const char *what, void *userdata) {
        struct snap_log *l = userdata;
        const struct node_input *in = node_snapshot_input(s);

        l->done++;
        l->error = error;
        l->what = what ? strdup(what) : NULL;
        if (error == 0) {
                l->has_node = in->node != NULL;
                l->n_pods = in->n_pods;
                l->n_claims = in->n_claims;
        }
}

static void on_snapshot_closed(void *userdata) {
        ((struct snap_log *)userdata)->closed++;
}

static void close_snapshot(struct env *e, struct node_snapshot *s, struct snap_log *l) {
        node_snapshot_close(s, on_snapshot_closed, l);
        assert_int_equal(l->closed, 0); /* never from inside the call */
        for (int i = 0; i < 50 && !l->closed; i++)
                run(e, 0, MS);
        assert_int_equal(l->closed, 1);
        free(l->what);
}

static void test_snapshot_read(void **state) {
        struct env *e = *state;
        struct snap_log l = {};
        struct node_snapshot *s;
        char *node = node_json("node-1", "90");

        fake_transport_expect_json(e->ft, "GET", "/api/v1/nodes/node-1", 200, node);
        free(node);
        expect_list(e, PODS("node-1"), list_json((char *[]){ pod_json("a", "node-1"), NULL }), false);
        expect_list(e, CLAIMS, list_json((char *[]){ claim_json("c1"), NULL }), false);
        expect_list(e, SLICES("node-1"), list_json((char *[]){ NULL }), false);
        expect_list(e, PDBS, list_json((char *[]){ NULL }), false);
        assert_int_equal(node_snapshot_start(e->client, e->ts, "node-1", true, on_snapshot, &l, &s), 0);
        assert_int_equal(l.done, 0);
        run(e, 100 * MS, MS);
        assert_int_equal(l.done, 1);
        assert_int_equal(l.error, 0);
        assert_true(l.has_node);
        assert_int_equal(l.n_pods, 1);
        assert_int_equal(l.n_claims, 1);
        assert_int_equal(fake_transport_count(e->ft, "GET", PDBS), 1);
        assert_int_equal(fake_transport_open_streams(e->ft), 0); /* nothing watched */
        close_snapshot(e, s, &l);
}

static void test_snapshot_no_node(void **state) {
        struct env *e = *state;
        struct snap_log l = {};
        struct node_snapshot *s;

        fake_transport_expect_json(e->ft, "GET", "/api/v1/nodes/node-9", 404,
                                   "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                                   "\"message\":\"nodes \\\"node-9\\\" not found\",\"reason\":\"NotFound\","
                                   "\"code\":404}");
        expect_list(e, PODS("node-9"), list_json((char *[]){ NULL }), false);
        expect_list(e, CLAIMS, list_json((char *[]){ NULL }), false);
        expect_list(e, SLICES("node-9"), list_json((char *[]){ NULL }), false);
        assert_int_equal(node_snapshot_start(e->client, e->ts, "node-9", false, on_snapshot, &l, &s), 0);
        run(e, 100 * MS, MS);
        assert_int_equal(l.done, 1);
        assert_int_equal(l.error, -ENOENT);
        assert_string_equal(l.what, "node \"node-9\" not found");
        close_snapshot(e, s, &l);
}

/* The first failure ends the snapshot, saying which list failed; the rest are stopped. */
static void test_snapshot_list_fails(void **state) {
        struct env *e = *state;
        struct snap_log l = {};
        struct node_snapshot *s;
        char *node = node_json("node-1", "90");

        fake_transport_expect_json(e->ft, "GET", "/api/v1/nodes/node-1", 200, node);
        free(node);
        expect_list(e, PODS("node-1"), list_json((char *[]){ NULL }), false);
        fake_transport_expect_json(e->ft, "GET", CLAIMS "?limit=", 403,
                                   "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                                   "\"message\":\"resourceclaims is forbidden\",\"reason\":\"Forbidden\","
                                   "\"code\":403}");
        expect_list(e, SLICES("node-1"), list_json((char *[]){ NULL }), false);
        assert_int_equal(node_snapshot_start(e->client, e->ts, "node-1", false, on_snapshot, &l, &s), 0);
        run(e, 100 * MS, MS);
        assert_int_equal(l.done, 1);
        assert_int_equal(l.error, -EACCES);
        assert_non_null(strstr(l.what, "forbidden"));
        close_snapshot(e, s, &l);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_own_view, setup, teardown),
                cmocka_unit_test_setup_teardown(test_once_view, setup, teardown),
                cmocka_unit_test_setup_teardown(test_once_view_no_node, setup, teardown),
                cmocka_unit_test_setup_teardown(test_snapshot_read, setup, teardown),
                cmocka_unit_test_setup_teardown(test_snapshot_no_node, setup, teardown),
                cmocka_unit_test_setup_teardown(test_snapshot_list_fails, setup, teardown),
                cmocka_unit_test_setup_teardown(test_shared_one_watch_each, setup, teardown),
                cmocka_unit_test_setup_teardown(test_shared_linger, setup, teardown),
                cmocka_unit_test_setup_teardown(test_shared_slices, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
