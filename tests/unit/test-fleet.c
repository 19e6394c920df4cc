/* The fleet runner (ctl/fleet.c) over real engines, the real client and informers, a
 * fake clock and a scripted fake transport: a small world of nodes node-1..node-N, each
 * with one workload pod (a ReplicaSet's), that reacts only to what the engines sent (a
 * Node PATCH is merged and goes out on that node's watch; an accepted eviction deletes
 * its pod GRACE later). A node may hold a pod no controller owns instead: its drain is
 * refused in preflight (no --force). maintain's command is a real process (uv_spawn on
 * a loop of the test's), the only thing waited for outside the fake clock.
 * Covered: N nodes --max-parallel M (never more than M engines at once, M at once at
 * some point, all drained); one node refused while the others drain; an interrupt (the
 * running node stops in its phase, no other node is started, nothing is sent for
 * them); maintain (every run drained, the command once, every run restored), a failing
 * command (the nodes stay drained; with restore_on_failure restored), a command that
 * cannot start (127). The drain run (ctl/drainrun.c) over the same world: its runs set
 * before any engine, the fleet's callbacks handed on, closed mid-drain (nothing
 * reported after, closed once the fleet ended), runs as nodes times drivers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include <cjson/cJSON.h>

#include "drainer/base/selector.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/drainrun.h"
#include "drainer/ctl/fleet.h"
#include "drainer/ctl/profile.h"
#include "drainer/dra/claims.h"
#include "drainer/dra/driverstop.h"
#include "drainer/kube/client.h"
#include "fakes/fake-apiserver.h"
#include "fakes/fake-clock.h"
#include "fakes/fake-transport.h"
#include "fakes/test-env.h"

#define MS  USEC_PER_MSEC
#define SEC USEC_PER_SEC

#define GRACE     (1 * SEC)  /* an accepted eviction's pod is gone this much later */
#define ANSWER    (100 * MS) /* an eviction's answer */
#define MAX_NODES 6

#define CLAIMS   FAKE_API_CLAIMS
#define PDBS     FAKE_API_PDBS
#define EVICTION FAKE_API_EVICTION

struct wnode {
        char name[16];
        char nodes_path[128], pods_path[128], slices_path[128], node_path[64];
        cJSON *node;    /* as the API server holds it */
        bool unmanaged; /* its pod has no controller: a drain is refused */
        bool pod_present, pod_deleting;
        uint64_t pod_gone_at;
        unsigned evictions, patches;
        bool requested; /* any request for this node was seen */
};

struct world {
        struct test_api *api;
        struct fake_clock *clock;
        struct fake_transport *ft;
        uv_loop_t loop;
        struct selector **sels;
        size_t n_sels;
        struct drain_profile profile;
        struct wnode nodes[MAX_NODES];
        size_t n_nodes;
        unsigned rv;
        size_t handled; /* requests looked at */

        struct drain_fleet *fleet;
        bool finished;
        /* the drain run (ctl/drainrun.c) over the same world */
        struct drain_run *run;
        unsigned runs_set, closed, failed;
        bool close_in_evict_rest;
        size_t running, max_running;
        char log[64][64]; /* "start drain node-1", "done drain node-1 0", "command", "command 3" */
        size_t n_log;
        bool command_running;
        int command_status, command_error;
        bool stop_in_evict_rest; /* interrupt once a node's pod is being evicted */
        /* once a node's pod is being evicted, its next Node PATCH is left unanswered and
         * the fleet stopped: held, its request's index */
        bool hold_patch_in_evict_rest, hold_patches, held;
        size_t held_index;
};

/* ---- the world ---- */

static char *pod_json(const struct wnode *n) {
        const char *owner = n->unmanaged ? ""
                                         : ",\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":"
                                           "\"ReplicaSet\",\"name\":\"web-rs\",\"uid\":\"rs-web\","
                                           "\"controller\":true}]";

        return test_asprintf(
                "{\"metadata\":{\"name\":\"web-%s\",\"namespace\":\"demo\",\"uid\":\"uid-web-%s\","
                "\"resourceVersion\":\"50\",\"labels\":{\"app\":\"web\"}%s},"
                "\"spec\":{\"nodeName\":\"%s\",\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]},"
                "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\","
                "\"status\":\"True\"}]}}",
                n->name, n->name, owner, n->name);
}

