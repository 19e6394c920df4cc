/* The drain engine over the real client and informers, a fake clock and a scripted
 * fake transport: evictions of pods under one PodDisruptionBudget go out one at a
 * time (a concurrent one makes the API server retry the budget update past the
 * request's end, which after a crash leaves a running pod counted as disrupted for
 * 2 minutes); pods under different budgets, or none, still go out together; a
 * terminal pod being deleted holds the driver stop until it is gone.
 * DESIGN.md "Security": annotations are requests, never authority: a recorded unit or label key
 * the configuration does not name is never touched (refused, with the message on
 * the Node and a DrainerBlocked Event); a unit that fails to start is retried with
 * backoff; a phase written by hand keeps every eviction rule; a pod with a driver's
 * labels that no DaemonSet controls is workload. Unit control is a fake here.
 * The phases end to end, resumed from each, per strategy, against a world that
 * reacts to the engine's requests: test-engine-phases.c. */
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

#include "drainer/base/json.h"
#include "drainer/base/selector.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/announcer.h"
#include "drainer/dra/claims.h"
#include "drainer/drain/engine.h"
#include "drainer/kube/client.h"
#include "drainer/kube/events.h"
#include "drainer/kube/kubeconfig.h"
#include "fakes/fake-apiserver.h"
#include "fakes/fake-clock.h"
#include "fakes/fake-transport.h"
#include "fakes/test-env.h"

#define MS  USEC_PER_MSEC
#define SEC USEC_PER_SEC
#define T0  (1000 * SEC)

#define NODES    FAKE_API_NODES
#define PODS     FAKE_API_PODS
#define CLAIMS   FAKE_API_CLAIMS
#define SLICES   FAKE_API_SLICES
#define PDBS     FAKE_API_PDBS
#define EVICTION FAKE_API_EVICTION

/* Unit control as systemd would answer it: every call completes UNIT_DELAY later. */
#define UNIT_DELAY (20 * MS)
#define MAX_OPS    64

struct fake_op {
        bool job, start;
        unit_job_fn job_done;
        unit_state_fn state_done;
        void *userdata;
        uint64_t due;
};

struct fake_units {
        struct env *env;
        struct fake_op ops[MAX_OPS];
        size_t n_ops;
        const char *active_state; /* what a query answers */
        const char *start_result; /* a start job's result: "done" (the unit becomes active) or "failed" */
        int start_error;          /* < 0: StartUnit itself fails (asynchronously) with this */
        unsigned starts, stops, queries;
        uint64_t start_at[256]; /* when each start was asked */
        char last_unit[256];
};

struct env {
        struct test_api *api; /* owns the five below, the test's shorthands */
        struct fake_clock *clock;
        struct timesrc *ts;
        struct fake_transport *ft;
        struct kube_config *cfg;
        struct kube_client *client;
        struct engine *engine;
        struct announcer *announcer; /* the engine's notices as Events, as the verbs wire it */
        bool finished;
        int result;
        struct engine_summary summary; /* at on_finished; strings copied below */
        char *needs_flag, *message;
        /* The Node as the API server holds it: PATCHes are merged in and sent on the watch. */
        cJSON *node;
        size_t patches_seen;
        unsigned node_rv;
        struct fake_units units;
        char trail[16][128]; /* on_trail: "evicting|gone|released NS/NAME" */
        size_t n_trail;
};

static int setup(void **state) {
        struct env *e = calloc(1, sizeof(*e));

        assert_non_null(e);
        e->api = test_api_new(&(struct test_api_options){ .user_yaml = "    token: engine-token\n" });
        e->clock = e->api->clock;
        e->ts = e->api->ts;
        e->ft = e->api->ft;
        e->cfg = e->api->cfg;
        e->client = e->api->client;
        assert_int_equal(announcer_new(e->client, e->ts, "test", &e->announcer), 0);
        *state = e;
        return 0;
}

static int teardown(void **state) {
        struct env *e = *state;

        if (e->engine) {
                engine_stop(e->engine);
                for (int i = 0; i < 20 && !engine_idle(e->engine); i++) {
                        fake_transport_deliver(e->ft);
                        fake_clock_advance(e->clock, 1 * MS); /* a closing node view looks every ms */
                }
                assert_true(engine_idle(e->engine));
                engine_free(e->engine);
        }
        for (int i = 0; i < 20 && fake_transport_in_flight(e->ft) > 0; i++) {
                fake_transport_deliver(e->ft);
                fake_clock_advance(e->clock, 0);
        }
        /* Unit calls still running outlive the engine (their ticket knows it is gone). */
        for (size_t i = 0; i < e->units.n_ops; i++) {
                struct fake_op *op = &e->units.ops[i];

                if (op->job)
                        op->job_done(-ECANCELED, NULL, NULL, op->userdata);
                else
                        op->state_done(-ECANCELED, NULL, op->userdata);
        }
        e->units.n_ops = 0;
        assert_int_equal(kube_client_calls_in_flight(e->client), 0);
        assert_true(announcer_idle(e->announcer));
        announcer_free(e->announcer);
        test_api_free(e->api);
        cJSON_Delete(e->node);
        free(e->needs_flag);
        free(e->message);
        free(e);
        return 0;
}

/* node-1 in a drain phase, as a run killed there left it (cordoned, tainted), at
 * resourceVersion rv: fixtures/engine/node-draining.json (malloc'd, compact). */
static char *node_in(const char *phase, const char *rv) {
        _cleanup_(cJSON_Deletep) cJSON *n = test_fixture_json("engine/node-draining.json");
        cJSON *meta = cJSON_GetObjectItemCaseSensitive(n, "metadata");
        char *s;

        cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(meta, "annotations"),
                                               "drainer.io/state", cJSON_CreateString(phase));
        cJSON_ReplaceItemInObjectCaseSensitive(meta, "resourceVersion", cJSON_CreateString(rv));
        s = cJSON_PrintUnformatted(n);
        assert_non_null(s);
        return s;
}

static char *pod_json(const char *name, const char *app) {
        _cleanup_free_ char *meta = test_asprintf(
                "\"labels\":{\"app\":\"%s\"},\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":"
                "\"ReplicaSet\",\"name\":\"%s-rs\",\"uid\":\"rs-%s\",\"controller\":true}]",
                app, app, app);

        return fake_api_pod(&(const struct fake_pod){
                .name = name, .meta = meta, .ready = "True", .pod_ip = "10.244.1.7" });
}

static char *pdb_json(const char *name, const char *app) {
        char *s;

        assert_true(asprintf(&s,
                             "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"demo\",\"uid\":\"pdb-%s\","
                             "\"resourceVersion\":\"60\"},\"spec\":{\"minAvailable\":1,\"selector\":{"
                             "\"matchLabels\":{\"app\":\"%s\"}}},\"status\":{\"disruptionsAllowed\":2,"
                             "\"currentHealthy\":3,\"desiredHealthy\":1,\"expectedPods\":3}}",
                             name, name, app) >= 0);
        return s;
}

static void on_notice(struct engine *en, const struct engine_notice *n, void *userdata) {
        struct env *e = userdata;

        announcer_notice(e->announcer, n);
}

static void on_finished(struct engine *en, const struct engine_summary *s, void *userdata) {
        struct env *e = userdata;

        e->finished = true;
        e->result = s->result;
        e->summary = *s;
        e->needs_flag = s->needs_flag ? strdup(s->needs_flag) : NULL;
        e->message = s->message ? strdup(s->message) : NULL;
}

static void on_trail(struct engine *en, const struct engine_trail *t, void *userdata) {
        struct env *e = userdata;

        assert_true(e->n_trail < ELEMENTSOF(e->trail));
        if (t->kind == ENGINE_TRAIL_CORDONED) {
                assert_null(t->ns);
                snprintf(e->trail[e->n_trail++], sizeof(e->trail[0]), "cordoned %s", t->name);
                return;
        }
        snprintf(e->trail[e->n_trail++], sizeof(e->trail[0]), "%s %s/%s",
                 t->kind == ENGINE_TRAIL_EVICTING   ? "evicting"
                 : t->kind == ENGINE_TRAIL_POD_GONE ? "gone"
                                                    : "released",
                 t->ns, t->name);
}

static bool has_trail(const struct env *e, const char *line) {
        for (size_t i = 0; i < e->n_trail; i++)
                if (strcmp(e->trail[i], line) == 0)
                        return true;
        return false;
}

/* Evictions answered 201 after 100 ms each; the engine started on the node and the
 * pods given, with PodDisruptionBudgets pdbs (a NULL-terminated list). */
