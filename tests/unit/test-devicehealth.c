/* Device health (ctl/devicehealth.c) over the real client, informers and announcer, a
 * fake clock and a scripted fake transport, never sleeping: a device its driver taints
 * NoSchedule or NoExecute in its ResourceSlice, or that a pod's allocatedResourcesStatus
 * says Unhealthy, is told once (a Warning Event on its Node, the metric, on_change) with
 * who reports it; a second reporter tells nothing new; once nobody reports it, a Normal
 * Event; a taint of effect None, a Healthy or Unknown status, a finished pod, and a
 * slice of no node are no report; a resourceID that is no published device (a CDI ID)
 * is told as such; with every node only the slices are watched; nothing is written but
 * Events. */
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
#include "drainer/ctl/announcer.h"
#include "drainer/ctl/devicehealth.h"
#include "drainer/kube/objects.h"
#include "drainer/obs/metrics.h"
#include "fakes/fake-apiserver.h"
#include "fakes/fake-clock.h"
#include "fakes/fake-transport.h"
#include "fakes/test-env.h"

#define SEC        USEC_PER_SEC
#define SLICES_ALL "/apis/resource.k8s.io/v1/resourceslices"
#define SLICES     SLICES_ALL "?fieldSelector=spec.nodeName%3Dnode-1"
#define PODS       "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1"
#define EVENTS     "/api/v1/namespaces/default/events"
#define DEV1       "gpu.example.com/node-1/gpu-1"

struct env {
        struct test_api *api;
        struct announcer *announcer;
        struct device_health *dh;
        struct node_rec *node;
        unsigned changes, unhealthy, stopped;
        char last[2048];
};

static const struct node_rec *lookup(const char *name, void *userdata) {
        struct env *e = userdata;

        return streq(name, "node-1") ? e->node : NULL;
}

static void on_change(struct device_health *d, const struct device_health_change *c, void *userdata) {
        struct env *e = userdata;

        e->changes++;
        e->unhealthy += c->unhealthy;
        snprintf(e->last, sizeof(e->last), "%s %s %s: %s", c->node, c->device,
                 c->unhealthy ? "unhealthy" : "healthy", c->message);
}

static void on_stopped(struct device_health *d, void *userdata) {
        ((struct env *)userdata)->stopped++;
}

static const struct device_health_handlers handlers = { .node = lookup,
                                                        .on_change = on_change,
                                                        .on_stopped = on_stopped };

/* node-1's slice of gpu.example.com: gpu-0, gpu-1, gpu-2, gpu-1 with taints (JSON, or ""). */
static char *slice(const char *taints, unsigned rv) {
        return test_asprintf(
                "{\"metadata\":{\"name\":\"node-1-gpu\",\"resourceVersion\":\"%u\"},"
                "\"spec\":{\"driver\":\"gpu.example.com\",\"pool\":{\"name\":\"node-1\","
                "\"generation\":1,\"resourceSliceCount\":1},\"nodeName\":\"node-1\","
                "\"devices\":[{\"name\":\"gpu-0\",\"taints\":[{\"key\":\"x\",\"effect\":\"None\"}]},"
                "{\"name\":\"gpu-1\"%s%s%s},{\"name\":\"gpu-2\"}]}}",
                rv, *taints ? ",\"taints\":[" : "", taints, *taints ? "]" : "");
}

/* Pod demo/p1 on node-1 in phase, its container's health for resource ID id. */
static char *pod(const char *phase, const char *id, const char *health, unsigned rv) {
        return test_asprintf("{\"metadata\":{\"name\":\"p1\",\"namespace\":\"demo\",\"uid\":\"u1\","
                             "\"resourceVersion\":\"%u\"},\"spec\":{\"nodeName\":\"node-1\"},"
                             "\"status\":{\"phase\":\"%s\",\"containerStatuses\":[{\"name\":\"c\","
                             "\"allocatedResourcesStatus\":[{\"name\":\"claim:gpu\",\"resources\":"
                             "[{\"resourceID\":\"%s\",\"health\":\"%s\"}]}]}]}}",
                             rv, phase, id, health);
}

