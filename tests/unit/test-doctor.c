/* Unit tests of `drainer doctor` (drainer/doctor/): subjects and their roles,
 * SubjectAccessReview requests and answers, probe/guard/rollout reading of
 * DaemonSets, kubelet versions, the scaled QPS floor, the client flags of
 * static pods, Prometheus answers and the guide's interpretation rules, and
 * the report (order, exit code, JSON and text). JSON inputs are fixtures in
 * tests/unit/fixtures/doctor/. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "drainer/base/json.h"
#include "drainer/base/timesrc.h"
#include "drainer/doctor/doctor-gather.h"
#include "drainer/doctor/doctor-rules.h"
#include "drainer/dra/claims.h"
#include "drainer/dra/health.h"
#include "drainer/kube/client.h"
#include "drainer/kube/kstatus.h"
#include "drainer/kube/kubeconfig.h"
#include "drainer/kube/objects.h"
#include "drainer/kube/transport.h"

#include "fakes/fake-clock.h"
#include "fakes/fake-transport.h"
#include "fakes/test-env.h"

/* A fixture of tests/unit/fixtures/doctor/. */
static cJSON *load(const char *name) {
        char path[4096], *buf;
        FILE *f;
        long n;
        cJSON *j;

        snprintf(path, sizeof path, "%s/doctor/%s", FIXTURES, name);
        f = fopen(path, "re");
        if (!f)
                fail_msg("cannot open %s", path);
        assert_int_equal(fseek(f, 0, SEEK_END), 0);
        n = ftell(f);
        rewind(f);
        buf = malloc((size_t)n + 1);
        assert_non_null(buf);
        assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
        buf[n] = 0;
        fclose(f);
        j = cJSON_Parse(buf);
        free(buf);
        if (!j)
                fail_msg("%s is not JSON", path);
        return j;
}

/* The "cases" of a fixture. */
#define for_each_case(c, fx) cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(fx, "cases"))

/* An errno named in a fixture ("EINVAL"); 0 for none. */
static int errno_named(const char *s) {
        static const struct {
                const char *name;
                int error;
        } names[] = {
                { "EINVAL", EINVAL },       { "EBADMSG", EBADMSG },
                { "EPROTO", EPROTO },       { "ECONNREFUSED", ECONNREFUSED },
                { "ETIMEDOUT", ETIMEDOUT }, { "EHOSTUNREACH", EHOSTUNREACH },
        };

        if (!s)
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (strcmp(names[i].name, s) == 0)
                        return names[i].error;
        fail_msg("unknown errno %s in a fixture", s);
        return 0;
}

static void test_strings(void **state) {
        assert_string_equal(doctor_status_to_string(DOCTOR_FAIL), "FAIL");
        assert_int_equal(doctor_status_from_string("WARN"), DOCTOR_WARN);
        assert_int_equal(doctor_status_from_string("nope"), _DOCTOR_STATUS_INVALID);
        assert_null(doctor_status_to_string(_DOCTOR_STATUS_MAX));
        assert_string_equal(doctor_section_title(DOCTOR_SECTION_PERMISSIONS),
                            "Separate permissions to DRA related APIs");
        assert_string_equal(doctor_section_practice(DOCTOR_SECTION_LIVENESS),
                            "DRA driver deployment and maintenance");
        assert_string_equal(doctor_section_title(DOCTOR_SECTION_DRAIN),
                            "When draining a node, drain the DRA driver as late as possible");
        assert_string_equal(
                doctor_section_practice(DOCTOR_SECTION_PLUGIN_METRICS),
                "Monitor and tune components for higher load, especially in high scale environments");
        for (int s = 0; s < _DOCTOR_SECTION_MAX; s++) {
                assert_non_null(doctor_section_title(s));
                assert_non_null(doctor_section_practice(s));
        }
        assert_int_equal(doctor_subject_kind_from_string("ServiceAccount"), DOCTOR_SUBJECT_SERVICE_ACCOUNT);
        assert_int_equal(doctor_subject_kind_from_string("user"), _DOCTOR_SUBJECT_KIND_INVALID);
        assert_string_equal(doctor_subject_role_to_string(DOCTOR_ROLE_DRIVER), "dra-driver");
}

static enum doctor_subject_role role(enum doctor_subject_kind k, const char *name, const char *ns,
                                     bool admin) {
        static const char *const sas[] = { "dra-system/default", "gpu/nvidia-dra" };
        struct doctor_subject s = { .kind = k, .name = name, .ns = ns };

        return doctor_subject_role(&s, admin, sas, ELEMENTSOF(sas));
}

static void test_subject_role(void **state) {
        assert_int_equal(role(DOCTOR_SUBJECT_GROUP, "system:masters", NULL, false), DOCTOR_ROLE_ADMIN);
        assert_int_equal(role(DOCTOR_SUBJECT_USER, "alice", NULL, true), DOCTOR_ROLE_ADMIN);
        assert_int_equal(role(DOCTOR_SUBJECT_USER, "alice", NULL, false), DOCTOR_ROLE_OTHER);
        assert_int_equal(role(DOCTOR_SUBJECT_USER, "system:kube-controller-manager", NULL, false),
                         DOCTOR_ROLE_CONTROL_PLANE);
        assert_int_equal(role(DOCTOR_SUBJECT_USER, "system:kube-scheduler", NULL, false),
                         DOCTOR_ROLE_CONTROL_PLANE);
        assert_int_equal(role(DOCTOR_SUBJECT_USER, "system:node:node-1", NULL, false),
                         DOCTOR_ROLE_CONTROL_PLANE);
        assert_int_equal(role(DOCTOR_SUBJECT_USER, "system:kube-proxy", NULL, false), DOCTOR_ROLE_OTHER);
        assert_int_equal(role(DOCTOR_SUBJECT_USER, "system:serviceaccount:kube-system:x", NULL, false),
                         DOCTOR_ROLE_CONTROL_PLANE);
        assert_int_equal(role(DOCTOR_SUBJECT_GROUP, "system:nodes", NULL, false), DOCTOR_ROLE_CONTROL_PLANE);
        assert_int_equal(role(DOCTOR_SUBJECT_GROUP, "system:authenticated", NULL, false), DOCTOR_ROLE_OTHER);
        assert_int_equal(
                role(DOCTOR_SUBJECT_SERVICE_ACCOUNT, "resource-claim-controller", "kube-system", false),
                DOCTOR_ROLE_CONTROL_PLANE);
        assert_int_equal(role(DOCTOR_SUBJECT_SERVICE_ACCOUNT, "default", "dra-system", false),
                         DOCTOR_ROLE_DRIVER);
        assert_int_equal(role(DOCTOR_SUBJECT_SERVICE_ACCOUNT, "nvidia-dra", "gpu", false),
                         DOCTOR_ROLE_DRIVER);
        /* Same name, other namespace; a namespace that is a prefix of the driver's. */
        assert_int_equal(role(DOCTOR_SUBJECT_SERVICE_ACCOUNT, "default", "demo", false), DOCTOR_ROLE_OTHER);
        assert_int_equal(role(DOCTOR_SUBJECT_SERVICE_ACCOUNT, "nvidia-dra", "g", false), DOCTOR_ROLE_OTHER);
        assert_int_equal(role(DOCTOR_SUBJECT_SERVICE_ACCOUNT, "default", "dra-system-x", false),
                         DOCTOR_ROLE_OTHER);
        assert_int_equal(role(DOCTOR_SUBJECT_USER, "system:serviceaccount:dra-system:default", NULL, false),
                         DOCTOR_ROLE_DRIVER);
        assert_int_equal(role(DOCTOR_SUBJECT_USER, "system:serviceaccount:dra-system:other", NULL, false),
                         DOCTOR_ROLE_OTHER);
        assert_int_equal(role(DOCTOR_SUBJECT_USER, "system:serviceaccount:dra-system", NULL, false),
                         DOCTOR_ROLE_OTHER);
        /* A User named like a driver ServiceAccount is not one. */
        assert_int_equal(role(DOCTOR_SUBJECT_USER, "default", NULL, false), DOCTOR_ROLE_OTHER);
}

static void test_sar(void **state) {
        struct doctor_subject sa = { DOCTOR_SUBJECT_SERVICE_ACCOUNT, "drv", "dra" };
        struct doctor_subject grp = { DOCTOR_SUBJECT_GROUP, "system:authenticated", NULL };
        struct doctor_subject usr = { DOCTOR_SUBJECT_USER, "alice", NULL };
        cJSON *j, *fx;
        const cJSON *c;
        char *s;
        bool allowed = true;
        const char *reason = "x";

        j = doctor_sar_request(&sa, NULL, "resource.k8s.io", "resourceslices", "create");
        assert_non_null(j);
        assert_string_equal(json_str(j, "kind"), "SubjectAccessReview");
        assert_string_equal(json_str(j, "apiVersion"), "authorization.k8s.io/v1");
        assert_string_equal(json_str(j, "spec.user"), "system:serviceaccount:dra:drv");
        assert_null(json_path(j, "spec.groups"));
        assert_string_equal(json_str(j, "spec.resourceAttributes.group"), "resource.k8s.io");
        assert_string_equal(json_str(j, "spec.resourceAttributes.resource"), "resourceslices");
        assert_string_equal(json_str(j, "spec.resourceAttributes.verb"), "create");
        assert_null(json_path(j, "spec.resourceAttributes.namespace"));
        cJSON_Delete(j);

        j = doctor_sar_request(&grp, "team-a", "resource.k8s.io", "resourceclaims", "create");
        assert_null(json_path(j, "spec.user"));
        assert_int_equal(cJSON_GetArraySize(json_path(j, "spec.groups")), 1);
        assert_string_equal(cJSON_GetArrayItem(json_path(j, "spec.groups"), 0)->valuestring,
                            "system:authenticated");
        assert_string_equal(json_str(j, "spec.resourceAttributes.namespace"), "team-a");
        cJSON_Delete(j);

        j = doctor_sar_request(&usr, NULL, "resource.k8s.io", "deviceclasses", "delete");
        assert_string_equal(json_str(j, "spec.user"), "alice");
        cJSON_Delete(j);

        s = doctor_subject_to_string(&sa);
        assert_string_equal(s, "ServiceAccount dra/drv");
        free(s);
        s = doctor_subject_to_string(&grp);
        assert_string_equal(s, "Group system:authenticated");
        free(s);

        fx = load("sar-answers.json");
        for_each_case(c, fx) {
                int want = -errno_named(json_str(c, "error"));

                allowed = !json_bool(c, "allowed", false);
                reason = "x";
                assert_int_equal(doctor_sar_parse(json_path(c, "answer"), &allowed, &reason), want);
                if (want < 0)
                        continue;
                assert_int_equal(allowed, json_bool(c, "allowed", false));
                if (json_str(c, "reason"))
                        assert_string_equal(reason, json_str(c, "reason"));
                else
                        assert_null(reason);
        }
        cJSON_Delete(fx);
}

static void test_container(void **state) {
        cJSON *fx = load("containers.json");
        const cJSON *c;

        for_each_case(c, fx) {
                const cJSON *container = json_path(c, "container");

                assert_string_equal(doctor_probe_to_string(doctor_container_liveness(container)),
                                    json_str(c, "probe"));
                assert_int_equal(doctor_container_has_guard(json_path(c, "podspec"), container),
                                 json_bool(c, "guard", false));
        }
        cJSON_Delete(fx);
        assert_string_equal(doctor_probe_to_string(DOCTOR_PROBE_HTTP), "httpGet");
}

static void test_rollout(void **state) {
        cJSON *fx = load("rollouts.json");
        const cJSON *c;

        for_each_case(c, fx) {
                const char *surge = NULL;

                assert_string_equal(
                        daemonset_rollout_to_string(daemonset_rollout(json_path(c, "daemonset"), &surge)),
                        json_str(c, "rollout"));
                assert_string_equal(surge, json_str(c, "surge"));
        }
        cJSON_Delete(fx);
        assert_string_equal(daemonset_rollout_to_string(DAEMONSET_ROLLOUT_ON_DELETE), "OnDelete");
}

static void test_kubelet_version(void **state) {
        static const struct {
                const char *v;
                int seamless;
        } cases[] = {
                { "v1.33.0", 1 },          { "v1.36.3", 1 },
                { "v1.32.4", 0 },          { "v1.33.2-eks-113cf36", 1 },
                { "1.34.0+k3s1", 1 },      { "v1.29.15-gke.1", 0 },
                { "v2.0.0", 1 },           { "v1.33", 1 },
                { "v0.0.0-sim", -EINVAL }, { "", -EINVAL },
                { "vX", -EINVAL },         { "v1", -EINVAL },
                { "v1.x", -EINVAL },       { "v1.33beta", -EINVAL },
                { NULL, -EINVAL },
        };
        int major = 0, minor = 0;

        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                assert_int_equal(kubelet_seamless_upgrades(cases[i].v), cases[i].seamless);
        assert_int_equal(kubelet_version_parse("v1.32.4", &major, &minor), 0);
        assert_int_equal(major, 1);
        assert_int_equal(minor, 32);
}

static void test_scaled_floor(void **state) {
        double qps;
        int burst;

        doctor_scaled_floor(100, 0, &qps, &burst);
        assert_true(qps == 75 && burst == 150);
        doctor_scaled_floor(100, 800, &qps, &burst);
        assert_true(qps == 75 && burst == 150);
        doctor_scaled_floor(3, 0, &qps, &burst);
        assert_true(qps == 3 && burst == 5); /* 2.25 and 4.5, rounded up */
        doctor_scaled_floor(200, 10, &qps, &burst);
        assert_true(qps == 150 && burst == 300);
        /* Claims weigh as much as nodes: 1600 claims on 10 nodes is twice the test. */
        doctor_scaled_floor(10, 1600, &qps, &burst);
        assert_true(qps == 150 && burst == 300);
        doctor_scaled_floor(0, 0, &qps, &burst);
        assert_true(qps == 0 && burst == 0);
}

static void test_client_conn(void **state) {
        cJSON *fx = load("client-flags.json");
        const cJSON *c;

        for_each_case(c, fx) {
                struct doctor_client_conn conn = { .qps = -1 };
                const cJSON *qps = json_path(c, "qps"), *burst = json_path(c, "burst");
                int want = -errno_named(json_str(c, "error"));

                assert_int_equal(doctor_client_conn_from_pod(json_path(c, "pod"), &conn), want);
                if (want < 0)
                        continue;
                assert_int_equal(conn.have_qps, cJSON_IsNumber(qps));
                if (cJSON_IsNumber(qps))
                        assert_true(conn.qps == qps->valuedouble);
                assert_int_equal(conn.have_burst, cJSON_IsNumber(burst));
                if (cJSON_IsNumber(burst))
                        assert_int_equal(conn.burst, burst->valueint);
                assert_int_equal(conn.config_file, json_bool(c, "config", false));
        }
        cJSON_Delete(fx);
}

static const struct doctor_finding *find(const struct doctor_report *r, const char *check,
                                         const char *subject) {
        for (size_t i = 0; i < r->n; i++)
                if (strcmp(r->items[i]->check, check) == 0 &&
                    (!subject || strcmp(r->items[i]->subject, subject) == 0))
                        return r->items[i];
        fail_msg("no finding %s/%s", check, subject ? subject : "*");
        return NULL;
}