static void start_in(struct env *e, const char *phase, char **pods, char **pdbs) {
        static const struct engine_callbacks cb = { .on_notice = on_notice,
                                                    .on_finished = on_finished,
                                                    .on_trail = on_trail };
        struct engine_options o = {
                .node = "node-1",
                .goal = ENGINE_GOAL_DRAIN,
                .grace_seconds = 1,
        };

        fake_transport_expect(e->ft, "POST", EVICTION,
                              &(struct fake_reply){ .status = 201,
                                                    .body = "{\"kind\":\"Status\",\"status\":\"Success\"}",
                                                    .delay_usec = 100 * MS,
                                                    .times = FAKE_FOREVER });
        {
                char *nl;

                nl = fake_api_list("NodeList", 100, (char *[]){ node_in(phase, "90") }, 1);
                fake_api_expect_list_and_watch(e->ft, NODES, NODES "&limit=", nl);
        }
        fake_api_expect_list_and_watch(e->ft, PODS, PODS "&limit=", fake_api_list_strv("PodList", pods));
        fake_api_expect_list_and_watch(e->ft, CLAIMS, CLAIMS "?limit=",
                                       fake_api_list_strv("ResourceClaimList", (char *[]){ NULL }));
        fake_api_expect_list_and_watch(e->ft, SLICES, SLICES "&limit=",
                                       fake_api_list_strv("ResourceSliceList", (char *[]){ NULL }));
        {
                char *pl = fake_api_list_strv("PodDisruptionBudgetList", pdbs);

                fake_transport_expect_json(e->ft, "GET", PDBS "?limit=", 200, pl);
                free(pl);
        }
        /* Node patches (the phase after evict-rest) and Events: accepted, nothing more. */
        fake_transport_expect(e->ft, "PATCH", "/api/v1/nodes/node-1",
                              &(struct fake_reply){ .status = 200,
                                                    .body = "{\"metadata\":{\"resourceVersion\":\"999\"}}",
                                                    .times = FAKE_FOREVER });
        fake_transport_expect(e->ft, "POST", "/api/v1/namespaces/default/events",
                              &(struct fake_reply){ .status = 201, .body = "{}", .times = FAKE_FOREVER });
        assert_int_equal(engine_new(e->client, fake_transport_base(e->ft), e->ts, &o, &cb, e, &e->engine),
                         0);
        assert_int_equal(engine_start(e->engine), 0);
}

static void start(struct env *e, char **pods, char **pdbs) {
        start_in(e, "evict-rest", pods, pdbs);
}

/* How many evictions of these pods were submitted, and how many of them are in flight. */
static size_t evictions(struct env *e, const char *const *names, size_t *in_flight) {
        size_t n = 0;

        *in_flight = 0;
        for (size_t i = 0; i < fake_transport_n_requests(e->ft); i++) {
                const struct fake_request *r = fake_transport_request(e->ft, i);

                for (const char *const *p = names; *p; p++) {
                        char path[256];

                        snprintf(path, sizeof(path), EVICTION "%s/eviction", *p);
                        if (strcmp(r->method, "POST") == 0 && strcmp(r->path, path) == 0)
                                n++;
                }
        }
        /* In flight: submitted and not answered: each answer takes 100 ms, so those
         * submitted within the last 100 ms. */
        for (size_t i = 0; i < fake_transport_n_requests(e->ft); i++) {
                const struct fake_request *r = fake_transport_request(e->ft, i);

                for (const char *const *p = names; *p; p++) {
                        char path[256];

                        snprintf(path, sizeof(path), EVICTION "%s/eviction", *p);
                        if (strcmp(r->method, "POST") == 0 && strcmp(r->path, path) == 0 &&
                            fake_clock_now(e->clock) < r->at_usec + 100 * MS)
                                (*in_flight)++;
                }
        }
        return n;
}

static void test_one_eviction_per_budget_at_a_time(void **state) {
        struct env *e = *state;
        static const char *const web[] = { "web-a", "web-b", "web-c", NULL };
        size_t flying, max_flying = 0, n = 0;

        start(e,
              (char *[]){ pod_json("web-a", "web"), pod_json("web-b", "web"), pod_json("web-c", "web"),
                          NULL },
              (char *[]){ pdb_json("web", "web"), NULL });
        /* Lists answered, reconcile runs; then time goes on in 10 ms steps. */
        for (int step = 0; step < 100 && n < 3; step++) {
                fake_transport_deliver(e->ft);
                fake_clock_advance(e->clock, 10 * MS);
                n = evictions(e, web, &flying);
                if (flying > max_flying)
                        max_flying = flying;
        }
        print_message("  %zu evictions, at most %zu in flight at once\n", n, max_flying);
        assert_int_equal(n, 3);
        assert_int_equal(max_flying, 1);
        assert_false(e->finished);
}

static void test_budgets_apart_go_together(void **state) {
        struct env *e = *state;
        static const char *const all[] = { "web-a", "web-b", "api-a", "api-b", "batch-a", NULL };
        size_t flying, max_flying = 0, n = 0;

        start(e,
              (char *[]){ pod_json("web-a", "web"), pod_json("web-b", "web"), pod_json("api-a", "api"),
                          pod_json("api-b", "api"), pod_json("batch-a", "batch"), NULL },
              (char *[]){ pdb_json("web", "web"), pdb_json("api", "api"), NULL });
        fake_transport_deliver(e->ft);
        fake_clock_advance(e->clock, 0);
        fake_transport_deliver(e->ft);
        fake_clock_advance(e->clock, 0);
        /* First wave: one per budget, and the pod under none: 3 at once. */
        n = evictions(e, all, &flying);
        print_message("  first wave: %zu evictions, %zu in flight\n", n, flying);
        assert_int_equal(n, 3);
        assert_int_equal(flying, 3);
        for (int step = 0; step < 100 && n < 5; step++) {
                fake_transport_deliver(e->ft);
                fake_clock_advance(e->clock, 10 * MS);
                n = evictions(e, all, &flying);
                if (flying > max_flying)
                        max_flying = flying;
        }
        assert_int_equal(n, 5);
        assert_true(max_flying <= 3);
}

static void push_node_in(struct env *e, const char *phase);

/* The audit trail: one "evicting" per eviction accepted (none before its answer),
 * one "gone" once that pod left the node's pods, at most once each. */
static char *trail_pod(const char *name, unsigned rv) {
        return fake_api_pod(
                &(const struct fake_pod){ .name = name, .rv = rv, .meta = FAKE_OWNED_BY_RS("rs", "rs-1") });
}

/* The audit trail: one "evicting" per eviction accepted (none before its answer),
 * one "gone" once that pod left the node's pods, at most once each. */
static void test_trail_of_evictions(void **state) {
        struct env *e = *state;
        char *gone = trail_pod("web-a", 51), *ev;

        start(e, (char *[]){ trail_pod("web-a", 50), trail_pod("batch-a", 50), NULL }, (char *[]){ NULL });
        fake_transport_deliver(e->ft);
        fake_clock_advance(e->clock, 0);
        fake_transport_deliver(e->ft);
        fake_clock_advance(e->clock, 0);
        assert_int_equal(e->n_trail, 0); /* sent, not answered yet */
        for (int i = 0; i < 30; i++) {
                fake_transport_deliver(e->ft);
                fake_clock_advance(e->clock, 10 * MS);
        }
        assert_int_equal(e->n_trail, 2);
        assert_true(has_trail(e, "evicting demo/web-a"));
        assert_true(has_trail(e, "evicting demo/batch-a"));
        ev = fake_api_watch_event("DELETED", gone);
        assert_int_equal(fake_transport_push(e->ft, PODS "&watch=1", ev), 1);
        free(ev);
        free(gone);
        push_node_in(e, "wait-released"); /* the engine's own Node patch, as the watch brings it */
        for (int i = 0; i < 10; i++) {
                fake_transport_deliver(e->ft);
                fake_clock_advance(e->clock, 10 * MS);
        }
        assert_int_equal(e->n_trail, 3);
        assert_true(has_trail(e, "gone demo/web-a"));
        assert_false(has_trail(e, "gone demo/batch-a"));
}

/* The trail says the node is cordoned once it is seen so, once however often the
 * phase after it is tried (kubectl drain's "node/NAME cordoned"). */
static void test_trail_of_cordon(void **state) {
        struct env *e = *state;
        size_t n = 0;

        start_in(e, "cordon", (char *[]){ NULL }, (char *[]){ NULL });
        for (int i = 0; i < 50; i++) {
                fake_transport_deliver(e->ft);
                fake_clock_advance(e->clock, 10 * MS);
        }
        for (size_t i = 0; i < e->n_trail; i++)
                n += strcmp(e->trail[i], "cordoned node-1") == 0;
        assert_int_equal(n, 1);
}

/* A pod evicted by a run killed in wait-released: terminal (Succeeded) and being
 * deleted, not gone yet. The driver stop (its first step: recording it on the Node)
 * waits until the pod is gone. */
static void test_terminal_deleting_pod_holds_driver_stop(void **state) {
        struct env *e = *state;
        char *pod = pod_json("web-a", "web"), *done, *ev;

        /* the same pod, Succeeded and with a deletionTimestamp */
        done = strdup(pod);
        assert_non_null(done);
        {
                char *p = strstr(done, "\"Running\"");
                char *t;

                assert_non_null(p);
                *p = 0;
                assert_true(asprintf(&t, "%s\"Succeeded\"%s", done, p + strlen("\"Running\"")) >= 0);
                free(done);
                done = t;
                p = strstr(done, "\"resourceVersion\":\"50\"");
                assert_non_null(p);
                *p = 0;
                assert_true(asprintf(&t,
                                     "%s\"deletionTimestamp\":\"2025-06-15T14:00:02Z\",\"resourceVersion\":"
                                     "\"51\"%s",
                                     done, p + strlen("\"resourceVersion\":\"50\"")) >= 0);
                free(done);
                done = t;
        }
        free(pod);
        start_in(e, "wait-released", (char *[]){ strdup(done), NULL }, (char *[]){ NULL });
        for (int i = 0; i < 5; i++) {
                fake_transport_deliver(e->ft);
                fake_clock_advance(e->clock, 10 * MS);
        }
        assert_int_equal(fake_transport_count(e->ft, "PATCH", "/api/v1/nodes/node-1"), 0);
        /* The kubelet deletes it: now the drivers may go. */
        ev = fake_api_watch_event("DELETED", done);
        assert_int_equal(fake_transport_push(e->ft, PODS "&watch=1", ev), 1);
        free(ev);
        free(done);
        for (int i = 0; i < 5; i++) {
                fake_transport_deliver(e->ft);
                fake_clock_advance(e->clock, 10 * MS);
        }
        assert_true(fake_transport_count(e->ft, "PATCH", "/api/v1/nodes/node-1") >= 1);
}

