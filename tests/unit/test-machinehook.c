/* The Cluster API pre-drain hook owner (ctl/machinehook.c) over the real client and
 * informer, a fake clock and a scripted fake transport, with a stand-in for the drain
 * manager's Nodes (its ops table), never sleeping: a Machine being deleted with
 * drainer's hook asks for its Node's drain (drainer.io/request=drain) and tells it on
 * the Machine; the hook is removed (a JSON patch testing the uid and the hook) only
 * once the Node is drained, never before; a drain that cannot finish keeps the hook
 * and says why on the Machine; a Machine without nodeRef is left alone, said so; a
 * Machine not deleting, or without the hook, is not touched; Machines not served is
 * a clear failure; a malformed Machine is no crash. */
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
#include "drainer/ctl/machinehook.h"
#include "drainer/drain/state.h"
#include "drainer/kube/objects.h"
#include "fakes/fake-apiserver.h"
#include "fakes/fake-clock.h"
#include "fakes/fake-transport.h"
#include "fakes/test-env.h"

#define SEC          USEC_PER_SEC
#define MACHINES     "/apis/cluster.x-k8s.io/v1beta2/machines"
#define MACHINE_PATH "/apis/cluster.x-k8s.io/v1beta2/namespaces/capi/machines/m-2"
#define EVENTS       "/api/v1/namespaces/capi/events"
#define HOOK         "\"pre-drain.delete.hook.machine.cluster.x-k8s.io/drainer\":\"\""

struct env {
        struct test_api *api;
        struct machine_hook *mh;
        struct node_rec *node; /* node-2 as the manager watches it, or NULL */
        int patch_error;
        unsigned patches, failed, stopped;
        int failed_error;
        char last_patch[512];
        char notes[8192];
};

static const struct node_rec *fake_node(void *nodes, const char *name) {
        struct env *e = nodes;

        return e->node && streq(name, e->node->name) ? e->node : NULL;
}

static int fake_patch(void *nodes, const char *name, char *body) {
        struct env *e = nodes;

        assert_string_equal(name, "node-2");
        assert_non_null(body);
        snprintf(e->last_patch, sizeof(e->last_patch), "%s", body);
        free(body);
        if (e->patch_error)
                return e->patch_error;
        e->patches++;
        return 0;
}

static const struct machine_hook_nodes_ops ops = { .node = fake_node, .patch = fake_patch };

static void on_note(struct machine_hook *h, enum log_level level, int error, const char *line,
                    void *userdata) {
        struct env *e = userdata;
        size_t len = strlen(e->notes);

        snprintf(e->notes + len, sizeof(e->notes) - len, "%s\n", line);
}

static void on_failed(struct machine_hook *h, int error, const char *message, void *userdata) {
        struct env *e = userdata;

        e->failed++;
        e->failed_error = error;
        on_note(h, LOG_LEVEL_ERROR, error, message, userdata);
}

static void on_stopped(struct machine_hook *h, void *userdata) {
        ((struct env *)userdata)->stopped++;
}

static const struct machine_hook_handlers handlers = { .on_note = on_note,
                                                       .on_failed = on_failed,
                                                       .on_stopped = on_stopped };

/* node-2 with these drainer.io/ annotations (JSON members, or ""). */
static void set_node(struct env *e, const char *annotations) {
        _cleanup_free_ char *js = test_asprintf("{\"metadata\":{\"name\":\"node-2\",\"uid\":\"n2\","
                                                "\"resourceVersion\":\"7\",\"annotations\":{%s}}}",
                                                annotations);
        cJSON *o = fake_api_json(js);

        node_rec_free(e->node);
        e->node = NULL;
        assert_int_equal(node_rec_from_json(o, &e->node), 0);
        cJSON_Delete(o);
}

/* Machine m-2 of namespace capi: deleting or not, these annotations, nodeRef (or NULL). */
static char *machine(bool deleting, const char *annotations, const char *node_ref, unsigned rv) {
        return test_asprintf("{\"apiVersion\":\"cluster.x-k8s.io/v1beta2\",\"kind\":\"Machine\","
                             "\"metadata\":{\"name\":\"m-2\",\"namespace\":\"capi\",\"uid\":\"uid-m2\","
                             "\"resourceVersion\":\"%u\"%s,\"annotations\":{%s}},"
                             "\"status\":{%s%s%s}}",
                             rv, deleting ? ",\"deletionTimestamp\":\"2026-12-05T20:00:00Z\"" : "",
                             annotations, node_ref ? "\"nodeRef\":{\"name\":\"" : "",
                             node_ref ? node_ref : "", node_ref ? "\"}" : "");
}

