/* Unit tests for DESIGN.md "Terms": claim-holding pods (template claims,
 * claims by name, extended resources), claims on a node (shared claims
 * reserved by two pods, node-local vs network-attached allocations, pools
 * named by a node's slice, another node's claims) and pod classification. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "drainer/dra/claims.h"
#include "fakes/test-env.h"

static cJSON *load(const char *name) {
        char rel[256];

        snprintf(rel, sizeof rel, "api/%s", name);
        return test_fixture_json(rel);
}

static struct pod_rec *pod_of(cJSON *j) {
        struct pod_rec *p = NULL;

        assert_int_equal(pod_rec_from_json(j, &p), 0);
        cJSON_Delete(j);
        return p;
}

static struct claim_rec *claim_of(cJSON *j) {
        struct claim_rec *c = NULL;

        assert_int_equal(claim_rec_from_json(j, &c), 0);
        cJSON_Delete(j);
        return c;
}

static struct slice_rec *slice_of(cJSON *j) {
        struct slice_rec *s = NULL;

        assert_int_equal(slice_rec_from_json(j, &s), 0);
        cJSON_Delete(j);
        return s;
}

static cJSON *parse(const char *json) {
        cJSON *j = cJSON_Parse(json);

        if (!j)
                fail_msg("bad test JSON: %s", json);
        return j;
}

/* Sets obj.a.b = value (a string), creating objects on the way. */
static void set_str(cJSON *obj, const char *a, const char *b, const char *value) {
        cJSON *o = cJSON_GetObjectItemCaseSensitive(obj, a);

        if (!o)
                o = cJSON_AddObjectToObject(obj, a);
        cJSON_DeleteItemFromObjectCaseSensitive(o, b);
        assert_non_null(cJSON_AddStringToObject(o, b, value));
}

/* A minimal pod on a node: name, namespace, uid, node, optional claim JSON
 * fragments for spec and status. */
static struct pod_rec *mkpod(const char *ns, const char *name, const char *uid, const char *node,
                             const char *spec_extra, const char *status_extra) {
        char buf[2048];

        snprintf(buf, sizeof buf,
                 "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\",\"uid\":\"%s\"},"
                 "\"spec\":{\"nodeName\":\"%s\"%s%s},\"status\":{\"phase\":\"Running\"%s%s}}",
                 name, ns, uid, node, spec_extra ? "," : "", spec_extra ? spec_extra : "",
                 status_extra ? "," : "", status_extra ? status_extra : "");
        return pod_of(parse(buf));
}

static void test_holds_claims(void **state) {
        struct pod_rec *p;

        /* template claim whose generated claim is named in the status */
        p = pod_of(load("pod-template-claims.json"));
        assert_true(pod_holds_claims(p));
        pod_rec_free(p);

        /* template claim not generated yet */
        p = mkpod("ml", "a", "u1", "node-1",
                  "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":\"t\"}]", NULL);
        assert_false(pod_holds_claims(p));
        pod_rec_free(p);

        /* template claim with a nil resourceClaimName: no claim needed */
        p = mkpod("ml", "a", "u1", "node-1",
                  "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":\"t\"}]",
                  "\"resourceClaimStatuses\":[{\"name\":\"gpu\"}]");
        assert_false(pod_holds_claims(p));
        pod_rec_free(p);

        /* generated name belongs to another entry */
        p = mkpod("ml", "a", "u1", "node-1",
                  "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":\"t\"}]",
                  "\"resourceClaimStatuses\":[{\"name\":\"nic\",\"resourceClaimName\":\"a-nic-xyz\"}]");
        assert_false(pod_holds_claims(p));
        pod_rec_free(p);

        /* claim by name */
        p = pod_of(load("pod-claim-name.json"));
        assert_true(pod_holds_claims(p));
        pod_rec_free(p);

        /* extended resource backed by DRA */
        p = pod_of(load("pod-extended.json"));
        assert_true(pod_holds_claims(p));
        pod_rec_free(p);

        /* none */
        p = pod_of(load("pod-driver.json"));
        assert_false(pod_holds_claims(p));
        pod_rec_free(p);
}

