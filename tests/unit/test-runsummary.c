/* runsummary: the -o json summary of a fleet run (ctl/runsummary.c) from the fleet's
 * record. Covered: a drain that ended (phases with their times, the Node as read, the
 * --driver scope and its isolation, the seconds since the first start); an interrupt
 * before anything changed and one mid-drain (the message and the phase from the last
 * progress); a refusal in preflight (every blocker) and in a later phase (only those
 * that hold at every eviction); a Node never read (nodeReady null, not true); an item of
 * a list (no schemaVersion); the caller's message, error kind and rerun. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "drainer/base/json.h"
#include "drainer/base/macro.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/runsummary.h"

static const struct drain_profile node_profile = { .grace = -1 };
static const struct drain_profile gpu_profile = { .grace = -1,
                                                  .drivers = { "gpu.example.com" },
                                                  .n_drivers = 1 };

static struct fleet_node run_of(const struct drain_profile *p) {
        return (struct fleet_node){
                .node = "node-1",
                .profile = p,
                .goal = ENGINE_GOAL_DRAIN,
                .started = true,
                .command_status = -1,
                .started_usec = 10 * USEC_PER_SEC,
        };
}

static cJSON *summary(const struct fleet_node *n, int result, bool in_list) {
        cJSON *j = fleet_node_summary_json(n, &(const struct run_summary_options){
                                                      .verb = "drain",
                                                      .result = result,
                                                      .error = result < 0 ? "kind" : NULL,
                                                      .now_usec = 12500 * USEC_PER_MSEC,
                                                      .in_list = in_list,
                                              });

        assert_non_null(j);
        return j;
}

static const char *str(const cJSON *j, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);

        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double num(const cJSON *j, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);

        assert_true(cJSON_IsNumber(v));
        return v->valuedouble;
}

static void test_done(void **state) {
        struct fleet_node n = run_of(&gpu_profile);
        _cleanup_(cJSON_Deletep) cJSON *j = NULL;
        const cJSON *phases, *scope;

        n.summary_valid = true;
        n.summary.node_seen = true;
        n.summary.out_of_service = true;
        n.summary.out_of_service_by_drainer = true;
        n.summary.has_phase = true;
        n.summary.last_phase = DRAIN_PHASE_EVICT_CLAIM_HOLDERS;
        n.summary.isolation = PLAN_ISOLATE_TAINT_RULE;
        n.total.changed = true;
        n.total.phase_seen[DRAIN_PHASE_CORDON] = true;
        n.total.phase_usec[DRAIN_PHASE_CORDON] = 1500 * USEC_PER_MSEC;
        n.total.pods_evicted = 3;
        n.total.claims_waited = 2;
        n.message = "node node-1 drained";
        j = summary(&n, 0, false);
        assert_int_equal(num(j, "schemaVersion"), RUN_SUMMARY_SCHEMA_VERSION);
        assert_string_equal(str(j, "node"), "node-1");
        assert_string_equal(str(j, "verb"), "drain");
        assert_string_equal(str(j, "result"), "done");
        assert_null(cJSON_GetObjectItem(j, "error"));
        assert_string_equal(str(j, "message"), "node node-1 drained");
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "changed")));
        assert_string_equal(str(j, "phase"), drain_phase_to_string(DRAIN_PHASE_EVICT_CLAIM_HOLDERS));
        scope = cJSON_GetObjectItem(j, "scope");
        assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(scope, "drivers"), 0)->valuestring,
                            "gpu.example.com");
        assert_string_equal(str(scope, "isolation"), "deviceTaintRule");
        phases = cJSON_GetObjectItem(j, "phases");
        assert_int_equal(cJSON_GetArraySize(phases), 1);
        assert_string_equal(str(cJSON_GetArrayItem(phases, 0), "name"),
                            drain_phase_to_string(DRAIN_PHASE_CORDON));
        assert_true(num(cJSON_GetArrayItem(phases, 0), "seconds") == 1.5);
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "nodeReady")));
        assert_string_equal(str(j, "outOfServiceTaint"), "applied by drainer");
        assert_int_equal(num(j, "podsEvicted"), 3);
        assert_int_equal(num(j, "claimsWaitedFor"), 2);
        assert_null(cJSON_GetObjectItem(j, "commandExitStatus"));
        assert_true(num(j, "seconds") == 2.5);
}

static void test_interrupted(void **state) {
        struct fleet_node n = run_of(&node_profile);
        _cleanup_(cJSON_Deletep) cJSON *before = NULL, *mid = NULL;

        before = summary(&n, -EINTR, false);
        assert_string_equal(str(before, "result"), "interrupted");
        assert_null(cJSON_GetObjectItem(before, "error")); /* an interrupt is no failure kind */
        assert_string_equal(str(before, "message"), "interrupted before it changed anything on the node");
        assert_null(cJSON_GetObjectItem(before, "phase"));
        assert_true(cJSON_IsNull(cJSON_GetObjectItem(before, "nodeReady"))); /* never read */
        assert_null(cJSON_GetObjectItem(before, "scope"));

        n.total.changed = true;
        n.progress_seen = n.node_seen = n.has_phase = true;
        n.phase = DRAIN_PHASE_WAIT_RELEASED;
        n.node_not_ready = n.out_of_service = true;
        n.progress_message = "2 claims left";
        mid = summary(&n, -EINTR, false);
        assert_string_equal(
                str(mid, "message"),
                "interrupted in phase wait-released (2 claims left): the state is on node node-1; "
                "run the same command again to resume");
        assert_string_equal(str(mid, "phase"), "wait-released");
        assert_true(cJSON_IsFalse(cJSON_GetObjectItem(mid, "nodeReady")));
        assert_string_equal(str(mid, "outOfServiceTaint"), "on the node");
}

