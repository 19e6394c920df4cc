/* planner: one node's plan read step by step on the fake API server and the fake clock
 * (ctl/planner.c, what `drainer plan` and `drain --dry-run` show). Covered: a node
 * drain's plan (no discovery asked); --driver on a server without DeviceTaintRules (the
 * cordon fallback, the seamless answer without a DaemonSet); the label KEY read when
 * no driver pod names a DaemonSet (a blocker, not a failure); a discovery that fails
 * (the error and its message, no plan); a close mid-way (no callback after it, every
 * read ended, closed once from the loop); the server dry run (the cordon patch and each
 * eviction with dryRun=All, a budget's 429 kept as the answer). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/json.h"
#include "drainer/base/selector.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/planner.h"
#include "drainer/ctl/profile.h"
#include "drainer/dra/claims.h"
#include "drainer/dra/driverstop.h"
#include "drainer/kube/client.h"
#include "fakes/fake-apiserver.h"
#include "fakes/fake-clock.h"
#include "fakes/fake-transport.h"
#include "fakes/test-env.h"

#define MS USEC_PER_MSEC

#define NODE_GET "/api/v1/nodes/node-1"
#define SLICES   "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3Dnode-1"
#define DRIVER   "gpu.example.com"

struct env {
        struct test_api *api;
        struct selector **sels;
        size_t n_sels;
        struct drain_profile profile;
        struct planner *pl;
        unsigned ready, cordoned, evicting, dry_done, closed;
        int error, cordon_error, dry_error;
        char message[512];
};

static int setup(void **state) {
        struct env *e = calloc(1, sizeof(*e));

        assert_non_null(e);
        e->api = test_api_new(&(struct test_api_options){ .user_yaml = "    token: planner-token\n" });
        assert_int_equal(selectors_parse_strv(claims_default_driver_selectors, &e->sels, &e->n_sels, NULL),
                         0);
        e->profile = (struct drain_profile){
                .drv_sels = e->sels,
                .n_drv_sels = e->n_sels,
                .grace = -1,
                .stop = &driver_stop_taint,
        };
        *state = e;
        return 0;
}

static void run(struct env *e, uint64_t usec) {
        test_api_run(e->api, usec, MS);
}

static void on_closed(void *userdata) {
        ((struct env *)userdata)->closed++;
}

static void close_planner(struct env *e) {
        planner_close(TAKE_PTR(e->pl), on_closed, e);
        assert_int_equal(e->closed, 0); /* never from inside the call */
        for (int i = 0; i < 100 && !e->closed; i++)
                run(e, 0);
        assert_int_equal(e->closed, 1);
}

static int teardown(void **state) {
        struct env *e = *state;

        if (e->pl)
                close_planner(e);
        run(e, 10 * MS);
        test_api_free(e->api);
        selectors_free(e->sels, e->n_sels);
        free(e);
        return 0;
}

static void on_ready(struct planner *p, int error, const char *message, void *userdata) {
        struct env *e = userdata;

        e->ready++;
        e->error = error;
        snprintf(e->message, sizeof(e->message), "%s", message ? message : "");
}

static void on_cordoned(struct planner *p, int error, void *userdata) {
        struct env *e = userdata;

        e->cordoned++;
        e->cordon_error = error;
}

static void on_evicting(struct planner *p, const struct pod_rec *pod, void *userdata) {
        ((struct env *)userdata)->evicting++;
}

static void on_dry_run_done(struct planner *p, int error, void *userdata) {
        struct env *e = userdata;

        e->dry_done++;
        e->dry_error = error;
}

static const struct planner_callbacks callbacks = {
        .on_ready = on_ready,
        .on_cordoned = on_cordoned,
        .on_evicting = on_evicting,
        .on_dry_run_done = on_dry_run_done,
};

