/* The rollout runner (ctl/rollout.c) against a small API server that reacts to
 * what it is sent, over the real client, informers, node views and engines, a fake
 * clock and a scripted fake transport; nothing sleeps. The world: DaemonSet
 * dra-system/dra-driver (OnDelete unless a test says otherwise) whose update
 * revision is NEW, nodes node-1..3 each with its driver pod (revision OLD unless a
 * test says so, Ready, its ResourceSlice published) and one workload pod without
 * claims; a Node PATCH is merged and goes out on the Node's watches; an accepted
 * eviction of a driver pod marks it deleting and deletes it GRACE later, its slice
 * goes with it, and the DaemonSet controller creates the update revision's pod,
 * Ready READY later (never, for a node whose new driver is broken), which publishes
 * the slice again. A watch starts at the resourceVersion it asks for (events since
 * then are replayed), as the API server's watch cache does.
 * Covered: every step of a node (drain, replace, wait, restore) in order, one node
 * at a time, each old plugin pod evicted once, the other pods left alone, no
 * drainer.io/ key left; a runner stopped at each step of node-1 and a new one over
 * the same API state finishing it (no step repeated: one eviction per pod); a node
 * whose new driver never gets Ready (timeout, the rollout stops there, the driver
 * stays out, a DrainerFailed Event, the other nodes untouched); refusals (a
 * RollingUpdate DaemonSet, a node drained by someone else); nothing to do (every
 * node skipped, nothing written); the wait for the DaemonSet controller to observe
 * the newest spec, on the fake clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "drainer/base/json.h"
#include "drainer/base/selector.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/announcer.h"
#include "drainer/ctl/profile.h"
#include "drainer/ctl/rollout-runner.h"
#include "drainer/ctl/rolloutsession.h"
#include "drainer/ctl/runsummary.h"
#include "drainer/dra/claims.h"
#include "drainer/dra/driverstop.h"
#include "drainer/kube/client.h"
#include "fakes/fake-apiserver.h"
#include "fakes/fake-clock.h"
#include "fakes/fake-transport.h"
#include "fakes/test-env.h"

#define MS  USEC_PER_MSEC
#define SEC USEC_PER_SEC

#define NS      "dra-system"
#define DS      "dra-driver"
#define DS_UID  "ds-uid-1"
#define DRIVER  "gpu.example.com"
#define OLD     "rev-old"
#define NEW     "rev-new"
#define GRACE   (2 * SEC)
#define READY   (1 * SEC)
#define TIMEOUT (60 * SEC)
#define N_NODES 3

#define DS_PATH  "/apis/apps/v1/namespaces/" NS "/daemonsets/" DS
#define CR_PATH  "/apis/apps/v1/namespaces/" NS "/controllerrevisions"
#define NSP_PATH "/api/v1/namespaces/" NS "/pods"

struct wnode {
        char name[16];
        cJSON *node;
        /* its driver pod */
        bool drv_present, drv_deleting, drv_ready;
        const char *drv_hash;
        unsigned drv_gen;
        uint64_t drv_gone_at, drv_ready_at;
        bool slice;
        bool never_ready; /* the update revision's pod never gets Ready here */
        unsigned evictions;
        unsigned patches;
};

struct logged_event {
        char *prefix; /* the watch paths it reaches start with this */
        unsigned rv;
        char *line;
};

struct world {
        struct test_api *api;
        struct fake_clock *clock;
        struct fake_transport *ft;
        struct announcer *announcer;
        struct drain_profile profile;
        unsigned rv;
        const char *strategy;
        int64_t generation, observed;
        uint64_t observe_at; /* the controller observes the newest spec then (0: it has) */
        struct wnode nodes[N_NODES];
        struct logged_event log[4096];
        size_t n_log;
        size_t n_handled;
        unsigned failed_events, writes;
        unsigned max_out; /* most nodes with a drainer.io/ key at once */

        struct driver_rollout *runner;
        bool finished, stopped;
        int error;
        char *message;
        char steps[N_NODES][128]; /* each node's steps as the runner reported them */
        unsigned node_done_calls;
};

/* ---- the objects as JSON ---- */

static struct wnode *node_named(struct world *w, const char *name) {
        for (size_t i = 0; i < N_NODES; i++)
                if (streq(w->nodes[i].name, name))
                        return &w->nodes[i];
        return NULL;
}