static struct wnode *node_named(struct world *w, const char *name) {
        for (size_t i = 0; i < w->n_nodes; i++)
                if (streq(w->nodes[i].name, name))
                        return &w->nodes[i];
        return NULL;
}

static const char *node_ann(const struct wnode *n, const char *key) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(n->node, "metadata"), "annotations");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, key);

        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static size_t drainer_annotations(const struct wnode *n) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(n->node, "metadata"), "annotations");
        const cJSON *it;
        size_t k = 0;

        cJSON_ArrayForEach(it, a) k += strncmp(it->string, "drainer.io/", 11) == 0;
        return k;
}

static bool node_unschedulable(const struct wnode *n) {
        return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(n->node, "spec"), "unschedulable"));
}

static void push(struct world *w, const char *watch, const char *type, char *obj) {
        _cleanup_free_ char *path = test_asprintf("%s&watch=1", watch);
        char *ev = fake_api_watch_event(type, obj);

        /* nobody watching (the node's engine is not running): its next list shows it */
        (void)fake_transport_push(w->ft, path, ev);
        free(ev);
        free(obj);
}

static void on_node_patch(struct world *w, struct wnode *n, const struct fake_request *r) {
        char *obj = fake_api_patch_node_at(w->ft, n->node_path, n->node, &w->rv, r->body);

        n->patches++;
        push(w, n->nodes_path, "MODIFIED", obj);
}

static void serve_requests(struct world *w) {
        size_t total = fake_transport_n_requests(w->ft);

        for (; w->handled < total; w->handled++) {
                const struct fake_request *r = fake_transport_request(w->ft, w->handled);

                for (size_t i = 0; i < w->n_nodes; i++) {
                        struct wnode *n = &w->nodes[i];
                        _cleanup_free_ char *pod = test_asprintf(EVICTION "web-%s/", n->name);

                        if (strstr(r->path, n->name))
                                n->requested = true;
                        if (streq(r->method, "PATCH") && streq(r->path, n->node_path) && w->hold_patches &&
                            !w->held) {
                                w->held = true;
                                w->held_index = w->handled;
                                drain_fleet_stop(w->fleet);
                        } else if (streq(r->method, "PATCH") && streq(r->path, n->node_path))
                                on_node_patch(w, n, r);
                        else if (streq(r->method, "POST") && strncmp(r->path, pod, strlen(pod)) == 0) {
                                n->evictions++;
                                if (!n->pod_deleting) {
                                        n->pod_deleting = true;
                                        n->pod_gone_at = fake_clock_now(w->clock) + ANSWER + GRACE;
                                }
                        }
                }
        }
}

static void world_tick(struct world *w) {
        uint64_t now = fake_clock_now(w->clock);

        for (size_t i = 0; i < w->n_nodes; i++) {
                struct wnode *n = &w->nodes[i];

                if (n->pod_present && n->pod_deleting && now >= n->pod_gone_at) {
                        n->pod_present = false;
                        push(w, n->pods_path, "DELETED", pod_json(n));
                }
        }
}

/* An engine of node n starts: its informers' lists show the world as it is now. */
static void expect_engine_reads(struct world *w, struct wnode *n) {
        char *items[1];
        _cleanup_free_ char *nl = test_asprintf("%s&limit=", n->nodes_path),
                            *pl = test_asprintf("%s&limit=", n->pods_path),
                            *sl = test_asprintf("%s&limit=", n->slices_path);

        items[0] = cJSON_PrintUnformatted(n->node);
        fake_api_expect_list_and_watch(w->ft, n->nodes_path, nl, fake_api_list("NodeList", w->rv, items, 1));
        if (n->pod_present)
                items[0] = pod_json(n);
        fake_api_expect_list_and_watch(w->ft, n->pods_path, pl,
                                       fake_api_list("PodList", w->rv, items, n->pod_present ? 1 : 0));
        fake_api_expect_list_and_watch(w->ft, CLAIMS,
                                       CLAIMS "?limit=", fake_api_list("ResourceClaimList", w->rv, NULL, 0));
        fake_api_expect_list_and_watch(w->ft, n->slices_path, sl,
                                       fake_api_list("ResourceSliceList", w->rv, NULL, 0));
        fake_transport_expect_json(w->ft, "GET", PDBS "?limit=", 200,
                                   "{\"kind\":\"PodDisruptionBudgetList\",\"apiVersion\":\"policy/v1\","
                                   "\"metadata\":{\"resourceVersion\":\"100\"},\"items\":[]}");
}