static void test_report_client_qps(void **state) {
        struct doctor_report r = {};
        struct doctor_client_conn low = { .have_qps = true, .qps = 20, .have_burst = true, .burst = 30 };
        struct doctor_client_conn dflt = {};
        struct doctor_client_conn cfg = { .config_file = true };
        const struct doctor_finding *f;

        /* 200 nodes: floor 150/300; 20/30 is below it. */
        assert_int_equal(doctor_report_client_qps(&r, "kube-controller-manager", "kube-system/kcm-a", &low,
                                                  200, 0, false),
                         0);
        f = find(&r, "client-qps", "kube-controller-manager");
        assert_int_equal(f->status, DOCTOR_WARN);
        assert_non_null(strstr(f->message, "150/300"));
        assert_non_null(strstr(f->fix, "--kube-api-qps=150 --kube-api-burst=300"));
        assert_string_equal(f->objects[0], "Pod kube-system/kcm-a");
        assert_int_equal(json_int(f->details, "floorQPS", 0), 150);
        doctor_report_done(&r);

        /* 3 nodes: the scheduler's defaults (50/100) are enough. */
        assert_int_equal(doctor_report_client_qps(&r, "kube-scheduler", "kube-system/s", &dflt, 3, 2, false),
                         0);
        f = find(&r, "client-qps", "kube-scheduler");
        assert_int_equal(f->status, DOCTOR_PASS);
        assert_non_null(strstr(f->message, "50 (default)"));
        assert_null(f->fix);
        doctor_report_done(&r);

        /* Below a tiny floor: never advise less than the component's default. */
        low.qps = 2;
        low.burst = 3;
        assert_int_equal(
                doctor_report_client_qps(&r, "kube-controller-manager", "kube-system/k", &low, 3, 3, false),
                0);
        assert_int_equal(r.items[0]->status, DOCTOR_WARN);
        assert_non_null(strstr(r.items[0]->message, "3/5"));
        assert_non_null(strstr(r.items[0]->fix, "--kube-api-qps=20 --kube-api-burst=30"));
        doctor_report_done(&r);

        /* kube-controller-manager's defaults (20/30) at 100 nodes: below 75/150. */
        assert_int_equal(doctor_report_client_qps(&r, "kube-controller-manager", "kube-system/k", &dflt, 100,
                                                  0, false),
                         0);
        assert_int_equal(r.items[0]->status, DOCTOR_WARN);
        doctor_report_done(&r);

        assert_int_equal(doctor_report_client_qps(&r, "kube-scheduler", "kube-system/s", &cfg, 3, 0, false),
                         0);
        assert_int_equal(r.items[0]->status, DOCTOR_WARN);
        assert_non_null(strstr(r.items[0]->message, "--config"));
        doctor_report_done(&r);

        /* Not visible: WARN, unless the metrics judge it. */
        assert_int_equal(doctor_report_client_qps(&r, "kube-controller-manager", NULL, NULL, 3, 0, false),
                         0);
        assert_int_equal(doctor_report_client_qps(&r, "kube-controller-manager", NULL, NULL, 3, 0, true), 0);
        assert_int_equal(r.items[0]->status, DOCTOR_WARN);
        assert_non_null(strstr(r.items[0]->fix, "--prometheus"));
        assert_int_equal(r.items[1]->status, DOCTOR_PASS);
        doctor_report_done(&r);
}

static struct doctor_metric M(double v) {
        return (struct doctor_metric){ .have = true, .value = v };
} static const struct doctor_metric NONE = { .have = false };

static void test_prom_parse(void **state) {
        cJSON *fx = load("prom-answers.json");
        const cJSON *c;

        for_each_case(c, fx) {
                const char *body = json_str(c, "body"), *message = json_str(c, "message");
                const cJSON *value = json_path(c, "value");
                struct doctor_metric m = { .have = true, .value = -1 };
                int want = -errno_named(json_str(c, "error"));
                char *err = NULL;

                assert_non_null(body);
                assert_int_equal(doctor_prom_parse(body, strlen(body), &m, &err), want);
                if (message)
                        assert_string_equal(err, message);
                else
                        assert_null(err);
                free(err);
                if (want < 0)
                        continue;
                assert_int_equal(m.have, !cJSON_IsNull(value));
                if (cJSON_IsNumber(value))
                        assert_true(m.value == value->valuedouble);
                else if (cJSON_IsString(value)) /* JSON has no infinity */
                        assert_true(m.value == strtod(value->valuestring, NULL));
        }
        cJSON_Delete(fx);
}

static void test_judges(void **state) {
        /* The guide's two patterns, and the quiet case. */
        assert_int_equal(doctor_judge_workqueue(M(0.5), M(0), M(0.01)), DOCTOR_WQ_OK);
        assert_int_equal(doctor_judge_workqueue(NONE, NONE, NONE), DOCTOR_WQ_NO_DATA);
        assert_int_equal(doctor_judge_workqueue(M(1), NONE, NONE), DOCTOR_WQ_NO_DATA);
        assert_int_equal(doctor_judge_workqueue(M(0.5), M(40), M(2.5)), DOCTOR_WQ_TUNE_CONTROLLER);
        assert_int_equal(doctor_judge_workqueue(M(0.5), M(40), M(0.01)), DOCTOR_WQ_TUNE_CONTROLLER);
        assert_int_equal(doctor_judge_workqueue(M(60), M(0), M(1.5)),
                         DOCTOR_WQ_TUNE_CONTROLLER); /* "and/or" */
        assert_int_equal(doctor_judge_workqueue(M(60), M(120), M(2)), DOCTOR_WQ_TUNE_CONTROLLER);
        assert_int_equal(doctor_judge_workqueue(M(60), M(120), M(0.02)), DOCTOR_WQ_LOWER_POD_QPS);
        assert_int_equal(doctor_judge_workqueue(M(60), M(3), M(0.02)), DOCTOR_WQ_OK);
        assert_int_equal(doctor_judge_workqueue(M(60), M(120), M(INFINITY)), DOCTOR_WQ_TUNE_CONTROLLER);

        assert_int_equal(doctor_judge_scheduler(M(0.8), M(0.01)), DOCTOR_SCHED_OK);
        assert_int_equal(doctor_judge_scheduler(NONE, NONE), DOCTOR_SCHED_NO_DATA);
        assert_int_equal(doctor_judge_scheduler(M(12), M(0.01)), DOCTOR_SCHED_BINDING_SLOW);
        assert_int_equal(doctor_judge_scheduler(M(12), M(0.9)), DOCTOR_SCHED_ALGORITHM_SLOW);
        assert_int_equal(doctor_judge_scheduler(NONE, M(0.9)), DOCTOR_SCHED_ALGORITHM_SLOW);

        assert_int_equal(doctor_judge_prepare(M(0.2), M(0.1)), DOCTOR_PREPARE_OK);
        assert_int_equal(doctor_judge_prepare(NONE, NONE), DOCTOR_PREPARE_NO_DATA);
        assert_int_equal(doctor_judge_prepare(M(4), M(3.8)), DOCTOR_PREPARE_DRIVER_SLOW);
        assert_int_equal(doctor_judge_prepare(M(4), M(0.05)), DOCTOR_PREPARE_KUBELET_SLOW);
        assert_int_equal(doctor_judge_prepare(M(4), NONE), DOCTOR_PREPARE_SLOW);
        assert_int_equal(doctor_judge_prepare(NONE, M(3)), DOCTOR_PREPARE_DRIVER_SLOW);
        assert_int_equal(doctor_judge_prepare(NONE, M(0.1)), DOCTOR_PREPARE_OK);
}

static void test_report_prometheus(void **state) {
        struct doctor_report r = {};
        struct doctor_prom_results m = {
                .wq_adds = M(60),
                .wq_depth = M(120),
                .wq_work = M(0.02),
                .sched_sli = M(12),
                .sched_alg = M(0.01),
                .kubelet_prepare = M(0.3),
                .plugin_prepare = M(0.2),
                .kubelet_unprepare = M(4),
                .plugin_unprepare = M(3.9),
                .depth_query = DOCTOR_Q_WQ_DEPTH_ANY,
        };
        const struct doctor_finding *f;

        assert_int_equal(doctor_report_prometheus(&r, "http://127.0.0.1:9", &m), 0);
        assert_int_equal(r.n, 4);
        f = find(&r, "resource-claim-workqueue", NULL);
        assert_int_equal(f->status, DOCTOR_WARN);
        assert_int_equal(f->section, DOCTOR_SECTION_KCM_METRICS);
        assert_non_null(strstr(f->fix, "lower the pod creation QPS"));
        assert_string_equal(f->objects[1], "query " DOCTOR_Q_WQ_DEPTH_ANY);
        assert_int_equal(json_int(f->details, "depth", 0), 120);
        f = find(&r, "scheduling-latency", NULL);
        assert_int_equal(f->status, DOCTOR_WARN);
        assert_non_null(strstr(f->fix, "clientConnection.qps"));
        f = find(&r, "prepare-latency", NULL);
        assert_int_equal(f->status, DOCTOR_PASS);
        assert_null(f->fix);
        f = find(&r, "unprepare-latency", NULL);
        assert_int_equal(f->status, DOCTOR_WARN);
        assert_int_equal(f->section, DOCTOR_SECTION_PLUGIN_METRICS);
        assert_non_null(strstr(f->message, "drains wait for it"));
        doctor_report_done(&r);

        /* The other workqueue rule; a group that could not be asked. */
        m.wq_adds = M(0.5);
        m.wq_depth = M(40);
        m.wq_work = M(2.5);
        m.error_scheduler = strdup("cannot query it: Connection refused");
        assert_int_equal(doctor_report_prometheus(&r, "http://127.0.0.1:9", &m), 0);
        f = find(&r, "resource-claim-workqueue", NULL);
        assert_non_null(strstr(f->fix, "--kube-api-qps"));
        f = find(&r, "scheduling-latency", NULL);
        assert_int_equal(f->status, DOCTOR_WARN);
        assert_non_null(strstr(f->message, "Connection refused"));
        doctor_report_done(&r);

        /* Nothing scraped. */
        doctor_prom_results_done(&m);
        assert_int_equal(doctor_report_prometheus(&r, "http://127.0.0.1:9", &m), 0);
        for (size_t i = 0; i < r.n; i++) {
                assert_int_equal(r.items[i]->status, DOCTOR_WARN);
                assert_non_null(strstr(r.items[i]->message, "no samples"));
        }
        doctor_report_done(&r);
}

static void test_report(void **state) {
        struct doctor_report r = {};
        struct doctor_finding *f;
        cJSON *j;
        const cJSON *arr;
        char *text = NULL;
        size_t len = 0;
        FILE *mem;

        f = doctor_report_add(&r, DOCTOR_SECTION_DRAIN, DOCTOR_PASS, "drain-coverage", "", "all %d covered",
                              3);
        assert_non_null(f);
        f = doctor_report_add(&r, DOCTOR_SECTION_PERMISSIONS, DOCTOR_PASS, "claim-users", "", "fine");
        f = doctor_report_add(&r, DOCTOR_SECTION_LIVENESS, DOCTOR_FAIL, "liveness-probe", "driver d",
                              "none");
        assert_int_equal(doctor_finding_add_object(f, "DaemonSet %s/%s", "ns", "ds"), 0);
        assert_int_equal(doctor_finding_add_object(f, "DaemonSet ns/ds"), 0); /* named once */
        assert_int_equal(doctor_finding_set_fix(f, "add one"), 0);
        assert_int_equal(doctor_finding_add_detail(f, "pods", 3), 0);
        assert_int_equal(doctor_finding_add_detail(f, "p99", INFINITY), 0);
        f = doctor_report_add(&r, DOCTOR_SECTION_PERMISSIONS, DOCTOR_FAIL, "dra-api-writers", "User alice",
                              "may");
        f = doctor_report_add(&r, DOCTOR_SECTION_PERMISSIONS, DOCTOR_WARN, "claim-users", "User bob",
                              "wide");
        for (int i = 0; i < 20; i++)
                assert_int_equal(doctor_finding_add_object(f, "Node node-%d", i), 0);

        assert_int_equal(doctor_report_exit_code(&r), DOCTOR_EXIT_FAIL);
        assert_int_equal(doctor_report_count(&r, DOCTOR_FAIL), 2);
        doctor_report_sort(&r);
        /* Page order, FAIL before WARN before PASS, then as added. */
        assert_string_equal(r.items[0]->check, "dra-api-writers");
        assert_string_equal(r.items[1]->subject, "User bob");
        assert_string_equal(r.items[2]->check, "claim-users");
        assert_string_equal(r.items[3]->check, "liveness-probe");
        assert_string_equal(r.items[4]->check, "drain-coverage");

        j = doctor_report_to_json(&r);
        assert_non_null(j);
        assert_int_equal(json_int(j, "summary.fail", -1), 2);
        assert_int_equal(json_int(j, "summary.warn", -1), 1);
        assert_int_equal(json_int(j, "summary.pass", -1), 2);
        assert_int_equal(json_int(j, "exitCode", -1), 5);
        arr = json_path(j, "findings");
        assert_int_equal(cJSON_GetArraySize(arr), 5);
        {
                const cJSON *x = cJSON_GetArrayItem(arr, 3);

                assert_string_equal(json_str(x, "status"), "FAIL");
                assert_string_equal(json_str(x, "practice"), "DRA driver deployment and maintenance");
                assert_string_equal(json_str(x, "section"),
                                    "Confirm your DRA driver exposes a liveness probe and utilize it");
                assert_int_equal(cJSON_GetArraySize(json_path(x, "objects")), 1);
                assert_string_equal(json_str(x, "fix"), "add one");
                assert_int_equal(json_int(x, "details.pods", 0), 3);
                assert_true(cJSON_IsNull(json_path(x, "details.p99")));
                assert_true(cJSON_IsNull(json_path(cJSON_GetArrayItem(arr, 4), "fix")));
        }
        cJSON_Delete(j);

        mem = open_memstream(&text, &len);
        assert_non_null(mem);
        assert_int_equal(doctor_report_print_text(&r, mem), 0);
        fclose(mem);
        assert_non_null(strstr(text, "Separate permissions to DRA related APIs\n  STATUS CHECK"));
        assert_non_null(strstr(
                text, "  -- Confirm your DRA driver exposes a liveness probe and utilize it\n  FAIL"));
        assert_non_null(strstr(text, "objects: DaemonSet ns/ds"));
        assert_non_null(strstr(text, "fix: add one"));
        assert_non_null(strstr(text, "... and 9 more (-o json lists all)"));
        assert_null(strstr(text, "Node node-11\n"));
        free(text);
        doctor_report_done(&r);
        assert_int_equal(doctor_report_exit_code(&r), 0);
}

/* ---- the rules over pictures of clusters (fixtures/doctor/cluster-*.json) ---- */