static char *driver_pod_json(struct world *w, const struct wnode *n) {
        return test_asprintf(
                "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"drv-%s-%u\",\"namespace\":"
                "\"" NS
                "\",\"uid\":\"uid-drv-%s-%u\",\"resourceVersion\":\"%u\",\"labels\":{\"app.kubernetes."
                "io/component\":\"kubeletplugin\",\"controller-revision-hash\":\"%s\"},"
                "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"name\":\"" DS
                "\",\"uid\":\"" DS_UID "\",\"controller\":true}]%s},\"spec\":{\"nodeName\":\"%s\","
                "\"containers\":[{\"name\":\"plugin\",\"image\":\"x\"}]},\"status\":{\"phase\":\"Running\","
                "\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\"}]}}",
                n->name, n->drv_gen, n->name, n->drv_gen, w->rv, n->drv_hash,
                n->drv_deleting
                        ? ",\"deletionTimestamp\":\"2025-06-15T14:00:02Z\",\"deletionGracePeriodSeconds\":2"
                        : "",
                n->name, n->drv_ready ? "True" : "False");
}

static char *app_pod_json(const struct wnode *n) {
        return test_asprintf("{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"app-%s\","
                             "\"namespace\":\"demo\",\"uid\":\"uid-app-%s\",\"resourceVersion\":\"50\","
                             "\"labels\":{\"app\":\"app\"}," FAKE_OWNED_BY_RS(
                                     "app-rs", "rs-app") "},\"spec\":{\"nodeName\":\"%s\",\"containers\":[{"
                                                         "\"name\":\"c\",\"image\":\"x\"}]},"
                                                         "\"status\":{\"phase\":\"Running\",\"conditions\":["
                                                         "{\"type\":\"Ready\",\"status\":"
                                                         "\"True\"}]}}",
                             n->name, n->name, n->name);
}

static char *slice_json(struct world *w, const struct wnode *n) {
        return test_asprintf(
                "{\"kind\":\"ResourceSlice\",\"apiVersion\":\"resource.k8s.io/v1\",\"metadata\":{"
                "\"name\":\"%s-gpu\",\"uid\":\"slice-%s\",\"resourceVersion\":\"%u\"},\"spec\":{"
                "\"driver\":\"" DRIVER "\",\"pool\":{\"name\":\"%s\",\"generation\":1,"
                "\"resourceSliceCount\":1},\"nodeName\":\"%s\",\"devices\":[{\"name\":\"gpu-0\"}]}}",
                n->name, n->name, w->rv, n->name, n->name);
}

static char *node_json(const struct wnode *n) {
        char *s = cJSON_PrintUnformatted(n->node);

        assert_non_null(s);
        return s;
}

static char *daemonset_json(struct world *w) {
        return test_asprintf(
                "{\"kind\":\"DaemonSet\",\"apiVersion\":\"apps/v1\",\"metadata\":{\"name\":\"" DS
                "\",\"namespace\":\"" NS "\",\"uid\":\"" DS_UID "\",\"generation\":%lld,"
                "\"resourceVersion\":\"%u\"},\"spec\":{\"updateStrategy\":{\"type\":\"%s\"}},"
                "\"status\":{\"observedGeneration\":%lld}}",
                (long long)w->generation, w->rv, w->strategy, (long long)w->observed);
}

static char *revision_json(const char *name, const char *hash, int revision) {
        return test_asprintf(
                "{\"kind\":\"ControllerRevision\",\"apiVersion\":\"apps/v1\",\"metadata\":{"
                "\"name\":\"%s\",\"namespace\":\"" NS "\",\"labels\":{\"controller-revision-hash\":"
                "\"%s\"},\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\","
                "\"name\":\"" DS "\",\"uid\":\"" DS_UID "\",\"controller\":true}]},\"revision\":%d}",
                name, hash, revision);
}

/* ---- watches: every event logged, replayed to a watch from its resourceVersion ---- */

static char *watch_prefix(const char *base, const char *selector, const char *value) {
        return test_asprintf("%s?fieldSelector=%s%%3D%s&", base, selector, value);
}

static void event(struct world *w, char *prefix, const char *type, char *obj) {
        char *line = fake_api_watch_event(type, obj);

        assert_true(w->n_log < ELEMENTSOF(w->log));
        w->log[w->n_log++] = (struct logged_event){ .prefix = prefix, .rv = w->rv, .line = line };
        fake_transport_push(w->ft, prefix, line);
        free(obj);
}

static void node_event(struct world *w, struct wnode *n) {
        event(w, watch_prefix("/api/v1/nodes", "metadata.name", n->name), "MODIFIED", node_json(n));
}

static void pod_event(struct world *w, struct wnode *n, const char *type) {
        w->rv++;
        event(w, watch_prefix("/api/v1/pods", "spec.nodeName", n->name), type, driver_pod_json(w, n));
}

static void slice_event(struct world *w, struct wnode *n, const char *type) {
        w->rv++;
        event(w, watch_prefix("/apis/resource.k8s.io/v1/resourceslices", "spec.nodeName", n->name), type,
              slice_json(w, n));
}

