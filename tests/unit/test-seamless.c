/* seamless: the reads behind the seamless-upgrade answer, on the fake API server and
 * the fake clock: a surging DaemonSet on 1.33+ kubelets is seamless; an old kubelet
 * among its nodes is not; no DaemonSet-controlled driver pod answers without a read
 * (from the loop); a failed read names what failed; a cancel answers -ECANCELED. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "drainer/dra/seamless.h"
#include "fakes/test-env.h"

#define DS_PATH "/apis/apps/v1/namespaces/dra/daemonsets/gpu-plugin"
#define DS_UID  "d5000000-0000-4000-8000-000000000001"

struct answer {
        unsigned done;
        int error;
        char what[256];
        struct seamless_answer ans;
};

static void on_done(int error, const char *what, const struct seamless_answer *ans, void *userdata) {
        struct answer *a = userdata;

        a->done++;
        a->error = error;
        snprintf(a->what, sizeof(a->what), "%s", what ? what : "");
        if (ans)
                a->ans = *ans;
}

static const char *ds_json(const char *strategy) {
        static char buf[1024];

        snprintf(buf, sizeof(buf),
                 "{\"kind\":\"DaemonSet\",\"metadata\":{\"name\":\"gpu-plugin\",\"namespace\":\"dra\","
                 "\"uid\":\"" DS_UID
                 "\"},\"spec\":{\"updateStrategy\":%s,\"template\":{\"spec\":{\"containers\":[{\"args\":"
                 "[\"--driver=gpu.example.com\"]}]}}}}",
                 strategy);
        return buf;
}

#define SURGE "{\"type\":\"RollingUpdate\",\"rollingUpdate\":{\"maxSurge\":1,\"maxUnavailable\":0}}"

static const char *pods_json(void) {
        return "{\"kind\":\"PodList\",\"metadata\":{},\"items\":["
               "{\"metadata\":{\"name\":\"p1\",\"ownerReferences\":[{\"kind\":\"DaemonSet\",\"name\":\"gpu-"
               "plugin\","
               "\"uid\":\"" DS_UID "\",\"controller\":true}]},\"spec\":{\"nodeName\":\"node-1\"}},"
               "{\"metadata\":{\"name\":\"p2\",\"ownerReferences\":[{\"kind\":\"DaemonSet\",\"name\":\"gpu-"
               "plugin\","
               "\"uid\":\"" DS_UID "\",\"controller\":true}]},\"spec\":{\"nodeName\":\"node-2\"}},"
               "{\"metadata\":{\"name\":\"other\"},\"spec\":{\"nodeName\":\"node-3\"}}]}";
}

static char *nodes_json(const char *v2) {
        return test_asprintf(
                "{\"kind\":\"NodeList\",\"metadata\":{},\"items\":["
                "{\"metadata\":{\"name\":\"node-1\"},\"status\":{\"nodeInfo\":{\"kubeletVersion\":"
                "\"v1.34.1\"}}},"
                "{\"metadata\":{\"name\":\"node-2\"},\"status\":{\"nodeInfo\":{\"kubeletVersion\":\"%s\"}}},"
                "{\"metadata\":{\"name\":\"node-3\"},\"status\":{\"nodeInfo\":{\"kubeletVersion\":"
                "\"v1.20.0\"}}}]}",
                v2);
}

static const struct owner_ref ds_ref = { .api_version = "apps/v1",
                                         .kind = "DaemonSet",
                                         .name = "gpu-plugin",
                                         .uid = DS_UID,
                                         .controller = true };

static void run_check(struct test_api *t, struct answer *a, const struct pod_rec *const *pods, size_t n) {
        struct seamless_check *s;

        assert_int_equal(seamless_check_start(t->client, t->ts, "gpu.example.com", pods, n, on_done, a, &s),
                         0);
        assert_int_equal(a->done, 0); /* never from inside the start */
        for (int i = 0; i < 20 && a->done == 0; i++)
                fake_clock_advance(t->clock, 0);
        assert_int_equal(a->done, 1);
}

static void check_versions(const char *v2, bool want) {
        struct test_api *t = test_api_new(NULL);
        struct pod_rec pod = { .ns = "dra", .name = "p1", .controller = &ds_ref };
        const struct pod_rec *pods[] = { &pod, &pod }; /* one DaemonSet read once */
        _cleanup_free_ char *nodes = nodes_json(v2);
        struct answer a = {};

        fake_transport_expect_json(t->ft, "GET", DS_PATH, 200, ds_json(SURGE));
        fake_transport_expect_json(t->ft, "GET", "/api/v1/namespaces/dra/pods", 200, pods_json());
        fake_transport_expect_json(t->ft, "GET", "/api/v1/nodes", 200, nodes);
        run_check(t, &a, pods, 2);
        assert_int_equal(a.error, 0);
        assert_int_equal(a.ans.seamless, want);
        assert_string_equal(a.ans.daemonset, "dra/gpu-plugin");
        assert_true(a.ans.why[0]);
        assert_int_equal(fake_transport_count(t->ft, "GET", DS_PATH), 1);
        test_api_free(t);
}

static void test_seamless(void **state) {
        check_versions("v1.33.0", true);
}

static void test_old_kubelet(void **state) {
        check_versions("v1.32.4", false);
}

static void test_no_daemonset(void **state) {
        struct test_api *t = test_api_new(NULL);
        struct pod_rec pod = { .ns = "dra", .name = "bare" }; /* no controller */
        const struct pod_rec *pods[] = { &pod };
        struct answer a = {};

        run_check(t, &a, pods, 1);
        assert_int_equal(a.error, 0);
        assert_false(a.ans.seamless);
        assert_string_equal(a.ans.daemonset, "");
        assert_non_null(strstr(a.ans.why, "no DaemonSet of driver gpu.example.com"));
        assert_int_equal(fake_transport_n_requests(t->ft), 0);
        test_api_free(t);
}

static void test_read_fails(void **state) {
        struct test_api *t = test_api_new(NULL);
        struct pod_rec pod = { .ns = "dra", .name = "p1", .controller = &ds_ref };
        const struct pod_rec *pods[] = { &pod };
        struct answer a = {};

        fake_transport_expect_json(t->ft, "GET", DS_PATH, 403,
                                   "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Forbidden\","
                                   "\"message\":\"daemonsets.apps is forbidden\",\"code\":403}");
        run_check(t, &a, pods, 1);
        assert_int_equal(a.error, -EACCES);
        assert_non_null(strstr(a.what, DS_PATH));
        assert_non_null(strstr(a.what, "forbidden"));
        test_api_free(t);
}

static void test_cancel(void **state) {
        struct test_api *t = test_api_new(NULL);
        struct pod_rec pod = { .ns = "dra", .name = "p1", .controller = &ds_ref };
        const struct pod_rec *pods[] = { &pod };
        struct seamless_check *s;
        struct answer a = {};

        fake_transport_expect(t->ft, "GET", DS_PATH,
                              &(const struct fake_reply){ .body = "{}", .delay_usec = 10 * USEC_PER_SEC });
        assert_int_equal(seamless_check_start(t->client, t->ts, "gpu.example.com", pods, 1, on_done, &a, &s),
                         0);
        seamless_check_cancel(s);
        fake_clock_advance(t->clock, 0);
        assert_int_equal(a.done, 1);
        assert_int_equal(a.error, -ECANCELED);
        test_api_free(t);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_seamless),     cmocka_unit_test(test_old_kubelet),
                cmocka_unit_test(test_no_daemonset), cmocka_unit_test(test_read_fails),
                cmocka_unit_test(test_cancel),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
