/* statusview: the model of `drainer status NODE` (sorted pods in the classes a drain
 * acts on, the claims on the node and which a driver pod holds, who cordoned the
 * node) and its -o json document; and fleetview's document of `status --all`. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "drainer/base/json.h"
#include "drainer/base/selector.h"
#include "drainer/ctl/fleetview.h"
#include "drainer/ctl/statusview.h"
#include "drainer/kube/objects.h"

#define POD(ns, name, extra)                                                                         \
        "{\"metadata\":{\"name\":\"" name "\",\"namespace\":\"" ns "\",\"uid\":\"uid-" name          \
        "\",\"resourceVersion\":\"1\"" extra "},\"spec\":{\"nodeName\":\"node-1\",\"containers\":[{" \
        "\"name\":\"c\",\"image\":\"x\"}]%s},\"status\":{\"phase\":\"Running\"%s}}"

/* the claim holder's spec and status parts */
#define HOLDER_SPEC   ",\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":\"claim-a\"}]"
#define HOLDER_STATUS ",\"resourceClaimStatuses\":[{\"name\":\"gpu\",\"resourceClaimName\":\"claim-a\"}]"
#define DS_OWNER                                                                                 \
        ",\"labels\":{\"app.kubernetes.io/component\":\"kubeletplugin\"},\"ownerReferences\":[{" \
        "\"apiVersion\":\"apps/"                                                                 \
        "v1\",\"kind\":\"DaemonSet\",\"name\":\"drv\",\"uid\":\"u\",\"controller\":true}]"