/* ---- the fleet's callbacks ---- */

static void note(struct world *w, const char *fmt, ...) _printf_(2, 3);
static void note(struct world *w, const char *fmt, ...) {
        va_list ap;

        assert_true(w->n_log < ELEMENTSOF(w->log));
        va_start(ap, fmt);
        vsnprintf(w->log[w->n_log++], sizeof(w->log[0]), fmt, ap);
        va_end(ap);
}

static const char *goal_name(enum engine_goal g) {
        return g == ENGINE_GOAL_DRAIN ? "drain" : "uncordon";
}

static void on_run_closed(void *userdata) {
        struct world *w = userdata;

        w->closed++;
        note(w, "closed");
}

static void on_node_start(struct drain_fleet *f, const struct fleet_node *n, void *userdata) {
        struct world *w = userdata;

        expect_engine_reads(w, node_named(w, n->node));
        w->running++;
        w->max_running = MAX(w->max_running, w->running);
        note(w, "start %s %s", goal_name(n->goal), n->node);
}

static void on_progress(struct drain_fleet *f, const struct fleet_node *n, const struct engine_progress *p,
                        void *userdata) {
        struct world *w = userdata;

        if (w->hold_patch_in_evict_rest && p->has_phase && p->phase == DRAIN_PHASE_EVICT_REST)
                w->hold_patches = true;
        if (w->close_in_evict_rest && p->has_phase && p->phase == DRAIN_PHASE_EVICT_REST) {
                w->close_in_evict_rest = false;
                note(w, "close");
                drain_run_close(w->run, on_run_closed, w);
        }
        if (w->stop_in_evict_rest && p->has_phase && p->phase == DRAIN_PHASE_EVICT_REST) {
                w->stop_in_evict_rest = false;
                drain_fleet_stop(f);
        }
}

static void on_node_done(struct drain_fleet *f, const struct fleet_node *n, void *userdata) {
        struct world *w = userdata;

        if (n->started)
                w->running--;
        note(w, "%s %s %s %d", n->started ? "done" : "not-started", goal_name(n->goal), n->node, n->result);
}

static void on_command(struct drain_fleet *f, char *const *argv, void *userdata) {
        struct world *w = userdata;

        assert_int_equal(w->running, 0);
        w->command_running = true;
        note(w, "command");
}

static void on_command_done(struct drain_fleet *f, int status, int error, void *userdata) {
        struct world *w = userdata;

        w->command_running = false;
        w->command_status = status;
        w->command_error = error;
        note(w, "command %d", status);
}

static void on_finished(struct drain_fleet *f, void *userdata) {
        struct world *w = userdata;

        w->finished = true;
}

static const struct drain_fleet_callbacks callbacks = {
        .on_node_start = on_node_start,
        .on_progress = on_progress,
        .on_node_done = on_node_done,
        .on_command = on_command,
        .on_command_done = on_command_done,
        .on_finished = on_finished,
};

/* ---- running it ---- */

static void step(struct world *w, uint64_t usec) {
        fake_transport_deliver(w->ft);
        serve_requests(w);
        world_tick(w);
        fake_transport_deliver(w->ft);
        fake_clock_advance(w->clock, usec);
        /* the command's exit is the one thing that comes from outside the fake clock */
        uv_run(&w->loop, w->command_running ? UV_RUN_ONCE : UV_RUN_NOWAIT);
}

static void run_fleet(struct world *w, enum fleet_goal goal, unsigned max_parallel, char *const *command,
                      bool restore_on_failure) {
        struct fleet_run runs[MAX_NODES];

        for (size_t i = 0; i < w->n_nodes; i++)
                runs[i] = (struct fleet_run){ .node = w->nodes[i].name, .profile = &w->profile };
        assert_int_equal(drain_fleet_new(w->api->client, fake_transport_base(w->ft), w->api->ts, &w->loop,
                                         &(const struct drain_fleet_options){
                                                 .goal = goal,
                                                 .runs = runs,
                                                 .n_runs = w->n_nodes,
                                                 .max_parallel = max_parallel,
                                                 .command = command,
                                                 .restore_on_failure = restore_on_failure,
                                                 .instance = "test",
                                         },
                                         &callbacks, w, &w->fleet),
                         0);
        assert_int_equal(drain_fleet_start(w->fleet), 0);
        assert_int_equal(w->running, 0); /* nothing from inside start */
        for (uint64_t t = 0; t < 120 * SEC && !w->finished; t += 10 * MS)
                step(w, 10 * MS);
        assert_true(w->finished);
        for (size_t i = 0; i < w->n_log; i++)
                print_message("    %s\n", w->log[i]);
}