/* The value of fieldSelector=KEY%3DVALUE in the query q, or NULL. */
static const char *selected(const char *q, const char *key, char *buf, size_t size) {
        _cleanup_free_ char *pat = test_asprintf("fieldSelector=%s%%3D", key);
        const char *at = q ? strstr(q, pat) : NULL;
        size_t len;

        if (!at)
                return NULL;
        at += strlen(pat);
        len = strcspn(at, "&");
        assert_true(len < size);
        memcpy(buf, at, len);
        buf[len] = 0;
        return buf;
}

static char *list_json(struct world *w, const char *kind, char **items, size_t n) {
        return fake_api_list(kind, w->rv, items, n);
}

/* A GET of a list (or a watch of it) of base with query q. */
static void on_list(struct world *w, const struct fake_request *r, const char *base, const char *q) {
        char *items[2 * N_NODES + 2];
        size_t n = 0;
        char name[64];
        const char *node = NULL;
        _cleanup_free_ char *prefix = NULL;
        const char *kind = NULL;

        if (streq(base, "/api/v1/nodes")) {
                node = selected(q, "metadata.name", name, sizeof(name));
                kind = "NodeList";
                if (node)
                        prefix = watch_prefix(base, "metadata.name", node);
                for (size_t i = 0; i < N_NODES; i++)
                        if (!node || streq(node, w->nodes[i].name))
                                items[n++] = node_json(&w->nodes[i]);
        } else if (streq(base, "/api/v1/pods")) {
                node = selected(q, "spec.nodeName", name, sizeof(name));
                assert_non_null(node);
                kind = "PodList";
                prefix = watch_prefix(base, "spec.nodeName", node);
                for (size_t i = 0; i < N_NODES; i++)
                        if (streq(node, w->nodes[i].name)) {
                                items[n++] = app_pod_json(&w->nodes[i]);
                                if (w->nodes[i].drv_present)
                                        items[n++] = driver_pod_json(w, &w->nodes[i]);
                        }
        } else if (streq(base, NSP_PATH)) {
                kind = "PodList";
                for (size_t i = 0; i < N_NODES; i++)
                        if (w->nodes[i].drv_present)
                                items[n++] = driver_pod_json(w, &w->nodes[i]);
        } else if (streq(base, "/apis/resource.k8s.io/v1/resourceslices")) {
                node = selected(q, "spec.nodeName", name, sizeof(name));
                assert_non_null(node);
                kind = "ResourceSliceList";
                prefix = watch_prefix(base, "spec.nodeName", node);
                for (size_t i = 0; i < N_NODES; i++)
                        if (streq(node, w->nodes[i].name) && w->nodes[i].slice)
                                items[n++] = slice_json(w, &w->nodes[i]);
        } else if (streq(base, "/apis/resource.k8s.io/v1/resourceclaims"))
                kind = "ResourceClaimList";
        else if (streq(base, "/apis/policy/v1/poddisruptionbudgets"))
                kind = "PodDisruptionBudgetList";
        else if (streq(base, CR_PATH)) {
                kind = "ControllerRevisionList";
                items[n++] = revision_json(DS "-old", OLD, 1);
                items[n++] = revision_json(DS "-new", NEW, 2);
        } else
                fail_msg("unexpected list %s", r->path);

        if (fake_request_has_param(r, "watch")) {
                _cleanup_free_ char *from = fake_request_param(r, "resourceVersion");
                unsigned since = from ? (unsigned)strtoul(from, NULL, 10) : 0;
                size_t len = 0;
                _cleanup_free_ char *body = NULL;

                for (size_t i = 0; i < n; i++)
                        free(items[i]);
                /* the events since its resourceVersion, then held open */
                for (size_t i = 0; prefix && i < w->n_log; i++)
                        if (w->log[i].rv > since && streq(w->log[i].prefix, prefix))
                                len += strlen(w->log[i].line);
                body = calloc(1, len + 1);
                assert_non_null(body);
                for (size_t i = 0; prefix && i < w->n_log; i++)
                        if (w->log[i].rv > since && streq(w->log[i].prefix, prefix))
                                strcat(body, w->log[i].line);
                fake_transport_expect(w->ft, "GET", r->path,
                                      &(struct fake_reply){ .body = len ? body : NULL, .hold_open = true });
                return;
        }
        {
                _cleanup_free_ char *body = list_json(w, kind, items, n);

                fake_transport_expect_json(w->ft, "GET", r->path, 200, body);
        }
}

static unsigned drainer_keys(const struct wnode *n) {
        const cJSON *a = json_path(n->node, "metadata.annotations"), *it;
        unsigned k = 0;

        cJSON_ArrayForEach(it, a) k += strncmp(it->string, "drainer.io/", 11) == 0;
        return k;
}

