/* Unit tests for the drain plan: eviction groups and their order, claims on
 * the node (template claims, a shared claim, driver-own claims), each blocker
 * and the flags that lift it, --pod-selector, PodDisruptionBudget selectors
 * (policy/v1: nil matches nothing, {} matches the namespace), and the text and
 * JSON output. The scenario is tests/unit/fixtures/plan/node-1.json. */
#include <errno.h>
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "drainer/base/json.h"
#include "drainer/base/selector.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/driverkey.h"
#include "drainer/dra/nodeview.h"
#include "drainer/dra/seamless.h"
#include "drainer/drain/plan.h"
#include "fakes/test-env.h"

static cJSON *load(const char *name) {
        char rel[256];

        snprintf(rel, sizeof rel, "plan/%s", name);
        return test_fixture_json(rel);
}

static cJSON *parse(const char *json) {
        cJSON *j = cJSON_Parse(json);

        if (!j)
                fail_msg("bad test JSON: %s", json);
        return j;
}

/* ---- the scenario: records built from node-1.json, possibly edited first ---- */

struct scenario {
        cJSON *doc;
        struct node_rec *node;
        struct pod_rec **pods;
        size_t n_pods;
        struct claim_rec **claims;
        size_t n_claims;
        struct slice_rec **slices;
        size_t n_slices;
        struct pdb_rec **pdbs;
        size_t n_pdbs;
        struct selector **driver_selectors;
        size_t n_driver_selectors;
        struct selector *pod_selector;
        struct plan_options o;
        struct plan plan;
        bool built;
};

static void scenario_load(struct scenario *s) {
        *s = (struct scenario){ .doc = load("node-1.json") };
        assert_int_equal(selectors_parse_strv(claims_default_driver_selectors, &s->driver_selectors,
                                              &s->n_driver_selectors, NULL),
                         0);
        s->o = (struct plan_options){
                .driver_selectors = (const struct selector *const *)s->driver_selectors,
                .n_driver_selectors = s->n_driver_selectors,
                .driver_stop = &driver_stop_taint,
        };
}

static cJSON *doc_array(struct scenario *s, const char *k) {
        cJSON *a = cJSON_GetObjectItemCaseSensitive(s->doc, k);

        assert_true(cJSON_IsArray(a));
        return a;
}

/* The JSON of the object ns/name in array k, to edit before scenario_build(). */
static cJSON *doc_find(struct scenario *s, const char *k, const char *ns, const char *name) {
        cJSON *e;

        cJSON_ArrayForEach(e, doc_array(s, k)) {
                if (streq_ptr(json_str(e, "metadata.name"), name) &&
                    streq_ptr(json_str(e, "metadata.namespace"), ns))
                        return e;
        }
        fail_msg("%s %s/%s not in the scenario", k, ns, name);
        return NULL;
}

/* Adds the object of fixtures/plan/<name> to array k. */
static void doc_add_fixture(struct scenario *s, const char *k, const char *name) {
        assert_true(cJSON_AddItemToArray(doc_array(s, k), load(name)));
}

static void doc_remove(struct scenario *s, const char *k, const char *ns, const char *name) {
        cJSON *e = doc_find(s, k, ns, name);

        cJSON_Delete(cJSON_DetachItemViaPointer(doc_array(s, k), e));
}

/* Replaces (or adds) obj[k] with the JSON value. */
static void set_json(cJSON *obj, const char *k, const char *json) {
        cJSON_DeleteItemFromObjectCaseSensitive(obj, k);
        assert_true(cJSON_AddItemToObject(obj, k, parse(json)));
}

static cJSON *sub(cJSON *obj, const char *k) {
        cJSON *o = cJSON_GetObjectItemCaseSensitive(obj, k);

        assert_non_null(o);
        return o;
}

#define BUILD_ARRAY(s, key, type, fn, arr, n)                                         \
        do {                                                                          \
                cJSON *_a = doc_array((s), key), *_e;                                 \
                size_t _i = 0;                                                        \
                (n) = (size_t)cJSON_GetArraySize(_a);                                 \
                (arr) = calloc((n) + 1, sizeof(type *));                              \
                assert_non_null(arr);                                                 \
                cJSON_ArrayForEach(_e, _a) assert_int_equal(fn(_e, &(arr)[_i++]), 0); \
        } while (0)

static void scenario_build(struct scenario *s) {
        BUILD_ARRAY(s, "pods", struct pod_rec, pod_rec_from_json, s->pods, s->n_pods);
        BUILD_ARRAY(s, "claims", struct claim_rec, claim_rec_from_json, s->claims, s->n_claims);
        BUILD_ARRAY(s, "slices", struct slice_rec, slice_rec_from_json, s->slices, s->n_slices);
        BUILD_ARRAY(s, "pdbs", struct pdb_rec, pdb_rec_from_json, s->pdbs, s->n_pdbs);
        assert_int_equal(node_rec_from_json(sub(s->doc, "node"), &s->node), 0);

        assert_int_equal(plan_build(s->node, (const struct pod_rec *const *)s->pods, s->n_pods,
                                    (const struct claim_rec *const *)s->claims, s->n_claims,
                                    (const struct slice_rec *const *)s->slices, s->n_slices,
                                    (const struct pdb_rec *const *)s->pdbs, s->n_pdbs, &s->o, &s->plan),
                         0);
        s->built = true;
}

static void scenario_free(struct scenario *s) {
        if (s->built)
                plan_done(&s->plan);
        for (size_t i = 0; i < s->n_pods; i++)
                pod_rec_free(s->pods[i]);
        for (size_t i = 0; i < s->n_claims; i++)
                claim_rec_free(s->claims[i]);
        for (size_t i = 0; i < s->n_slices; i++)
                slice_rec_free(s->slices[i]);
        for (size_t i = 0; i < s->n_pdbs; i++)
                pdb_rec_free(s->pdbs[i]);
        free(s->pods);
        free(s->claims);
        free(s->slices);
        free(s->pdbs);
        node_rec_free(s->node);
        selectors_free(s->driver_selectors, s->n_driver_selectors);
        selector_free(s->pod_selector);
        cJSON_Delete(s->doc);
}

static const struct plan_pod *find_pod(const struct plan *p, const char *ns, const char *name) {
        for (size_t i = 0; i < p->n_pods; i++)
                if (streq(p->pods[i].pod->ns, ns) && streq(p->pods[i].pod->name, name))
                        return &p->pods[i];
        fail_msg("pod %s/%s not in the plan", ns, name);
        return NULL;
}

static const struct plan_claim *find_claim(const struct plan *p, const char *ns, const char *name) {
        for (size_t i = 0; i < p->n_claims; i++)
                if (streq(p->claims[i].claim->ns, ns) && streq(p->claims[i].claim->name, name))
                        return &p->claims[i];
        return NULL;
}

static size_t count_blockers(const struct plan *p, enum blocker_kind k) {
        size_t n = 0;

        for (size_t i = 0; i < p->n_blockers; i++)
                n += p->blockers[i].kind == k;
        return n;
}

/* The message of the only blocker of kind k. */
static const char *blocker_message(const struct plan *p, enum blocker_kind k) {
        const char *m = NULL;

        assert_int_equal(count_blockers(p, k), 1);
        for (size_t i = 0; i < p->n_blockers; i++)
                if (p->blockers[i].kind == k)
                        m = p->blockers[i].message;
        return m;
}

/* ---- groups and ordering ---- */

static void test_groups_and_order(void **state) {
        static const struct {
                const char *nsname;
                enum evict_group group;
        } want[] = {
                { "demo/pod-a", EVICT_GROUP_CLAIM_HOLDERS },
                { "demo/pod-b", EVICT_GROUP_CLAIM_HOLDERS },
                { "demo/pod-c", EVICT_GROUP_CLAIM_HOLDERS },
                { "monitoring/gpu-exporter-x", EVICT_GROUP_CLAIM_HOLDERS }, /* claim-holding DaemonSet pod */
                { "kube-system/critical-gpu-x", EVICT_GROUP_CLAIM_HOLDERS_CRITICAL },
                { "demo/job-done", EVICT_GROUP_REST }, /* finished: evicted, as kubectl does */
                { "demo/web-1", EVICT_GROUP_REST },
                { "demo/web-2", EVICT_GROUP_REST },
                { "kube-system/coredns-x", EVICT_GROUP_REST_CRITICAL },
                { "dra-system/dra-driver-abc", EVICT_GROUP_DRIVERS },
                { "kube-system/kube-proxy-x", EVICT_GROUP_NONE },
                { "kube-system/mirror-x", EVICT_GROUP_NONE },
        };
        struct scenario s;
        const struct plan *p = &s.plan;

        scenario_load(&s);
        scenario_build(&s);

        /* demo/elsewhere is bound to node-2: not in the plan */
        assert_int_equal(p->n_pods, ELEMENTSOF(want));
        for (size_t i = 0; i < ELEMENTSOF(want); i++) {
                char nsname[256];

                snprintf(nsname, sizeof nsname, "%s/%s", p->pods[i].pod->ns, p->pods[i].pod->name);
                assert_string_equal(nsname, want[i].nsname);
                assert_int_equal(p->pods[i].group, want[i].group);
        }
        assert_int_equal(p->n_per_group[EVICT_GROUP_CLAIM_HOLDERS], 4);
        assert_int_equal(p->n_per_group[EVICT_GROUP_CLAIM_HOLDERS_CRITICAL], 1);
        assert_int_equal(p->n_per_group[EVICT_GROUP_REST], 3);
        assert_int_equal(p->n_per_group[EVICT_GROUP_REST_CRITICAL], 1);
        assert_int_equal(p->n_per_group[EVICT_GROUP_DRIVERS], 1);
        assert_int_equal(p->n_per_group[EVICT_GROUP_NONE], 2);

        assert_int_equal(find_pod(p, "demo", "pod-a")->cls, POD_CLASS_CLAIM_HOLDER);
        assert_true(find_pod(p, "kube-system", "critical-gpu-x")->critical);
        assert_true(find_pod(p, "kube-system", "coredns-x")->critical);
        assert_false(find_pod(p, "demo", "web-1")->critical);
        assert_null(find_pod(p, "demo", "web-1")->skip_reason);
        assert_string_equal(find_pod(p, "kube-system", "mirror-x")->skip_reason, "mirror pod");
        assert_string_equal(find_pod(p, "kube-system", "kube-proxy-x")->skip_reason, "DaemonSet pod");
        assert_int_equal(find_pod(p, "demo", "job-done")->cls, POD_CLASS_FINISHED);
        assert_null(find_pod(p, "demo", "job-done")->skip_reason);
        assert_null(find_pod(p, "dra-system", "dra-driver-abc")->skip_reason);

        /* nothing in the scenario blocks */
        assert_int_equal(p->n_blockers, 0);

        scenario_free(&s);
}