/* claim_skips_unprepare: per driver, every device of the drivers asked about must skip
 * NodeUnprepareResources ("*" or the name); other drivers' devices do not count; an
 * unallocated claim or one without devices of those drivers is no such claim. */
static void test_skips_unprepare(void **state) {
        static const char *const gpu[] = { "gpu.example.com" }, *const nic[] = { "nic.example.com" },
                                 *const both[] = { "gpu.example.com", "nic.example.com" },
                                 *const other[] = { "fpga.example.com" };
        struct claim_rec *c = claim_of(cJSON_Parse(
                "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"c\",\"uid\":\"u\"},\"status\":{"
                "\"allocation\":"
                "{\"devices\":{\"results\":["
                "{\"request\":\"a\",\"driver\":\"gpu.example.com\",\"pool\":\"node-1\",\"device\":\"gpu-0\","
                "\"skipNodeOperations\":[\"*\"]},"
                "{\"request\":\"a\",\"driver\":\"gpu.example.com\",\"pool\":\"node-1\",\"device\":\"gpu-1\","
                "\"skipNodeOperations\":[\"NodePrepareResources\",\"NodeUnprepareResources\"]},"
                "{\"request\":\"b\",\"driver\":\"nic.example.com\",\"pool\":\"node-1\",\"device\":\"nic-0\","
                "\"skipNodeOperations\":[\"NodePrepareResources\",\"Future\"]}]}}}}"));

        (void)state;
        assert_true(c->devices[0].skip_unprepare);
        assert_true(c->devices[1].skip_unprepare);
        assert_false(c->devices[2].skip_unprepare);
        assert_true(claim_skips_unprepare(c, gpu, 1));
        assert_false(claim_skips_unprepare(c, nic, 1));
        assert_false(claim_skips_unprepare(c, both, 2));
        assert_false(claim_skips_unprepare(c, NULL, 0));
        assert_false(claim_skips_unprepare(c, other, 1));
        claim_rec_free(c);

        c = claim_of(cJSON_Parse(
                "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"c\",\"uid\":\"u\"},\"status\":{}}"));
        assert_false(claim_skips_unprepare(c, NULL, 0));
        claim_rec_free(c);
}

static void test_template_claim_on_node(void **state) {
        struct pod_rec *pod = pod_of(load("pod-template-claims.json"));
        struct claim_rec *c = claim_of(load("claim-node-local.json"));
        const struct pod_rec *pods[] = { pod };

        /* reserved for a pod of node-1 and allocated node-local: the reservation is reported */
        assert_int_equal(claim_on_node(c, "node-1", pods, 1, NULL, 0), CLAIM_RESERVED_BY_NODE_POD);
        assert_true(claim_reserved_by_pod(c, pod));
        /* without the pod (it is gone), the allocation still pins it to node-1 */
        assert_int_equal(claim_on_node(c, "node-1", NULL, 0, NULL, 0), CLAIM_ALLOCATED_NODE_SELECTOR);
        /* another node: neither */
        assert_int_equal(claim_on_node(c, "node-2", NULL, 0, NULL, 0), CLAIM_NOT_ON_NODE);
        /* the pod is not bound to node-2, so passing it changes nothing */
        assert_int_equal(claim_on_node(c, "node-2", pods, 1, NULL, 0), CLAIM_NOT_ON_NODE);

        pod_rec_free(pod);
        claim_rec_free(c);
}