static void on_node_patch(struct world *w, const struct fake_request *r, struct wnode *n) {
        unsigned out = 0;

        /* answered with the merged Node; the watch event follows (node_event) */
        free(fake_api_patch_node_at(w->ft, r->path, n->node, &w->rv, r->body));
        n->patches++;
        w->writes++;
        node_event(w, n);
        for (size_t i = 0; i < N_NODES; i++)
                out += drainer_keys(&w->nodes[i]) > 0;
        if (out > w->max_out)
                w->max_out = out;
}

static void on_eviction(struct world *w, const struct fake_request *r) {
        struct wnode *n = NULL;

        w->writes++;
        for (size_t i = 0; i < N_NODES; i++) {
                _cleanup_free_ char *p =
                        test_asprintf(NSP_PATH "/drv-%s-%u/eviction", w->nodes[i].name, w->nodes[i].drv_gen);

                if (streq(r->path, p) && w->nodes[i].drv_present)
                        n = &w->nodes[i];
        }
        assert_non_null(n);
        /* a driver pod is evicted with its own grace period, never 0 */
        assert_null(strstr(r->body, "\"gracePeriodSeconds\":0"));
        assert_false(n->drv_deleting);
        n->evictions++;
        fake_transport_expect_json(w->ft, "POST", r->path, 201,
                                   "{\"kind\":\"Status\",\"status\":\"Success\"}");
        n->drv_deleting = true;
        n->drv_gone_at = fake_clock_now(w->clock) + GRACE;
        pod_event(w, n, "MODIFIED");
}

static void serve_request(struct world *w, const struct fake_request *r) {
        _cleanup_free_ char *base = strdup(r->path);
        char *q = strchr(base, '?');

        if (q)
                *q++ = 0;
        if (streq(r->method, "GET")) {
                if (streq(base, DS_PATH)) {
                        _cleanup_free_ char *ds = daemonset_json(w);

                        fake_transport_expect_json(w->ft, "GET", r->path, 200, ds);
                } else if (streq(base, "/apis/resource.k8s.io/v1"))
                        /* DeviceTaintRules are not served: the cordon fallback */
                        fake_transport_expect_json(w->ft, "GET", r->path, 200,
                                                   "{\"kind\":\"APIResourceList\",\"resources\":[{\"name\":"
                                                   "\"resourceclaims\"},{\"name\":\"resourceslices\"}]}");
                else if (strncmp(base, "/apis/resource.k8s.io/v1beta", 28) == 0 && !strchr(base + 28, '/'))
                        fake_transport_expect_json(
                                w->ft, "GET", r->path, 404,
                                "{\"kind\":\"Status\",\"reason\":\"NotFound\",\"code\":404}");
                else
                        on_list(w, r, base, q);
        } else if (streq(r->method, "PATCH") && strncmp(base, "/api/v1/nodes/", 14) == 0) {
                struct wnode *n = node_named(w, base + 14);

                assert_non_null(n);
                on_node_patch(w, r, n);
        } else if (streq(r->method, "POST") && strstr(base, "/eviction"))
                on_eviction(w, r);
        else if (streq(r->method, "POST") && strstr(base, "/events")) {
                if (r->body && strstr(r->body, "DrainerFailed"))
                        w->failed_events++;
                fake_transport_expect_json(w->ft, "POST", r->path, 201, "{}");
        } else
                fail_msg("unexpected request %s %s", r->method, r->path);
}

/* Answers every request not answered yet; deliveries may send more. */
static void serve(struct world *w) {
        for (int round = 0; round < 100; round++) {
                size_t n = fake_transport_n_requests(w->ft);

                if (n == w->n_handled && fake_transport_deliver(w->ft) == 0)
                        return;
                for (; w->n_handled < n; w->n_handled++)
                        serve_request(w, fake_transport_request(w->ft, w->n_handled));
        }
        fail_msg("requests keep coming");
}

/* Time goes by: the kubelet deletes the evicted pods, the DaemonSet controller
 * creates the update revision's, which gets Ready and publishes its slice. */
static void world_tick(struct world *w) {
        uint64_t now = fake_clock_now(w->clock);

        if (w->observe_at && now >= w->observe_at) {
                w->observed = w->generation;
                w->observe_at = 0;
        }
        for (size_t i = 0; i < N_NODES; i++) {
                struct wnode *n = &w->nodes[i];

                if (n->drv_present && n->drv_deleting && now >= n->drv_gone_at) {
                        pod_event(w, n, "DELETED");
                        n->drv_present = false;
                        if (n->slice) {
                                slice_event(w, n, "DELETED");
                                n->slice = false;
                        }
                }
                if (!n->drv_present) { /* OnDelete: the controller creates the update revision's pod */
                        n->drv_present = true;
                        n->drv_deleting = n->drv_ready = false;
                        n->drv_hash = NEW;
                        n->drv_gen++;
                        n->drv_ready_at = now + READY;
                        pod_event(w, n, "ADDED");
                } else if (!n->drv_ready && !n->drv_deleting && !n->never_ready && now >= n->drv_ready_at) {
                        n->drv_ready = true;
                        pod_event(w, n, "MODIFIED");
                }
                if (n->drv_present && n->drv_ready && !n->drv_deleting && !n->slice) {
                        n->slice = true;
                        slice_event(w, n, "ADDED");
                }
        }
}