static void start(struct env *e, const char *node, char *slice_json, char *pod_json) {
        char *slices[] = { slice_json, NULL }, *pods[] = { pod_json, NULL };
        struct fake_transport *ft = e->api->ft;

        fake_api_expect_list_and_watch(ft, node ? SLICES : SLICES_ALL, node ? SLICES : SLICES_ALL,
                                       fake_api_list_strv("ResourceSliceList", slices));
        if (node)
                fake_api_expect_list_and_watch(ft, PODS, PODS, fake_api_list_strv("PodList", pods));
        else
                free(pod_json);
        fake_transport_expect(ft, "POST", EVENTS,
                              &(struct fake_reply){ .status = 201, .body = "{}", .times = FAKE_FOREVER });
        assert_int_equal(announcer_new(e->api->client, e->api->ts, "test", &e->announcer), 0);
        assert_int_equal(device_health_new(e->api->client, e->api->ts, e->announcer,
                                           &(const struct device_health_options){ .node = node }, &handlers,
                                           e, &e->dh),
                         0);
        assert_int_equal(device_health_start(e->dh), 0);
        test_api_run(e->api, 2 * SEC, SEC / 10);
}

static void push(struct env *e, const char *path, char *obj) {
        _cleanup_free_ char *ev = fake_api_watch_event("MODIFIED", obj);

        free(obj);
        assert_int_equal(fake_transport_push(e->api->ft, path, ev), 1);
        test_api_run(e->api, 2 * SEC, SEC / 10);
}

/* The Events posted so far, "TYPE REASON MESSAGE" lines. */
static char *events(struct env *e) {
        size_t n = fake_transport_n_requests(e->api->ft), len = 0;
        char *all = calloc(1, 1);

        for (size_t i = 0; i < n; i++) {
                const struct fake_request *r = fake_transport_request(e->api->ft, i);
                cJSON *j;
                char *line;

                if (!streq(r->method, "POST") || !r->body)
                        continue;
                j = fake_api_json(r->body);
                line = test_asprintf("%s %s %s\n", cJSON_GetStringValue(cJSON_GetObjectItem(j, "type")),
                                     cJSON_GetStringValue(cJSON_GetObjectItem(j, "reason")),
                                     cJSON_GetStringValue(cJSON_GetObjectItem(j, "message")));
                cJSON_Delete(j);
                all = realloc(all, len + strlen(line) + 1);
                assert_non_null(all);
                strcpy(all + len, line);
                len += strlen(line);
                free(line);
        }
        return all;
}

static size_t count(const char *hay, const char *needle) {
        size_t n = 0;

        for (const char *p = hay; (p = strstr(p, needle)); p++)
                n++;
        return n;
}

static double gauge(const char *device) {
        double v = -1;

        if (metrics_get(metrics_family(DRAINER_METRIC_DEVICE_UNHEALTHY), METRIC_LABELS("node-1", device),
                        &v) < 0)
                return 0;
        return v;
}

static int setup(void **state) {
        struct env *e = calloc(1, sizeof(*e));
        cJSON *n = fake_api_json(
                "{\"metadata\":{\"name\":\"node-1\",\"uid\":\"n1\",\"resourceVersion\":\"3\"}}");

        assert_non_null(e);
        e->api = test_api_new(NULL);
        assert_int_equal(node_rec_from_json(n, &e->node), 0);
        cJSON_Delete(n);
        metrics_remove_label(metrics_default(), "node", "node-1");
        *state = e;
        return 0;
}

static int teardown(void **state) {
        struct env *e = *state;

        if (e->dh) {
                device_health_stop(e->dh);
                for (int i = 0; i < 100 && !e->stopped; i++)
                        test_api_run(e->api, 0, 1);
                assert_int_equal(e->stopped, 1);
                assert_true(device_health_idle(e->dh));
                device_health_free(e->dh);
        }
        for (int i = 0; i < 100 && !announcer_idle(e->announcer); i++)
                test_api_run(e->api, 0, 1);
        announcer_free(e->announcer);
        test_api_free(e->api);
        node_rec_free(e->node);
        free(e);
        return 0;
}

/* The driver taints gpu-1, then the pod reports it, then both stop: one Warning, no
 * second Event for the second reporter, one Normal at the end. */
