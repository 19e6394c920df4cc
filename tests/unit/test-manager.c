/* The drain manager (ctl/manager.c) over the real client, informers, engines and
 * slots, a fake clock and a scripted fake transport, never sleeping. The API server
 * is a small world that answers every request from what it holds: Nodes (a PATCH is
 * merged, with its resourceVersion precondition, and goes out on the watch), the
 * slot Leases (create, replace with a resourceVersion precondition, 409 on a race),
 * no pods, claims, slices or budgets, and Events (recorded). Covered: a request
 * drains the node (the annotations as the API server holds them); an uncordon
 * request restores it; with one slot and two nodes asked, the second waits (and
 * says so on its Node) until the first is back in service; a refusal by
 * configuration is reported once, not on every reconcile, and retried only when the
 * Node's drainer.io/ annotations change; a deleted Node's slot is released; stop
 * ends everything and calls back; a waiting Node is written twice however often the
 * slot changes hands; slots go in the order the nodes asked (as their Nodes record
 * it). Device health (o.device_health): with drain-device, a device node-1's driver
 * taints in its slice is drained alone (a DeviceTaintRule, never a cordon, the slot
 * held meanwhile and released after), once, and stays drained when healthy again;
 * two devices of a node go one after the other; a node drain in progress comes first;
 * with report nothing but the Event. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "drainer/base/json.h"
#include "drainer/base/mwindow.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/devicehealth.h"
#include "drainer/ctl/manager.h"
#include "drainer/ctl/profile.h"
#include "drainer/dra/driverstop.h"
#include "drainer/drain/device.h"
#include "drainer/kube/client.h"
#include "drainer/obs/metrics.h"
#include "fakes/fake-apiserver.h"
#include "fakes/fake-clock.h"
#include "fakes/fake-transport.h"
#include "fakes/test-env.h"

#define MS  USEC_PER_MSEC
#define SEC USEC_PER_SEC

#define NS         "drainer-system"
#define LEASES     "/apis/coordination.k8s.io/v1/namespaces/" NS "/leases"
#define NODES_PATH "/api/v1/nodes"
#define NS_PATH    "/api/v1/namespaces?"
#define MAX_NODES  10
#define MAX_LEASES 4
#define MAX_LINES  512
#define DRIVER     "gpu.example.com"
#define RULES      "/apis/resource.k8s.io/v1/devicetaintrules"

struct world {
        struct test_api *api;
        struct fake_clock *clock;
        struct fake_transport *ft;
        unsigned rv;
        cJSON *nodes[MAX_NODES];   /* as the API server holds them; NULL: deleted */
        cJSON *leases[MAX_LEASES]; /* drainer-slot-N; NULL: none */
        cJSON *ns;                 /* drainer's namespace (drainer.io/pause) */
        bool ns_forbidden;         /* its list and watch answered 403 */
        size_t node_counts;        /* GET /api/v1/nodes?limit=1 */
        size_t n_handled;          /* requests answered so far, in order */
        struct drain_profile profile;
        struct drain_manager *manager;
        bool stopped;
        const char *hold_event; /* an Event of this reason is left unanswered: held_event */
        bool event_held;
        size_t held_event; /* its request's index */
        /* "kind node" of every manager event, "Reason node" of every Event posted */
        char lines[MAX_LINES][128];
        size_t n_lines;
        char events[MAX_LINES][128];
        char event_messages[MAX_LINES][256];
        size_t n_events;
        /* the most nodes seen in a phase past waiting at once (the slot's promise) */
        size_t most_out_of_service;
        /* Per node (by its index in nodes): the PATCHes the API server saw until the first
         * that moved it past waiting (that one counted), and whether one did. */
        unsigned patches_to_turn[MAX_NODES];
        bool turned[MAX_NODES];
        /* The nodes in the order they first left waiting (a phase past it). */
        char turn_order[MAX_NODES][16];
        size_t n_turns;
        /* node-1's ResourceSlice of gpu.example.com: gpu-0..gpu-3, those named in
         * tainted ("gpu-1 gpu-2") with the driver's NoSchedule taint */
        char tainted[64];
        /* DeviceTaintRules (resource.k8s.io/v1), by name */
        cJSON *rules[MAX_LEASES];
        size_t rule_creates;
        /* device drains running at once, and the most seen */
        size_t device_running, most_device_running;
};

/* ---- the world's objects ---- */

static cJSON *node_new(struct world *w, const char *name, const char *annotations) {
        char *s =
                test_asprintf("{\"metadata\":{\"name\":\"%s\",\"uid\":\"uid-%s\",\"resourceVersion\":\"%u\","
                              "\"labels\":{\"kubernetes.io/hostname\":\"%s\"},\"annotations\":{%s}},"
                              "\"spec\":{},\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":"
                              "\"True\"}]}}",
                              name, name, ++w->rv, name, annotations ? annotations : "");
        cJSON *j = fake_api_json(s);

        free(s);
        return j;
}

static cJSON *node_named(struct world *w, const char *name) {
        for (size_t i = 0; i < MAX_NODES; i++)
                if (w->nodes[i] && streq(json_str(w->nodes[i], "metadata.name"), name))
                        return w->nodes[i];
        return NULL;
}

static const char *ann(struct world *w, const char *node, const char *key) {
        cJSON *n = node_named(w, node);
        const cJSON *a = n ? json_path(n, "metadata.annotations") : NULL;
        const cJSON *v = a ? cJSON_GetObjectItemCaseSensitive(a, key) : NULL;

        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool cordoned(struct world *w, const char *node) {
        const cJSON *u = json_path(node_named(w, node), "spec.unschedulable");

        return cJSON_IsTrue(u);
}

static bool tainted(struct world *w, const char *node) {
        const cJSON *t;

        cJSON_ArrayForEach(t, json_path(node_named(w, node),
                                        "spec.taints")) if (streq_ptr(json_str(t, "key"),
                                                                      "drainer.io/draining")) return true;
        return false;
}

static void set_rv(struct world *w, cJSON *obj) {
        cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
        char v[16];

        snprintf(v, sizeof(v), "%u", ++w->rv);
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion");
        cJSON_AddStringToObject(meta, "resourceVersion", v);
}

/* A watch event of obj to every open watch of path_prefix. */
static void push(struct world *w, const char *path_prefix, const char *type, const cJSON *obj) {
        _cleanup_free_ char *o = cJSON_PrintUnformatted(obj);
        _cleanup_free_ char *ev = fake_api_watch_event(type, o);

        fake_transport_push(w->ft, path_prefix, ev);
}

/* The Node changed by the world itself (a user's kubectl): on the watch. */
static void node_changed(struct world *w, cJSON *n) {
        set_rv(w, n);
        push(w, NODES_PATH "?", "MODIFIED", n);
}

static void set_ann(struct world *w, const char *node, const char *key, const char *value) {
        cJSON *n = node_named(w, node);
        cJSON *a = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(n, "metadata"),
                                                    "annotations");

        assert_non_null(a);
        cJSON_DeleteItemFromObjectCaseSensitive(a, key);
        if (value)
                cJSON_AddStringToObject(a, key, value);
        node_changed(w, n);
}

static void delete_node(struct world *w, const char *node) {
        for (size_t i = 0; i < MAX_NODES; i++)
                if (w->nodes[i] && streq(json_str(w->nodes[i], "metadata.name"), node)) {
                        push(w, NODES_PATH "?", "DELETED", w->nodes[i]);
                        cJSON_Delete(w->nodes[i]);
                        w->nodes[i] = NULL;
                        return;
                }
        fail_msg("no node %s", node);
}

static const char *lease_holder(struct world *w, int slot) {
        return w->leases[slot] ? json_str(w->leases[slot], "spec.holderIdentity") : NULL;
}

/* ---- answers ---- */

static void reply(struct world *w, const struct fake_request *r, long status, const char *body) {
        fake_transport_expect_json(w->ft, r->method, r->path, status, body);
}

static void reply_obj(struct world *w, const struct fake_request *r, long status, const cJSON *obj) {
        _cleanup_free_ char *s = cJSON_PrintUnformatted(obj);

        reply(w, r, status, s);
}

static void reply_status(struct world *w, const struct fake_request *r, long code, const char *reason) {
        _cleanup_free_ char *s =
                test_asprintf("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":"
                              "\"Failure\",\"message\":\"%s\",\"reason\":\"%s\",\"code\":%ld}",
                              reason, reason, code);

        reply(w, r, code, s);
}

static void reply_list(struct world *w, const struct fake_request *r, const char *kind, cJSON *const *objs,
                       size_t n, const char *only_name) {
        char *items[MAX_NODES + MAX_LEASES];
        size_t k = 0;
        _cleanup_free_ char *body = NULL;

        for (size_t i = 0; i < n; i++)
                if (objs[i] && (!only_name || streq(json_str(objs[i], "metadata.name"), only_name)))
                        items[k++] = cJSON_PrintUnformatted(objs[i]);
        body = fake_api_list(kind, w->rv, items, k);
        reply(w, r, 200, body);
}