static void step(struct world *w, uint64_t usec) {
        serve(w);
        world_tick(w);
        serve(w);
        fake_clock_advance(w->clock, usec);
}

/* ---- the runner ---- */

static void on_progress(struct driver_rollout *rollout, const char *node, const char *message,
                        void *userdata) {
        struct world *w = userdata;
        struct wnode *n = node_named(w, node);
        size_t i = (size_t)(n - w->nodes);
        struct driver_rollout_node_status st;

        assert_non_null(n);
        assert_non_null(message);
        for (size_t j = 0; j < driver_rollout_n_nodes(rollout); j++) {
                driver_rollout_node_status(rollout, j, &st);
                if (streq(st.name, node) && st.step[0]) {
                        size_t len = strlen(w->steps[i]);
                        const char *last = strrchr(w->steps[i], ' ');

                        last = last ? last + 1 : w->steps[i];
                        if (!streq(last, st.step))
                                snprintf(w->steps[i] + len, sizeof(w->steps[i]) - len, "%s%s",
                                         len ? " " : "", st.step);
                }
        }
}

static void on_node_done(struct driver_rollout *rollout, const char *node, int error, const char *message,
                         void *userdata) {
        struct world *w = userdata;

        assert_non_null(message);
        w->node_done_calls++;
}

static void on_finished(struct driver_rollout *rollout, int error, const char *message, void *userdata) {
        struct world *w = userdata;

        assert_false(w->finished);
        w->finished = true;
        w->error = error;
        w->message = message ? strdup(message) : NULL;
}

static const struct driver_rollout_callbacks callbacks = {
        .on_progress = on_progress,
        .on_node_done = on_node_done,
        .on_finished = on_finished,
};

static void runner_start(struct world *w, uint64_t timeout) {
        w->finished = w->stopped = false;
        free(w->message);
        w->message = NULL;
        assert_int_equal(driver_rollout_new(w->api->client, w->api->ts,
                                            &(const struct driver_rollout_options){
                                                    .ds_namespace = NS,
                                                    .ds_name = DS,
                                                    .driver = DRIVER,
                                                    .max_parallel = 1,
                                                    .timeout_usec = timeout,
                                                    .profile = &w->profile,
                                                    .transport = fake_transport_base(w->ft),
                                                    .announcer = w->announcer,
                                            },
                                            &callbacks, w, &w->runner),
                         0);
        assert_int_equal(driver_rollout_start(w->runner), 0);
}

static void on_stopped(void *userdata) {
        struct world *w = userdata;

        w->stopped = true;
}

/* Stopped (as the verb's SIGINT stops it) and freed; what it sent stays done. */
static void runner_kill(struct world *w) {
        driver_rollout_stop(w->runner, on_stopped, w);
        assert_false(w->stopped); /* from the loop, never from inside the call */
        for (int i = 0; i < 500 && !w->stopped; i++)
                step(w, 10 * MS);
        assert_true(w->stopped);
        driver_rollout_free(w->runner);
        w->runner = NULL;
        serve(w);
}

static void run_until_finished(struct world *w, uint64_t usec) {
        for (uint64_t t = 0; t < usec && !w->finished; t += 10 * MS)
                step(w, 10 * MS);
        assert_true(w->finished);
}

static const char *node_status_step(struct world *w, size_t i) {
        struct driver_rollout_node_status st;

        driver_rollout_node_status(w->runner, i, &st);
        return st.step;
}

static enum driver_rollout_result node_result(struct world *w, size_t i) {
        struct driver_rollout_node_status st;

        driver_rollout_node_status(w->runner, i, &st);
        return st.result;
}

/* ---- setup ---- */

static int setup(void **state) {
        struct world *w = calloc(1, sizeof(*w));

        assert_non_null(w);
        w->api = test_api_new(&(struct test_api_options){ .user_yaml = "    token: rollout-token\n" });
        w->clock = w->api->clock;
        w->ft = w->api->ft;
        assert_int_equal(announcer_new(w->api->client, w->api->ts, "test", &w->announcer), 0);
        w->rv = 100;
        w->strategy = "OnDelete";
        w->generation = w->observed = 2;
        w->profile = (struct drain_profile){ .grace = -1, .stop = &driver_stop_none };
        w->profile.drivers[0] = DRIVER;
        w->profile.n_drivers = 1;
        assert_int_equal(selectors_parse_strv(claims_default_driver_selectors, &w->profile.drv_sels,
                                              &w->profile.n_drv_sels, NULL),
                         0);
        for (size_t i = 0; i < N_NODES; i++) {
                struct wnode *n = &w->nodes[i];
                _cleanup_free_ char *js = NULL;

                snprintf(n->name, sizeof(n->name), "node-%zu", i + 1);
                js = test_asprintf(
                        "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"%s\","
                        "\"uid\":\"uid-%s\",\"resourceVersion\":\"90\",\"labels\":{},\"annotations\":{}},"
                        "\"spec\":{},\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":"
                        "\"True\"}]}}",
                        n->name, n->name);
                n->node = fake_api_json(js);
                n->drv_present = n->drv_ready = n->slice = true;
                n->drv_hash = OLD;
        }
        *state = w;
        return 0;
}

