/* recjson: a pod and a ResourceClaim as status shows them in JSON (dra/recjson.c), from
 * records parsed out of real API objects. Covered: a DaemonSet's driver pod (phase,
 * controller, no claims), a claim-holding pod (its claims), a claim allocated and
 * reserved for two pods (its reason, devices and reservations, held by a driver). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "drainer/base/json.h"
#include "drainer/dra/recjson.h"
#include "fakes/test-env.h"

static const char *str(const cJSON *j, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);

        assert_true(cJSON_IsString(v));
        return v->valuestring;
}

static struct pod_rec *pod_of(const char *fixture) {
        _cleanup_(cJSON_Deletep) cJSON *j = test_fixture_json(fixture);
        struct pod_rec *p = NULL;

        assert_int_equal(pod_rec_from_json(j, &p), 0);
        return p;
}

static void test_pods(void **state) {
        struct pod_rec *drv = pod_of("api/pod-driver.json"), *holder = pod_of("api/pod-claim-name.json");
        _cleanup_(cJSON_Deletep) cJSON *d = pod_rec_to_json(drv), *h = pod_rec_to_json(holder);

        assert_string_equal(str(d, "namespace"), "dra-example-driver");
        assert_string_equal(str(d, "name"), "dra-example-driver-kubeletplugin-8wnxm");
        assert_string_equal(str(d, "phase"), "Running");
        assert_string_equal(str(cJSON_GetObjectItem(d, "controller"), "kind"), "DaemonSet");
        assert_false(cJSON_IsTrue(cJSON_GetObjectItem(d, "terminating")));
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(d, "claims")), 0);
        assert_true(cJSON_GetArraySize(cJSON_GetObjectItem(h, "claims")) >= 1);
        assert_string_equal(str(h, "name"), holder->name);
        pod_rec_free(drv);
        pod_rec_free(holder);
}

static void test_claim(void **state) {
        _cleanup_(cJSON_Deletep) cJSON *in = test_fixture_json("api/claim-reserved.json"), *j = NULL;
        struct claim_rec *c = NULL;
        const cJSON *dev, *res;

        assert_int_equal(claim_rec_from_json(in, &c), 0);
        j = claim_rec_to_json(c, CLAIM_RESERVED_BY_NODE_POD, true);
        assert_non_null(j);
        assert_string_equal(str(j, "namespace"), "ml");
        assert_string_equal(str(j, "name"), "shared-gpu");
        assert_string_equal(str(j, "reason"), claim_on_node_reason_to_string(CLAIM_RESERVED_BY_NODE_POD));
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "allocated")));
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "heldByDriver")));
        dev = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "devices"), 0);
        assert_string_equal(str(dev, "request"), "shared");
        assert_string_equal(str(dev, "driver"), "remote-gpu.example.com");
        assert_string_equal(str(dev, "pool"), "rack-7");
        assert_string_equal(str(dev, "device"), "rgpu-12");
        assert_null(cJSON_GetObjectItem(dev, "adminAccess"));
        res = cJSON_GetObjectItem(j, "reservedFor");
        assert_int_equal(cJSON_GetArraySize(res), 2);
        assert_string_equal(str(cJSON_GetArrayItem(res, 1), "name"), "inference-1");
        assert_string_equal(str(cJSON_GetArrayItem(res, 1), "uid"), "a1111111-2222-4333-8444-666666666666");
        claim_rec_free(c);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_pods),
                cmocka_unit_test(test_claim),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