static void test_shared_claim_two_pods(void **state) {
        struct claim_rec *c = claim_of(load("claim-reserved.json"));
        struct pod_rec *p0 = pod_of(load("pod-claim-name.json")); /* inference-0 on node-1 */
        struct pod_rec *p1 = mkpod(
                "ml", "inference-1", "a1111111-2222-4333-8444-666666666666", "node-2",
                "\"resourceClaims\":[{\"name\":\"shared\",\"resourceClaimName\":\"shared-gpu\"}]", NULL);
        struct pod_rec *other = mkpod("ml", "web-0", "u-web", "node-3", NULL, NULL);
        const struct pod_rec *node1[] = { p0 }, *node2[] = { p1 }, *node3[] = { other };
        const struct pod_rec *all[] = { p0, p1, other };

        assert_true(c->selector_other);
        assert_int_equal(claim_on_node(c, "node-1", node1, 1, NULL, 0), CLAIM_RESERVED_BY_NODE_POD);
        assert_int_equal(claim_on_node(c, "node-2", node2, 1, NULL, 0), CLAIM_RESERVED_BY_NODE_POD);
        /* network-attached (rack selector) and not reserved by node-3's pods */
        assert_int_equal(claim_on_node(c, "node-3", node3, 1, NULL, 0), CLAIM_NOT_ON_NODE);
        /* passing every pod works: only pods bound to the node count */
        assert_int_equal(claim_on_node(c, "node-2", all, 3, NULL, 0), CLAIM_RESERVED_BY_NODE_POD);
        assert_int_equal(claim_on_node(c, "node-3", all, 3, NULL, 0), CLAIM_NOT_ON_NODE);
        /* once node-1's pod is gone, the claim is no longer on node-1 though still allocated */
        assert_int_equal(claim_on_node(c, "node-1", NULL, 0, NULL, 0), CLAIM_NOT_ON_NODE);

        assert_true(claim_reserved_by_pod(c, p0));
        assert_true(claim_reserved_by_pod(c, p1));
        assert_false(claim_reserved_by_pod(c, other));

        pod_rec_free(p0);
        pod_rec_free(p1);
        pod_rec_free(other);
        claim_rec_free(c);
}

static void test_reservation_matching(void **state) {
        struct pod_rec *same_name_new_uid = mkpod("ml", "inference-0", "new-uid", "node-1", NULL, NULL);
        struct pod_rec *other_ns =
                mkpod("prod", "inference-0", "a1111111-2222-4333-8444-555555555555", "node-1", NULL, NULL);
        struct pod_rec *by_name = mkpod("ml", "legacy", "whatever", "node-1", NULL, NULL);
        struct claim_rec *c = claim_of(load("claim-reserved.json"));
        struct claim_rec *no_uid = claim_of(
                parse("{\"metadata\":{\"name\":\"c\",\"namespace\":\"ml\"},\"status\":{\"reservedFor\":"
                      "[{\"resource\":\"pods\",\"name\":\"legacy\"}]}}"));
        struct claim_rec *not_pod = claim_of(
                parse("{\"metadata\":{\"name\":\"c\",\"namespace\":\"ml\"},\"status\":{\"reservedFor\":["
                      "{\"apiGroup\":\"example.com\",\"resource\":\"pods\",\"name\":\"legacy\",\"uid\":"
                      "\"whatever\"},"
                      "{\"resource\":\"jobs\",\"name\":\"legacy\",\"uid\":\"whatever\"}]}}"));
        const struct pod_rec *p1[] = { same_name_new_uid }, *p2[] = { other_ns }, *p3[] = { by_name };

        /* a replaced pod (same name, other uid) does not hold the old reservation */
        assert_int_equal(claim_on_node(c, "node-1", p1, 1, NULL, 0), CLAIM_NOT_ON_NODE);
        /* same uid in another namespace cannot be the consumer */
        assert_int_equal(claim_on_node(c, "node-1", p2, 1, NULL, 0), CLAIM_NOT_ON_NODE);
        /* an entry without uid matches by name within the claim's namespace */
        assert_int_equal(claim_on_node(no_uid, "node-1", p3, 1, NULL, 0), CLAIM_RESERVED_BY_NODE_POD);
        /* only core pods are consumers that pin a claim to a node */
        assert_int_equal(claim_on_node(not_pod, "node-1", p3, 1, NULL, 0), CLAIM_NOT_ON_NODE);
        assert_false(claim_reserved_by_pod(not_pod, by_name));

        pod_rec_free(same_name_new_uid);
        pod_rec_free(other_ns);
        pod_rec_free(by_name);
        claim_rec_free(c);
        claim_rec_free(no_uid);
        claim_rec_free(not_pod);
}