/* A fixture's API error: errors.KEY = {code, message}. */
static bool fixture_error(const cJSON *fx, const char *key, int *ret_error, const char **ret_message) {
        const cJSON *e =
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(fx, "errors"), key);

        if (!e)
                return false;
        *ret_error = http_status_to_errno(json_int(e, "code", 500));
        *ret_message = json_str(e, "message");
        return true;
}

static const cJSON *fixture_get(const cJSON *fx, const char *map, const char *key) {
        return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(fx, map), key);
}

/* How the fixture's fake API server names a SubjectAccessReview:
 * "user:NAME VERB RESOURCE NAMESPACE" or "group:NAME ...", NAMESPACE "*" for none. */
static void sar_key(const cJSON *req, char *buf, size_t size) {
        const char *user = json_str(req, "spec.user");
        const cJSON *attrs = json_path(req, "spec.resourceAttributes");
        const char *ns = json_str(attrs, "namespace");

        if (user)
                snprintf(buf, size, "user:%s %s %s %s", user, json_str(attrs, "verb"),
                         json_str(attrs, "resource"), ns ? ns : "*");
        else
                snprintf(buf, size, "group:%s %s %s %s",
                         cJSON_GetArrayItem(json_path(req, "spec.groups"), 0)->valuestring,
                         json_str(attrs, "verb"), json_str(attrs, "resource"), ns ? ns : "*");
}

static const struct {
        enum doctor_list list;
        const char *key;
} fixture_lists[] = {
        { DOCTOR_LIST_NODES, "nodes" },
        { DOCTOR_LIST_SLICES, "resourceslices" },
        { DOCTOR_LIST_CLAIMS, "resourceclaims" },
        { DOCTOR_LIST_CLUSTER_ROLE_BINDINGS, "clusterrolebindings" },
        { DOCTOR_LIST_ROLE_BINDINGS, "rolebindings" },
        { DOCTOR_LIST_DRAINER_PODS, "drainerPods" },
        { DOCTOR_LIST_SYSTEM_PODS, "kubeSystemPods" },
        { DOCTOR_LIST_NODECLAIMS, "nodeclaims" },
        { DOCTOR_LIST_DRIVER_PODS, "driverPods" },
};

/* The picture doctor_gather_start() makes of the cluster in fx, with the API
 * server's answers taken from the fixture: its lists and errors, its
 * DaemonSets, its answers to SubjectAccessReviews (the reason of the allowed
 * ones; anything else is denied), the probes of driver pods (each one asked
 * must be in "probes", and each one there asked) and the pods of nodes.
 * scope: --node. */
static void picture(struct doctor_data *d, const cJSON *fx, const char *scope) {
        const cJSON *item;
        size_t n_answers = 0;
        int error;
        const char *message;

        assert_int_equal(doctor_data_init(d, scope), 0);
        assert_string_equal(d->dra_api, "resource.k8s.io/v1");
        for (size_t i = 0; i < ELEMENTSOF(fixture_lists); i++) {
                enum doctor_list l = fixture_lists[i].list;

                if (fixture_error(fx, fixture_lists[i].key, &error, &message)) {
                        assert_int_equal(doctor_data_list_done(d, l, error, message), 0);
                        continue;
                }
                /* No NodeClaims in the fixture: Karpenter is not installed (serve(): 404). */
                if (l == DOCTOR_LIST_NODECLAIMS && !cJSON_GetObjectItemCaseSensitive(fx, "nodeclaims")) {
                        assert_int_equal(doctor_data_list_done(d, l, -ENOENT,
                                                               "the server could not find the requested "
                                                               "resource"),
                                         0);
                        continue;
                }
                cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(fx, fixture_lists[i].key)) {
                        int r = doctor_data_add(d, l, item);

                        assert_true(r == 0 || r == -EBADMSG);
                }
                assert_int_equal(doctor_data_list_done(d, l, 0, NULL), 0);
        }
        assert_int_equal(doctor_data_index(d), 0);

        for (size_t i = 0; i < d->groups.n; i++) {
                const struct doctor_group *g = d->groups.v[i];
                char key[512], notfound[512];
                const cJSON *ds;

                if (!doctor_data_wants_daemonset(d, i))
                        continue;
                snprintf(key, sizeof key, "daemonsets/%s/%s", g->ns, g->name);
                snprintf(notfound, sizeof notfound, "daemonsets.apps \"%s\" not found", g->name);
                ds = fixture_get(fx, "daemonsets", key + strlen("daemonsets/"));
                if (fixture_error(fx, key, &error, &message))
                        assert_int_equal(doctor_data_daemonset_done(d, i, error, message, NULL), 0);
                else if (ds)
                        assert_int_equal(doctor_data_daemonset_done(d, i, 0, NULL, ds), 0);
                else
                        assert_int_equal(doctor_data_daemonset_done(d, i, -ENOENT, notfound, NULL), 0);
        }

        for (size_t k = 0; k < d->n_sars; k++) {
                cJSON *req = doctor_data_sar_request(d, k), *answer;
                const char *reason;
                char key[1024];

                assert_non_null(req);
                assert_string_equal(json_str(req, "spec.resourceAttributes.group"), "resource.k8s.io");
                sar_key(req, key, sizeof key);
                cJSON_Delete(req);
                if (fixture_error(fx, "subjectaccessreviews", &error, &message)) {
                        assert_int_equal(doctor_data_sar_done(d, k, error, message, NULL), 0);
                        continue;
                }
                reason = cJSON_GetStringValue(fixture_get(fx, "subjectaccessreviews", key));
                answer = cJSON_CreateObject();
                assert_non_null(answer);
                item = cJSON_AddObjectToObject(answer, "status");
                if (reason) {
                        cJSON_AddBoolToObject((cJSON *)item, "allowed", true);
                        cJSON_AddStringToObject((cJSON *)item, "reason", reason);
                }
                assert_int_equal(doctor_data_sar_done(d, k, 0, NULL, answer), 0);
                cJSON_Delete(answer);
        }

        for (size_t k = 0; k < d->n_probes; k++) {
                const struct pod_rec *p = d->driver_pods.v[d->probes[k]]->rec;
                enum health_status status = HEALTH_UNKNOWN;
                const cJSON *a;
                char key[512];

                snprintf(key, sizeof key, "%s/%s", p->ns, p->name);
                a = fixture_get(fx, "probes", key);
                if (!a)
                        fail_msg("the fixture does not answer the probe of %s", key);
                n_answers++;
                for (int s = HEALTH_UNKNOWN; s <= HEALTH_SERVICE_UNKNOWN; s++)
                        if (json_str(a, "status") &&
                            strcmp(health_status_to_string(s), json_str(a, "status")) == 0)
                                status = s;
                doctor_data_probe_done(d, k, -errno_named(json_str(a, "error")), status,
                                       json_str(a, "message"));
        }
        /* Every probe the fixture answers is asked (all nodes in scope). */
        if (!scope)
                assert_int_equal(n_answers,
                                 cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(fx, "probes")));

        for (size_t k = 0; k < d->cordoned.n; k++) {
                char key[512];

                snprintf(key, sizeof key, "nodePods/%s", d->cordoned.v[k]->node->name);
                if (fixture_error(fx, key, &error, &message)) {
                        doctor_data_cordoned_done(d, k, error);
                        continue;
                }
                cJSON_ArrayForEach(item, fixture_get(fx, "nodePods", d->cordoned.v[k]->node->name))
                        assert_int_equal(doctor_data_add_cordoned_pod(d, k, item), 0);
                doctor_data_cordoned_done(d, k, 0);
        }
}

struct judged {
        struct doctor_data d;
        struct doctor_report rep;
};

/* The findings of doctor (--node scope, --prometheus prom_url) over a fixture's cluster. */
static void judge(struct judged *j, const char *fixture, const char *scope, const char *prom_url,
                  const struct doctor_prom_results *prom) {
        cJSON *fx = load(fixture);

        picture(&j->d, fx, scope);
        cJSON_Delete(fx);
        j->rep = (struct doctor_report){};
        assert_int_equal(doctor_rules_run(&j->d, prom_url, prom, &j->rep), 0);
}

static void judged_done(struct judged *j) {
        doctor_report_done(&j->rep);
        doctor_data_done(&j->d);
}

/* How many findings of check (about subject, NULL: any) have status s (-1: any). */
static size_t count(const struct doctor_report *r, const char *check, const char *subject, int s) {
        size_t n = 0;

        for (size_t i = 0; i < r->n; i++)
                n += strcmp(r->items[i]->check, check) == 0 &&
                     (!subject || strcmp(r->items[i]->subject, subject) == 0) &&
                     (s < 0 || (int)r->items[i]->status == s);
        return n;
}

/* The one finding of check about subject with status s. */
static const struct doctor_finding *the(const struct doctor_report *r, const char *check,
                                        const char *subject, enum doctor_status s) {
        const struct doctor_finding *f = NULL;

        for (size_t i = 0; i < r->n; i++)
                if (strcmp(r->items[i]->check, check) == 0 && strcmp(r->items[i]->subject, subject) == 0 &&
                    r->items[i]->status == s) {
                        if (f)
                                fail_msg("two %s findings %s/%s", doctor_status_to_string(s), check,
                                         subject);
                        f = r->items[i];
                }
        if (!f)
                fail_msg("no %s finding %s/%s", doctor_status_to_string(s), check, subject);
        return f;
}

/* The finding's objects are exactly these (NULL-terminated). */
static void assert_objects(const struct doctor_finding *f, ...) {
        va_list ap;
        size_t n = 0;
        const char *o;

        va_start(ap, f);
        while ((o = va_arg(ap, const char *))) {
                if (n >= f->n_objects)
                        fail_msg("%s/%s: no object %zu (%s)", f->check, f->subject, n, o);
                assert_string_equal(f->objects[n], o);
                n++;
        }
        va_end(ap);
        assert_int_equal(f->n_objects, n);
}

#define RBAC_FIX                                                                                \
        "grant doctor's identity the ClusterRole of deploy/doctor (it lists bindings and asks " \
        "SubjectAccessReviews)"

static void test_rule_dra_api_writers(void **state) {
        struct judged j;
        const struct doctor_finding *f;

        /* PASS: everybody who may write is exempt, and the exempt are counted by kind. */
        judge(&j, "cluster-healthy.json", NULL, NULL, NULL);
        f = the(&j.rep, "dra-api-writers", "", DOCTOR_PASS);
        assert_string_equal(
                f->message,
                "of the 9 subjects of 9 (Cluster)RoleBindings, 2 are cluster admins, 3 the control "
                "plane, 1 DRA driver ServiceAccounts; the API server says none of the 3 others may "
                "write DeviceClasses or ResourceSlices");
        assert_objects(f, "ServiceAccount gpu-system/gpu-driver (runs DRA driver pods)", NULL);
        assert_null(f->fix);
        assert_int_equal(count(&j.rep, "dra-api-writers", NULL, -1), 1);
        judged_done(&j);

        /* FAIL: one per writer, naming the bindings the API server named. */
        judge(&j, "cluster-permissions.json", NULL, NULL, NULL);
        f = the(&j.rep, "dra-api-writers", "User alice", DOCTOR_FAIL);
        assert_string_equal(
                f->message,
                "may create, update, patch, delete resourceslices: only cluster admins and DRA "
                "drivers should write DeviceClasses and ResourceSlices (the API server: RBAC: "
                "allowed by ClusterRoleBinding \"slice-writer\" of ClusterRole \"slice-writer\" to "
                "User \"alice\")");
        assert_objects(f, "ClusterRoleBinding slice-writer -> ClusterRole slice-writer", NULL);
        assert_string_equal(f->fix,
                            "remove User alice from these bindings, or drop create/update/patch/delete "
                            "on deviceclasses and resourceslices (resource.k8s.io) from the roles they "
                            "grant; if it is a DRA driver, run its pods as this ServiceAccount");
        assert_int_equal(f->section, DOCTOR_SECTION_PERMISSIONS);
        f = the(&j.rep, "dra-api-writers", "Group ops", DOCTOR_FAIL);
        assert_true(strncmp(f->message, "may create, update deviceclasses: ", 34) == 0);
        /* ops-view is a binding of ops too, but not what lets it write. */
        assert_objects(f, "ClusterRoleBinding ops-devices -> ClusterRole device-admin", NULL);
        /* The RoleBinding of team-a/ci cannot grant cluster-scoped resources: the API server said no.
         * The driver's ServiceAccount, named as a user, and the control plane are not asked. */
        assert_int_equal(count(&j.rep, "dra-api-writers", NULL, -1), 2);
        assert_int_equal(doctor_report_exit_code(&j.rep), DOCTOR_EXIT_FAIL);
        for (size_t k = 0; k < j.d.subjects.n; k++) {
                const struct doctor_subject_ent *e = j.d.subjects.v[k];

                if (strcmp(e->label, "User system:serviceaccount:gpu-system:gpu-driver") == 0)
                        assert_int_equal(e->role, DOCTOR_ROLE_DRIVER);
                if (strcmp(e->label, "ServiceAccount team-a/ci") == 0)
                        assert_int_equal(e->role, DOCTOR_ROLE_OTHER);
        }
        judged_done(&j);

        /* WARN: the bindings cannot be listed; nothing else is said about permissions. */
        judge(&j, "cluster-bindings-forbidden.json", NULL, NULL, NULL);
        f = the(&j.rep, "dra-api-writers", "", DOCTOR_WARN);
        assert_string_equal(f->message,
                            "cannot list clusterrolebindings: clusterrolebindings.rbac.authorization"
                            ".k8s.io is forbidden: User \"doctor\" cannot list resource "
                            "\"clusterrolebindings\" in API group \"rbac.authorization.k8s.io\" at "
                            "the cluster scope: not checked");
        assert_string_equal(f->fix, RBAC_FIX);
        assert_int_equal(count(&j.rep, "dra-api-writers", NULL, -1), 1);
        assert_int_equal(count(&j.rep, "claim-users", NULL, -1), 0);
        assert_int_equal(j.d.n_sars, 0);
        judged_done(&j);

        /* WARN: the API server would not answer; no PASS on half the answers. */
        judge(&j, "cluster-sar-errors.json", NULL, NULL, NULL);
        f = the(&j.rep, "dra-api-writers", "", DOCTOR_WARN);
        assert_string_equal(f->message,
                            "20 of 20 SubjectAccessReviews failed (subjectaccessreviews.authorization"
                            ".k8s.io is forbidden: User \"doctor\" cannot create resource "
                            "\"subjectaccessreviews\"): who may write DeviceClasses and "
                            "ResourceSlices is not fully known");
        assert_string_equal(f->fix, RBAC_FIX);
        assert_int_equal(count(&j.rep, "dra-api-writers", NULL, -1), 1);
        assert_int_equal(count(&j.rep, "claim-users", NULL, -1), 0);
        judged_done(&j);
}