static void test_group_names(void **state) {
        assert_string_equal(evict_group_to_string(EVICT_GROUP_CLAIM_HOLDERS), "claim-holders");
        assert_string_equal(evict_group_to_string(EVICT_GROUP_CLAIM_HOLDERS_CRITICAL),
                            "claim-holders-critical");
        assert_string_equal(evict_group_to_string(EVICT_GROUP_REST), "rest");
        assert_string_equal(evict_group_to_string(EVICT_GROUP_REST_CRITICAL), "rest-critical");
        assert_string_equal(evict_group_to_string(EVICT_GROUP_DRIVERS), "drivers");
        assert_string_equal(evict_group_to_string(EVICT_GROUP_NONE), "none");
        assert_null(evict_group_to_string(_EVICT_GROUP_MAX));
        assert_null(evict_group_to_string(_EVICT_GROUP_INVALID));
        for (int k = 0; k < _BLOCKER_KIND_MAX; k++)
                assert_non_null(blocker_kind_to_string(k));
        assert_string_equal(blocker_kind_to_string(BLOCKER_UNMANAGED), "unmanaged");
        assert_string_equal(blocker_kind_to_string(BLOCKER_DS_CLAIM_TOLERATES), "daemonset-claim-tolerates");
        assert_null(blocker_kind_to_string(_BLOCKER_KIND_MAX));
}

/* ---- --driver: a drain scoped to one DRA driver ---- */

/* --device: only the pods whose claims hold the device are evicted (the holders of
 * demo/shared, on gpu-1); every other pod stays, the DRA driver pod too ("a device drain
 * leaves it running"), nothing is in the rest groups, only demo/shared is waited for;
 * the text names the device and its rule, the JSON the scope's devices. */
/* Claims without node operations (DESIGN.md): a claim whose devices of the drained
 * drivers all skip NodeUnprepareResources is listed but does not hold a node or driver
 * drain back; skipping NodePrepareResources alone is no such claim (the API requires
 * NodeUnprepareResources with it, and a claim the driver must unprepare holds); a device
 * drain still waits for its device. */
static void skip_ops(struct scenario *s, const char *ns, const char *name, const char *op) {
        cJSON *e, *res = doc_find(s, "claims", ns, name);

        res = sub(sub(sub(sub(res, "status"), "allocation"), "devices"), "results");
        assert_true(cJSON_GetArraySize(res) > 0);
        cJSON_ArrayForEach(e, res) {
                cJSON *ops = cJSON_AddArrayToObject(e, "skipNodeOperations");

                cJSON_AddItemToArray(ops, cJSON_CreateString(op));
        }
}

/* The plan's text (malloc'd). */
static char *plan_text(struct scenario *s) {
        char *text = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&text, &size);

        assert_non_null(f);
        assert_int_equal(plan_print_text(&s->plan, &s->o, f), 0);
        fclose(f);
        return text;
}

/* A device drain of node-1's gpu-1 (a DeviceTaintRule served). */
static void scope_gpu1(struct scenario *s) {
        static const struct drain_device devices[] = { { "gpu.example.com", "node-1", "gpu-1" } };

        s->o.devices = devices;
        s->o.n_devices = 1;
        s->o.isolation = PLAN_ISOLATE_TAINT_RULE;
        s->o.taint_rule_api = "resource.k8s.io/v1";
}

static void test_no_node_ops(void **state) {
        static const char *const gpu[] = { "gpu.example.com" };
        struct scenario s;
        size_t base, base_gpu;
        char *text;

        (void)state;
        scenario_load(&s);
        scenario_build(&s);
        base = s.plan.n_claims_blocking;
        assert_false(find_claim(&s.plan, "demo", "shared")->no_node_ops);
        scenario_free(&s);
        scenario_load(&s);
        s.o.drivers = gpu;
        s.o.n_drivers = 1;
        scenario_build(&s);
        base_gpu = s.plan.n_claims_blocking;
        scenario_free(&s);

        for (int drv = 0; drv < 2; drv++) {
                scenario_load(&s);
                if (drv) {
                        s.o.drivers = gpu;
                        s.o.n_drivers = 1;
                }
                skip_ops(&s, "demo", "shared", "*");
                skip_ops(&s, "monitoring", "exporter-claim", "NodePrepareResources");
                skip_ops(&s, "kube-system", "critical-gpu-claim", "NodeUnprepareResources");
                scenario_build(&s);
                assert_true(find_claim(&s.plan, "demo", "shared")->no_node_ops);
                assert_true(find_claim(&s.plan, "kube-system", "critical-gpu-claim")->no_node_ops);
                assert_false(find_claim(&s.plan, "monitoring", "exporter-claim")->no_node_ops);
                assert_int_equal(s.plan.n_claims_blocking, (drv ? base_gpu : base) - 2);
                if (!drv) {
                        text = plan_text(&s);
                        assert_non_null(strstr(text, "skip NodeUnprepareResources"));
                        free(text);
                }
                scenario_free(&s);
        }

        /* a device drain of gpu-1 waits for demo/shared whatever its driver needs */
        scenario_load(&s);
        scope_gpu1(&s);
        skip_ops(&s, "demo", "shared", "*");
        scenario_build(&s);
        assert_false(find_claim(&s.plan, "demo", "shared")->no_node_ops);
        assert_int_equal(s.plan.n_claims_blocking, 1);
        scenario_free(&s);
}

/* A claim reserved for a PodGroup (DESIGN.md "Claims of a PodGroup") holds the drain
 * while a pod of the node uses it; once none does, the kubelet has unprepared it here
 * and it no longer holds a node or driver drain back, though it stays allocated. A
 * device drain of its device waits for the PodGroup's deletion. */
static void test_podgroup_claim(void **state) {
        static const char *const gpu[] = { "gpu.example.com" };
        static const char group[] = "[{\"apiGroup\":\"scheduling.k8s.io\",\"resource\":\"podgroups\","
                                    "\"name\":\"gang\",\"uid\":\"pg\"}]";
        struct scenario s;
        size_t base;
        char *text;
        cJSON *j, *f_claim;

        (void)state;
        scenario_load(&s);
        scenario_build(&s);
        base = s.plan.n_claims_blocking;
        assert_null(find_claim(&s.plan, "demo", "shared")->podgroup);
        scenario_free(&s);

        /* pod-b and pod-c of the group run on the node: it holds */
        scenario_load(&s);
        set_json(sub(doc_find(&s, "claims", "demo", "shared"), "status"), "reservedFor", group);
        scenario_build(&s);
        assert_non_null(find_claim(&s.plan, "demo", "shared")->podgroup);
        assert_false(find_claim(&s.plan, "demo", "shared")->podgroup_unused);
        assert_int_equal(s.plan.n_claims_blocking, base);
        assert_int_equal(find_pod(&s.plan, "demo", "pod-b")->cls, POD_CLASS_CLAIM_HOLDER);
        scenario_free(&s);

        /* gone from the node (one finished, one deleted): node and driver drains go on */
        for (int drv = 0; drv < 2; drv++) {
                scenario_load(&s);
                if (drv) {
                        s.o.drivers = gpu;
                        s.o.n_drivers = 1;
                }
                set_json(sub(doc_find(&s, "claims", "demo", "shared"), "status"), "reservedFor", group);
                set_json(sub(doc_find(&s, "pods", "demo", "pod-b"), "status"), "phase", "\"Succeeded\"");
                doc_remove(&s, "pods", "demo", "pod-c");
                scenario_build(&s);
                assert_true(find_claim(&s.plan, "demo", "shared")->podgroup_unused);
                assert_true(find_claim(&s.plan, "demo", "shared")->podgroup_released);
                assert_false(plan_claim_blocks(find_claim(&s.plan, "demo", "shared")));
                if (!drv) {
                        assert_int_equal(s.plan.n_claims_blocking, base - 1);
                        text = plan_text(&s);
                        assert_non_null(strstr(text, "reserved for PodGroup demo/gang"));
                        assert_non_null(strstr(text, "unprepared here, does not hold the drain back"));
                        free(text);
                        j = plan_to_json(&s.plan, &s.o);
                        assert_non_null(j);
                        cJSON_ArrayForEach(f_claim, cJSON_GetObjectItemCaseSensitive(j, "claims")) {
                                if (!streq_ptr(json_str(f_claim, "name"), "shared"))
                                        continue;
                                assert_string_equal(json_str(f_claim, "podGroup"), "demo/gang");
                                assert_true(cJSON_IsTrue(
                                        cJSON_GetObjectItemCaseSensitive(f_claim, "podGroupUnused")));
                        }
                        cJSON_Delete(j);
                }
                scenario_free(&s);
        }

        /* a device drain of gpu-1 waits until the device is free */
        scenario_load(&s);
        scope_gpu1(&s);
        set_json(sub(doc_find(&s, "claims", "demo", "shared"), "status"), "reservedFor", group);
        doc_remove(&s, "pods", "demo", "pod-b");
        doc_remove(&s, "pods", "demo", "pod-c");
        scenario_build(&s);
        assert_true(find_claim(&s.plan, "demo", "shared")->podgroup_unused);
        assert_false(find_claim(&s.plan, "demo", "shared")->podgroup_released);
        assert_int_equal(s.plan.n_claims_blocking, 1);
        text = plan_text(&s);
        assert_non_null(strstr(text, "stay allocated until its PodGroup is deleted"));
        free(text);
        scenario_free(&s);
}

