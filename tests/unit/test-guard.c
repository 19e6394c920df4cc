/* The guard controller (ctl/guard.c) over the real client and node view, a fake
 * clock and a scripted fake transport, never sleeping: a node that is not being
 * drained lets the driver go at once, after reading only the Node; on a draining
 * node the run holds while a claim and its holder are on the node, says what holds
 * it, lets go once they are gone, and gives up at its deadline with counts only;
 * uncordoning lets go; an unknown node, a forbidden list and an early stop fail;
 * on_done comes from the loop, never from inside a call; runs share a view. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/timesrc.h"
#include "drainer/ctl/guard.h"
#include "drainer/dra/nodeview.h"
#include "fakes/fake-apiserver.h"
#include "fakes/fake-clock.h"
#include "fakes/fake-transport.h"
#include "fakes/test-env.h"

#define MS  USEC_PER_MSEC
#define SEC USEC_PER_SEC

#define NODES  FAKE_API_NODES
#define PODS   FAKE_API_PODS
#define CLAIMS FAKE_API_CLAIMS
#define SLICES FAKE_API_SLICES

struct run_log {
        unsigned done, closed, notes;
        enum guard_outcome outcome;
        char result[512];
        char last_note[1024];
        char all_notes[8192];
};

struct env {
        struct test_api *api;
        struct fake_clock *clock; /* borrowed from api */
        struct fake_transport *ft;
        struct guard_config cfg;
};

static int setup(void **state) {
        struct env *e = calloc(1, sizeof(*e));

        assert_non_null(e);
        e->api = test_api_new(&(struct test_api_options){ .user_yaml = "    token: guard-token\n" });
        e->clock = e->api->clock;
        e->ft = e->api->ft;
        e->cfg = (struct guard_config){ .node = "node-1", .grace_seconds = -1 };
        *state = e;
        return 0;
}

static int teardown(void **state) {
        struct env *e = *state;

        test_api_free(e->api);
        free(e);
        return 0;
}

/* usec of fake time in steps of 1 ms, the transport delivering in between. */
static void run(struct env *e, uint64_t usec) {
        for (uint64_t t = 0; t < usec; t += MS) {
                fake_transport_deliver(e->ft);
                fake_clock_advance(e->clock, MS);
        }
        fake_transport_deliver(e->ft);
}

static void on_note(struct guard_run *g, enum log_level level, const char *line, void *userdata) {
        struct run_log *l = userdata;
        size_t len = strlen(l->all_notes);

        l->notes++;
        snprintf(l->last_note, sizeof(l->last_note), "%s", line);
        snprintf(l->all_notes + len, sizeof(l->all_notes) - len, "%s\n", line);
}

static void on_done(struct guard_run *g, enum guard_outcome outcome, const char *result, void *userdata) {
        struct run_log *l = userdata;

        l->done++;
        l->outcome = outcome;
        snprintf(l->result, sizeof(l->result), "%s", result);
}

static const struct guard_handlers handlers = { .on_note = on_note, .on_done = on_done };

static void on_closed(void *userdata) {
        ((struct run_log *)userdata)->closed++;
}

/* Stops the run: closed comes from the loop, never from inside; then frees it. */
static void stop_run(struct env *e, struct guard_run *g, struct run_log *l) {
        guard_run_stop(g, on_closed, l);
        assert_int_equal(l->closed, 0);
        run(e, 50 * MS);
        assert_int_equal(l->closed, 1);
        guard_run_free(g);
}

/* node-1, cordoned or not, at resourceVersion rv (malloc'd). */
static char *node_json_taints(bool cordoned, unsigned rv, const char *taints) {
        return test_asprintf("{\"metadata\":{\"name\":\"node-1\",\"uid\":\"" FAKE_API_NODE_UID
                             "\",\"resourceVersion\":\"%u\"},\"spec\":{\"unschedulable\":%s%s%s},"
                             "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
                             rv, cordoned ? "true" : "false", taints ? ",\"taints\":" : "",
                             taints ? taints : "");
}

static char *node_json(bool cordoned, unsigned rv) {
        return node_json_taints(cordoned, rv, NULL);
}

static void expect_node(struct env *e, bool cordoned) {
        fake_api_expect_list_and_watch(
                e->ft, NODES, NODES "&limit=",
                fake_api_list_strv("NodeList", (char *[]){ node_json(cordoned, 90), NULL }));
}

/* A pod holding claim gpu-claim, and the claim allocated on node-1 and reserved for it. */
static char *holder_json(void) {
        return fake_api_pod(&(const struct fake_pod){
                .name = "holder",
                .spec = "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":\"gpu-claim\"}]",
                .ready = "True",
        });
}

