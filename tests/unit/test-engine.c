/* The drain engine over the real client and informers, a fake clock and a scripted
 * fake transport: evictions of pods under one PodDisruptionBudget go out one at a
 * time (a concurrent one makes the API server retry the budget update past the
 * request's end, which after a crash leaves a running pod counted as disrupted for
 * 2 minutes); pods under different budgets, or none, still go out together; a
 * terminal pod being deleted holds the driver stop until it is gone. */
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

#include "drainer/client.h"
#include "drainer/engine.h"
#include "drainer/kubeconfig.h"
#include "drainer/timesrc.h"
#include "fakes/fake-clock.h"
#include "fakes/fake-transport.h"

#define MS  USEC_PER_MSEC
#define SEC USEC_PER_SEC
#define T0  (1000 * SEC)

#define NODES    "/api/v1/nodes?fieldSelector=metadata.name%3Dnode-1"
#define PODS     "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1"
#define CLAIMS   "/apis/resource.k8s.io/v1/resourceclaims"
#define SLICES   "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3Dnode-1"
#define PDBS     "/apis/policy/v1/poddisruptionbudgets"
#define EVICTION "/api/v1/namespaces/demo/pods/"

struct env {
        char dir[64], kubeconfig[96];
        struct fake_clock *clock;
        struct timesrc *ts;
        struct fake_transport *ft;
        struct kube_config *cfg;
        struct kube_client *client;
        struct engine *engine;
        bool finished;
        int result;
};

static int setup(void **state) {
        struct env *e = calloc(1, sizeof(*e));
        char *err = NULL;
        FILE *f;

        assert_non_null(e);
        strcpy(e->dir, "/tmp/drainer-test-engine-XXXXXX");
        assert_non_null(mkdtemp(e->dir));
        snprintf(e->kubeconfig, sizeof(e->kubeconfig), "%s/config", e->dir);
        f = fopen(e->kubeconfig, "we");
        assert_non_null(f);
        fputs("apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: "
              "https://10.0.0.1:6443\n"
              "users:\n- name: u\n  user:\n    token: engine-token\ncontexts:\n- name: t\n  context:\n"
              "    cluster: t\n    user: u\ncurrent-context: t\n",
              f);
        fclose(f);
        if (kube_config_load(&(struct kube_config_options){ .kubeconfig = e->kubeconfig }, &e->cfg, &err) <
            0)
                fail_msg("kube_config_load: %s", err ? err : "?");
        e->clock = fake_clock_new(T0, INT64_C(1750000000) * 1000000);
        e->ts = fake_clock_timesrc(e->clock);
        e->ft = fake_transport_new(e->ts);
        assert_int_equal(kube_client_new(fake_transport_base(e->ft), e->ts, e->cfg,
                                         &(struct kube_client_options){ .random_seed = 3 }, &e->client),
                         0);
        *state = e;
        return 0;
}

static int teardown(void **state) {
        struct env *e = *state;

        if (e->engine) {
                engine_stop(e->engine);
                for (int i = 0; i < 20 && !engine_idle(e->engine); i++) {
                        fake_transport_deliver(e->ft);
                        fake_clock_advance(e->clock, 0);
                }
                assert_true(engine_idle(e->engine));
                engine_free(e->engine);
        }
        for (int i = 0; i < 20 && fake_transport_in_flight(e->ft) > 0; i++) {
                fake_transport_deliver(e->ft);
                fake_clock_advance(e->clock, 0);
        }
        assert_int_equal(kube_client_calls_in_flight(e->client), 0);
        kube_client_free(e->client);
        fake_transport_free(e->ft);
        assert_int_equal(fake_clock_timers(e->clock), 0);
        fake_clock_free(e->clock);
        kube_config_free(e->cfg);
        unlink(e->kubeconfig);
        rmdir(e->dir);
        free(e);
        return 0;
}

/* node-1 in a drain phase (%s), as a run killed there left it: cordoned, tainted. */
static const char node_list[] =
        "{\"kind\":\"NodeList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"100\"},\"items\":["
        "{"
        "\"metadata\":{\"name\":\"node-1\",\"uid\":\"f6666666-7777-4888-8999-000000000000\","
        "\"resourceVersion\":\"90\",\"labels\":{\"kubernetes.io/hostname\":\"node-1\"},"
        "\"annotations\":{\"drainer.io/state\":\"%s\",\"drainer.io/was-unschedulable\":\"false\","
        "\"drainer.io/started-at\":\"2025-06-15T14:00:00Z\",\"drainer.io/state-since\":"
        "\"2025-06-15T14:00:01Z\"}},"
        "\"spec\":{\"unschedulable\":true,\"taints\":[{\"key\":\"drainer.io/draining\",\"effect\":"
        "\"NoSchedule\"},{\"key\":\"node.kubernetes.io/unschedulable\",\"effect\":\"NoSchedule\"}]},"
        "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}]}";