/* A claim holder (spec.resourceClaims with a resourceClaimName) on node-1. */
static char *holder_json(const char *name, const char *extra_meta) {
        _cleanup_free_ char *meta = test_asprintf(
                "%s\"labels\":{\"app\":\"gpu\"}," FAKE_OWNED_BY_RS("gpu-rs", "rs-gpu"), extra_meta);

        return fake_api_pod(&(const struct fake_pod){
                .name = name,
                .meta = meta,
                .spec = "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":\"gpu-claim\"}]",
                .ready = "True",
                .pod_ip = "10.244.1.8" });
}

/* node-1 in evict-rest at the resourceVersion the fake answers every Node patch
 * with, as the watch brings the engine's own patch. */
static void push_node_in(struct env *e, const char *phase) {
        _cleanup_free_ char *obj = node_in(phase, "999");
        _cleanup_free_ char *ev = fake_api_watch_event("MODIFIED", obj);

        assert_int_equal(fake_transport_push(e->ft, NODES "&watch=1", ev), 1);
}

static void push_node_evict_rest(struct env *e) {
        push_node_in(e, "evict-rest");
}

/* The watch shows the claim holder deleting before its eviction's answer arrives
 * (the API server's watch can be faster than its response), and the Node watch is
 * fast too. The pods without claims are evicted only after that answer: the groups'
 * requests never overlap. */
static void test_later_group_waits_for_answers_not_watch(void **state) {
        struct env *e = *state;
        static const char *const holder[] = { "gpu-a", NULL }, *const rest[] = { "web-a", NULL };
        char *deleting, *ev;
        bool pushed = false;
        size_t flying;

        start_in(e, "evict-claim-holders",
                 (char *[]){ holder_json("gpu-a", ""), pod_json("web-a", "web"), NULL }, (char *[]){ NULL });
        for (int i = 0; i < 3; i++) {
                fake_transport_deliver(e->ft);
                fake_clock_advance(e->clock, 0);
        }
        assert_int_equal(evictions(e, holder, &flying), 1);
        assert_int_equal(flying, 1);
        /* 10 ms later the watch brings the holder with a deletionTimestamp. */
        fake_clock_advance(e->clock, 10 * MS);
        deleting = holder_json("gpu-a", "\"deletionTimestamp\":\"2025-06-15T14:00:02Z\",");
        ev = fake_api_watch_event("MODIFIED", deleting);
        assert_int_equal(fake_transport_push(e->ft, PODS "&watch=1", ev), 1);
        free(ev);
        free(deleting);
        /* To 90 ms (the answer is not in yet); the Node watch shows a phase patch at once. */
        for (int step = 0; step < 8; step++) {
                fake_transport_deliver(e->ft);
                if (!pushed && fake_transport_count(e->ft, "PATCH", "/api/v1/nodes/node-1") > 0) {
                        push_node_evict_rest(e);
                        pushed = true;
                        fake_transport_deliver(e->ft);
                }
                fake_clock_advance(e->clock, 10 * MS);
        }
        assert_int_equal(evictions(e, rest, &flying), 0);
        /* (Not much further: every Node patch of the fake answers the same resourceVersion.) */
        for (int step = 0; step < 5; step++) {
                fake_transport_deliver(e->ft);
                if (!pushed && fake_transport_count(e->ft, "PATCH", "/api/v1/nodes/node-1") > 0) {
                        push_node_evict_rest(e);
                        pushed = true;
                        fake_transport_deliver(e->ft);
                }
                fake_clock_advance(e->clock, 10 * MS);
        }
        print_message("  web-a evicted %zu time(s) after the holder's answer\n",
                      evictions(e, rest, &flying));
        assert_int_equal(evictions(e, rest, &flying), 1);
}

/* ---- annotations are requests, never authority ---- */

/* The fake unit control (struct unit_ops). */
static int fake_unit_call(struct fake_units *u, const char *unit, bool job, bool start, unit_job_fn jd,
                          unit_state_fn sd, void *userdata) {
        struct fake_op *op;

        assert_true(u->n_ops < MAX_OPS);
        snprintf(u->last_unit, sizeof(u->last_unit), "%s", unit);
        op = &u->ops[u->n_ops++];
        *op = (struct fake_op){ .job = job,
                                .start = start,
                                .job_done = jd,
                                .state_done = sd,
                                .userdata = userdata,
                                .due = fake_clock_now(u->env->clock) + UNIT_DELAY };
        return 0;
}

static int fake_unit_stop(void *ctx, const char *unit, unit_job_fn done, void *userdata) {
        struct fake_units *u = ctx;

        u->stops++;
        return fake_unit_call(u, unit, true, false, done, NULL, userdata);
}

static int fake_unit_start(void *ctx, const char *unit, unit_job_fn done, void *userdata) {
        struct fake_units *u = ctx;

        if (u->starts < ELEMENTSOF(u->start_at))
                u->start_at[u->starts] = fake_clock_now(u->env->clock);
        u->starts++;
        return fake_unit_call(u, unit, true, true, done, NULL, userdata);
}

static int fake_unit_state(void *ctx, const char *unit, unit_state_fn done, void *userdata) {
        struct fake_units *u = ctx;

        u->queries++;
        return fake_unit_call(u, unit, false, false, NULL, done, userdata);
}

static const struct unit_ops fake_unit_ops = {
        .stop = fake_unit_stop,
        .start = fake_unit_start,
        .active_state = fake_unit_state,
};

/* Completes the unit calls that are due, as systemd would. */
static void units_deliver(struct env *e) {
        struct fake_units *u = &e->units;

        for (size_t i = 0; i < u->n_ops;) {
                struct fake_op op = u->ops[i];

                if (op.due > fake_clock_now(e->clock)) {
                        i++;
                        continue;
                }
                memmove(&u->ops[i], &u->ops[i + 1], (u->n_ops - i - 1) * sizeof(op));
                u->n_ops--;
                if (!op.job)
                        op.state_done(0, u->active_state, op.userdata);
                else if (op.start && u->start_error < 0)
                        op.job_done(u->start_error, NULL, "Access denied", op.userdata);
                else if (op.start) {
                        bool ok = streq(u->start_result, "done");

                        u->active_state = ok ? "active" : "failed";
                        op.job_done(0, u->start_result, NULL, op.userdata);
                } else {
                        u->active_state = "inactive";
                        op.job_done(0, "done", NULL, op.userdata);
                }
        }
}

/* The Node PATCHes sent so far, merged into e->node: each is answered with its new
 * resourceVersion, and the new version goes out on the watch. */
static void node_server(struct env *e) {
        for (size_t i = 0; i < fake_transport_n_requests(e->ft); i++) {
                const struct fake_request *r = fake_transport_request(e->ft, i);
                char *obj, *ev;

                if (strcmp(r->method, "PATCH") != 0 || strcmp(r->path, FAKE_API_NODE) != 0)
                        continue;
                if (i < e->patches_seen)
                        continue;
                e->patches_seen = i + 1;
                obj = fake_api_patch_node(e->ft, e->node, &e->node_rv, r->body);
                ev = fake_api_watch_event("MODIFIED", obj);
                fake_transport_push(e->ft, NODES "&watch=1", ev);
                free(ev);
                free(obj);
        }
}

/* One step of the world: answers, unit calls, the Node, then time. */
static void step(struct env *e, uint64_t usec) {
        fake_transport_deliver(e->ft);
        units_deliver(e);
        node_server(e);
        fake_transport_deliver(e->ft);
        fake_clock_advance(e->clock, usec);
}

static void run_for(struct env *e, uint64_t usec, uint64_t step_usec) {
        for (uint64_t t = 0; t < usec && !e->finished; t += step_usec)
                step(e, step_usec);
        step(e, 0);
}

/* node-1 with these drainer.io/ annotations (a JSON object's members, without braces),
 * cordoned and tainted or not, its Ready condition's status READY. */
static char *node_obj_ready(const char *annotations, bool cordoned, bool tainted, const char *ready) {
        char *s;

        assert_true(
                asprintf(
                        &s,
                        "{\"metadata\":{\"name\":\"node-1\",\"uid\":\"f6666666-7777-4888-8999-"
                        "000000000000\","
                        "\"resourceVersion\":\"90\",\"labels\":{\"kubernetes.io/hostname\":\"node-1\","
                        "\"gpu.example.com/present\":\"drainer-paused\"},"
                        "\"annotations\":{%s}},\"spec\":{\"unschedulable\":%s%s},"
                        "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\"}]}}",
                        annotations, cordoned ? "true" : "false",
                        tainted ? ",\"taints\":[{\"key\":\"drainer.io/draining\",\"effect\":\"NoSchedule\"}]"
                                : "",
                        ready) >= 0);
        return s;
}