static int teardown(void **state) {
        struct world *w = *state;

        if (w->runner)
                runner_kill(w);
        for (int i = 0; i < 100 && !announcer_idle(w->announcer); i++)
                step(w, 10 * MS);
        assert_true(announcer_idle(w->announcer));
        announcer_free(w->announcer);
        for (int i = 0; i < 100 && fake_transport_in_flight(w->ft) > 0; i++) {
                fake_transport_deliver(w->ft);
                fake_clock_advance(w->clock, 10 * MS);
        }
        test_api_free(w->api);
        drain_profile_done(&w->profile);
        for (size_t i = 0; i < N_NODES; i++)
                cJSON_Delete(w->nodes[i].node);
        for (size_t i = 0; i < w->n_log; i++) {
                free(w->log[i].prefix);
                free(w->log[i].line);
        }
        free(w->message);
        free(w);
        return 0;
}

/* Every node on the update revision, Ready, its slice back, nothing of drainer left. */
static void assert_all_updated(struct world *w) {
        for (size_t i = 0; i < N_NODES; i++) {
                struct wnode *n = &w->nodes[i];

                assert_string_equal(n->drv_hash, NEW);
                assert_true(n->drv_ready);
                assert_true(n->slice);
                assert_int_equal(n->evictions, 1);
                assert_int_equal(drainer_keys(n), 0);
                assert_null(json_path(n->node, "spec.unschedulable") &&
                                            cJSON_IsTrue(json_path(n->node, "spec.unschedulable"))
                                    ? "unschedulable"
                                    : NULL);
        }
        assert_int_equal(w->max_out, 1); /* one node at a time */
}

/* ---- the tests ---- */

static void test_every_step_node_by_node(void **state) {
        struct world *w = *state;

        runner_start(w, TIMEOUT);
        run_until_finished(w, 300 * SEC);
        assert_int_equal(w->error, 0);
        assert_string_equal(driver_rollout_revision(w->runner), NEW);
        assert_int_equal(driver_rollout_n_nodes(w->runner), N_NODES);
        assert_int_equal(driver_rollout_worst(w->runner), DRIVER_ROLLOUT_UPDATED);
        for (size_t i = 0; i < N_NODES; i++) {
                struct driver_rollout_node_status st;
                _cleanup_free_ char *replaced = test_asprintf(NS "/drv-%s-0", w->nodes[i].name);

                driver_rollout_node_status(w->runner, i, &st);
                assert_int_equal(st.result, DRIVER_ROLLOUT_UPDATED);
                assert_string_equal(st.name, w->nodes[i].name);
                assert_string_equal(st.replaced, replaced);
                assert_true(st.has_out);
                assert_int_equal(st.pods_kept, 1); /* the workload pod, same UID throughout */
                test_assert_contains(st.message, "back in service");
                /* drain (record, the driver-scoped drain), the old pod evicted, the new one
                 * awaited, the restore */
                test_assert_contains(w->steps[i], "drain replace wait restore");
                print_message("  %s: steps \"%s\", %u Node patches, %s\n", w->nodes[i].name, w->steps[i],
                              w->nodes[i].patches, st.message);
        }
        assert_int_equal(w->node_done_calls, N_NODES);
        assert_all_updated(w);
        assert_int_equal(w->failed_events, 0);
        {
                _cleanup_(cJSON_Deletep) cJSON *j =
                        driver_rollout_summary_json(w->runner, NS "/drv", DRIVER, 1, 12.5, false, 0);
                size_t updated, skipped;

                driver_rollout_count(w->runner, &updated, &skipped);
                assert_int_equal(updated, N_NODES);
                assert_int_equal(skipped, 0);
                assert_non_null(j);
                assert_string_equal(json_get_str(j, "revision"), NEW);
                assert_string_equal(json_get_str(j, "driver"), DRIVER);
                assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "nodes")), N_NODES);
                assert_string_equal(
                        json_get_str(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "nodes"), 0), "result"),
                        driver_rollout_result_to_string(DRIVER_ROLLOUT_UPDATED));
                assert_int_equal(cJSON_GetObjectItem(j, "updated")->valuedouble, N_NODES);
                assert_true(cJSON_IsFalse(cJSON_GetObjectItem(j, "interrupted")));
                assert_int_equal(cJSON_GetObjectItem(j, "exitCode")->valuedouble, 0);
        }
}