static void test_node_local_vs_network(void **state) {
        struct claim_rec *local = claim_of(load("claim-node-local.json"));
        struct claim_rec *net = claim_of(load("claim-network.json"));
        struct slice_rec *s1 = slice_of(load("slice.json")); /* gpu.example.com pool node-1 on node-1 */
        const struct slice_rec *slices[] = { s1 };

        assert_int_equal(claim_on_node(local, "node-1", NULL, 0, slices, 1), CLAIM_ALLOCATED_NODE_SELECTOR);
        /* network-attached: nil selector, fabric pool, no slice of the node publishes it */
        assert_int_equal(claim_on_node(net, "node-1", NULL, 0, slices, 1), CLAIM_NOT_ON_NODE);
        assert_int_equal(claim_on_node(net, "node-1", NULL, 0, NULL, 0), CLAIM_NOT_ON_NODE);

        claim_rec_free(local);
        claim_rec_free(net);
        slice_rec_free(s1);
}

static void test_slice_named_pool(void **state) {
        /* allocated without a node selector (e.g. written by an older allocator
         * or another scheduler), from pool node-1 of gpu.example.com */
        static const char claim_json[] =
                "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ml\"},\"status\":{\"allocation\":{"
                "\"devices\":"
                "{\"results\":[{\"request\":\"r\",\"driver\":\"gpu.example.com\",\"pool\":\"node-1\","
                "\"device\":\"gpu-0\"}]}}}}";
        struct claim_rec *c = claim_of(parse(claim_json));
        struct slice_rec *s1 = slice_of(load("slice.json"));
        cJSON *j;
        struct slice_rec *other_driver, *other_node, *network;

        j = load("slice.json");
        set_str(j, "spec", "driver", "nic.example.com");
        other_driver = slice_of(j);
        j = load("slice.json");
        set_str(j, "spec", "nodeName", "node-2");
        other_node = slice_of(j);
        j = load("slice.json");
        cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "spec"), "nodeName");
        assert_non_null(cJSON_AddTrueToObject(cJSON_GetObjectItemCaseSensitive(j, "spec"), "allNodes"));
        network = slice_of(j);
        assert_null(network->node_name);
        assert_true(network->all_nodes);

        {
                const struct slice_rec *a[] = { other_driver, other_node, network, s1 };
                const struct slice_rec *b[] = { other_driver, other_node, network };
                const struct slice_rec *d[] = { other_node };

                assert_false(c->selector_other);
                assert_null(c->selector_node);
                assert_int_equal(claim_on_node(c, "node-1", NULL, 0, a, 4), CLAIM_ALLOCATED_NODE_SLICE);
                assert_int_equal(claim_on_node(c, "node-1", NULL, 0, b, 3), CLAIM_NOT_ON_NODE);
                assert_int_equal(claim_on_node(c, "node-2", NULL, 0, d, 1), CLAIM_ALLOCATED_NODE_SLICE);
                assert_int_equal(claim_on_node(c, "node-2", NULL, 0, a, 4), CLAIM_ALLOCATED_NODE_SLICE);
                assert_int_equal(claim_on_node(c, "node-3", NULL, 0, a, 4), CLAIM_NOT_ON_NODE);
        }

        claim_rec_free(c);
        slice_rec_free(s1);
        slice_rec_free(other_driver);
        slice_rec_free(other_node);
        slice_rec_free(network);
}

