/* preparation: what drain, uncordon and maintain read before the fleet changes anything
 * (ctl/preparation.c), on the fake API server and the fake clock. Covered: the nodes of
 * a label selector over two pages, sorted; a list refused (the API server's message);
 * each run's driver label KEY, one snapshot per node (a node without the driver's pod:
 * -EPERM for its runs, the others still read); a snapshot that fails ends the keys with
 * what failed; maintain's seamless check refusing (no DaemonSet-controlled driver pod:
 * not seamless, with the reason); a close mid-way (no callback after it, every read
 * ended, closed once). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/selector.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/preparation.h"
#include "drainer/dra/claims.h"
#include "drainer/dra/driverstop.h"
#include "drainer/drain/nodeset.h"
#include "drainer/kube/client.h"
#include "fakes/fake-apiserver.h"
#include "fakes/fake-clock.h"
#include "fakes/fake-transport.h"
#include "fakes/test-env.h"

#define MS USEC_PER_MSEC

#define NODES_SEL "/api/v1/nodes?labelSelector=pool%3Dgpu&limit=500"
#define DRIVER    "gpu.example.com"

struct env {
        struct test_api *api;
        struct selector **sels;
        size_t n_sels;
        struct drain_profile profile;
        struct drain_preparation *p;
        unsigned nodes, keys, keys_done, seamless, closed;
        int error;
        char message[512];
        char **names;
        size_t n_names;
        int key_error[4];
        struct seamless_answer ans;
};

static int setup(void **state) {
        struct env *e = calloc(1, sizeof(*e));

        assert_non_null(e);
        e->api = test_api_new(&(struct test_api_options){ .user_yaml = "    token: prep-token\n" });
        assert_int_equal(selectors_parse_strv(claims_default_driver_selectors, &e->sels, &e->n_sels, NULL),
                         0);
        e->profile = (struct drain_profile){
                .drv_sels = e->sels,
                .n_drv_sels = e->n_sels,
                .grace = -1,
                .stop = &driver_stop_label,
                .drivers = { DRIVER },
                .n_drivers = 1,
        };
        *state = e;
        return 0;
}

static void run(struct env *e, uint64_t usec) {
        test_api_run(e->api, usec, MS);
}

static void on_closed(void *userdata) {
        ((struct env *)userdata)->closed++;
}

static void close_prep(struct env *e) {
        drain_preparation_close(TAKE_PTR(e->p), on_closed, e);
        for (int i = 0; i < 100 && !e->closed; i++)
                run(e, 0);
        assert_int_equal(e->closed, 1);
}

static int teardown(void **state) {
        struct env *e = *state;

        if (e->p)
                close_prep(e);
        run(e, 10 * MS);
        test_api_free(e->api);
        selectors_free(e->sels, e->n_sels);
        nodeset_free(e->names, e->n_names);
        free(e);
        return 0;
}

static void on_nodes(struct drain_preparation *p, int error, const char *message, char **names, size_t n,
                     void *userdata) {
        struct env *e = userdata;

        e->nodes++;
        e->error = error;
        snprintf(e->message, sizeof(e->message), "%s", message ? message : "");
        e->names = names;
        e->n_names = n;
}

static void on_key(struct drain_preparation *p, size_t i, int error, const char *key, const char *from,
                   const char *why, void *userdata) {
        struct env *e = userdata;

        assert_int_equal(i, e->keys);
        assert_true(i < ELEMENTSOF(e->key_error));
        e->key_error[i] = error;
        if (error < 0)
                assert_non_null(why);
        e->keys++;
}

static void on_keys_done(struct drain_preparation *p, int error, const char *message, void *userdata) {
        struct env *e = userdata;

        e->keys_done++;
        e->error = error;
        snprintf(e->message, sizeof(e->message), "%s", message ? message : "");
}

static void on_seamless(struct drain_preparation *p, int error, const char *message,
                        const struct seamless_answer *ans, void *userdata) {
        struct env *e = userdata;

        e->seamless++;
        e->error = error;
        if (ans)
                e->ans = *ans;
}

static const struct preparation_callbacks callbacks = {
        .on_nodes = on_nodes,
        .on_key = on_key,
        .on_keys_done = on_keys_done,
        .on_seamless = on_seamless,
};

static void start(struct env *e) {
        assert_int_equal(drain_preparation_new(e->api->client, e->api->ts, &callbacks, e, &e->p), 0);
}

static char *node_item(const char *name) {
        return test_asprintf("{\"metadata\":{\"name\":\"%s\",\"uid\":\"u-%s\"}}", name, name);
}

static void expect_list(struct env *e, const char *path, const char *kind, char **items) {
        _cleanup_free_ char *prefix = test_asprintf("%s%slimit=", path, strchr(path, '?') ? "&" : "?");
        _cleanup_free_ char *body = fake_api_list_strv(kind, items);

        fake_transport_expect_json(e->api->ft, "GET", prefix, 200, body);
}

/* A node's snapshot (no PDBs): the Node, the pods given, no claims, no slices. */
static void expect_snapshot(struct env *e, const char *node, char **pods) {
        _cleanup_free_ char *get = test_asprintf("/api/v1/nodes/%s", node);
        _cleanup_free_ char *pods_path =
                test_asprintf("/api/v1/pods?fieldSelector=spec.nodeName%%3D%s", node);
        _cleanup_free_ char *slices = test_asprintf(
                "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%%3D%s", node);
        _cleanup_free_ char *body = test_asprintf(
                "{\"metadata\":{\"name\":\"%s\",\"uid\":\"u-%s\",\"resourceVersion\":\"90\"},\"spec\":{},"
                "\"status\":{}}",
                node, node);

        fake_transport_expect_json(e->api->ft, "GET", get, 200, body);
        expect_list(e, pods_path, "PodList", pods);
        expect_list(e, FAKE_API_CLAIMS, "ResourceClaimList", (char *[]){ NULL });
        expect_list(e, slices, "ResourceSliceList", (char *[]){ NULL });
}