/* The name after prefix + "/" in path, up to '?' or '/' (malloc'd). */
static char *name_in(const char *path, const char *prefix) {
        const char *p = path + strlen(prefix) + 1;

        return strndup(p, strcspn(p, "?/"));
}

static void on_node_request(struct world *w, const struct fake_request *r) {
        _cleanup_free_ char *name = NULL, *selector = NULL;
        _cleanup_(cJSON_Deletep) cJSON *patch = NULL;
        const char *want_rv;
        cJSON *n;

        if (r->path[strlen(NODES_PATH)] == '?') {
                if (streq(r->path, NODES_PATH "?limit=1")) {
                        size_t count_n = 0;
                        _cleanup_free_ char *body = NULL;

                        for (size_t i = 0; i < MAX_NODES; i++)
                                count_n += !!w->nodes[i];
                        w->node_counts++;
                        body = test_asprintf(
                                "{\"kind\":\"NodeList\",\"metadata\":{\"resourceVersion\":\"%u\""
                                "%s%zu},\"items\":[{\"metadata\":{\"name\":\"x\"}}]}",
                                w->rv, count_n > 1 ? ",\"remainingItemCount\":" : ",\"x\":", count_n - 1);
                        return reply(w, r, 200, body);
                }
                if (fake_request_has_param(r, "watch"))
                        return (void)fake_transport_expect(w->ft, r->method, r->path,
                                                           &(struct fake_reply){ .hold_open = true });
                selector = fake_request_param(r, "fieldSelector");
                return reply_list(w, r, "NodeList", w->nodes, MAX_NODES,
                                  selector ? strchr(selector, 'D') + 1 : NULL); /* metadata.name%3DNAME */
        }
        name = name_in(r->path, NODES_PATH);
        n = node_named(w, name);
        if (!n)
                return reply_status(w, r, 404, "NotFound");
        if (streq(r->method, "GET"))
                return reply_obj(w, r, 200, n);
        assert_string_equal(r->method, "PATCH");
        patch = fake_api_json(r->body);
        want_rv = json_str(patch, "metadata.resourceVersion");
        for (size_t i = 0; i < MAX_NODES; i++)
                if (w->nodes[i] == n && !w->turned[i])
                        w->patches_to_turn[i]++;
        if (want_rv && !streq(want_rv, json_str(n, "metadata.resourceVersion")))
                return reply_status(w, r, 409, "Conflict");
        fake_api_merge_patch(n, patch);
        for (size_t i = 0; i < MAX_NODES; i++) {
                const char *st = ann(w, name, "drainer.io/state");

                if (w->nodes[i] == n && !w->turned[i] && st && !streq(st, "waiting")) {
                        w->turned[i] = true;
                        snprintf(w->turn_order[w->n_turns++], sizeof(w->turn_order[0]), "%s", name);
                }
        }
        set_rv(w, n);
        reply_obj(w, r, 200, n);
        push(w, NODES_PATH "?", "MODIFIED", n);
}

static int slot_of(const char *name) {
        int i;

        assert_int_equal(sscanf(name, "drainer-slot-%d", &i), 1);
        assert_true(i >= 0 && i < MAX_LEASES);
        return i;
}

static void on_lease_request(struct world *w, const struct fake_request *r) {
        _cleanup_(cJSON_Deletep) cJSON *body = NULL;
        _cleanup_free_ char *name = NULL;
        const char *want_rv;
        int i;

        if (streq(r->method, "GET") && r->path[strlen(LEASES)] == '?') {
                if (fake_request_has_param(r, "watch"))
                        return (void)fake_transport_expect(w->ft, r->method, r->path,
                                                           &(struct fake_reply){ .hold_open = true });
                return reply_list(w, r, "LeaseList", w->leases, MAX_LEASES, NULL);
        }
        if (streq(r->method, "POST")) {
                body = fake_api_json(r->body);
                i = slot_of(json_str(body, "metadata.name"));
                if (w->leases[i])
                        return reply_status(w, r, 409, "AlreadyExists");
                w->leases[i] = TAKE_PTR(body);
                set_rv(w, w->leases[i]);
                reply_obj(w, r, 201, w->leases[i]);
                return push(w, LEASES "?", "ADDED", w->leases[i]);
        }
        name = name_in(r->path, LEASES);
        i = slot_of(name);
        if (!w->leases[i])
                return reply_status(w, r, 404, "NotFound");
        if (streq(r->method, "GET"))
                return reply_obj(w, r, 200, w->leases[i]);
        if (streq(r->method, "DELETE")) {
                reply(w, r, 200, "{\"kind\":\"Status\",\"status\":\"Success\"}");
                push(w, LEASES "?", "DELETED", w->leases[i]);
                cJSON_Delete(w->leases[i]);
                w->leases[i] = NULL;
                return;
        }
        assert_string_equal(r->method, "PUT");
        body = fake_api_json(r->body);
        want_rv = json_str(body, "metadata.resourceVersion");
        if (!want_rv || !streq(want_rv, json_str(w->leases[i], "metadata.resourceVersion")))
                return reply_status(w, r, 409, "Conflict");
        cJSON_Delete(w->leases[i]);
        w->leases[i] = TAKE_PTR(body);
        set_rv(w, w->leases[i]);
        reply_obj(w, r, 200, w->leases[i]);
        push(w, LEASES "?", "MODIFIED", w->leases[i]);
}