static void test_rule_claim_users(void **state) {
        struct judged j;
        const struct doctor_finding *f;

        /* PASS: granted per namespace, and who may where. */
        judge(&j, "cluster-healthy.json", NULL, NULL, NULL);
        f = the(&j.rep, "claim-users", "", DOCTOR_PASS);
        assert_string_equal(f->message, "1 RoleBinding grants let subjects create ResourceClaims or "
                                        "ResourceClaimTemplates, each in its own namespace, as the guide "
                                        "expects; none in every namespace");
        assert_objects(f, "User carol in namespace team-a", NULL);
        judged_done(&j);
        judge(&j, "cluster-empty.json", NULL, NULL, NULL);
        f = the(&j.rep, "claim-users", "", DOCTOR_PASS);
        assert_string_equal(f->message, "besides cluster admins and the control plane nobody may create "
                                        "ResourceClaims or ResourceClaimTemplates, in any namespace");
        assert_objects(f, NULL);
        judged_done(&j);

        /* WARN (the worst: claims are not a cluster-wide risk) for grants in every namespace,
         * naming the ClusterRoleBindings only. */
        judge(&j, "cluster-permissions.json", NULL, NULL, NULL);
        f = the(&j.rep, "claim-users", "User bob", DOCTOR_WARN);
        assert_string_equal(f->message,
                            "may create ResourceClaims and ResourceClaimTemplates in every "
                            "namespace: ResourceClaims and ResourceClaimTemplates are namespaced, "
                            "and the guide expects them granted per namespace");
        assert_objects(f, "ClusterRoleBinding claims-everywhere -> ClusterRole claim-user", NULL);
        assert_string_equal(f->fix, "bind User bob with RoleBindings in the namespaces where it deploys "
                                    "workloads instead of a ClusterRoleBinding");
        f = the(&j.rep, "claim-users", "User erin", DOCTOR_WARN);
        assert_true(strncmp(f->message, "may create ResourceClaimTemplates in every namespace:", 53) == 0);
        /* No PASS beside a WARN, and never a FAIL. */
        assert_int_equal(count(&j.rep, "claim-users", NULL, -1), 2);
        assert_int_equal(count(&j.rep, "claim-users", NULL, DOCTOR_FAIL), 0);
        judged_done(&j);
}

static void test_rule_driver_daemonset(void **state) {
        struct judged j;
        const struct doctor_finding *f;

        judge(&j, "cluster-drivers.json", NULL, NULL, NULL);
        /* PASS: found through its pods; or nothing node-local to check. */
        f = the(&j.rep, "driver-daemonset", "driver gpu.example.com", DOCTOR_PASS);
        assert_string_equal(f->message, "DaemonSet gpu-system/gpu-driver: 2 pods, slices on 2 nodes");
        assert_objects(f, "DaemonSet gpu-system/gpu-driver", NULL);
        f = the(&j.rep, "driver-daemonset", "driver net.example.com", DOCTOR_PASS);
        assert_string_equal(f->message,
                            "publishes no node-local ResourceSlices (2 network-attached or all-node "
                            "slices): no kubelet plugin to check");
        /* nic's nodes run gpu's pods too: only the pods that name nic count. */
        f = the(&j.rep, "driver-daemonset", "driver nic.example.com", DOCTOR_PASS);
        assert_objects(f, "DaemonSet net-system/nic-driver", NULL);
        assert_int_equal(count(&j.rep, "driver-daemonset", "driver nic.example.com", -1), 1);
        /* WARN: not a DaemonSet, no pod, a DaemonSet doctor may not read. */
        f = the(&j.rep, "driver-daemonset", "driver fpga.example.com", DOCTOR_WARN);
        assert_string_equal(f->message, "its pods in fpga-system are not run by a DaemonSet (ReplicaSet "
                                        "fpga-plugin-5d8f)");
        assert_objects(f, "ReplicaSet fpga-system/fpga-plugin-5d8f", NULL);
        assert_string_equal(f->fix, "deploy the driver as a DaemonSet on the nodes with its devices, as the "
                                    "guide describes");
        f = the(&j.rep, "driver-daemonset", "driver tpu.example.com", DOCTOR_WARN);
        assert_string_equal(f->message,
                            "no DRA driver pod found on its 1 node (by the driver selectors): its "
                            "deployment, liveness probe, upgrade strategy and drain guard are not "
                            "checked");
        assert_non_null(strstr(f->fix, "--driver-selector"));
        f = the(&j.rep, "driver-daemonset", "driver acc.example.com", DOCTOR_WARN);
        assert_string_equal(f->message,
                            "cannot read DaemonSet acc-system/acc-driver: daemonsets.apps "
                            "\"acc-driver\" is forbidden: User \"doctor\" cannot get resource "
                            "\"daemonsets\" in API group \"apps\" in the namespace \"acc-system\"");
        assert_string_equal(f->fix, RBAC_FIX);
        /* Never a FAIL: the checks of the DaemonSet say what is wrong with it. */
        assert_int_equal(count(&j.rep, "driver-daemonset", NULL, DOCTOR_FAIL), 0);
        judged_done(&j);

        judge(&j, "cluster-empty.json", NULL, NULL, NULL);
        f = the(&j.rep, "driver-daemonset", "", DOCTOR_PASS);
        assert_string_equal(f->message, "no ResourceSlice names a DRA driver: nothing to check");
        judged_done(&j);
}

static void test_rule_liveness_probe(void **state) {
        struct judged j;
        const struct doctor_finding *f;

        judge(&j, "cluster-healthy.json", NULL, NULL, NULL);
        f = the(&j.rep, "liveness-probe", "driver gpu.example.com", DOCTOR_PASS);
        assert_string_equal(f->message, "container plugin has a gRPC liveness probe");
        assert_int_equal(f->section, DOCTOR_SECTION_LIVENESS);
        judged_done(&j);

        judge(&j, "cluster-drivers.json", NULL, NULL, NULL);
        f = the(&j.rep, "liveness-probe", "driver gpu.example.com", DOCTOR_FAIL);
        assert_string_equal(f->message,
                            "no container of DaemonSet gpu-system/gpu-driver has a liveness probe: "
                            "a hung driver is never restarted");
        assert_objects(f, "DaemonSet gpu-system/gpu-driver", NULL);
        assert_non_null(strstr(f->fix, "livenessProbe.grpc"));
        /* httpGet in the plugin container; the sidecar's exec probe does not make it worse. */
        f = the(&j.rep, "liveness-probe", "driver nic.example.com", DOCTOR_WARN);
        assert_string_equal(f->message,
                            "container plugin has a liveness probe, but of type httpGet, not gRPC");
        /* Only DaemonSets that were read are judged. */
        assert_int_equal(count(&j.rep, "liveness-probe", NULL, -1), 2);
        judged_done(&j);
}

static void test_rule_rollout_strategy(void **state) {
        struct judged j;
        const struct doctor_finding *f;

        judge(&j, "cluster-healthy.json", NULL, NULL, NULL);
        f = the(&j.rep, "rollout-strategy", "driver gpu.example.com", DOCTOR_PASS);
        assert_string_equal(f->message,
                            "RollingUpdate with maxSurge a count: the new driver pod starts before "
                            "the old one stops");
        assert_int_equal(f->section, DOCTOR_SECTION_SEAMLESS_UPGRADE);
        judged_done(&j);

        judge(&j, "cluster-drivers.json", NULL, NULL, NULL);
        f = the(&j.rep, "rollout-strategy", "driver nic.example.com", DOCTOR_PASS);
        assert_true(strncmp(f->message, "RollingUpdate with maxSurge 25%:", 32) == 0);
        f = the(&j.rep, "rollout-strategy", "driver gpu.example.com", DOCTOR_WARN);
        assert_string_equal(f->message,
                            "OnDelete: every driver update leaves each node without its driver for a "
                            "while (pods with claims cannot start, cleanup waits)");
        assert_non_null(strstr(f->fix, "maxSurge: 1, maxUnavailable: 0"));
        /* A strategy without surge is a WARN at worst: not every driver supports two instances. */
        assert_int_equal(count(&j.rep, "rollout-strategy", NULL, DOCTOR_FAIL), 0);
        judged_done(&j);
}

/* driver-rollout: drivers without seamless upgrade are pointed at
 * drainer rollout; driver_upgrade_seamless is the decision plan and maintain share. */
static void test_rule_driver_rollout(void **state) {
        struct judged j;
        const struct doctor_finding *f;

        judge(&j, "cluster-healthy.json", NULL, NULL, NULL);
        f = the(&j.rep, "driver-rollout", "driver gpu.example.com", DOCTOR_PASS);
        assert_non_null(
                strstr(f->message, "seamless upgrade: its DaemonSet is RollingUpdate with maxSurge"));
        judged_done(&j);

        judge(&j, "cluster-drivers.json", NULL, NULL, NULL);
        /* OnDelete: updates already wait; the finding says how to run them. */
        f = the(&j.rep, "driver-rollout", "driver gpu.example.com", DOCTOR_PASS);
        assert_non_null(
                strstr(f->message, "no seamless upgrade (its DaemonSet's updateStrategy is OnDelete"));
        assert_non_null(
                strstr(f->message, "drainer rollout gpu-system/gpu-driver --driver gpu.example.com"));
        /* Surges, but a kubelet is older than 1.33: not seamless, and an update replaces the
         * plugin under its claims. */
        f = the(&j.rep, "driver-rollout", "driver nic.example.com", DOCTOR_WARN);
        assert_non_null(strstr(f->message, "older than 1.33"));
        assert_non_null(strstr(f->fix, "updateStrategy to OnDelete"));
        assert_non_null(strstr(f->fix, "drainer rollout "));
        judged_done(&j);
}

static void test_driver_seamless(void **state) {
        cJSON *surge = cJSON_Parse("{\"spec\":{\"updateStrategy\":{\"type\":\"RollingUpdate\","
                                   "\"rollingUpdate\":{\"maxSurge\":1,\"maxUnavailable\":0}}}}");
        cJSON *plain = cJSON_Parse("{\"spec\":{}}");
        const char *ok[] = { "v1.37.2", "v1.33.0-eks-1" }, *old[] = { "v1.37.2", "v1.32.4" },
                   *unknown[] = { "v1.37.2", NULL };
        char why[512];

        assert_int_equal(driver_upgrade_seamless(surge, ok, 2, why, sizeof(why)), 1);
        assert_non_null(strstr(why, "all 2 of its nodes run kubelet 1.33 or newer"));
        assert_int_equal(driver_upgrade_seamless(surge, old, 2, why, sizeof(why)), 0);
        assert_non_null(strstr(why, "1 of 2 of its nodes run a kubelet older than 1.33 (v1.32.4)"));
        assert_int_equal(driver_upgrade_seamless(surge, unknown, 2, why, sizeof(why)), 0);
        assert_int_equal(driver_upgrade_seamless(surge, NULL, 0, why, sizeof(why)), 0);
        assert_int_equal(driver_upgrade_seamless(plain, ok, 2, why, sizeof(why)), 0);
        assert_non_null(strstr(why, "updateStrategy is RollingUpdate without maxSurge"));
        cJSON_Delete(surge);
        cJSON_Delete(plain);
}

static void test_rule_drain_guard(void **state) {
        struct judged j;
        const struct doctor_finding *f;

        judge(&j, "cluster-healthy.json", NULL, NULL, NULL);
        f = the(&j.rep, "drain-guard", "driver gpu.example.com", DOCTOR_PASS);
        assert_string_equal(f->message,
                            "the drainer guard is the preStop hook of plugin: the driver waits until "
                            "the node's claims are released");
        assert_int_equal(f->section, DOCTOR_SECTION_DRAIN);
        judged_done(&j);

        judge(&j, "cluster-drivers.json", NULL, NULL, NULL);
        the(&j.rep, "drain-guard", "driver nic.example.com", DOCTOR_PASS);
        f = the(&j.rep, "drain-guard", "driver gpu.example.com", DOCTOR_WARN);
        assert_true(strncmp(f->message, "no drainer guard as preStop hook: ", 34) == 0);
        assert_non_null(strstr(f->fix, "deploy/driver-guard"));
        /* Without the guard a serve daemon still covers a node (drain-coverage): a WARN at worst. */
        assert_int_equal(count(&j.rep, "drain-guard", NULL, DOCTOR_FAIL), 0);
        judged_done(&j);
}

/* Drivers on Karpenter's nodes (label karpenter.sh/nodepool): nic's pods tolerate
 * karpenter.sh/disrupted, so Karpenter never evicts them: said for its 2 nodes there;
 * gpu (also on a Karpenter node) does not tolerate it: nothing said here. */
static void test_rule_karpenter_disruption(void **state) {
        struct judged j;
        const struct doctor_finding *f;

        judge(&j, "cluster-drivers.json", NULL, NULL, NULL);
        f = the(&j.rep, "karpenter-disruption", "driver nic.example.com", DOCTOR_PASS);
        assert_non_null(strstr(f->message, "Karpenter never evicts them: on 2 nodes of Karpenter's"));
        assert_objects(f, "DaemonSet net-system/nic-driver", NULL);
        assert_int_equal(count(&j.rep, "karpenter-disruption", "driver gpu.example.com", -1), 0);
        judged_done(&j);

        judge(&j, "cluster-healthy.json", NULL, NULL, NULL);
        assert_int_equal(count(&j.rep, "karpenter-disruption", NULL, -1), 0);
        judged_done(&j);
}

/* Karpenter's NodeClaims against what a drain of their node needs (claim holders'
 * longest grace, then the driver pods'): node-1's 45s is short of 60 + 30 s (FAIL, with
 * the fix), node-3's 10m is enough, a NodeClaim without a node is skipped; without
 * Karpenter (no NodeClaims served, no node of its) nothing is said; its nodes but its
 * NodeClaims unreadable: WARN. */
static void test_rule_karpenter_grace(void **state) {
        struct judged j;
        const struct doctor_finding *f;

        judge(&j, "cluster-drivers.json", NULL, NULL, NULL);
        f = the(&j.rep, "karpenter-grace", "node-1", DOCTOR_FAIL);
        assert_non_null(strstr(f->message, "Karpenter NodeClaim gpu-node-1: terminationGracePeriod 45s is "
                                           "shorter than a drain of the node needs (90 s: its claim "
                                           "holders' grace up to 60 s, then the DRA driver's 30 s)"));
        assert_objects(f, "NodeClaim gpu-node-1", "Node node-1", NULL);
        assert_non_null(strstr(f->fix, "terminationGracePeriod to 90 s or more"));
        assert_int_equal(count(&j.rep, "karpenter-grace", "node-3", -1), 0);
        assert_int_equal(count(&j.rep, "karpenter-grace", NULL, -1), 1);
        judged_done(&j);
        /* --node node-3: its NodeClaim only, which is long enough */
        judge(&j, "cluster-drivers.json", "node-3", NULL, NULL);
        f = the(&j.rep, "karpenter-grace", "", DOCTOR_PASS);
        assert_non_null(
                strstr(f->message, "1 of Karpenter's NodeClaims set a terminationGracePeriod, none"));
        judged_done(&j);

        judge(&j, "cluster-healthy.json", NULL, NULL, NULL);
        assert_int_equal(count(&j.rep, "karpenter-grace", NULL, -1), 0);
        judged_done(&j);
}

