/* Unit tests for the announcer: which notice of the engine becomes which Event on the
 * Node (reason, type, message, instance), the stages' wording, nothing without a
 * Node, the count of Events in flight, and a free before they are answered. */
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
#include "drainer/ctl/announcer.h"
#include "drainer/kube/events.h"
#include "drainer/kube/objects.h"
#include "fakes/test-env.h"

#define EVENTS "/api/v1/namespaces/default/events"

struct env {
        struct test_api *api;
        struct announcer *a;
        struct node_rec *node;
};

static int setup(void **state) {
        struct env *e = calloc(1, sizeof(*e));
        _cleanup_(cJSON_Deletep) cJSON *j = test_fixture_json("api/node.json");

        assert_non_null(e);
        e->api = test_api_new(NULL);
        assert_int_equal(announcer_new(e->api->client, e->api->ts, "host-a", &e->a), 0);
        assert_int_equal(node_rec_from_json(j, &e->node), 0);
        *state = e;
        return 0;
}

static int teardown(void **state) {
        struct env *e = *state;

        assert_true(announcer_idle(e->a));
        announcer_free(e->a);
        test_api_free(e->api);
        node_rec_free(e->node);
        free(e);
        return 0;
}

static void notice(struct env *e, enum engine_notice_kind kind, enum drain_phase phase,
                   const char *message) {
        announcer_notice(e->a, &(const struct engine_notice){ kind, e->node, phase, message });
}

/* The i-th request's body, parsed; it must be an Event POSTed to "default". */
static cJSON *event(struct env *e, size_t i) {
        const struct fake_request *r = fake_transport_request(e->api->ft, i);
        cJSON *j;

        assert_non_null(r);
        assert_string_equal(r->method, "POST");
        assert_string_equal(r->path, EVENTS);
        j = cJSON_Parse(r->body);
        assert_non_null(j);
        assert_string_equal(json_str(j, "involvedObject.kind"), "Node");
        assert_string_equal(json_str(j, "involvedObject.name"), "node-1");
        assert_string_equal(json_str(j, "involvedObject.uid"), "f6666666-7777-4888-8999-000000000000");
        assert_string_equal(json_str(j, "source.host"), "host-a");
        assert_string_equal(json_str(j, "reportingInstance"), "host-a");
        return j;
}

/* Until the transport has answered everything and the client has handed it back. */
static void deliver(struct env *e) {
        for (int i = 0; i < 1000 && (fake_transport_in_flight(e->api->ft) > 0 ||
                                     kube_client_calls_in_flight(e->api->client) > 0);
             i++) {
                fake_transport_deliver(e->api->ft);
                fake_clock_advance(e->api->clock, USEC_PER_MSEC);
        }
}