static char *node_obj(const char *annotations, bool cordoned, bool tainted) {
        return node_obj_ready(annotations, cordoned, tainted, "True");
}

#define STATE_ANNS(phase)                                                                \
        "\"drainer.io/state\":\"" phase "\",\"drainer.io/was-unschedulable\":\"false\"," \
        "\"drainer.io/started-at\":\"2025-06-15T14:00:00Z\",\"drainer.io/state-since\":" \
        "\"2025-06-15T14:00:01Z\""

/* Starts the engine with options o on node (a JSON object, taken) and these pods. */
static void start_node(struct env *e, struct engine_options *o, char *node, char **pods) {
        static const struct engine_callbacks cb = { .on_notice = on_notice, .on_finished = on_finished };
        char *nl;

        e->node = cJSON_Parse(node);
        assert_non_null(e->node);
        e->node_rv = 100;
        assert_true(
                asprintf(&nl,
                         "{\"kind\":\"NodeList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":"
                         "\"100\"},\"items\":[%s]}",
                         node) >= 0);
        free(node);
        fake_transport_expect(e->ft, "POST", EVICTION,
                              &(struct fake_reply){ .status = 201,
                                                    .body = "{\"kind\":\"Status\",\"status\":\"Success\"}",
                                                    .delay_usec = 100 * MS,
                                                    .times = FAKE_FOREVER });
        fake_api_expect_list_and_watch(e->ft, NODES, NODES "&limit=", nl);
        fake_api_expect_list_and_watch(e->ft, PODS, PODS "&limit=", fake_api_list_strv("PodList", pods));
        fake_api_expect_list_and_watch(e->ft, CLAIMS, CLAIMS "?limit=",
                                       fake_api_list_strv("ResourceClaimList", (char *[]){ NULL }));
        fake_api_expect_list_and_watch(e->ft, SLICES, SLICES "&limit=",
                                       fake_api_list_strv("ResourceSliceList", (char *[]){ NULL }));
        fake_transport_expect_json(e->ft, "GET", PDBS "?limit=", 200,
                                   "{\"kind\":\"PodDisruptionBudgetList\",\"apiVersion\":\"policy/v1\","
                                   "\"metadata\":{\"resourceVersion\":\"100\"},\"items\":[]}");
        /* Node PATCHes: answered by node_server(). */
        fake_transport_expect(e->ft, "POST", "/api/v1/namespaces/default/events",
                              &(struct fake_reply){ .status = 201, .body = "{}", .times = FAKE_FOREVER });
        e->units.env = e;
        if (!e->units.active_state)
                e->units.active_state = "inactive";
        if (!e->units.start_result)
                e->units.start_result = "done";
        o->node = "node-1";
        o->units = (struct units){ .ops = &fake_unit_ops, .ctx = &e->units };
        assert_int_equal(engine_new(e->client, fake_transport_base(e->ft), e->ts, o, &cb, e, &e->engine), 0);
        assert_int_equal(engine_start(e->engine), 0);
}

/* The i-th Node PATCH body, or NULL. */
static const char *node_patch(struct env *e, size_t nth) {
        for (size_t i = 0; i < fake_transport_n_requests(e->ft); i++) {
                const struct fake_request *r = fake_transport_request(e->ft, i);

                if (strcmp(r->method, "PATCH") == 0 && strcmp(r->path, "/api/v1/nodes/node-1") == 0 &&
                    nth-- == 0)
                        return r->body;
        }
        return NULL;
}

/* Events posted with this reason. */
static size_t events_with(struct env *e, const char *reason) {
        size_t n = 0;
        char want[64];

        snprintf(want, sizeof(want), "\"reason\":\"%s\"", reason);
        for (size_t i = 0; i < fake_transport_n_requests(e->ft); i++) {
                const struct fake_request *r = fake_transport_request(e->ft, i);

                n += strcmp(r->method, "POST") == 0 && strstr(r->path, "/events") && r->body &&
                     strstr(r->body, want);
        }
        return n;
}

/* A refusal after preflight: one Node PATCH, of drainer.io/message only (nothing else
 * changed), saying what; one DrainerBlocked Event; the engine finished -EPERM. */
static void assert_refused_on_node(struct env *e, const char *says) {
        const char *p = node_patch(e, 0);
        cJSON *j, *ann;

        assert_true(e->finished);
        assert_int_equal(e->result, -EPERM);
        assert_non_null(p);
        assert_null(node_patch(e, 1));
        j = cJSON_Parse(p);
        assert_non_null(j);
        assert_null(cJSON_GetObjectItemCaseSensitive(j, "spec"));
        ann = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "metadata"),
                                               "annotations");
        assert_non_null(ann);
        assert_int_equal(cJSON_GetArraySize(ann), 1);
        assert_non_null(cJSON_GetObjectItemCaseSensitive(ann, "drainer.io/message"));
        assert_null(
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "metadata"), "labels"));
        if (!strstr(p, says))
                fail_msg("the message patch does not say \"%s\": %s", says, p);
        cJSON_Delete(j);
        assert_int_equal(events_with(e, EVENT_REASON_BLOCKED), 1);
        assert_int_equal(events_with(e, EVENT_REASON_FAILED), 0);
        assert_non_null(e->message);
}

/* Item 1: kubectl annotate node N drainer.io/state=restore-drivers
 * 'drainer.io/driver-stop=[{"strategy":"systemd","unit":"reboot.target"}]' must not
 * make drainer start reboot.target, whatever --driver-stop says. */
static void test_forged_unit_is_never_started(void **state) {
        static const struct {
                const struct driver_stop_ops *kind;
                const char *arg;
        } configs[] = {
                { &driver_stop_taint, NULL },
                { &driver_stop_systemd, "dra-driver.service" },
                { &driver_stop_label, "gpu.example.com/present" },
                { &driver_stop_none, NULL },
        };
        struct env *e = *state;

        for (size_t c = 0; c < ELEMENTSOF(configs); c++) {
                struct engine_options o = {
                        .goal = ENGINE_GOAL_UNCORDON,
                        .plan = { .driver_stop = configs[c].kind, .driver_stop_arg = configs[c].arg },
                };
                void *st = e;

                if (c > 0) {
                        /* a fresh world for each configuration */
                        assert_int_equal(teardown(&st), 0);
                        assert_int_equal(setup(&st), 0);
                        e = *state = st;
                }
                start_node(e, &o,
                           node_obj(STATE_ANNS("restore-drivers") ",\"drainer.io/driver-stop\":"
                                                                  "\"[{\\\"strategy\\\":\\\"systemd\\\","
                                                                  "\\\"unit\\\":\\\"reboot.target\\\"}]\"",
                                    true, true),
                           (char *[]){ NULL });
                run_for(e, 5 * SEC, 10 * MS);
                print_message("  --driver-stop %s%s%s: %s\n", configs[c].kind->name,
                              configs[c].arg ? ":" : "", configs[c].arg ? configs[c].arg : "",
                              e->message ? e->message : "(not finished)");
                assert_int_equal(e->units.starts, 0);
                assert_int_equal(e->units.stops, 0);
                if (configs[c].kind != &driver_stop_systemd)
                        assert_int_equal(e->units.queries, 0);
                else
                        assert_true(e->units.queries == 0 ||
                                    streq(e->units.last_unit, "dra-driver.service"));
                assert_refused_on_node(e, "reboot.target");
                assert_string_equal(e->needs_flag, "--driver-stop systemd:reboot.target");
                assert_true(e->summary.changed);
                /* the taint, the cordon, the record: all still there */
                assert_int_equal(fake_transport_count(e->ft, "POST", EVICTION), 0);
        }
}

/* Item 1: the label strategy sets back only the key the configuration names. */
static void test_forged_label_key_is_never_set(void **state) {
        struct env *e = *state;
        struct engine_options o = {
                .goal = ENGINE_GOAL_UNCORDON,
                .plan = { .driver_stop = &driver_stop_label, .driver_stop_arg = "gpu.example.com/present" },
        };

        start_node(e, &o,
                   node_obj(STATE_ANNS("restore-drivers") ",\"drainer.io/driver-stop\":"
                                                          "\"[{\\\"strategy\\\":\\\"label\\\",\\\"key\\\":"
                                                          "\\\"node-role.kubernetes.io/control-plane\\\","
                                                          "\\\"old\\\":\\\"\\\"}]\"",
                            true, false),
                   (char *[]){ NULL });
        run_for(e, 5 * SEC, 10 * MS);
        assert_refused_on_node(e, "node-role.kubernetes.io/control-plane");
        assert_string_equal(e->needs_flag, "--driver-stop label:node-role.kubernetes.io/control-plane");
}