static void test_rule_driver_health(void **state) {
        struct judged j;
        const struct doctor_finding *f;

        judge(&j, "cluster-healthy.json", NULL, NULL, NULL);
        f = the(&j.rep, "driver-health", "driver gpu.example.com", DOCTOR_PASS);
        assert_string_equal(f->message,
                            "3 driver pods Running and Ready; 3 answer SERVING on their gRPC liveness port");
        assert_int_equal(json_int(f->details, "pods", -1), 3);
        assert_int_equal(json_int(f->details, "serving", -1), 3);
        judged_done(&j);
        /* --node: that node's pods only. */
        judge(&j, "cluster-healthy.json", "node-2", NULL, NULL);
        f = the(&j.rep, "driver-health", "driver gpu.example.com", DOCTOR_PASS);
        assert_string_equal(f->message,
                            "1 driver pods on node-2 Running and Ready; 1 answer SERVING on their "
                            "gRPC liveness port");
        assert_int_equal(j.d.n_probes, 1);
        judged_done(&j);

        judge(&j, "cluster-drivers.json", NULL, NULL, NULL);
        /* PASS without a gRPC port to ask. */
        f = the(&j.rep, "driver-health", "driver gpu.example.com", DOCTOR_PASS);
        assert_string_equal(f->message, "2 driver pods Running and Ready; 0 answer SERVING on their gRPC "
                                        "liveness port (the others declare none)");
        /* FAIL: refused, and not Ready. */
        f = the(&j.rep, "driver-health", "driver nic.example.com", DOCTOR_FAIL);
        assert_string_equal(f->message,
                            "2 of 2 driver pods are not healthy (gRPC health 10.0.1.2:51515 refused "
                            "the connection, ...): pods with claims cannot start there and finished "
                            "ones are not cleaned up");
        assert_objects(f,
                       "Pod net-system/nic-driver-1 on node-1: gRPC health 10.0.1.2:51515 refused the "
                       "connection",
                       "Pod net-system/nic-driver-3 on node-3: Pending, not Ready", NULL);
        assert_non_null(f->fix);
        /* FAIL: the health service answers, but not SERVING. */
        f = the(&j.rep, "driver-health", "driver acc.example.com", DOCTOR_FAIL);
        assert_string_equal(f->message,
                            "1 of 1 driver pods are not healthy (gRPC health NOT_SERVING): pods "
                            "with claims cannot start there and finished ones are not cleaned up");
        /* WARN: not reachable from where doctor runs. */
        f = the(&j.rep, "driver-health", "driver fpga.example.com", DOCTOR_WARN);
        assert_string_equal(f->message,
                            "1 driver pods are Running and Ready, but 1 could not be probed (gRPC "
                            "health 10.0.4.1:51515 not reachable from here (Connection timed out "
                            "after 3000 milliseconds)): doctor runs outside the pod network?");
        assert_non_null(strstr(f->fix, "where pod IPs are reachable"));
        /* No pod, no health finding. */
        assert_int_equal(count(&j.rep, "driver-health", "driver tpu.example.com", -1), 0);
        judged_done(&j);
}

static void test_rule_kubelet_versions(void **state) {
        struct judged j;
        const struct doctor_finding *f;

        judge(&j, "cluster-healthy.json", NULL, NULL, NULL);
        f = the(&j.rep, "kubelet-versions", "driver gpu.example.com", DOCTOR_PASS);
        assert_string_equal(f->message,
                            "all 3 nodes of the driver run kubelet 1.33 or newer (v1.34.1): seamless "
                            "upgrades are possible");
        assert_objects(f, NULL);
        judged_done(&j);

        judge(&j, "cluster-drivers.json", NULL, NULL, NULL);
        /* FAIL: an old kubelet under a DaemonSet that surges. */
        f = the(&j.rep, "kubelet-versions", "driver nic.example.com", DOCTOR_FAIL);
        assert_string_equal(f->message,
                            "1 of 2 nodes of the driver run a kubelet older than 1.33, yet its "
                            "DaemonSet surges: two instances of the plugin on such a kubelet break "
                            "the driver during every rollout");
        assert_objects(f, "Node node-1 (kubelet v1.32.4)", NULL);
        assert_string_equal(f->fix,
                            "upgrade the kubelets of those nodes to 1.33 or newer, or roll the driver "
                            "out without maxSurge until then");
        /* WARN: the same kubelet under a DaemonSet that does not surge; a version doctor cannot read. */
        f = the(&j.rep, "kubelet-versions", "driver gpu.example.com", DOCTOR_WARN);
        assert_string_equal(f->message,
                            "a mixed cluster: 1 of 2 nodes of the driver run a kubelet older than "
                            "1.33, where seamless driver upgrades are not available");
        assert_string_equal(f->fix, "upgrade the kubelets of those nodes to 1.33 or newer before relying on "
                                    "seamless driver upgrades");
        f = the(&j.rep, "kubelet-versions", "driver fpga.example.com", DOCTOR_WARN);
        assert_string_equal(f->message,
                            "1 of 1 nodes of the driver report a kubelet version doctor cannot read");
        assert_objects(f, "Node node-4 (kubelet v0.0.0-sim)", NULL);
        assert_null(f->fix);
        the(&j.rep, "kubelet-versions", "driver tpu.example.com", DOCTOR_PASS);
        judged_done(&j);

        /* --node: the old kubelet is out of scope. */
        judge(&j, "cluster-drivers.json", "node-3", NULL, NULL);
        f = the(&j.rep, "kubelet-versions", "driver nic.example.com", DOCTOR_PASS);
        assert_true(strncmp(f->message, "the 1 node of the driver runs kubelet 1.33 or newer", 51) == 0);
        judged_done(&j);
}

static void test_rule_drain_coverage(void **state) {
        struct judged j;
        const struct doctor_finding *f;

        judge(&j, "cluster-healthy.json", NULL, NULL, NULL);
        f = the(&j.rep, "drain-coverage", "", DOCTOR_PASS);
        assert_string_equal(f->message,
                            "3 of 3 nodes with DRA devices are covered: 0 by drainer serve, 3 by the "
                            "drainer guard");
        judged_done(&j);
        judge(&j, "cluster-cluster-mode.json", NULL, NULL, NULL);
        f = the(&j.rep, "drain-coverage", "", DOCTOR_PASS);
        assert_string_equal(f->message,
                            "2 of 2 nodes with DRA devices are covered: 2 by drainer serve (cluster "
                            "mode), 0 by the drainer guard");
        assert_objects(f, "Pod drainer-system/drainer-6b7f9-x2", NULL);
        judged_done(&j);

        /* WARN naming the nodes neither serve (node-1's) nor a guard covers; a finished
         * serve pod covers nothing, a node without DRA needs no cover. */
        judge(&j, "cluster-drain.json", NULL, NULL, NULL);
        f = the(&j.rep, "drain-coverage", "4 nodes", DOCTOR_WARN);
        assert_string_equal(f->message,
                            "4 of 5 nodes with DRA devices have neither a drainer serve daemon nor "
                            "the drainer guard on all their drivers: a drain there can stop the "
                            "driver before the claim holders");
        assert_objects(f, "Node node-2", "Node node-3", "Node node-4", "Node node-5", NULL);
        assert_non_null(strstr(f->fix, "deploy/driver-guard"));
        f = the(&j.rep, "drain-coverage", "", DOCTOR_PASS);
        assert_string_equal(f->message,
                            "1 of 5 nodes with DRA devices are covered: 1 by drainer serve, 0 by the "
                            "drainer guard");
        assert_int_equal(count(&j.rep, "drain-coverage", NULL, DOCTOR_FAIL), 0);
        judged_done(&j);

        /* No DRA, nothing to cover. */
        judge(&j, "cluster-empty.json", NULL, NULL, NULL);
        assert_int_equal(count(&j.rep, "drain-coverage", NULL, -1), 0);
        judged_done(&j);
}

static void test_rule_unfinished_drain(void **state) {
        struct judged j;
        const struct doctor_finding *f;

        judge(&j, "cluster-healthy.json", NULL, NULL, NULL);
        f = the(&j.rep, "unfinished-drain", "", DOCTOR_PASS);
        assert_string_equal(f->message, "no node holds drainer state of an unfinished drain");
        judged_done(&j);

        judge(&j, "cluster-drain.json", NULL, NULL, NULL);
        f = the(&j.rep, "unfinished-drain", "node-3", DOCTOR_WARN);
        assert_string_equal(f->message,
                            "drainer state on the node: phase evict-rest since 2026-01-01T00:00:00Z, "
                            "request drain (cordoned)");
        assert_objects(f, "Node node-3", "drainer.io/message: evicting 3 pods", NULL);
        assert_string_equal(f->fix,
                            "finish it ('drainer drain node-3' resumes) or undo it ('drainer uncordon "
                            "node-3'); if a drainer serve daemon works on it, let it");
        f = the(&j.rep, "unfinished-drain", "node-5", DOCTOR_WARN);
        assert_string_equal(f->message, "drainer state on the node: request uncordon (schedulable)");
        assert_objects(f, "Node node-5", NULL);
        assert_int_equal(count(&j.rep, "unfinished-drain", NULL, -1), 2);
        /* A drain may be running: a WARN, never a FAIL. */
        assert_int_equal(count(&j.rep, "unfinished-drain", NULL, DOCTOR_FAIL), 0);
        judged_done(&j);

        judge(&j, "cluster-drain.json", "node-1", NULL, NULL);
        f = the(&j.rep, "unfinished-drain", "", DOCTOR_PASS);
        assert_string_equal(f->message, "no node node-1 holds drainer state of an unfinished drain");
        judged_done(&j);

        /* Drains of DRA drivers (their own keys): one finding each, naming the driver and
         * the command that finishes it; node-2 has no node drain, so no node finding. */
        judge(&j, "cluster-driver-drain.json", NULL, NULL, NULL);
        assert_int_equal(count(&j.rep, "unfinished-drain", "node-2", DOCTOR_WARN), 2);
        assert_int_equal(count(&j.rep, "unfinished-drain", "node-3", DOCTOR_WARN), 1);
        assert_int_equal(count(&j.rep, "unfinished-drain", NULL, -1), 3);
        for (size_t i = 0; i < j.rep.n; i++) {
                f = j.rep.items[i];
                if (!streq(f->check, "unfinished-drain") || !streq(f->subject, "node-2"))
                        continue;
                if (strstr(f->message, "gpu.example.com")) {
                        assert_string_equal(f->message,
                                            "DRA driver gpu.example.com is out of service (a drain of that "
                                            "driver): phase drained since 2026-01-01T00:00:00Z");
                        assert_objects(f, "Node node-2",
                                       "drainer.io/message.gpu.example.com: DRA driver gpu.example.com of "
                                       "node node-2 is out of service",
                                       NULL);
                        assert_string_equal(f->fix,
                                            "finish it ('drainer drain node-2 --driver gpu.example.com' "
                                            "resumes) or bring the driver back ('drainer uncordon node-2 "
                                            "--driver gpu.example.com')");
                } else
                        assert_string_equal(f->message,
                                            "DRA driver nic.example.com is out of service (a drain of that "
                                            "driver): drainer state without a phase");
        }
        judged_done(&j);
}

static void test_rule_cordoned_with_claims(void **state) {
        struct judged j;
        const struct doctor_finding *f;

        judge(&j, "cluster-healthy.json", NULL, NULL, NULL);
        f = the(&j.rep, "cordoned-with-claims", "", DOCTOR_PASS);
        assert_string_equal(f->message, "0 cordoned nodes, none with ResourceClaims still on it outside a "
                                        "drainer drain");
        judged_done(&j);

        judge(&j, "cluster-drain.json", NULL, NULL, NULL);
        /* Allocated from the node's pool, reserved or not, or reserved by one of its pods. */
        f = the(&j.rep, "cordoned-with-claims", "node-2", DOCTOR_WARN);
        assert_string_equal(f->message,
                            "cordoned with 3 ResourceClaims still on it: a drain tool that stops the "
                            "DRA driver now leaves their pods Terminating with devices never freed");
        assert_objects(f, "Node node-2", "ResourceClaim team-a/train-gpu", "ResourceClaim team-a/infer-gpu",
                       "ResourceClaim team-a/shared", NULL);
        assert_string_equal(f->fix, "drain it with 'drainer drain node-2' (claim holders first, the driver "
                                    "last), or uncordon it");
        f = the(&j.rep, "cordoned-with-claims", "node-4", DOCTOR_WARN);
        assert_string_equal(f->message, "cordoned; cannot list its pods, claims on it not checked");
        /* node-3 is in a drainer drain: unfinished-drain speaks of it. */
        assert_int_equal(count(&j.rep, "cordoned-with-claims", "node-3", -1), 0);
        assert_int_equal(count(&j.rep, "cordoned-with-claims", NULL, -1), 2);
        assert_int_equal(count(&j.rep, "cordoned-with-claims", NULL, DOCTOR_FAIL), 0);
        judged_done(&j);

        judge(&j, "cluster-drain.json", "node-1", NULL, NULL);
        f = the(&j.rep, "cordoned-with-claims", "", DOCTOR_PASS);
        assert_string_equal(f->message,
                            "0 cordoned nodes among node-1, none with ResourceClaims still on it "
                            "outside a drainer drain");
        assert_int_equal(j.d.cordoned.n, 0);
        judged_done(&j);
}

/* The finding of check about subject that names object. */
static const struct doctor_finding *naming(const struct doctor_report *r, const char *check,
                                           const char *subject, const char *object) {
        for (size_t i = 0; i < r->n; i++)
                if (strcmp(r->items[i]->check, check) == 0 && strcmp(r->items[i]->subject, subject) == 0)
                        for (size_t k = 0; k < r->items[i]->n_objects; k++)
                                if (strcmp(r->items[i]->objects[k], object) == 0)
                                        return r->items[i];
        fail_msg("no finding %s/%s naming %s", check, subject, object);
        return NULL;
}