static void expect_list(struct env *e, const char *path, const char *kind, char **items) {
        _cleanup_free_ char *prefix = test_asprintf("%s%slimit=", path, strchr(path, '?') ? "&" : "?");
        _cleanup_free_ char *body = fake_api_list_strv(kind, items);

        fake_transport_expect_json(e->api->ft, "GET", prefix, 200, body);
}

/* node-1 with the annotations and labels given (a JSON object's members, "" none), the
 * pods and claims given (NULL-terminated, malloc'd, taken), no slices. */
static void expect_snapshot_full(struct env *e, const char *annotations, const char *labels, char **pods,
                                 char **claims) {
        _cleanup_free_ char *node =
                test_asprintf("{\"metadata\":{\"name\":\"node-1\",\"uid\":\"" FAKE_API_NODE_UID "\","
                              "\"resourceVersion\":\"90\",\"annotations\":{%s},\"labels\":{%s}},\"spec\":{},"
                              "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
                              annotations, labels);

        fake_transport_expect_json(e->api->ft, "GET", NODE_GET, 200, node);
        expect_list(e, FAKE_API_PODS, "PodList", pods);
        expect_list(e, FAKE_API_CLAIMS, "ResourceClaimList", claims);
        expect_list(e, SLICES, "ResourceSliceList", (char *[]){ NULL });
        expect_list(e, FAKE_API_PDBS, "PodDisruptionBudgetList", (char *[]){ NULL });
}

static void expect_snapshot_annotated(struct env *e, const char *annotations, char **pods) {
        expect_snapshot_full(e, annotations, "", pods, (char *[]){ NULL });
}

static void expect_snapshot(struct env *e, char **pods) {
        expect_snapshot_annotated(e, "", pods);
}

static char *web_pod(const char *name) {
        return fake_api_pod(&(struct fake_pod){
                .name = name, .meta = FAKE_OWNED_BY_RS("web-rs", "rs-web"), .ready = "True" });
}

static void start(struct env *e, bool key_from_daemonset) {
        assert_int_equal(planner_new(e->api->client, fake_transport_base(e->api->ft), e->api->ts,
                                     &(const struct planner_options){
                                             .node = "node-1",
                                             .profile = &e->profile,
                                             .key_from_daemonset = key_from_daemonset,
                                     },
                                     &callbacks, e, &e->pl),
                         0);
        assert_int_equal(e->ready, 0); /* never from inside the call */
}

/* A node drain: the snapshot, the plan; nothing asked of resource.k8s.io discovery. */
static void test_node_plan(void **state) {
        struct env *e = *state;
        struct planner_result *res;

        expect_snapshot(e, (char *[]){ web_pod("web-1"), web_pod("web-2"), NULL });
        start(e, false);
        run(e, 100 * MS);
        assert_int_equal(e->ready, 1);
        assert_int_equal(e->error, 0);
        res = planner_result(e->pl);
        assert_string_equal(res->node->name, "node-1");
        assert_int_equal(res->plan.n_pods, 2);
        assert_int_equal(res->plan.n_blockers, 0);
        assert_false(res->seam_known);
        assert_int_equal(fake_transport_count(e->api->ft, "GET", "/apis/resource.k8s.io/v1beta2"), 0);
        for (size_t i = 0; i < fake_transport_n_requests(e->api->ft); i++)
                assert_false(streq(fake_transport_request(e->api->ft, i)->path, "/apis/resource.k8s.io/v1"));
}

/* A claim of node-1 reserved for a PodGroup: the plan lists its pods on every node,
 * read from its namespace (the watch cache); pods that do not name it are left out. A
 * failed read of them is a note, the plan still comes. */