static void start(struct env *e, char *machine_json) {
        char *items[] = { machine_json, NULL };
        struct fake_transport *ft = e->api->ft;

        fake_api_expect_list_and_watch(ft, MACHINES, MACHINES, fake_api_list_strv("MachineList", items));
        fake_transport_expect_json(ft, "POST", EVENTS, 201, "{}");
        fake_transport_expect(ft, "POST", EVENTS,
                              &(struct fake_reply){ .status = 201, .body = "{}", .times = FAKE_FOREVER });
        assert_int_equal(machine_hook_new(e->api->client, e->api->ts,
                                          &(const struct machine_hook_options){ .identity = "test" }, &ops,
                                          e, &handlers, e, &e->mh),
                         0);
        assert_int_equal(machine_hook_start(e->mh), 0);
        test_api_run(e->api, SEC, SEC / 10);
}

/* The Machine as the watch brings it. */
static void push_machine(struct env *e, char *machine_json) {
        _cleanup_free_ char *ev = fake_api_watch_event("MODIFIED", machine_json);

        free(machine_json);
        assert_int_equal(fake_transport_push(e->api->ft, MACHINES, ev), 1);
        test_api_run(e->api, SEC, SEC / 10);
}

/* The bodies of the Events posted so far, concatenated. */
static char *events(struct env *e) {
        size_t n = fake_transport_n_requests(e->api->ft), len = 0;
        char *all = calloc(1, 1);

        for (size_t i = 0; i < n; i++) {
                const struct fake_request *r = fake_transport_request(e->api->ft, i);

                if (streq(r->method, "POST") && r->body) {
                        all = realloc(all, len + strlen(r->body) + 2);
                        assert_non_null(all);
                        strcpy(all + len, r->body);
                        len += strlen(r->body);
                        strcpy(all + len, "\n");
                        len++;
                }
        }
        return all;
}

static int setup(void **state) {
        struct env *e = calloc(1, sizeof(*e));

        assert_non_null(e);
        e->api = test_api_new(NULL);
        *state = e;
        return 0;
}

static int teardown(void **state) {
        struct env *e = *state;

        if (e->mh) {
                machine_hook_stop(e->mh);
                for (int i = 0; i < 100 && !e->stopped; i++)
                        test_api_run(e->api, 0, 1);
                assert_int_equal(e->stopped, 1);
                machine_hook_free(e->mh);
        }
        test_api_free(e->api);
        node_rec_free(e->node);
        free(e);
        return 0;
}

/* Deleted with the hook: the drain is asked for, then the hook stays while the node
 * drains (its message told on the Machine), and is removed once drained. */