static char *claim_json(void) {
        return fake_api_claim(&(const struct fake_claim){
                .name = "gpu-claim",
                .driver = "gpu.example.com",
                .allocated = true,
                .reserved_name = "holder",
                .reserved_uid = "uid-holder",
        });
}

static void expect_draining_parts(struct env *e, bool held) {
        fake_api_expect_list_and_watch(e->ft, PODS, PODS "&limit=",
                                       fake_api_list_strv("PodList", held ? (char *[]){ holder_json(), NULL }
                                                                          : (char *[]){ NULL }));
        fake_api_expect_list_and_watch(
                e->ft, CLAIMS, CLAIMS "?limit=",
                fake_api_list_strv("ResourceClaimList",
                                   held ? (char *[]){ claim_json(), NULL } : (char *[]){ NULL }));
        fake_api_expect_list_and_watch(e->ft, SLICES, SLICES "&limit=",
                                       fake_api_list_strv("ResourceSliceList", (char *[]){ NULL }));
}

static struct guard_run *start_run(struct env *e, struct run_log *l, struct node_view *shared) {
        struct guard_run *g;

        assert_int_equal(guard_run_new(e->api->client, e->api->ts, &e->cfg, &handlers, l, &g), 0);
        assert_int_equal(guard_run_start(g, shared), 0);
        assert_int_equal(l->done, 0);
        return g;
}

/* Not draining: released on the Node alone; pods, claims and slices never read. */
static void test_not_draining(void **state) {
        struct env *e = *state;
        struct run_log l = {};
        struct guard_run *g;

        expect_node(e, false);
        g = start_run(e, &l, NULL);
        test_assert_contains(l.all_notes,
                             "guarding the DRA driver on node \"node-1\" (gives up after 25 s)");
        run(e, 10 * MS);
        assert_int_equal(l.done, 1);
        assert_int_equal(l.outcome, GUARD_RELEASED);
        test_assert_contains(l.result, "is not being drained");
        assert_true(guard_run_finished(g));
        assert_int_equal(fake_transport_count(e->ft, "GET", PODS), 0);
        assert_int_equal(fake_transport_count(e->ft, "GET", CLAIMS), 0);
        stop_run(e, g, &l);
        assert_int_equal(l.done, 1);
}

/* A node tainted by Karpenter (not cordoned): draining, and the guard says whose. */
static void test_names_whose_drain(void **state) {
        struct env *e = *state;
        struct run_log l = {};
        struct guard_run *g;

        fake_api_expect_list_and_watch(
                e->ft, NODES, NODES "&limit=",
                fake_api_list_strv("NodeList",
                                   (char *[]){ node_json_taints(false, 90,
                                                                "[{\"key\":\"karpenter.sh/disrupted\","
                                                                "\"effect\":\"NoSchedule\"}]"),
                                               NULL }));
        expect_draining_parts(e, true);
        g = start_run(e, &l, NULL);
        run(e, 100 * MS);
        assert_int_equal(l.done, 0);
        test_assert_contains(
                l.all_notes,
                "node \"node-1\" is being drained (Karpenter: tainted karpenter.sh/disrupted:NoSchedule)");
        stop_run(e, g, &l);
}

/* Draining with a claim and its holder: holds, says what holds it, and lets go once
 * both are gone. */
static void test_holds_until_released(void **state) {
        struct env *e = *state;
        struct run_log l = {};
        struct guard_run *g;
        char *obj, *ev;

        expect_node(e, true);
        expect_draining_parts(e, true);
        g = start_run(e, &l, NULL);
        run(e, 100 * MS);
        assert_int_equal(l.done, 0);
        test_assert_contains(l.all_notes, "node \"node-1\" is being drained (cordoned)");
        test_assert_contains(l.last_note, "waiting: 1 ResourceClaim on the node (demo/gpu-claim); 1 "
                                          "claim-holding pod (demo/holder)");
        assert_string_equal(guard_run_held_counts(g), "1 ResourceClaim on the node; 1 claim-holding pod");

        obj = holder_json();
        ev = fake_api_watch_event("DELETED", obj);
        assert_int_equal(fake_transport_push(e->ft, PODS "&watch=1", ev), 1);
        free(ev);
        free(obj);
        run(e, 100 * MS);
        assert_int_equal(l.done, 0);
        test_assert_contains(l.last_note, "waiting: 1 ResourceClaim on the node (demo/gpu-claim); 0 "
                                          "claim-holding pods");

        obj = claim_json();
        ev = fake_api_watch_event("DELETED", obj);
        assert_int_equal(fake_transport_push(e->ft, CLAIMS "?watch=1", ev), 1);
        free(ev);
        free(obj);
        run(e, 100 * MS);
        assert_int_equal(l.done, 1);
        assert_int_equal(l.outcome, GUARD_RELEASED);
        test_assert_contains(l.result, "no ResourceClaim is on the node and no claim-holding pod is left");
        stop_run(e, g, &l);
        assert_int_equal(fake_transport_open_streams(e->ft), 0);
}