static void test_device_scope(void **state) {
        static const struct drain_device devices[] = { { "gpu.example.com", "node-1", "gpu-1" } };
        struct scenario s;
        const struct plan *p = &s.plan;
        char *text = NULL;
        size_t size = 0;
        cJSON *j;
        FILE *f;

        (void)state;
        scenario_load(&s);
        s.o.devices = devices;
        s.o.n_devices = 1;
        s.o.isolation = PLAN_ISOLATE_TAINT_RULE;
        s.o.taint_rule_api = "resource.k8s.io/v1";
        scenario_build(&s);

        assert_int_equal(find_pod(p, "demo", "pod-b")->group, EVICT_GROUP_CLAIM_HOLDERS);
        assert_int_equal(find_pod(p, "demo", "pod-c")->group, EVICT_GROUP_CLAIM_HOLDERS);
        assert_int_equal(p->n_per_group[EVICT_GROUP_CLAIM_HOLDERS], 2);
        assert_int_equal(p->n_per_group[EVICT_GROUP_CLAIM_HOLDERS_CRITICAL], 0);
        assert_int_equal(p->n_per_group[EVICT_GROUP_REST] + p->n_per_group[EVICT_GROUP_REST_CRITICAL], 0);
        assert_int_equal(p->n_per_group[EVICT_GROUP_DRIVERS], 0);
        assert_string_equal(find_pod(p, "demo", "pod-a")->skip_reason,
                            "holds no ResourceClaim of the devices drained");
        assert_string_equal(find_pod(p, "kube-system", "critical-gpu-x")->skip_reason,
                            "holds no ResourceClaim of the devices drained");
        assert_string_equal(find_pod(p, "dra-system", "dra-driver-abc")->skip_reason,
                            "DRA driver pod: a device drain leaves it running");
        assert_int_equal(p->n_claims, 1);
        assert_non_null(find_claim(p, "demo", "shared"));
        assert_int_equal(p->n_claims_blocking, 1);
        assert_int_equal(p->n_blockers, 0);

        f = open_memstream(&text, &size);
        assert_non_null(f);
        assert_int_equal(plan_print_text(p, &s.o, f), 0);
        fclose(f);
        assert_non_null(strstr(text, "Scoped to device gpu.example.com/node-1/gpu-1 (--device)"));
        assert_non_null(strstr(text,
                               "DeviceTaintRule (resource.k8s.io/v1) drainer.io/draining:NoSchedule for "
                               "each device"));
        assert_non_null(strstr(text, "no DRA driver is stopped"));
        assert_null(strstr(text, "cordon:"));
        free(text);
        j = plan_to_json(p, &s.o);
        assert_non_null(j);
        assert_string_equal(json_str(j, "scope.isolation"), "deviceTaintRule");
        assert_string_equal(
                json_str(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "scope"), "devices"),
                                            0),
                         "device"),
                "gpu-1");
        cJSON_Delete(j);
        scenario_free(&s);

        /* a device no claim holds: nothing to evict, nothing to wait for */
        scenario_load(&s);
        s.o.devices = (const struct drain_device[]){ { "gpu.example.com", "node-1", "gpu-7" } };
        s.o.n_devices = 1;
        scenario_build(&s);
        assert_int_equal(p->n_per_group[EVICT_GROUP_CLAIM_HOLDERS] +
                                 p->n_per_group[EVICT_GROUP_CLAIM_HOLDERS_CRITICAL] +
                                 p->n_per_group[EVICT_GROUP_REST] +
                                 p->n_per_group[EVICT_GROUP_REST_CRITICAL] +
                                 p->n_per_group[EVICT_GROUP_DRIVERS],
                         0);
        assert_int_equal(p->n_claims, 0);
        /* where no rule is served the text says it is refused, never a cordon */
        f = open_memstream(&text, &size);
        assert_non_null(f);
        s.o.isolation = PLAN_ISOLATE_CORDON_FALLBACK;
        assert_int_equal(plan_print_text(p, &s.o, f), 0);
        fclose(f);
        assert_non_null(strstr(text, "refused: the API server serves no DeviceTaintRule"));
        assert_null(strstr(text, "cordon:"));
        free(text);
        scenario_free(&s);
}

/* Scoped to gpu.example.com, with demo/shared allocated from another driver: the
 * holders of the driver's claims are evicted, the holders of shared (pod-b, pod-c)
 * and every pod without claims stay ("holds no ResourceClaim of the drivers
 * drained"); only the driver's claims are waited for (not the nic driver's own, not
 * shared). The text says DeviceTaintRule, or the cordon fallback; the JSON the scope. */
static void test_driver_scope(void **state) {
        static const char *const drivers[] = { "gpu.example.com", NULL };
        struct scenario s;
        const struct plan *p = &s.plan;
        char *text = NULL;
        size_t size = 0;
        FILE *f;

        scenario_load(&s);
        {
                cJSON *r = cJSON_GetArrayItem(
                        sub(sub(sub(sub(doc_find(&s, "claims", "demo", "shared"), "status"), "allocation"),
                                "devices"),
                            "results"),
                        0);

                assert_non_null(r);
                set_json(r, "driver", "\"other.example.com\"");
        }
        s.o.driver_stop = &driver_stop_label;
        s.o.driver_stop_arg = "gpu.example.com/present";
        s.o.drivers = drivers;
        s.o.n_drivers = 1;
        s.o.isolation = PLAN_ISOLATE_TAINT_RULE;
        s.o.taint_rule_api = "resource.k8s.io/v1beta2";
        scenario_build(&s);

        assert_int_equal(find_pod(p, "demo", "pod-a")->group, EVICT_GROUP_CLAIM_HOLDERS);
        assert_int_equal(find_pod(p, "monitoring", "gpu-exporter-x")->group, EVICT_GROUP_CLAIM_HOLDERS);
        assert_int_equal(find_pod(p, "kube-system", "critical-gpu-x")->group,
                         EVICT_GROUP_CLAIM_HOLDERS_CRITICAL);
        for (size_t i = 0; i < 6; i++) {
                static const char *const stay[][2] = {
                        { "demo", "pod-b" }, { "demo", "pod-c" },    { "demo", "web-1" },
                        { "demo", "web-2" }, { "demo", "job-done" }, { "kube-system", "coredns-x" }
                };
                const struct plan_pod *pp = find_pod(p, stay[i][0], stay[i][1]);

                assert_int_equal(pp->group, EVICT_GROUP_NONE);
                assert_string_equal(pp->skip_reason, "holds no ResourceClaim of the drivers drained");
        }
        assert_int_equal(p->n_per_group[EVICT_GROUP_REST] + p->n_per_group[EVICT_GROUP_REST_CRITICAL], 0);
        assert_int_equal(p->n_claims, 3);
        assert_null(find_claim(p, "demo", "shared"));
        assert_null(find_claim(p, "dra-system", "driver-own"));
        assert_int_equal(p->n_claims_blocking, 3);
        assert_int_equal(p->n_blockers, 0);

        f = open_memstream(&text, &size);
        assert_non_null(f);
        assert_int_equal(plan_print_text(p, &s.o, f), 0);
        fclose(f);
        assert_non_null(strstr(text, "Scoped to DRA driver gpu.example.com (--driver)"));
        assert_non_null(strstr(
                text, " 1. DeviceTaintRule (resource.k8s.io/v1beta2) drainer.io/draining:NoSchedule"));
        assert_null(strstr(text, "spec.unschedulable=true"));
        free(text);
        text = NULL;

        s.o.isolation = PLAN_ISOLATE_CORDON_FALLBACK;
        f = open_memstream(&text, &size);
        assert_non_null(f);
        assert_int_equal(plan_print_text(p, &s.o, f), 0);
        fclose(f);
        assert_non_null(strstr(text, "spec.unschedulable=true"));
        assert_non_null(strstr(text, "fallback: the API server serves no DeviceTaintRule"));
        free(text);
        {
                _cleanup_(cJSON_Deletep) cJSON *j = plan_to_json(p, &s.o);

                assert_non_null(j);
                assert_string_equal(json_str(j, "scope.isolation"), "cordon");
                assert_string_equal(cJSON_GetArrayItem(json_path(j, "scope.drivers"), 0)->valuestring,
                                    "gpu.example.com");
        }
        scenario_free(&s);
}

/* Two DRA drivers on the node: a drain scoped to one stops only its driver pod (by the
 * plugin directory its pod mounts); the other driver's pod stays. A driver pod whose
 * driver is unknown is the scope's only while no pod is known to be the scope's. */
static void scope_two_drivers(const char *drv, bool gpu_dir, const char *driver_pod, const char *other_pod) {
        const char *const drivers[] = { drv, NULL };
        struct scenario s;
        const struct plan_pod *in, *out;

        scenario_load(&s);
        doc_add_fixture(&s, "pods", "pod-nic-driver.json");
        if (gpu_dir)
                set_json(sub(doc_find(&s, "pods", "dra-system", "dra-driver-abc"), "spec"), "volumes",
                         "[{\"name\":\"d\",\"hostPath\":{\"path\":\"/var/lib/kubelet/plugins/"
                         "gpu.example.com\"}}]");
        s.o.driver_stop = &driver_stop_label;
        s.o.driver_stop_arg = "x.example.com/present";
        s.o.drivers = drivers;
        s.o.n_drivers = 1;
        scenario_build(&s);
        in = find_pod(&s.plan, "dra-system", driver_pod);
        out = find_pod(&s.plan, "dra-system", other_pod);
        assert_int_equal(in->cls, POD_CLASS_DRIVER);
        assert_int_equal(in->group, EVICT_GROUP_NONE);
        assert_string_equal(in->skip_reason, "DRA driver: stopped by label");
        assert_int_equal(out->cls, POD_CLASS_DAEMONSET);
        assert_int_equal(out->group, EVICT_GROUP_NONE);
        assert_string_equal(out->skip_reason, "DRA driver pod of another driver: not drained");
        assert_int_equal(s.plan.n_blockers, 0);
        scenario_free(&s);
}

static void test_driver_scope_two_drivers(void **state) {
        scope_two_drivers("gpu.example.com", true, "dra-driver-abc", "nic-driver-x");
        scope_two_drivers("nic.example.com", true, "nic-driver-x", "dra-driver-abc");
        /* dra-driver-abc mounts no plugin directory: gpu's while no pod is known to be */
        scope_two_drivers("gpu.example.com", false, "dra-driver-abc", "nic-driver-x");
        scope_two_drivers("nic.example.com", false, "nic-driver-x", "dra-driver-abc");
}

/* --driver without --driver-stop: the label key from the DaemonSet's nodeSelector. */
static void label_key(const char *node_selector, int want, const char *want_key, const char *want_why) {
        _cleanup_(cJSON_Deletep) cJSON *ds = NULL;
        _cleanup_free_ char *key = NULL, *why = NULL, *doc = NULL;

        assert_true(asprintf(&doc, "{\"spec\":{\"template\":{\"spec\":{%s%s}}}}",
                             node_selector ? "\"nodeSelector\":" : "",
                             node_selector ? node_selector : "") > 0);
        ds = parse(doc);
        assert_int_equal(driver_stop_label_key(ds, "DaemonSet dra-system/x", &key, &why), want);
        if (want_key)
                assert_string_equal(key, want_key);
        else
                assert_null(key);
        if (want_why)
                assert_non_null(strstr(why, want_why));
        else
                assert_null(why);
}

static void test_driver_label_key(void **state) {
        label_key("{\"gpu.example.com/present\":\"true\"}", 0, "gpu.example.com/present", NULL);
        /* the cluster's own labels are not a driver's switch */
        label_key("{\"kubernetes.io/os\":\"linux\",\"gpu.example.com/present\":\"true\","
                  "\"node-role.kubernetes.io/worker\":\"\",\"topology.k8s.io/zone\":\"a\"}",
                  0, "gpu.example.com/present", NULL);
        label_key("{\"kubernetes.io/os\":\"linux\",\"gpu.example.com/present\":\"true\","
                  "\"nvidia.com/gpu.present\":\"true\"}",
                  -E2BIG, NULL,
                  "the nodeSelector of DaemonSet dra-system/x has 2 keys (gpu.example.com/present, "
                  "nvidia.com/gpu.present): say which one stops the driver with --driver-stop label:KEY");
        label_key("{\"kubernetes.io/os\":\"linux\"}", -ENOENT, NULL,
                  "has no key the driver owns (kubernetes.io/os are the cluster's), so no node label stops "
                  "it; use --driver-stop systemd:UNIT or none");
        label_key(NULL, -ENOENT, NULL, "has no key the driver owns, so no node label stops it");
        label_key("{}", -ENOENT, NULL, "has no key the driver owns");
        /* not a kubernetes.io subdomain, only a look-alike: the driver's */
        label_key("{\"mykubernetes.io/x\":\"1\"}", 0, "mykubernetes.io/x", NULL);
}

