/* The evictor over the real client, a fake clock and a scripted fake transport,
 * on the plan of tests/unit/fixtures/evictor/scenario.json (two claim holders;
 * web-a..c under PodDisruptionBudget web, api-a under api, batch-a under none):
 * evictions under one budget go out one at a time, others together; a group is
 * accepted only once every answer is in; a 429 is held, named after its budget,
 * and retried after a backoff (Retry-After honoured) only when asked again; a
 * 403 is never retried; grace 0 becomes 1 s for claim holders; --disable-eviction
 * sends DELETEs with the pod's uid as precondition; cancel drops the answers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "drainer/base/timesrc.h"
#include "drainer/drain/evictor.h"
#include "drainer/drain/plan.h"
#include "drainer/kube/client.h"
#include "drainer/kube/kubeconfig.h"
#include "fakes/fake-clock.h"
#include "fakes/fake-transport.h"
#include "fakes/test-env.h"

#define MS       USEC_PER_MSEC
#define SEC      USEC_PER_SEC
#define EVICTION "/api/v1/namespaces/demo/pods/"

struct env {
        struct test_api *api;
        /* borrowed from api */
        struct fake_clock *clock;
        struct timesrc *ts;
        struct fake_transport *ft;
        struct kube_client *client;
        struct evictor *v;
        /* the plan */
        cJSON *doc;
        struct node_rec *node;
        struct pod_rec *pods[16];
        size_t n_pods;
        struct pdb_rec *pdbs[4];
        size_t n_pdbs;
        struct plan plan;
        bool has_plan;
        /* what the callbacks saw */
        unsigned answers, accepted, held, forbidden, due;
        char last_reason[512];
};

static cJSON *load(const char *name) {
        char rel[256];

        snprintf(rel, sizeof(rel), "evictor/%s", name);
        return test_fixture_json(rel);
}

static int setup(void **state) {
        struct env *e = calloc(1, sizeof(*e));
        const cJSON *item;

        assert_non_null(e);
        e->api = test_api_new(&(struct test_api_options){ .user_yaml = "    token: evictor-token\n" });
        e->clock = e->api->clock;
        e->ts = e->api->ts;
        e->ft = e->api->ft;
        e->client = e->api->client;

        e->doc = load("scenario.json");
        assert_int_equal(node_rec_from_json(cJSON_GetObjectItem(e->doc, "node"), &e->node), 0);
        cJSON_ArrayForEach(item, cJSON_GetObjectItem(e->doc, "pods"))
                assert_int_equal(pod_rec_from_json(item, &e->pods[e->n_pods++]), 0);
        cJSON_ArrayForEach(item, cJSON_GetObjectItem(e->doc, "pdbs"))
                assert_int_equal(pdb_rec_from_json(item, &e->pdbs[e->n_pdbs++]), 0);
        *state = e;
        return 0;
}

static int teardown(void **state) {
        struct env *e = *state;

        if (e->v) {
                evictor_cancel(e->v);
                for (int i = 0; i < 20 && !evictor_idle(e->v); i++) {
                        fake_transport_deliver(e->ft);
                        fake_clock_advance(e->clock, 0);
                }
                assert_true(evictor_idle(e->v));
                evictor_free(e->v);
        }
        if (e->has_plan)
                plan_done(&e->plan);
        test_api_free(e->api);
        for (size_t i = 0; i < e->n_pods; i++)
                pod_rec_free(e->pods[i]);
        for (size_t i = 0; i < e->n_pdbs; i++)
                pdb_rec_free(e->pdbs[i]);
        node_rec_free(e->node);
        cJSON_Delete(e->doc);
        free(e);
        return 0;
}

/* The plan over the scenario's records (again, after a pod changed). */
static void build_plan(struct env *e) {
        struct plan_options o = { .force = true };

        if (e->has_plan)
                plan_done(&e->plan);
        assert_int_equal(plan_build(e->node, (const struct pod_rec *const *)e->pods, e->n_pods, NULL, 0,
                                    NULL, 0, (const struct pdb_rec *const *)e->pdbs, e->n_pdbs, &o,
                                    &e->plan),
                         0);
        e->has_plan = true;
}