static void add_node(struct world *w, bool unmanaged) {
        struct wnode *n = &w->nodes[w->n_nodes];
        char name[16];

        assert_true(w->n_nodes < MAX_NODES);
        snprintf(name, sizeof(name), "node-%zu", ++w->n_nodes);
        strcpy(n->name, name);
        snprintf(n->nodes_path, sizeof(n->nodes_path), "/api/v1/nodes?fieldSelector=metadata.name%%3D%s",
                 name);
        snprintf(n->pods_path, sizeof(n->pods_path), "/api/v1/pods?fieldSelector=spec.nodeName%%3D%s", name);
        snprintf(n->slices_path, sizeof(n->slices_path),
                 "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%%3D%s", name);
        snprintf(n->node_path, sizeof(n->node_path), "/api/v1/nodes/%s", name);
        n->node = fake_api_json("{\"metadata\":{\"name\":\"x\",\"resourceVersion\":\"90\",\"labels\":{},"
                                "\"annotations\":{}},\"spec\":{},"
                                "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}");
        cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(n->node, "metadata"), "name",
                                               cJSON_CreateString(n->name));
        {
                _cleanup_free_ char *uid = test_asprintf("uid-%s", n->name);

                cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(n->node, "metadata"), "uid", uid);
        }
        n->unmanaged = unmanaged;
        n->pod_present = true;
}

static int setup(void **state) {
        struct world *w = calloc(1, sizeof(*w));

        assert_non_null(w);
        w->api = test_api_new(&(struct test_api_options){ .user_yaml = "    token: fleet-token\n" });
        w->clock = w->api->clock;
        w->ft = w->api->ft;
        assert_int_equal(uv_loop_init(&w->loop), 0);
        w->rv = 100;
        assert_int_equal(selectors_parse_strv(claims_default_driver_selectors, &w->sels, &w->n_sels, NULL),
                         0);
        w->profile = (struct drain_profile){
                .drv_sels = w->sels,
                .n_drv_sels = w->n_sels,
                .grace = -1,
                .stop = &driver_stop_taint,
        };
        fake_transport_expect(w->ft, "POST", "/api/v1/namespaces/default/events",
                              &(struct fake_reply){ .status = 201, .body = "{}", .times = FAKE_FOREVER });
        fake_transport_expect(
                w->ft, "POST", EVICTION,
                &(struct fake_reply){
                        .status = 201,
                        .body = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Success\"}",
                        .delay_usec = ANSWER,
                        .times = FAKE_FOREVER });
        *state = w;
        return 0;
}

static int teardown(void **state) {
        struct world *w = *state;

        for (int i = 0; i < 20 && fake_transport_in_flight(w->ft) > 0; i++) {
                fake_transport_deliver(w->ft);
                fake_clock_advance(w->clock, 1 * MS);
        }
        drain_fleet_free(w->fleet);
        drain_run_free(w->run);
        for (int i = 0; i < 20 && fake_transport_in_flight(w->ft) > 0; i++) {
                fake_transport_deliver(w->ft);
                fake_clock_advance(w->clock, 1 * MS);
        }
        assert_int_equal(kube_client_calls_in_flight(w->api->client), 0);
        test_api_free(w->api);
        uv_run(&w->loop, UV_RUN_DEFAULT);
        assert_int_equal(uv_loop_close(&w->loop), 0);
        selectors_free(w->sels, w->n_sels);
        for (size_t i = 0; i < w->n_nodes; i++)
                cJSON_Delete(w->nodes[i].node);
        free(w);
        return 0;
}

static bool logged(const struct world *w, const char *line) {
        for (size_t i = 0; i < w->n_log; i++)
                if (streq(w->log[i], line))
                        return true;
        return false;
}

static size_t log_index(const struct world *w, const char *line) {
        for (size_t i = 0; i < w->n_log; i++)
                if (streq(w->log[i], line))
                        return i;
        fail_msg("not in the log: %s", line);
        return 0;
}

static void assert_drained(const struct wnode *n) {
        assert_string_equal(node_ann(n, "drainer.io/state"), "drained");
        assert_true(node_unschedulable(n));
        assert_false(n->pod_present);
        assert_int_equal(n->evictions, 1);
}