static void test_drain_then_remove(void **state) {
        struct env *e = *state;
        _cleanup_free_ char *ev1 = NULL, *ev2 = NULL;
        const struct fake_request *r;

        set_node(e, "");
        start(e, machine(true, HOOK, "node-2", 10));
        assert_int_equal(e->patches, 1);
        test_assert_contains(e->last_patch, "\"drainer.io/request\":\"drain\"");
        test_assert_contains(e->last_patch, "\"drainer.io/cluster-api-machine\":\"capi/m-2\"");
        test_assert_contains(
                e->last_patch,
                "\"drainer.io/requested-by\":\"Cluster API: Machine capi/m-2 is being deleted\"");
        assert_int_equal(fake_transport_count(e->api->ft, "PATCH", NULL), 0);
        ev1 = events(e);
        test_assert_contains(ev1, "\"reason\":\"DrainerHookDrain\"");
        test_assert_contains(ev1, "\"kind\":\"Machine\"");
        test_assert_contains(ev1, "\"namespace\":\"capi\"");
        test_assert_contains(ev1, "\"uid\":\"uid-m2\"");
        assert_int_equal(machine_hook_held(e->mh), 1);

        /* Draining: evicting, then waiting for claims; the hook stays. */
        set_node(e, "\"drainer.io/request\":\"drain\",\"drainer.io/state\":\"wait-released\","
                    "\"drainer.io/message\":\"waiting for 1 claim on the node: demo/gpu-claim\"");
        machine_hook_node_changed(e->mh, e->node);
        test_api_run(e->api, SEC, SEC / 10);
        assert_int_equal(e->patches, 1); /* asked once */
        assert_int_equal(fake_transport_count(e->api->ft, "PATCH", NULL), 0);
        ev2 = events(e);
        test_assert_contains(ev2, "DrainerHookWaiting");
        test_assert_contains(ev2, "waiting for 1 claim on the node: demo/gpu-claim");
        assert_null(strstr(ev2, "DrainerHookBlocked")); /* the state was read */

        /* The drivers are stopping: still no removal. */
        set_node(e, "\"drainer.io/request\":\"drain\",\"drainer.io/state\":\"stop-drivers\"");
        machine_hook_node_changed(e->mh, e->node);
        test_api_run(e->api, SEC, SEC / 10);
        assert_int_equal(fake_transport_count(e->api->ft, "PATCH", NULL), 0);

        /* Drained: the hook goes once the manager reported the drain done, with a patch
         * that tests the uid and the hook itself. */
        fake_transport_expect_json(e->api->ft, "PATCH", MACHINE_PATH, 200, "{}");
        set_node(e, "\"drainer.io/request\":\"drain\",\"drainer.io/state\":\"drained\"");
        machine_hook_drain_done(e->mh, "node-2");
        machine_hook_node_changed(e->mh, e->node);
        test_api_run(e->api, SEC, SEC / 10);
        assert_int_equal(fake_transport_count(e->api->ft, "PATCH", MACHINE_PATH), 1);
        r = fake_transport_request(e->api->ft, fake_transport_n_requests(e->api->ft) - 2);
        if (!streq(r->method, "PATCH"))
                r = fake_transport_request(e->api->ft, fake_transport_n_requests(e->api->ft) - 1);
        assert_string_equal(r->method, "PATCH");
        assert_string_equal(fake_request_header(r, "Content-Type"), "application/json-patch+json");
        assert_string_equal(r->body,
                            "[{\"op\":\"test\",\"path\":\"/metadata/uid\",\"value\":\"uid-m2\"},"
                            "{\"op\":\"test\",\"path\":\"/metadata/annotations/"
                            "pre-drain.delete.hook.machine.cluster.x-k8s.io~1drainer\",\"value\":\"\"},"
                            "{\"op\":\"remove\",\"path\":\"/metadata/annotations/"
                            "pre-drain.delete.hook.machine.cluster.x-k8s.io~1drainer\"}]");
        test_assert_contains(e->notes, "pre-drain hook removed");
        assert_int_equal(machine_hook_held(e->mh), 0);

        /* The watch shows the Machine without the hook: nothing more. */
        push_machine(e, machine(true, "", "node-2", 11));
        assert_int_equal(fake_transport_count(e->api->ft, "PATCH", NULL), 1);
        assert_int_equal(e->patches, 1);
}

/* A Node that says drained (anyone who may patch it can write that) without the manager
 * having reported the drain done: no removal; the drain runs again (its state removed,
 * the request kept), and the hook goes only once that drain is done. */
static void test_forged_drained_is_checked(void **state) {
        struct env *e = *state;

        set_node(e, "\"drainer.io/request\":\"drain\",\"drainer.io/state\":\"drained\"");
        start(e, machine(true, HOOK, "node-2", 10));
        assert_int_equal(fake_transport_count(e->api->ft, "PATCH", NULL), 0);
        assert_int_equal(e->patches, 1);
        assert_string_equal(e->last_patch, "{\"metadata\":{\"annotations\":{\"drainer.io/state\":null}}}");
        machine_hook_node_changed(e->mh, e->node);
        test_api_run(e->api, 10 * SEC, SEC);
        assert_int_equal(e->patches, 1); /* once */
        assert_int_equal(fake_transport_count(e->api->ft, "PATCH", NULL), 0);
        /* the drain ran again and is done */
        fake_transport_expect_json(e->api->ft, "PATCH", MACHINE_PATH, 200, "{}");
        machine_hook_drain_done(e->mh, "node-2");
        test_api_run(e->api, SEC, SEC / 10);
        assert_int_equal(fake_transport_count(e->api->ft, "PATCH", MACHINE_PATH), 1);
}

/* A drain that cannot finish (a PDB) keeps the hook and names why on the Machine. */
static void test_blocked_keeps_hook(void **state) {
        struct env *e = *state;
        _cleanup_free_ char *ev = NULL;

        set_node(e, "\"drainer.io/request\":\"drain\",\"drainer.io/state\":\"evict-claim-holders\","
                    "\"drainer.io/message\":\"eviction of demo/holder blocked by PodDisruptionBudget "
                    "demo/holder-pdb\"");
        start(e, machine(true, HOOK, "node-2", 10));
        assert_int_equal(e->patches, 0); /* already asked */
        machine_hook_drain_blocked(e->mh, "node-2",
                                   "timed out after 600 s: PodDisruptionBudget demo/holder-pdb");
        test_api_run(e->api, 60 * SEC, SEC);
        ev = events(e);
        test_assert_contains(ev, "blocked by PodDisruptionBudget demo/holder-pdb");
        test_assert_contains(ev, "\"reason\":\"DrainerHookBlocked\"");
        test_assert_contains(ev, "\"type\":\"Warning\"");
        test_assert_contains(ev, "the pre-drain hook stays");
        assert_int_equal(fake_transport_count(e->api->ft, "PATCH", NULL), 0);
        assert_int_equal(machine_hook_held(e->mh), 1);
}