/* ---- claims ---- */

static void test_claims(void **state) {
        struct scenario s;
        const struct plan *p = &s.plan;
        const struct plan_claim *c;
        const struct plan_pod *a;

        scenario_load(&s);
        scenario_build(&s);

        /* sorted ns/name; demo/other-node-claim (node-2) and demo/pending (unallocated) are not on the node */
        assert_int_equal(p->n_claims, 5);
        assert_string_equal(p->claims[0].claim->name, "pod-a-gpu-x7k2p");
        assert_string_equal(p->claims[1].claim->name, "shared");
        assert_string_equal(p->claims[2].claim->name, "driver-own");
        assert_string_equal(p->claims[3].claim->name, "critical-gpu-claim");
        assert_string_equal(p->claims[4].claim->name, "exporter-claim");
        assert_null(find_claim(p, "demo", "other-node-claim"));
        assert_null(find_claim(p, "demo", "pending"));

        /* the claim generated from pod-a's template */
        a = find_pod(p, "demo", "pod-a");
        assert_true(a->pod->claims[0].from_template);
        assert_string_equal(a->pod->claims[0].claim_name, "pod-a-gpu-x7k2p");
        c = find_claim(p, "demo", "pod-a-gpu-x7k2p");
        assert_int_equal(c->why, CLAIM_RESERVED_BY_NODE_POD);
        assert_false(c->driver_own);

        /* the driver's own claim (network-style allocation without node selector, from the
         * node's nic slice) does not hold the drain back */
        c = find_claim(p, "dra-system", "driver-own");
        assert_true(c->driver_own);
        assert_int_equal(p->n_claims_blocking, 4);

        scenario_free(&s);
}

/* The plan's claims array holds the node's claims, not one entry for each claim the
 * cluster view passed in (10 engines x 10,000 claims held 6.4 MiB of empty entries). */
static void test_claims_array_is_the_nodes(void **state) {
        struct scenario s;
        cJSON *pending;

        scenario_load(&s);
        pending = doc_find(&s, "claims", "demo", "pending");
        for (int i = 0; i < 2000; i++) {
                cJSON *c = cJSON_Duplicate(pending, true);
                char name[32];

                assert_non_null(c);
                snprintf(name, sizeof(name), "elsewhere-%d", i);
                assert_true(cJSON_SetValuestring(sub(sub(c, "metadata"), "name"), name) != NULL);
                assert_true(cJSON_AddItemToArray(doc_array(&s, "claims"), c));
        }
        scenario_build(&s);
        assert_int_equal(s.n_claims, 2007);
        assert_int_equal(s.plan.n_claims, 5);
        assert_true(malloc_usable_size(s.plan.claims) < 64 * sizeof(struct plan_claim));
        scenario_free(&s);
}

static void test_shared_claim(void **state) {
        struct scenario s;
        const struct plan_claim *c;

        /* one user-created claim reserved by two pods: both evicted with the claim holders */
        scenario_load(&s);
        scenario_build(&s);
        c = find_claim(&s.plan, "demo", "shared");
        assert_non_null(c);
        assert_int_equal(c->claim->n_reserved, 2);
        assert_int_equal(find_pod(&s.plan, "demo", "pod-b")->group, EVICT_GROUP_CLAIM_HOLDERS);
        assert_int_equal(find_pod(&s.plan, "demo", "pod-c")->group, EVICT_GROUP_CLAIM_HOLDERS);
        scenario_free(&s);

        /* pod-b gone: still on the node through pod-c */
        scenario_load(&s);
        doc_remove(&s, "pods", "demo", "pod-b");
        scenario_build(&s);
        c = find_claim(&s.plan, "demo", "shared");
        assert_non_null(c);
        assert_int_equal(c->why, CLAIM_RESERVED_BY_NODE_POD);
        scenario_free(&s);

        /* both gone, reservations cleared, allocation still node-local: still on the node */
        scenario_load(&s);
        doc_remove(&s, "pods", "demo", "pod-b");
        doc_remove(&s, "pods", "demo", "pod-c");
        cJSON_DeleteItemFromObjectCaseSensitive(sub(doc_find(&s, "claims", "demo", "shared"), "status"),
                                                "reservedFor");
        scenario_build(&s);
        c = find_claim(&s.plan, "demo", "shared");
        assert_non_null(c);
        assert_int_equal(c->why, CLAIM_ALLOCATED_NODE_SELECTOR);
        assert_false(c->driver_own); /* no reservation at all is not "driver's own" */
        scenario_free(&s);
}

static void test_driver_own_mixed(void **state) {
        struct scenario s;

        /* a claim reserved by the driver and by a workload pod holds the drain back */
        scenario_load(&s);
        set_json(sub(doc_find(&s, "claims", "dra-system", "driver-own"), "status"), "reservedFor",
                 "[{\"resource\":\"pods\",\"name\":\"dra-driver-abc\",\"uid\":\"uid-drv\"},"
                 "{\"resource\":\"pods\",\"name\":\"pod-a\",\"uid\":\"uid-a\"}]");
        scenario_build(&s);
        assert_false(find_claim(&s.plan, "dra-system", "driver-own")->driver_own);
        assert_int_equal(s.plan.n_claims_blocking, 5);
        scenario_free(&s);
}

/* ---- blockers ---- */

static void test_unmanaged_emptydir(void **state) {
        struct scenario s;

        scenario_load(&s);
        doc_add_fixture(&s, "pods", "pod-bare.json");
        scenario_build(&s);
        assert_int_equal(find_pod(&s.plan, "demo", "bare")->group, EVICT_GROUP_REST);
        assert_int_equal(s.plan.n_blockers, 2);
        assert_string_equal(
                blocker_message(&s.plan, BLOCKER_UNMANAGED),
                "cannot delete Pods that declare no controller (use --force to override): demo/bare");
        assert_string_equal(
                blocker_message(&s.plan, BLOCKER_EMPTYDIR),
                "cannot delete Pods with local storage (use --delete-emptydir-data to override): demo/bare");
        assert_ptr_equal(s.plan.blockers[0].pod, find_pod(&s.plan, "demo", "bare")->pod);
        scenario_free(&s);

        /* --force lifts the first */
        scenario_load(&s);
        doc_add_fixture(&s, "pods", "pod-bare.json");
        s.o.force = true;
        scenario_build(&s);
        assert_int_equal(s.plan.n_blockers, 1);
        assert_int_equal(s.plan.blockers[0].kind, BLOCKER_EMPTYDIR);
        scenario_free(&s);

        /* --delete-emptydir-data the second */
        scenario_load(&s);
        doc_add_fixture(&s, "pods", "pod-bare.json");
        s.o.delete_emptydir_data = true;
        scenario_build(&s);
        assert_int_equal(s.plan.n_blockers, 1);
        assert_int_equal(s.plan.blockers[0].kind, BLOCKER_UNMANAGED);
        scenario_free(&s);

        /* a claim holder with emptyDir is blocked too */
        scenario_load(&s);
        set_json(sub(doc_find(&s, "pods", "demo", "pod-a"), "spec"), "volumes",
                 "[{\"name\":\"scratch\",\"emptyDir\":{\"medium\":\"Memory\"}}]");
        scenario_build(&s);
        assert_string_equal(blocker_message(&s.plan, BLOCKER_EMPTYDIR),
                            "cannot delete Pods with local storage (use --delete-emptydir-data to "
                            "override): demo/pod-a");
        scenario_free(&s);

        /* a pod already deleting stays in its group and blocks nothing: nothing is sent for it */
        scenario_load(&s);
        doc_add_fixture(&s, "pods", "pod-bare.json");
        set_json(sub(doc_find(&s, "pods", "demo", "bare"), "metadata"), "deletionTimestamp",
                 "\"2025-09-02T11:00:00Z\"");
        scenario_build(&s);
        assert_int_equal(find_pod(&s.plan, "demo", "bare")->group, EVICT_GROUP_REST);
        assert_true(find_pod(&s.plan, "demo", "bare")->pod->deleting);
        assert_int_equal(s.plan.n_blockers, 0);
        scenario_free(&s);

        /* the kubectl filters do not apply to pods that stay (mirror, finished) */
        scenario_load(&s);
        cJSON_DeleteItemFromObjectCaseSensitive(sub(doc_find(&s, "pods", "demo", "job-done"), "metadata"),
                                                "ownerReferences");
        set_json(sub(doc_find(&s, "pods", "demo", "job-done"), "spec"), "volumes",
                 "[{\"name\":\"t\",\"emptyDir\":{}}]");
        scenario_build(&s);
        assert_int_equal(s.plan.n_blockers, 0);
        scenario_free(&s);
}

static void test_daemonset_claim_holder(void **state) {
        static const char *const tolerations[] = {
                "[{\"operator\":\"Exists\"}]",
                "[{\"key\":\"drainer.io/draining\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}]",
                "[{\"key\":\"drainer.io/draining\",\"operator\":\"Exists\"}]",
        };
        struct scenario s;

        for (size_t i = 0; i < ELEMENTSOF(tolerations); i++) {
                scenario_load(&s);
                set_json(sub(doc_find(&s, "pods", "monitoring", "gpu-exporter-x"), "spec"), "tolerations",
                         tolerations[i]);
                scenario_build(&s);
                assert_int_equal(find_pod(&s.plan, "monitoring", "gpu-exporter-x")->group,
                                 EVICT_GROUP_CLAIM_HOLDERS);
                assert_int_equal(s.plan.n_blockers, 1);
                assert_string_equal(
                        blocker_message(&s.plan, BLOCKER_DS_CLAIM_TOLERATES),
                        "DaemonSet pod monitoring/gpu-exporter-x holds ResourceClaims and tolerates "
                        "drainer.io/draining:NoSchedule, so it would come back after eviction; "
                        "remove that toleration from DaemonSet monitoring/gpu-exporter");
                scenario_free(&s);
        }

        /* tolerating another NoSchedule taint, or the drain key with NoExecute only, is fine */
        scenario_load(&s);
        set_json(sub(doc_find(&s, "pods", "monitoring", "gpu-exporter-x"), "spec"), "tolerations",
                 "[{\"key\":\"drainer.io/draining\",\"operator\":\"Exists\",\"effect\":\"NoExecute\"},"
                 "{\"key\":\"dedicated\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}]");
        scenario_build(&s);
        assert_int_equal(s.plan.n_blockers, 0);
        scenario_free(&s);

        /* a DaemonSet pod without claims stays, whatever it tolerates */
        scenario_load(&s);
        set_json(sub(doc_find(&s, "pods", "kube-system", "kube-proxy-x"), "spec"), "tolerations",
                 "[{\"operator\":\"Exists\"}]");
        scenario_build(&s);
        assert_int_equal(find_pod(&s.plan, "kube-system", "kube-proxy-x")->group, EVICT_GROUP_NONE);
        assert_int_equal(s.plan.n_blockers, 0);
        scenario_free(&s);
}