static void on_answer(struct evictor *v, const struct evictor_answer *a, void *userdata) {
        struct env *e = userdata;

        e->answers++;
        if (a->error == 0)
                e->accepted++;
        else if (a->error == -EACCES)
                e->forbidden++;
        else
                e->held++;
        snprintf(e->last_reason, sizeof(e->last_reason), "%s", a->reason ? a->reason : "");
}

static void on_due(struct evictor *v, void *userdata) {
        ((struct env *)userdata)->due++;
}

static void start(struct env *e, const struct evictor_options *o) {
        static const struct evictor_callbacks cb = { .on_answer = on_answer, .on_due = on_due };

        build_plan(e);
        assert_int_equal(evictor_new(e->client, e->ts, o, &cb, e, &e->v), 0);
}

/* Evictions answered 201 after 100 ms each. */
static void expect_accepted(struct env *e) {
        fake_transport_expect(e->ft, "POST", EVICTION,
                              &(struct fake_reply){ .status = 201,
                                                    .body = "{\"kind\":\"Status\",\"status\":\"Success\"}",
                                                    .delay_usec = 100 * MS,
                                                    .times = FAKE_FOREVER });
}

static size_t evictions_of(struct env *e, const char *pod) {
        char path[256];

        snprintf(path, sizeof(path), EVICTION "%s/eviction", pod);
        return fake_transport_count(e->ft, "POST", path);
}

/* The last eviction request of pod, or NULL. */
static const struct fake_request *eviction_request(struct env *e, const char *pod) {
        const struct fake_request *last = NULL;
        char path[256];

        snprintf(path, sizeof(path), EVICTION "%s/eviction", pod);
        for (size_t i = 0; i < fake_transport_n_requests(e->ft); i++)
                if (strcmp(fake_transport_request(e->ft, i)->path, path) == 0)
                        last = fake_transport_request(e->ft, i);
        return last;
}

/* evictor_evict(), then the loop turn in which the client sends what it queued. */
static bool evict(struct env *e, enum evict_group g) {
        bool all = evictor_evict(e->v, &e->plan, g);

        fake_clock_advance(e->clock, 0);
        return all;
}

static void advance(struct env *e, uint64_t usec) {
        fake_transport_deliver(e->ft);
        fake_clock_advance(e->clock, usec);
        fake_transport_deliver(e->ft);
}

static void test_one_eviction_per_budget(void **state) {
        struct env *e = *state;
        bool all = false;

        expect_accepted(e);
        start(e, &(struct evictor_options){ .grace_seconds = -1 });
        /* First wave: one per budget and the pod under none. */
        assert_false(evict(e, EVICT_GROUP_REST));
        assert_int_equal(fake_transport_in_flight(e->ft), 3);
        assert_int_equal(evictions_of(e, "web-a"), 1);
        assert_int_equal(evictions_of(e, "api-a"), 1);
        assert_int_equal(evictions_of(e, "batch-a"), 1);
        assert_int_equal(evictions_of(e, "web-b") + evictions_of(e, "web-c"), 0);
        /* Asked again before an answer: nothing more under web. */
        assert_false(evict(e, EVICT_GROUP_REST));
        assert_int_equal(fake_transport_in_flight(e->ft), 3);
        for (int i = 0; i < 10 && !all; i++) {
                advance(e, 100 * MS);
                all = evict(e, EVICT_GROUP_REST);
                assert_true(fake_transport_in_flight(e->ft) <= 1);
        }
        assert_true(all);
        assert_int_equal(evictions_of(e, "web-b"), 1);
        assert_int_equal(evictions_of(e, "web-c"), 1);
        assert_int_equal(e->accepted, 5);
        /* The claim holders are another group: untouched. */
        assert_int_equal(evictions_of(e, "gpu-a"), 0);
}

/* A group is accepted once every answer is in, even when the watch shows the pod
 * deleting first (the API server's watch can be faster than its response). */