/* Item 1: the configured unit and key are undone as recorded (the rule lets them through). */
static void test_configured_unit_is_started(void **state) {
        struct env *e = *state;
        struct engine_options o = {
                .goal = ENGINE_GOAL_UNCORDON,
                .plan = { .driver_stop = &driver_stop_systemd, .driver_stop_arg = "dra-driver.service" },
        };

        start_node(e, &o,
                   node_obj(STATE_ANNS("restore-drivers") ",\"drainer.io/driver-stop\":"
                                                          "\"[{\\\"strategy\\\":\\\"systemd\\\","
                                                          "\\\"unit\\\":\\\"dra-driver.service\\\"}]\"",
                            true, false),
                   (char *[]){ NULL });
        run_for(e, 5 * SEC, 10 * MS);
        assert_int_equal(e->units.starts, 1);
        assert_string_equal(e->units.last_unit, "dra-driver.service");
        assert_true(e->finished);
        assert_int_equal(e->result, 0);
        assert_null(e->needs_flag);
}

/* Item 1: a unit whose start fails is retried with backoff (1, 2, 4 ... s, at most
 * 30 s), not at once: over a minute a handful of StartUnit calls. Also when the call
 * itself fails (polkit refusing, say). */
static void test_failing_unit_backs_off(void **state) {
        struct env *e = *state;

        for (int variant = 0; variant < 2; variant++) {
                struct engine_options o = {
                        .goal = ENGINE_GOAL_UNCORDON,
                        .plan = { .driver_stop = &driver_stop_systemd, .driver_stop_arg = "broken.service" },
                };
                void *st = e;

                if (variant > 0) {
                        assert_int_equal(teardown(&st), 0);
                        assert_int_equal(setup(&st), 0);
                        e = *state = st;
                        e->units.start_error = -EACCES;
                }
                e->units.active_state = "failed";
                e->units.start_result = "failed";
                start_node(e, &o,
                           node_obj(STATE_ANNS("restore-drivers") ",\"drainer.io/driver-stop\":"
                                                                  "\"[{\\\"strategy\\\":\\\"systemd\\\","
                                                                  "\\\"unit\\\":\\\"broken.service\\\"}]\"",
                                    true, false),
                           (char *[]){ NULL });
                run_for(e, 60 * SEC, 10 * MS);
                print_message("  %s: %u StartUnit calls in 60 s, %u state queries\n",
                              variant ? "StartUnit refused" : "start job failed", e->units.starts,
                              e->units.queries);
                assert_false(e->finished);
                /* 0, 1, 3, 7, 15, 31 s (+ the job's and query's 40 ms each time) */
                assert_in_range(e->units.starts, 5, 7);
                assert_true(e->units.queries <= 2 * e->units.starts + 1);
                for (unsigned i = 2; i < e->units.starts && i < 6; i++) {
                        uint64_t gap = e->units.start_at[i] - e->units.start_at[i - 1],
                                 prev = e->units.start_at[i - 1] - e->units.start_at[i - 2];

                        assert_true(gap >= 2 * prev - 100 * MS);
                }
                assert_true(e->units.start_at[e->units.starts - 1] -
                                    e->units.start_at[e->units.starts - 2] <=
                            30 * SEC + 200 * MS);
        }
}

/* A pod of node-1: extra metadata (labels, ownerReferences) and spec members given as
 * JSON members, Ready or not. */
static char *pod_with(const char *name, const char *meta, const char *spec, bool ready) {
        return fake_api_pod(&(const struct fake_pod){ .name = name,
                                                      .meta = meta,
                                                      .spec = spec,
                                                      .ready = ready ? "True" : "False",
                                                      .pod_ip = "10.244.1.9" });
}

#define OWNED_BY_RS FAKE_OWNED_BY_RS("x-rs", "rs-x")
#define OWNED_BY_DS FAKE_OWNED_BY_DS("mon", "ds-mon")

/* Item 2: with drainer.io/state written by hand (and the cordon and taint), the
 * eviction rules still hold in every phase: a pod without a controller (no --force)
 * and one with emptyDir data (no --delete-emptydir-data) are blockers; nothing is
 * evicted, the node stays in its phase, the message and a DrainerBlocked Event say why. */
static void test_forged_phase_keeps_eviction_rules(void **state) {
        static const char *const phases[] = {
                "cordon", "evict-claim-holders", "evict-rest", "wait-released", "stop-drivers",
        };
        struct env *e = *state;
        char anns[512];

        for (size_t i = 0; i < ELEMENTSOF(phases); i++) {
                struct engine_options o = { .goal = ENGINE_GOAL_DRAIN, .grace_seconds = 1 };
                void *st = e;

                if (i > 0) {
                        assert_int_equal(teardown(&st), 0);
                        assert_int_equal(setup(&st), 0);
                        e = *state = st;
                }
                snprintf(anns, sizeof(anns),
                         "\"drainer.io/state\":\"%s\",\"drainer.io/was-unschedulable\":\"false\","
                         "\"drainer.io/started-at\":\"2025-06-15T14:00:00Z\",\"drainer.io/state-since\":"
                         "\"2025-06-15T14:00:01Z\"",
                         phases[i]);
                start_node(e, &o, node_obj(anns, true, true),
                           (char *[]){ pod_with("bare", "\"labels\":{\"app\":\"bare\"}", NULL, true),
                                       pod_with("scratch", "\"labels\":{\"app\":\"scratch\"}," OWNED_BY_RS,
                                                "\"volumes\":[{\"name\":\"s\",\"emptyDir\":{}}]", true),
                                       NULL });
                run_for(e, 5 * SEC, 10 * MS);
                print_message("  %s: %s\n", phases[i], e->message ? e->message : "(not finished)");
                assert_int_equal(fake_transport_count(e->ft, "POST", EVICTION), 0);
                assert_refused_on_node(e, "--force");
                assert_non_null(strstr(e->message, "demo/bare"));
                assert_non_null(strstr(e->message, "--delete-emptydir-data"));
                assert_non_null(strstr(e->message, phases[i]));
                assert_null(e->needs_flag);
                assert_true(e->summary.changed);
                assert_non_null(e->summary.plan);
        }
}

/* ... and the flags lift them: the same forged evict-rest with --force and
 * --delete-emptydir-data evicts both. */
static void test_forged_phase_flags_lift_rules(void **state) {
        struct env *e = *state;
        struct engine_options o = {
                .goal = ENGINE_GOAL_DRAIN,
                .grace_seconds = 1,
                .plan = { .force = true, .delete_emptydir_data = true },
        };

        start_node(e, &o, node_obj(STATE_ANNS("evict-rest"), true, true),
                   (char *[]){ pod_with("bare", "\"labels\":{\"app\":\"bare\"}", NULL, true),
                               pod_with("scratch", "\"labels\":{\"app\":\"scratch\"}," OWNED_BY_RS,
                                        "\"volumes\":[{\"name\":\"s\",\"emptyDir\":{}}]", true),
                               NULL });
        run_for(e, 2 * SEC, 10 * MS);
        assert_int_equal(fake_transport_count(e->ft, "POST", EVICTION "bare/eviction"), 1);
        assert_int_equal(fake_transport_count(e->ft, "POST", EVICTION "scratch/eviction"), 1);
        assert_int_equal(events_with(e, EVENT_REASON_BLOCKED), 0);
}

/* Item 2: drainer.io/state=drained written by hand is not believed: with a pod still
 * on the node, drain goes back to the evictions (and evicts it) instead of exiting 0;
 * a node that is drained indeed still finishes at once. */
static void test_forged_drained_is_not_believed(void **state) {
        struct env *e = *state;
        void *st = e;

        for (int variant = 0; variant < 2; variant++) {
                struct engine_options o = { .goal = ENGINE_GOAL_DRAIN, .grace_seconds = 1 };

                if (variant > 0) {
                        assert_int_equal(teardown(&st), 0);
                        assert_int_equal(setup(&st), 0);
                        e = *state = st;
                }
                start_node(e, &o, node_obj(STATE_ANNS("drained"), true, true),
                           variant == 0 ? (char *[]){ pod_json("web-a", "web"), NULL } : (char *[]){ NULL });
                run_for(e, 2 * SEC, 10 * MS);
                if (variant == 0) {
                        assert_non_null(node_patch(e, 0));
                        assert_non_null(
                                strstr(node_patch(e, 0), "\"drainer.io/state\":\"evict-claim-holders\""));
                        assert_int_equal(fake_transport_count(e->ft, "POST", EVICTION "web-a/eviction"), 1);
                        assert_false(e->finished && e->result == 0);
                } else {
                        assert_true(e->finished);
                        assert_int_equal(e->result, 0);
                        assert_null(node_patch(e, 0));
                        /* no driver was recorded, none is published: none was stopped */
                        assert_string_equal(
                                e->message,
                                "node node-1 is drained (no DRA driver was on the node to stop)");
                }
        }
}

/* Item 2: the other rules too: a claim-holding DaemonSet pod that tolerates the drain
 * taint, and a claim holder left out by --pod-selector. */
