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

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_classes),
                cmocka_unit_test(test_wait_reasons),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