/* Every kind, in order: DESIGN.md's reasons and the types `kubectl get events` shows. */
static void test_every_kind(void **state) {
        struct env *e = *state;
        static const struct {
                enum engine_notice_kind kind;
                enum drain_phase phase;
                const char *message;
                const char *type, *reason, *text;
        } cases[] = {
                { ENGINE_NOTICE_WAITING, DRAIN_PHASE_WAITING, "2 nodes ahead", EVENT_TYPE_NORMAL,
                  EVENT_REASON_PHASE, "waiting for a drain slot: 2 nodes ahead" },
                { ENGINE_NOTICE_DRAIN, DRAIN_PHASE_CORDON, "cordoning", EVENT_TYPE_NORMAL,
                  EVENT_REASON_PHASE, "drain started: cordoning" },
                /* no drainer.io/message: the phase's name */
                { ENGINE_NOTICE_RESTORE, DRAIN_PHASE_RESTORE_DRIVERS, NULL, EVENT_TYPE_NORMAL,
                  EVENT_REASON_PHASE, "restore started: restore-drivers" },
                { ENGINE_NOTICE_NOT_READY, DRAIN_PHASE_WAIT_RELEASED, "node-1 is not Ready",
                  EVENT_TYPE_WARNING, EVENT_REASON_NOT_READY, "node-1 is not Ready" },
                { ENGINE_NOTICE_READY, DRAIN_PHASE_WAIT_RELEASED, "Ready again", EVENT_TYPE_NORMAL,
                  EVENT_REASON_READY, "Ready again" },
                { ENGINE_NOTICE_OUT_OF_SERVICE, DRAIN_PHASE_WAIT_RELEASED, "applied the taint",
                  EVENT_TYPE_WARNING, EVENT_REASON_OUT_OF_SERVICE, "applied the taint" },
                { ENGINE_NOTICE_OUT_OF_SERVICE_REMOVED, DRAIN_PHASE_UNCORDON, "removing the taint",
                  EVENT_TYPE_NORMAL, EVENT_REASON_OUT_OF_SERVICE, "removing the taint" },
                { ENGINE_NOTICE_FOREIGN_RULE, DRAIN_PHASE_UNCORDON, "DeviceTaintRule x: left alone",
                  EVENT_TYPE_WARNING, EVENT_REASON_FOREIGN, "DeviceTaintRule x: left alone" },
                { ENGINE_NOTICE_DONE, DRAIN_PHASE_DRAINED, "node-1 drained", EVENT_TYPE_NORMAL,
                  EVENT_REASON_DONE, "node-1 drained" },
                { ENGINE_NOTICE_REFUSED, DRAIN_PHASE_PREFLIGHT, "refused: 1 blocker", EVENT_TYPE_WARNING,
                  EVENT_REASON_BLOCKED, "refused: 1 blocker" },
                { ENGINE_NOTICE_FAILED, DRAIN_PHASE_WAIT_RELEASED, "timed out", EVENT_TYPE_WARNING,
                  EVENT_REASON_FAILED, "timed out" },
        };
        size_t n = sizeof(cases) / sizeof(cases[0]);

        assert_int_equal(n, _ENGINE_NOTICE_KIND_MAX);
        fake_transport_expect(e->api->ft, "POST", EVENTS,
                              &(struct fake_reply){ .status = 201, .body = "{}", .times = FAKE_FOREVER });
        for (size_t i = 0; i < n; i++)
                notice(e, cases[i].kind, cases[i].phase, cases[i].message);
        assert_false(announcer_idle(e->a));
        deliver(e);
        assert_true(announcer_idle(e->a));
        assert_int_equal(fake_transport_n_requests(e->api->ft), n);
        for (size_t i = 0; i < n; i++) {
                _cleanup_(cJSON_Deletep) cJSON *j = event(e, i);

                assert_string_equal(json_str(j, "type"), cases[i].type);
                assert_string_equal(json_str(j, "reason"), cases[i].reason);
                assert_string_equal(json_str(j, "message"), cases[i].text);
        }
}

/* Who asked: named in the Events of a start and a wait, made one line and cut short
 * (it may be an annotation anyone who may patch the Node wrote), never in the others;
 * nobody named (NULL, ""): as announcer_notice. */
