/* Unit tests for rollout's decisions (drain/rollout.c): the preflight (OnDelete
 * or a refusal that says how to set it), the update revision from the
 * DaemonSet's ControllerRevisions, and each node's step through a whole rollout
 * (drain, replace, wait, restore, done), decided from the Node's state alone so
 * that a rollout killed at any step resumes at the same step; the old plugin pod
 * is never replaced while a claim of its driver is on the node; someone else's
 * drain is never taken over; nodes already on the new revision are skipped. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "drainer/base/json.h"
#include "drainer/drain/rollout.h"
#include "drainer/kube/objects.h"
#include "fakes/test-env.h"

#define DS_UID "ds-uid-1"
#define DRV    "gpu.example.com"
#define OLD    "6d4f8b7c9"
#define NEW    "7f9c5d6b8"

static cJSON *parse(const char *json) {
        cJSON *j = cJSON_Parse(json);

        if (!j)
                fail_msg("bad test JSON: %s", json);
        return j;
}

/* ---- preflight and the update revision ---- */

static cJSON *daemonset(const char *strategy, int generation, int observed) {
        _cleanup_free_ char *st =
                strategy ? test_asprintf("\"updateStrategy\":{\"type\":\"%s\"}", strategy) : NULL;
        _cleanup_free_ char *s = test_asprintf(
                "{\"metadata\":{\"namespace\":\"dra-system\",\"name\":\"dra-driver\",\"uid\":\"" DS_UID
                "\",\"generation\":%d},\"spec\":{%s},\"status\":{\"observedGeneration\":%d}}",
                generation, st ? st : "", observed);

        return parse(s);
}

static void test_preflight(void **state) {
        struct rollout_daemonset d;
        char msg[1024];
        cJSON *j;

        j = daemonset("OnDelete", 3, 3);
        assert_int_equal(rollout_daemonset_parse(j, &d, msg, sizeof(msg)), 0);
        assert_true(d.on_delete);
        assert_int_equal(rollout_preflight(&d, msg, sizeof(msg)), 0);
        cJSON_Delete(j);

        /* RollingUpdate (written, or the default): refused, with the command that sets OnDelete. */
        for (int i = 0; i < 2; i++) {
                j = daemonset(i ? "RollingUpdate" : NULL, 3, 3);
                assert_int_equal(rollout_daemonset_parse(j, &d, msg, sizeof(msg)), 0);
                assert_false(d.on_delete);
                assert_string_equal(d.strategy, "RollingUpdate");
                assert_int_equal(rollout_preflight(&d, msg, sizeof(msg)), -EPERM);
                assert_non_null(
                        strstr(msg, "DaemonSet dra-system/dra-driver has updateStrategy RollingUpdate"));
                assert_non_null(
                        strstr(msg, "kubectl -n dra-system patch daemonset dra-driver --type merge"));
                assert_non_null(strstr(msg, "\"type\":\"OnDelete\""));
                cJSON_Delete(j);
        }

        /* The controller has not seen the newest template yet: its revision is not known. */
        j = daemonset("OnDelete", 4, 3);
        assert_int_equal(rollout_daemonset_parse(j, &d, msg, sizeof(msg)), 0);
        assert_int_equal(rollout_preflight(&d, msg, sizeof(msg)), -EAGAIN);
        assert_non_null(strstr(msg, "generation 4"));
        cJSON_Delete(j);

        j = parse("{\"metadata\":{\"name\":\"x\"}}");
        assert_int_equal(rollout_daemonset_parse(j, &d, msg, sizeof(msg)), -EINVAL);
        cJSON_Delete(j);
}