static bool starts_with(const char *s, const char *prefix) {
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Every request not answered yet, in order: each gets its answer now (delivered on
 * the clock's next turn). */
/* ---- device health: node-1's slice, the DeviceTaintRules ---- */

static cJSON *slice_json(struct world *w) {
        _cleanup_free_ char *devs = calloc(1, 1024);
        char *j;
        cJSON *o;

        assert_non_null(devs);
        for (int i = 0; i < 4; i++) {
                char name[16];
                bool t;

                snprintf(name, sizeof(name), "gpu-%d", i);
                t = strstr(w->tainted, name) != NULL;
                snprintf(devs + strlen(devs), 1024 - strlen(devs), "%s{\"name\":\"%s\"%s}", i ? "," : "",
                         name,
                         t ? ",\"taints\":[{\"key\":\"" DRIVER "/unhealthy\",\"value\":\"true\",\"effect\":"
                             "\"NoSchedule\"}]"
                           : "");
        }
        j = test_asprintf("{\"metadata\":{\"name\":\"node-1-gpu\",\"resourceVersion\":\"%u\"},"
                          "\"spec\":{\"driver\":\"" DRIVER
                          "\",\"pool\":{\"name\":\"node-1\",\"generation\":1,"
                          "\"resourceSliceCount\":1},\"nodeName\":\"node-1\",\"devices\":[%s]}}",
                          w->rv, devs);
        o = fake_api_json(j);
        free(j);
        return o;
}

/* The driver taints these devices of node-1 (or none: ""): the slice on its watches. */
static void taint(struct world *w, const char *devices) {
        _cleanup_(cJSON_Deletep) cJSON *sl = NULL;

        snprintf(w->tainted, sizeof(w->tainted), "%s", devices);
        ++w->rv;
        sl = slice_json(w);
        push(w, "/apis/resource.k8s.io/v1/resourceslices?", "MODIFIED", sl);
}

static size_t rule_at(struct world *w, const char *name) {
        for (size_t i = 0; i < MAX_LEASES; i++)
                if (w->rules[i] && streq(json_str(w->rules[i], "metadata.name"), name))
                        return i;
        return SIZE_MAX;
}

/* A DeviceTaintRule created, read or deleted as the API server would (one device's). */
static void on_rule_request(struct world *w, const struct fake_request *r) {
        _cleanup_free_ char *name = strlen(r->path) > strlen(RULES) ? name_in(r->path, RULES) : NULL;
        size_t at = name ? rule_at(w, name) : SIZE_MAX;

        if (streq(r->method, "POST")) {
                cJSON *b = fake_api_json(r->body), *meta = cJSON_GetObjectItemCaseSensitive(b, "metadata");
                size_t i = 0;

                assert_string_equal(json_str(b, "spec.taint.effect"), "NoSchedule");
                assert_string_equal(json_str(b, "spec.deviceSelector.pool"), "node-1");
                assert_non_null(json_str(b, "spec.deviceSelector.device"));
                w->rule_creates++;
                while (i < MAX_LEASES && w->rules[i])
                        i++;
                assert_true(i < MAX_LEASES);
                cJSON_AddStringToObject(meta, "uid", "rule-uid");
                set_rv(w, b);
                w->rules[i] = b;
                reply_obj(w, r, 201, b);
        } else if (streq(r->method, "GET") && at != SIZE_MAX)
                reply_obj(w, r, 200, w->rules[at]);
        else if (streq(r->method, "DELETE") && at != SIZE_MAX) {
                cJSON_Delete(w->rules[at]);
                w->rules[at] = NULL;
                reply(w, r, 200, "{}");
        } else
                reply_status(w, r, 404, "NotFound");
}

static size_t n_rules(struct world *w) {
        size_t n = 0;

        for (size_t i = 0; i < MAX_LEASES; i++)
                n += w->rules[i] != NULL;
        return n;
}

static void answer(struct world *w) {
        while (w->n_handled < fake_transport_n_requests(w->ft)) {
                const struct fake_request *r = fake_transport_request(w->ft, w->n_handled++);

                if (starts_with(r->path, NODES_PATH "/") || starts_with(r->path, NODES_PATH "?"))
                        on_node_request(w, r);
                else if (starts_with(r->path, LEASES))
                        on_lease_request(w, r);
                else if (starts_with(r->path, NS_PATH)) {
                        if (w->ns_forbidden)
                                reply_status(w, r, 403, "Forbidden");
                        else if (fake_request_has_param(r, "watch"))
                                fake_transport_expect(w->ft, r->method, r->path,
                                                      &(struct fake_reply){ .hold_open = true });
                        else
                                reply_list(w, r, "NamespaceList", &w->ns, 1, NULL);
                } else if (starts_with(r->path, "/api/v1/namespaces/default/events")) {
                        _cleanup_(cJSON_Deletep) cJSON *b = fake_api_json(r->body);

                        assert_true(w->n_events < MAX_LINES);
                        snprintf(w->event_messages[w->n_events], sizeof(w->event_messages[0]), "%s",
                                 strna(json_str(b, "message")));
                        snprintf(w->events[w->n_events++], sizeof(w->events[0]), "%s %s",
                                 json_str(b, "reason"), json_str(b, "involvedObject.name"));
                        if (w->hold_event && streq_ptr(json_str(b, "reason"), w->hold_event) &&
                            !w->event_held) {
                                w->event_held = true;
                                w->held_event = w->n_handled - 1;
                        } else
                                reply(w, r, 201, "{}");
                } else if (streq(r->method, "GET") &&
                           starts_with(r->path, "/apis/resource.k8s.io/v1/resourceslices?") &&
                           !fake_request_has_param(r, "watch")) {
                        _cleanup_(cJSON_Deletep) cJSON *sl = slice_json(w);

                        reply_list(w, r, "ResourceSliceList", &sl, 1, NULL);
                } else if (streq(r->path, "/apis/resource.k8s.io/v1")) {
                        reply(w, r, 200,
                              "{\"kind\":\"APIResourceList\",\"resources\":[{\"name\":\"resourceclaims\"},"
                              "{\"name\":\"resourceslices\"},{\"name\":\"devicetaintrules\"}]}");
                } else if (starts_with(r->path, RULES)) {
                        on_rule_request(w, r);
                } else if (streq(r->method, "GET") &&
                           (starts_with(r->path, "/api/v1/pods?") ||
                            starts_with(r->path, "/apis/resource.k8s.io/v1/resourceclaims?") ||
                            starts_with(r->path, "/apis/resource.k8s.io/v1/resourceslices?") ||
                            starts_with(r->path, "/apis/policy/v1/poddisruptionbudgets?"))) {
                        if (fake_request_has_param(r, "watch"))
                                fake_transport_expect(w->ft, r->method, r->path,
                                                      &(struct fake_reply){ .hold_open = true });
                        else
                                reply_list(w, r, "List", NULL, 0, NULL);
                } else
                        fail_msg("unexpected request %s %s", r->method, r->path);
        }
}

/* How many nodes are out of service (a phase past waiting, or cordoned) now. */
static size_t out_of_service(struct world *w) {
        size_t n = 0;

        for (size_t i = 0; i < MAX_NODES; i++) {
                const char *name = w->nodes[i] ? json_str(w->nodes[i], "metadata.name") : NULL;
                const char *st = name ? ann(w, name, "drainer.io/state") : NULL;

                if (name && ((st && !streq(st, "waiting")) || cordoned(w, name)))
                        n++;
        }
        return n;
}

static void step(struct world *w, uint64_t usec) {
        answer(w);
        fake_clock_advance(w->clock, 0);
        answer(w);
        fake_clock_advance(w->clock, usec);
        w->most_out_of_service = MAX(w->most_out_of_service, out_of_service(w));
}

/* Runs until done(w, arg) holds (true) or limit passes (false). */
static bool run_until(struct world *w, bool (*done)(struct world *w, const char *arg), const char *arg,
                      uint64_t limit) {
        for (uint64_t t = 0; t < limit; t += 10 * MS) {
                if (done(w, arg))
                        return true;
                step(w, 10 * MS);
        }
        return done(w, arg);
}

static void run_for(struct world *w, uint64_t usec) {
        for (uint64_t t = 0; t < usec; t += 10 * MS)
                step(w, 10 * MS);
}

static bool is_drained(struct world *w, const char *node) {
        return streq_ptr(ann(w, node, "drainer.io/state"), "drained");
}

static bool is_in_service(struct world *w, const char *node) {
        return !ann(w, node, "drainer.io/state") && !cordoned(w, node) && !tainted(w, node);
}

/* ---- the manager ---- */

static void on_event(struct drain_manager *m, const struct drain_manager_event *ev, void *userdata) {
        struct world *w = userdata;

        if (ev->kind == DRAIN_MANAGER_IDLE || ev->kind == DRAIN_MANAGER_PHASE)
                return; /* every reconcile, every phase: not what these tests count */
        if (ev->device && ev->kind == DRAIN_MANAGER_STARTED) {
                w->device_running++;
                w->most_device_running = MAX(w->most_device_running, w->device_running);
        } else if (ev->device && (ev->kind == DRAIN_MANAGER_DONE || ev->kind == DRAIN_MANAGER_FAILED))
                w->device_running--;
        assert_true(w->n_lines < MAX_LINES);
        snprintf(w->lines[w->n_lines++], sizeof(w->lines[0]), "%s %s%s%s",
                 drain_manager_event_kind_to_string(ev->kind), ev->node ? ev->node : "-",
                 ev->device ? " " : "", ev->device ? ev->device : "");
}

static void on_stopped(struct drain_manager *m, void *userdata) {
        struct world *w = userdata;

        assert_false(w->stopped);
        w->stopped = true;
}

static size_t count(char (*lines)[128], size_t n, const char *line) {
        size_t k = 0;

        for (size_t i = 0; i < n; i++)
                k += streq(lines[i], line);
        return k;
}

static size_t lines_with(struct world *w, const char *line) {
        return count(w->lines, w->n_lines, line);
}

static size_t events_with(struct world *w, const char *line) {
        return count(w->events, w->n_events, line);
}

/* drainer_drains_started_total{asker} now (0 before any). */
static double drains_started(const char *asker) {
        double v = 0;

        if (metrics_get(metrics_family(DRAINER_METRIC_DRAINS_STARTED), METRIC_LABELS(asker), &v) < 0)
                return 0;
        return v;
}

/* How many Events' messages hold part. */
static size_t event_messages_with(struct world *w, const char *part) {
        size_t k = 0;

        for (size_t i = 0; i < w->n_events; i++)
                k += strstr(w->event_messages[i], part) != NULL;
        return k;
}

static void start_manager_with(struct world *w, struct drain_manager_options o) {
        static const struct drain_manager_callbacks cb = { .on_event = on_event, .on_stopped = on_stopped };

        o.profile = &w->profile;
        o.lease_namespace = NS;
        o.identity = "test-host";
        assert_int_equal(drain_manager_new(w->api->client, fake_transport_base(w->ft), w->api->ts, &o, &cb,
                                           w, &w->manager),
                         0);
        assert_int_equal(drain_manager_start(w->manager), 0);
        step(w, 0);
        assert_true(drain_manager_synced(w->manager));
        assert_int_equal(lines_with(w, "ready -"), 1);
}

static void start_manager(struct world *w, unsigned max_parallel) {
        start_manager_with(w, (struct drain_manager_options){ .max_parallel = max_parallel });
}

static void add_node(struct world *w, const char *name, const char *annotations) {
        for (size_t i = 0; i < MAX_NODES; i++)
                if (!w->nodes[i]) {
                        w->nodes[i] = node_new(w, name, annotations);
                        return;
                }
        fail_msg("too many nodes");
}

static int setup(void **state) {
        struct world *w = calloc(1, sizeof(*w));

        assert_non_null(w);
        w->api = test_api_new(&(struct test_api_options){ .user_yaml = "    token: manager-token\n" });
        w->clock = w->api->clock;
        w->ft = w->api->ft;
        w->rv = 100;
        w->profile = (struct drain_profile){ .grace = -1, .stop = &driver_stop_taint };
        w->ns = fake_api_json("{\"metadata\":{\"name\":\"" NS "\",\"resourceVersion\":\"1\"}}");
        *state = w;
        return 0;
}

static int teardown(void **state) {
        struct world *w = *state;

        if (w->manager) {
                drain_manager_stop(w->manager);
                assert_false(w->stopped); /* never from within stop */
                for (int i = 0; i < 200 && !w->stopped; i++)
                        step(w, 5 * MS);
                assert_true(w->stopped);
                drain_manager_free(w->manager);
        }
        for (int i = 0; i < 20 && fake_transport_in_flight(w->ft) > 0; i++)
                step(w, 0);
        assert_int_equal(kube_client_calls_in_flight(w->api->client), 0);
        test_api_free(w->api);
        for (size_t i = 0; i < MAX_NODES; i++)
                cJSON_Delete(w->nodes[i]);
        for (size_t i = 0; i < MAX_LEASES; i++) {
                cJSON_Delete(w->leases[i]);
                cJSON_Delete(w->rules[i]);
        }
        cJSON_Delete(w->ns);
        free(w);
        return 0;
}

/* ---- tests ---- */

/* An idle manager sends nothing but the Node watch. */
static void test_idle(void **state) {
        struct world *w = *state;
        char why[128] = "";

        add_node(w, "node-1", NULL);
        start_manager(w, 1);
        run_for(w, 10 * SEC);
        assert_true(drain_manager_ready(w->manager, why, sizeof(why))); /* synced, answered */
        assert_string_equal(why, "");
        assert_int_equal(fake_transport_n_requests(w->ft), 2); /* list, watch */
        assert_int_equal(fake_transport_count(w->ft, "GET", NODES_PATH "?"), 2);
        assert_true(is_in_service(w, "node-1"));
        assert_int_equal(w->n_events, 0);
}

/* A request drains: the engine runs to drained; the Node says so. */
static void test_request_drains(void **state) {
        struct world *w = *state;

        double requests = drains_started("request"), hooks = drains_started("cluster-api");

        add_node(w, "node-1", "\"drainer.io/request\":\"drain\",\"drainer.io/requested-by\":\"ticket 42\"");
        add_node(w, "node-2", NULL);
        add_node(w, "node-3",
                 "\"drainer.io/request\":\"drain\",\"drainer.io/cluster-api-machine\":\"capi/m-3\"");
        start_manager(w, 0);
        assert_true(run_until(w, is_drained, "node-1", 60 * SEC));
        step(w, 0);
        /* the Event of its start names who asked, as the request says */
        assert_int_equal(event_messages_with(w, "drain started (asked by ticket 42): "), 1);
        assert_string_equal(ann(w, "node-1", "drainer.io/requested-by"), "ticket 42");
        /* ... and the metric counts it by asker: a person's request, Cluster API's hook */
        assert_true(run_until(w, is_drained, "node-3", 60 * SEC));
        assert_true(drains_started("request") == requests + 1);
        assert_true(drains_started("cluster-api") == hooks + 1);
        assert_true(cordoned(w, "node-1"));
        assert_true(tainted(w, "node-1"));
        assert_string_equal(ann(w, "node-1", "drainer.io/request"), "drain");
        assert_string_equal(ann(w, "node-1", "drainer.io/was-unschedulable"), "false");
        assert_int_equal(lines_with(w, "started node-1"), 1);
        assert_int_equal(lines_with(w, "done node-1"), 1);
        assert_int_equal(events_with(w, "DrainerDone node-1"), 1);
        /* node-2 asked nothing: untouched */
        assert_true(is_in_service(w, "node-2"));
        assert_int_equal(fake_transport_count(w->ft, "PATCH", NODES_PATH "/node-2"), 0);
        /* drained and done: no engine runs, nothing more is sent */
        assert_int_equal(drain_manager_running(w->manager), 0);
        {
                size_t patches = fake_transport_count(w->ft, "PATCH", NULL);

                run_for(w, 5 * 60 * SEC);
                assert_int_equal(lines_with(w, "started node-1"), 1);
                assert_int_equal(fake_transport_count(w->ft, "PATCH", NULL), patches);
        }
}

static bool finished_restore(struct world *w, const char *node) {
        return is_in_service(w, node) && !ann(w, node, "drainer.io/request");
}

/* An uncordon request undoes the drain: the node back in service, drainer's
 * annotations gone; removing the request does the same. */
static void test_undo_restores(void **state) {
        struct world *w = *state;

        add_node(w, "node-1", "\"drainer.io/request\":\"drain\",\"drainer.io/requested-by\":\"ticket 42\"");
        start_manager(w, 0);
        assert_true(run_until(w, is_drained, "node-1", 60 * SEC));
        set_ann(w, "node-1", "drainer.io/request", "uncordon");
        assert_true(run_until(w, finished_restore, "node-1", 60 * SEC));
        assert_int_equal(lines_with(w, "done node-1"), 2);
        assert_null(ann(w, "node-1", "drainer.io/was-unschedulable"));
        /* who asked goes with the request; a restore does not quote it */
        assert_null(ann(w, "node-1", "drainer.io/requested-by"));
        assert_int_equal(event_messages_with(w, "restore started: "), 1);
        assert_int_equal(event_messages_with(w, "asked by"), 1);

        /* again, and this time the request is removed */
        set_ann(w, "node-1", "drainer.io/request", "drain");
        assert_true(run_until(w, is_drained, "node-1", 60 * SEC));
        set_ann(w, "node-1", "drainer.io/request", NULL);
        assert_true(run_until(w, finished_restore, "node-1", 60 * SEC));
        assert_int_equal(lines_with(w, "started node-1"), 4);
        assert_int_equal(lines_with(w, "done node-1"), 4);
}

static bool waits_for_slot(struct world *w, const char *node) {
        const char *msg = ann(w, node, "drainer.io/message");

        return streq_ptr(ann(w, node, "drainer.io/state"), "waiting") && msg &&
               strstr(msg, "waiting for a drain slot (--max-parallel 1) since ");
}

/* One slot, two nodes asked: the second waits (and its Node says so) until the first
 * is back in service and its slot free; never are both out of service. */
static void test_slot_wait_and_release(void **state) {
        struct world *w = *state;
        const char *first, *second;

        add_node(w, "node-1", "\"drainer.io/request\":\"drain\"");
        add_node(w, "node-2", "\"drainer.io/request\":\"drain\"");
        start_manager(w, 1);
        run_for(w, 30 * SEC);
        first = is_drained(w, "node-1") ? "node-1" : "node-2";
        second = streq(first, "node-1") ? "node-2" : "node-1";
        assert_true(is_drained(w, first));
        assert_true(waits_for_slot(w, second));
        assert_false(cordoned(w, second));
        assert_string_equal(lease_holder(w, 0), first);
        assert_null(w->leases[1]);
        assert_int_equal(lines_with(w, "waiting node-1") + lines_with(w, "waiting node-2"), 1);
        {
                char line[64];

                snprintf(line, sizeof(line), "started %s", second);
                assert_int_equal(lines_with(w, line), 0);
        }

        /* The first restored: its slot goes to the second, which drains. */
        set_ann(w, first, "drainer.io/request", "uncordon");
        assert_true(run_until(w, finished_restore, first, 60 * SEC));
        assert_true(run_until(w, is_drained, second, 60 * SEC));
        assert_string_equal(lease_holder(w, 0), second);
        assert_true(is_in_service(w, first));
        assert_int_equal(w->most_out_of_service, 1);
}

/* driver-stop records a unit this configuration (taint) does not allow: refused, and
 * reported once, however often the manager reconciles, until the annotations change. */
static void test_refusal_reported_once(void **state) {
        struct world *w = *state;

        add_node(w, "node-1",
                 "\"drainer.io/request\":\"uncordon\",\"drainer.io/state\":\"restore-drivers\","
                 "\"drainer.io/was-unschedulable\":\"false\",\"drainer.io/"
                 "started-at\":\"2025-06-15T14:00:00Z\","
                 "\"drainer.io/state-since\":\"2025-06-15T14:00:01Z\",\"drainer.io/driver-stop\":"
                 "\"[{\\\"strategy\\\":\\\"systemd\\\",\\\"unit\\\":\\\"reboot.target\\\"}]\"");
        add_node(w, "node-2", NULL);
        start_manager(w, 0);
        run_for(w, 5 * SEC);
        assert_int_equal(lines_with(w, "started node-1"), 1);
        assert_int_equal(lines_with(w, "refused node-1"), 1);
        assert_int_equal(events_with(w, "DrainerBlocked node-1"), 1);
        test_assert_contains(ann(w, "node-1", "drainer.io/message"), "reboot.target");

        /* Reconciles: other Nodes change, this one's labels change, time passes beyond
         * every retry. Nothing new is tried or reported. */
        for (int i = 0; i < 5; i++) {
                cJSON *n2 = node_named(w, "node-2");
                cJSON *n1 = node_named(w, "node-1");

                cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(
                                                cJSON_GetObjectItemCaseSensitive(n2, "metadata"), "labels"),
                                        i % 2 ? "a" : "b", "x");
                node_changed(w, n2);
                node_changed(w, n1);
                run_for(w, 2 * 60 * SEC);
        }
        assert_int_equal(lines_with(w, "started node-1"), 1);
        assert_int_equal(lines_with(w, "refused node-1"), 1);
        assert_int_equal(lines_with(w, "failed node-1"), 0);
        assert_int_equal(events_with(w, "DrainerBlocked node-1"), 1);

        /* The record changes (an admin reset it): tried again at once. */
        set_ann(w, "node-1", "drainer.io/driver-stop", NULL);
        run_for(w, 1 * SEC);
        assert_int_equal(lines_with(w, "started node-1"), 2);
}

static bool slot_free(struct world *w, const char *unused) {
        return w->leases[0] && !lease_holder(w, 0);
}

/* A drained node deleted: its slot is released (no reconcile of it will ever come),
 * and the node waiting for it drains. */
static void test_deleted_node_releases_slot(void **state) {
        struct world *w = *state;

        add_node(w, "node-1", "\"drainer.io/request\":\"drain\"");
        start_manager(w, 1);
        assert_true(run_until(w, is_drained, "node-1", 60 * SEC));
        assert_string_equal(lease_holder(w, 0), "node-1");
        add_node(w, "node-2", "\"drainer.io/request\":\"drain\"");
        push(w, NODES_PATH "?", "ADDED", node_named(w, "node-2"));
        assert_true(run_until(w, waits_for_slot, "node-2", 10 * SEC));

        delete_node(w, "node-1");
        assert_true(run_until(w, is_drained, "node-2", 60 * SEC));
        assert_string_equal(lease_holder(w, 0), "node-2");
        /* the slot went back free in between (released, then taken), never expired */
        assert_true(fake_clock_now(w->clock) < TEST_API_T0 + 120 * SEC);
}

/* A deleted node's slot is released even when nobody waits for it. */
static void test_deleted_node_slot_freed(void **state) {
        struct world *w = *state;

        add_node(w, "node-1", "\"drainer.io/request\":\"drain\"");
        start_manager(w, 1);
        assert_true(run_until(w, is_drained, "node-1", 60 * SEC));
        delete_node(w, "node-1");
        assert_true(run_until(w, slot_free, NULL, 5 * SEC));
        assert_int_equal(drain_manager_running(w->manager), 0);
}

/* Stopped during a drain: the engine stops where it is (the Node keeps its phase), every
 * call ends, on_stopped comes from the loop. */
static void test_stop_during_drain(void **state) {
        struct world *w = *state;

        add_node(w, "node-1", "\"drainer.io/request\":\"drain\"");
        start_manager(w, 1);
        step(w, 0);
        step(w, 0);
        assert_int_equal(drain_manager_running(w->manager), 1);
        /* teardown stops it and checks every call ended */
}

static bool event_held(struct world *w, const char *arg) {
        return w->event_held;
}

/* Stopped while an Event is in flight: on_stopped comes exactly when it answers, and
 * nothing wakes while the stop waits for it (no timer fires). */
static void test_stop_waits_for_event(void **state) {
        struct world *w = *state;
        uint64_t fired, t;

        add_node(w, "node-1", "\"drainer.io/request\":\"drain\"");
        w->hold_event = "DrainerDone";
        start_manager(w, 1);
        assert_true(run_until(w, event_held, NULL, 60 * SEC));
        drain_manager_stop(w->manager);
        for (int i = 0; i < 10; i++)
                step(w, 1 * MS);
        assert_false(w->stopped);
        fired = fake_clock_fired(w->clock);
        run_for(w, 1 * SEC);
        assert_int_equal(fake_clock_fired(w->clock), fired);
        assert_false(w->stopped);

        t = fake_clock_now(w->clock);
        reply(w, fake_transport_request(w->ft, w->held_event), 201, "{}");
        for (int i = 0; i < 10 && !w->stopped; i++)
                step(w, 0);
        assert_true(w->stopped);
        assert_int_equal(fake_clock_now(w->clock), t);
        drain_manager_free(w->manager);
        w->manager = NULL;
}

/* Slot 0's Lease as another drainer process writes it: held for node holder (NULL:
 * free), renewed now. Goes out on the watch. */
static void lease_written(struct world *w, const char *holder) {
        _cleanup_free_ char *s = test_asprintf(
                "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":"
                "\"drainer-slot-0\",\"namespace\":\"" NS "\",\"resourceVersion\":\"1\"},\"spec\":{%s%s%s"
                "\"leaseDurationSeconds\":120,\"acquireTime\":\"2026-01-01T00:00:00.000000Z\","
                "\"renewTime\":\"2026-01-01T00:00:00.000000Z\",\"leaseTransitions\":1}}",
                holder ? "\"holderIdentity\":\"" : "", holder ? holder : "", holder ? "\"," : "");
        bool added = !w->leases[0];

        cJSON_Delete(w->leases[0]);
        w->leases[0] = fake_api_json(s);
        set_rv(w, w->leases[0]);
        push(w, LEASES "?", added ? "ADDED" : "MODIFIED", w->leases[0]);
}

static size_t node_index(struct world *w, const char *node) {
        for (size_t i = 0; i < MAX_NODES; i++)
                if (w->nodes[i] && streq(json_str(w->nodes[i], "metadata.name"), node))
                        return i;
        fail_msg("no node %s", node);
        return 0;
}

static bool all_back(struct world *w) {
        for (size_t i = 0; i < MAX_NODES; i++)
                if (w->nodes[i] && ann(w, json_str(w->nodes[i], "metadata.name"), "drainer.io/request"))
                        return false;
        return true;
}

/* Whichever node is drained is asked back (uncordon); a node back in service has its
 * request removed by its owner. Until turns nodes have had their turn and all are back. */
static bool serve_turns(struct world *w, size_t turns) {
        for (int k = 0; k < 10000; k++) {
                for (size_t i = 0; i < MAX_NODES; i++) {
                        const char *name = w->nodes[i] ? json_str(w->nodes[i], "metadata.name") : NULL;
                        const char *req = name ? ann(w, name, "drainer.io/request") : NULL;

                        if (req && streq(req, "drain") && is_drained(w, name))
                                set_ann(w, name, "drainer.io/request", "uncordon");
                        else if (req && streq(req, "uncordon") && is_in_service(w, name))
                                set_ann(w, name, "drainer.io/request", NULL);
                }
                if (w->n_turns >= turns && all_back(w))
                        return true;
                step(w, 10 * MS);
        }
        return false;
}

/* Three nodes wait while the one slot changes hands five times between nodes of other
 * drainer processes: the waiting message names no holder, so each waiting Node is
 * written twice (it starts waiting; its turn came), not once per handover. */
static void test_waiting_written_twice(void **state) {
        static const char *const waiters[] = { "node-1", "node-2", "node-3" };
        struct world *w = *state;
        char holder[16];

        for (int k = 1; k <= 5; k++) {
                snprintf(holder, sizeof(holder), "other-%d", k);
                add_node(w, holder, NULL);
        }
        for (size_t i = 0; i < ELEMENTSOF(waiters); i++)
                add_node(w, waiters[i], "\"drainer.io/request\":\"drain\"");
        lease_written(w, "other-1");
        start_manager(w, 1);
        run_for(w, 5 * SEC);
        for (size_t i = 0; i < ELEMENTSOF(waiters); i++) {
                assert_true(waits_for_slot(w, waiters[i]));
                assert_int_equal(w->patches_to_turn[node_index(w, waiters[i])], 1);
        }
        for (int k = 2; k <= 6; k++) {
                snprintf(holder, sizeof(holder), "other-%d", k == 6 ? 1 : k);
                lease_written(w, holder);
                run_for(w, 3 * SEC);
                assert_string_equal(lease_holder(w, 0), holder);
        }
        lease_written(w, NULL);
        assert_true(serve_turns(w, ELEMENTSOF(waiters)));
        for (size_t i = 0; i < ELEMENTSOF(waiters); i++) {
                size_t j = node_index(w, waiters[i]);

                assert_true(w->turned[j]);
                assert_int_equal(w->patches_to_turn[j], 2);
        }
        assert_int_equal(w->most_out_of_service, 1);
}

/* Five nodes ask one second apart with one slot, in an order that is neither their
 * names' nor the cache's: they drain in the order they asked. */
static void test_slots_in_request_order(void **state) {
        static const char *const asks[] = { "node-c", "node-e", "node-a", "node-d", "node-b" };
        struct world *w = *state;

        add_node(w, "node-a", NULL);
        add_node(w, "node-b", NULL);
        add_node(w, "node-c", NULL);
        add_node(w, "node-d", NULL);
        add_node(w, "node-e", NULL);
        start_manager(w, 1);
        run_for(w, 1 * SEC); /* the Node watch open */
        for (size_t i = 0; i < ELEMENTSOF(asks); i++) {
                set_ann(w, asks[i], "drainer.io/request", "drain");
                run_for(w, 1 * SEC);
        }
        assert_true(serve_turns(w, ELEMENTSOF(asks)));
        assert_int_equal(w->n_turns, ELEMENTSOF(asks));
        for (size_t i = 0; i < ELEMENTSOF(asks); i++)
                assert_string_equal(w->turn_order[i], asks[i]);
        assert_int_equal(w->most_out_of_service, 1);
}

/* The order is the one the Nodes record: a manager started over nodes already waiting
 * (their drainer.io/state-since, written by an earlier one) serves the oldest first. */
static void test_order_read_from_nodes(void **state) {
        struct world *w = *state;

        add_node(w, "node-a",
                 "\"drainer.io/request\":\"drain\",\"drainer.io/state\":\"waiting\","
                 "\"drainer.io/state-since\":\"2026-01-01T00:00:09Z\"");
        add_node(w, "node-b",
                 "\"drainer.io/request\":\"drain\",\"drainer.io/state\":\"waiting\","
                 "\"drainer.io/state-since\":\"2026-01-01T00:00:03Z\"");
        add_node(w, "node-c",
                 "\"drainer.io/request\":\"drain\",\"drainer.io/state\":\"waiting\","
                 "\"drainer.io/state-since\":\"2026-01-01T00:00:05Z\"");
        start_manager(w, 1);
        assert_true(serve_turns(w, 3));
        assert_string_equal(w->turn_order[0], "node-b");
        assert_string_equal(w->turn_order[1], "node-c");
        assert_string_equal(w->turn_order[2], "node-a");
}

/* ---- waves: a percentage, the maintenance window, the pause ---- */

static void test_percent_of(void **state) {
        assert_int_equal(drain_manager_percent_of(10, 5), 1); /* rounded down, at least 1 */
        assert_int_equal(drain_manager_percent_of(10, 0), 1);
        assert_int_equal(drain_manager_percent_of(10, 1000), 100);
        assert_int_equal(drain_manager_percent_of(33, 10), 3);
        assert_int_equal(drain_manager_percent_of(100, 7), 7);
        assert_int_equal(drain_manager_percent_of(100, 5000), 1024);
}

static size_t in_phase_past_waiting(struct world *w) {
        size_t n = 0;

        for (size_t i = 0; i < MAX_NODES; i++) {
                const char *name = w->nodes[i] ? json_str(w->nodes[i], "metadata.name") : NULL;
                const char *st = name ? ann(w, name, "drainer.io/state") : NULL;

                n += st && !streq(st, "waiting");
        }
        return n;
}

/* --max-parallel 30% with every Node: 10 nodes, 3 at once; the waiting ones say the
 * percentage, and a fourth slot is never taken. */
static void test_percent_all_nodes(void **state) {
        struct world *w = *state;
        char name[16];

        for (int i = 1; i <= 10; i++) {
                snprintf(name, sizeof(name), "node-%02d", i);
                add_node(w, name, i <= 5 ? "\"drainer.io/request\":\"drain\"" : NULL);
        }
        start_manager_with(w, (struct drain_manager_options){ .max_parallel_percent = 30 });
        run_for(w, 30 * SEC);
        assert_int_equal(in_phase_past_waiting(w), 3);
        assert_int_equal(w->most_out_of_service, 3);
        assert_null(w->leases[3]);
        for (int i = 1, waiting = 0; i <= 5; i++) {
                const char *msg;

                snprintf(name, sizeof(name), "node-%02d", i);
                if (!streq_ptr(ann(w, name, "drainer.io/state"), "waiting"))
                        continue;
                msg = ann(w, name, "drainer.io/message");
                assert_non_null(msg);
                assert_non_null(strstr(msg, "(--max-parallel 30%) since "));
                assert_true(++waiting <= 2);
        }
        assert_int_equal(lines_with(w, "limit -"), 1);

        /* Five Nodes go: 30% of 5 is 1. The three out keep their slots until restored;
         * then the two waiting go one at a time. */
        for (int i = 6; i <= 10; i++) {
                snprintf(name, sizeof(name), "node-%02d", i);
                delete_node(w, name);
        }
        run_for(w, 2 * SEC);
        assert_int_equal(lines_with(w, "limit -"), 2);
        assert_int_equal(in_phase_past_waiting(w), 3);
        for (int i = 1; i <= 5; i++) {
                snprintf(name, sizeof(name), "node-%02d", i);
                if (is_drained(w, name))
                        set_ann(w, name, "drainer.io/request", "uncordon");
        }
        run_for(w, 1 * SEC);
        w->most_out_of_service = out_of_service(w);
        assert_true(serve_turns(w, 5));
        assert_int_equal(w->most_out_of_service, 1);
}

/* Per node, a percentage of the cluster's Nodes, counted with a list of one item: 10
 * nodes, 10% is 1 slot, held by another node: this one waits; 20% is 2: it drains. */
static void test_percent_one_node(void **state) {
        struct world *w = *state;
        char name[16];

        for (int i = 1; i <= 10; i++) {
                snprintf(name, sizeof(name), "node-%02d", i);
                add_node(w, name, i == 1 ? "\"drainer.io/request\":\"drain\"" : NULL);
        }
        lease_written(w, "node-02");
        start_manager_with(w,
                           (struct drain_manager_options){ .node = "node-01", .max_parallel_percent = 10 });
        run_for(w, 10 * SEC);
        assert_int_equal(w->node_counts, 1);
        assert_true(streq_ptr(ann(w, "node-01", "drainer.io/state"), "waiting"));
        assert_null(w->leases[1]);
        drain_manager_stop(w->manager);
        for (int i = 0; i < 200 && !w->stopped; i++)
                step(w, 5 * MS);
        assert_true(w->stopped);
        drain_manager_free(w->manager);
        w->stopped = false;
        w->n_lines = 0;

        start_manager_with(w,
                           (struct drain_manager_options){ .node = "node-01", .max_parallel_percent = 20 });
        assert_true(run_until(w, is_drained, "node-01", 60 * SEC));
        assert_string_equal(lease_holder(w, 1), "node-01");
        assert_int_equal(w->node_counts, 2);
}

/* "daily HH:MM-HH:MM UTC" opening minutes after now, closing an hour later. */
static struct mwindows *window_in(struct world *w, int open_in_min) {
        int64_t now = timesrc_realtime(w->api->ts) / (int64_t)SEC;
        time_t a = (time_t)(now / 60 * 60 + open_in_min * 60), b = a + 3600;
        struct tm ta, tb;
        struct mwindows *mw = NULL;
        char spec[64], *err = NULL;

        gmtime_r(&a, &ta);
        gmtime_r(&b, &tb);
        snprintf(spec, sizeof(spec), "daily %02d:%02d-%02d:%02d UTC", ta.tm_hour, ta.tm_min, tb.tm_hour,
                 tb.tm_min);
        assert_int_equal(mwindows_add(&mw, spec, NULL, &err), 0);
        return mw;
}

/* Outside the window a request waits, and says until when, once; a drain in flight
 * and an undo go on; once the window opens the request drains. */
static void test_window_holds_new_drains(void **state) {
        struct world *w = *state;
        _cleanup_(mwindows_freep) struct mwindows *mw = window_in(w, 2);
        const char *msg;

        add_node(w, "node-1", "\"drainer.io/request\":\"drain\"");
        add_node(w, "node-2", "\"drainer.io/request\":\"drain\",\"drainer.io/state\":\"preflight\"");
        add_node(w, "node-3", "\"drainer.io/request\":\"uncordon\",\"drainer.io/state\":\"drained\"");
        start_manager_with(w, (struct drain_manager_options){ .max_parallel = 2, .window = mw });
        run_for(w, 30 * SEC);
        assert_true(is_drained(w, "node-2"));
        assert_true(is_in_service(w, "node-3"));
        assert_string_equal(ann(w, "node-1", "drainer.io/state"), "waiting");
        msg = ann(w, "node-1", "drainer.io/message");
        assert_non_null(msg);
        assert_non_null(strstr(msg, "waiting for the maintenance window (next opens "));
        assert_false(cordoned(w, "node-1"));
        assert_int_equal(lines_with(w, "started node-1"), 0);
        /* held 50 s more (node-2 undone meanwhile): written once */
        set_ann(w, "node-2", "drainer.io/request", "uncordon");
        run_for(w, 50 * SEC);
        assert_int_equal(w->patches_to_turn[node_index(w, "node-1")], 1);
        assert_int_equal(lines_with(w, "started node-1"), 0);
        /* the window opens within the next minute */
        assert_true(run_until(w, is_drained, "node-1", 90 * SEC));
        assert_int_equal(w->patches_to_turn[node_index(w, "node-1")], 2);
}

static void set_pause(struct world *w, const char *value) {
        cJSON *meta = cJSON_GetObjectItemCaseSensitive(w->ns, "metadata");

        cJSON_DeleteItemFromObjectCaseSensitive(meta, "annotations");
        if (value) {
                cJSON *a = cJSON_AddObjectToObject(meta, "annotations");

                cJSON_AddStringToObject(a, "drainer.io/pause", value);
        }
        set_rv(w, w->ns);
        push(w, NS_PATH, "MODIFIED", w->ns);
}

/* The namespace watches open now (an event of the namespace as it is, to each). */
static size_t ns_watches(struct world *w) {
        _cleanup_free_ char *o = cJSON_PrintUnformatted(w->ns);
        _cleanup_free_ char *ev = fake_api_watch_event("MODIFIED", o);

        return fake_transport_push(w->ft, NS_PATH, ev);
}

/* drainer.io/pause=true on drainer's namespace: drains in flight finish, undo goes on,
 * a new request waits (and says so, once) until the pause is removed. */
static void test_pause(void **state) {
        struct world *w = *state;
        const char *msg;

        add_node(w, "node-1", NULL);
        add_node(w, "node-2", "\"drainer.io/request\":\"drain\",\"drainer.io/state\":\"preflight\"");
        add_node(w, "node-3", "\"drainer.io/request\":\"uncordon\",\"drainer.io/state\":\"drained\"");
        add_node(w, "node-4", "\"drainer.io/request\":\"drain\"");
        start_manager(w, 0); /* no slots: what waits, waits for the pause alone */
        assert_true(run_until(w, is_drained, "node-4", 30 * SEC)); /* the namespace read: not paused */
        set_pause(w, "true");
        run_for(w, 1 * SEC);
        assert_int_equal(lines_with(w, "pause -"), 1);
        set_ann(w, "node-1", "drainer.io/request", "drain");
        run_for(w, 30 * SEC);
        assert_true(is_drained(w, "node-2"));
        assert_true(is_in_service(w, "node-3"));
        assert_string_equal(ann(w, "node-1", "drainer.io/state"), "waiting");
        msg = ann(w, "node-1", "drainer.io/message");
        assert_non_null(msg);
        assert_non_null(strstr(msg, "drains are paused (drainer.io/pause=true on namespace " NS ")"));
        assert_false(cordoned(w, "node-1"));
        run_for(w, 30 * SEC);
        assert_int_equal(w->patches_to_turn[node_index(w, "node-1")], 1);

        /* a value that is neither true nor false: still held, and said so */
        set_pause(w, "yes");
        run_for(w, 2 * SEC);
        msg = ann(w, "node-1", "drainer.io/message");
        assert_non_null(strstr(msg, "is neither true nor false"));
        assert_false(cordoned(w, "node-1"));

        set_pause(w, NULL);
        assert_true(run_until(w, is_drained, "node-1", 30 * SEC));
        assert_int_equal(lines_with(w, "pause -"), 2);

        /* Nobody asks any more: the namespace's watch closes after its linger (an idle
         * daemon holds no watch but the Nodes'); a new request opens it again. */
        run_for(w, 20 * SEC);
        assert_int_equal(ns_watches(w), 0);
        set_ann(w, "node-3", "drainer.io/request", "drain");
        assert_true(run_until(w, is_drained, "node-3", 30 * SEC));
        assert_int_equal(ns_watches(w), 1);
}

/* The namespace cannot be read (RBAC): no new drain starts, and the Node says why. */
static void test_pause_unreadable(void **state) {
        struct world *w = *state;

        w->ns_forbidden = true;
        add_node(w, "node-1", "\"drainer.io/request\":\"drain\"");
        start_manager(w, 1);
        run_for(w, 10 * SEC);
        assert_false(cordoned(w, "node-1"));
        assert_non_null(strstr(ann(w, "node-1", "drainer.io/message"), "cannot read namespace " NS));
        w->ns_forbidden = false;
        assert_true(run_until(w, is_drained, "node-1", 60 * SEC));
}

static void test_event_kind_names(void **state) {
        for (int k = 0; k < _DRAIN_MANAGER_EVENT_KIND_MAX; k++)
                assert_non_null(drain_manager_event_kind_to_string(k));
        assert_null(drain_manager_event_kind_to_string(_DRAIN_MANAGER_EVENT_KIND_MAX));
        assert_null(drain_manager_event_kind_to_string(-1));
}

/* ---- device health ---- */

#define GPU1      DRIVER "/node-1/gpu-1"
#define GPU2      DRIVER "/node-1/gpu-2"
#define SCOPE_ANN "drainer.io/state.device."

/* A device drain of node-1 recorded as drained (any device's scope). */
static bool device_drained(struct world *w, const char *unused) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(node_named(w, "node-1"), "metadata"), "annotations");
        const cJSON *e;
        size_t n = 0;

        cJSON_ArrayForEach(e, a) if (starts_with(e->string, SCOPE_ANN) && streq(e->valuestring, "drained"))
                n++;
        return n == (unused ? (size_t)atoi(unused) : 1);
}