/* A runner stopped at a step of node-1 and a new one over the same API state. */
static void kill_at(struct world *w, const char *at) {
        bool seen = false;

        print_message("  stopped at node-1's step \"%s\"\n", at);
        runner_start(w, TIMEOUT);
        for (int i = 0; i < 30000 && !seen && !w->finished; i++) {
                step(w, 10 * MS);
                seen = driver_rollout_n_nodes(w->runner) > 0 && streq(node_status_step(w, 0), at);
        }
        assert_true(seen);
        runner_kill(w);
        assert_false(w->finished);

        runner_start(w, TIMEOUT);
        run_until_finished(w, 300 * SEC);
        assert_int_equal(w->error, 0);
        for (size_t i = 0; i < N_NODES; i++)
                assert_int_equal(node_result(w, i), DRIVER_ROLLOUT_UPDATED);
        assert_all_updated(w); /* one eviction per old pod: no step done twice */
}

static void test_kill_at_drain(void **state) {
        kill_at(*state, "drain");
}

static void test_kill_at_replace(void **state) {
        kill_at(*state, "replace");
}

static void test_kill_at_wait(void **state) {
        kill_at(*state, "wait");
}

static void test_kill_at_restore(void **state) {
        kill_at(*state, "restore");
}

/* node-1's new driver never gets Ready: the node times out, the rollout stops there,
 * its driver stays out of service (the Node says so), nothing else is touched. */
static void test_new_driver_never_healthy(void **state) {
        struct world *w = *state;
        char key[64];

        w->nodes[0].never_ready = true;
        runner_start(w, 30 * SEC);
        run_until_finished(w, 120 * SEC);
        assert_int_equal(w->error, 0);
        assert_int_equal(node_result(w, 0), DRIVER_ROLLOUT_TIMEOUT);
        assert_int_equal(driver_rollout_worst(w->runner), DRIVER_ROLLOUT_TIMEOUT);
        assert_int_equal(node_result(w, 1), DRIVER_ROLLOUT_NOT_STARTED);
        assert_int_equal(node_result(w, 2), DRIVER_ROLLOUT_NOT_STARTED);
        {
                _cleanup_(cJSON_Deletep) cJSON *j =
                        driver_rollout_summary_json(w->runner, NS "/drv", DRIVER, 1, 30, false, 3);
                const cJSON *n0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "nodes"), 0);

                assert_string_equal(json_get_str(n0, "result"),
                                    driver_rollout_result_to_string(DRIVER_ROLLOUT_TIMEOUT));
                assert_null(cJSON_GetObjectItem(n0, "podsKeptRunning")); /* only for an updated node */
                test_assert_contains(json_get_str(n0, "message"), "the rollout stops here");
                assert_int_equal(cJSON_GetObjectItem(j, "updated")->valuedouble, 0);
        }
        {
                struct driver_rollout_node_status st;

                driver_rollout_node_status(w->runner, 0, &st);
                assert_int_equal(st.error, -ETIMEDOUT);
                test_assert_contains(st.message, "the rollout stops here");
        }
        snprintf(key, sizeof(key), "drainer.io/state.%s", DRIVER);
        assert_non_null(json_get_str(json_path(w->nodes[0].node, "metadata.annotations"), key));
        assert_int_equal(w->nodes[0].evictions, 1);
        for (size_t i = 1; i < N_NODES; i++) {
                assert_int_equal(w->nodes[i].evictions, 0);
                assert_int_equal(w->nodes[i].patches, 0);
                assert_string_equal(w->nodes[i].drv_hash, OLD);
        }
        runner_kill(w);
        for (int i = 0; i < 100 && !announcer_idle(w->announcer); i++)
                step(w, 10 * MS);
        assert_int_equal(w->failed_events, 1);
}

static void test_refused_rolling_update(void **state) {
        struct world *w = *state;

        w->strategy = "RollingUpdate";
        runner_start(w, TIMEOUT);
        run_until_finished(w, 5 * SEC);
        assert_int_equal(w->error, -EPERM);
        test_assert_contains(w->message, "OnDelete");
        assert_null(driver_rollout_revision(w->runner));
        assert_int_equal(w->writes, 0);
        assert_int_equal(fake_transport_count(w->ft, NULL, "/api/v1/nodes"), 0);
}

/* The runner with its own slots and Events (rolloutsession.c): set up together; the
 * stop winds them down in order and says so once, from the loop. */