static void test_podgroup_pods(void **state) {
        static const char spec[] =
                "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":\"gang-gpu\"}]";
        struct env *e = *state;
        struct planner_result *res;
        const struct plan_claim *pc;
        char *claim = fake_api_claim(&(struct fake_claim){ .name = "gang-gpu",
                                                           .rv = 7,
                                                           .driver = DRIVER,
                                                           .allocated = true,
                                                           .reserved_podgroup = "gang" });
        char *w0 = fake_api_pod(&(struct fake_pod){ .name = "worker-0", .spec = spec, .ready = "True" });
        char *w1 = strdup("{\"metadata\":{\"name\":\"worker-1\",\"namespace\":\"demo\",\"uid\":\"u1\"},"
                          "\"spec\":{\"nodeName\":\"node-2\",\"resourceClaims\":[{\"name\":\"gpu\","
                          "\"resourceClaimName\":\"gang-gpu\"}]},\"status\":{\"phase\":\"Running\"}}");
        char *w2 = strdup("{\"metadata\":{\"name\":\"worker-2\",\"namespace\":\"demo\",\"uid\":\"u2\"},"
                          "\"spec\":{\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":"
                          "\"gang-gpu\"}]},\"status\":{\"phase\":\"Pending\"}}");
        char *other = strdup("{\"metadata\":{\"name\":\"web\",\"namespace\":\"demo\",\"uid\":\"u3\"},"
                             "\"spec\":{\"nodeName\":\"node-2\"},\"status\":{\"phase\":\"Running\"}}");
        char *text = NULL;
        size_t size = 0;
        FILE *f;

        expect_snapshot_full(e, "", "", (char *[]){ strdup(w0), NULL }, (char *[]){ claim, NULL });
        expect_list(e, "/api/v1/namespaces/demo/pods", "PodList", (char *[]){ w0, w1, w2, other, NULL });
        start(e, false);
        run(e, 100 * MS);
        assert_int_equal(e->ready, 1);
        assert_int_equal(e->error, 0);
        res = planner_result(e->pl);
        pc = plan_find_claim(&res->plan, "demo", "gang-gpu");
        assert_non_null(pc);
        assert_non_null(pc->podgroup);
        assert_false(pc->podgroup_unused); /* worker-0 runs on node-1 */
        assert_true(pc->group_pods_read);
        assert_int_equal(pc->n_group_pods, 3);
        assert_string_equal(pc->group_pods[0].name, "worker-0");
        assert_string_equal(pc->group_pods[0].node, "node-1");
        assert_string_equal(pc->group_pods[1].node, "node-2");
        assert_null(pc->group_pods[2].node);
        f = open_memstream(&text, &size);
        assert_non_null(f);
        assert_int_equal(plan_print_text(&res->plan, &res->po, f), 0);
        fclose(f);
        assert_non_null(strstr(
                text,
                "its pods: demo/worker-0 on node-1, demo/worker-1 on node-2, demo/worker-2 not scheduled"));
        free(text);
        close_planner(e);

        /* the namespace cannot be read: a note */
        claim = fake_api_claim(&(struct fake_claim){ .name = "gang-gpu",
                                                     .rv = 7,
                                                     .driver = DRIVER,
                                                     .allocated = true,
                                                     .reserved_podgroup = "gang" });
        expect_snapshot_full(e, "", "", (char *[]){ NULL }, (char *[]){ claim, NULL });
        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/namespaces/demo/pods?limit=", 403,
                                   "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"pods is "
                                   "forbidden\",\"reason\":\"Forbidden\",\"code\":403}");
        e->ready = e->closed = 0;
        start(e, false);
        run(e, 100 * MS);
        assert_int_equal(e->ready, 1);
        assert_int_equal(e->error, 0);
        pc = plan_find_claim(&planner_result(e->pl)->plan, "demo", "gang-gpu");
        assert_true(pc->podgroup_unused); /* no pod on node-1 */
        assert_non_null(pc->group_pods_error);
        assert_non_null(strstr(pc->group_pods_error, "forbidden"));
}

