/* fleetview: each node's drainer.io/ annotations sorted into what `drainer status
 * --all` counts, and why a waiting node waits (the manager's own messages). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "drainer/ctl/fleetview.h"
#include "drainer/kube/objects.h"

struct verdict {
        enum fleet_class c;
        const char *reason;
};

static struct verdict classify(const char *annotations) {
        char json[2048];
        cJSON *j;
        struct node_rec *n = NULL;
        struct drain_state st = {};
        char *err = NULL;
        struct verdict v;
        bool parsed;

        snprintf(json, sizeof(json),
                 "{\"metadata\":{\"name\":\"n\",\"resourceVersion\":\"1\",\"annotations\":{%s}}}",
                 annotations);
        j = cJSON_Parse(json);
        assert_non_null(j);
        assert_int_equal(node_rec_from_json(j, &n), 0);
        parsed = drain_state_parse(n, &st, &err) >= 0;
        v.c = fleet_classify(parsed ? &st : NULL);
        v.reason = fleet_reason(v.c, parsed ? &st : NULL);
        drain_state_done(&st);
        free(err);
        node_rec_free(n);
        cJSON_Delete(j);
        return v;
}

#define CHECK(ann, cls, why)                                               \
        do {                                                               \
                struct verdict v_ = classify(ann);                         \
                assert_string_equal(fleet_class_names[v_.c], cls);         \
                if (why)                                                   \
                        assert_string_equal(v_.reason, (const char *)why); \
                else                                                       \
                        assert_null(v_.reason);                            \
        } while (0)

#define W(msg)                                                                                            \
        "\"drainer.io/request\":\"drain\",\"drainer.io/state\":\"waiting\",\"drainer.io/message\":\"" msg \
        "\""

static void test_classes(void **state) {
        CHECK("", "in-service", NULL);
        CHECK("\"drainer.io/request\":\"drain\"", "requested", NULL);
        CHECK("\"drainer.io/request\":\"drain\",\"drainer.io/state\":\"evict-rest\"", "draining", NULL);
        CHECK("\"drainer.io/request\":\"drain\",\"drainer.io/state\":\"drained\"", "drained", NULL);
        CHECK("\"drainer.io/request\":\"uncordon\",\"drainer.io/state\":\"drained\"", "restoring", NULL);
        CHECK("\"drainer.io/request\":\"uncordon\",\"drainer.io/state\":\"uncordon\"", "restoring", NULL);
        CHECK("\"drainer.io/request\":\"drain\",\"drainer.io/state\":\"preflight\","
              "\"drainer.io/message\":\"refused by preflight (1 blocker, nothing was changed)\"",
              "failed", "refusal");
        CHECK("\"drainer.io/request\":\"drain\",\"drainer.io/state\":\"no-such-phase\"", "failed",
              "bad-state");
}

static void test_wait_reasons(void **state) {
        CHECK(W("waiting for a drain slot (--max-parallel 10%) since 2026-01-01T00:00:00Z; slots go in "
                "request order"),
              "waiting", "slot");
        CHECK(W("waiting for the maintenance window (next opens 2026-01-01T22:00:00Z)"), "waiting",
              "window");
        CHECK(W("waiting: drains are paused (drainer.io/pause=true on namespace drainer-system); drains in "
                "flight finish, new ones start once it is removed"),
              "waiting", "pause");
        CHECK(W("waiting: cannot read namespace drainer-system for drainer.io/pause (Permission denied)"),
              "waiting", "pause");
        CHECK(W("cannot take a drain slot: namespace x not found"), "waiting", "slot");
        CHECK(W("waiting: cannot count the cluster's Nodes for --max-parallel 10% (Permission denied), "
                "retrying"),
              "waiting", "error");
}

static struct node_rec *node(const char *name, const char *annotations) {
        char json[2048];
        struct node_rec *n = NULL;
        cJSON *j;

        snprintf(json, sizeof(json),
                 "{\"metadata\":{\"name\":\"%s\",\"resourceVersion\":\"1\",\"annotations\":{%s}}}", name,
                 annotations);
        j = cJSON_Parse(json);
        assert_non_null(j);
        assert_int_equal(node_rec_from_json(j, &n), 0);
        cJSON_Delete(j);
        return n;
}

/* The rows status --all lists: sorted by name, counted per class, each with its phase,
 * since, reason and message (a bad state's parse error as its message). */
static void test_rows(void **state) {
        struct node_rec *n[4] = {
                node("n-c", W("waiting for the maintenance window (next opens 2026-01-01T22:00:00Z)")),
                node("n-a", ""),
                node("n-d", "\"drainer.io/request\":\"drain\",\"drainer.io/state\":\"no-such-phase\""),
                node("n-b", "\"drainer.io/request\":\"drain\",\"drainer.io/state\":\"evict-rest\","
                            "\"drainer.io/state-since\":\"2026-01-01T00:00:00Z\""),
        };
        const struct node_rec *recs[4] = { n[0], n[1], n[2], n[3] };
        size_t counts[_FLEET_CLASS_MAX] = { 99 };
        struct fleet_row *rows = NULL;

        assert_int_equal(fleet_rows_build(recs, 4, &rows, counts), 0);
        assert_string_equal(rows[0].name, "n-a");
        assert_int_equal(rows[0].c, FLEET_IN_SERVICE);
        assert_null(rows[0].message);
        assert_false(rows[0].has_phase);
        assert_string_equal(rows[1].name, "n-b");
        assert_int_equal(rows[1].c, FLEET_DRAINING);
        assert_true(rows[1].has_phase);
        assert_string_equal(drain_phase_to_string(rows[1].phase), "evict-rest");
        assert_int_equal(rows[1].since_usec, 1767225600LL * 1000000);
        assert_string_equal(rows[2].name, "n-c");
        assert_int_equal(rows[2].c, FLEET_WAITING);
        assert_string_equal(rows[2].reason, "window");
        assert_non_null(strstr(rows[2].message, "maintenance window"));
        assert_string_equal(rows[3].name, "n-d");
        assert_int_equal(rows[3].c, FLEET_FAILED);
        assert_string_equal(rows[3].reason, "bad-state");
        assert_non_null(rows[3].message); /* why it did not parse */
        assert_int_equal(counts[FLEET_IN_SERVICE], 1);
        assert_int_equal(counts[FLEET_DRAINING], 1);
        assert_int_equal(counts[FLEET_WAITING], 1);
        assert_int_equal(counts[FLEET_FAILED], 1);
        assert_int_equal(counts[FLEET_DRAINED], 0);
        assert_null(fleet_rows_free(rows, 4));

        assert_int_equal(fleet_rows_build(recs, 0, &rows, counts), 0);
        assert_int_equal(counts[FLEET_IN_SERVICE], 0);
        fleet_rows_free(rows, 0);
        for (size_t i = 0; i < 4; i++)
                node_rec_free(n[i]);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_classes),
                cmocka_unit_test(test_wait_reasons),
                cmocka_unit_test(test_rows),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