static void test_rule_client_qps(void **state) {
        struct judged j;
        const struct doctor_finding *f;

        judge(&j, "cluster-healthy.json", NULL, NULL, NULL);
        f = the(&j.rep, "client-qps", "kube-controller-manager", DOCTOR_PASS);
        assert_string_equal(f->message,
                            "--kube-api-qps 100, --kube-api-burst 200: at or above the guide's floor "
                            "scaled to 3 nodes and 2 claims (3/5)");
        assert_objects(f, "Pod kube-system/kube-controller-manager-node-1", NULL);
        /* A mirror pod named so, without the component label; "--flag value" as two arguments. */
        f = the(&j.rep, "client-qps", "kube-scheduler", DOCTOR_PASS);
        assert_objects(f, "Pod kube-system/kube-scheduler-node-1", NULL);
        assert_int_equal(json_int(f->details, "qps", -1), 100);
        judged_done(&j);

        /* 200 nodes: floor 150/300. One static pod per finding. */
        judge(&j, "cluster-tuning.json", NULL, NULL, NULL);
        f = naming(&j.rep, "client-qps", "kube-controller-manager",
                   "Pod kube-system/kube-controller-manager-node-1");
        assert_int_equal(f->status, DOCTOR_PASS);
        f = naming(&j.rep, "client-qps", "kube-controller-manager",
                   "Pod kube-system/kube-controller-manager-node-2");
        assert_int_equal(f->status, DOCTOR_WARN);
        assert_string_equal(f->message,
                            "--kube-api-qps 20, --kube-api-burst 30: below the guide's floor for DRA "
                            "clusters (QPS 75 / burst 150 at 100 nodes and 800 claims) scaled to 200 "
                            "nodes and 3 claims: 150/300");
        assert_string_equal(f->fix, "set --kube-api-qps=150 --kube-api-burst=300 (or more) on "
                                    "kube-controller-manager");
        assert_int_equal(json_int(f->details, "floorBurst", -1), 300);
        f = naming(&j.rep, "client-qps", "kube-controller-manager",
                   "Pod kube-system/kube-controller-manager-node-3");
        assert_int_equal(f->status, DOCTOR_WARN);
        assert_string_equal(f->message, "kube-system/kube-controller-manager-node-3: cannot read "
                                        "--kube-api-qps/--kube-api-burst from its command line");
        f = the(&j.rep, "client-qps", "kube-scheduler", DOCTOR_WARN);
        assert_string_equal(f->message,
                            "kube-system/kube-scheduler-node-1 reads its client settings from "
                            "--config (clientConnection.qps/burst), which is a file on its host: not "
                            "visible from here");
        /* The pod being deleted and CoreDNS are no control plane. */
        assert_int_equal(count(&j.rep, "client-qps", NULL, -1), 4);
        assert_int_equal(count(&j.rep, "client-qps", NULL, DOCTOR_FAIL), 0);
        judged_done(&j);

        /* WARN: not visible; PASS when the metrics judge instead. */
        judge(&j, "cluster-empty.json", NULL, NULL, NULL);
        f = the(&j.rep, "client-qps", "kube-scheduler", DOCTOR_WARN);
        assert_non_null(strstr(f->message, "no static pod of kube-scheduler in kube-system"));
        assert_non_null(strstr(f->fix, "--prometheus"));
        judged_done(&j);
        {
                struct doctor_prom_results none = {};

                judge(&j, "cluster-empty.json", NULL, "http://prometheus.test:9090", &none);
                f = the(&j.rep, "client-qps", "kube-scheduler", DOCTOR_PASS);
                assert_non_null(strstr(f->message, "judged by the metrics below instead"));
                the(&j.rep, "client-qps", "kube-controller-manager", DOCTOR_PASS);
                judged_done(&j);
        }

        /* WARN: kube-system cannot be listed; said once. */
        judge(&j, "cluster-system-forbidden.json", NULL, NULL, NULL);
        f = the(&j.rep, "client-qps", "", DOCTOR_WARN);
        assert_string_equal(f->message,
                            "cannot list kube-system pods: pods is forbidden: User \"doctor\" cannot "
                            "list resource \"pods\" in the namespace \"kube-system\": not checked");
        assert_string_equal(f->fix, RBAC_FIX);
        assert_int_equal(count(&j.rep, "client-qps", NULL, -1), 1);
        judged_done(&j);
}

/* ---- the guide's queries, asked of a fake Prometheus (fixtures/doctor/prom-*.json) ---- */

#define PROM_URL "http://prometheus.test:9090/"

static const char *const guide_queries[] = {
        DOCTOR_Q_WQ_ADDS,          DOCTOR_Q_WQ_DEPTH,          DOCTOR_Q_WQ_DEPTH_ANY,
        DOCTOR_Q_WQ_WORK,          DOCTOR_Q_SCHED_SLI,         DOCTOR_Q_SCHED_ALG,
        DOCTOR_Q_KUBELET_PREPARE,  DOCTOR_Q_KUBELET_UNPREPARE, DOCTOR_Q_PLUGIN_PREPARE,
        DOCTOR_Q_PLUGIN_UNPREPARE,
};

struct asked {
        int calls;
        int error;
};

static void on_asked(int error, void *userdata) {
        struct asked *a = userdata;

        a->calls++;
        a->error = error;
}

static char *query_path(const char *query) {
        char *e = kube_query_escape(query), *path = NULL;

        assert_non_null(e);
        assert_true(asprintf(&path, "/api/v1/query?query=%s", e) > 0);
        free(e);
        return path;
}

/* Asks the guide's queries through prom.c of a fake Prometheus that answers
 * as the fixture says: an answer as Prometheus sends it (a status "error"
 * comes with HTTP 400), {"httpStatus", "body"}, or {"transportError"}; a
 * query the fixture does not name finds nothing. Returns which queries were
 * asked (bits in the order of guide_queries). */
static unsigned prom_ask(const char *fixture, struct doctor_prom_results *m) {
        struct fake_clock *clock = fake_clock_new(1000 * USEC_PER_SEC, INT64_C(1767225600) * 1000000);
        struct fake_transport *ft = fake_transport_new(fake_clock_timesrc(clock));
        cJSON *fx = load(fixture);
        struct asked asked = {};
        unsigned which = 0;

        assert_non_null(ft);
        for (size_t i = 0; i < ELEMENTSOF(guide_queries); i++) {
                const cJSON *a = fixture_get(fx, "answers", guide_queries[i]);
                char *path = query_path(guide_queries[i]), *body;
                long status = 200;

                if (a && json_str(a, "transportError")) {
                        fake_transport_expect_error(ft, "GET", path,
                                                    -errno_named(json_str(a, "transportError")), 1);
                        free(path);
                        continue;
                }
                if (!a)
                        body = strdup("{\"status\":\"success\",\"data\":{\"resultType\":\"vector\","
                                      "\"result\":[]}}");
                else if (json_path(a, "body")) {
                        status = json_int(a, "httpStatus", 200);
                        body = cJSON_PrintUnformatted(json_path(a, "body"));
                } else {
                        status = strcmp(strna(json_str(a, "status")), "error") == 0 ? 400 : 200;
                        body = cJSON_PrintUnformatted(a);
                }
                fake_transport_expect(ft, "GET", path,
                                      &(struct fake_reply){ .status = status, .body = body });
                free(body);
                free(path);
        }
        cJSON_Delete(fx);

        *m = (struct doctor_prom_results){};
        assert_int_equal(doctor_prom_start(fake_transport_base(ft), PROM_URL, m, on_asked, &asked), 0);
        assert_int_equal(asked.calls, 0); /* never from inside the start */
        for (int i = 0; i < 100 && asked.calls == 0; i++)
                fake_clock_advance(clock, USEC_PER_MSEC);
        assert_int_equal(asked.calls, 1);
        assert_int_equal(asked.error, 0);
        for (size_t i = 0; i < fake_transport_n_requests(ft); i++) {
                const struct fake_request *r = fake_transport_request(ft, i);

                /* One slash between the base and the API, whatever the base ends with. */
                assert_true(strncmp(r->url, "http://prometheus.test:9090/api/v1/query?query=", 47) == 0);
                assert_string_equal(r->method, "GET");
                assert_string_equal(fake_request_header(r, "Accept"), "application/json");
                assert_true(r->matched >= 0);
                for (size_t q = 0; q < ELEMENTSOF(guide_queries); q++) {
                        char *path = query_path(guide_queries[q]);

                        if (strcmp(r->path, path) == 0)
                                which |= 1u << q;
                        free(path);
                }
        }
        fake_transport_free(ft);
        fake_clock_free(clock);
        return which;
}

#define ASKED_ALL_BUT_FALLBACK 0x3FBu /* every query but DOCTOR_Q_WQ_DEPTH_ANY */
#define ASKED_FALLBACK         0x004u

static void on_closed(struct transport *t, void *userdata) {
        *(bool *)userdata = true;
}

static void test_prom_ask(void **state) {
        struct doctor_prom_results m;

        /* The guide's queries verbatim, all answered. */
        assert_int_equal(prom_ask("prom-healthy.json", &m), ASKED_ALL_BUT_FALLBACK);
        assert_string_equal(m.depth_query, DOCTOR_Q_WQ_DEPTH);
        assert_true(m.wq_adds.have && m.wq_adds.value == 0.4666666666666667);
        assert_true(m.wq_depth.have && m.wq_depth.value == 0);
        assert_true(m.plugin_unprepare.have && m.plugin_unprepare.value == 0.08);
        assert_null(m.error_kcm);
        assert_null(m.error_scheduler);
        assert_null(m.error_kubelet);
        assert_null(m.error_plugin);
        doctor_prom_results_done(&m);

        /* The guide's depth query finds nothing: asked again without kube-prometheus-stack's label. */
        assert_int_equal(prom_ask("prom-controller-slow.json", &m), ASKED_ALL_BUT_FALLBACK | ASKED_FALLBACK);
        assert_string_equal(m.depth_query, DOCTOR_Q_WQ_DEPTH_ANY);
        assert_true(m.wq_depth.have && m.wq_depth.value == 42);
        doctor_prom_results_done(&m);

        /* Nothing anywhere: NaN is no value either. */
        assert_int_equal(prom_ask("prom-empty.json", &m), ASKED_ALL_BUT_FALLBACK | ASKED_FALLBACK);
        assert_false(m.wq_depth.have || m.wq_adds.have || m.sched_sli.have || m.kubelet_prepare.have);
        assert_null(m.error_kcm);
        doctor_prom_results_done(&m);

        /* +Inf is a value. */
        assert_int_equal(prom_ask("prom-concurrency.json", &m), ASKED_ALL_BUT_FALLBACK);
        assert_true(m.kubelet_prepare.have && isinf(m.kubelet_prepare.value));
        doctor_prom_results_done(&m);

        /* Failures: the first of each group, as a message; no fallback for a query that failed. */
        assert_int_equal(prom_ask("prom-errors.json", &m), ASKED_ALL_BUT_FALLBACK);
        assert_string_equal(m.error_kcm, "cannot query it: Connection refused");
        assert_string_equal(m.error_scheduler,
                            "query refused (HTTP 400): bad_data: 1:5: parse error: unexpected identifier");
        assert_string_equal(m.error_kubelet, "unexpected answer (HTTP 503, status success)");
        assert_string_equal(m.error_plugin, "unexpected answer (HTTP 200, not a Prometheus query result)");
        assert_true(m.wq_adds.have && m.kubelet_unprepare.have && m.plugin_unprepare.have);
        assert_string_equal(m.depth_query, DOCTOR_Q_WQ_DEPTH);
        doctor_prom_results_done(&m);

        /* Nothing can be sent: an error, and done never runs. */
        {
                struct fake_clock *clock = fake_clock_new(1000 * USEC_PER_SEC, 0);
                struct fake_transport *ft = fake_transport_new(fake_clock_timesrc(clock));
                struct asked asked = {};
                bool closed = false;

                transport_close(fake_transport_base(ft), on_closed, &closed);
                for (int i = 0; i < 10 && !closed; i++)
                        fake_clock_advance(clock, USEC_PER_MSEC);
                assert_true(closed);
                m = (struct doctor_prom_results){};
                assert_int_equal(doctor_prom_start(fake_transport_base(ft), PROM_URL, &m, on_asked, &asked),
                                 -ESHUTDOWN);
                fake_clock_advance(clock, USEC_PER_SEC);
                assert_int_equal(asked.calls, 0);
                doctor_prom_results_done(&m);
                fake_transport_free(ft);
                fake_clock_free(clock);
        }
}

/* The metric findings over a scenario, beside a cluster without DRA. */
static void judge_metrics(struct judged *j, const char *fixture, struct doctor_prom_results *m) {
        prom_ask(fixture, m);
        judge(j, "cluster-empty.json", NULL, PROM_URL, m);
        /* A metric is never a FAIL: the guide names patterns, drainer picks the numbers. */
        for (size_t i = 0; i < j->rep.n; i++)
                if (j->rep.items[i]->section >= DOCTOR_SECTION_KCM_METRICS)
                        assert_int_not_equal(j->rep.items[i]->status, DOCTOR_FAIL);
}

static void judged_metrics_done(struct judged *j, struct doctor_prom_results *m) {
        judged_done(j);
        doctor_prom_results_done(m);
}