#define CLAIM_FMT                                                                                           \
        "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"demo\",\"uid\":\"uid-%s\",\"resourceVersion\":"     \
        "\"2\"},"                                                                                           \
        "\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpu\",\"exactly\":{\"deviceClassName\":\"gpu\"}}" \
        "]}},"                                                                                              \
        "\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"gpu\",\"driver\":\"gpu."      \
        "example.com\","                                                                                    \
        "\"pool\":\"%s\",\"device\":\"gpu-0\"}]},\"nodeSelector\":{\"nodeSelectorTerms\":[{"                \
        "\"matchFields\":[{"                                                                                \
        "\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":[\"%s\"]}]}]}},"                          \
        "\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"%s\",\"uid\":\"uid-%s\"}]}}"

struct world {
        struct node_rec *node;
        struct pod_rec *pods[3];
        struct claim_rec *claims[2];
        const struct pod_rec *pod_ptrs[3];
        const struct claim_rec *claim_ptrs[2];
        struct node_input in;
        struct selector **sels;
        size_t n_sels;
};

static cJSON *parse(const char *s) {
        cJSON *j = cJSON_Parse(s);

        assert_non_null(j);
        return j;
}

static void world_init(struct world *w, const char *node_json) {
        char buf[2048];
        cJSON *j;

        *w = (struct world){};
        j = parse(node_json);
        assert_int_equal(node_rec_from_json(j, &w->node), 0);
        cJSON_Delete(j);
        /* given out of order: the view sorts them */
        snprintf(buf, sizeof(buf), POD("zz", "workload", ""), "", "");
        j = parse(buf);
        assert_int_equal(pod_rec_from_json(j, &w->pods[0]), 0);
        cJSON_Delete(j);
        snprintf(buf, sizeof(buf), POD("demo", "holder", ""), HOLDER_SPEC, HOLDER_STATUS);
        j = parse(buf);
        assert_int_equal(pod_rec_from_json(j, &w->pods[1]), 0);
        cJSON_Delete(j);
        snprintf(buf, sizeof(buf), POD("demo", "driver", DS_OWNER), "", "");
        j = parse(buf);
        assert_int_equal(pod_rec_from_json(j, &w->pods[2]), 0);
        cJSON_Delete(j);
        /* claim-a held by the holder; claim-b allocated on another node, reserved for the driver */
        snprintf(buf, sizeof(buf), CLAIM_FMT, "claim-b", "claim-b", "node-2", "node-2", "driver", "driver");
        j = parse(buf);
        assert_int_equal(claim_rec_from_json(j, &w->claims[0]), 0);
        cJSON_Delete(j);
        snprintf(buf, sizeof(buf), CLAIM_FMT, "claim-a", "claim-a", "node-1", "node-1", "holder", "holder");
        j = parse(buf);
        assert_int_equal(claim_rec_from_json(j, &w->claims[1]), 0);
        cJSON_Delete(j);
        for (size_t i = 0; i < 3; i++)
                w->pod_ptrs[i] = w->pods[i];
        for (size_t i = 0; i < 2; i++)
                w->claim_ptrs[i] = w->claims[i];
        w->in = (struct node_input){
                .node = w->node,
                .pods = w->pod_ptrs,
                .n_pods = 3,
                .claims = w->claim_ptrs,
                .n_claims = 2,
                .dra_api = "resource.k8s.io/v1",
        };
        assert_int_equal(selectors_parse_strv(claims_default_driver_selectors, &w->sels, &w->n_sels, NULL),
                         0);
}

static void world_done(struct world *w) {
        for (size_t i = 0; i < 3; i++)
                pod_rec_free(w->pods[i]);
        for (size_t i = 0; i < 2; i++)
                claim_rec_free(w->claims[i]);
        node_rec_free(w->node);
        selectors_free(w->sels, w->n_sels);
}

static void build(struct world *w, struct status_view *v) {
        assert_int_equal(status_view_build(&w->in,
                                           &(const struct driver_filter){
                                                   .selectors = (const struct selector *const *)w->sels,
                                                   .n_selectors = w->n_sels,
                                           },
                                           v),
                         0);
}

#define CORDONED_BY_DRAINER                                                                               \
        "{\"metadata\":{\"name\":\"node-1\",\"resourceVersion\":\"1\",\"annotations\":{"                  \
        "\"drainer.io/was-unschedulable\":\"false\",\"drainer.io/state\":\"drained\"}},\"spec\":{"        \
        "\"unschedulable\":true,\"taints\":[{\"key\":\"k\",\"value\":\"v\",\"effect\":\"NoSchedule\"}]}," \
        "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}"

static void test_model(void **state) {
        struct world w;
        struct status_view v;

        world_init(&w, CORDONED_BY_DRAINER);
        build(&w, &v);
        /* sorted by namespace and name */
        assert_string_equal(w.in.pods[0]->name, "driver");
        assert_string_equal(w.in.pods[1]->name, "holder");
        assert_string_equal(w.in.pods[2]->name, "workload");
        assert_string_equal(w.in.claims[0]->name, "claim-a");
        assert_int_equal(v.cls[0], POD_CLASS_DRIVER);
        assert_int_equal(v.cls[1], POD_CLASS_CLAIM_HOLDER);
        assert_int_equal(v.cls[2], POD_CLASS_WORKLOAD);
        assert_int_equal(status_view_count(&v, POD_CLASS_DRIVER), 1);
        assert_int_equal(status_view_count(&v, POD_CLASS_MIRROR), 0);
        /* both on the node: reserved for a pod bound to it (claim-b allocated elsewhere) */
        assert_int_equal(v.why[0], CLAIM_RESERVED_BY_NODE_POD);
        assert_int_equal(v.why[1], CLAIM_RESERVED_BY_NODE_POD);
        assert_int_equal(v.n_on_node, 2);
        assert_false(status_view_claim_held_by_driver(&v, 0));
        assert_true(status_view_claim_held_by_driver(&v, 1)); /* reserved for the driver pod */
        assert_string_equal(v.cordoned_by, "drainer");
        /* the order a drain acts in */
        assert_int_equal(status_class_order[0], POD_CLASS_CLAIM_HOLDER);
        assert_int_equal(status_class_order[2], POD_CLASS_DRIVER);
        status_view_done(&v);
        world_done(&w);
}

/* A claim reserved for a PodGroup: noted as "used by no pod here" only once the pod of
 * the node that names it has finished; the driver's own claim keeps its note. */
static void test_podgroup_note(void **state) {
        static const char pg[] =
                "{\"metadata\":{\"name\":\"claim-a\",\"namespace\":\"demo\",\"uid\":\"uid-claim-a\","
                "\"resourceVersion\":\"2\"},\"status\":{\"allocation\":{\"devices\":{\"results\":[{"
                "\"request\":"
                "\"gpu\",\"driver\":\"gpu.example.com\",\"pool\":\"node-1\",\"device\":\"gpu-0\"}]},"
                "\"nodeSelector\":{\"nodeSelectorTerms\":[{\"matchFields\":[{\"key\":\"metadata.name\","
                "\"operator\":\"In\",\"values\":[\"node-1\"]}]}]}},\"reservedFor\":[{\"apiGroup\":"
                "\"scheduling.k8s.io\",\"resource\":\"podgroups\",\"name\":\"gang\",\"uid\":\"pg\"}]}}";
        struct world w;
        struct status_view v;
        cJSON *j;

        (void)state;
        world_init(&w, CORDONED_BY_DRAINER);
        claim_rec_free(w.claims[1]);
        j = parse(pg);
        assert_int_equal(claim_rec_from_json(j, &w.claims[1]), 0);
        cJSON_Delete(j);
        w.claim_ptrs[1] = w.claims[1];
        build(&w, &v);
        assert_string_equal(w.in.claims[0]->name, "claim-a");
        assert_int_equal(v.why[0], CLAIM_ALLOCATED_NODE_SELECTOR);
        assert_string_equal(status_view_claim_note(&v, 0), ""); /* the holder runs */
        assert_string_equal(status_view_claim_note(&v, 1), ", held by the driver");
        status_view_done(&v);
        w.pods[1]->phase = POD_SUCCEEDED;
        build(&w, &v);
        assert_string_equal(status_view_claim_note(&v, 0), ", its PodGroup's, used by no pod here");
        status_view_done(&v);
        world_done(&w);
}

static void test_cordon_owner(void **state) {
        struct world w;
        struct status_view v;

        world_init(
                &w,
                "{\"metadata\":{\"name\":\"node-1\",\"resourceVersion\":\"1\"},\"spec\":{\"unschedulable\":"
                "true}}");
        build(&w, &v);
        assert_string_equal(v.cordoned_by, "someone else");
        status_view_done(&v);
        world_done(&w);
        world_init(&w, "{\"metadata\":{\"name\":\"node-1\",\"resourceVersion\":\"1\"},\"spec\":{}}");
        build(&w, &v);
        assert_null(v.cordoned_by);
        status_view_done(&v);
        world_done(&w);
}

static void test_json(void **state) {
        struct world w;
        struct status_view v;
        cJSON *j;
        _cleanup_free_ char *s = NULL;

        world_init(&w, CORDONED_BY_DRAINER);
        build(&w, &v);
        j = status_view_to_json(&v);
        assert_non_null(j);
        assert_string_equal(json_str(j, "draApi"), "resource.k8s.io/v1");
        assert_true(cJSON_IsTrue(json_path(j, "draServed")));
        assert_string_equal(json_str(j, "node.name"), "node-1");
        assert_string_equal(json_str(j, "node.cordonedBy"), "drainer");
        assert_true(cJSON_IsTrue(json_path(j, "node.unschedulable")));
        assert_int_equal(cJSON_GetArraySize(json_path(j, "node.taints")), 1);
        assert_string_equal(json_str(cJSON_GetArrayItem(json_path(j, "node.taints"), 0), "value"), "v");
        assert_int_equal(cJSON_GetArraySize(json_path(j, "node.driversOutOfService")), 0);
        assert_int_equal(cJSON_GetArraySize(json_path(j, "node.devicesOutOfService")), 0);
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(json_path(j, "node.drainerAnnotations"),
                                                                     "drainer.io/state")),
                            "drained");
        assert_int_equal(cJSON_GetArraySize(json_path(j, "pods.claimHolders")), 1);
        assert_int_equal(cJSON_GetArraySize(json_path(j, "pods.driver")), 1);
        assert_int_equal(cJSON_GetArraySize(json_path(j, "pods.workload")), 1);
        assert_int_equal(cJSON_GetArraySize(json_path(j, "pods.mirror")), 0);
        assert_int_equal(cJSON_GetArraySize(json_path(j, "claims")), 2);
        assert_int_equal(cJSON_GetArraySize(json_path(j, "resourceSlices")), 0);
        /* the keys in the order of the documented schema */
        s = cJSON_PrintUnformatted(j);
        assert_non_null(strstr(s, "{\"draApi\":"));
        assert_true(strstr(s, "\"claimHolders\"") < strstr(s, "\"workload\""));
        assert_true(strstr(s, "\"workload\"") < strstr(s, "\"driver\":["));
        cJSON_Delete(j);
        status_view_done(&v);
        world_done(&w);
}