/* The deadline: gives up with counts (never names) in the result. */
static void test_gives_up_at_deadline(void **state) {
        struct env *e = *state;
        struct run_log l = {};
        struct guard_run *g;

        e->cfg.deadline_usec = 10 * SEC;
        expect_node(e, true);
        expect_draining_parts(e, true);
        g = start_run(e, &l, NULL);
        run(e, 9 * SEC);
        assert_int_equal(l.done, 0);
        run(e, 2 * SEC);
        assert_int_equal(l.done, 1);
        assert_int_equal(l.outcome, GUARD_TIMED_OUT);
        test_assert_contains(l.result, "gave up after 10.0 s, before the driver pod would be killed: still "
                                       "held: 1 ResourceClaim on the node; 1 claim-holding pod");
        assert_null(strstr(l.result, "demo/"));
        stop_run(e, g, &l);
}

/* Uncordoned while waiting: lets go. */
static void test_uncordoned_while_waiting(void **state) {
        struct env *e = *state;
        struct run_log l = {};
        struct guard_run *g;
        char *obj, *ev;

        expect_node(e, true);
        expect_draining_parts(e, true);
        g = start_run(e, &l, NULL);
        run(e, 100 * MS);
        assert_int_equal(l.done, 0);
        obj = node_json(false, 91);
        ev = fake_api_watch_event("MODIFIED", obj);
        assert_int_equal(fake_transport_push(e->ft, NODES "&watch=1", ev), 1);
        free(ev);
        free(obj);
        run(e, 100 * MS);
        assert_int_equal(l.done, 1);
        assert_int_equal(l.outcome, GUARD_RELEASED);
        test_assert_contains(l.result, "is no longer being drained");
        stop_run(e, g, &l);
}

/* An unknown node fails; so does a forbidden list of the Node. */
static void test_unknown_node_and_forbidden(void **state) {
        struct env *e = *state;
        struct run_log l = {}, l2 = {};
        struct guard_run *g;

        fake_api_expect_list_and_watch(e->ft, NODES,
                                       NODES "&limit=", fake_api_list_strv("NodeList", (char *[]){ NULL }));
        g = start_run(e, &l, NULL);
        run(e, 10 * MS);
        assert_int_equal(l.done, 1);
        assert_int_equal(l.outcome, GUARD_FAILED);
        assert_string_equal(l.result, "node \"node-1\" not found");
        stop_run(e, g, &l);

        fake_transport_expect_json(e->ft, "GET", NODES "&limit=", 403,
                                   "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Forbidden\","
                                   "\"message\":\"nodes is forbidden\",\"code\":403}");
        g = start_run(e, &l2, NULL);
        run(e, 100 * MS);
        assert_int_equal(l2.done, 1);
        assert_int_equal(l2.outcome, GUARD_FAILED);
        test_assert_contains(l2.result, "watching node: nodes is forbidden");
        stop_run(e, g, &l2);
}

/* guard_run_fail (a signal): failed with the caller's line, on_done from the loop;
 * once finished, nothing changes it. */
static void test_fail_early(void **state) {
        struct env *e = *state;
        struct run_log l = {};
        struct guard_run *g;

        expect_node(e, true);
        expect_draining_parts(e, true);
        g = start_run(e, &l, NULL);
        run(e, 100 * MS);
        guard_run_fail(g, "interrupted by signal 15");
        assert_int_equal(l.done, 0);
        run(e, MS);
        assert_int_equal(l.done, 1);
        assert_int_equal(l.outcome, GUARD_FAILED);
        assert_string_equal(l.result, "interrupted by signal 15");
        guard_run_fail(g, "again");
        run(e, 20 * SEC);
        assert_int_equal(l.done, 1);
        assert_string_equal(l.result, "interrupted by signal 15");
        stop_run(e, g, &l);
}