static void test_driver_blockers(void **state) {
        struct scenario s;
        const struct plan_pod *d;

        /* taint strategy, driver tolerating the drain taint */
        scenario_load(&s);
        set_json(sub(doc_find(&s, "pods", "dra-system", "dra-driver-abc"), "spec"), "tolerations",
                 "[{\"operator\":\"Exists\"}]");
        scenario_build(&s);
        assert_string_equal(blocker_message(&s.plan, BLOCKER_DRIVER_TOLERATES),
                            "DaemonSet of DRA driver pod dra-system/dra-driver-abc tolerates "
                            "drainer.io/draining:NoSchedule, so the taint strategy cannot stop it; use "
                            "--driver-stop label:KEY or none");
        assert_int_equal(s.plan.n_blockers, 1);
        scenario_free(&s);

        /* the label strategy does not care; the driver stays for the engine's label step */
        scenario_load(&s);
        set_json(sub(doc_find(&s, "pods", "dra-system", "dra-driver-abc"), "spec"), "tolerations",
                 "[{\"operator\":\"Exists\"}]");
        s.o.driver_stop = &driver_stop_label;
        s.o.driver_stop_arg = "example.com/dra-driver";
        scenario_build(&s);
        d = find_pod(&s.plan, "dra-system", "dra-driver-abc");
        assert_int_equal(d->group, EVICT_GROUP_NONE);
        assert_string_equal(d->skip_reason, "DRA driver: stopped by label");
        assert_int_equal(s.plan.n_blockers, 0);
        scenario_free(&s);

        /* --driver-stop none */
        scenario_load(&s);
        s.o.driver_stop = &driver_stop_none;
        scenario_build(&s);
        d = find_pod(&s.plan, "dra-system", "dra-driver-abc");
        assert_int_equal(d->group, EVICT_GROUP_NONE);
        assert_string_equal(d->skip_reason, "DRA driver, --driver-stop none");
        assert_int_equal(s.plan.n_per_group[EVICT_GROUP_DRIVERS], 0);
        /* its own claim still does not block */
        assert_true(find_claim(&s.plan, "dra-system", "driver-own")->driver_own);
        scenario_free(&s);

        /* unhealthy: not ready, not running, deleting; --ignore-driver-health lifts it */
        for (int i = 0; i < 4; i++) {
                cJSON *pod;

                scenario_load(&s);
                pod = doc_find(&s, "pods", "dra-system", "dra-driver-abc");
                if (i == 0)
                        set_json(sub(pod, "status"), "conditions",
                                 "[{\"type\":\"Ready\",\"status\":\"False\"}]");
                else if (i == 1)
                        set_json(sub(pod, "status"), "phase", "\"Pending\"");
                else
                        set_json(sub(pod, "metadata"), "deletionTimestamp", "\"2025-09-02T11:00:00Z\"");
                s.o.ignore_driver_health = i == 3;
                scenario_build(&s);
                if (i == 3)
                        assert_int_equal(s.plan.n_blockers, 0);
                else
                        assert_string_equal(
                                blocker_message(&s.plan, BLOCKER_DRIVER_UNHEALTHY),
                                "DRA driver pod dra-system/dra-driver-abc is not Running and Ready "
                                "(use --ignore-driver-health to override)");
                scenario_free(&s);
        }

        /* a failed health probe, added by the caller */
        scenario_load(&s);
        scenario_build(&s);
        d = find_pod(&s.plan, "dra-system", "dra-driver-abc");
        assert_int_equal(plan_add_blocker(&s.plan, BLOCKER_DRIVER_UNHEALTHY, d->pod,
                                          "DRA driver pod dra-system/dra-driver-abc: liveness NOT_SERVING"),
                         0);
        assert_int_equal(s.plan.n_blockers, 1);
        assert_ptr_equal(s.plan.blockers[0].pod, d->pod);
        assert_string_equal(s.plan.blockers[0].message,
                            "DRA driver pod dra-system/dra-driver-abc: liveness NOT_SERVING");
        assert_int_equal(plan_add_blocker(&s.plan, BLOCKER_DRIVER_UNHEALTHY, NULL, "no driver answers"), 0);
        assert_int_equal(s.plan.n_blockers, 2);
        assert_null(s.plan.blockers[1].pod);
        scenario_free(&s);
}

static void test_multiple_pdbs(void **state) {
        struct scenario s;

        scenario_load(&s);
        doc_add_fixture(&s, "pdbs", "pdb-web-all.json");
        scenario_build(&s);
        /* demo/web-* (web-pdb + web-all) and every other demo pod is covered by web-all */
        assert_int_equal(find_pod(&s.plan, "demo", "web-1")->n_pdbs, 2);
        assert_int_equal(find_pod(&s.plan, "demo", "web-1")->n_pdbs_all, 2);
        assert_int_equal(find_pod(&s.plan, "demo", "pod-a")->n_pdbs, 1);
        assert_int_equal(count_blockers(&s.plan, BLOCKER_MULTIPLE_PDBS), 2);
        assert_string_equal(
                s.plan.blockers[0].message,
                "cannot evict Pod demo/web-1: it is covered by more than one PodDisruptionBudget "
                "(demo/web-pdb, demo/web-all), which the eviction subresource does not support");
        scenario_free(&s);

        /* a Pending pod is evicted without a PDB check (eviction.go canIgnorePDB) */
        scenario_load(&s);
        doc_add_fixture(&s, "pdbs", "pdb-web-all-no-status.json");
        set_json(sub(doc_find(&s, "pods", "demo", "web-1"), "status"), "phase", "\"Pending\"");
        scenario_build(&s);
        assert_int_equal(count_blockers(&s.plan, BLOCKER_MULTIPLE_PDBS), 1);
        assert_ptr_equal(s.plan.blockers[0].pod, find_pod(&s.plan, "demo", "web-2")->pod);
        scenario_free(&s);
}

/* ---- --pod-selector ---- */

static void test_pod_selector(void **state) {
        struct scenario s;

        scenario_load(&s);
        assert_int_equal(selector_parse("app=web", &s.pod_selector, NULL), 0);
        s.o.pod_selector = s.pod_selector;
        scenario_build(&s);

        assert_int_equal(find_pod(&s.plan, "demo", "web-1")->group, EVICT_GROUP_REST);
        assert_int_equal(find_pod(&s.plan, "demo", "web-2")->group, EVICT_GROUP_REST);
        assert_int_equal(find_pod(&s.plan, "kube-system", "coredns-x")->group, EVICT_GROUP_NONE);
        assert_string_equal(find_pod(&s.plan, "kube-system", "coredns-x")->skip_reason,
                            "does not match --pod-selector");
        /* driver pods are not filtered */
        assert_int_equal(find_pod(&s.plan, "dra-system", "dra-driver-abc")->group, EVICT_GROUP_DRIVERS);
        /* mirror/finished/DaemonSet keep their own reason */
        assert_string_equal(find_pod(&s.plan, "kube-system", "mirror-x")->skip_reason, "mirror pod");
        assert_int_equal(s.plan.n_per_group[EVICT_GROUP_CLAIM_HOLDERS], 0);

        /* claim holders left behind would keep their claims on the node forever */
        assert_int_equal(count_blockers(&s.plan, BLOCKER_CLAIM_HOLDER_FILTERED), 5);
        assert_string_equal(s.plan.blockers[0].message,
                            "Pod demo/pod-a holds ResourceClaims but does not match --pod-selector, so its "
                            "claims would never leave the node");
        assert_int_equal(s.plan.n_blockers, 5);

        /* only the PDBs of evicted pods are listed */
        assert_int_equal(s.plan.n_pdbs, 1);
        assert_string_equal(s.plan.pdbs[0]->name, "web-pdb");
        scenario_free(&s);
}

/* ---- finished pods (kubectl's filters.go: any finished pod can be removed) ---- */

static void test_finished_pods_evicted(void **state) {
        struct scenario s;

        scenario_load(&s);
        /* no controller, emptyDir, holds a claim: Failed, so evicted without --force or
         * --delete-emptydir-data, and no claim rule applies */
        doc_add_fixture(&s, "pods", "pod-bare-failed.json");
        /* a DaemonSet's pod that finished: evicted (daemonSetFilter's exception) */
        doc_add_fixture(&s, "pods", "pod-ds-done.json");
        /* a mirror pod stays, finished or not */
        doc_add_fixture(&s, "pods", "pod-mirror-done.json");
        scenario_build(&s);
        assert_int_equal(find_pod(&s.plan, "demo", "bare-failed")->cls, POD_CLASS_FINISHED);
        assert_int_equal(find_pod(&s.plan, "demo", "bare-failed")->group, EVICT_GROUP_REST);
        assert_int_equal(find_pod(&s.plan, "kube-system", "ds-done")->group, EVICT_GROUP_REST);
        assert_int_equal(find_pod(&s.plan, "kube-system", "mirror-done")->group, EVICT_GROUP_NONE);
        assert_string_equal(find_pod(&s.plan, "kube-system", "mirror-done")->skip_reason, "mirror pod");
        assert_int_equal(s.plan.n_blockers, 0);
        scenario_free(&s);

        /* left out by --pod-selector: stays, and a claim it names blocks nothing */
        scenario_load(&s);
        doc_add_fixture(&s, "pods", "pod-bare-failed.json");
        cJSON_DeleteItemFromObjectCaseSensitive(sub(doc_find(&s, "pods", "demo", "bare-failed"), "spec"),
                                                "volumes");
        assert_int_equal(selector_parse("app=web", &s.pod_selector, NULL), 0);
        s.o.pod_selector = s.pod_selector;
        scenario_build(&s);
        assert_int_equal(find_pod(&s.plan, "demo", "bare-failed")->group, EVICT_GROUP_NONE);
        assert_int_equal(find_pod(&s.plan, "demo", "job-done")->group, EVICT_GROUP_NONE);
        assert_int_equal(count_blockers(&s.plan, BLOCKER_CLAIM_HOLDER_FILTERED),
                         5); /* the running holders only */
        scenario_free(&s);
}

/* --skip-wait-for-delete-timeout: deleted long enough ago, a pod is not waited for;
 * never a claim holder or a driver pod. */