static void test_rule_metrics(void **state) {
        struct doctor_prom_results m;
        struct judged j;
        const struct doctor_finding *f;
        char *details;

        judge_metrics(&j, "prom-healthy.json", &m);
        f = the(&j.rep, "resource-claim-workqueue", "kube-controller-manager", DOCTOR_PASS);
        assert_string_equal(f->message,
                            "the ResourceClaim controller keeps up: add rate 0.467/s, depth 0, p99 "
                            "work 0.0099 s");
        assert_objects(f, "query " DOCTOR_Q_WQ_ADDS, "query " DOCTOR_Q_WQ_DEPTH, "query " DOCTOR_Q_WQ_WORK,
                       NULL);
        assert_int_equal(f->section, DOCTOR_SECTION_KCM_METRICS);
        f = the(&j.rep, "scheduling-latency", "kube-scheduler", DOCTOR_PASS);
        assert_string_equal(f->message, "scheduling p99 0.743 s end to end, algorithm p99 0.0124 s");
        f = the(&j.rep, "prepare-latency", "NodePrepareResources", DOCTOR_PASS);
        assert_string_equal(f->message,
                            "NodePrepareResources p99 0.248 s as the kubelet sees it, 0.2 s in the "
                            "plugin");
        assert_objects(f, "query " DOCTOR_Q_KUBELET_PREPARE, "query " DOCTOR_Q_PLUGIN_PREPARE, NULL);
        the(&j.rep, "unprepare-latency", "NodeUnprepareResources", DOCTOR_PASS);
        judged_metrics_done(&j, &m);

        judge_metrics(&j, "prom-controller-slow.json", &m);
        f = the(&j.rep, "resource-claim-workqueue", "kube-controller-manager", DOCTOR_WARN);
        assert_string_equal(f->message,
                            "the ResourceClaim controller is not keeping up: add rate 0.5/s, depth 42 "
                            "(high from 10), p99 work 2.5 s (slow from 0.5 s): its syncs are slow");
        assert_string_equal(f->fix,
                            "raise kube-controller-manager's --kube-api-qps and --kube-api-burst, and "
                            "its CPU/memory");
        /* The depth query that answered. */
        assert_string_equal(f->objects[1], "query " DOCTOR_Q_WQ_DEPTH_ANY);
        details = cJSON_PrintUnformatted(f->details);
        assert_string_equal(details, "{\"addRate\":0.5,\"depth\":42,\"workP99Seconds\":2.5}");
        free(details);
        f = the(&j.rep, "scheduling-latency", "kube-scheduler", DOCTOR_WARN);
        assert_string_equal(f->message,
                            "pods wait long from queue to bound (p99 12 s, slow from 5 s) although the "
                            "algorithm is fast (p99 0.01 s): nodes are found quickly but binding (or "
                            "claim creation) lags");
        assert_non_null(strstr(f->fix, "clientConnection.qps/burst"));
        f = the(&j.rep, "prepare-latency", "NodePrepareResources", DOCTOR_WARN);
        assert_int_equal(f->section, DOCTOR_SECTION_KUBELET_METRICS);
        assert_string_equal(f->message,
                            "NodePrepareResources is slow on the kubelet's side: p99 4 s as the "
                            "kubelet sees it but only 0.05 s in the plugin's gRPC handler (slow from "
                            "1 s)");
        assert_non_null(strstr(f->fix, "look at the kubelets"));
        f = the(&j.rep, "unprepare-latency", "NodeUnprepareResources", DOCTOR_WARN);
        assert_int_equal(f->section, DOCTOR_SECTION_PLUGIN_METRICS);
        assert_string_equal(f->message,
                            "NodeUnprepareResources is slow in the DRA driver itself: p99 3.9 s in the "
                            "plugin's gRPC handler, 4 s as the kubelet sees it (slow from 1 s) (drains "
                            "wait for it: a node's claims are released only after "
                            "NodeUnprepareResources)");
        assert_string_equal(f->fix, "look at the DRA driver: its CPU/memory limits, its logs, the device "
                                    "operations it runs in NodeUnprepareResources");
        judged_metrics_done(&j, &m);

        judge_metrics(&j, "prom-concurrency.json", &m);
        f = the(&j.rep, "resource-claim-workqueue", "kube-controller-manager", DOCTOR_WARN);
        assert_non_null(strstr(f->fix, "lower the pod creation QPS"));
        assert_non_null(strstr(f->message, "its concurrency is hardcoded"));
        f = the(&j.rep, "scheduling-latency", "kube-scheduler", DOCTOR_WARN);
        assert_string_equal(f->message,
                            "the scheduling algorithm itself is slow: p99 0.9 s (slow from 0.5 s), end "
                            "to end 12 s");
        f = the(&j.rep, "prepare-latency", "NodePrepareResources", DOCTOR_WARN);
        assert_string_equal(f->message,
                            "NodePrepareResources is slow: p99 +Inf s as the kubelet sees it (slow "
                            "from 1 s); no plugin metrics to tell whether the driver or the kubelet "
                            "is the slow part");
        /* JSON has no infinity. */
        assert_true(cJSON_IsNull(json_path(f->details, "kubeletP99Seconds")));
        f = the(&j.rep, "unprepare-latency", "NodeUnprepareResources", DOCTOR_WARN);
        assert_true(strncmp(f->message,
                            "NodeUnprepareResources is slow in the DRA driver itself: p99 3 s in the "
                            "plugin's gRPC handler, no data as the kubelet sees it",
                            106) == 0);
        judged_metrics_done(&j, &m);

        judge_metrics(&j, "prom-empty.json", &m);
        f = the(&j.rep, "resource-claim-workqueue", "kube-controller-manager", DOCTOR_WARN);
        assert_string_equal(f->message,
                            "no samples of the resource_claim workqueue (add rate no data, depth no "
                            "data, p99 work no data)");
        assert_objects(f, "query " DOCTOR_Q_WQ_ADDS, "query " DOCTOR_Q_WQ_DEPTH_ANY,
                       "query " DOCTOR_Q_WQ_WORK, NULL);
        f = the(&j.rep, "scheduling-latency", "kube-scheduler", DOCTOR_WARN);
        assert_string_equal(f->fix, "let Prometheus scrape kube-scheduler's /metrics");
        f = the(&j.rep, "prepare-latency", "NodePrepareResources", DOCTOR_WARN);
        assert_string_equal(
                f->message,
                "no samples of NodePrepareResources latency from the kubelets or the DRA plugins");
        the(&j.rep, "unprepare-latency", "NodeUnprepareResources", DOCTOR_WARN);
        judged_metrics_done(&j, &m);

        judge_metrics(&j, "prom-errors.json", &m);
        f = the(&j.rep, "resource-claim-workqueue", "kube-controller-manager", DOCTOR_WARN);
        assert_string_equal(f->message,
                            "cannot evaluate the resource_claim workqueue queries at " PROM_URL ": "
                            "cannot query it: Connection refused");
        assert_null(f->fix);
        f = the(&j.rep, "scheduling-latency", "kube-scheduler", DOCTOR_WARN);
        assert_string_equal(f->message,
                            "cannot evaluate the scheduler queries at " PROM_URL ": query refused "
                            "(HTTP 400): bad_data: 1:5: parse error: unexpected identifier");
        /* A failed kubelet query spoils both Prepare and Unprepare. */
        f = the(&j.rep, "prepare-latency", "NodePrepareResources", DOCTOR_WARN);
        assert_string_equal(f->message, "cannot evaluate the NodePrepareResources queries at " PROM_URL ": "
                                        "unexpected answer (HTTP 503, status success)");
        f = the(&j.rep, "unprepare-latency", "NodeUnprepareResources", DOCTOR_WARN);
        assert_non_null(strstr(f->message, "unexpected answer (HTTP 503, status success)"));
        judged_metrics_done(&j, &m);
}

/* ---- gather over a fake API server: the same picture as the fixture's ---- */

#define API_SERVER "https://api.test.example:6443"

struct api {
        struct test_api *env;
        /* the environment's, for short */
        struct fake_clock *clock;
        struct fake_transport *ft;
        struct kube_client *client;
};

static void api_new(struct api *a) {
        /* No rate limit; quick retries of 5xx answers. No kubeconfig file: the
         * configuration is loaded from memory. */
        a->env = test_api_new(&(struct test_api_options){
                .server = API_SERVER,
                .realtime = INT64_C(1767225600) * 1000000,
                .client = &(struct kube_client_options){ .backoff_base_usec = USEC_PER_MSEC,
                                                         .backoff_cap_usec = 10 * USEC_PER_MSEC,
                                                         .random_seed = 7 },
        });
        a->clock = a->env->clock;
        a->ft = a->env->ft;
        a->client = a->env->client;
}

static void api_free(struct api *a) {
        /* Gather leaves no call behind (test_api_free asserts it before it cancels
         * anything: nothing is left to cancel). */
        assert_int_equal(kube_client_calls_in_flight(a->client), 0);
        assert_int_equal(fake_transport_in_flight(a->ft), 0);
        test_api_free(a->env);
        *a = (struct api){};
}

static void expect_json(struct api *a, const char *method, const char *path, long status, cJSON *body,
                        unsigned times) {
        char *s = cJSON_PrintUnformatted(body);

        assert_non_null(s);
        fake_transport_expect(a->ft, method, path,
                              &(struct fake_reply){ .status = status, .body = s, .times = times });
        free(s);
        cJSON_Delete(body);
}

/* A metav1.Status of a failed request, as many times as the client asks (5xx are retried). */
static void expect_status(struct api *a, const char *method, const char *path, int code,
                          const char *message) {
        cJSON *s = cJSON_CreateObject();

        cJSON_AddStringToObject(s, "kind", "Status");
        cJSON_AddStringToObject(s, "apiVersion", "v1");
        cJSON_AddStringToObject(s, "status", "Failure");
        cJSON_AddStringToObject(s, "message", message);
        cJSON_AddNumberToObject(s, "code", code);
        expect_json(a, method, path, code, s, FAKE_FOREVER);
}

/* The list at path: items (NULL: none), or the error e ({code, message}). */
static void serve_items(struct api *a, const char *path, const cJSON *items, const cJSON *e) {
        cJSON *list;

        if (e) {
                expect_status(a, "GET", path, (int)json_int(e, "code", 500), json_str(e, "message"));
                return;
        }
        list = cJSON_CreateObject();
        cJSON_AddStringToObject(list, "kind", "List");
        cJSON_AddStringToObject(list, "apiVersion", "v1");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(list, "metadata"), "resourceVersion", "7");
        cJSON_AddItemToObject(list, "items", items ? cJSON_Duplicate(items, true) : cJSON_CreateArray());
        expect_json(a, "GET", path, 200, list, 1);
}

/* The list at path: the fixture's items of key, or its error of that key. */
static void serve_list(struct api *a, const cJSON *fx, const char *key, const char *path) {
        serve_items(a, path, cJSON_GetObjectItemCaseSensitive(fx, key), fixture_get(fx, "errors", key));
}

static char *path_with(const char *prefix, const char *value) {
        char *e = kube_query_escape(value), *p = NULL;

        assert_non_null(e);
        assert_true(asprintf(&p, "%s%s", prefix, e) > 0);
        free(e);
        return p;
}

/* The fake API server answers as the fixture says, for what d0 (the fixture's
 * picture) leads doctor to ask in phase 2: the lists, the DaemonSets, the
 * SubjectAccessReviews in the order they are asked, the pods of cordoned
 * nodes. The health probes are refused (the fake transport speaks no gRPC). */
/* The APIGroup of resource.k8s.io as a 1.36 API server serves it with v1 only. */
static void serve_dra_group(struct api *a) {
        cJSON *g = cJSON_Parse(
                "{\"kind\":\"APIGroup\",\"apiVersion\":\"v1\",\"name\":\"resource.k8s.io\","
                "\"versions\":[{\"groupVersion\":\"resource.k8s.io/v1\",\"version\":\"v1\"}],"
                "\"preferredVersion\":{\"groupVersion\":\"resource.k8s.io/v1\",\"version\":\"v1\"}}");

        assert_non_null(g);
        expect_json(a, "GET", "/apis/resource.k8s.io", 200, g, 1);
}