/* A Karpenter node (label karpenter.sh/nodepool): its NodeClaim's terminationGracePeriod
 * against the drain's need (claim holders' grace 40 s, then the driver's 30 s): 15s is
 * named, 2m is not, another node's NodeClaim is not looked at, and NodeClaims that
 * cannot be read are said; a node without the label reads no NodeClaim. */
static void test_karpenter_grace(void **state) {
        static const struct {
                const char *tgp;
                int status;
                const char *want;
        } cases[] = {
                { "15s", 200,
                  "terminationGracePeriod 15s is shorter than this node's drain needs (70 s: its "
                  "claim holders' grace up to 40 s, then the DRA driver's 30 s)" },
                { "2m", 200, NULL },
                { NULL, 404, "its NodeClaims could not be read" },
                { "soon", 200, "\"soon\" is not a duration" },
        };
        struct env *e = *state;
        size_t reads = 0;

        for (size_t k = 0; k <= ELEMENTSOF(cases); k++) {
                bool labelled = k < ELEMENTSOF(cases);
                const struct plan *pl;
                char *holder = fake_api_pod(&(struct fake_pod){
                        .name = "holder",
                        .meta = FAKE_OWNED_BY_RS("h-rs", "rs-h"),
                        .spec = "\"terminationGracePeriodSeconds\":40,\"resourceClaims\":[{\"name\":\"gpu\","
                                "\"resourceClaimName\":\"c\"}]",
                        .ready = "True" });
                char *driver = fake_api_pod(&(struct fake_pod){
                        .name = "driver",
                        .meta = "\"labels\":{\"app.kubernetes.io/"
                                "component\":\"kubeletplugin\"}," FAKE_OWNED_BY_DS("drv", "ds-drv"),
                        .ready = "True" });

                if (k > 0) {
                        close_planner(e);
                        e->ready = e->closed = 0;
                }
                expect_snapshot_full(e, "", labelled ? "\"karpenter.sh/nodepool\":\"gpu\"" : "",
                                     (char *[]){ holder, driver, NULL }, (char *[]){ NULL });
                if (labelled && cases[k].status == 200) {
                        char *mine = test_asprintf("{\"metadata\":{\"name\":\"gpu-abc\"},\"spec\":{%s%s%s},"
                                                   "\"status\":{\"nodeName\":\"node-1\"}}",
                                                   cases[k].tgp ? "\"terminationGracePeriod\":\"" : "",
                                                   strempty(cases[k].tgp), cases[k].tgp ? "\"" : "");

                        expect_list(e, "/apis/karpenter.sh/v1/nodeclaims", "NodeClaimList",
                                    (char *[]){ strdup("{\"metadata\":{\"name\":\"gpu-other\"},\"spec\":{"
                                                       "\"terminationGracePeriod\":\"1s\"},\"status\":{"
                                                       "\"nodeName\":\"node-2\"}}"),
                                                mine, NULL });
                } else if (labelled)
                        fake_transport_expect_json(
                                e->api->ft, "GET", "/apis/karpenter.sh/v1/nodeclaims?limit=", 404,
                                "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"the "
                                "server could not find the requested resource\",\"reason\":"
                                "\"NotFound\",\"code\":404}");
                start(e, false);
                run(e, 100 * MS);
                assert_int_equal(e->ready, 1);
                assert_int_equal(e->error, 0);
                pl = &planner_result(e->pl)->plan;
                print_message("  %s: %s\n", labelled ? strna(cases[k].tgp) : "no label",
                              pl->n_warnings ? pl->warnings[0] : "(no warning)");
                assert_int_equal(plan_grace_needed(pl, NULL, NULL), 70);
                if (labelled && cases[k].want) {
                        assert_int_equal(pl->n_warnings, 1);
                        assert_non_null(strstr(pl->warnings[0], cases[k].want));
                } else
                        assert_int_equal(pl->n_warnings, 0);
                assert_int_equal(fake_transport_count(e->api->ft, "GET", "/apis/karpenter.sh/v1/nodeclaims"),
                                 reads += labelled);
        }
}