static void test_wait_skipped(void **state) {
        struct scenario s;
        struct plan_pod *web, *holder, *drv;
        const int64_t now = 1000 * (int64_t)USEC_PER_SEC;

        scenario_load(&s);
        scenario_build(&s);
        web = (struct plan_pod *)find_pod(&s.plan, "demo", "web-1");
        holder = (struct plan_pod *)find_pod(&s.plan, "demo", "pod-a");
        drv = (struct plan_pod *)find_pod(&s.plan, "dra-system", "dra-driver-abc");
        assert_false(plan_pod_wait_skipped(web, now, 10 * USEC_PER_SEC)); /* not deleting */
        for (struct plan_pod **pp = (struct plan_pod *[]){ web, holder, drv, NULL }; *pp; pp++) {
                ((struct pod_rec *)(*pp)->pod)->deleting = true;
                ((struct pod_rec *)(*pp)->pod)->deletion_usec = now - 11 * (int64_t)USEC_PER_SEC;
        }
        assert_true(plan_pod_wait_skipped(web, now, 10 * USEC_PER_SEC));
        assert_false(plan_pod_wait_skipped(web, now, 12 * USEC_PER_SEC)); /* not long enough */
        assert_false(plan_pod_wait_skipped(web, now, 0));                 /* 0: never */
        assert_false(plan_pod_wait_skipped(holder, now, 10 * USEC_PER_SEC));
        assert_false(plan_pod_wait_skipped(drv, now, 10 * USEC_PER_SEC));
        scenario_free(&s);
}

/* ---- PodDisruptionBudgets ---- */

static struct pod_rec *mkpod(const char *ns, const char *labels_json) {
        char buf[1024];
        struct pod_rec *p = NULL;
        cJSON *j;

        snprintf(buf, sizeof buf,
                 "{\"metadata\":{\"name\":\"p\",\"namespace\":\"%s\",\"labels\":%s},\"spec\":{\"nodeName\":"
                 "\"node-1\"}}",
                 ns, labels_json);
        j = parse(buf);
        assert_int_equal(pod_rec_from_json(j, &p), 0);
        cJSON_Delete(j);
        return p;
}

static struct pdb_rec *mkpdb(cJSON *j) {
        struct pdb_rec *b = NULL;

        assert_int_equal(pdb_rec_from_json(j, &b), 0);
        cJSON_Delete(j);
        return b;
}

static struct pdb_rec *pdb_with_selector(const char *selector_json) {
        char buf[1024];

        snprintf(buf, sizeof buf,
                 "{\"metadata\":{\"name\":\"b\",\"namespace\":\"ml\"},\"spec\":{\"selector\":%s}}",
                 selector_json);
        return mkpdb(parse(buf));
}

static bool matches(const struct pdb_rec *b, const char *ns, const char *labels_json) {
        struct pod_rec *p = mkpod(ns, labels_json);
        bool r = pdb_matches_pod(b, p);

        pod_rec_free(p);
        return r;
}

static void test_pdb_parse(void **state) {
        _cleanup_free_ char *str = NULL;
        struct pdb_rec *b;

        b = mkpdb(load("pdb-expressions.json"));
        assert_string_equal(b->ns, "ml");
        assert_string_equal(b->name, "gpu-pdb");
        assert_string_equal(b->resource_version, "7001");
        assert_int_equal(b->disruptions_allowed, 1);
        assert_int_equal(b->current_healthy, 4);
        assert_int_equal(b->desired_healthy, 3);
        assert_int_equal(b->expected_pods, 4);
        assert_true(b->alloc_size >= sizeof(*b));
        assert_int_equal(pdb_rec_size(b), b->alloc_size);
        assert_non_null(b->selector);
        assert_int_equal(selector_to_string(b->selector, &str), 0);
        assert_string_equal(str,
                            "app=trainer,canary notin (true),example.com/team,!legacy,tier in (gpu,tpu)");

        assert_true(matches(b, "ml", "{\"app\":\"trainer\",\"tier\":\"gpu\",\"example.com/team\":\"a\"}"));
        assert_true(matches(
                b, "ml",
                "{\"app\":\"trainer\",\"tier\":\"tpu\",\"example.com/team\":\"\",\"canary\":\"no\"}"));
        /* each requirement in turn */
        assert_false(matches(b, "ml", "{\"app\":\"web\",\"tier\":\"gpu\",\"example.com/team\":\"a\"}"));
        assert_false(matches(b, "ml", "{\"app\":\"trainer\",\"tier\":\"cpu\",\"example.com/team\":\"a\"}"));
        assert_false(matches(b, "ml", "{\"app\":\"trainer\",\"example.com/team\":\"a\"}"));
        assert_false(matches(
                b, "ml",
                "{\"app\":\"trainer\",\"tier\":\"gpu\",\"example.com/team\":\"a\",\"canary\":\"true\"}"));
        assert_false(matches(b, "ml", "{\"app\":\"trainer\",\"tier\":\"gpu\"}"));
        assert_false(matches(
                b, "ml",
                "{\"app\":\"trainer\",\"tier\":\"gpu\",\"example.com/team\":\"a\",\"legacy\":\"x\"}"));
        /* another namespace never */
        assert_false(
                matches(b, "prod", "{\"app\":\"trainer\",\"tier\":\"gpu\",\"example.com/team\":\"a\"}"));
        pdb_rec_free(b);

        /* required metadata */
        b = NULL;
        {
                cJSON *j = parse("{\"metadata\":{\"name\":\"x\"},\"spec\":{\"selector\":{}}}");

                assert_int_equal(pdb_rec_from_json(j, &b), -EBADMSG);
                cJSON_Delete(j);
                j = parse("{\"metadata\":{\"namespace\":\"ml\"}}");
                assert_int_equal(pdb_rec_from_json(j, &b), -EBADMSG);
                cJSON_Delete(j);
                j = parse("[]");
                assert_int_equal(pdb_rec_from_json(j, &b), -EBADMSG);
                cJSON_Delete(j);
                assert_null(b);
        }
        pdb_rec_free(NULL);
        assert_int_equal(pdb_rec_size(NULL), 0);
}

static void test_pdb_empty_vs_nil(void **state) {
        struct pdb_rec *b;

        /* policy/v1: {} selects every pod of the namespace, labelled or not */
        b = mkpdb(load("pdb-empty-selector.json"));
        assert_non_null(b->selector);
        assert_true(selector_is_empty(b->selector));
        assert_true(matches(b, "ml", "{\"app\":\"x\"}"));
        assert_true(matches(b, "ml", "{}"));
        assert_false(matches(b, "default", "{\"app\":\"x\"}"));
        pdb_rec_free(b);

        /* no selector: nothing */
        b = mkpdb(load("pdb-nil-selector.json"));
        assert_null(b->selector);
        assert_false(matches(b, "ml", "{\"app\":\"x\"}"));
        assert_false(matches(b, "ml", "{}"));
        pdb_rec_free(b);

        /* explicit null: nothing */
        b = pdb_with_selector("null");
        assert_null(b->selector);
        assert_false(matches(b, "ml", "{}"));
        pdb_rec_free(b);

        /* empty matchLabels and matchExpressions are still the empty selector */
        b = pdb_with_selector("{\"matchLabels\":{},\"matchExpressions\":[]}");
        assert_true(matches(b, "ml", "{}"));
        pdb_rec_free(b);

        /* a PDB created through policy/v1beta1 with {} reads back through v1 as this
         * (pkg/apis/policy/helper.go NonV1beta1MatchNoneSelector): it matches nothing */
        b = pdb_with_selector("{\"matchExpressions\":[{\"key\":\"pdb.kubernetes.io/"
                              "deprecated-v1beta1-empty-selector-match\",\"operator\":\"Exists\"}]}");
        assert_non_null(b->selector);
        assert_false(matches(b, "ml", "{\"app\":\"x\"}"));
        pdb_rec_free(b);
}

static void test_pdb_invalid_selector(void **state) {
        static const char *const invalid[] = {
                "{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Gt\",\"values\":[\"1\"]}]}",
                "{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\",\"values\":[]}]}",
                "{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\"}]}",
                "{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Exists\",\"values\":[\"x\"]}]}",
                "{\"matchExpressions\":[{\"operator\":\"Exists\"}]}",
                "{\"matchExpressions\":[{\"key\":\"a\"}]}",
                "{\"matchExpressions\":{}}",
                "{\"matchLabels\":{\"app\":\"a,b\"}}", /* would read as app=a AND b */
                "{\"matchLabels\":{\"app\":\"x y\"}}",
                "{\"matchLabels\":{\"a b\":\"x\"}}",
                "{\"matchLabels\":{\"app\":1}}",
                "{\"matchLabels\":[]}",
                "{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\",\"values\":[\"x)\"]}]}",
        };

        /* LabelSelectorAsSelector fails: the Eviction API skips the PDB ("it does not match the pod") */
        for (size_t i = 0; i < ELEMENTSOF(invalid); i++) {
                struct pdb_rec *b = pdb_with_selector(invalid[i]);

                if (b->selector)
                        fail_msg("selector %s should be invalid", invalid[i]);
                assert_false(matches(b, "ml", "{\"app\":\"a\",\"b\":\"\"}"));
                pdb_rec_free(b);
        }

        /* the empty label value is valid */
        {
                struct pdb_rec *b = pdb_with_selector("{\"matchLabels\":{\"app\":\"\"}}");

                assert_non_null(b->selector);
                assert_true(matches(b, "ml", "{\"app\":\"\"}"));
                assert_false(matches(b, "ml", "{\"app\":\"x\"}"));
                assert_false(matches(b, "ml", "{}"));
                pdb_rec_free(b);
        }
}

static void test_pdbs_in_plan(void **state) {
        struct scenario s;
        const struct plan_pod *pp;

        scenario_load(&s);
        scenario_build(&s);
        pp = find_pod(&s.plan, "demo", "web-1");
        assert_int_equal(pp->n_pdbs, 1);
        assert_string_equal(pp->pdbs[0]->name, "web-pdb");
        pp = find_pod(&s.plan, "kube-system", "coredns-x");
        assert_int_equal(pp->n_pdbs, 1);
        assert_string_equal(pp->pdbs[0]->name, "dns-pdb");
        assert_int_equal(find_pod(&s.plan, "demo", "pod-a")->n_pdbs, 0);
        /* distinct, sorted ns/name, only those covering an evicted pod (not unused-pdb) */
        assert_int_equal(s.plan.n_pdbs, 2);
        assert_string_equal(s.plan.pdbs[0]->name, "web-pdb");
        assert_string_equal(s.plan.pdbs[1]->name, "dns-pdb");
        scenario_free(&s);
}

/* ---- driver names ---- */