static void test_claim_on_another_node(void **state) {
        /* allocated on node-2 from node-2's pool, reserved by a node-2 pod */
        static const char claim_json[] =
                "{\"metadata\":{\"name\":\"w-gpu-abcde\",\"namespace\":\"ml\"},\"status\":{"
                "\"allocation\":{\"devices\":{\"results\":[{\"request\":\"gpu\",\"driver\":\"gpu.example."
                "com\","
                "\"pool\":\"node-2\",\"device\":\"gpu-0\"}]},\"nodeSelector\":{\"nodeSelectorTerms\":[{"
                "\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":[\"node-2\"]}]}]"
                "}},"
                "\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"w\",\"uid\":\"uid-w\"}]}}";
        struct claim_rec *c = claim_of(parse(claim_json));
        struct pod_rec *pod = pod_of(load("pod-template-claims.json")); /* on node-1 */
        struct pod_rec *w = mkpod("ml", "w", "uid-w", "node-2", NULL, NULL);
        struct slice_rec *s1 = slice_of(load("slice.json")); /* node-1's pool */
        const struct pod_rec *pods[] = { pod }, *pods2[] = { w };
        const struct slice_rec *slices[] = { s1 };

        assert_string_equal(c->selector_node, "node-2");
        assert_int_equal(claim_on_node(c, "node-1", pods, 1, slices, 1), CLAIM_NOT_ON_NODE);
        assert_int_equal(claim_on_node(c, "node-2", NULL, 0, NULL, 0), CLAIM_ALLOCATED_NODE_SELECTOR);
        assert_int_equal(claim_on_node(c, "node-2", pods2, 1, NULL, 0), CLAIM_RESERVED_BY_NODE_POD);

        claim_rec_free(c);
        pod_rec_free(pod);
        pod_rec_free(w);
        slice_rec_free(s1);
}

static void test_unallocated(void **state) {
        struct claim_rec *c = claim_of(parse("{\"metadata\":{\"name\":\"pending\",\"namespace\":\"ml\"},"
                                             "\"spec\":{\"devices\":{\"requests\":[{\"name\":\"r\"}]}}}"));
        struct slice_rec *s1 = slice_of(load("slice.json"));
        const struct slice_rec *slices[] = { s1 };

        assert_false(c->allocated);
        assert_int_equal(claim_on_node(c, "node-1", NULL, 0, slices, 1), CLAIM_NOT_ON_NODE);
        claim_rec_free(c);
        slice_rec_free(s1);
}

static void test_reason_strings(void **state) {
        for (int i = 0; i < _CLAIM_ON_NODE_REASON_MAX; i++)
                assert_int_equal(claim_on_node_reason_from_string(claim_on_node_reason_to_string(i)), i);
        assert_string_equal(claim_on_node_reason_to_string(CLAIM_ALLOCATED_NODE_SLICE),
                            "allocated-node-slice");
        assert_null(claim_on_node_reason_to_string(_CLAIM_ON_NODE_REASON_MAX));
        assert_int_equal(claim_on_node_reason_from_string("x"), _CLAIM_ON_NODE_REASON_INVALID);
        for (int i = 0; i < _POD_CLASS_MAX; i++)
                assert_int_equal(pod_class_from_string(pod_class_to_string(i)), i);
        assert_string_equal(pod_class_to_string(POD_CLASS_CLAIM_HOLDER), "claim-holder");
        assert_int_equal(pod_class_from_string(NULL), _POD_CLASS_INVALID);
}

static void set_phase(cJSON *j, const char *phase) {
        set_str(j, "status", "phase", phase);
}

/* Adds a claim by name to a pod's JSON. */
static void add_claim(cJSON *j) {
        cJSON *spec = cJSON_GetObjectItemCaseSensitive(j, "spec");

        cJSON_AddItemToObject(spec, "resourceClaims",
                              parse("[{\"name\":\"own\",\"resourceClaimName\":\"driver-own-claim\"}]"));
}

static void test_classify(void **state) {
        struct selector **sel = NULL;
        size_t n = 0;
        struct pod_rec *p;
        cJSON *j;

        assert_int_equal(selectors_parse_strv(claims_default_driver_selectors, &sel, &n, NULL), 0);
        assert_int_equal(n, 3);
        struct driver_filter f = { .selectors = (const struct selector *const *)sel, .n_selectors = n };
#define CLASSIFY(pod) pod_classify((pod), &f)

        /* driver first: a DaemonSet pod with the kubeletplugin label */
        p = pod_of(load("pod-driver.json"));
        assert_int_equal(CLASSIFY(p), POD_CLASS_DRIVER);
        /* without driver selectors it is an ordinary DaemonSet pod */
        assert_int_equal(pod_classify(p, NULL), POD_CLASS_DAEMONSET);
        assert_int_equal(pod_classify(p, &(struct driver_filter){}), POD_CLASS_DAEMONSET);
        pod_rec_free(p);

        /* driver even when finished, or holding a claim of its own */
        j = load("pod-driver.json");
        set_phase(j, "Failed");
        add_claim(j);
        p = pod_of(j);
        assert_int_equal(CLASSIFY(p), POD_CLASS_DRIVER);
        pod_rec_free(p);

        /* the NVIDIA labels */
        j = load("pod-driver.json");
        cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "metadata"), "labels");
        cJSON_AddItemToObject(cJSON_GetObjectItemCaseSensitive(j, "metadata"), "labels",
                              parse("{\"nvidia-dra-driver-gpu-component\":\"kubelet-plugin\"}"));
        p = pod_of(j);
        assert_int_equal(CLASSIFY(p), POD_CLASS_DRIVER);
        pod_rec_free(p);
        j = load("pod-driver.json");
        cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "metadata"), "labels");
        cJSON_AddItemToObject(cJSON_GetObjectItemCaseSensitive(j, "metadata"), "labels",
                              parse("{\"dra-driver-nvidia-gpu-component\":\"kubelet-plugin\"}"));
        p = pod_of(j);
        assert_int_equal(CLASSIFY(p), POD_CLASS_DRIVER);
        pod_rec_free(p);

        /* mirror before finished and claims */
        j = load("pod-mirror.json");
        set_phase(j, "Succeeded");
        add_claim(j);
        p = pod_of(j);
        assert_int_equal(CLASSIFY(p), POD_CLASS_MIRROR);
        pod_rec_free(p);

        /* finished before claim holder */
        j = load("pod-template-claims.json");
        set_phase(j, "Succeeded");
        p = pod_of(j);
        assert_int_equal(CLASSIFY(p), POD_CLASS_FINISHED);
        pod_rec_free(p);
        j = load("pod-claim-name.json");
        set_phase(j, "Failed");
        p = pod_of(j);
        assert_int_equal(CLASSIFY(p), POD_CLASS_FINISHED);
        pod_rec_free(p);

        /* claim holders */
        p = pod_of(load("pod-template-claims.json"));
        assert_int_equal(CLASSIFY(p), POD_CLASS_CLAIM_HOLDER);
        pod_rec_free(p);
        p = pod_of(load("pod-extended.json"));
        assert_int_equal(CLASSIFY(p), POD_CLASS_CLAIM_HOLDER);
        pod_rec_free(p);

        /* a DaemonSet pod with claims that is not a driver: claim holder */
        j = load("pod-driver.json");
        cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "metadata"), "labels");
        add_claim(j);
        p = pod_of(j);
        assert_int_equal(CLASSIFY(p), POD_CLASS_CLAIM_HOLDER);
        pod_rec_free(p);

        /* a DaemonSet pod without claims */
        j = load("pod-driver.json");
        cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "metadata"), "labels");
        p = pod_of(j);
        assert_int_equal(CLASSIFY(p), POD_CLASS_DAEMONSET);
        pod_rec_free(p);

        /* workload: template claim not needed, or no claims at all */
        j = load("pod-template-claims.json");
        cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "status"),
                                                "resourceClaimStatuses");
        p = pod_of(j);
        assert_int_equal(CLASSIFY(p), POD_CLASS_WORKLOAD);
        pod_rec_free(p);
        p = mkpod("default", "bare", "u", "node-1", NULL, NULL);
        assert_int_equal(CLASSIFY(p), POD_CLASS_WORKLOAD);
        assert_int_equal(pod_classify(p, NULL), POD_CLASS_WORKLOAD);
        pod_rec_free(p);

        selectors_free(sel, n);