/* A device drain of node-1 records exactly this device list (drainer.io/devices.device.ID). */
static bool device_listed(struct world *w, const char *list) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(node_named(w, "node-1"), "metadata"), "annotations");
        const cJSON *e;

        cJSON_ArrayForEach(e, a) if (starts_with(e->string, "drainer.io/devices.device.") &&
                                     streq(e->valuestring, list)) return true;
        return false;
}

/* The manager with device health, its watches open. */
static void start_health(struct world *w, int action, unsigned max_parallel) {
        start_manager_with(
                w, (struct drain_manager_options){ .max_parallel = max_parallel, .device_health = action });
        run_for(w, 2 * SEC);
}

/* drain-device: the tainted device is drained alone, under a slot, never a cordon;
 * once; healthy again it stays drained; the slot goes back. */
static void test_device_drain(void **state) {
        struct world *w = *state;
        double started = drains_started("device-health");

        add_node(w, "node-1", NULL);
        start_health(w, DEVICE_HEALTH_DRAIN, 1);
        run_for(w, 3 * SEC);
        assert_int_equal(w->rule_creates, 0);
        taint(w, "gpu-1");
        assert_true(run_until(w, device_drained, NULL, 30 * SEC));
        run_for(w, 3 * SEC);
        assert_int_equal(lines_with(w, "device node-1"), 1);
        assert_int_equal(lines_with(w, "started node-1 " GPU1), 1);
        assert_int_equal(lines_with(w, "done node-1 " GPU1), 1);
        assert_int_equal(w->rule_creates, 1);
        assert_int_equal(n_rules(w), 1);
        assert_false(cordoned(w, "node-1"));
        assert_null(ann(w, "node-1", "drainer.io/state"));
        assert_true(device_listed(w, GPU1));
        assert_true(lease_holder(w, 0) == NULL || streq(lease_holder(w, 0), ""));
        assert_int_equal(events_with(w, "DrainerDeviceUnhealthy node-1"), 1);
        assert_int_equal(event_messages_with(w, "drain started (asked by device health (serve "
                                                "--on-unhealthy-device)): "),
                         1);
        assert_true(drains_started("device-health") == started + 1);

        taint(w, "");
        run_for(w, 5 * SEC);
        assert_int_equal(lines_with(w, "device node-1"), 2);
        assert_int_equal(events_with(w, "DrainerDeviceHealthy node-1"), 1);
        assert_int_equal(n_rules(w), 1); /* stays until uncordon --device */
        assert_true(device_drained(w, NULL));
        assert_int_equal(lines_with(w, "started node-1 " GPU1), 1);
        assert_int_equal(w->rule_creates, 1);
}

