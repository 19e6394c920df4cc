/* The status watch (ctl/statuswatch.c) over the real client and node view, a fake
 * clock and a scripted fake transport, never sleeping: nothing is handed before
 * every part has its first list; then one change per debounce interval, however many
 * events came in it; a node that does not exist comes as in->node NULL; a failed
 * watch is reported with its part's name; closing stops everything, the closed
 * callback from the loop, no call left behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/timesrc.h"
#include "drainer/ctl/statuswatch.h"
#include "drainer/dra/nodeview.h"
#include "fakes/fake-apiserver.h"
#include "fakes/fake-clock.h"
#include "fakes/fake-transport.h"
#include "fakes/test-env.h"

#define MS USEC_PER_MSEC

#define NODES FAKE_API_NODES
#define PODS  FAKE_API_PODS

#define PARTS (NODE_VIEW_NODE | NODE_VIEW_PODS)

struct env {
        struct test_api *api;
        struct status_watch *w;
        unsigned changes, errors, closed;
        bool had_node;
        size_t n_pods;
        char last_error[256];
};

static int setup(void **state) {
        struct env *e = calloc(1, sizeof(*e));

        assert_non_null(e);
        e->api = test_api_new(NULL);
        *state = e;
        return 0;
}

static int teardown(void **state) {
        struct env *e = *state;

        test_api_free(e->api);
        free(e);
        return 0;
}

static void on_change(struct status_watch *w, const struct node_input *in, void *userdata) {
        struct env *e = userdata;

        assert_non_null(in);
        e->changes++;
        e->had_node = in->node != NULL;
        e->n_pods = in->n_pods;
}

static void on_error(struct status_watch *w, const char *part, int error, const char *message,
                     void *userdata) {
        struct env *e = userdata;

        e->errors++;
        snprintf(e->last_error, sizeof(e->last_error), "%s: %s", part, message ? message : "?");
}

static void on_closed(void *userdata) {
        ((struct env *)userdata)->closed++;
}

static const struct status_watch_handlers handlers = { .on_change = on_change, .on_error = on_error };

static char *node_json(void) {
        return test_asprintf("{\"metadata\":{\"name\":\"node-1\",\"uid\":\"" FAKE_API_NODE_UID
                             "\",\"resourceVersion\":\"90\"},\"spec\":{},"
                             "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}");
}

static void start(struct env *e) {
        assert_int_equal(
                status_watch_new(e->api->client, e->api->ts, "node-1", PARTS, 250 * MS, &handlers, e, &e->w),
                0);
}

static void close_watch(struct env *e) {
        status_watch_close(TAKE_PTR(e->w), on_closed, e);
        assert_int_equal(e->closed, 0);
        test_api_run(e->api, 50 * MS, MS);
        assert_int_equal(e->closed, 1);
        assert_int_equal(fake_transport_open_streams(e->api->ft), 0);
}

static void push_pod(struct env *e, const char *type, const char *name, unsigned rv) {
        char *obj = fake_api_pod(&(const struct fake_pod){ .name = name, .rv = rv });
        char *ev = fake_api_watch_event(type, obj);

        assert_int_equal(fake_transport_push(e->api->ft, PODS "&watch=1", ev), 1);
        free(ev);
        free(obj);
}

/* Synced: one change after the debounce; three pod events within it: one more. */
static void test_debounced(void **state) {
        struct env *e = *state;

        fake_api_expect_list_and_watch(e->api->ft, NODES, NODES "&limit=",
                                       fake_api_list_strv("NodeList", (char *[]){ node_json(), NULL }));
        fake_api_expect_list_and_watch(e->api->ft, PODS,
                                       PODS "&limit=", fake_api_list_strv("PodList", (char *[]){ NULL }));
        start(e);
        test_api_run(e->api, 0, MS);
        assert_int_equal(e->changes, 0);
        test_api_run(e->api, 240 * MS, MS);
        assert_int_equal(e->changes, 0);
        test_api_run(e->api, 20 * MS, MS);
        assert_int_equal(e->changes, 1);
        assert_true(e->had_node);
        assert_int_equal(e->n_pods, 0);

        push_pod(e, "ADDED", "a", 51);
        test_api_run(e->api, 100 * MS, MS);
        push_pod(e, "ADDED", "b", 52);
        push_pod(e, "MODIFIED", "a", 53);
        test_api_run(e->api, 100 * MS, MS);
        assert_int_equal(e->changes, 1);
        test_api_run(e->api, 100 * MS, MS);
        assert_int_equal(e->changes, 2);
        assert_int_equal(e->n_pods, 2);
        test_api_run(e->api, 2000 * MS, 10 * MS);
        assert_int_equal(e->changes, 2); /* nothing changed, nothing handed */
        close_watch(e);
}

/* Not before every part is synced; an unknown node comes as in->node NULL. */
static void test_waits_for_sync_and_unknown_node(void **state) {
        struct env *e = *state;

        fake_api_expect_list_and_watch(e->api->ft, NODES,
                                       NODES "&limit=", fake_api_list_strv("NodeList", (char *[]){ NULL }));
        fake_transport_expect_json(e->api->ft, "GET", PODS "&limit=", 403,
                                   "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Forbidden\","
                                   "\"message\":\"pods is forbidden\",\"code\":403}");
        start(e);
        test_api_run(e->api, 500 * MS, MS);
        assert_int_equal(e->changes, 0);
        assert_true(e->errors >= 1);
        test_assert_contains(e->last_error, "pods is forbidden");

        fake_api_expect_list_and_watch(e->api->ft, PODS,
                                       PODS "&limit=", fake_api_list_strv("PodList", (char *[]){ NULL }));
        test_api_run(e->api, 5000 * MS, 10 * MS);
        assert_int_equal(e->changes, 1);
        assert_false(e->had_node);
        close_watch(e);
}

/* Closed while a change waits in the debounce: it never comes. */
static void test_close_while_debouncing(void **state) {
        struct env *e = *state;

        fake_api_expect_list_and_watch(e->api->ft, NODES, NODES "&limit=",
                                       fake_api_list_strv("NodeList", (char *[]){ node_json(), NULL }));
        fake_api_expect_list_and_watch(e->api->ft, PODS,
                                       PODS "&limit=", fake_api_list_strv("PodList", (char *[]){ NULL }));
        start(e);
        test_api_run(e->api, 100 * MS, MS);
        assert_int_equal(e->changes, 0);
        close_watch(e);
        test_api_run(e->api, 500 * MS, MS);
        assert_int_equal(e->changes, 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_debounced, setup, teardown),
                cmocka_unit_test_setup_teardown(test_waits_for_sync_and_unknown_node, setup, teardown),
                cmocka_unit_test_setup_teardown(test_close_while_debouncing, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
