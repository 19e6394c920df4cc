/* collect: a GET kept whole, a list's pages gathered into one array, an API error
 * with its message, a cancel answered -ECANCELED, and done never run from inside
 * the call that started the read. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "drainer/base/json.h"
#include "drainer/kube/collect.h"
#include "fakes/test-env.h"

static unsigned n_done;

static void on_done(struct kube_collect *c, void *userdata) {
        n_done++;
        *(struct kube_collect **)userdata = c;
}

static void test_get(void **state) {
        struct test_api *a = test_api_new(NULL);
        struct kube_collect c, *seen = NULL;

        n_done = 0;
        fake_transport_expect_json(a->ft, "GET", "/apis/apps/v1/namespaces/dra/daemonsets/plugin", 200,
                                   "{\"kind\":\"DaemonSet\",\"metadata\":{\"name\":\"plugin\"}}");
        assert_int_equal(kube_collect_get(a->client, "/apis/apps/v1/namespaces/dra/daemonsets/plugin",
                                          on_done, &seen, &c),
                         0);
        assert_int_equal(n_done, 0); /* never from inside the start */
        assert_true(c.running);
        fake_clock_advance(a->clock, 0);
        assert_int_equal(n_done, 1);
        assert_ptr_equal(seen, &c);
        assert_false(c.running);
        assert_int_equal(c.error, 0);
        assert_string_equal(json_str(c.json, "metadata.name"), "plugin");
        kube_collect_done(&c);
        test_api_free(a);
}

static void test_list_pages(void **state) {
        struct test_api *a = test_api_new(NULL);
        struct kube_collect c, *seen = NULL;

        n_done = 0;
        fake_transport_expect_json(
                a->ft, "GET", "/api/v1/pods?", 200,
                "{\"kind\":\"PodList\",\"metadata\":{\"continue\":\"p2\"},"
                "\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"}}]}");
        fake_transport_expect_json(a->ft, "GET", "/api/v1/pods?", 200,
                                   "{\"kind\":\"PodList\",\"metadata\":{},"
                                   "\"items\":[{\"metadata\":{\"name\":\"c\"}}]}");
        assert_int_equal(kube_collect_list(a->client, "/api/v1/pods?labelSelector=app%3Dx", 2, "0", on_done,
                                           &seen, &c),
                         0);
        for (int i = 0; i < 10 && n_done == 0; i++)
                fake_clock_advance(a->clock, 0);
        assert_int_equal(n_done, 1);
        assert_int_equal(c.error, 0);
        assert_int_equal(cJSON_GetArraySize(c.items), 3);
        assert_string_equal(json_str(cJSON_GetArrayItem(c.items, 2), "metadata.name"), "c");
        assert_null(c.json);
        kube_collect_done(&c);
        test_api_free(a);
}

static void test_error(void **state) {
        struct test_api *a = test_api_new(NULL);
        struct kube_collect c, *seen = NULL;

        n_done = 0;
        fake_transport_expect_json(a->ft, "GET", "/apis/apps/v1/namespaces/dra/daemonsets/gone", 404,
                                   "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"NotFound\","
                                   "\"message\":\"daemonsets.apps \\\"gone\\\" not found\",\"code\":404}");
        assert_int_equal(kube_collect_get(a->client, "/apis/apps/v1/namespaces/dra/daemonsets/gone", on_done,
                                          &seen, &c),
                         0);
        fake_clock_advance(a->clock, 0);
        assert_int_equal(n_done, 1);
        assert_int_equal(c.error, -ENOENT);
        assert_int_equal(c.status, 404);
        assert_non_null(strstr(c.message, "not found"));
        assert_null(c.json);
        kube_collect_done(&c);
        test_api_free(a);
}

static void test_cancel(void **state) {
        struct test_api *a = test_api_new(NULL);
        struct kube_collect c, *seen = NULL;

        n_done = 0;
        fake_transport_expect(
                a->ft, "GET", "/api/v1/nodes",
                &(const struct fake_reply){ .body = "{\"items\":[]}", .delay_usec = 10 * USEC_PER_SEC });
        assert_int_equal(kube_collect_list(a->client, "/api/v1/nodes", 500, NULL, on_done, &seen, &c), 0);
        kube_collect_cancel(&c);
        assert_int_equal(n_done, 0);
        fake_clock_advance(a->clock, 0);
        assert_int_equal(n_done, 1);
        assert_int_equal(c.error, -ECANCELED);
        kube_collect_done(&c);
        test_api_free(a);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_get),
                cmocka_unit_test(test_list_pages),
                cmocka_unit_test(test_error),
                cmocka_unit_test(test_cancel),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