#undef CLASSIFY
}

/* DESIGN.md "Terms": a driver pod is a pod of a DaemonSet (its controller
 * ownerReference, apps/v1), and with --driver-namespace one of those namespaces;
 * anything else with a driver's labels is ordinary workload. */
static void test_driver_lookalikes(void **state) {
        static const char *const ns_driver[] = { "dra-example-driver", NULL }, *const ns_other[] = {
                "gpu-operator", "kube-system", NULL
        };
        struct selector **sel = NULL;
        size_t n = 0;
        struct pod_rec *p;
        cJSON *j, *meta;

        assert_int_equal(selectors_parse_strv(claims_default_driver_selectors, &sel, &n, NULL), 0);
        struct driver_filter any = { .selectors = (const struct selector *const *)sel, .n_selectors = n };
        struct driver_filter here = any, elsewhere = any;

        here.namespaces = ns_driver;
        here.n_namespaces = 1;
        elsewhere.namespaces = ns_other;
        elsewhere.n_namespaces = 2;

        /* the real one, in its namespace or anywhere */
        p = pod_of(load("pod-driver.json"));
        assert_true(pod_is_driver(p, &any));
        assert_true(pod_is_driver(p, &here));
        /* --driver-namespace names other namespaces: a DaemonSet pod like any other */
        assert_false(pod_is_driver(p, &elsewhere));
        assert_int_equal(pod_classify(p, &elsewhere), POD_CLASS_DAEMONSET);
        pod_rec_free(p);

        /* the same labels without an ownerReference: a tenant's bare pod */
        j = load("pod-driver.json");
        meta = cJSON_GetObjectItemCaseSensitive(j, "metadata");
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "ownerReferences");
        p = pod_of(j);
        assert_false(pod_is_driver(p, &any));
        assert_int_equal(pod_classify(p, &any), POD_CLASS_WORKLOAD);
        pod_rec_free(p);

        /* ... controlled by a ReplicaSet (a Deployment) */
        j = load("pod-driver.json");
        meta = cJSON_GetObjectItemCaseSensitive(j, "metadata");
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "ownerReferences");
        cJSON_AddItemToObject(meta, "ownerReferences",
                              parse("[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"x\","
                                    "\"uid\":\"u\",\"controller\":true}]"));
        p = pod_of(j);
        assert_int_equal(pod_classify(p, &any), POD_CLASS_WORKLOAD);
        pod_rec_free(p);

        /* ... a DaemonSet owner that is not the controller, or of another API group */
        j = load("pod-driver.json");
        meta = cJSON_GetObjectItemCaseSensitive(j, "metadata");
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "ownerReferences");
        cJSON_AddItemToObject(meta, "ownerReferences",
                              parse("[{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"name\":\"x\","
                                    "\"uid\":\"u\"}]"));
        p = pod_of(j);
        assert_int_equal(pod_classify(p, &any), POD_CLASS_WORKLOAD);
        pod_rec_free(p);
        j = load("pod-driver.json");
        meta = cJSON_GetObjectItemCaseSensitive(j, "metadata");
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "ownerReferences");
        cJSON_AddItemToObject(meta, "ownerReferences",
                              parse("[{\"apiVersion\":\"example.com/v1\",\"kind\":\"DaemonSet\","
                                    "\"name\":\"x\",\"uid\":\"u\",\"controller\":true}]"));
        p = pod_of(j);
        assert_false(pod_is_driver(p, &any));
        /* (kubectl drain's DaemonSet filter looks at the kind only; so does drainer's) */
        assert_int_equal(pod_classify(p, &any), POD_CLASS_DAEMONSET);
        pod_rec_free(p);

        selectors_free(sel, n);
}