static void test_group_accepted_after_answers(void **state) {
        struct env *e = *state;
        cJSON *gpu_a = cJSON_GetArrayItem(cJSON_GetObjectItem(e->doc, "pods"), 0);
        struct evictor_stats st;

        expect_accepted(e);
        start(e, &(struct evictor_options){ .grace_seconds = -1 });
        assert_false(evict(e, EVICT_GROUP_CLAIM_HOLDERS));
        assert_int_equal(evictions_of(e, "gpu-a") + evictions_of(e, "gpu-b"), 2);
        /* gpu-a shows a deletionTimestamp before its answer. */
        cJSON_AddStringToObject(cJSON_GetObjectItem(gpu_a, "metadata"), "deletionTimestamp",
                                "2025-06-15T14:00:02Z");
        pod_rec_free(e->pods[0]);
        assert_int_equal(pod_rec_from_json(gpu_a, &e->pods[0]), 0);
        build_plan(e);
        advance(e, 50 * MS);
        assert_false(evict(e, EVICT_GROUP_CLAIM_HOLDERS));
        advance(e, 60 * MS);
        assert_true(evict(e, EVICT_GROUP_CLAIM_HOLDERS));
        /* Nothing sent again for the deleting pod, nor for the accepted one. */
        assert_int_equal(evictions_of(e, "gpu-a"), 1);
        assert_int_equal(evictions_of(e, "gpu-b"), 1);
        evictor_get_stats(e->v, &st);
        assert_int_equal(st.submitted, 2);
        assert_int_equal(st.accepted, 2);
        assert_int_equal(st.retried, 0);
}

/* A 429 names the budget, is held with a backoff, and goes out again only when the
 * evictor is asked after on_due; Retry-After sets the wait. */
static void test_pdb_429_held_and_retried(void **state) {
        static const char refused[] = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                                      "\"message\":\"Cannot evict pod "
                                      "as it would violate the pod's disruption "
                                      "budget.\",\"reason\":\"TooManyRequests\",\"code\":429}";
        struct env *e = *state;
        struct evictor_held held[4];
        struct evictor_stats st;
        uint64_t t0;

        fake_transport_expect(e->ft, "POST", EVICTION "web-a/",
                              &(struct fake_reply){ .status = 429, .body = refused, .delay_usec = 10 * MS });
        fake_transport_expect(e->ft, "POST", EVICTION "web-a/",
                              &(struct fake_reply){ .status = 429,
                                                    .body = refused,
                                                    .headers = { "Retry-After: 3" },
                                                    .delay_usec = 10 * MS });
        expect_accepted(e);
        start(e, &(struct evictor_options){ .grace_seconds = -1, .random_seed = 7 });
        assert_false(evict(e, EVICT_GROUP_REST));
        advance(e, 20 * MS);
        assert_int_equal(e->held, 1);
        assert_non_null(strstr(e->last_reason, "PodDisruptionBudget demo/web: Cannot evict pod"));
        assert_int_equal(evictor_held(e->v, held, 4), 1);
        assert_string_equal(held[0].name, "web-a");
        evictor_get_stats(e->v, &st);
        assert_int_equal(st.held_by_pdb, 1);
        assert_int_equal(st.retried, 1);
        /* Held: asking again sends nothing for web-a; the budget is free (nothing of
         * ours in flight under it), so its next pod goes. */
        assert_false(evict(e, EVICT_GROUP_REST));
        assert_int_equal(evictions_of(e, "web-a"), 1);
        assert_int_equal(evictions_of(e, "web-b"), 1);
        /* The backoff (0.5 .. 1 s) ends: on_due, then the retry. */
        t0 = fake_clock_now(e->clock);
        while (e->due == 0 && fake_clock_now(e->clock) - t0 < 2 * SEC)
                advance(e, 10 * MS);
        assert_int_equal(e->due, 1);
        assert_in_range(fake_clock_now(e->clock) - t0, 480 * MS, 1000 * MS);
        assert_false(evict(e, EVICT_GROUP_REST));
        assert_int_equal(evictions_of(e, "web-a"), 2);
        /* still held while its retry is in flight: held until an answer says otherwise */
        assert_int_equal(evictor_held(e->v, held, 4), 1);
        assert_non_null(strstr(held[0].reason, "PodDisruptionBudget demo/web"));
        advance(e, 20 * MS);
        /* Second 429 with Retry-After: 3 s. */
        t0 = fake_clock_now(e->clock);
        while (e->due == 1 && fake_clock_now(e->clock) - t0 < 5 * SEC)
                advance(e, 10 * MS);
        assert_in_range(fake_clock_now(e->clock) - t0, 2900 * MS, 3100 * MS);
        assert_false(evict(e, EVICT_GROUP_REST));
        assert_int_equal(evictions_of(e, "web-a"), 3);
        advance(e, 200 * MS);
        assert_int_equal(evictor_held(e->v, held, 4), 0);
}