static void test_taint_then_pod(void **state) {
        struct env *e = *state;
        _cleanup_free_ char *ev = NULL;

        start(e, "node-1", slice("", 10), pod("Running", DEV1, "Healthy", 20));
        assert_int_equal(e->changes, 0);
        assert_int_equal(device_health_count(e->dh), 0);

        push(e, SLICES,
             slice("{\"key\":\"gpu.example.com/unhealthy\",\"value\":\"true\",\"effect\":\"NoSchedule\"}",
                   11));
        assert_int_equal(e->changes, 1);
        assert_int_equal(e->unhealthy, 1);
        test_assert_contains(e->last,
                             "node-1 " DEV1 " unhealthy: device " DEV1 " is unhealthy: its ResourceSlice "
                             "node-1-gpu taints it gpu.example.com/unhealthy=true:NoSchedule");
        test_assert_contains(e->last, "drainer drain node-1 --device " DEV1);
        assert_int_equal(device_health_count(e->dh), 1);
        assert_true(gauge(DEV1) == 1);

        push(e, PODS, pod("Running", DEV1, "Unhealthy", 21));
        assert_int_equal(e->changes, 1); /* a second reporter: nothing new to tell */

        push(e, SLICES, slice("", 12));
        assert_int_equal(e->changes, 1); /* the pod still reports it */
        push(e, PODS, pod("Running", DEV1, "Healthy", 22));
        assert_int_equal(e->changes, 2);
        assert_int_equal(e->unhealthy, 1);
        test_assert_contains(e->last,
                             "node-1 " DEV1 " healthy: device " DEV1 " is no longer reported unhealthy");
        assert_int_equal(device_health_count(e->dh), 0);
        assert_true(gauge(DEV1) == 0);

        ev = events(e);
        assert_int_equal(count(ev, "Warning DrainerDeviceUnhealthy device " DEV1 " is unhealthy"), 1);
        assert_int_equal(count(ev, "Normal DrainerDeviceHealthy device " DEV1), 1);
        assert_int_equal(count(ev, "\n"), 2);
        /* nothing but Events and the watches */
        assert_int_equal(fake_transport_count(e->api->ft, "PATCH", NULL), 0);
        assert_int_equal(fake_transport_count(e->api->ft, "DELETE", NULL), 0);
        assert_int_equal(fake_transport_count(e->api->ft, "POST", NULL), 2);
}

/* Reported by the pod alone, named in the message; Unknown is no report; a finished pod's
 * status is none either. */
static void test_pod_report(void **state) {
        struct env *e = *state;

        start(e, "node-1", slice("", 10), pod("Running", DEV1, "Unknown", 20));
        assert_int_equal(e->changes, 0);
        push(e, PODS, pod("Running", DEV1, "Unhealthy", 21));
        assert_int_equal(e->changes, 1);
        test_assert_contains(e->last, "pod demo/p1 reports it Unhealthy (claim:gpu)");
        push(e, PODS, pod("Succeeded", DEV1, "Unhealthy", 22));
        assert_int_equal(e->changes, 2);
        assert_int_equal(device_health_count(e->dh), 0);
}

/* A resourceID that is no device of the node's slices (a CDI device ID) is told as it is. */
static void test_cdi_id(void **state) {
        struct env *e = *state;

        start(e, "node-1", slice("", 10), pod("Running", "gpu.example.com/gpu=gpu-1", "Unhealthy", 20));
        assert_int_equal(e->changes, 1);
        test_assert_contains(e->last, "node-1 gpu.example.com/gpu=gpu-1 unhealthy");
        test_assert_contains(e->last,
                             "a resource ID that is no device the node publishes (a CDI device ID?)");
}

/* NoExecute counts, a taint without value too; with every node only the slices are
 * watched (no pods list), and a slice of no node is no report. */
static void test_every_node(void **state) {
        struct env *e = *state;
        char *pool = test_asprintf(
                "{\"metadata\":{\"name\":\"net\",\"resourceVersion\":\"5\"},\"spec\":{\"driver\":\"net."
                "example.com\","
                "\"pool\":{\"name\":\"p\",\"generation\":1,\"resourceSliceCount\":1},\"allNodes\":true,"
                "\"devices\":[{\"name\":\"nic-0\",\"taints\":[{\"key\":\"bad\",\"effect\":\"NoExecute\"}]}]}"
                "}");

        start(e, NULL, slice("{\"key\":\"gpu.example.com/ecc\",\"effect\":\"NoExecute\"}", 10),
              pod("Running", DEV1, "Unhealthy", 20));
        assert_int_equal(e->changes, 1);
        test_assert_contains(e->last, "taints it gpu.example.com/ecc:NoExecute");
        assert_int_equal(fake_transport_count(e->api->ft, "GET", "/api/v1/pods"), 0);
        push(e, SLICES_ALL, pool);
        assert_int_equal(e->changes, 1);
        assert_int_equal(device_health_count(e->dh), 1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_taint_then_pod, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pod_report, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cdi_id, setup, teardown),
                cmocka_unit_test_setup_teardown(test_every_node, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