static void test_forged_phase_other_rules(void **state) {
        struct env *e = *state;
        struct selector *sel = NULL;

        for (int variant = 0; variant < 2; variant++) {
                struct engine_options o = { .goal = ENGINE_GOAL_DRAIN, .grace_seconds = 1 };
                void *st = e;
                char *pod;

                if (variant > 0) {
                        assert_int_equal(teardown(&st), 0);
                        assert_int_equal(setup(&st), 0);
                        e = *state = st;
                        assert_int_equal(selector_parse("app=web", &sel, NULL), 0);
                        o.plan.pod_selector = sel;
                        pod = pod_with("gpu", "\"labels\":{\"app\":\"gpu\"}," OWNED_BY_RS,
                                       "\"resourceClaims\":[{\"name\":\"g\",\"resourceClaimName\":\"c\"}]",
                                       true);
                } else
                        pod = pod_with("mon", "\"labels\":{\"app\":\"mon\"}," OWNED_BY_DS,
                                       "\"resourceClaims\":[{\"name\":\"g\",\"resourceClaimName\":\"c\"}],"
                                       "\"tolerations\":[{\"key\":\"drainer.io/draining\",\"operator\":"
                                       "\"Exists\"}]",
                                       true);
                start_node(e, &o, node_obj(STATE_ANNS("evict-claim-holders"), true, true),
                           (char *[]){ pod, NULL });
                run_for(e, 5 * SEC, 10 * MS);
                print_message("  %s: %s\n", variant ? "--pod-selector" : "tolerating DaemonSet",
                              e->message ? e->message : "(not finished)");
                assert_int_equal(fake_transport_count(e->ft, "POST", EVICTION), 0);
                assert_refused_on_node(e, variant ? "pod-selector" : "tolerates");
        }
        selector_free(sel);
}

/* Item 6: a pod with a driver's labels that no DaemonSet controls is workload: evicted
 * with the rest (not kept for the driver stop), and, not Ready, no preflight blocker. */
static void test_lookalike_driver_is_workload(void **state) {
        struct env *e = *state;
        struct selector **sels = NULL;
        size_t n = 0;
        void *st = e;

        assert_int_equal(selectors_parse_strv(claims_default_driver_selectors, &sels, &n, NULL), 0);
        for (int variant = 0; variant < 2; variant++) {
                struct engine_options o = {
                        .goal = ENGINE_GOAL_DRAIN,
                        .grace_seconds = 1,
                        .plan = { .driver_selectors = (const struct selector *const *)sels,
                                  .n_driver_selectors = n },
                };

                if (variant > 0) {
                        assert_int_equal(teardown(&st), 0);
                        assert_int_equal(setup(&st), 0);
                        e = *state = st;
                }
                start_node(e, &o,
                           variant == 0 ? node_obj(STATE_ANNS("evict-rest"), true, true)
                                        : node_obj("\"drainer.io/request\":\"drain\"", false, false),
                           (char *[]){ pod_with("fake-driver",
                                                "\"labels\":{\"app.kubernetes.io/"
                                                "component\":\"kubeletplugin\"}," OWNED_BY_RS,
                                                NULL, false),
                                       NULL });
                run_for(e, 2 * SEC, 10 * MS);
                if (variant == 0) {
                        /* evicted in evict-rest, as ordinary workload */
                        assert_int_equal(
                                fake_transport_count(e->ft, "POST", EVICTION "fake-driver/eviction"), 1);
                } else {
                        /* preflight: not a driver, so not an unhealthy one: the node is cordoned */
                        assert_int_equal(events_with(e, EVENT_REASON_BLOCKED), 0);
                        assert_non_null(node_patch(e, 0));
                        assert_non_null(strstr(node_patch(e, 0), "\"unschedulable\":true"));
                }
        }
        selectors_free(sels, n);
}

/* A kubelet killed during a drain: the evicted pods stay
 * Terminating until it is back. Once the node is not Ready, what the drain waits for
 * says so, on the Node and in a timeout's message; while it is Ready, it does not. */
/* Progress reaches the Node at most every 10 s: a run that finds the
 * node waiting writes its message once, 10 s after its start, not at once and not
 * again while it reads the same. */
static void test_progress_written_once_per_interval(void **state) {
        struct env *e = *state;
        struct engine_options o = { .goal = ENGINE_GOAL_DRAIN,
                                    .grace_seconds = 1,
                                    .timeout_usec = 60 * SEC };
        uint64_t t0 = fake_clock_now(e->clock);
        size_t writes = 0;

        start_node(
                e, &o, node_obj_ready(STATE_ANNS("wait-released"), true, true, "True"),
                (char *[]){ pod_with("web-a", "\"deletionTimestamp\":\"2025-06-15T14:00:02Z\"," OWNED_BY_RS,
                                     NULL, false),
                            NULL });
        run_for(e, 35 * SEC, 100 * MS);
        for (size_t i = 0; i < fake_transport_n_requests(e->ft); i++) {
                const struct fake_request *r = fake_transport_request(e->ft, i);

                if (strcmp(r->method, "PATCH") != 0 || strcmp(r->path, "/api/v1/nodes/node-1") != 0)
                        continue;
                print_message("  message write at %.1f s: %s\n", (double)(r->at_usec - t0) / SEC, r->body);
                assert_non_null(strstr(r->body, "waiting: 1 pod and 0 ResourceClaims left on the node"));
                assert_null(strstr(r->body, "drainer.io/state"));
                assert_true(r->at_usec >= t0 + 10 * SEC);
                writes++;
        }
        assert_int_equal(writes, 1);
        assert_false(e->finished);
}

static void test_not_ready_node_is_named_while_waiting(void **state) {
        struct env *e = *state;
        void *st = e;

        for (int variant = 0; variant < 2; variant++) {
                struct engine_options o = { .goal = ENGINE_GOAL_DRAIN,
                                            .grace_seconds = 1,
                                            .timeout_usec = 15 * SEC };
                const char *note = "the node is not Ready (its kubelet is down or not reporting)";
                /* variant 0: the node's Ready condition is Unknown (its kubelet is gone) */
                char *node = node_obj_ready(STATE_ANNS("wait-released"), true, true,
                                            variant == 0 ? "Unknown" : "True");
                bool on_node = false;

                if (variant > 0) {
                        assert_int_equal(teardown(&st), 0);
                        assert_int_equal(setup(&st), 0);
                        e = *state = st;
                }
                start_node(
                        e, &o, node,
                        (char *[]){ pod_with("web-a",
                                             "\"deletionTimestamp\":\"2025-06-15T14:00:02Z\"," OWNED_BY_RS,
                                             NULL, false),
                                    NULL });
                run_for(e, 20 * SEC, 100 * MS);
                for (size_t i = 0; node_patch(e, i); i++)
                        on_node = on_node || strstr(node_patch(e, i), note);
                assert_true(e->finished);
                assert_int_equal(e->result, -ETIMEDOUT);
                assert_non_null(e->message);
                assert_non_null(strstr(e->message, "waiting: 1 pod and 0 ResourceClaims left on the node"));
                if (variant == 0) {
                        assert_true(on_node);
                        assert_non_null(strstr(e->message, note));
                } else {
                        assert_false(on_node);
                        assert_null(strstr(e->message, note));
                }
        }
}

/* An API server that never answers: the run times out without having read the Node, and
 * its summary says so (node_seen false) rather than claiming a Ready node; one that
 * answers says what it saw. */
static void test_summary_claims_only_the_node_it_read(void **state) {
        static const struct engine_callbacks cb = { .on_finished = on_finished };
        struct env *e = *state;
        struct engine_options o = { .goal = ENGINE_GOAL_DRAIN, .timeout_usec = 5 * SEC, .node = "node-1" };

        /* no expectation: every request stays unanswered */
        assert_int_equal(engine_new(e->client, fake_transport_base(e->ft), e->ts, &o, &cb, e, &e->engine),
                         0);
        assert_int_equal(engine_start(e->engine), 0);
        run_for(e, 10 * SEC, 100 * MS);
        assert_true(e->finished);
        assert_int_equal(e->result, -ETIMEDOUT);
        assert_false(e->summary.node_seen);
        assert_false(e->summary.changed);
}

/* Without --timeout, a one-shot run (unread_timeout_usec) still ends when the Node was
 * never read: -ETIMEDOUT at the bound, the message says nothing was changed. */
static void test_unread_node_gives_up(void **state) {
        static const struct engine_callbacks cb = { .on_finished = on_finished };
        struct env *e = *state;
        struct engine_options o = { .goal = ENGINE_GOAL_DRAIN,
                                    .unread_timeout_usec = 30 * SEC,
                                    .node = "node-1" };

        assert_int_equal(engine_new(e->client, fake_transport_base(e->ft), e->ts, &o, &cb, e, &e->engine),
                         0);
        assert_int_equal(engine_start(e->engine), 0);
        run_for(e, 29 * SEC, 100 * MS);
        assert_false(e->finished);
        run_for(e, 2 * SEC, 100 * MS);
        assert_true(e->finished);
        assert_int_equal(e->result, -ETIMEDOUT);
        assert_non_null(e->message);
        assert_non_null(
                strstr(e->message, "node node-1 not read in 30 s: nothing was read, nothing was changed"));
        assert_false(e->summary.node_seen);
        assert_false(e->summary.changed);
}

/* Once the Node was read, the bound no longer applies: a drain that waits for a pod
 * longer than it goes on (only --timeout would end it). */