static void assert_restored(const struct wnode *n) {
        assert_int_equal(drainer_annotations(n), 0);
        assert_false(node_unschedulable(n));
}

/* ---- tests ---- */

/* 4 nodes, --max-parallel 2: never more than 2 engines at once, 2 at once at some
 * point, each node started in order once one ended, all drained. */
static void test_max_parallel(void **state) {
        struct world *w = *state;

        for (int i = 0; i < 4; i++)
                add_node(w, false);
        run_fleet(w, FLEET_GOAL_DRAIN, 2, NULL, false);
        assert_int_equal(w->max_running, 2);
        for (size_t i = 0; i < 4; i++) {
                const struct fleet_node *fn = drain_fleet_node(w->fleet, i);

                assert_true(fn->started);
                assert_int_equal(fn->result, 0);
                assert_true(fn->summary_valid);
                assert_int_equal(fn->total.pods_evicted, 1);
                assert_true(fn->total.changed);
                assert_drained(&w->nodes[i]);
        }
        /* node-3 starts only after one of the first two ended */
        assert_true(log_index(w, "start drain node-3") >
                    MIN(log_index(w, "done drain node-1 0"), log_index(w, "done drain node-2 0")));
        assert_false(drain_fleet_interrupted(w->fleet));
}

/* One node refused in preflight (a pod without a controller): the others drain, the
 * refused node is as it was (no annotation, schedulable). */
static void test_one_node_fails(void **state) {
        struct world *w = *state;

        add_node(w, false);
        add_node(w, true);
        add_node(w, false);
        run_fleet(w, FLEET_GOAL_DRAIN, 3, NULL, false);
        assert_int_equal(drain_fleet_node(w->fleet, 1)->result, -EPERM);
        assert_false(drain_fleet_node(w->fleet, 1)->total.changed);
        assert_non_null(drain_fleet_node(w->fleet, 1)->summary.message);
        assert_int_equal(drainer_annotations(&w->nodes[1]), 0);
        assert_false(node_unschedulable(&w->nodes[1]));
        assert_int_equal(w->nodes[1].evictions, 0);
        assert_drained(&w->nodes[0]);
        assert_drained(&w->nodes[2]);
}

/* An interrupt once node-1 enters evict-rest (max 1): node-1 stops in evict-rest (the phase its
 * Node shows), node-2 and node-3 are never started and nothing is sent for them. */
static void test_interrupt(void **state) {
        struct world *w = *state;

        for (int i = 0; i < 3; i++)
                add_node(w, false);
        w->stop_in_evict_rest = true;
        run_fleet(w, FLEET_GOAL_DRAIN, 1, NULL, false);
        assert_true(drain_fleet_interrupted(w->fleet));
        assert_true(drain_fleet_node(w->fleet, 0)->started);
        assert_int_equal(drain_fleet_node(w->fleet, 0)->result, -EINTR);
        assert_true(drain_fleet_node(w->fleet, 0)->has_phase);
        assert_int_equal(drain_fleet_node(w->fleet, 0)->phase, DRAIN_PHASE_EVICT_REST);
        assert_string_equal(node_ann(&w->nodes[0], "drainer.io/state"), "evict-rest");
        assert_true(node_unschedulable(&w->nodes[0]));
        assert_true(logged(w, "not-started drain node-2 -4"));
        assert_true(logged(w, "not-started drain node-3 -4"));
        assert_false(w->nodes[1].requested);
        assert_false(w->nodes[2].requested);
        assert_int_equal(drainer_annotations(&w->nodes[1]), 0);
        assert_int_equal(w->max_running, 1);
}

/* A stop while the engine's Node patch is in flight: the run is reported exactly when
 * that patch answers (its phase is what the Node shows), and nothing wakes while it
 * waits: the one timer armed is the engine's deadline for the answer, none fires. */