/* Two devices of one node: one drain after the other, never both at once. */
static void test_device_one_at_a_time(void **state) {
        struct world *w = *state;

        add_node(w, "node-1", NULL);
        start_health(w, DEVICE_HEALTH_DRAIN, 0);
        taint(w, "gpu-1 gpu-2");
        assert_true(run_until(w, device_drained, "2", 60 * SEC));
        assert_int_equal(lines_with(w, "started node-1 " GPU1), 1);
        assert_int_equal(lines_with(w, "started node-1 " GPU2), 1);
        assert_int_equal(w->most_device_running, 1);
        assert_int_equal(w->rule_creates, 2);
        assert_false(cordoned(w, "node-1"));
}

/* Asked for two at once (--unhealthy-devices-per-node 2), two devices of one node drain
 * together. */
static void test_device_two_at_once(void **state) {
        struct world *w = *state;

        add_node(w, "node-1", NULL);
        start_manager_with(w, (struct drain_manager_options){ .device_health = DEVICE_HEALTH_DRAIN,
                                                              .device_drains_per_node = 2 });
        run_for(w, 2 * SEC);
        taint(w, "gpu-1 gpu-2");
        assert_true(run_until(w, device_drained, "2", 60 * SEC));
        assert_int_equal(w->most_device_running, 2);
        assert_int_equal(w->rule_creates, 2);
        assert_int_equal(lines_with(w, "waiting node-1 " GPU1) + lines_with(w, "waiting node-1 " GPU2), 0);
}