/* --driver on a server that serves no DeviceTaintRule: the cordon fallback; no driver
 * pod on the node: the seamless answer comes without a read. */
static void test_driver_without_taint_rules(void **state) {
        struct env *e = *state;
        struct planner_result *res;

        e->profile.drivers[0] = DRIVER;
        e->profile.n_drivers = 1;
        expect_snapshot(e, (char *[]){ web_pod("web-1"), NULL });
        fake_transport_expect_json(e->api->ft, "GET", "/apis/resource.k8s.io/v1", 200,
                                   "{\"kind\":\"APIResourceList\",\"resources\":[{\"name\":"
                                   "\"resourceclaims\"}]}");
        fake_transport_expect_json(e->api->ft, "GET", "/apis/resource.k8s.io/v1beta2", 404,
                                   "{\"kind\":\"Status\",\"code\":404}");
        start(e, false);
        run(e, 100 * MS);
        assert_int_equal(e->ready, 1);
        assert_int_equal(e->error, 0);
        res = planner_result(e->pl);
        assert_int_equal(res->po.isolation, PLAN_ISOLATE_CORDON_FALLBACK);
        assert_null(res->po.taint_rule_api);
        assert_true(res->seam_known);
        assert_false(res->seam.seamless);
        assert_int_equal(fake_transport_count(e->api->ft, "GET", "/apis/resource.k8s.io/v1beta2"), 1);
}

/* --driver without --driver-stop, no driver pod (so no DaemonSet) on the node: the KEY
 * cannot be read, which the plan shows as a blocker; the plan is still built. */
static void test_key_unknown_is_a_blocker(void **state) {
        struct env *e = *state;
        struct planner_result *res;
        bool found = false;

        e->profile.drivers[0] = DRIVER;
        e->profile.n_drivers = 1;
        e->profile.stop = &driver_stop_label;
        expect_snapshot(e, (char *[]){ web_pod("web-1"), NULL });
        fake_transport_expect_json(e->api->ft, "GET", "/apis/resource.k8s.io/v1", 200,
                                   "{\"kind\":\"APIResourceList\",\"resources\":[{\"name\":"
                                   "\"devicetaintrules\"}]}");
        start(e, true);
        run(e, 100 * MS);
        assert_int_equal(e->ready, 1);
        assert_int_equal(e->error, 0);
        res = planner_result(e->pl);
        assert_int_equal(res->po.isolation, PLAN_ISOLATE_TAINT_RULE);
        for (size_t i = 0; i < res->plan.n_blockers; i++)
                found |= res->plan.blockers[i].kind == BLOCKER_DRIVER_STOP_KEY;
        assert_true(found);
}

/* --driver while a device of that driver is out of service (a device drain recorded on
 * the Node): the plan names the device drain as a blocker, as the drain refuses. */
static void test_driver_plan_names_device_drain(void **state) {
        struct env *e = *state;
        struct planner_result *res;
        const char *m = NULL;

        e->profile.drivers[0] = DRIVER;
        e->profile.n_drivers = 1;
        expect_snapshot_annotated(e,
                                  "\"drainer.io/state.device.D0123456789ABCDEF\":\"drained\","
                                  "\"drainer.io/devices.device.D0123456789ABCDEF\":\"" DRIVER
                                  "/node-1/gpu-3\"",
                                  (char *[]){ web_pod("web-1"), NULL });
        fake_transport_expect_json(e->api->ft, "GET", "/apis/resource.k8s.io/v1", 200,
                                   "{\"kind\":\"APIResourceList\",\"resources\":[{\"name\":"
                                   "\"devicetaintrules\"}]}");
        start(e, false);
        run(e, 100 * MS);
        assert_int_equal(e->ready, 1);
        assert_int_equal(e->error, 0);
        res = planner_result(e->pl);
        for (size_t i = 0; i < res->plan.n_blockers; i++)
                if (res->plan.blockers[i].kind == BLOCKER_DRAIN_EXCLUSIVE)
                        m = res->plan.blockers[i].message;
        assert_non_null(m);
        test_assert_contains(m, "device " DRIVER "/node-1/gpu-3 of node node-1 is out of service");
}