static void test_update_revision(void **state) {
        const char *hash = NULL;
        cJSON *items = parse(
                "[{\"metadata\":{\"name\":\"dra-driver-1\",\"labels\":{\"controller-revision-hash\":\"" OLD
                "\"},\"ownerReferences\":[{\"kind\":\"DaemonSet\",\"uid\":\"" DS_UID
                "\",\"controller\":true}]},\"revision\":1},"
                /* the newest of another DaemonSet: not ours */
                "{\"metadata\":{\"name\":\"other-9\",\"labels\":{\"controller-revision-hash\":\"zzz\"},"
                "\"ownerReferences\":[{\"kind\":\"DaemonSet\",\"uid\":\"other\",\"controller\":true}]},"
                "\"revision\":9},"
                /* ours but not as controller */
                "{\"metadata\":{\"name\":\"dra-driver-5\",\"labels\":{\"controller-revision-hash\":\"yyy\"},"
                "\"ownerReferences\":[{\"kind\":\"DaemonSet\",\"uid\":\"" DS_UID "\"}]},\"revision\":5},"
                "{\"metadata\":{\"name\":\"dra-driver-3\",\"labels\":{\"controller-revision-hash\":\"" NEW
                "\"},\"ownerReferences\":[{\"kind\":\"DaemonSet\",\"uid\":\"" DS_UID
                "\",\"controller\":true}]},\"revision\":3}]");

        assert_int_equal(rollout_update_revision(items, DS_UID, &hash), 0);
        assert_string_equal(hash, NEW);
        assert_int_equal(rollout_update_revision(items, "nobody", &hash), -ENOENT);
        cJSON_Delete(items);

        items = parse("[{\"metadata\":{\"name\":\"r\",\"ownerReferences\":[{\"uid\":\"" DS_UID
                      "\",\"controller\":true}]},\"revision\":2}]");
        assert_int_equal(rollout_update_revision(items, DS_UID, &hash), -EINVAL);
        cJSON_Delete(items);
}

/* ---- one node's steps ---- */

struct world {
        struct node_rec *node;
        struct pod_rec *pods[8];
        size_t n_pods;
        struct claim_rec *claims[4];
        size_t n_claims;
        struct slice_rec *slices[2];
        size_t n_slices;
};

static void world_done(struct world *w) {
        node_rec_free(w->node);
        for (size_t i = 0; i < w->n_pods; i++)
                pod_rec_free(w->pods[i]);
        for (size_t i = 0; i < w->n_claims; i++)
                claim_rec_free(w->claims[i]);
        for (size_t i = 0; i < w->n_slices; i++)
                slice_rec_free(w->slices[i]);
        *w = (struct world){};
}

/* The Node with these drainer.io/ annotations ("" for none: a JSON object's members). */
static void set_node(struct world *w, const char *annotations) {
        _cleanup_free_ char *s =
                test_asprintf("{\"metadata\":{\"name\":\"node-1\",\"uid\":\"n1\",\"resourceVersion\":\"7\","
                              "\"annotations\":{%s}},\"spec\":{}}",
                              annotations);
        cJSON *j = parse(s);

        node_rec_free(w->node);
        w->node = NULL;
        assert_int_equal(node_rec_from_json(j, &w->node), 0);
        cJSON_Delete(j);
}

/* A plugin pod of the DaemonSet (or of another one: owner) on node-1. */
static void add_driver_pod(struct world *w, const char *name, const char *owner, const char *hash,
                           bool ready, bool deleting) {
        _cleanup_free_ char *s = test_asprintf(
                "{\"metadata\":{\"namespace\":\"dra-system\",\"name\":\"%s\",\"uid\":\"uid-%s\",%s"
                "\"labels\":{\"app.kubernetes.io/component\":\"kubeletplugin\",\"controller-revision-hash\":"
                "\"%s\"},\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"name\":"
                "\"dra-driver\",\"uid\":\"%s\",\"controller\":true}]},\"spec\":{\"nodeName\":\"node-1\"},"
                "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\"}]}"
                "}",
                name, name, deleting ? "\"deletionTimestamp\":\"2026-12-02T08:00:00Z\"," : "", hash, owner,
                ready ? "True" : "False");
        cJSON *j = parse(s);

        assert_int_equal(pod_rec_from_json(j, &w->pods[w->n_pods++]), 0);
        cJSON_Delete(j);
}