/* A node drain asked comes first; the device's waits while the node is out of service. */
static void test_device_after_node_drain(void **state) {
        struct world *w = *state;

        add_node(w, "node-1", "\"drainer.io/request\":\"drain\"");
        start_health(w, DEVICE_HEALTH_DRAIN, 0);
        taint(w, "gpu-1");
        assert_true(run_until(w, is_drained, "node-1", 60 * SEC));
        run_for(w, 3 * SEC);
        assert_int_equal(lines_with(w, "started node-1 " GPU1), 0);
        assert_int_equal(lines_with(w, "waiting node-1 " GPU1), 1);
        assert_int_equal(w->rule_creates, 0);
}

/* The pause holds a new device drain (said once, nothing written on the Node); lifted,
 * the drain goes. */
static void test_device_paused(void **state) {
        struct world *w = *state;

        add_node(w, "node-1", NULL);
        start_health(w, DEVICE_HEALTH_DRAIN, 0);
        set_pause(w, "true");
        taint(w, "gpu-1");
        run_for(w, 10 * SEC);
        assert_int_equal(w->rule_creates, 0);
        assert_int_equal(lines_with(w, "waiting node-1 " GPU1), 1);
        assert_int_equal(lines_with(w, "started node-1 " GPU1), 0);
        assert_null(ann(w, "node-1", "drainer.io/state"));
        assert_null(ann(w, "node-1", "drainer.io/message"));
        set_pause(w, "false");
        assert_true(run_until(w, device_drained, NULL, 30 * SEC));
        assert_int_equal(lines_with(w, "started node-1 " GPU1), 1);
}