static void test_refused(void **state) {
        struct plan_blocker b[] = {
                { .kind = BLOCKER_UNMANAGED, .message = "no controller: ns/a" },
                { .kind = BLOCKER_DRIVER_UNHEALTHY, .message = "driver not Ready: dra/d" },
        };
        struct plan p = { .blockers = b, .n_blockers = ELEMENTSOF(b) };
        struct fleet_node n = run_of(&node_profile);
        _cleanup_(cJSON_Deletep) cJSON *pre = NULL, *later = NULL;
        const cJSON *bl;

        n.summary_valid = true;
        n.summary.plan = &p;
        n.summary.isolation = _PLAN_ISOLATION_MAX;
        pre = summary(&n, -EPERM, false);
        assert_string_equal(str(pre, "result"), "refused");
        assert_string_equal(str(pre, "error"), "kind");
        assert_true(cJSON_IsFalse(cJSON_GetObjectItem(pre, "changed")));
        bl = cJSON_GetObjectItem(pre, "blockers");
        assert_int_equal(cJSON_GetArraySize(bl), 2);

        /* in a later phase the drivers are stopped on purpose: only the rules that hold */
        n.summary.changed = n.total.changed = true;
        later = summary(&n, -EPERM, true);
        assert_null(cJSON_GetObjectItem(later, "schemaVersion"));
        bl = cJSON_GetObjectItem(later, "blockers");
        assert_int_equal(cJSON_GetArraySize(bl), 1);
        assert_string_equal(cJSON_GetArrayItem(bl, 0)->valuestring, "no controller: ns/a");
        assert_true(fleet_node_blocker_listed(&n, &b[0]));
        assert_false(fleet_node_blocker_listed(&n, &b[1]));
}

static void test_callers_part(void **state) {
        struct fleet_node n = run_of(&node_profile);
        _cleanup_(cJSON_Deletep) cJSON *j = NULL, *head = NULL;

        n.message = "the engine's";
        n.command_status = 3;
        j = fleet_node_summary_json(&n, &(const struct run_summary_options){
                                                .verb = "maintain",
                                                .result = -EHOSTDOWN,
                                                .error = "unreachable",
                                                .message = "timed out waiting for the API server",
                                                .rerun = "drainer uncordon node-1 --driver-stop none",
                                                .now_usec = n.started_usec,
                                        });
        assert_non_null(j);
        assert_string_equal(str(j, "result"), "error");
        assert_string_equal(str(j, "error"), "unreachable");
        assert_string_equal(str(j, "message"), "timed out waiting for the API server");
        assert_string_equal(str(j, "rerun"), "drainer uncordon node-1 --driver-stop none");
        assert_int_equal(num(j, "commandExitStatus"), 3);
        assert_true(num(j, "seconds") == 0);

        head = run_summary_new(true, NULL, "drain", "not-started");
        assert_non_null(head);
        assert_int_equal(cJSON_GetArraySize(head), 2);
        assert_string_equal(head->child->string, "verb");
}

/* The documents of what is not one run: a List, a seamless upgrade, a refusal before
 * anything ran, a failure before anything was read. */
static void test_documents(void **state) {
        cJSON *j;
        _cleanup_free_ char *s = NULL;

        j = run_summary_list_new("drain", "pool=a", 2, 4);
        s = cJSON_PrintUnformatted(j);
        assert_string_equal(s, "{\"schemaVersion\":1,\"kind\":\"List\",\"verb\":\"drain\",\"selector\":"
                               "\"pool=a\",\"maxParallel\":2,\"items\":[],\"exitCode\":4}");
        cJSON_Delete(j);
        free(s);
        j = run_summary_list_new("plan", NULL, 0, 0);
        s = cJSON_PrintUnformatted(j);
        assert_string_equal(s, "{\"schemaVersion\":1,\"kind\":\"List\",\"verb\":\"plan\",\"items\":[],"
                               "\"exitCode\":0}");
        cJSON_Delete(j);
        free(s);
        j = run_summary_seamless("n", "maintain", 3, "ns/ds", "why", 1);
        s = cJSON_PrintUnformatted(j);
        assert_string_equal(s,
                            "{\"seamlessUpgrade\":{\"seamless\":true,\"daemonset\":\"ns/ds\",\"reason\":"
                            "\"why\"},\"schemaVersion\":1,\"node\":\"n\",\"verb\":\"maintain\",\"result\":"
                            "\"error\",\"changed\":false,\"podsEvicted\":0,\"commandExitStatus\":3,"
                            "\"exitCode\":1}");
        cJSON_Delete(j);
        free(s);
        j = run_summary_refused("n", "drain", "gpu.example.com", "no key", 4);
        s = cJSON_PrintUnformatted(j);
        assert_string_equal(s, "{\"schemaVersion\":1,\"node\":\"n\",\"verb\":\"drain\",\"driver\":"
                               "\"gpu.example.com\",\"result\":\"refused\",\"changed\":false,\"message\":"
                               "\"no key\",\"exitCode\":4}");
        cJSON_Delete(j);
        free(s);
        j = run_summary_error("status", NULL, 7, "api-unreachable", "");
        s = cJSON_PrintUnformatted(j);
        assert_string_equal(s, "{\"schemaVersion\":1,\"verb\":\"status\",\"result\":\"error\",\"error\":"
                               "\"api-unreachable\",\"message\":\"failed\",\"exitCode\":7}");
        cJSON_Delete(j);
        free(s);
        s = NULL;
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_done),      cmocka_unit_test(test_interrupted),
                cmocka_unit_test(test_refused),   cmocka_unit_test(test_callers_part),
                cmocka_unit_test(test_documents),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
