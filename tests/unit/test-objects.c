/* Unit tests for the compact records, built from API-shaped fixtures
 * (tests/unit/fixtures/api/, resource.k8s.io/v1 and core/v1 as the API
 * server returns them). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "drainer/kube/objects.h"
#include "fakes/test-env.h"

static cJSON *load(const char *name) {
        char rel[256];

        snprintf(rel, sizeof rel, "api/%s", name);
        return test_fixture_json(rel);
}

/* Every pointer of a record lies inside its single allocation. */
#define assert_inside(rec, ptr)                                                  \
        do {                                                                     \
                const char *_p = (const char *)(ptr), *_b = (const char *)(rec); \
                if (_p && (_p < _b || _p >= _b + (rec)->alloc_size))             \
                        fail_msg("%s points outside the record", #ptr);          \
        } while (0)

static void test_pod_template_claims(void **state) {
        cJSON *j = load("pod-template-claims.json");
        _cleanup_(pod_rec_freep) struct pod_rec *p = NULL;

        assert_int_equal(pod_rec_from_json(j, &p), 0);
        cJSON_Delete(j); /* the record must not point into the JSON */

        assert_string_equal(p->ns, "ml");
        assert_string_equal(p->name, "trainer-7d9c5b8f4-x2kqp");
        assert_string_equal(p->uid, "6b1f2c3a-9d4e-4f5a-8b7c-1a2b3c4d5e6f");
        assert_string_equal(p->resource_version, "48213");
        assert_string_equal(p->node_name, "node-1");
        assert_string_equal(p->pod_ip, "10.244.1.17");
        assert_null(p->priority_class_name);
        assert_int_equal(p->phase, POD_RUNNING);
        assert_true(p->ready);
        assert_false(p->deleting);
        assert_int_equal(p->deletion_grace_seconds, -1);
        assert_int_equal(p->termination_grace_seconds, 120);
        assert_false(p->mirror);
        assert_true(p->has_emptydir);
        assert_true(p->has_controller);
        assert_non_null(p->controller);
        assert_string_equal(p->controller->kind, "ReplicaSet");
        assert_string_equal(p->controller->name, "trainer-7d9c5b8f4");
        assert_string_equal(p->controller->uid, "0f7a6e1d-2c3b-4a59-8e7f-6d5c4b3a2918");
        assert_true(p->controller->controller);
        assert_int_equal(p->priority, 0);

        assert_int_equal(p->n_claims, 2);
        assert_string_equal(p->claims[0].name, "gpu");
        assert_true(p->claims[0].from_template);
        assert_string_equal(p->claims[0].claim_name, "trainer-7d9c5b8f4-x2kqp-gpu-5lq8v");
        assert_string_equal(p->claims[1].name, "nic");
        assert_true(p->claims[1].from_template);
        assert_null(p->claims[1].claim_name); /* nil resourceClaimName: no claim needed */
        assert_null(p->extended_claim_name);

        assert_int_equal(p->n_labels, 2);
        assert_string_equal(kv_get(p->labels, p->n_labels, "app"), "trainer");
        assert_string_equal(kv_get(p->labels, p->n_labels, "pod-template-hash"), "7d9c5b8f4");
        assert_null(kv_get(p->labels, p->n_labels, "nope"));

        assert_int_equal(p->n_tolerations, 2);
        assert_string_equal(p->tolerations[0].key, "node.kubernetes.io/not-ready");
        assert_string_equal(p->tolerations[0].op, "Exists");
        assert_string_equal(p->tolerations[0].effect, "NoExecute");
        assert_int_equal(p->tolerations[0].seconds, 300);
        assert_int_equal(p->grpc_probe_port, 0);

        assert_inside(p, p->name);
        assert_inside(p, p->claims);
        assert_inside(p, p->claims[0].claim_name);
        assert_inside(p, p->labels);
        assert_inside(p, p->labels[1].value);
        assert_inside(p, p->controller);
        assert_inside(p, p->tolerations);
        assert_inside(p, p->tolerations[1].effect);
        assert_int_equal(((uintptr_t)p->claims) % sizeof(void *), 0);
        assert_int_equal(((uintptr_t)p->labels) % sizeof(void *), 0);
        assert_int_equal(pod_rec_size(p), p->alloc_size);
        assert_true(pod_rec_size(p) < 1024);
}

static void test_pod_claim_name(void **state) {
        cJSON *j = load("pod-claim-name.json");
        _cleanup_(pod_rec_freep) struct pod_rec *p = NULL;

        assert_int_equal(pod_rec_from_json(j, &p), 0);
        cJSON_Delete(j);
        assert_int_equal(p->n_claims, 1);
        assert_string_equal(p->claims[0].name, "shared");
        assert_string_equal(p->claims[0].claim_name, "shared-gpu");
        assert_false(p->claims[0].from_template);
        assert_false(p->ready); /* Ready False */
        assert_false(p->has_emptydir);
        assert_string_equal(p->controller->kind, "StatefulSet");
        assert_string_equal(p->priority_class_name, "high-priority");
        assert_int_equal(p->priority, 100000);
        assert_int_equal(p->termination_grace_seconds, 30); /* default */
        assert_int_equal(p->n_tolerations, 0);
        assert_null(p->tolerations);
}

static void test_pod_extended(void **state) {
        cJSON *j = load("pod-extended.json");
        _cleanup_(pod_rec_freep) struct pod_rec *p = NULL;

        assert_int_equal(pod_rec_from_json(j, &p), 0);
        cJSON_Delete(j);
        assert_int_equal(p->n_claims, 0);
        assert_null(p->claims);
        assert_string_equal(p->extended_claim_name, "legacy-gpu-job-4wz8t-extended-resources-9xk2f");
        assert_true(p->deleting);
        assert_int_equal(p->deletion_grace_seconds, 30);
        assert_string_equal(p->controller->kind, "Job");
        assert_int_equal(p->n_labels, 2);
        assert_false(p->ready); /* no conditions */
}

static void test_pod_mirror(void **state) {
        cJSON *j = load("pod-mirror.json");
        _cleanup_(pod_rec_freep) struct pod_rec *p = NULL;

        assert_int_equal(pod_rec_from_json(j, &p), 0);
        cJSON_Delete(j);
        assert_true(p->mirror);
        assert_string_equal(p->controller->kind, "Node");
        assert_string_equal(p->priority_class_name, "system-node-critical");
        assert_int_equal(p->priority, 2000001000);
        assert_int_equal(p->n_tolerations, 1);
        assert_null(p->tolerations[0].key);
        assert_int_equal(p->tolerations[0].seconds, -1);
}

static void test_pod_driver(void **state) {
        cJSON *j = load("pod-driver.json");
        _cleanup_(pod_rec_freep) struct pod_rec *p = NULL;
        const struct node_taint drain = { "drainer.io/draining", NULL, "NoSchedule", NULL };
        const struct node_taint unsched = { "node.kubernetes.io/unschedulable", NULL, "NoSchedule", NULL };

        assert_int_equal(pod_rec_from_json(j, &p), 0);
        cJSON_Delete(j);
        assert_string_equal(p->controller->kind, "DaemonSet");
        assert_string_equal(kv_get(p->labels, p->n_labels, "app.kubernetes.io/component"), "kubeletplugin");
        assert_int_equal(p->n_labels, 5);
        assert_int_equal(p->grpc_probe_port, 51515);
        assert_string_equal(p->grpc_probe_service, "liveness");
        assert_int_equal(p->n_tolerations, 6);
        /* DaemonSet pods tolerate cordon, not the drain taint */
        assert_true(tolerations_tolerate(p->tolerations, p->n_tolerations, &unsched));
        assert_false(tolerations_tolerate(p->tolerations, p->n_tolerations, &drain));
        assert_false(p->has_emptydir);
        assert_true(p->ready);
        assert_string_equal(p->pod_ip, "10.244.1.5");
}

static void test_tolerations(void **state) {
        const struct node_taint t = { "dedicated", "ml", "NoExecute", NULL };
        const struct toleration exists_all = { NULL, "Exists", NULL, NULL, -1 };
        const struct toleration exists_key = { "dedicated", "Exists", NULL, NULL, -1 };
        const struct toleration equal_ok = { "dedicated", "Equal", "ml", "NoExecute", -1 };
        const struct toleration equal_default_op = { "dedicated", NULL, "ml", NULL, -1 };
        const struct toleration equal_bad = { "dedicated", "Equal", "web", NULL, -1 };
        const struct toleration wrong_effect = { "dedicated", "Exists", NULL, "NoSchedule", -1 };
        const struct toleration other_key = { "gpu", "Exists", NULL, NULL, -1 };

        assert_true(tolerations_tolerate(&exists_all, 1, &t));
        assert_true(tolerations_tolerate(&exists_key, 1, &t));
        assert_true(tolerations_tolerate(&equal_ok, 1, &t));
        assert_true(tolerations_tolerate(&equal_default_op, 1, &t));
        assert_false(tolerations_tolerate(&equal_bad, 1, &t));
        assert_false(tolerations_tolerate(&wrong_effect, 1, &t));
        assert_false(tolerations_tolerate(&other_key, 1, &t));
        assert_false(tolerations_tolerate(NULL, 0, &t));
}

static void test_claim_node_local(void **state) {
        cJSON *j = load("claim-node-local.json");
        _cleanup_(claim_rec_freep) struct claim_rec *c = NULL;

        assert_int_equal(claim_rec_from_json(j, &c), 0);
        cJSON_Delete(j);
        assert_string_equal(c->ns, "ml");
        assert_string_equal(c->name, "trainer-7d9c5b8f4-x2kqp-gpu-5lq8v");
        assert_string_equal(c->uid, "2a2a2a2a-3b3b-4c4c-8d8d-5e5e5e5e5e5e");
        assert_string_equal(c->resource_version, "48210");
        assert_false(c->deleting);
        assert_true(c->allocated);
        assert_string_equal(c->selector_node, "node-1");
        assert_false(c->selector_other);
        assert_int_equal(c->n_devices, 1);
        assert_string_equal(c->devices[0].request, "gpu");
        assert_string_equal(c->devices[0].driver, "gpu.example.com");
        assert_string_equal(c->devices[0].pool, "node-1");
        assert_string_equal(c->devices[0].device, "gpu-3");
        assert_false(c->devices[0].admin_access);
        assert_int_equal(c->n_reserved, 1);
        assert_null(c->reserved[0].api_group);
        assert_string_equal(c->reserved[0].resource, "pods");
        assert_string_equal(c->reserved[0].name, "trainer-7d9c5b8f4-x2kqp");
        assert_string_equal(c->reserved[0].uid, "6b1f2c3a-9d4e-4f5a-8b7c-1a2b3c4d5e6f");
        assert_string_equal(c->owner_pod, "trainer-7d9c5b8f4-x2kqp");
        assert_string_equal(c->owner_pod_uid, "6b1f2c3a-9d4e-4f5a-8b7c-1a2b3c4d5e6f");
        assert_false(c->admin_access_any);
        assert_false(c->extended_resource);
        assert_inside(c, c->devices);
        assert_inside(c, c->devices[0].device);
        assert_inside(c, c->reserved);
        assert_inside(c, c->reserved[0].uid);
        assert_inside(c, c->selector_node);
        assert_int_equal(claim_rec_size(c), c->alloc_size);
        assert_true(claim_rec_size(c) < 640);
}

static void test_claim_network(void **state) {
        cJSON *j = load("claim-network.json");
        _cleanup_(claim_rec_freep) struct claim_rec *c = NULL;

        assert_int_equal(claim_rec_from_json(j, &c), 0);
        cJSON_Delete(j);
        assert_true(c->allocated);
        assert_null(c->selector_node);
        assert_false(c->selector_other); /* nil selector: usable everywhere */
        assert_int_equal(c->n_devices, 2);
        assert_string_equal(c->devices[1].device, "port-1");
        assert_true(c->devices[1].admin_access);
        assert_true(c->admin_access_any);
        assert_int_equal(c->n_reserved, 0);
        assert_null(c->reserved);
        assert_null(c->owner_pod);
}

static void test_claim_reserved(void **state) {
        cJSON *j = load("claim-reserved.json");
        _cleanup_(claim_rec_freep) struct claim_rec *c = NULL;

        assert_int_equal(claim_rec_from_json(j, &c), 0);
        cJSON_Delete(j);
        assert_true(c->allocated);
        assert_null(c->selector_node);
        assert_true(c->selector_other); /* a rack selector, not the node-local shape */
        assert_int_equal(c->n_reserved, 2);
        assert_string_equal(c->reserved[0].name, "inference-0");
        assert_string_equal(c->reserved[1].name, "inference-1");
        assert_string_equal(c->reserved[1].uid, "a1111111-2222-4333-8444-666666666666");
}

static void check_selector(const char *alloc_json, const char *node, bool other) {
        char buf[1024];
        cJSON *j;
        struct claim_rec *c = NULL;

        snprintf(buf, sizeof buf,
                 "{\"metadata\":{\"name\":\"c\",\"namespace\":\"n\",\"deletionTimestamp\":\"2025-09-02T11:"
                 "00:00Z\"},"
                 "\"status\":{\"allocation\":%s}}",
                 alloc_json);
        j = cJSON_Parse(buf);
        assert_non_null(j);
        assert_int_equal(claim_rec_from_json(j, &c), 0);
        cJSON_Delete(j);
        assert_true(c->deleting);
        assert_true(c->allocated);
        if (node)
                assert_string_equal(c->selector_node, node);
        else
                assert_null(c->selector_node);
        assert_int_equal(c->selector_other, other);
        claim_rec_free(c);
}

static void test_claim_selector_shapes(void **state) {
        check_selector("{}", NULL, false);
        check_selector("{\"nodeSelector\":null}", NULL, false);
        check_selector(
                "{\"nodeSelector\":{\"nodeSelectorTerms\":[{\"matchFields\":[{\"key\":\"metadata.name\","
                "\"operator\":\"In\",\"values\":[\"n7\"]}]}]}}",
                "n7", false);
        /* two values */
        check_selector(
                "{\"nodeSelector\":{\"nodeSelectorTerms\":[{\"matchFields\":[{\"key\":\"metadata.name\","
                "\"operator\":\"In\",\"values\":[\"n7\",\"n8\"]}]}]}}",
                NULL, true);
        /* NotIn */
        check_selector(
                "{\"nodeSelector\":{\"nodeSelectorTerms\":[{\"matchFields\":[{\"key\":\"metadata.name\","
                "\"operator\":\"NotIn\",\"values\":[\"n7\"]}]}]}}",
                NULL, true);
        /* two terms */
        check_selector(
                "{\"nodeSelector\":{\"nodeSelectorTerms\":[{\"matchFields\":[{\"key\":\"metadata.name\","
                "\"operator\":\"In\",\"values\":[\"n7\"]}]},{\"matchFields\":[{\"key\":\"metadata.name\","
                "\"operator\":\"In\",\"values\":[\"n8\"]}]}]}}",
                NULL, true);
        /* extra matchExpressions */
        check_selector("{\"nodeSelector\":{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"a\","
                       "\"operator\":\"Exists\"}],\"matchFields\":[{\"key\":\"metadata.name\","
                       "\"operator\":\"In\",\"values\":[\"n7\"]}]}]}}",
                       NULL, true);
        /* empty matchExpressions is the same as none */
        check_selector("{\"nodeSelector\":{\"nodeSelectorTerms\":[{\"matchExpressions\":[],\"matchFields\":"
                       "[{\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":[\"n7\"]}]}]}}",
                       "n7", false);
        /* another field */
        check_selector(
                "{\"nodeSelector\":{\"nodeSelectorTerms\":[{\"matchFields\":[{\"key\":\"metadata.uid\","
                "\"operator\":\"In\",\"values\":[\"n7\"]}]}]}}",
                NULL, true);
        check_selector("{\"nodeSelector\":{\"nodeSelectorTerms\":[]}}", NULL, true);
}

static void test_node(void **state) {
        cJSON *j = load("node.json");
        _cleanup_(node_rec_freep) struct node_rec *n = NULL;
        const struct node_taint *t;

        assert_int_equal(node_rec_from_json(j, &n), 0);
        cJSON_Delete(j);
        assert_string_equal(n->name, "node-1");
        assert_string_equal(n->uid, "f6666666-7777-4888-8999-000000000000");
        assert_string_equal(n->resource_version, "49001");
        assert_true(n->unschedulable);
        assert_true(n->ready);
        assert_string_equal(n->kubelet_version, "v1.34.1");
        assert_int_equal(n->n_labels, 6);
        assert_string_equal(kv_get(n->labels, n->n_labels, "nvidia.com/gpu.present"), "true");
        /* only drainer.io/ annotations are kept */
        assert_int_equal(n->n_annotations, 3);
        assert_string_equal(kv_get(n->annotations, n->n_annotations, "drainer.io/state"),
                            "evict-claim-holders");
        assert_string_equal(kv_get(n->annotations, n->n_annotations, "drainer.io/was-unschedulable"),
                            "false");
        assert_null(kv_get(n->annotations, n->n_annotations, "node.alpha.kubernetes.io/ttl"));
        assert_int_equal(n->n_taints, 3);
        t = node_rec_find_taint(n, "drainer.io/draining", "NoSchedule");
        assert_non_null(t);
        assert_null(t->value);
        assert_null(node_rec_find_taint(n, "drainer.io/draining", "NoExecute"));
        t = node_rec_find_taint(n, "dedicated", NULL);
        assert_non_null(t);
        assert_string_equal(t->value, "ml");
        assert_string_equal(t->effect, "NoExecute");
        assert_inside(n, n->taints);
        assert_inside(n, n->annotations[2].value);
        assert_int_equal(node_rec_size(n), n->alloc_size);
}

/* A Node whose status carries the lifecycle conditions twice, or with other
 * values the second time (anyone who may patch nodes/status can write that):
 * the first of each type counts, the record is whole, nothing aborts. */
static void test_node_duplicate_conditions(void **state) {
        static const char *const docs[] = {
                /* the same condition twice */
                "{\"metadata\":{\"name\":\"n1\"},\"status\":{\"conditions\":["
                "{\"type\":\"DrainInProgress\",\"status\":\"True\",\"reason\":\"Drainer\"},"
                "{\"type\":\"DrainInProgress\",\"status\":\"True\",\"reason\":\"Drainer\"}]}}",
                /* conflicting values, an empty status first, both types twice */
                "{\"metadata\":{\"name\":\"n1\"},\"status\":{\"conditions\":["
                "{\"type\":\"DrainInProgress\",\"status\":\"\",\"reason\":\"\"},"
                "{\"type\":\"Drained\",\"status\":\"False\",\"reason\":\"Someone\"},"
                "{\"type\":\"DrainInProgress\",\"status\":\"True\",\"reason\":\"Drainer\"},"
                "{\"type\":\"Drained\",\"status\":\"True\",\"reason\":\"AnotherLongerReason\"},"
                "{\"type\":\"Ready\",\"status\":\"True\"},{\"type\":\"Ready\",\"status\":\"False\"}]}}",
        };

        (void)state;
        for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
                cJSON *j = cJSON_Parse(docs[i]);
                _cleanup_(node_rec_freep) struct node_rec *n = NULL;

                assert_non_null(j);
                assert_int_equal(node_rec_from_json(j, &n), 0);
                cJSON_Delete(j);
                assert_int_equal(node_rec_size(n), n->alloc_size);
                if (i == 0) {
                        assert_string_equal(n->lifecycle[NODE_CONDITION_DRAIN_IN_PROGRESS].status, "True");
                        assert_string_equal(n->lifecycle[NODE_CONDITION_DRAIN_IN_PROGRESS].reason,
                                            "Drainer");
                        assert_null(n->lifecycle[NODE_CONDITION_DRAINED].status);
                } else {
                        assert_null(n->lifecycle[NODE_CONDITION_DRAIN_IN_PROGRESS].status);
                        assert_string_equal(n->lifecycle[NODE_CONDITION_DRAINED].status, "False");
                        assert_string_equal(n->lifecycle[NODE_CONDITION_DRAINED].reason, "Someone");
                        assert_inside(n, n->lifecycle[NODE_CONDITION_DRAINED].reason);
                        assert_true(n->ready);
                }
        }
}

static void test_slice(void **state) {
        cJSON *j = load("slice.json");
        _cleanup_(slice_rec_freep) struct slice_rec *s = NULL;

        assert_int_equal(slice_rec_from_json(j, &s), 0);
        cJSON_Delete(j);
        assert_string_equal(s->name, "node-1-gpu.example.com-7xq9d");
        assert_string_equal(s->resource_version, "1201");
        assert_string_equal(s->driver, "gpu.example.com");
        assert_string_equal(s->pool, "node-1");
        assert_string_equal(s->node_name, "node-1");
        assert_int_equal(s->pool_generation, 3);
        assert_int_equal(s->pool_slice_count, 1);
        assert_int_equal(s->n_devices, 4);
        assert_false(s->all_nodes);
        assert_false(s->has_node_selector);
        assert_int_equal(slice_rec_size(s), s->alloc_size);
        assert_true(slice_rec_size(s) < 256);
}

enum kind { POD, CLAIM, NODE, SLICE };

/* Builds a record of the kind from a JSON string; frees it; returns the result. */
static int from_string(const char *json, enum kind k) {
        cJSON *j = cJSON_Parse(json);
        struct pod_rec *p = NULL;
        struct claim_rec *c = NULL;
        struct node_rec *n = NULL;
        struct slice_rec *s = NULL;
        int r = -1;

        assert_non_null(j);
        switch (k) {
        case POD:
                r = pod_rec_from_json(j, &p);
                break;
        case CLAIM:
                r = claim_rec_from_json(j, &c);
                break;
        case NODE:
                r = node_rec_from_json(j, &n);
                break;
        case SLICE:
                r = slice_rec_from_json(j, &s);
                break;
        }
        cJSON_Delete(j);
        if (r < 0)
                assert_true(!p && !c && !n && !s);
        pod_rec_free(p);
        claim_rec_free(c);
        node_rec_free(n);
        slice_rec_free(s);
        return r;
}

static void test_bad_objects(void **state) {
        assert_int_equal(from_string("{}", POD), -EBADMSG);
        assert_int_equal(from_string("{\"metadata\":{\"name\":\"a\"}}", POD), -EBADMSG);
        assert_int_equal(from_string("{\"metadata\":{\"namespace\":\"a\"}}", POD), -EBADMSG);
        assert_int_equal(from_string("{\"metadata\":{\"name\":\"\",\"namespace\":\"a\"}}", POD), -EBADMSG);
        assert_int_equal(from_string("{\"metadata\":{\"name\":7,\"namespace\":\"a\"}}", POD), -EBADMSG);
        assert_int_equal(from_string("{\"metadata\":[]}", CLAIM), -EBADMSG);
        assert_int_equal(from_string("{\"metadata\":{\"name\":\"a\"}}", CLAIM), -EBADMSG);
        assert_int_equal(from_string("{\"metadata\":{}}", NODE), -EBADMSG);
        assert_int_equal(
                from_string("{\"metadata\":{\"name\":\"s\"},\"spec\":{\"pool\":{\"name\":\"p\"}}}", SLICE),
                -EBADMSG);
        assert_int_equal(from_string("{\"metadata\":{\"name\":\"s\"},\"spec\":{\"driver\":\"d\"}}", SLICE),
                         -EBADMSG);
        assert_int_equal(pod_rec_from_json(NULL, &(struct pod_rec *){ NULL }), -EBADMSG);

        /* minimal objects work, and odd optional fields are ignored */
        assert_int_equal(
                from_string("{\"metadata\":{\"name\":\"a\",\"namespace\":\"b\",\"labels\":{\"x\":1,\"y\":"
                            "\"z\"}},"
                            "\"spec\":{\"resourceClaims\":[{\"name\":\"c\"}],\"priority\":\"high\"},"
                            "\"status\":{\"phase\":\"Exploded\"}}",
                            POD),
                0);
        assert_int_equal(from_string("{\"metadata\":{\"name\":\"n\"}}", NODE), 0);
}

static void test_minimal_pod(void **state) {
        cJSON *j = cJSON_Parse(
                "{\"metadata\":{\"name\":\"a\",\"namespace\":\"b\",\"labels\":{\"x\":1,\"y\":\"z\"}},"
                "\"spec\":{\"resourceClaims\":[{\"name\":\"c\"}],\"priority\":\"high\"},"
                "\"status\":{\"phase\":\"Exploded\"}}");
        _cleanup_(pod_rec_freep) struct pod_rec *p = NULL;

        assert_int_equal(pod_rec_from_json(j, &p), 0);
        cJSON_Delete(j);
        assert_int_equal(p->phase, POD_UNKNOWN);
        assert_int_equal(p->n_labels, 1); /* non-string value skipped */
        assert_string_equal(p->labels[0].key, "y");
        assert_int_equal(p->n_claims, 1);
        assert_null(p->claims[0].claim_name);
        assert_false(p->claims[0].from_template);
        assert_null(p->uid);
        assert_null(p->node_name);
        assert_null(p->controller);
        assert_false(p->has_controller);
        assert_int_equal(p->priority, 0);

        j = cJSON_Parse("{\"metadata\":{\"name\":\"a\",\"namespace\":\"b\"}}");
        pod_rec_free(p);
        p = NULL;
        assert_int_equal(pod_rec_from_json(j, &p), 0);
        cJSON_Delete(j);
        assert_int_equal(p->phase, POD_PENDING); /* no phase yet */
        assert_int_equal(p->n_claims, 0);
        assert_int_equal(p->n_labels, 0);
}

static void test_phase_strings(void **state) {
        for (int i = 0; i < _POD_PHASE_MAX; i++)
                assert_int_equal(pod_phase_from_string(pod_phase_to_string(i)), i);
        assert_int_equal(pod_phase_from_string("running"), _POD_PHASE_INVALID);
        assert_null(pod_phase_to_string(_POD_PHASE_MAX));
}

static void test_free_null(void **state) {
        pod_rec_free(NULL);
        claim_rec_free(NULL);
        node_rec_free(NULL);
        slice_rec_free(NULL);
        assert_int_equal(pod_rec_size(NULL), 0);
        assert_int_equal(claim_rec_size(NULL), 0);
        assert_int_equal(node_rec_size(NULL), 0);
        assert_int_equal(slice_rec_size(NULL), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_pod_template_claims),
                cmocka_unit_test(test_pod_claim_name),
                cmocka_unit_test(test_pod_extended),
                cmocka_unit_test(test_pod_mirror),
                cmocka_unit_test(test_pod_driver),
                cmocka_unit_test(test_tolerations),
                cmocka_unit_test(test_claim_node_local),
                cmocka_unit_test(test_claim_network),
                cmocka_unit_test(test_claim_reserved),
                cmocka_unit_test(test_claim_selector_shapes),
                cmocka_unit_test(test_node),
                cmocka_unit_test(test_node_duplicate_conditions),
                cmocka_unit_test(test_slice),
                cmocka_unit_test(test_bad_objects),
                cmocka_unit_test(test_minimal_pod),
                cmocka_unit_test(test_phase_strings),
                cmocka_unit_test(test_free_null),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