/* The Node's record decides: a drain of the device alone in progress resumes; a device
 * in another device drain (gpu-1 and gpu-2 together) is not drained again. */
static void test_device_record(void **state) {
        struct world *w = *state;
        static const struct drain_device one[] = { { DRIVER, "node-1", "gpu-1" } },
                                         two[] = { { DRIVER, "node-1", "gpu-2" },
                                                   { DRIVER, "node-1", "gpu-3" } };
        char s1[DRAIN_DEVICE_SCOPE_SIZE], s2[DRAIN_DEVICE_SCOPE_SIZE];
        _cleanup_free_ char *anns = NULL;

        drain_devices_scope(one, 1, s1);
        drain_devices_scope(two, 2, s2);
        anns = test_asprintf(
                "\"drainer.io/state.%s\":\"evict-claim-holders\",\"drainer.io/devices.%s\":\"" GPU1
                "\",\"drainer.io/state.%s\":\"drained\",\"drainer.io/devices.%s\":\"" GPU2 "," DRIVER
                "/node-1/gpu-3\"",
                s1, s1, s2, s2);
        add_node(w, "node-1", anns);
        start_health(w, DEVICE_HEALTH_DRAIN, 0);
        taint(w, "gpu-1 gpu-2");
        assert_true(run_until(w, device_drained, "2", 30 * SEC));
        run_for(w, 3 * SEC);
        assert_int_equal(lines_with(w, "started node-1 " GPU1), 1);
        assert_int_equal(lines_with(w, "started node-1 " GPU2), 0);
        assert_int_equal(lines_with(w, "waiting node-1 " GPU2), 1);
        assert_false(cordoned(w, "node-1"));
}