/* A claim allocated from the driver's node-local pool of node-1. */
static void add_claim(struct world *w, const char *driver) {
        _cleanup_free_ char *s = test_asprintf(
                "{\"metadata\":{\"namespace\":\"demo\",\"name\":\"c%zu\",\"uid\":\"cu%zu\"},\"status\":{"
                "\"allocation\":{\"devices\":{\"results\":[{\"request\":\"r\",\"driver\":\"%s\",\"pool\":"
                "\"node-1\",\"device\":\"gpu-0\"}]},\"nodeSelector\":{\"nodeSelectorTerms\":[{"
                "\"matchFields\":"
                "[{\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":[\"node-1\"]}]}]}}}}",
                w->n_claims, w->n_claims, driver);
        cJSON *j = parse(s);

        assert_int_equal(claim_rec_from_json(j, &w->claims[w->n_claims++]), 0);
        cJSON_Delete(j);
}

static void add_slice(struct world *w) {
        cJSON *j = parse("{\"metadata\":{\"name\":\"node-1-gpu\"},\"spec\":{\"driver\":\"" DRV
                         "\",\"nodeName\":\"node-1\",\"pool\":{\"name\":\"node-1\",\"generation\":1,"
                         "\"resourceSliceCount\":1}}}");

        assert_int_equal(slice_rec_from_json(j, &w->slices[w->n_slices++]), 0);
        cJSON_Delete(j);
}

static enum rollout_step step(struct world *w, char *msg, size_t size) {
        struct rollout_node_input in = {
                .node = w->node,
                .driver = DRV,
                .ds_uid = DS_UID,
                .target = NEW,
                .pods = (const struct pod_rec *const *)w->pods,
                .n_pods = w->n_pods,
                .claims = (const struct claim_rec *const *)w->claims,
                .n_claims = w->n_claims,
                .slices = (const struct slice_rec *const *)w->slices,
                .n_slices = w->n_slices,
        };

        return rollout_node_step(&in, msg, size);
}

static void clear_pods(struct world *w) {
        for (size_t i = 0; i < w->n_pods; i++)
                pod_rec_free(w->pods[i]);
        w->n_pods = 0;
}

#define RECORD       "\"drainer.io/rollout." DRV "\":\"" NEW "\""
#define STATE(phase) "\"drainer.io/state." DRV "\":\"" phase "\""

/* A whole node's rollout, in order; every step's decision comes from what the Node
 * and the cluster show, so the same world after a SIGKILL gives the same step. */
static void test_node_sequence(void **state) {
        struct world w = {};
        char msg[1024];

        add_slice(&w);
        /* Before: the old plugin, one claim of the driver on the node. */
        set_node(&w, "");
        add_driver_pod(&w, "plugin-old", DS_UID, OLD, true, false);
        add_claim(&w, DRV);
        assert_int_equal(step(&w, msg, sizeof(msg)), ROLLOUT_STEP_DRAIN);
        assert_non_null(strstr(msg, "to revision " NEW));

        /* The record is written first, then the engine's driver drain runs (or resumes). */
        set_node(&w, RECORD);
        assert_int_equal(step(&w, msg, sizeof(msg)), ROLLOUT_STEP_DRAIN);
        for (const char *const *p = (const char *const[]){ "cordon", "evict-claim-holders", "evict-rest",
                                                           "wait-released", "stop-drivers", NULL };
             *p; p++) {
                _cleanup_free_ char *a = test_asprintf(RECORD ",\"drainer.io/state." DRV "\":\"%s\"", *p);

                set_node(&w, a);
                assert_int_equal(step(&w, msg, sizeof(msg)), ROLLOUT_STEP_DRAIN);
        }

        /* Drained by the state, but a claim of the driver is still on the node: the
         * driver is not touched. */
        set_node(&w, RECORD "," STATE("drained"));
        assert_int_equal(step(&w, msg, sizeof(msg)), ROLLOUT_STEP_DRAIN);
        assert_non_null(strstr(msg, "1 claim of driver " DRV
                                    " still on the node: the driver stays until it is released"));

        /* Nor does a PodGroup's claim of the driver that no pod of the node uses: the
         * kubelet unprepared it here, though it stays allocated for the group. */
        claim_rec_free(w.claims[0]);
        {
                cJSON *j = parse("{\"metadata\":{\"namespace\":\"demo\",\"name\":\"g\",\"uid\":\"gu\"},"
                                 "\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"r\","
                                 "\"driver\":\"" DRV "\",\"pool\":\"node-1\",\"device\":\"gpu-0\"}]}},"
                                 "\"reservedFor\":[{\"apiGroup\":\"scheduling.k8s.io\",\"resource\":"
                                 "\"podgroups\",\"name\":\"gang\",\"uid\":\"pg\"}]}}");

                assert_int_equal(claim_rec_from_json(j, &w.claims[0]), 0);
                cJSON_Delete(j);
        }
        assert_int_equal(step(&w, msg, sizeof(msg)), ROLLOUT_STEP_REPLACE);

        /* Nor a claim whose device of the driver skips NodeUnprepareResources. */
        claim_rec_free(w.claims[0]);
        {
                cJSON *j = parse("{\"metadata\":{\"namespace\":\"demo\",\"name\":\"s\",\"uid\":\"su\"},"
                                 "\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"r\","
                                 "\"driver\":\"" DRV "\",\"pool\":\"node-1\",\"device\":\"gpu-0\","
                                 "\"skipNodeOperations\":[\"NodeUnprepareResources\"]}]}}}}");

                assert_int_equal(claim_rec_from_json(j, &w.claims[0]), 0);
                cJSON_Delete(j);
        }
        assert_int_equal(step(&w, msg, sizeof(msg)), ROLLOUT_STEP_REPLACE);

        /* A claim of another driver does not hold it. */
        claim_rec_free(w.claims[0]);
        w.n_claims = 0;
        add_claim(&w, "net.example.com");
        assert_int_equal(step(&w, msg, sizeof(msg)), ROLLOUT_STEP_REPLACE);
        assert_non_null(strstr(msg, "replacing driver pod dra-system/plugin-old (revision " OLD ")"));

        /* The eviction was accepted: the old pod terminates. */
        clear_pods(&w);
        add_driver_pod(&w, "plugin-old", DS_UID, OLD, true, true);
        assert_int_equal(step(&w, msg, sizeof(msg)), ROLLOUT_STEP_WAIT);
        assert_non_null(strstr(msg, "old driver pod to stop"));

        /* The old pod is gone, the DaemonSet created the new revision's; not Ready yet. */
        clear_pods(&w);
        add_driver_pod(&w, "plugin-new", DS_UID, NEW, false, false);
        assert_int_equal(step(&w, msg, sizeof(msg)), ROLLOUT_STEP_WAIT);
        assert_non_null(strstr(msg, "revision " NEW " to be Ready"));

        /* Ready: the restore (health, slices, rules deleted) is the engine's. */
        clear_pods(&w);
        add_driver_pod(&w, "plugin-new", DS_UID, NEW, true, false);
        assert_int_equal(step(&w, msg, sizeof(msg)), ROLLOUT_STEP_RESTORE);
        set_node(&w, RECORD "," STATE("restore-drivers"));
        assert_int_equal(step(&w, msg, sizeof(msg)), ROLLOUT_STEP_RESTORE);
        set_node(&w, RECORD "," STATE("uncordon"));
        assert_int_equal(step(&w, msg, sizeof(msg)), ROLLOUT_STEP_RESTORE);

        /* The restore's last patch removed every key of the driver, the record too. */
        set_node(&w, "");
        assert_int_equal(step(&w, msg, sizeof(msg)), ROLLOUT_STEP_DONE);
        /* Had only the record been left: it is cleared. */
        set_node(&w, RECORD);
        assert_int_equal(step(&w, msg, sizeof(msg)), ROLLOUT_STEP_CLEAR);
        world_done(&w);
}

/* A restore whose new driver never gets Ready stays in its step: the verb's
 * --timeout then ends the rollout with the node out of service. */
static void test_new_driver_unhealthy(void **state) {
        struct world w = {};
        char msg[1024];

        set_node(&w, RECORD "," STATE("drained"));
        add_driver_pod(&w, "plugin-new", DS_UID, NEW, false, false);
        for (int i = 0; i < 3; i++)
                assert_int_equal(step(&w, msg, sizeof(msg)), ROLLOUT_STEP_WAIT);
        /* No pod at all yet (the DaemonSet controller has not created it). */
        clear_pods(&w);
        assert_int_equal(step(&w, msg, sizeof(msg)), ROLLOUT_STEP_WAIT);
        world_done(&w);
}

/* --timeout counts from the node's start with its slot: an hour spent waiting for a slot
 * (started 0) is no timeout, and from the start it is the whole --timeout. */
static void test_timeout_from_slot(void **state) {
        const uint64_t min = 60 * USEC_PER_SEC;

        assert_false(rollout_timed_out(0, 60 * min, 10 * min));
        assert_false(rollout_timed_out(60 * min, 60 * min, 10 * min));
        assert_false(rollout_timed_out(60 * min, 70 * min - 1, 10 * min));
        assert_true(rollout_timed_out(60 * min, 70 * min, 10 * min));
        assert_false(rollout_timed_out(60 * min, 59 * min, 10 * min)); /* never before it started */
}

/* A node that failed keeps its slot only while something of it is out of service. */
static void test_failed_keeps_slot(void **state) {
        struct world w = {};

        assert_true(rollout_failed_keeps_slot(NULL, DRV));
        set_node(&w, RECORD);
        assert_false(rollout_failed_keeps_slot(w.node, DRV)); /* recorded, nothing drained yet */
        world_done(&w);
        w = (struct world){};
        set_node(&w, RECORD "," STATE("evict-claim-holders"));
        assert_true(rollout_failed_keeps_slot(w.node, DRV));
        world_done(&w);
        w = (struct world){};
        set_node(&w, "\"drainer.io/state\":\"cordon\"");
        assert_true(rollout_failed_keeps_slot(w.node, DRV));
        world_done(&w);
        w = (struct world){};
        set_node(&w, "\"drainer.io/state.other.example.com\":\"drained\"");
        assert_false(rollout_failed_keeps_slot(w.node, DRV));
        world_done(&w);
}

static void test_skip_and_foreign(void **state) {
        struct world w = {};
        char msg[1024];

        /* Already on the new revision, nothing recorded: skipped. */
        set_node(&w, "");
        add_driver_pod(&w, "plugin-new", DS_UID, NEW, true, false);
        assert_int_equal(step(&w, msg, sizeof(msg)), ROLLOUT_STEP_DONE);
        assert_non_null(strstr(msg, "runs revision " NEW));

        /* Another DaemonSet's pod of an old hash on the node is not ours. */
        add_driver_pod(&w, "other", "other-uid", OLD, true, false);
        assert_int_equal(step(&w, msg, sizeof(msg)), ROLLOUT_STEP_DONE);

        /* Someone's driver drain (no rollout record): never taken over. */
        clear_pods(&w);
        add_driver_pod(&w, "plugin-old", DS_UID, OLD, true, false);
        set_node(&w, STATE("drained"));
        assert_int_equal(step(&w, msg, sizeof(msg)), ROLLOUT_STEP_FOREIGN);
        assert_non_null(strstr(msg, "by another drain"));

        /* A node drain in progress: refused too. */
        set_node(&w, "\"drainer.io/state\":\"drained\"");
        assert_int_equal(step(&w, msg, sizeof(msg)), ROLLOUT_STEP_FOREIGN);
        assert_non_null(strstr(msg, "is being drained"));
        world_done(&w);
}

static void test_record_patch(void **state) {
        _cleanup_free_ char *set = NULL, *del = NULL;
        char key[128];

        assert_string_equal(rollout_record_key(DRV, key, sizeof(key)), "drainer.io/rollout." DRV);
        assert_int_equal(rollout_patch_record(DRV, NEW, &set), 0);
        assert_string_equal(set,
                            "{\"metadata\":{\"annotations\":{\"drainer.io/rollout." DRV "\":\"" NEW "\"}}}");
        assert_int_equal(rollout_patch_record(DRV, NULL, &del), 0);
        assert_string_equal(del, "{\"metadata\":{\"annotations\":{\"drainer.io/rollout." DRV "\":null}}}");
        for (int s = 0; s < _ROLLOUT_STEP_MAX; s++)
                assert_non_null(rollout_step_to_string(s));
        assert_null(rollout_step_to_string(_ROLLOUT_STEP_MAX));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_preflight),         cmocka_unit_test(test_update_revision),
                cmocka_unit_test(test_node_sequence),     cmocka_unit_test(test_new_driver_unhealthy),
                cmocka_unit_test(test_skip_and_foreign),  cmocka_unit_test(test_record_patch),
                cmocka_unit_test(test_timeout_from_slot), cmocka_unit_test(test_failed_keeps_slot),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