static void test_stop_waits_for_node_patch(void **state) {
        struct world *w = *state;
        struct fleet_run run = { .node = "node-1", .profile = &w->profile };
        const struct fleet_node *fn;
        uint64_t fired, t;

        add_node(w, false);
        w->hold_patch_in_evict_rest = true;
        assert_int_equal(drain_fleet_new(w->api->client, fake_transport_base(w->ft), w->api->ts, &w->loop,
                                         &(const struct drain_fleet_options){ .goal = FLEET_GOAL_DRAIN,
                                                                              .runs = &run,
                                                                              .n_runs = 1,
                                                                              .max_parallel = 1,
                                                                              .instance = "test" },
                                         &callbacks, w, &w->fleet),
                         0);
        assert_int_equal(drain_fleet_start(w->fleet), 0);
        for (uint64_t i = 0; i < 60 * SEC && !w->held; i += 10 * MS)
                step(w, 10 * MS);
        assert_true(w->held);
        assert_true(drain_fleet_interrupted(w->fleet));
        /* the stop's cancelled calls end */
        for (int i = 0; i < 10; i++)
                step(w, 1 * MS);
        assert_false(w->finished);
        assert_false(logged(w, "done drain node-1 -4"));
        assert_int_equal(fake_clock_armed(w->clock), 1);
        fired = fake_clock_fired(w->clock);
        for (int i = 0; i < 100; i++)
                step(w, 10 * MS);
        assert_int_equal(fake_clock_fired(w->clock), fired);
        assert_false(w->finished);
        assert_int_equal(fake_clock_armed(w->clock), 1);

        /* The patch answers: the run is reported at that moment, in the phase it wrote. */
        t = fake_clock_now(w->clock);
        on_node_patch(w, &w->nodes[0], fake_transport_request(w->ft, w->held_index));
        for (int i = 0; i < 10 && !w->finished; i++)
                step(w, 0);
        assert_true(w->finished);
        assert_int_equal(fake_clock_now(w->clock), t);
        assert_true(logged(w, "done drain node-1 -4"));
        fn = drain_fleet_node(w->fleet, 0);
        assert_true(fn->has_phase);
        assert_string_equal(node_ann(&w->nodes[0], "drainer.io/state"), drain_phase_to_string(fn->phase));
        assert_int_equal(fake_clock_armed(w->clock), 0);
}

static char *const cmd_ok[] = { "/bin/sh", "-c", "exit 0", NULL };
static char *const cmd_fails[] = { "/bin/sh", "-c", "exit 3", NULL };

/* maintain over two runs: both drained, then the command once, then both restored. */
static void test_maintain(void **state) {
        struct world *w = *state;

        add_node(w, false);
        add_node(w, false);
        run_fleet(w, FLEET_GOAL_MAINTAIN, 2, cmd_ok, false);
        assert_int_equal(w->command_status, 0);
        assert_true(log_index(w, "command") > log_index(w, "done drain node-1 0"));
        assert_true(log_index(w, "command") > log_index(w, "done drain node-2 0"));
        assert_true(log_index(w, "start uncordon node-1") > log_index(w, "command 0"));
        assert_true(logged(w, "done uncordon node-1 0"));
        assert_true(logged(w, "done uncordon node-2 0"));
        for (size_t i = 0; i < 2; i++) {
                const struct fleet_node *fn = drain_fleet_node(w->fleet, i);

                assert_int_equal(fn->command_status, 0);
                assert_int_equal(fn->result, 0);
                assert_int_equal(fn->goal, ENGINE_GOAL_UNCORDON);
                /* the drain's phases and the restore's, in one total */
                assert_true(fn->total.phase_seen[DRAIN_PHASE_EVICT_REST]);
                assert_true(fn->total.phase_seen[DRAIN_PHASE_RESTORE_DRIVERS]);
                assert_int_equal(fn->total.pods_evicted, 1);
                assert_restored(&w->nodes[i]);
        }
}

/* A failing command: the node stays drained (no restore started). */
static void test_maintain_failing_command(void **state) {
        struct world *w = *state;

        add_node(w, false);
        run_fleet(w, FLEET_GOAL_MAINTAIN, 1, cmd_fails, false);
        assert_int_equal(w->command_status, 3);
        assert_int_equal(drain_fleet_node(w->fleet, 0)->command_status, 3);
        assert_false(logged(w, "start uncordon node-1"));
        assert_drained(&w->nodes[0]);
}

/* ... with restore_on_failure: restored all the same. */
static void test_maintain_failing_command_restored(void **state) {
        struct world *w = *state;

        add_node(w, false);
        run_fleet(w, FLEET_GOAL_MAINTAIN, 1, cmd_fails, true);
        assert_int_equal(w->command_status, 3);
        assert_true(logged(w, "done uncordon node-1 0"));
        assert_restored(&w->nodes[0]);
}