static void test_forbidden_is_not_retried(void **state) {
        struct env *e = *state;

        fake_transport_expect(
                e->ft, "POST", EVICTION,
                &(struct fake_reply){ .status = 403,
                                      .body = "{\"kind\":\"Status\",\"status\":\"Failure\","
                                              "\"message\":\"pods \\\"batch-a\\\" is forbidden\","
                                              "\"reason\":\"Forbidden\",\"code\":403}",
                                      .times = FAKE_FOREVER });
        start(e, &(struct evictor_options){ .grace_seconds = -1 });
        evict(e, EVICT_GROUP_CLAIM_HOLDERS);
        advance(e, 10 * MS);
        assert_int_equal(e->forbidden, 2);
        assert_non_null(strstr(e->last_reason, "forbidden"));
        for (int i = 0; i < 60; i++) {
                advance(e, SEC);
                evict(e, EVICT_GROUP_CLAIM_HOLDERS);
        }
        assert_int_equal(evictions_of(e, "gpu-a"), 1);
        assert_int_equal(e->due, 0);
}

/* --grace-period=0 would force-delete: a claim holder gets 1 s, other pods 0. */
static void test_grace_zero_spares_claim_holders(void **state) {
        struct env *e = *state;
        const struct fake_request *r;

        expect_accepted(e);
        start(e, &(struct evictor_options){ .grace_seconds = 0 });
        evict(e, EVICT_GROUP_CLAIM_HOLDERS);
        evict(e, EVICT_GROUP_REST);
        r = eviction_request(e, "gpu-a");
        assert_non_null(r);
        assert_non_null(strstr(r->body, "\"gracePeriodSeconds\":1"));
        r = eviction_request(e, "batch-a");
        assert_non_null(r);
        assert_non_null(strstr(r->body, "\"gracePeriodSeconds\":0"));
        advance(e, 200 * MS);
}

/* --disable-eviction: DELETEs with the uid as precondition (a replacement of the same
 * name is never hit), no budget serialization (no budget is involved). */
static void test_disable_eviction_deletes(void **state) {
        struct env *e = *state;
        const struct fake_request *r = NULL;

        fake_transport_expect(
                e->ft, "DELETE", EVICTION,
                &(struct fake_reply){
                        .status = 200, .body = "{}", .delay_usec = 10 * MS, .times = FAKE_FOREVER });
        start(e, &(struct evictor_options){ .grace_seconds = 5, .disable_eviction = true });
        assert_false(evict(e, EVICT_GROUP_REST));
        assert_int_equal(fake_transport_count(e->ft, "DELETE", EVICTION), 5);
        assert_int_equal(fake_transport_count(e->ft, "POST", EVICTION), 0);
        for (size_t i = 0; i < fake_transport_n_requests(e->ft); i++)
                if (strcmp(fake_transport_request(e->ft, i)->path, EVICTION "web-b") == 0)
                        r = fake_transport_request(e->ft, i);
        assert_non_null(r);
        assert_non_null(strstr(r->body, "\"preconditions\":{\"uid\":\"uid-web-b\"}"));
        assert_non_null(strstr(r->body, "\"gracePeriodSeconds\":5"));
        advance(e, 20 * MS);
        assert_true(evict(e, EVICT_GROUP_REST));
}

