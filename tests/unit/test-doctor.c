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

#include <cmocka.h>

#include "drainer/doctor-rules.h"
#include "drainer/json.h"

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
                assert_int_equal(doctor_container_has_guard(container), json_bool(c, "guard", false));
        }
        cJSON_Delete(fx);
        assert_string_equal(doctor_probe_to_string(DOCTOR_PROBE_HTTP), "httpGet");
}

static void test_rollout(void **state) {
        cJSON *fx = load("rollouts.json");
        const cJSON *c;

        for_each_case(c, fx) {
                const char *surge = NULL;

                assert_string_equal(doctor_rollout_to_string(
                                            doctor_daemonset_rollout(json_path(c, "daemonset"), &surge)),
                                    json_str(c, "rollout"));
                assert_string_equal(surge, json_str(c, "surge"));
        }
        cJSON_Delete(fx);
        assert_string_equal(doctor_rollout_to_string(DOCTOR_ROLLOUT_ON_DELETE), "OnDelete");
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
                assert_int_equal(doctor_kubelet_seamless(cases[i].v), cases[i].seamless);
        assert_int_equal(doctor_kubelet_version_parse("v1.32.4", &major, &minor), 0);
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

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_strings),
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
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