/* The nodes of a selector over two pages (a continue token), sorted. */
static void test_nodes_paged(void **state) {
        struct env *e = *state;
        _cleanup_free_ char *page1 = NULL, *page2 = NULL;
        _cleanup_free_ char *n3 = node_item("node-3"), *n1 = node_item("node-1"), *n2 = node_item("node-2");

        page1 = test_asprintf("{\"kind\":\"NodeList\",\"metadata\":{\"resourceVersion\":\"7\",\"continue\":"
                              "\"c1\"},\"items\":[%s,%s]}",
                              n3, n1);
        page2 = test_asprintf(
                "{\"kind\":\"NodeList\",\"metadata\":{\"resourceVersion\":\"7\"},\"items\":[%s]}", n2);
        fake_transport_expect_json(e->api->ft, "GET", NODES_SEL "&continue=c1", 200, page2);
        fake_transport_expect_json(e->api->ft, "GET", NODES_SEL, 200, page1);
        start(e);
        assert_int_equal(drain_preparation_list_nodes(e->p, "pool=gpu"), 0);
        assert_int_equal(e->nodes, 0); /* never from inside the call */
        run(e, 100 * MS);
        assert_int_equal(e->nodes, 1);
        assert_int_equal(e->error, 0);
        assert_int_equal(e->n_names, 3);
        assert_string_equal(e->names[0], "node-1");
        assert_string_equal(e->names[1], "node-2");
        assert_string_equal(e->names[2], "node-3");
        assert_int_equal(fake_transport_count(e->api->ft, "GET", "/api/v1/nodes?labelSelector="), 2);
}

/* A list the API server refuses: its error and message, no names. */
static void test_nodes_refused(void **state) {
        struct env *e = *state;

        fake_transport_expect_json(e->api->ft, "GET", NODES_SEL, 403,
                                   "{\"kind\":\"Status\",\"code\":403,\"reason\":\"Forbidden\",\"message\":"
                                   "\"nodes is forbidden\"}");
        start(e);
        assert_int_equal(drain_preparation_list_nodes(e->p, "pool=gpu"), 0);
        run(e, 100 * MS);
        assert_int_equal(e->nodes, 1);
        assert_int_equal(e->error, -EACCES);
        assert_string_equal(e->message, "nodes is forbidden");
        assert_null(e->names);
}

/* Two runs on node-1, one on node-2; no driver pod anywhere: no DaemonSet says the
 * KEY, so each run answers -EPERM with why; one snapshot per node. */