/* A drain that fails: the command never runs, nothing is restored. */
static void test_maintain_refused_drain(void **state) {
        struct world *w = *state;

        add_node(w, false);
        add_node(w, true);
        run_fleet(w, FLEET_GOAL_MAINTAIN, 2, cmd_ok, true);
        assert_false(logged(w, "command"));
        assert_false(logged(w, "start uncordon node-1"));
        assert_drained(&w->nodes[0]);
        assert_int_equal(drain_fleet_node(w->fleet, 1)->result, -EPERM);
}

/* A command that cannot start: 127 with the error, as a failed command. */
static void test_maintain_command_not_found(void **state) {
        static char *const missing[] = { "/nonexistent/drainer-test-command", NULL };
        struct world *w = *state;

        add_node(w, false);
        run_fleet(w, FLEET_GOAL_MAINTAIN, 1, missing, false);
        assert_int_equal(w->command_status, 127);
        assert_true(w->command_error < 0);
        assert_drained(&w->nodes[0]);
}

/* uncordon over several nodes drained before. */
static void test_uncordon(void **state) {
        struct world *w = *state;

        add_node(w, false);
        add_node(w, false);
        run_fleet(w, FLEET_GOAL_DRAIN, 2, NULL, false);
        drain_fleet_free(w->fleet);
        w->fleet = NULL;
        w->finished = false;
        w->n_log = 0;
        run_fleet(w, FLEET_GOAL_UNCORDON, 1, NULL, false);
        assert_int_equal(w->max_running, 2); /* (the drain's) */
        assert_true(log_index(w, "start uncordon node-2") > log_index(w, "done uncordon node-1 0"));
        assert_restored(&w->nodes[0]);
        assert_restored(&w->nodes[1]);
}

/* Bad options. */
static void test_bad_options(void **state) {
        struct world *w = *state;
        struct drain_fleet *f = NULL;
        struct fleet_run run = { .node = "node-1", .profile = &w->profile };

        assert_int_equal(drain_fleet_new(w->api->client, fake_transport_base(w->ft), w->api->ts, &w->loop,
                                         &(const struct drain_fleet_options){ .goal = FLEET_GOAL_DRAIN },
                                         &callbacks, w, &f),
                         -EINVAL);
        assert_int_equal(drain_fleet_new(w->api->client, fake_transport_base(w->ft), w->api->ts, &w->loop,
                                         &(const struct drain_fleet_options){
                                                 .goal = FLEET_GOAL_MAINTAIN, .runs = &run, .n_runs = 1 },
                                         &callbacks, w, &f),
                         -EINVAL);
        assert_null(f);
}

/* ---- the drain run (ctl/drainrun.c): the fleet after its preparation ---- */

static void on_runs_set(struct drain_run *r, void *userdata) {
        struct world *w = userdata;

        assert_int_equal(w->running, 0); /* before any engine */
        w->runs_set++;
        note(w, "runs set");
}

static void on_run_failed(struct drain_run *r, enum drain_run_step step, int error, const char *message,
                          void *userdata) {
        struct world *w = userdata;

        w->failed++;
        note(w, "failed %d %d", step, error);
}

static const struct drain_run_callbacks run_callbacks = {
        .on_runs_set = on_runs_set,
        .on_failed = on_run_failed,
        .fleet = {
                .on_node_start = on_node_start,
                .on_progress = on_progress,
                .on_node_done = on_node_done,
                .on_command = on_command,
                .on_command_done = on_command_done,
                .on_finished = on_finished,
        },
};

static void start_run(struct world *w, enum fleet_goal goal, unsigned max_parallel) {
        const char *nodes[MAX_NODES];

        for (size_t i = 0; i < w->n_nodes; i++)
                nodes[i] = w->nodes[i].name;
        assert_int_equal(drain_run_new(w->api->client, fake_transport_base(w->ft), w->api->ts, &w->loop,
                                       &(const struct drain_run_options){
                                               .goal = goal,
                                               .nodes = nodes,
                                               .n_nodes = w->n_nodes,
                                               .profile = &w->profile,
                                               .max_parallel = max_parallel,
                                               .instance = "test",
                                       },
                                       &run_callbacks, w, &w->run),
                         0);
        assert_int_equal(drain_run_size(w->run), w->n_nodes);
        assert_int_equal(drain_run_per_node(w->run), 1);
        assert_int_equal(drain_run_start(w->run), 0);
}

static void close_run(struct world *w) {
        if (!w->closed && !logged(w, "close"))
                drain_run_close(w->run, on_run_closed, w);
        for (uint64_t t = 0; t < 10 * SEC && !w->closed; t += 10 * MS)
                step(w, 10 * MS);
        assert_int_equal(w->closed, 1);
}