static char *pod_json(const char *name, const char *app) {
        char *s;

        assert_true(asprintf(&s,
                             "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"demo\",\"uid\":\"uid-%s\","
                             "\"resourceVersion\":\"50\",\"labels\":{\"app\":\"%s\"},"
                             "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\","
                             "\"name\":\"%s-rs\",\"uid\":\"rs-%s\",\"controller\":true}]},"
                             "\"spec\":{\"nodeName\":\"node-1\",\"containers\":[{\"name\":\"c\",\"image\":"
                             "\"x\"}]},\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":"
                             "\"Ready\",\"status\":\"True\"}],\"podIP\":\"10.244.1.7\"}}",
                             name, name, app, app, app) >= 0);
        return s;
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

/* A List of the NULL-terminated malloc'd items (freed here). */
static char *list_json(const char *kind, char **items) {
        size_t len = 256;
        char *s;

        for (char **i = items; *i; i++)
                len += strlen(*i) + 1;
        s = malloc(len);
        assert_non_null(s);
        snprintf(s, len,
                 "{\"kind\":\"%s\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"100\"},"
                 "\"items\":[",
                 kind);
        for (char **i = items; *i; i++) {
                if (i != items)
                        strcat(s, ",");
                strcat(s, *i);
                free(*i);
        }
        strcat(s, "]}");
        return s;
}

static void expect_list_and_watch(struct env *e, const char *path, const char *list_prefix, char *body) {
        char watch[256];

        fake_transport_expect_json(e->ft, "GET", list_prefix, 200, body);
        free(body);
        snprintf(watch, sizeof(watch), "%s%swatch=1", path, strchr(path, '?') ? "&" : "?");
        fake_transport_expect(e->ft, "GET", watch, &(struct fake_reply){ .hold_open = true });
}

static void on_finished(struct engine *en, const struct engine_summary *s, void *userdata) {
        struct env *e = userdata;

        e->finished = true;
        e->result = s->result;
}

/* Evictions answered 201 after 100 ms each; the engine started on the node and the
 * pods given, with PodDisruptionBudgets pdbs (a NULL-terminated list). */
static void start_in(struct env *e, const char *phase, char **pods, char **pdbs) {
        static const struct engine_callbacks cb = { .on_finished = on_finished };
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

                assert_true(asprintf(&nl, node_list, phase) >= 0);
                expect_list_and_watch(e, NODES, NODES "&limit=", nl);
        }
        expect_list_and_watch(e, PODS, PODS "&limit=", list_json("PodList", pods));
        expect_list_and_watch(e, CLAIMS,
                              CLAIMS "?limit=", list_json("ResourceClaimList", (char *[]){ NULL }));
        expect_list_and_watch(e, SLICES,
                              SLICES "&limit=", list_json("ResourceSliceList", (char *[]){ NULL }));
        {
                char *pl = list_json("PodDisruptionBudgetList", pdbs);

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
        assert_true(asprintf(&ev, "{\"type\":\"DELETED\",\"object\":%s}\n", done) >= 0);
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
        char *s;

        assert_true(asprintf(&s,
                             "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"demo\",\"uid\":\"uid-%s\","
                             "%s\"resourceVersion\":\"50\",\"labels\":{\"app\":\"gpu\"},"
                             "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\","
                             "\"name\":\"gpu-rs\",\"uid\":\"rs-gpu\",\"controller\":true}]},"
                             "\"spec\":{\"nodeName\":\"node-1\",\"containers\":[{\"name\":\"c\",\"image\":"
                             "\"x\"}],\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":"
                             "\"gpu-claim\"}]},\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":"
                             "\"Ready\",\"status\":\"True\"}],\"podIP\":\"10.244.1.8\"}}",
                             name, name, extra_meta) >= 0);
        return s;
}

/* node-1 in evict-rest at the resourceVersion the fake answers every Node patch
 * with, as the watch brings the engine's own patch. */
static void push_node_evict_rest(struct env *e) {
        const char *from = "\"resourceVersion\":\"90\"";
        char *nl, *item, *rv, *obj, *ev;

        assert_true(asprintf(&nl, node_list, "evict-rest") >= 0);
        item = strstr(nl, "\"items\":[") + strlen("\"items\":[");
        *strrchr(nl, ']') = 0;
        rv = strstr(item, from);
        assert_non_null(rv);
        *rv = 0;
        assert_true(asprintf(&obj, "%s\"resourceVersion\":\"999\"%s", item, rv + strlen(from)) >= 0);
        assert_true(asprintf(&ev, "{\"type\":\"MODIFIED\",\"object\":%s}\n", obj) >= 0);
        assert_int_equal(fake_transport_push(e->ft, NODES "&watch=1", ev), 1);
        free(ev);
        free(obj);
        free(nl);
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
        assert_true(asprintf(&ev, "{\"type\":\"MODIFIED\",\"object\":%s}\n", deleting) >= 0);
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

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_one_eviction_per_budget_at_a_time, setup, teardown),
                cmocka_unit_test_setup_teardown(test_later_group_waits_for_answers_not_watch, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_budgets_apart_go_together, setup, teardown),
                cmocka_unit_test_setup_teardown(test_terminal_deleting_pod_holds_driver_stop, setup,
                                                teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