static void test_driver_names(void **state) {
        struct scenario s;
        const char *names[4];

        scenario_load(&s);
        scenario_build(&s);
        assert_int_equal(plan_driver_names((const struct slice_rec *const *)s.slices, s.n_slices, "node-1",
                                           names, ELEMENTSOF(names)),
                         2);
        assert_string_equal(names[0], "gpu.example.com");
        assert_string_equal(names[1], "nic.example.com");
        assert_int_equal(plan_driver_names((const struct slice_rec *const *)s.slices, s.n_slices, "node-2",
                                           names, ELEMENTSOF(names)),
                         1);
        assert_string_equal(names[0], "gpu.example.com");
        assert_int_equal(plan_driver_names((const struct slice_rec *const *)s.slices, s.n_slices, "node-3",
                                           names, ELEMENTSOF(names)),
                         0);
        /* capped: the first in sort order */
        assert_int_equal(
                plan_driver_names((const struct slice_rec *const *)s.slices, s.n_slices, "node-1", names, 1),
                1);
        assert_string_equal(names[0], "gpu.example.com");
        assert_int_equal(plan_driver_names(NULL, 0, "node-1", NULL, 0), 0);
        scenario_free(&s);
}

/* ---- output ---- */

static const cJSON *jitem(const cJSON *o, const char *k) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

        if (!v)
                fail_msg("no key %s", k);
        return v;
}

static void test_json(void **state) {
        _cleanup_(cJSON_Deletep) cJSON *j = NULL;
        const cJSON *groups, *g, *pod, *claim, *e;
        struct scenario s;
        size_t i = 0;

        scenario_load(&s);
        doc_add_fixture(&s, "pods", "pod-bare.json");
        scenario_build(&s);
        j = plan_to_json(&s.plan, &s.o);
        assert_non_null(j);

        assert_string_equal(json_str(j, "node"), "node-1");
        assert_false(json_bool(j, "unschedulable", true));
        assert_true(cJSON_IsFalse(jitem(j, "ok")));

        groups = jitem(j, "groups");
        assert_int_equal(cJSON_GetArraySize(groups), 5);
        cJSON_ArrayForEach(g, groups) {
                assert_string_equal(json_str(g, "name"), evict_group_to_string(i));
                assert_int_equal(cJSON_GetArraySize(jitem(g, "pods")), s.plan.n_per_group[i]);
                i++;
        }
        pod = cJSON_GetArrayItem(jitem(cJSON_GetArrayItem(groups, 0), "pods"), 0);
        assert_string_equal(json_str(pod, "namespace"), "demo");
        assert_string_equal(json_str(pod, "name"), "pod-a");
        assert_string_equal(cJSON_GetArrayItem(jitem(pod, "claims"), 0)->valuestring,
                            "demo/pod-a-gpu-x7k2p");
        assert_int_equal(cJSON_GetArraySize(jitem(pod, "pdbs")), 0);
        assert_true(cJSON_IsFalse(jitem(pod, "deleting")));
        pod = cJSON_GetArrayItem(jitem(cJSON_GetArrayItem(groups, 2), "pods"), 1); /* demo/job-done */
        assert_string_equal(json_str(pod, "name"), "job-done");
        pod = cJSON_GetArrayItem(jitem(cJSON_GetArrayItem(groups, 2), "pods"), 2); /* demo/web-1 */
        assert_string_equal(json_str(pod, "name"), "web-1");
        assert_string_equal(cJSON_GetArrayItem(jitem(pod, "pdbs"), 0)->valuestring, "demo/web-pdb");

        assert_int_equal(cJSON_GetArraySize(jitem(j, "claims")), 5);
        claim = cJSON_GetArrayItem(jitem(j, "claims"), 1);
        assert_string_equal(json_str(claim, "namespace"), "demo");
        assert_string_equal(json_str(claim, "name"), "shared");
        assert_string_equal(json_str(claim, "reason"), "reserved-by-node-pod");
        e = cJSON_GetArrayItem(jitem(claim, "devices"), 0);
        assert_string_equal(json_str(e, "driver"), "gpu.example.com");
        assert_string_equal(json_str(e, "pool"), "node-1");
        assert_string_equal(json_str(e, "device"), "gpu-1");
        assert_int_equal(cJSON_GetArraySize(jitem(claim, "reservedFor")), 2);
        assert_string_equal(cJSON_GetArrayItem(jitem(claim, "reservedFor"), 0)->valuestring, "demo/pod-b");
        assert_string_equal(cJSON_GetArrayItem(jitem(claim, "reservedFor"), 1)->valuestring, "demo/pod-c");
        assert_true(cJSON_IsFalse(jitem(claim, "driverOwn")));
        assert_true(cJSON_IsTrue(jitem(cJSON_GetArrayItem(jitem(j, "claims"), 2), "driverOwn")));

        assert_int_equal(cJSON_GetArraySize(jitem(j, "drivers")), 1);
        e = cJSON_GetArrayItem(jitem(j, "drivers"), 0);
        assert_string_equal(json_str(e, "namespace"), "dra-system");
        assert_string_equal(json_str(e, "name"), "dra-driver-abc");
        assert_string_equal(json_str(e, "strategy"), "taint");
        assert_string_equal(json_str(e, "daemonset"), "dra-system/dra-driver");

        assert_int_equal(cJSON_GetArraySize(jitem(j, "stays")), 2);
        e = cJSON_GetArrayItem(jitem(j, "stays"), 1);
        assert_string_equal(json_str(e, "name"), "mirror-x");
        assert_string_equal(json_str(e, "reason"), "mirror pod");

        assert_int_equal(cJSON_GetArraySize(jitem(j, "pdbs")), 2);
        e = cJSON_GetArrayItem(jitem(j, "pdbs"), 0);
        assert_string_equal(json_str(e, "name"), "web-pdb");
        assert_int_equal(json_int(e, "disruptionsAllowed", -1), 1);
        assert_int_equal(json_int(e, "currentHealthy", -1), 3);
        assert_int_equal(json_int(e, "desiredHealthy", -1), 2);
        assert_int_equal(json_int(e, "expectedPods", -1), 3);

        assert_int_equal(cJSON_GetArraySize(jitem(j, "blockers")), 2);
        e = cJSON_GetArrayItem(jitem(j, "blockers"), 0);
        assert_string_equal(json_str(e, "kind"), "emptydir");
        assert_string_equal(json_str(e, "pod"), "demo/bare");
        assert_string_equal(
                json_str(e, "message"),
                "cannot delete Pods with local storage (use --delete-emptydir-data to override): "
                "demo/bare");
        scenario_free(&s);

        /* no blockers: ok; a blocker without pod: null */
        scenario_load(&s);
        scenario_build(&s);
        cJSON_Delete(j);
        j = plan_to_json(&s.plan, &s.o);
        assert_true(cJSON_IsTrue(jitem(j, "ok")));
        assert_int_equal(plan_add_blocker(&s.plan, BLOCKER_DRIVER_UNHEALTHY, NULL, "probe failed"), 0);
        cJSON_Delete(j);
        j = plan_to_json(&s.plan, &s.o);
        assert_true(cJSON_IsFalse(jitem(j, "ok")));
        assert_true(cJSON_IsNull(jitem(cJSON_GetArrayItem(jitem(j, "blockers"), 0), "pod")));
        scenario_free(&s);
}

static char *print_text(const struct plan *p, const struct plan_options *o) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        assert_non_null(f);
        assert_int_equal(plan_print_text(p, o, f), 0);
        assert_int_equal(fclose(f), 0);
        return buf;
}

#define assert_has(text, s)                                              \
        do {                                                             \
                if (!strstr((text), (s)))                                \
                        fail_msg("missing \"%s\" in:\n%s", (s), (text)); \
        } while (0)

static void test_text(void **state) {
        struct scenario s;
        char *t;

        scenario_load(&s);
        scenario_build(&s);
        t = print_text(&s.plan, &s.o);
        assert_has(t, "Plan for node node-1 (schedulable)\n");
        assert_has(t, " 1. cordon: spec.unschedulable=true, taint drainer.io/draining:NoSchedule\n");
        assert_has(t, " 2. evict claim holders (4):\n"
                      "      demo/pod-a                  claims demo/pod-a-gpu-x7k2p "
                      "(gpu.example.com/node-1/gpu-0)\n");
        assert_has(t,
                   "      demo/pod-b                  claims demo/shared (gpu.example.com/node-1/gpu-1)\n");
        assert_has(t, "      monitoring/gpu-exporter-x   claims monitoring/exporter-claim "
                      "(gpu.example.com/node-1/gpu-3)  (DaemonSet monitoring/gpu-exporter)\n");
        assert_has(t, "    then critical claim holders (1):\n      kube-system/critical-gpu-x");
        assert_has(t, " 3. evict the rest (3):\n"
                      "      demo/job-done\n"
                      "      demo/web-1                  (PDB demo/web-pdb allows 1 disruption)\n");
        assert_has(t, "    then critical pods (1):\n"
                      "      kube-system/coredns-x       (PDB kube-system/dns-pdb allows 0 disruptions)\n");
        assert_has(t,
                   " 4. wait until the pods are gone and no ResourceClaim is on the node (4 claims now):\n");
        assert_has(t, "      demo/shared                     reserved for demo/pod-b, demo/pod-c; devices "
                      "gpu.example.com/node-1/gpu-1\n");
        assert_has(t,
                   "      dra-system/driver-own           reserved for dra-system/dra-driver-abc; devices "
                   "nic.example.com/node-1/nic-0 (DRA driver's own claim: does not hold the drain back)\n");
        assert_has(t, " 5. stop DRA drivers (taint): evict dra-system/dra-driver-abc (DaemonSet "
                      "dra-system/dra-driver)\n");
        assert_has(t, "Stays on the node: kube-system/kube-proxy-x (DaemonSet pod), "
                      "kube-system/mirror-x (mirror pod)\n");
        assert_has(t, "PodDisruptionBudgets: demo/web-pdb: 1 disruption allowed (3/3 healthy, 2 desired); "
                      "kube-system/dns-pdb: 0 disruptions allowed (1/1 healthy, 1 desired)\n");
        assert_has(t, "Preflight: no blockers\n");
        free(t);
        scenario_free(&s);

        /* blockers, a cordoned node, the label strategy */
        scenario_load(&s);
        doc_add_fixture(&s, "pods", "pod-bare.json");
        set_json(sub(s.doc, "node"), "spec",
                 "{\"unschedulable\":true,\"taints\":[{\"key\":\"drainer.io/"
                 "draining\",\"effect\":\"NoSchedule\"}]}");
        s.o.driver_stop = &driver_stop_label;
        s.o.driver_stop_arg = "example.com/dra";
        scenario_build(&s);
        t = print_text(&s.plan, &s.o);
        assert_has(t, "Plan for node node-1 (already unschedulable, drain taint set)\n");
        assert_has(t, "taint drainer.io/draining:NoSchedule (cordoned before the drain: uncordon leaves it "
                      "cordoned)\n");
        assert_has(t, " 5. stop DRA drivers (label): set node label example.com/dra=drainer-paused, so the "
                      "DaemonSet controller removes dra-system/dra-driver-abc (DaemonSet "
                      "dra-system/dra-driver)\n");
        assert_has(t, "dra-system/dra-driver-abc (DRA driver: stopped by label)");
        assert_has(
                t,
                "Blockers (2):\n"
                "  - cannot delete Pods with local storage (use --delete-emptydir-data to override): "
                "demo/bare\n"
                "  - cannot delete Pods that declare no controller (use --force to override): demo/bare\n");
        free(t);
        scenario_free(&s);

        /* drainer cordoned it itself (resuming): no note */
        scenario_load(&s);
        set_json(sub(s.doc, "node"), "spec", "{\"unschedulable\":true}");
        set_json(sub(sub(s.doc, "node"), "metadata"), "annotations",
                 "{\"drainer.io/was-unschedulable\":\"false\"}");
        scenario_build(&s);
        t = print_text(&s.plan, &s.o);
        assert_has(t, "Plan for node node-1 (already unschedulable)\n");
        assert_has(t, " 1. cordon: spec.unschedulable=true, taint drainer.io/draining:NoSchedule\n");
        free(t);
        scenario_free(&s);

        /* an empty node */
        scenario_load(&s);
        cJSON_DeleteItemFromObjectCaseSensitive(s.doc, "pods");
        cJSON_AddArrayToObject(s.doc, "pods");
        cJSON_DeleteItemFromObjectCaseSensitive(s.doc, "claims");
        cJSON_AddArrayToObject(s.doc, "claims");
        s.o.driver_stop = &driver_stop_none;
        scenario_build(&s);
        assert_int_equal(s.plan.n_pods, 0);
        t = print_text(&s.plan, &s.o);
        assert_has(t, " 2. evict claim holders (0)\n    then critical claim holders (0)\n");
        assert_has(t, "(0 claims now)\n 5. stop DRA drivers (none): nothing (--driver-stop none)\n");
        assert_has(t, "Stays on the node: nothing\nPodDisruptionBudgets: none\nPreflight: no blockers\n");
        free(t);
        scenario_free(&s);
}