static void serve(struct api *a, const cJSON *fx, const struct doctor_data *d0) {
        char *p;

        serve_dra_group(a);
        serve_list(a, fx, "nodes", "/api/v1/nodes");
        serve_list(a, fx, "resourceslices", "/apis/resource.k8s.io/v1/resourceslices");
        serve_list(a, fx, "resourceclaims", "/apis/resource.k8s.io/v1/resourceclaims");
        serve_list(a, fx, "clusterrolebindings", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings");
        serve_list(a, fx, "rolebindings", "/apis/rbac.authorization.k8s.io/v1/rolebindings");
        p = path_with("/api/v1/pods?labelSelector=", DOCTOR_DRAINER_POD_SELECTOR);
        serve_list(a, fx, "drainerPods", p);
        free(p);
        serve_list(a, fx, "kubeSystemPods", "/api/v1/namespaces/kube-system/pods");
        /* Karpenter's NodeClaims: where the fixture has none, Karpenter is not installed. */
        if (cJSON_GetObjectItemCaseSensitive(fx, "nodeclaims") || fixture_get(fx, "errors", "nodeclaims"))
                serve_list(a, fx, "nodeclaims", "/apis/karpenter.sh/v1/nodeclaims");
        else
                expect_status(a, "GET", "/apis/karpenter.sh/v1/nodeclaims", 404,
                              "the server could not find the requested resource");
        for (size_t i = 0; claims_default_driver_selectors[i]; i++) {
                p = path_with("/api/v1/pods?labelSelector=", claims_default_driver_selectors[i]);
                serve_list(a, fx, "driverPods", p);
                free(p);
        }
        if (!d0)
                return;

        for (size_t i = 0; i < d0->groups.n; i++) {
                const struct doctor_group *g = d0->groups.v[i];
                char path[512], key[512], notfound[512];
                const cJSON *ds, *e;

                if (!doctor_data_wants_daemonset(d0, i))
                        continue;
                snprintf(path, sizeof path, "/apis/apps/v1/namespaces/%s/daemonsets/%s", g->ns, g->name);
                snprintf(key, sizeof key, "daemonsets/%s/%s", g->ns, g->name);
                snprintf(notfound, sizeof notfound, "daemonsets.apps \"%s\" not found", g->name);
                e = fixture_get(fx, "errors", key);
                ds = fixture_get(fx, "daemonsets", key + strlen("daemonsets/"));
                if (e)
                        expect_status(a, "GET", path, (int)json_int(e, "code", 500), json_str(e, "message"));
                else if (ds)
                        expect_json(a, "GET", path, 200, cJSON_Duplicate(ds, true), 1);
                else
                        expect_status(a, "GET", path, 404, notfound);
        }

        for (size_t k = 0; k < d0->n_sars; k++) {
                const cJSON *e = fixture_get(fx, "errors", "subjectaccessreviews");
                cJSON *req = doctor_data_sar_request(d0, k), *status;
                const char *reason;
                char key[1024];

                sar_key(req, key, sizeof key);
                if (e) {
                        cJSON_Delete(req);
                        expect_status(a, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                                      (int)json_int(e, "code", 500), json_str(e, "message"));
                        continue;
                }
                reason = cJSON_GetStringValue(fixture_get(fx, "subjectaccessreviews", key));
                status = cJSON_AddObjectToObject(req, "status");
                if (reason) {
                        cJSON_AddBoolToObject(status, "allowed", true);
                        cJSON_AddStringToObject(status, "reason", reason);
                }
                expect_json(a, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", 201, req, 1);
        }

        fake_transport_expect_error(a->ft, "POST", "/grpc.health.v1.Health/Check", -ECONNREFUSED,
                                    FAKE_FOREVER);

        for (size_t k = 0; k < d0->cordoned.n; k++) {
                const char *node = d0->cordoned.v[k]->node->name;
                char sel[256], key[256];

                snprintf(sel, sizeof sel, "spec.nodeName=%s", node);
                snprintf(key, sizeof key, "nodePods/%s", node);
                p = path_with("/api/v1/pods?fieldSelector=", sel);
                serve_items(a, p, fixture_get(fx, "nodePods", node), fixture_get(fx, "errors", key));
                free(p);
        }
}

struct gathered {
        int calls;
        int error;
        char *message;
};

static void on_gathered(int error, const char *message, void *userdata) {
        struct gathered *g = userdata;

        g->calls++;
        g->error = error;
        free(g->message);
        g->message = message ? strdup(message) : NULL;
}

static void gather_until_done(struct api *a, struct gathered *g) {
        for (int i = 0; i < 100000 && g->calls == 0; i++)
                fake_clock_advance(a->clock, USEC_PER_MSEC);
        assert_int_equal(g->calls, 1);
}

/* Requests of the fake API server whose path starts with prefix. */
static size_t requests(const struct api *a, const char *method, const char *prefix) {
        return fake_transport_count(a->ft, method, prefix);
}

static char *report_json(const struct doctor_data *d) {
        struct doctor_report rep = {};
        cJSON *j;
        char *s;

        assert_int_equal(doctor_rules_run(d, NULL, NULL, &rep), 0);
        j = doctor_report_to_json(&rep);
        s = cJSON_PrintUnformatted(j);
        cJSON_Delete(j);
        doctor_report_done(&rep);
        return s;
}

static void test_gather(void **state) {
        static const char *const fixtures[] = {
                "cluster-healthy.json", "cluster-permissions.json",        "cluster-drivers.json",
                "cluster-drain.json",   "cluster-bindings-forbidden.json", "cluster-system-forbidden.json",
        };

        for (size_t i = 0; i < ELEMENTSOF(fixtures); i++) {
                cJSON *fx = load(fixtures[i]), *probes = cJSON_GetObjectItemCaseSensitive(fx, "probes"), *p;
                struct doctor_data d0, d1;
                struct gathered g = {};
                struct api a;
                char *want, *got;
                size_t sar = 0;

                /* As the fake API server answers them. */
                cJSON_ArrayForEach(p, probes) {
                        cJSON_DeleteItemFromObject(p, "status");
                        cJSON_DeleteItemFromObject(p, "message");
                        cJSON_DeleteItemFromObject(p, "error");
                        cJSON_AddStringToObject(p, "error", "ECONNREFUSED");
                }
                picture(&d0, fx, NULL);
                api_new(&a);
                serve(&a, fx, &d0);

                assert_int_equal(doctor_data_init(&d1, NULL), 0);
                assert_int_equal(doctor_gather_start(a.client, fake_transport_base(a.ft), &d1,
                                                     claims_default_driver_selectors, on_gathered, &g, NULL),
                                 0);
                assert_int_equal(g.calls, 0); /* never from inside the start */
                gather_until_done(&a, &g);
                if (g.error < 0)
                        fail_msg("%s: %s", fixtures[i], strna(g.message));
                assert_null(g.message);

                /* The same findings, from the same picture. */
                want = report_json(&d0);
                got = report_json(&d1);
                assert_string_equal(got, want);
                free(want);
                free(got);
                assert_int_equal(d1.n_sars, d0.n_sars);
                assert_int_equal(d1.n_probes, d0.n_probes);

                /* Every request was answered; the SubjectAccessReviews were asked in the
                 * order planned; nothing but SubjectAccessReviews and probes was posted. */
                assert_int_equal(fake_transport_unmatched(a.ft), 0);
                for (size_t k = 0; k < fake_transport_n_requests(a.ft); k++) {
                        const struct fake_request *r = fake_transport_request(a.ft, k);

                        if (strcmp(r->method, "GET") == 0)
                                continue;
                        assert_string_equal(r->method, "POST");
                        if (strcmp(r->path, "/grpc.health.v1.Health/Check") == 0)
                                continue;
                        assert_string_equal(r->path, "/apis/authorization.k8s.io/v1/subjectaccessreviews");
                        {
                                cJSON *body = cJSON_Parse(r->body),
                                      *planned = doctor_data_sar_request(&d0, sar++);
                                char got_key[1024], want_key[1024];

                                sar_key(body, got_key, sizeof got_key);
                                sar_key(planned, want_key, sizeof want_key);
                                assert_string_equal(got_key, want_key);
                                cJSON_Delete(body);
                                cJSON_Delete(planned);
                        }
                }
                assert_int_equal(sar, d0.n_sars);
                assert_int_equal(requests(&a, "POST", "/grpc.health.v1.Health/Check"), d0.n_probes);

                doctor_data_done(&d1);
                doctor_data_done(&d0);
                free(g.message);
                api_free(&a);
                cJSON_Delete(fx);
        }
}

/* A list the report cannot do without fails: the reads stop, with the API server's reason. */
static void test_gather_fatal(void **state) {
        cJSON *fx = load("cluster-healthy.json"), *e = cJSON_CreateObject();
        struct doctor_data d;
        struct gathered g = {};
        struct api a;

        cJSON_AddNumberToObject(e, "code", 403);
        cJSON_AddStringToObject(e, "message",
                                "nodes is forbidden: User \"doctor\" cannot list resource \"nodes\"");
        cJSON_AddItemToObject(cJSON_AddObjectToObject(fx, "errors"), "nodes", e);
        api_new(&a);
        serve(&a, fx, NULL);
        assert_int_equal(doctor_data_init(&d, NULL), 0);
        assert_int_equal(doctor_gather_start(a.client, fake_transport_base(a.ft), &d,
                                             claims_default_driver_selectors, on_gathered, &g, NULL),
                         0);
        gather_until_done(&a, &g);
        assert_int_equal(g.error, -EACCES);
        assert_string_equal(g.message,
                            "list nodes: nodes is forbidden: User \"doctor\" cannot list resource "
                            "\"nodes\"");
        /* Nothing of phase 2. */
        assert_int_equal(requests(&a, NULL, "/apis/apps/"), 0);
        assert_int_equal(requests(&a, "POST", NULL), 0);
        doctor_data_done(&d);
        free(g.message);
        api_free(&a);
        cJSON_Delete(fx);
}

/* --node names no node: an error once the nodes are listed, before phase 2.
 * With --driver-selector, its lists replace the default ones. */
static void test_gather_no_node(void **state) {
        static const char *const selectors[] = { "app=plugin", NULL };
        cJSON *fx = load("cluster-healthy.json");
        struct doctor_data d;
        struct gathered g = {};
        struct api a;
        char *p;

        api_new(&a);
        serve(&a, fx, NULL);
        p = path_with("/api/v1/pods?labelSelector=", "app=plugin");
        serve_list(&a, fx, "driverPods", p);
        free(p);
        assert_int_equal(doctor_data_init(&d, "node-9"), 0);
        assert_int_equal(doctor_gather_start(a.client, fake_transport_base(a.ft), &d, selectors, on_gathered,
                                             &g, NULL),
                         0);
        gather_until_done(&a, &g);
        assert_int_equal(g.error, -ENOENT);
        assert_string_equal(g.message, "node \"node-9\" not found");
        assert_int_equal(requests(&a, NULL, "/apis/apps/"), 0);
        assert_int_equal(requests(&a, "POST", NULL), 0);
        assert_int_equal(requests(&a, "GET", "/api/v1/pods?labelSelector=app%3Dplugin"), 1);
        assert_int_equal(requests(&a, "GET", "/api/v1/pods?labelSelector=app.kubernetes.io%2Fcomponent"), 0);
        assert_int_equal(requests(&a, "GET", "/api/v1/pods?labelSelector="), 2); /* and drainer's own */
        doctor_data_done(&d);
        free(g.message);
        api_free(&a);
        cJSON_Delete(fx);
}

/* A cluster that serves no DRA API (the group answers 404): the slices and claims are
 * not listed, the dra-api finding says so (WARN, with a fix) and the exit code is
 * DOCTOR_EXIT_NO_DRA; one served at v1beta2 is read there. */
static void test_gather_no_dra(void **state) {
        cJSON *fx = load("cluster-healthy.json");
        struct doctor_report rep = {};
        struct doctor_data d;
        struct gathered g = {};
        struct api a;
        char *p;

        api_new(&a);
        expect_status(&a, "GET", "/apis/resource.k8s.io", 404,
                      "the server could not find the requested resource");
        serve_list(&a, fx, "nodes", "/api/v1/nodes");
        serve_list(&a, fx, "clusterrolebindings", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings");
        serve_list(&a, fx, "rolebindings", "/apis/rbac.authorization.k8s.io/v1/rolebindings");
        p = path_with("/api/v1/pods?labelSelector=", DOCTOR_DRAINER_POD_SELECTOR);
        serve_list(&a, fx, "drainerPods", p);
        free(p);
        serve_list(&a, fx, "kubeSystemPods", "/api/v1/namespaces/kube-system/pods");
        for (size_t i = 0; claims_default_driver_selectors[i]; i++) {
                p = path_with("/api/v1/pods?labelSelector=", claims_default_driver_selectors[i]);
                serve_list(&a, fx, "driverPods", p);
                free(p);
        }
        fake_transport_expect_error(a.ft, NULL, NULL, -ECONNREFUSED, FAKE_FOREVER);
        assert_int_equal(doctor_data_init(&d, NULL), 0);
        assert_int_equal(doctor_gather_start(a.client, fake_transport_base(a.ft), &d,
                                             claims_default_driver_selectors, on_gathered, &g, NULL),
                         0);
        gather_until_done(&a, &g);
        if (g.error < 0)
                fail_msg("%s", strna(g.message));
        assert_true(d.dra_known);
        assert_null(d.dra_api);
        assert_int_equal(requests(&a, "GET", "/apis/resource.k8s.io/"), 0);
        assert_int_equal(d.slices.n, 0);
        assert_int_equal(doctor_rules_run(&d, NULL, NULL, &rep), 0);
        {
                bool found = false;

                for (size_t i = 0; i < rep.n; i++)
                        if (streq_ptr(rep.items[i]->check, "dra-api")) {
                                found = true;
                                assert_int_equal(rep.items[i]->status, DOCTOR_WARN);
                                assert_non_null(strstr(rep.items[i]->message, "serves no DRA API"));
                        }
                assert_true(found);
        }
        assert_int_equal(doctor_report_exit_code(&rep),
                         doctor_report_count(&rep, DOCTOR_FAIL) ? DOCTOR_EXIT_FAIL : DOCTOR_EXIT_NO_DRA);
        doctor_report_done(&rep);
        doctor_data_done(&d);
        free(g.message);
        api_free(&a);

        /* Served at v1beta2 only: read from there. */
        api_new(&a);
        expect_json(&a, "GET", "/apis/resource.k8s.io", 200,
                    cJSON_Parse("{\"kind\":\"APIGroup\",\"name\":\"resource.k8s.io\",\"versions\":[{"
                                "\"groupVersion\":\"resource.k8s.io/v1beta2\",\"version\":\"v1beta2\"},{"
                                "\"groupVersion\":\"resource.k8s.io/v1beta1\",\"version\":\"v1beta1\"}]}"),
                    1);
        serve_list(&a, fx, "resourceslices", "/apis/resource.k8s.io/v1beta2/resourceslices");
        serve_list(&a, fx, "resourceclaims", "/apis/resource.k8s.io/v1beta2/resourceclaims");
        fake_transport_expect_error(a.ft, NULL, NULL, -ECONNREFUSED, FAKE_FOREVER);
        g = (struct gathered){};
        assert_int_equal(doctor_data_init(&d, NULL), 0);
        assert_int_equal(doctor_gather_start(a.client, fake_transport_base(a.ft), &d,
                                             claims_default_driver_selectors, on_gathered, &g, NULL),
                         0);
        gather_until_done(&a, &g);
        assert_string_equal(d.dra_api, "resource.k8s.io/v1beta2");
        assert_int_equal(requests(&a, "GET", "/apis/resource.k8s.io/v1beta2/resourceslices"), 1);
        assert_int_equal(requests(&a, "GET", "/apis/resource.k8s.io/v1/"), 0);
        doctor_data_done(&d);
        free(g.message);
        api_free(&a);
        cJSON_Delete(fx);
}

/* Cancelled (doctor cannot ask Prometheus): done later with -ECANCELED, nothing more asked. */
static void test_gather_cancel(void **state) {
        cJSON *fx = load("cluster-healthy.json");
        struct doctor_gather *gather = NULL;
        struct doctor_data d;
        struct gathered g = {};
        struct api a;

        api_new(&a);
        serve(&a, fx, NULL);
        assert_int_equal(doctor_data_init(&d, NULL), 0);
        assert_int_equal(doctor_gather_start(a.client, fake_transport_base(a.ft), &d,
                                             claims_default_driver_selectors, on_gathered, &g, &gather),
                         0);
        assert_non_null(gather);
        doctor_gather_cancel(gather);
        assert_int_equal(g.calls, 0);
        gather_until_done(&a, &g);
        assert_int_equal(g.error, -ECANCELED);
        assert_null(g.message);
        assert_int_equal(requests(&a, "POST", NULL), 0);
        assert_int_equal(requests(&a, NULL, "/apis/apps/"), 0);
        doctor_data_done(&d);
        free(g.message);
        api_free(&a);
        cJSON_Delete(fx);
}

/* The exit code over every picture: 5 with a FAIL, 0 with WARNs only. */
static void test_rules_exit_code(void **state) {
        static const struct {
                const char *fixture;
                int exit_code;
                size_t fail, warn;
        } cases[] = {
                { "cluster-healthy.json", 0, 0, 0 },
                { "cluster-permissions.json", DOCTOR_EXIT_FAIL, 2, 4 },
                { "cluster-drivers.json", DOCTOR_EXIT_FAIL, 5, 13 },
                { "cluster-drain.json", 0, 0, 8 },
                { "cluster-tuning.json", 0, 0, 3 },
                { "cluster-empty.json", 0, 0, 2 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct judged j;

                judge(&j, cases[i].fixture, NULL, NULL, NULL);
                if (doctor_report_count(&j.rep, DOCTOR_FAIL) != cases[i].fail ||
                    doctor_report_count(&j.rep, DOCTOR_WARN) != cases[i].warn)
                        fail_msg("%s: %zu FAIL, %zu WARN", cases[i].fixture,
                                 doctor_report_count(&j.rep, DOCTOR_FAIL),
                                 doctor_report_count(&j.rep, DOCTOR_WARN));
                assert_int_equal(doctor_report_exit_code(&j.rep), cases[i].exit_code);
                /* Sorted: by the page's sections, FAIL first within each. */
                for (size_t k = 1; k < j.rep.n; k++)
                        assert_true(j.rep.items[k - 1]->section < j.rep.items[k]->section ||
                                    (j.rep.items[k - 1]->section == j.rep.items[k]->section &&
                                     j.rep.items[k - 1]->status >= j.rep.items[k]->status));
                judged_done(&j);
        }
}

/* What the report was made of, in its -o json: the counts, the drivers, the scope. */
static void test_data_json(void **state) {
        struct doctor_data d;
        cJSON *j;
        _cleanup_free_ char *s = NULL;

        assert_int_equal(doctor_data_init(&d, NULL), 0);
        j = doctor_data_to_json(&d, NULL, NULL);
        s = cJSON_PrintUnformatted(j);
        assert_string_equal(s, "{\"nodes\":0,\"resourceClaims\":0,\"drivers\":[],\"node\":null,"
                               "\"prometheus\":null}");
        cJSON_Delete(j);
        j = doctor_data_to_json(&d, "node-1", "http://prom:9090");
        assert_string_equal(json_str(j, "node"), "node-1");
        assert_string_equal(json_str(j, "prometheus"), "http://prom:9090");
        cJSON_Delete(j);
        doctor_data_done(&d);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_strings),
                cmocka_unit_test(test_data_json),
                cmocka_unit_test(test_subject_role),
                cmocka_unit_test(test_sar),
                cmocka_unit_test(test_container),
                cmocka_unit_test(test_rollout),
                cmocka_unit_test(test_kubelet_version),
                cmocka_unit_test(test_scaled_floor),
                cmocka_unit_test(test_client_conn),
                cmocka_unit_test(test_report_client_qps),
                cmocka_unit_test(test_prom_parse),
                cmocka_unit_test(test_judges),
                cmocka_unit_test(test_report_prometheus),
                cmocka_unit_test(test_report),
                cmocka_unit_test(test_rule_dra_api_writers),
                cmocka_unit_test(test_rule_claim_users),
                cmocka_unit_test(test_rule_driver_daemonset),
                cmocka_unit_test(test_rule_liveness_probe),
                cmocka_unit_test(test_rule_rollout_strategy),
                cmocka_unit_test(test_rule_driver_rollout),
                cmocka_unit_test(test_driver_seamless),
                cmocka_unit_test(test_rule_drain_guard),
                cmocka_unit_test(test_rule_karpenter_disruption),
                cmocka_unit_test(test_rule_karpenter_grace),
                cmocka_unit_test(test_rule_driver_health),
                cmocka_unit_test(test_rule_kubelet_versions),
                cmocka_unit_test(test_rule_drain_coverage),
                cmocka_unit_test(test_rule_unfinished_drain),
                cmocka_unit_test(test_rule_cordoned_with_claims),
                cmocka_unit_test(test_rule_client_qps),
                cmocka_unit_test(test_prom_ask),
                cmocka_unit_test(test_rule_metrics),
                cmocka_unit_test(test_rules_exit_code),
                cmocka_unit_test(test_gather),
                cmocka_unit_test(test_gather_fatal),
                cmocka_unit_test(test_gather_no_node),
                cmocka_unit_test(test_gather_no_dra),
                cmocka_unit_test(test_gather_cancel),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