static void test_fleet_json(void **state) {
        struct fleet_row rows[3] = {
                { .name = "a", .c = FLEET_IN_SERVICE },
                { .name = "b",
                  .c = FLEET_WAITING,
                  .reason = "slot",
                  .has_phase = true,
                  .phase = DRAIN_PHASE_WAITING,
                  .since_usec = 1767225600LL * 1000000,
                  .message = "waiting" },
                { .name = "c", .c = FLEET_FAILED, .reason = "bad-state" },
        };
        size_t counts[_FLEET_CLASS_MAX] = {
                [FLEET_IN_SERVICE] = 1, [FLEET_WAITING] = 1, [FLEET_FAILED] = 1
        };
        cJSON *j = fleet_rows_to_json(rows, 3, counts, "pool=gpu"), *x;

        assert_non_null(j);
        assert_string_equal(json_str(j, "selector"), "pool=gpu");
        assert_int_equal(json_int(j, "nodes", 0), 3);
        assert_int_equal(json_int(j, "phases.in-service", -1), 1);
        assert_int_equal(json_int(j, "phases.draining", -1), 0);
        assert_int_equal(cJSON_GetArraySize(json_path(j, "notInService")), 2); /* not the one in service */
        x = cJSON_GetArrayItem(json_path(j, "notInService"), 0);
        assert_string_equal(json_str(x, "name"), "b");
        assert_string_equal(json_str(x, "status"), "waiting");
        assert_string_equal(json_str(x, "phase"), "waiting");
        assert_string_equal(json_str(x, "reason"), "slot");
        assert_string_equal(json_str(x, "since"), "2026-01-01T00:00:00Z");
        assert_string_equal(json_str(x, "message"), "waiting");
        x = cJSON_GetArrayItem(json_path(j, "notInService"), 1);
        assert_null(json_path(x, "phase"));
        assert_null(json_path(x, "since"));
        assert_null(json_path(x, "message"));
        cJSON_Delete(j);
        j = fleet_rows_to_json(rows, 1, counts, NULL);
        assert_null(json_path(j, "selector"));
        assert_int_equal(cJSON_GetArraySize(json_path(j, "notInService")), 0);
        cJSON_Delete(j);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_model),        cmocka_unit_test(test_podgroup_note),
                cmocka_unit_test(test_cordon_owner), cmocka_unit_test(test_json),
                cmocka_unit_test(test_fleet_json),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