static void test_keys_refused_one_snapshot_per_node(void **state) {
        struct env *e = *state;
        const struct fleet_run runs[] = {
                { .node = "node-1", .profile = &e->profile },
                { .node = "node-1", .profile = &e->profile },
                { .node = "node-2", .profile = &e->profile },
        };

        expect_snapshot(e, "node-1", (char *[]){ NULL });
        expect_snapshot(e, "node-2", (char *[]){ NULL });
        start(e);
        assert_int_equal(drain_preparation_read_keys(e->p, runs, ELEMENTSOF(runs)), 0);
        run(e, 200 * MS);
        assert_int_equal(e->keys, 3);
        for (size_t i = 0; i < 3; i++)
                assert_int_equal(e->key_error[i], -EPERM);
        assert_int_equal(e->keys_done, 1);
        assert_int_equal(e->error, 0);
        assert_int_equal(fake_transport_count(e->api->ft, "GET", "/api/v1/nodes/node-1"), 1);
        assert_int_equal(fake_transport_count(e->api->ft, "GET", "/api/v1/nodes/node-2"), 1);
}

/* A snapshot that fails (the node is gone) ends the keys, saying what failed. */
static void test_keys_snapshot_fails(void **state) {
        struct env *e = *state;
        const struct fleet_run runs[] = { { .node = "node-9", .profile = &e->profile } };

        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/nodes/node-9", 404,
                                   "{\"kind\":\"Status\",\"code\":404,\"reason\":\"NotFound\",\"message\":"
                                   "\"nodes \\\"node-9\\\" not found\"}");
        expect_list(e, "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-9", "PodList", (char *[]){ NULL });
        expect_list(e, FAKE_API_CLAIMS, "ResourceClaimList", (char *[]){ NULL });
        expect_list(e, "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3Dnode-9",
                    "ResourceSliceList", (char *[]){ NULL });
        start(e);
        assert_int_equal(drain_preparation_read_keys(e->p, runs, 1), 0);
        run(e, 100 * MS);
        assert_int_equal(e->keys, 0);
        assert_int_equal(e->keys_done, 1);
        assert_int_equal(e->error, -ENOENT);
        test_assert_contains(e->message, "node-9");
}

/* maintain --driver: no DaemonSet-controlled driver pod on the node, so no seamless
 * upgrade: the answer says so (the verb then drains first). */
static void test_seamless_refused(void **state) {
        struct env *e = *state;

        expect_snapshot(e, "node-1",
                        (char *[]){ fake_api_pod(&(struct fake_pod){
                                            .name = "web-1", .meta = FAKE_OWNED_BY_RS("web-rs", "rs-web") }),
                                    NULL });
        start(e);
        assert_int_equal(drain_preparation_check_seamless(e->p, "node-1", &e->profile), 0);
        run(e, 100 * MS);
        assert_int_equal(e->seamless, 1);
        assert_int_equal(e->error, 0);
        assert_false(e->ans.seamless);
        assert_true(e->ans.why[0] != 0);
}

/* Closed while the node list and then a snapshot read: no callback after the close,
 * every request ended, closed once. */
static void test_close_midway(void **state) {
        struct env *e = *state;
        const struct fleet_run runs[] = { { .node = "node-1", .profile = &e->profile } };

        fake_transport_expect(
                e->api->ft, "GET", NODES_SEL,
                &(struct fake_reply){ .status = 200, .body = "{}", .delay_usec = 60 * 1000 * MS });
        start(e);
        assert_int_equal(drain_preparation_list_nodes(e->p, "pool=gpu"), 0);
        run(e, 10 * MS);
        close_prep(e);
        run(e, 100 * MS);
        assert_int_equal(e->nodes, 0);
        assert_int_equal(fake_transport_in_flight(e->api->ft), 0);

        e->closed = 0;
        fake_transport_expect(
                e->api->ft, "GET", "/api/v1/nodes/node-1",
                &(struct fake_reply){ .status = 200, .body = "{}", .delay_usec = 60 * 1000 * MS });
        expect_list(e, "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1", "PodList", (char *[]){ NULL });
        expect_list(e, FAKE_API_CLAIMS, "ResourceClaimList", (char *[]){ NULL });
        expect_list(e, "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3Dnode-1",
                    "ResourceSliceList", (char *[]){ NULL });
        start(e);
        assert_int_equal(drain_preparation_read_keys(e->p, runs, 1), 0);
        run(e, 10 * MS);
        close_prep(e);
        run(e, 100 * MS);
        assert_int_equal(e->keys + e->keys_done, 0);
        assert_int_equal(fake_transport_in_flight(e->api->ft), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_nodes_paged, setup, teardown),
                cmocka_unit_test_setup_teardown(test_nodes_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_keys_refused_one_snapshot_per_node, setup, teardown),
                cmocka_unit_test_setup_teardown(test_keys_snapshot_fails, setup, teardown),
                cmocka_unit_test_setup_teardown(test_seamless_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_close_midway, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