static void test_session_wind_down(void **state) {
        struct world *w = *state;
        struct rollout_session *s = NULL;
        enum rollout_session_part failed;

        w->strategy = "RollingUpdate"; /* refused before any slot or write */
        assert_int_equal(rollout_session_new(w->api->client, w->api->ts,
                                             &(const struct rollout_session_options){
                                                     .rollout = {
                                                             .ds_namespace = NS,
                                                             .ds_name = DS,
                                                             .driver = DRIVER,
                                                             .max_parallel = 1,
                                                             .timeout_usec = TIMEOUT,
                                                             .profile = &w->profile,
                                                             .transport = fake_transport_base(w->ft),
                                                             .lease_namespace = NS,
                                                     },
                                                     .instance = "test",
                                                     .identity = "test-host",
                                             },
                                             &callbacks, w, &s, &failed),
                         0);
        assert_non_null(rollout_session_runner(s));
        assert_int_equal(rollout_session_start(s), 0);
        run_until_finished(w, 5 * SEC);
        assert_int_equal(w->error, -EPERM);
        rollout_session_stop(s, on_stopped, w);
        assert_false(w->stopped); /* from the loop, never from inside the call */
        for (int i = 0; i < 2000 && !w->stopped; i++)
                step(w, 10 * MS);
        assert_true(w->stopped);
        assert_int_equal(w->writes, 0);
        assert_int_equal(fake_transport_count(w->ft, NULL, "/apis/coordination.k8s.io"),
                         0); /* no slot taken */
        rollout_session_free(s);
}

/* node-1 is drained by someone else (a node drain): refused, never taken over. */
static void test_refused_foreign_drain(void **state) {
        struct world *w = *state;
        cJSON *ann = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(w->nodes[0].node, "metadata"), "annotations");

        cJSON_AddStringToObject(ann, "drainer.io/state", "evict-rest");
        runner_start(w, TIMEOUT);
        run_until_finished(w, 30 * SEC);
        assert_int_equal(w->error, 0);
        assert_int_equal(node_result(w, 0), DRIVER_ROLLOUT_REFUSED);
        assert_int_equal(node_result(w, 1), DRIVER_ROLLOUT_NOT_STARTED);
        assert_int_equal(driver_rollout_worst(w->runner), DRIVER_ROLLOUT_REFUSED);
        assert_int_equal(w->writes, 0);
        for (size_t i = 0; i < N_NODES; i++)
                assert_string_equal(w->nodes[i].drv_hash, OLD);
}

static void test_nothing_to_do(void **state) {
        struct world *w = *state;

        for (size_t i = 0; i < N_NODES; i++)
                w->nodes[i].drv_hash = NEW;
        runner_start(w, TIMEOUT);
        run_until_finished(w, 30 * SEC);
        assert_int_equal(w->error, 0);
        for (size_t i = 0; i < N_NODES; i++)
                assert_int_equal(node_result(w, i), DRIVER_ROLLOUT_SKIPPED);
        assert_int_equal(w->writes, 0);
}

/* The DaemonSet controller observes the newest spec 2 s later: read again on the
 * fake clock's timer, every 500 ms; never observed: -ETIMEDOUT after 20 tries. */
static void test_waits_for_observed_generation(void **state) {
        struct world *w = *state;

        w->generation = 3;
        w->observe_at = fake_clock_now(w->clock) + 2 * SEC;
        runner_start(w, TIMEOUT);
        for (int i = 0; i < 150; i++)
                step(w, 10 * MS);
        assert_false(w->finished);
        assert_null(driver_rollout_revision(w->runner));
        run_until_finished(w, 300 * SEC);
        assert_int_equal(w->error, 0);
        assert_int_equal(fake_transport_count(w->ft, "GET", DS_PATH), 5);
        assert_all_updated(w);
        runner_kill(w);

        w->generation = 4;
        runner_start(w, TIMEOUT);
        run_until_finished(w, 30 * SEC);
        assert_int_equal(w->error, -ETIMEDOUT);
        test_assert_contains(w->message, "kube-controller-manager");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_every_step_node_by_node, setup, teardown),
                cmocka_unit_test_setup_teardown(test_kill_at_drain, setup, teardown),
                cmocka_unit_test_setup_teardown(test_kill_at_replace, setup, teardown),
                cmocka_unit_test_setup_teardown(test_kill_at_wait, setup, teardown),
                cmocka_unit_test_setup_teardown(test_kill_at_restore, setup, teardown),
                cmocka_unit_test_setup_teardown(test_new_driver_never_healthy, setup, teardown),
                cmocka_unit_test_setup_teardown(test_refused_rolling_update, setup, teardown),
                cmocka_unit_test_setup_teardown(test_session_wind_down, setup, teardown),
                cmocka_unit_test_setup_teardown(test_refused_foreign_drain, setup, teardown),
                cmocka_unit_test_setup_teardown(test_nothing_to_do, setup, teardown),
                cmocka_unit_test_setup_teardown(test_waits_for_observed_generation, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