static void test_asked_by(void **state) {
        struct env *e = *state;
        char long_asker[400];
        static const struct {
                enum engine_notice_kind kind;
                const char *by, *text;
        } cases[] = {
                { ENGINE_NOTICE_DRAIN, "Cluster API: Machine capi/m-2 is being deleted",
                  "drain started (asked by Cluster API: Machine capi/m-2 is being deleted): cordoning" },
                { ENGINE_NOTICE_WAITING, "ticket\n42\x1b[31m",
                  "waiting for a drain slot (asked by ticket?42?[31m): cordoning" },
                { ENGINE_NOTICE_DONE, "ticket 42", "cordoning" },
                { ENGINE_NOTICE_DRAIN, "", "drain started: cordoning" },
                { ENGINE_NOTICE_DRAIN, NULL, "drain started: cordoning" },
        };
        size_t n = sizeof(cases) / sizeof(cases[0]);
        _cleanup_(cJSON_Deletep) cJSON *j = NULL;

        fake_transport_expect(e->api->ft, "POST", EVENTS,
                              &(struct fake_reply){ .status = 201, .body = "{}", .times = FAKE_FOREVER });
        for (size_t i = 0; i < n; i++)
                announcer_notice_asked(e->a,
                                       &(const struct engine_notice){ cases[i].kind, e->node,
                                                                      DRAIN_PHASE_CORDON, "cordoning" },
                                       cases[i].by);
        memset(long_asker, 'x', sizeof(long_asker) - 1);
        long_asker[sizeof(long_asker) - 1] = 0;
        announcer_notice_asked(e->a,
                               &(const struct engine_notice){ ENGINE_NOTICE_DRAIN, e->node,
                                                              DRAIN_PHASE_CORDON, "cordoning" },
                               long_asker);
        deliver(e);
        assert_int_equal(fake_transport_n_requests(e->api->ft), n + 1);
        for (size_t i = 0; i < n; i++) {
                _cleanup_(cJSON_Deletep) cJSON *c = event(e, i);

                assert_string_equal(json_str(c, "message"), cases[i].text);
        }
        j = event(e, n);
        /* "drain started (asked by " + 200 bytes + "): cordoning" */
        assert_int_equal(strlen(json_str(j, "message")),
                         strlen("drain started (asked by ") + 200 + strlen("): cordoning"));
}

/* No Node seen: nothing to say it about. An unknown kind: nothing either. */
static void test_nothing_without_node(void **state) {
        struct env *e = *state;

        announcer_notice(e->a, &(const struct engine_notice){ ENGINE_NOTICE_DONE, NULL, DRAIN_PHASE_DRAINED,
                                                              "drained" });
        announcer_notice(e->a, &(const struct engine_notice){ _ENGINE_NOTICE_KIND_MAX, e->node,
                                                              DRAIN_PHASE_DRAINED, "drained" });
        assert_true(announcer_idle(e->a));
        assert_int_equal(fake_transport_n_requests(e->api->ft), 0);
}

/* A refused or failed POST is best effort: counted down, nothing else. */
static void test_failure_ignored(void **state) {
        struct env *e = *state;

        fake_transport_expect_json(e->api->ft, "POST", EVENTS, 403,
                                   "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Forbidden\","
                                   "\"code\":403}");
        notice(e, ENGINE_NOTICE_DONE, DRAIN_PHASE_DRAINED, "drained");
        assert_false(announcer_idle(e->a));
        deliver(e);
        assert_true(announcer_idle(e->a));
        assert_int_equal(fake_transport_n_requests(e->api->ft), 1);
}

/* Freed with an Event in flight (an error path that did not wait): it goes with the
 * answer, which changes nothing (ASan would see a use after free). No instance: no
 * source.host. */
static void test_free_in_flight(void **state) {
        struct env *e = *state;
        struct announcer *a;
        const struct fake_request *r;
        _cleanup_(cJSON_Deletep) cJSON *j = NULL;

        assert_int_equal(announcer_new(e->api->client, e->api->ts, NULL, &a), 0);
        fake_transport_expect(e->api->ft, "POST", EVENTS,
                              &(struct fake_reply){ .status = 201, .body = "{}", .delay_usec = 10 });
        announcer_notice(a, &(const struct engine_notice){ ENGINE_NOTICE_FAILED, e->node,
                                                           DRAIN_PHASE_WAIT_RELEASED, "gave up" });
        assert_false(announcer_idle(a));
        announcer_free(a);
        fake_clock_advance(e->api->clock, 10);
        deliver(e);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 1);
        r = fake_transport_request(e->api->ft, 0);
        j = cJSON_Parse(r->body);
        assert_non_null(j);
        assert_string_equal(json_str(j, "reason"), EVENT_REASON_FAILED);
        assert_null(json_path(j, "source.host"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_every_kind, setup, teardown),
                cmocka_unit_test_setup_teardown(test_asked_by, setup, teardown),
                cmocka_unit_test_setup_teardown(test_nothing_without_node, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failure_ignored, setup, teardown),
                cmocka_unit_test_setup_teardown(test_free_in_flight, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