/* A device drain of another driver is no blocker of this one. */
static void test_driver_plan_other_driver_device(void **state) {
        struct env *e = *state;

        e->profile.drivers[0] = DRIVER;
        e->profile.n_drivers = 1;
        expect_snapshot_annotated(e,
                                  "\"drainer.io/state.device.D0123456789ABCDEF\":\"drained\","
                                  "\"drainer.io/devices.device.D0123456789ABCDEF\":\"nic.example.com"
                                  "/node-1/nic-0\"",
                                  (char *[]){ web_pod("web-1"), NULL });
        fake_transport_expect_json(e->api->ft, "GET", "/apis/resource.k8s.io/v1", 200,
                                   "{\"kind\":\"APIResourceList\",\"resources\":[{\"name\":"
                                   "\"devicetaintrules\"}]}");
        start(e, false);
        run(e, 100 * MS);
        assert_int_equal(e->ready, 1);
        assert_int_equal(e->error, 0);
        assert_int_equal(planner_result(e->pl)->plan.n_blockers, 0);
}

/* A discovery that fails: the error and what failed, no plan. */
static void test_discovery_fails(void **state) {
        struct env *e = *state;

        e->profile.drivers[0] = DRIVER;
        e->profile.n_drivers = 1;
        expect_snapshot(e, (char *[]){ web_pod("web-1"), NULL });
        fake_transport_expect_json(e->api->ft, "GET", "/apis/resource.k8s.io/v1", 403,
                                   "{\"kind\":\"Status\",\"code\":403,\"message\":\"forbidden\"}");
        start(e, false);
        run(e, 100 * MS);
        assert_int_equal(e->ready, 1);
        assert_int_equal(e->error, -EACCES);
        test_assert_contains(e->message, "cannot ask the API server whether it serves DeviceTaintRules");
}

/* Closed while the snapshot still reads (the node's GET unanswered): no on_ready after
 * it, every read ended, closed once, from the loop. */
static void test_close_midway(void **state) {
        struct env *e = *state;

        fake_transport_expect(
                e->api->ft, "GET", NODE_GET,
                &(struct fake_reply){ .status = 200, .body = "{}", .delay_usec = 60 * 1000 * MS });
        expect_list(e, FAKE_API_PODS, "PodList", (char *[]){ NULL });
        expect_list(e, FAKE_API_CLAIMS, "ResourceClaimList", (char *[]){ NULL });
        expect_list(e, SLICES, "ResourceSliceList", (char *[]){ NULL });
        expect_list(e, FAKE_API_PDBS, "PodDisruptionBudgetList", (char *[]){ NULL });
        start(e, false);
        run(e, 50 * MS);
        assert_int_equal(e->ready, 0);
        close_planner(e);
        run(e, 100 * MS);
        assert_int_equal(e->ready, 0);
        assert_int_equal(fake_transport_in_flight(e->api->ft), 0);
}

/* The server dry run: the cordon patch, then every eviction, all with dryRun=All; a
 * budget's 429 is the answer (held), not retried. */