/* Cancel: the answers in flight are dropped, nothing is reported. */
static void test_cancel_drops_answers(void **state) {
        struct env *e = *state;

        expect_accepted(e);
        start(e, &(struct evictor_options){ .grace_seconds = -1 });
        evict(e, EVICT_GROUP_REST);
        assert_false(evictor_idle(e->v));
        evictor_cancel(e->v);
        advance(e, 200 * MS);
        assert_true(evictor_idle(e->v));
        assert_int_equal(e->answers, 0);
}

/* 403 with the cause NamespaceTerminating (the pod's namespace is being deleted):
 * not a failure; held, named, retried every 5 s (kubectl's EvictErrorRetryDelay)
 * until the pod is marked deleted; then nothing more is sent and the group counts
 * as accepted (the engine waits for the pod like any evicted one). */
static void test_namespace_terminating_retried_until_deleted(void **state) {
        static const char refused[] =
                "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                "\"message\":\"pods \\\"batch-a\\\" is forbidden: unable to create new content in namespace "
                "demo because it is being terminated\",\"reason\":\"Forbidden\",\"details\":{\"name\":"
                "\"batch-a\",\"kind\":\"pods\",\"causes\":[{\"reason\":\"NamespaceTerminating\","
                "\"message\":\"namespace demo is being terminated\",\"field\":\"metadata.namespace\"}]},"
                "\"code\":403}";
        struct env *e = *state;
        struct evictor_held held[8];
        size_t n, batch = SIZE_MAX;
        uint64_t t0;

        for (size_t i = 0; i < e->n_pods; i++)
                if (strcmp(e->pods[i]->name, "batch-a") == 0)
                        batch = i;
        assert_true(batch != SIZE_MAX);
        fake_transport_expect(e->ft, "POST", EVICTION "batch-a/",
                              &(struct fake_reply){ .status = 403, .body = refused, .times = FAKE_FOREVER });
        expect_accepted(e);
        start(e, &(struct evictor_options){ .grace_seconds = -1, .random_seed = 3 });
        assert_false(evict(e, EVICT_GROUP_REST));
        t0 = fake_clock_now(e->clock);
        advance(e, 200 * MS);
        assert_int_equal(e->forbidden, 0);
        assert_int_equal(e->held, 1);
        n = evictor_held(e->v, held, 8);
        assert_int_equal(n, 1);
        assert_string_equal(held[0].name, "batch-a");
        assert_true(held[0].ns_terminating);
        assert_non_null(strstr(held[0].reason, "namespace demo is being deleted"));
        /* Retried after 5 s, not before. */
        while (e->due == 0 && fake_clock_now(e->clock) - t0 < 10 * SEC) {
                advance(e, 100 * MS);
                evict(e, EVICT_GROUP_REST);
        }
        assert_in_range(fake_clock_now(e->clock) - t0, 4900 * MS, 5200 * MS);
        assert_false(evict(e, EVICT_GROUP_REST));
        assert_int_equal(evictions_of(e, "batch-a"), 2);
        advance(e, 200 * MS);
        assert_int_equal(e->held, 2);
        /* The namespace controller deletes it: nothing more is sent, the group is accepted
         * once the others are, and it is no longer held, but still listed as met. */
        e->pods[batch]->deleting = true;
        build_plan(e);
        for (int i = 0; i < 30; i++) {
                advance(e, SEC);
                evict(e, EVICT_GROUP_REST);
        }
        assert_true(evict(e, EVICT_GROUP_REST));
        assert_int_equal(evictions_of(e, "batch-a"), 2);
        assert_int_equal(evictor_held(e->v, held, 8), 0);
        n = evictor_ns_terminating(e->v, held, 8);
        assert_int_equal(n, 1);
        assert_string_equal(held[0].name, "batch-a");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_one_eviction_per_budget, setup, teardown),
                cmocka_unit_test_setup_teardown(test_group_accepted_after_answers, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pdb_429_held_and_retried, setup, teardown),
                cmocka_unit_test_setup_teardown(test_forbidden_is_not_retried, setup, teardown),
                cmocka_unit_test_setup_teardown(test_namespace_terminating_retried_until_deleted, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_grace_zero_spares_claim_holders, setup, teardown),
                cmocka_unit_test_setup_teardown(test_disable_eviction_deletes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cancel_drops_answers, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