/* 3 nodes, 2 at once, through the drain run: the runs are set once before any engine
 * (the verb's signals go on there), the fleet's callbacks reach the caller, every node
 * drained; closed once, after everything. */
static void test_drainrun(void **state) {
        struct world *w = *state;

        for (int i = 0; i < 3; i++)
                add_node(w, false);
        start_run(w, FLEET_GOAL_DRAIN, 2);
        for (uint64_t t = 0; t < 120 * SEC && !w->finished; t += 10 * MS)
                step(w, 10 * MS);
        assert_true(w->finished);
        assert_int_equal(w->runs_set, 1);
        assert_int_equal(log_index(w, "runs set"), 0);
        assert_int_equal(w->max_running, 2);
        for (size_t i = 0; i < 3; i++)
                assert_drained(&w->nodes[i]);
        assert_int_equal(w->failed, 0);
        close_run(w);
        assert_int_equal(w->n_log, 8); /* runs set, 3 starts, 3 ends, closed */
}

/* Closed mid-drain (the verb quits): the running engine stops where it is, nothing
 * more is reported, no other node starts, and closed comes once the fleet ended. */
static void test_drainrun_closed_mid_drain(void **state) {
        struct world *w = *state;
        size_t at;

        for (int i = 0; i < 2; i++)
                add_node(w, false);
        w->close_in_evict_rest = true;
        start_run(w, FLEET_GOAL_DRAIN, 1);
        for (uint64_t t = 0; t < 30 * SEC && !w->closed; t += 10 * MS)
                step(w, 10 * MS);
        assert_int_equal(w->closed, 1);
        at = log_index(w, "close");
        assert_int_equal(log_index(w, "closed"), at + 1); /* nothing reported in between */
        assert_false(w->finished);
        assert_false(w->nodes[1].requested);
        assert_string_equal(node_ann(&w->nodes[0], "drainer.io/state"), "evict-rest");
}

/* Runs are nodes times drivers; no node is an error. */
static void test_drainrun_sizes(void **state) {
        struct world *w = *state;
        const char *nodes[] = { "node-1", "node-2" };
        struct drain_profile two = w->profile;
        struct drain_run *r = NULL;

        two.drivers[0] = "a.example.com";
        two.drivers[1] = "b.example.com";
        two.n_drivers = 2;
        assert_int_equal(drain_run_new(w->api->client, fake_transport_base(w->ft), w->api->ts, &w->loop,
                                       &(const struct drain_run_options){
                                               .nodes = nodes, .n_nodes = 0, .profile = &two },
                                       &run_callbacks, w, &r),
                         -EINVAL);
        assert_int_equal(drain_run_new(w->api->client, fake_transport_base(w->ft), w->api->ts, &w->loop,
                                       &(const struct drain_run_options){
                                               .nodes = nodes, .n_nodes = 2, .profile = &two },
                                       &run_callbacks, w, &r),
                         0);
        assert_int_equal(drain_run_size(r), 4);
        assert_int_equal(drain_run_per_node(r), 2);
        drain_run_close(r, on_run_closed, w); /* nothing in flight: closed at once */
        assert_int_equal(w->closed, 1);
        drain_run_free(r);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_max_parallel, setup, teardown),
                cmocka_unit_test_setup_teardown(test_one_node_fails, setup, teardown),
                cmocka_unit_test_setup_teardown(test_interrupt, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_waits_for_node_patch, setup, teardown),
                cmocka_unit_test_setup_teardown(test_maintain, setup, teardown),
                cmocka_unit_test_setup_teardown(test_maintain_failing_command, setup, teardown),
                cmocka_unit_test_setup_teardown(test_maintain_failing_command_restored, setup, teardown),
                cmocka_unit_test_setup_teardown(test_maintain_refused_drain, setup, teardown),
                cmocka_unit_test_setup_teardown(test_maintain_command_not_found, setup, teardown),
                cmocka_unit_test_setup_teardown(test_uncordon, setup, teardown),
                cmocka_unit_test_setup_teardown(test_bad_options, setup, teardown),
                cmocka_unit_test_setup_teardown(test_drainrun, setup, teardown),
                cmocka_unit_test_setup_teardown(test_drainrun_closed_mid_drain, setup, teardown),
                cmocka_unit_test_setup_teardown(test_drainrun_sizes, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