/* claim_podgroup_unused: a claim reserved for a PodGroup (KEP-5729) and allocated on the
 * node stays reserved and allocated until the PodGroup is deleted; the kubelet
 * unprepared it here once no pod of the node that uses it is left. So it is "used here"
 * while a pod of the node that has not finished names it (spec, template status or
 * extended resource), or a pod of the node is in its reservedFor; a pod of the group on
 * another node, a finished pod, or a pod of another namespace does not count. */
static void test_podgroup_unused(void **state) {
        static const char claim_json[] =
                "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"gang-gpu\",\"uid\":\"cu\"},\"status\":{"
                "\"allocation\":{\"devices\":{\"results\":[{\"request\":\"gpu\",\"driver\":\"gpu.example."
                "com\","
                "\"pool\":\"node-1\",\"device\":\"gpu-0\"}]},\"nodeSelector\":{\"nodeSelectorTerms\":[{"
                "\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":[\"node-1\"]}]}]"
                "}},"
                "\"reservedFor\":[{\"apiGroup\":\"scheduling.k8s.io\",\"resource\":\"podgroups\","
                "\"name\":\"gang\",\"uid\":\"pgu\"}]}}";
        struct claim_rec *c = claim_of(parse(claim_json));
        struct claim_rec *plain = claim_of(load("claim-node-local.json"));
        /* worker-0 names it through its template's status, on node-1 */
        struct pod_rec *w0 =
                mkpod("ml", "worker-0", "u0", "node-1",
                      "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":\"t\"}]",
                      "\"resourceClaimStatuses\":[{\"name\":\"gpu\",\"resourceClaimName\":\"gang-gpu\"}]");
        struct pod_rec *w1 =
                mkpod("ml", "worker-1", "u1", "node-2",
                      "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":\"gang-gpu\"}]", NULL);
        struct pod_rec *other_ns =
                mkpod("web", "x", "u2", "node-1",
                      "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":\"gang-gpu\"}]", NULL);
        const struct pod_rec *pods[] = { w0, w1, other_ns };
        const struct claim_consumer *g;

        (void)state;
        g = claim_podgroup(c);
        assert_non_null(g);
        assert_string_equal(g->name, "gang");
        assert_null(claim_podgroup(plain));
        assert_null(claim_podgroup_unused(plain, "node-1", NULL, 0));

        /* still allocated on node-1 either way */
        assert_int_equal(claim_on_node(c, "node-1", pods, 3, NULL, 0), CLAIM_ALLOCATED_NODE_SELECTOR);
        /* worker-0 runs on node-1: used here */
        assert_null(claim_podgroup_unused(c, "node-1", pods, 3));
        /* on node-2 only worker-1 names it */
        assert_null(claim_podgroup_unused(c, "node-2", pods, 3));
        /* worker-0 gone: node-1 has only a pod of another namespace */
        assert_ptr_equal(claim_podgroup_unused(c, "node-1", pods + 1, 2), g);
        /* worker-0 finished (Succeeded, Failed): unprepared before its status said so */
        w0->phase = POD_SUCCEEDED;
        assert_ptr_equal(claim_podgroup_unused(c, "node-1", pods, 3), g);
        w0->phase = POD_FAILED;
        assert_ptr_equal(claim_podgroup_unused(c, "node-1", pods, 3), g);
        /* still terminating, or not started yet: used here */
        w0->phase = POD_PENDING;
        assert_null(claim_podgroup_unused(c, "node-1", pods, 3));
        w0->phase = POD_RUNNING;
        w0->deleting = true;
        assert_null(claim_podgroup_unused(c, "node-1", pods, 3));
        claim_rec_free(c);

        /* reserved for the group and for a pod of the node that names it by nothing */
        c = claim_of(parse(
                "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"gang-gpu\",\"uid\":\"cu\"},\"status\":{"
                "\"reservedFor\":[{\"apiGroup\":\"scheduling.k8s.io\",\"resource\":\"podgroups\","
                "\"name\":\"gang\",\"uid\":\"pgu\"},{\"resource\":\"pods\",\"name\":\"x\",\"uid\":\"u3\"}]}"
                "}"));
        pod_rec_free(other_ns);
        other_ns = mkpod("ml", "x", "u3", "node-1", NULL, NULL);
        pods[2] = other_ns;
        assert_null(claim_podgroup_unused(c, "node-1", pods + 1, 2));
        assert_non_null(claim_podgroup_unused(c, "node-3", pods + 1, 2));
        claim_rec_free(c);

        /* a PodGroup of another API group is no PodGroup */
        c = claim_of(parse("{\"metadata\":{\"namespace\":\"ml\",\"name\":\"c\",\"uid\":\"cu\"},\"status\":{"
                           "\"reservedFor\":[{\"apiGroup\":\"example.com\",\"resource\":\"podgroups\","
                           "\"name\":\"gang\",\"uid\":\"pgu\"}]}}"));
        assert_null(claim_podgroup(c));
        assert_null(claim_podgroup_unused(c, "node-9", NULL, 0));
        claim_rec_free(c);

        claim_rec_free(plain);
        pod_rec_free(w0);
        pod_rec_free(w1);
        pod_rec_free(other_ns);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_holds_claims),          cmocka_unit_test(test_template_claim_on_node),
                cmocka_unit_test(test_shared_claim_two_pods), cmocka_unit_test(test_reservation_matching),
                cmocka_unit_test(test_node_local_vs_network), cmocka_unit_test(test_slice_named_pool),
                cmocka_unit_test(test_claim_on_another_node), cmocka_unit_test(test_unallocated),
                cmocka_unit_test(test_reason_strings),        cmocka_unit_test(test_classify),
                cmocka_unit_test(test_driver_lookalikes),     cmocka_unit_test(test_skips_unprepare),
                cmocka_unit_test(test_podgroup_unused),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