static void test_unread_bound_ends_once_read(void **state) {
        struct env *e = *state;
        struct engine_options o = { .goal = ENGINE_GOAL_DRAIN,
                                    .grace_seconds = 1,
                                    .unread_timeout_usec = 5 * SEC };

        start_node(
                e, &o, node_obj_ready(STATE_ANNS("wait-released"), true, true, "True"),
                (char *[]){ pod_with("web-a", "\"deletionTimestamp\":\"2025-06-15T14:00:02Z\"," OWNED_BY_RS,
                                     NULL, false),
                            NULL });
        run_for(e, 20 * SEC, 100 * MS);
        assert_false(e->finished);
}

static void test_summary_node_seen_when_read(void **state) {
        struct env *e = *state;
        struct engine_options o = { .goal = ENGINE_GOAL_DRAIN, .grace_seconds = 1, .timeout_usec = 5 * SEC };

        start_node(
                e, &o, node_obj_ready(STATE_ANNS("wait-released"), true, true, "Unknown"),
                (char *[]){ pod_with("web-a", "\"deletionTimestamp\":\"2025-06-15T14:00:02Z\"," OWNED_BY_RS,
                                     NULL, false),
                            NULL });
        run_for(e, 10 * SEC, 100 * MS);
        assert_true(e->finished);
        assert_int_equal(e->result, -ETIMEDOUT);
        assert_true(e->summary.node_seen);
        assert_true(e->summary.node_not_ready);
}

/* node-1 as node_obj_ready, with these taints (JSON array members, without brackets)
 * and its Ready condition's lastTransitionTime. */
static char *node_obj_taints(const char *annotations, const char *taints, const char *ready,
                             const char *since) {
        char *s;

        assert_true(asprintf(&s,
                             "{\"metadata\":{\"name\":\"node-1\",\"uid\":\"f6666666-7777-4888-8999-"
                             "000000000000\",\"resourceVersion\":\"90\",\"labels\":{\"kubernetes.io/"
                             "hostname\":\"node-1\"},\"annotations\":{%s}},\"spec\":{\"unschedulable\":true,"
                             "\"taints\":[%s]},\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":"
                             "\"%s\",\"lastTransitionTime\":\"%s\"}]}}",
                             annotations, taints, ready, since) >= 0);
        return s;
}

#define DRAIN_TAINT "{\"key\":\"drainer.io/draining\",\"effect\":\"NoSchedule\"}"
#define OOS_TAINT                        \
        "{\"key\":\"node.kubernetes.io/" \
        "out-of-service\",\"value\":\"nodeshutdown\",\"effect\":\"NoExecute\"}"
/* The fake wall clock at T0 is 2025-06-15T15:06:40Z (TEST_API_REALTIME). */
#define NOT_READY_5S_AGO "2025-06-15T15:06:35Z"

/* The Node's Ready condition changes (as the node lifecycle controller or the kubelet
 * writes it): the new version goes out on the watch. */
static void node_set_ready(struct env *e, const char *status, const char *since) {
        cJSON *c = cJSON_GetArrayItem(
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e->node, "status"),
                                                 "conditions"),
                0);
        cJSON *meta = cJSON_GetObjectItemCaseSensitive(e->node, "metadata");
        char rv[32], *obj, *ev;

        cJSON_ReplaceItemInObjectCaseSensitive(c, "status", cJSON_CreateString(status));
        cJSON_ReplaceItemInObjectCaseSensitive(c, "lastTransitionTime", cJSON_CreateString(since));
        snprintf(rv, sizeof(rv), "%u", ++e->node_rv);
        cJSON_ReplaceItemInObjectCaseSensitive(meta, "resourceVersion", cJSON_CreateString(rv));
        obj = cJSON_PrintUnformatted(e->node);
        ev = fake_api_watch_event("MODIFIED", obj);
        fake_transport_push(e->ft, NODES "&watch=1", ev);
        free(ev);
        free(obj);
}

/* The Node PATCHes whose taint list has the out-of-service taint (that add it, or
 * rewrite the list keeping it). */
static size_t oos_taint_patches(struct env *e, uint64_t *ret_first_at) {
        size_t n = 0;

        for (size_t i = 0; i < fake_transport_n_requests(e->ft); i++) {
                const struct fake_request *r = fake_transport_request(e->ft, i);

                if (strcmp(r->method, "PATCH") != 0 || strcmp(r->path, "/api/v1/nodes/node-1") != 0 ||
                    !strstr(r->body, "\"taints\":") ||
                    !strstr(strstr(r->body, "\"taints\":"), "\"key\":\"node.kubernetes.io/out-of-service\""))
                        continue;
                if (n++ == 0 && ret_first_at)
                        *ret_first_at = r->at_usec;
        }
        return n;
}

/* --out-of-service, first half: the node goes not Ready during a drain: one DrainerNodeNotReady
 * Event saying its claims will not be released, the drain keeps waiting (no
 * force-deletion, no driver stop), the progress says why; Ready again: a
 * DrainerNodeReady Event, and the note is gone. */
static void test_not_ready_event_and_back(void **state) {
        struct env *e = *state;
        struct engine_options o = { .goal = ENGINE_GOAL_DRAIN, .grace_seconds = 1 };
        const char *note = "nothing unprepares their ResourceClaims, so they are not released";

        start_node(
                e, &o, node_obj_taints(STATE_ANNS("wait-released"), DRAIN_TAINT, "True", NOT_READY_5S_AGO),
                (char *[]){ pod_with("web-a", "\"deletionTimestamp\":\"2025-06-15T14:00:02Z\"," OWNED_BY_RS,
                                     NULL, false),
                            NULL });
        run_for(e, 2 * SEC, 100 * MS);
        assert_int_equal(events_with(e, EVENT_REASON_NOT_READY), 0);
        node_set_ready(e, "Unknown", "2025-06-15T15:06:41Z");
        run_for(e, 15 * SEC, 100 * MS);
        assert_int_equal(events_with(e, EVENT_REASON_NOT_READY), 1);
        assert_non_null(node_patch(e, 0));
        assert_non_null(strstr(node_patch(e, 0), note));
        assert_int_equal(oos_taint_patches(e, NULL), 0); /* not without --out-of-service */
        assert_int_equal(fake_transport_count(e->ft, "DELETE", "/api/v1/namespaces/"), 0);
        assert_false(e->finished);
        node_set_ready(e, "True", "2025-06-15T15:07:00Z");
        run_for(e, 12 * SEC, 100 * MS);
        assert_int_equal(events_with(e, EVENT_REASON_READY), 1);
        assert_int_equal(events_with(e, EVENT_REASON_NOT_READY), 1);
        {
                const char *last = NULL;

                for (size_t i = 0; node_patch(e, i); i++)
                        last = node_patch(e, i);
                print_message("  last message write: %s\n", last);
                assert_null(strstr(last, note));
        }
        assert_false(e->finished);
}

/* (b) --out-of-service: the taint goes on only once the node has been not Ready for
 * --out-of-service-after (counted from the Ready condition's lastTransitionTime), in
 * one patch with drainer.io/out-of-service, with a DrainerOutOfService Event; never on
 * a Ready node; never twice. */
static void test_out_of_service_after_duration(void **state) {
        struct env *e = *state;
        void *st = e;

        for (int variant = 0; variant < 2; variant++) {
                struct engine_options o = { .goal = ENGINE_GOAL_DRAIN,
                                            .grace_seconds = 1,
                                            .out_of_service = true,
                                            .out_of_service_after_usec = 20 * SEC };
                uint64_t t0, at = 0;

                if (variant > 0) {
                        assert_int_equal(teardown(&st), 0);
                        assert_int_equal(setup(&st), 0);
                        e = *state = st;
                }
                t0 = fake_clock_now(e->clock);
                /* variant 0: not Ready for 5 s at the start; 1: Ready throughout */
                start_node(
                        e, &o,
                        node_obj_taints(STATE_ANNS("wait-released"), DRAIN_TAINT,
                                        variant == 0 ? "Unknown" : "True", NOT_READY_5S_AGO),
                        (char *[]){ pod_with("gpu",
                                             "\"deletionTimestamp\":\"2025-06-15T14:00:02Z\"," OWNED_BY_RS,
                                             "\"resourceClaims\":[{\"name\":\"g\",\"resourceClaimName\":"
                                             "\"c\"}]",
                                             false),
                                    NULL });
                run_for(e, 60 * SEC, 100 * MS);
                if (variant == 1) {
                        assert_int_equal(oos_taint_patches(e, NULL), 0);
                        assert_int_equal(events_with(e, EVENT_REASON_OUT_OF_SERVICE), 0);
                        continue;
                }
                assert_int_equal(oos_taint_patches(e, &at), 1);
                print_message("  taint patch at %.1f s (not Ready since 5 s before the start, after 20 s)\n",
                              (double)(at - t0) / SEC);
                assert_true(at >= t0 + 15 * SEC);
                assert_true(at < t0 + 16 * SEC);
                assert_int_equal(events_with(e, EVENT_REASON_OUT_OF_SERVICE), 1);
                {
                        const cJSON *taints = cJSON_GetObjectItemCaseSensitive(
                                cJSON_GetObjectItemCaseSensitive(e->node, "spec"), "taints");
                        const cJSON *ann = cJSON_GetObjectItemCaseSensitive(
                                cJSON_GetObjectItemCaseSensitive(e->node, "metadata"), "annotations");
                        char *t = cJSON_PrintUnformatted(taints);

                        print_message("  taints: %s\n", t);
                        assert_non_null(strstr(t, "\"key\":\"node.kubernetes.io/out-of-service\",\"value\":"
                                                  "\"nodeshutdown\",\"effect\":\"NoExecute\""));
                        assert_non_null(strstr(t, "drainer.io/draining"));
                        free(t);
                        assert_non_null(cJSON_GetObjectItemCaseSensitive(ann, "drainer.io/out-of-service"));
                }
                assert_int_equal(fake_transport_count(e->ft, "DELETE", "/api/v1/namespaces/"), 0);
                assert_false(e->finished);
        }
}