/* ---- driver_key_read: the label key of a driver drain, read from its DaemonSet ---- */

struct key_answer {
        unsigned done;
        int error;
        char key[128], from[128], why[512];
};

static void on_key(int error, const char *key, const char *from, const char *why, void *userdata) {
        struct key_answer *a = userdata;

        a->done++;
        a->error = error;
        snprintf(a->key, sizeof(a->key), "%s", key ? key : "");
        snprintf(a->from, sizeof(a->from), "%s", from ? from : "");
        snprintf(a->why, sizeof(a->why), "%s", why ? why : "");
}

static void read_key(struct scenario *s, struct test_api *t, struct key_answer *a) {
        static const char *const drivers[] = { "gpu.example.com", NULL };
        struct drain_profile p = {
                .drv_sels = s->driver_selectors,
                .n_drv_sels = s->n_driver_selectors,
                .drivers = { drivers[0], NULL },
                .n_drivers = 1,
                .stop = &driver_stop_label,
        };
        struct node_input in = {
                .node = s->node,
                .pods = (const struct pod_rec **)s->pods,
                .n_pods = s->n_pods,
                .claims = (const struct claim_rec **)s->claims,
                .n_claims = s->n_claims,
                .slices = (const struct slice_rec **)s->slices,
                .n_slices = s->n_slices,
        };
        struct driver_key_read *k;

        assert_int_equal(driver_key_read_start(t->client, t->ts, &in, &p, on_key, a, &k), 0);
        assert_int_equal(a->done, 0); /* never from inside the start */
        fake_clock_advance(t->clock, 0);
        assert_int_equal(a->done, 1);
}

static void test_driver_key_read(void **state) {
        struct test_api *t = test_api_new(NULL);
        struct key_answer a = {};
        struct scenario s;

        scenario_load(&s);
        scenario_build(&s);
        fake_transport_expect_json(
                t->ft, "GET", "/apis/apps/v1/namespaces/dra-system/daemonsets/dra-driver", 200,
                "{\"kind\":\"DaemonSet\",\"spec\":{\"template\":{\"spec\":{\"nodeSelector\":"
                "{\"gpu.example.com/present\":\"true\"}}}}}");
        read_key(&s, t, &a);
        assert_int_equal(a.error, 0);
        assert_string_equal(a.key, "gpu.example.com/present");
        assert_string_equal(a.from, "DaemonSet dra-system/dra-driver");
        scenario_free(&s);
        test_api_free(t);
}

/* No driver pod of a DaemonSet's and no recorded stop: refused, no request. */
static void test_driver_key_no_pod(void **state) {
        struct test_api *t = test_api_new(NULL);
        struct key_answer a = {};
        struct scenario s;

        scenario_load(&s);
        doc_remove(&s, "pods", "dra-system", "dra-driver-abc");
        scenario_build(&s);
        read_key(&s, t, &a);
        assert_int_equal(a.error, -EPERM);
        assert_non_null(strstr(a.why, "no DRA driver pod of gpu.example.com"));
        assert_int_equal(fake_transport_n_requests(t->ft), 0);
        scenario_free(&s);
        test_api_free(t);
}

/* The DaemonSet cannot be read: the error, and which read failed. */
static void test_driver_key_read_fails(void **state) {
        struct test_api *t = test_api_new(NULL);
        struct key_answer a = {};
        struct scenario s;

        scenario_load(&s);
        scenario_build(&s);
        fake_transport_expect_json(
                t->ft, "GET", "/apis/apps/v1/namespaces/dra-system/daemonsets/dra-driver", 404,
                "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"NotFound\","
                "\"message\":\"daemonsets.apps \\\"dra-driver\\\" not found\",\"code\":404}");
        read_key(&s, t, &a);
        assert_int_equal(a.error, -ENOENT);
        assert_non_null(strstr(a.why, "cannot read DaemonSet dra-system/dra-driver"));
        scenario_free(&s);
        test_api_free(t);
}

/* plan's report of a node: the DRA API, the Node not Ready since a time and when
 * --out-of-service would taint it, a driver's seamless answer; in text and in JSON. */
static void test_report(void **state) {
        struct seamless_answer seam = { .seamless = false,
                                        .daemonset = "dra-system/dra-driver",
                                        .why = "OnDelete" };
        const char *const drivers[] = { "gpu.example.com", NULL };
        struct scenario s;
        struct node_input in;
        struct plan_report r;
        char *text = NULL;
        size_t size = 0;
        FILE *f;

        scenario_load(&s);
        scenario_build(&s);
        s.o.drivers = drivers;
        s.node->ready = false;
        s.node->not_ready_since_usec = 1700000000 * USEC_PER_SEC;
        in = (struct node_input){ .node = s.node, .dra_api = "resource.k8s.io/v1" };
        r = (struct plan_report){
                .plan = &s.plan,
                .plan_options = &s.o,
                .in = &in,
                .out_of_service = true,
                .out_of_service_after_usec = 300 * USEC_PER_SEC,
                .seam = &seam,
        };
        f = open_memstream(&text, &size);
        assert_non_null(f);
        assert_int_equal(plan_report_print(&r, f), 0);
        fclose(f);
        assert_has(text, "DRA API: resource.k8s.io/v1\nPlan for node node-1");
        assert_has(text, "\nNode node-1 is not Ready (since 2023-11-14T22:13:20Z)");
        assert_has(text, "for 300 s (--out-of-service-after");
        assert_has(text, "Now: not Ready since 2023-11-14T22:13:20Z: the taint would go on at "
                         "2023-11-14T22:18:20Z.\n");
        assert_has(text, "Seamless upgrade of gpu.example.com: no, OnDelete; to update it across the "
                         "cluster: drainer rollout dra-system/dra-driver --driver gpu.example.com\n");
        free(text);
        {
                _cleanup_(cJSON_Deletep) cJSON *j = plan_report_to_json(&r);

                assert_non_null(j);
                assert_string_equal(json_str(j, "node"), "node-1");
                assert_string_equal(json_str(j, "draApi"), "resource.k8s.io/v1");
                assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "draServed")));
                assert_true(cJSON_IsFalse(cJSON_GetObjectItem(j, "nodeReady")));
                assert_string_equal(json_str(j, "nodeNotReadySince"), "2023-11-14T22:13:20Z");
                assert_string_equal(json_str(j, "outOfService.dueAt"), "2023-11-14T22:18:20Z");
                assert_true(cJSON_IsFalse(json_path(j, "outOfService.tainted")));
                assert_string_equal(json_str(j, "seamlessUpgrade.daemonset"), "dra-system/dra-driver");
        }
        /* Ready, no --out-of-service, no seamless check, no DRA served */
        s.node->ready = true;
        in.dra_api = NULL;
        in.dra_off = true;
        r.out_of_service = false;
        r.seam = NULL;
        text = NULL;
        f = open_memstream(&text, &size);
        assert_non_null(f);
        assert_int_equal(plan_report_print(&r, f), 0);
        fclose(f);
        assert_has(text, "DRA: not served by this cluster");
        assert_null(strstr(text, "not Ready"));
        assert_null(strstr(text, "Out of service"));
        assert_null(strstr(text, "Seamless"));
        free(text);
        {
                _cleanup_(cJSON_Deletep) cJSON *j = plan_report_to_json(&r);

                assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "draApi")));
                assert_true(cJSON_IsFalse(cJSON_GetObjectItem(j, "draServed")));
                assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "nodeReady")));
                assert_null(cJSON_GetObjectItem(j, "outOfService"));
                assert_null(cJSON_GetObjectItem(j, "seamlessUpgrade"));
        }
        scenario_free(&s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_driver_key_read),
                cmocka_unit_test(test_driver_key_no_pod),
                cmocka_unit_test(test_driver_key_read_fails),
                cmocka_unit_test(test_groups_and_order),
                cmocka_unit_test(test_group_names),
                cmocka_unit_test(test_claims),
                cmocka_unit_test(test_claims_array_is_the_nodes),
                cmocka_unit_test(test_driver_scope),
                cmocka_unit_test(test_device_scope),
                cmocka_unit_test(test_driver_scope_two_drivers),
                cmocka_unit_test(test_driver_label_key),
                cmocka_unit_test(test_shared_claim),
                cmocka_unit_test(test_driver_own_mixed),
                cmocka_unit_test(test_unmanaged_emptydir),
                cmocka_unit_test(test_daemonset_claim_holder),
                cmocka_unit_test(test_driver_blockers),
                cmocka_unit_test(test_multiple_pdbs),
                cmocka_unit_test(test_pod_selector),
                cmocka_unit_test(test_finished_pods_evicted),
                cmocka_unit_test(test_wait_skipped),
                cmocka_unit_test(test_pdb_parse),
                cmocka_unit_test(test_pdb_empty_vs_nil),
                cmocka_unit_test(test_pdb_invalid_selector),
                cmocka_unit_test(test_pdbs_in_plan),
                cmocka_unit_test(test_driver_names),
                cmocka_unit_test(test_no_node_ops),
                cmocka_unit_test(test_podgroup_claim),
                cmocka_unit_test(test_json),
                cmocka_unit_test(test_text),
                cmocka_unit_test(test_report),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