/* No status.nodeRef: nothing asked, nothing removed, said so once. */
static void test_no_node_ref(void **state) {
        struct env *e = *state;
        _cleanup_free_ char *ev = NULL;

        set_node(e, "");
        start(e, machine(true, HOOK, NULL, 10));
        push_machine(e, machine(true, HOOK ",\"x\":\"y\"", NULL, 11));
        assert_int_equal(e->patches, 0);
        assert_int_equal(fake_transport_count(e->api->ft, "PATCH", NULL), 0);
        ev = events(e);
        test_assert_contains(ev, "DrainerHookNoNode");
        assert_null(strstr(strstr(ev, "DrainerHookNoNode") + 1, "DrainerHookNoNode")); /* once */
        test_assert_contains(e->notes, "has no status.nodeRef");
}

/* Not deleting, or another owner's hook only: not touched. */
static void test_not_ours(void **state) {
        struct env *e = *state;

        set_node(e, "\"drainer.io/request\":\"drain\",\"drainer.io/state\":\"drained\"");
        start(e, machine(false, HOOK, "node-2", 10));
        push_machine(e, machine(true, "\"pre-drain.delete.hook.machine.cluster.x-k8s.io/other\":\"\"",
                                "node-2", 11));
        assert_int_equal(e->patches, 0);
        assert_int_equal(fake_transport_count(e->api->ft, "PATCH", NULL), 0);
        assert_int_equal(fake_transport_count(e->api->ft, "POST", NULL), 0);
        assert_int_equal(machine_hook_held(e->mh), 0);
}

/* The node is unknown: the hook stays, said so; a malformed Machine is skipped. */
static void test_unknown_node_and_bad_machine(void **state) {
        struct env *e = *state;
        _cleanup_free_ char *ev = NULL;

        start(e, machine(true, HOOK, "node-2", 10));
        assert_int_equal(e->patches, 0);
        test_assert_contains(e->notes,
                             "node node-2 (status.nodeRef) is not found: the pre-drain hook stays");
        /* nodeRef of the wrong type, annotations a list, no namespace: no crash, nothing done */
        push_machine(
                e,
                test_asprintf("{\"metadata\":{\"name\":\"m-2\",\"namespace\":\"capi\",\"uid\":\"uid-m2\","
                              "\"resourceVersion\":\"12\",\"deletionTimestamp\":\"x\",\"annotations\":[1]},"
                              "\"status\":{\"nodeRef\":\"node-2\"}}"));
        ev = events(e);
        test_assert_contains(ev, "DrainerHookBlocked");
        assert_int_equal(fake_transport_count(e->api->ft, "PATCH", NULL), 0);
}

/* Without Cluster API's v1beta2 Machines the owner fails clearly, once. */
static void test_not_served(void **state) {
        struct env *e = *state;

        fake_transport_expect_json(
                e->api->ft, "GET", MACHINES, 404,
                "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"NotFound\",\"code\":404}");
        assert_int_equal(machine_hook_new(e->api->client, e->api->ts, NULL, &ops, e, &handlers, e, &e->mh),
                         0);
        assert_int_equal(machine_hook_start(e->mh), 0);
        test_api_run(e->api, SEC, SEC / 10);
        assert_int_equal(e->failed, 1);
        assert_int_equal(e->failed_error, -EPROTONOSUPPORT);
        test_assert_contains(e->notes, "cluster.x-k8s.io/v1beta2");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_drain_then_remove, setup, teardown),
                cmocka_unit_test_setup_teardown(test_forged_drained_is_checked, setup, teardown),
                cmocka_unit_test_setup_teardown(test_blocked_keeps_hook, setup, teardown),
                cmocka_unit_test_setup_teardown(test_no_node_ref, setup, teardown),
                cmocka_unit_test_setup_teardown(test_not_ours, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unknown_node_and_bad_machine, setup, teardown),
                cmocka_unit_test_setup_teardown(test_not_served, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