static void test_server_dry_run(void **state) {
        struct env *e = *state;
        struct planner_result *res;
        _cleanup_free_ char *m = NULL;
        size_t held = 0, evicted = 0;

        expect_snapshot(e, (char *[]){ web_pod("web-1"), web_pod("web-2"), NULL });
        start(e, false);
        run(e, 100 * MS);
        assert_int_equal(e->error, 0);
        fake_transport_expect_json(e->api->ft, "PATCH", NODE_GET "?dryRun=All", 200, "{}");
        fake_transport_expect_json(e->api->ft, "POST", FAKE_API_EVICTION "web-1/eviction", 201,
                                   "{\"kind\":\"Status\",\"status\":\"Success\"}");
        fake_transport_expect_json(e->api->ft, "POST", FAKE_API_EVICTION "web-2/eviction", 429,
                                   "{\"kind\":\"Status\",\"code\":429,\"message\":\"Cannot evict pod as it "
                                   "would violate the pod's disruption budget.\"}");
        assert_int_equal(planner_dry_run(e->pl, &m), 0);
        run(e, 100 * MS);
        assert_int_equal(e->cordoned, 1);
        assert_int_equal(e->cordon_error, 0);
        assert_int_equal(e->evicting, 2);
        assert_int_equal(e->dry_done, 1);
        assert_int_equal(e->dry_error, 0);
        res = planner_result(e->pl);
        for (size_t i = 0; i < res->plan.n_pods; i++) {
                assert_true(res->evicts[i].done);
                held += res->evicts[i].error == -EAGAIN;
                evicted += res->evicts[i].error == 0;
        }
        assert_int_equal(held, 1);
        assert_int_equal(evicted, 1);
        for (size_t i = 0; i < fake_transport_n_requests(e->api->ft); i++) {
                const struct fake_request *r = fake_transport_request(e->api->ft, i);

                if (streq(r->method, "PATCH"))
                        assert_true(fake_request_has_param(r, "dryRun"));
                else if (streq(r->method, "POST")) /* the Eviction's DeleteOptions */
                        test_assert_contains(r->body, "\"dryRun\":[\"All\"]");
        }
        assert_int_equal(fake_transport_count(e->api->ft, "POST", FAKE_API_EVICTION), 2);
        /* the report: a budget's 429 is held, not failed; text as kubectl's, and JSON */
        {
                _cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
                _cleanup_free_ char *text = NULL;
                size_t size = 0;
                FILE *f = open_memstream(&text, &size);
                const cJSON *ev;
                size_t n_held = 0;

                assert_non_null(f);
                assert_int_equal(planner_dry_run_report(res, f, NULL), 0);
                assert_int_equal(fclose(f), 0);
                test_assert_contains(text, "pod/web-1 evicted (server dry run)\n");
                test_assert_contains(
                        text, "pod/web-2 eviction held by a budget (server dry run): Cannot evict pod");
                test_assert_contains(text, "drained (server dry run)\n");
                assert_int_equal(planner_dry_run_report(res, NULL, j), 0);
                assert_string_equal(cJSON_GetObjectItem(j, "dryRun")->valuestring, "server");
                assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "ok")));
                cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "evictions")) {
                        if (streq(cJSON_GetObjectItem(ev, "result")->valuestring, "held")) {
                                n_held++;
                                test_assert_contains(cJSON_GetObjectItem(ev, "message")->valuestring,
                                                     "disruption budget");
                        }
                }
                assert_int_equal(n_held, 1);
                assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "evictions")), 2);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_node_plan, setup, teardown),
                cmocka_unit_test_setup_teardown(test_podgroup_pods, setup, teardown),
                cmocka_unit_test_setup_teardown(test_karpenter_grace, setup, teardown),
                cmocka_unit_test_setup_teardown(test_driver_without_taint_rules, setup, teardown),
                cmocka_unit_test_setup_teardown(test_key_unknown_is_a_blocker, setup, teardown),
                cmocka_unit_test_setup_teardown(test_driver_plan_names_device_drain, setup, teardown),
                cmocka_unit_test_setup_teardown(test_driver_plan_other_driver_device, setup, teardown),
                cmocka_unit_test_setup_teardown(test_discovery_fails, setup, teardown),
                cmocka_unit_test_setup_teardown(test_close_midway, setup, teardown),
                cmocka_unit_test_setup_teardown(test_server_dry_run, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