/* (b) uncordon: drainer's out-of-service taint stays while the node is not Ready
 * (refused, nothing changed but the message); once Ready, it goes with the drain taint
 * and drainer.io/out-of-service. A taint drainer did not apply is left. */
static void test_uncordon_out_of_service(void **state) {
        struct env *e = *state;
        void *st = e;

        for (int variant = 0; variant < 3; variant++) {
                struct engine_options o = { .goal = ENGINE_GOAL_UNCORDON };
                const cJSON *taints;
                char *t;

                if (variant > 0) {
                        assert_int_equal(teardown(&st), 0);
                        assert_int_equal(setup(&st), 0);
                        e = *state = st;
                }
                /* 0: ours, not Ready; 1: ours, Ready; 2: someone else's, Ready */
                start_node(e, &o,
                           node_obj_taints(variant < 2
                                                   ? STATE_ANNS("drained") ",\"drainer.io/out-of-service\":"
                                                                           "\"2025-06-15T15:00:00Z\""
                                                   : STATE_ANNS("drained"),
                                           DRAIN_TAINT "," OOS_TAINT, variant == 0 ? "Unknown" : "True",
                                           NOT_READY_5S_AGO),
                           (char *[]){ NULL });
                run_for(e, 5 * SEC, 10 * MS);
                taints = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e->node, "spec"),
                                                          "taints");
                t = cJSON_PrintUnformatted(taints);
                print_message("  variant %d: result %d, taints %s, message %s\n", variant, e->result,
                              t ? t : "null", e->message ? e->message : "-");
                assert_true(e->finished);
                if (variant == 0) {
                        assert_int_equal(e->result, -EPERM);
                        assert_non_null(strstr(t, "node.kubernetes.io/out-of-service"));
                        assert_non_null(strstr(t, "drainer.io/draining"));
                        assert_int_equal(oos_taint_patches(e, NULL), 0);
                        assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
                                cJSON_GetObjectItemCaseSensitive(e->node, "spec"), "unschedulable")));
                        assert_non_null(strstr(e->message, "is not Ready"));
                        assert_int_equal(events_with(e, EVENT_REASON_BLOCKED), 1);
                } else if (variant == 1) {
                        assert_int_equal(e->result, 0);
                        assert_null(t);
                        assert_int_equal(events_with(e, EVENT_REASON_OUT_OF_SERVICE), 1);
                        assert_null(cJSON_GetObjectItemCaseSensitive(
                                cJSON_GetObjectItemCaseSensitive(
                                        cJSON_GetObjectItemCaseSensitive(e->node, "metadata"),
                                        "annotations"),
                                "drainer.io/out-of-service"));
                } else {
                        assert_int_equal(e->result, 0);
                        assert_non_null(t);
                        assert_non_null(strstr(t, "node.kubernetes.io/out-of-service"));
                        assert_null(strstr(t, "drainer.io/draining"));
                        assert_int_equal(events_with(e, EVENT_REASON_OUT_OF_SERVICE), 0);
                }
                free(t);
        }
}

/* The phase the Node shows after a stop (what `drain -o json` reports when interrupted):
 * a phase patch answered before the stop, or in flight at it and answered within the
 * stop's wait, is the Node's phase even though the watch has not brought it (the
 * Node here never changes on the watch); a patch not answered in time is cancelled and
 * the phase is the one last seen. delay: the patch's answer time; stop_at: when
 * engine_stop comes after the patch went out. */
static void stop_around_phase_patch(struct env *e, uint64_t delay, uint64_t stop_at, bool known) {
        enum drain_phase seen = _DRAIN_PHASE_MAX, sent = _DRAIN_PHASE_MAX;
        const struct fake_request *patch = NULL;
        uint64_t cancels;

        fake_transport_expect(e->ft, "PATCH", "/api/v1/nodes/node-1",
                              &(struct fake_reply){ .status = 200,
                                                    .body = "{\"metadata\":{\"resourceVersion\":\"999\"}}",
                                                    .delay_usec = delay,
                                                    .times = 1 });
        start_in(e, "evict-rest", (char *[]){ NULL }, (char *[]){ NULL });
        for (int i = 0; i < 100 && !patch; i++) {
                fake_transport_deliver(e->ft);
                fake_clock_advance(e->clock, 1 * MS);
                for (size_t k = 0; k < fake_transport_n_requests(e->ft) && !patch; k++) {
                        const struct fake_request *r = fake_transport_request(e->ft, k);

                        if (strcmp(r->method, "PATCH") == 0 && strcmp(r->path, "/api/v1/nodes/node-1") == 0)
                                patch = r;
                }
        }
        assert_non_null(patch);
        {
                _cleanup_(cJSON_Deletep) cJSON *b = cJSON_Parse(patch->body);
                const char *st = json_str(b, "metadata.annotations.drainer\\.io/state");

                if (!st) {
                        cJSON *a = cJSON_GetObjectItemCaseSensitive(
                                cJSON_GetObjectItemCaseSensitive(b, "metadata"), "annotations");

                        st = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "drainer.io/state"));
                }
                assert_non_null(st);
                sent = drain_phase_from_string(st);
                print_message("  the patch sets %s; answered after %.1f s, stop after %.1f s\n", st,
                              (double)delay / SEC, (double)stop_at / SEC);
        }
        assert_int_not_equal(sent, DRAIN_PHASE_EVICT_REST);
        for (uint64_t t = 0; t < stop_at; t += 10 * MS) {
                fake_transport_deliver(e->ft);
                fake_clock_advance(e->clock, 10 * MS);
        }
        cancels = fake_transport_cancels(e->ft);
        engine_stop(e->engine);
        for (int i = 0; i < 500 && !engine_idle(e->engine); i++) {
                fake_transport_deliver(e->ft);
                fake_clock_advance(e->clock, 10 * MS);
        }
        assert_true(engine_idle(e->engine));
        assert_true(engine_node_phase(e->engine, &seen));
        print_message("  after the stop the Node shows %s (%zu cancelled)\n", drain_phase_to_string(seen),
                      (size_t)(fake_transport_cancels(e->ft) - cancels));
        assert_int_equal(seen, known ? sent : DRAIN_PHASE_EVICT_REST);
}

static void test_stop_after_phase_patch_answered(void **state) {
        stop_around_phase_patch(*state, 0, 100 * MS, true);
}

static void test_stop_during_phase_patch(void **state) {
        stop_around_phase_patch(*state, 1 * SEC, 100 * MS, true);
}

static void test_stop_during_phase_patch_not_answered(void **state) {
        stop_around_phase_patch(*state, 30 * SEC, 100 * MS, false);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_one_eviction_per_budget_at_a_time, setup, teardown),
                cmocka_unit_test_setup_teardown(test_trail_of_evictions, setup, teardown),
                cmocka_unit_test_setup_teardown(test_trail_of_cordon, setup, teardown),
                cmocka_unit_test_setup_teardown(test_later_group_waits_for_answers_not_watch, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_budgets_apart_go_together, setup, teardown),
                cmocka_unit_test_setup_teardown(test_terminal_deleting_pod_holds_driver_stop, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_forged_unit_is_never_started, setup, teardown),
                cmocka_unit_test_setup_teardown(test_forged_label_key_is_never_set, setup, teardown),
                cmocka_unit_test_setup_teardown(test_configured_unit_is_started, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failing_unit_backs_off, setup, teardown),
                cmocka_unit_test_setup_teardown(test_forged_phase_keeps_eviction_rules, setup, teardown),
                cmocka_unit_test_setup_teardown(test_forged_phase_flags_lift_rules, setup, teardown),
                cmocka_unit_test_setup_teardown(test_forged_phase_other_rules, setup, teardown),
                cmocka_unit_test_setup_teardown(test_forged_drained_is_not_believed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_lookalike_driver_is_workload, setup, teardown),
                cmocka_unit_test_setup_teardown(test_progress_written_once_per_interval, setup, teardown),
                cmocka_unit_test_setup_teardown(test_not_ready_node_is_named_while_waiting, setup, teardown),
                cmocka_unit_test_setup_teardown(test_not_ready_event_and_back, setup, teardown),
                cmocka_unit_test_setup_teardown(test_summary_claims_only_the_node_it_read, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unread_node_gives_up, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unread_bound_ends_once_read, setup, teardown),
                cmocka_unit_test_setup_teardown(test_summary_node_seen_when_read, setup, teardown),
                cmocka_unit_test_setup_teardown(test_out_of_service_after_duration, setup, teardown),
                cmocka_unit_test_setup_teardown(test_uncordon_out_of_service, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_after_phase_patch_answered, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_during_phase_patch, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_during_phase_patch_not_answered, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