/* A stop before the end: on_done never comes, closed does. */
static void test_stop_before_done(void **state) {
        struct env *e = *state;
        struct run_log l = {};
        struct guard_run *g;

        expect_node(e, true);
        expect_draining_parts(e, true);
        g = start_run(e, &l, NULL);
        run(e, 100 * MS);
        stop_run(e, g, &l);
        run(e, 30 * SEC);
        assert_int_equal(l.done, 0);
        assert_int_equal(fake_transport_open_streams(e->ft), 0);
}

/* Two runs on one shared view (the server form): one list and one watch per part;
 * each run decides and is answered. */
struct shared {
        struct guard_run *runs[2];
};

static void on_shared_change(struct node_view *v, void *userdata) {
        struct shared *s = userdata;

        for (size_t i = 0; i < ELEMENTSOF(s->runs); i++)
                guard_run_view_changed(s->runs[i]);
}

static void on_shared_synced(struct node_view *v, unsigned part, void *userdata) {
        struct shared *s = userdata;

        for (size_t i = 0; i < ELEMENTSOF(s->runs); i++)
                guard_run_view_synced(s->runs[i], part);
}

static void on_shared_error(struct node_view *v, unsigned part, int error, const char *message,
                            void *userdata) {
        struct shared *s = userdata;

        for (size_t i = 0; i < ELEMENTSOF(s->runs); i++)
                guard_run_view_error(s->runs[i], part, error, message);
}

static void on_view_closed(void *userdata) {
        *(bool *)userdata = true;
}

static void test_shared_view(void **state) {
        static const struct node_view_handlers h = {
                .on_change = on_shared_change,
                .on_synced = on_shared_synced,
                .on_error = on_shared_error,
        };
        struct env *e = *state;
        struct run_log l[2] = {};
        struct shared s = {};
        struct node_view *v;
        bool view_closed = false;
        char *obj, *ev;

        expect_node(e, true);
        expect_draining_parts(e, true);
        assert_int_equal(node_view_new(e->api->client, e->api->ts,
                                       &(const struct node_view_options){ .node = "node-1" }, &h, &s, &v),
                         0);
        for (size_t i = 0; i < 2; i++)
                assert_int_equal(
                        guard_run_new(e->api->client, e->api->ts, &e->cfg, &handlers, &l[i], &s.runs[i]), 0);
        assert_int_equal(guard_run_start(s.runs[0], v), 0);
        run(e, 100 * MS);
        /* The second run starts on a view that has everything already. */
        assert_int_equal(guard_run_start(s.runs[1], v), 0);
        run(e, 100 * MS);
        for (size_t i = 0; i < 2; i++) {
                assert_int_equal(l[i].done, 0);
                test_assert_contains(l[i].last_note, "waiting: 1 ResourceClaim on the node");
        }
        assert_int_equal(fake_transport_count(e->ft, "GET", NODES "&limit="), 1);
        assert_int_equal(fake_transport_count(e->ft, "GET", CLAIMS "?limit="), 1);

        obj = node_json(false, 91);
        ev = fake_api_watch_event("MODIFIED", obj);
        assert_int_equal(fake_transport_push(e->ft, NODES "&watch=1", ev), 1);
        free(ev);
        free(obj);
        run(e, 100 * MS);
        for (size_t i = 0; i < 2; i++) {
                assert_int_equal(l[i].done, 1);
                assert_int_equal(l[i].outcome, GUARD_RELEASED);
                stop_run(e, s.runs[i], &l[i]);
                s.runs[i] = NULL;
        }
        /* Stopped runs are not told about the view any more; the view is the owner's. */
        node_view_close(v, on_view_closed, &view_closed);
        run(e, 50 * MS);
        assert_true(view_closed);
}

static void test_outcome_names(void **state) {
        assert_string_equal(guard_outcome_to_string(GUARD_RELEASED), "released");
        assert_string_equal(guard_outcome_to_string(GUARD_TIMED_OUT), "timed-out");
        assert_string_equal(guard_outcome_to_string(GUARD_FAILED), "failed");
        assert_null(guard_outcome_to_string(_GUARD_OUTCOME_MAX));
        assert_null(guard_outcome_to_string(_GUARD_OUTCOME_INVALID));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_not_draining, setup, teardown),
                cmocka_unit_test_setup_teardown(test_names_whose_drain, setup, teardown),
                cmocka_unit_test_setup_teardown(test_holds_until_released, setup, teardown),
                cmocka_unit_test_setup_teardown(test_gives_up_at_deadline, setup, teardown),
                cmocka_unit_test_setup_teardown(test_uncordoned_while_waiting, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unknown_node_and_forbidden, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fail_early, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_before_done, setup, teardown),
                cmocka_unit_test_setup_teardown(test_shared_view, setup, teardown),
                cmocka_unit_test(test_outcome_names),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