/* report: the Event and the line, no drain. */
static void test_device_report(void **state) {
        struct world *w = *state;

        add_node(w, "node-1", NULL);
        start_health(w, DEVICE_HEALTH_REPORT, 1);
        taint(w, "gpu-1");
        run_for(w, 5 * SEC);
        assert_int_equal(lines_with(w, "device node-1"), 1);
        assert_int_equal(events_with(w, "DrainerDeviceUnhealthy node-1"), 1);
        assert_int_equal(lines_with(w, "started node-1 " GPU1), 0);
        assert_int_equal(w->rule_creates, 0);
        assert_null(lease_holder(w, 0));
}

/* What serve logs and shows of each event: the line, its level, the status. */
static void test_describe(void **state) {
        static const struct drain_manager_options one = { .node = "node-1",
                                                          .lease_namespace = "drainer-system" },
                                                  all = { .max_parallel_percent = 10 };
        static const struct {
                const struct drain_manager_options *o;
                struct drain_manager_event ev;
                enum log_level level;
                const char *line, *status;
        } cases[] = {
                { &one,
                  { .kind = DRAIN_MANAGER_READY, .n_nodes = 1 },
                  LOG_LEVEL_INFO,
                  "serving node-1 (1 node watched)",
                  NULL },
                { &all, { .kind = DRAIN_MANAGER_IDLE }, LOG_LEVEL_INFO, NULL, "idle: watching all nodes" },
                { &one,
                  { .kind = DRAIN_MANAGER_PHASE,
                    .node = "node-1",
                    .phase = DRAIN_PHASE_CORDON,
                    .message = "m" },
                  LOG_LEVEL_INFO,
                  "node node-1: cordon: m",
                  "node node-1: cordon" },
                { &one,
                  { .kind = DRAIN_MANAGER_DONE,
                    .node = "node-1",
                    .goal = ENGINE_GOAL_UNCORDON,
                    .message = "back" },
                  LOG_LEVEL_INFO,
                  "node node-1: back",
                  "node node-1: in service" },
                { &one,
                  { .kind = DRAIN_MANAGER_FAILED,
                    .node = "node-1",
                    .error = -ETIMEDOUT,
                    .message = "late",
                    .retry_usec = 30 * USEC_PER_SEC },
                  LOG_LEVEL_ERROR,
                  "node node-1: late (Connection timed out); retrying in 30 s",
                  "node node-1: failed, retrying" },
                { &one,
                  { .kind = DRAIN_MANAGER_DEVICE,
                    .node = "node-1",
                    .unhealthy = true,
                    .message = "device d is unhealthy" },
                  LOG_LEVEL_WARNING,
                  "node node-1: device d is unhealthy",
                  NULL },
                { &one,
                  { .kind = DRAIN_MANAGER_DEVICE,
                    .node = "node-1",
                    .message = "device d is no longer reported unhealthy" },
                  LOG_LEVEL_INFO,
                  "node node-1: device d is no longer reported unhealthy",
                  NULL },
                { &one,
                  { .kind = DRAIN_MANAGER_PAUSE, .message = "paused" },
                  LOG_LEVEL_INFO,
                  "drainer.io/pause=true on namespace drainer-system: drains in flight finish, no new one "
                  "starts",
                  "paused" },
                { &all,
                  { .kind = DRAIN_MANAGER_LIMIT, .n_nodes = 40, .max_parallel = 4 },
                  LOG_LEVEL_INFO,
                  "--max-parallel 10% of 40 nodes: 4 at once",
                  NULL },
                { &one,
                  { .kind = DRAIN_MANAGER_PATCH_CONFLICT, .node = "node-1" },
                  LOG_LEVEL_DEBUG,
                  "node node-1: the Node changed under the annotations' patch (409), writing them again on "
                  "the newer version",
                  NULL },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(drain_manager_text_done) struct drain_manager_text t = {};

                assert_int_equal(drain_manager_describe(cases[i].o, &cases[i].ev, &t), 0);
                assert_int_equal(t.level, cases[i].level);
                if (cases[i].line)
                        assert_string_equal(t.line, cases[i].line);
                else
                        assert_null(t.line);
                if (cases[i].status)
                        assert_string_equal(t.status, cases[i].status);
                else
                        assert_null(t.status);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_describe),
                cmocka_unit_test_setup_teardown(test_device_drain, setup, teardown),
                cmocka_unit_test_setup_teardown(test_device_one_at_a_time, setup, teardown),
                cmocka_unit_test_setup_teardown(test_device_two_at_once, setup, teardown),
                cmocka_unit_test_setup_teardown(test_device_after_node_drain, setup, teardown),
                cmocka_unit_test_setup_teardown(test_device_report, setup, teardown),
                cmocka_unit_test_setup_teardown(test_device_paused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_device_record, setup, teardown),
                cmocka_unit_test_setup_teardown(test_idle, setup, teardown),
                cmocka_unit_test_setup_teardown(test_request_drains, setup, teardown),
                cmocka_unit_test_setup_teardown(test_undo_restores, setup, teardown),
                cmocka_unit_test_setup_teardown(test_slot_wait_and_release, setup, teardown),
                cmocka_unit_test_setup_teardown(test_refusal_reported_once, setup, teardown),
                cmocka_unit_test_setup_teardown(test_deleted_node_releases_slot, setup, teardown),
                cmocka_unit_test_setup_teardown(test_deleted_node_slot_freed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_during_drain, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_waits_for_event, setup, teardown),
                cmocka_unit_test_setup_teardown(test_waiting_written_twice, setup, teardown),
                cmocka_unit_test_setup_teardown(test_slots_in_request_order, setup, teardown),
                cmocka_unit_test_setup_teardown(test_order_read_from_nodes, setup, teardown),
                cmocka_unit_test(test_percent_of),
                cmocka_unit_test_setup_teardown(test_percent_all_nodes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_percent_one_node, setup, teardown),
                cmocka_unit_test_setup_teardown(test_window_holds_new_drains, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pause, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pause_unreadable, setup, teardown),
                cmocka_unit_test(test_event_kind_names),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
