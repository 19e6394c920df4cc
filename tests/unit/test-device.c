/* Device-scoped drains (device.h, and the device rules of taintrule.h): --device
 * parsing, the scope of a set (order-free, never a driver's), which claims hold a
 * device, the devices a node publishes, the drains a device drain must not overlap, the
 * state round trip on the Node (record, scope view, finish), and the rule's name, body
 * and check. */
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
#include "drainer/base/macro.h"
#include "drainer/dra/taintrule.h"
#include "drainer/drain/device.h"
#include "drainer/drain/state.h"
#include "drainer/kube/objects.h"

#define DRV "gpu.example.com"

/* Inline JSON written with ' for ". */
static cJSON *sq(const char *text) {
        char *s = strdup(text);
        cJSON *j;

        assert_non_null(s);
        for (char *p = s; *p; p++)
                if (*p == '\'')
                        *p = '"';
        j = cJSON_Parse(s);
        if (!j)
                fail_msg("bad inline JSON: %s", s);
        free(s);
        return j;
}

static struct node_rec *node_with(const char *key, ...) {
        cJSON *j = cJSON_CreateObject(), *meta, *ann;
        struct node_rec *n = NULL;
        va_list ap;

        meta = cJSON_AddObjectToObject(j, "metadata");
        cJSON_AddStringToObject(meta, "name", "node-1");
        cJSON_AddStringToObject(meta, "resourceVersion", "42");
        ann = cJSON_AddObjectToObject(meta, "annotations");
        va_start(ap, key);
        for (const char *k = key; k; k = va_arg(ap, const char *))
                cJSON_AddStringToObject(ann, k, va_arg(ap, const char *));
        va_end(ap);
        assert_int_equal(node_rec_from_json(j, &n), 0);
        cJSON_Delete(j);
        return n;
}

static void test_parse(void **state) {
        static const char *const bad[] = {
                "foo",
                "gpu.example.com/gpu-0",
                "/node-1/gpu-0",
                "Gpu.example.com/node-1/gpu-0",
                "gpu.example.com//gpu-0",
                "gpu.example.com/node-1/",
                "gpu.example.com/node-1/GPU_0",
                "gpu.example.com/node-1//gpu-0",
        };
        struct drain_device d;
        char buf[256], msg[512];

        (void)state;
        assert_int_equal(drain_device_parse(DRV "/node-1/gpu-0", buf, &d, msg, sizeof(msg)), 0);
        assert_string_equal(d.driver, DRV);
        assert_string_equal(d.pool, "node-1");
        assert_string_equal(d.device, "gpu-0");
        /* a pool name may hold '/' */
        assert_int_equal(drain_device_parse(DRV "/rack-1/node-1/gpu-0", buf, &d, msg, sizeof(msg)), 0);
        assert_string_equal(d.pool, "rack-1/node-1");
        assert_string_equal(d.device, "gpu-0");
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                msg[0] = 0;
                if (drain_device_parse(bad[i], buf, &d, msg, sizeof(msg)) != -EINVAL)
                        fail_msg("%s parsed", bad[i]);
                assert_non_null(strstr(msg, "--device"));
        }
}

/* The scope: the same for the same set in any order (a rerun resumes), another for
 * another set, a valid annotation key part, never a DRA driver name. */
static void test_scope(void **state) {
        const struct drain_device a[] = { { DRV, "node-1", "gpu-0" }, { DRV, "node-1", "gpu-1" } };
        const struct drain_device b[] = { { DRV, "node-1", "gpu-1" }, { DRV, "node-1", "gpu-0" } };
        const struct drain_device c[] = { { DRV, "node-1", "gpu-0" } };
        const struct drain_device d[] = { { DRV, "node-1", "gpu-0" }, { DRV, "node-1", "gpu-0" } };
        char sa[DRAIN_DEVICE_SCOPE_SIZE], sb[DRAIN_DEVICE_SCOPE_SIZE], sc[DRAIN_DEVICE_SCOPE_SIZE],
                sd[DRAIN_DEVICE_SCOPE_SIZE], key[128], msg[256];

        (void)state;
        drain_devices_scope(a, 2, sa);
        drain_devices_scope(b, 2, sb);
        drain_devices_scope(c, 1, sc);
        drain_devices_scope(d, 2, sd);
        assert_string_equal(sa, sb);
        assert_string_not_equal(sa, sc);
        assert_string_equal(sc, sd);
        assert_int_equal(strlen(sa), strlen("device.D") + 16);
        assert_true(drain_scope_is_device(sa));
        assert_false(drain_scope_is_device(DRV));
        assert_false(drain_scope_is_device(NULL));
        /* upper case: not a driver name, so never a driver's scope */
        assert_int_equal(drain_scope_check(sa, msg, sizeof(msg)), -EINVAL);
        /* the longest key drainer writes stays a valid name part (<= 63) */
        snprintf(key, sizeof(key), "was-unschedulable.%s", sa);
        assert_true(strlen(key) <= 63);
}

static void test_held(void **state) {
        cJSON *j =
                sq("{'metadata':{'name':'c','namespace':'demo','uid':'u'},'status':{'allocation':{'devices':"
                   "{'results':[{'request':'r','driver':'gpu.example.com','pool':'node-1','device':'gpu-1'},"
                   "{'request':'r','driver':'nic.example.com','pool':'node-1','device':'gpu-0'}]}}}}");
        struct claim_rec *c = NULL;
        const struct drain_device gpu1[] = { { DRV, "node-1", "gpu-1" } };
        const struct drain_device gpu0[] = { { DRV, "node-1", "gpu-0" } };
        const struct drain_device other_pool[] = { { DRV, "node-2", "gpu-1" } };
        const struct drain_device nic0[] = { { "nic.example.com", "node-1", "gpu-0" } };

        (void)state;
        assert_int_equal(claim_rec_from_json(j, &c), 0);
        assert_true(drain_devices_held(c, gpu1, 1));
        assert_false(drain_devices_held(c, gpu0, 1)); /* the same name of another driver */
        assert_false(drain_devices_held(c, other_pool, 1));
        assert_true(drain_devices_held(c, nic0, 1));
        claim_rec_free(c);
        cJSON_Delete(j);
}

static void test_on_node(void **state) {
        cJSON *j1 =
                sq("{'metadata':{'name':'s1'},'spec':{'driver':'gpu.example.com','nodeName':'node-1','pool':"
                   "{'name':'node-1','generation':1,'resourceSliceCount':1},'devices':[{'name':'gpu-0'},"
                   "{'name':'gpu-1'}]}}");
        cJSON *j2 =
                sq("{'metadata':{'name':'s2'},'spec':{'driver':'gpu.example.com','nodeName':'node-2','pool':"
                   "{'name':'node-2','generation':1,'resourceSliceCount':1},'devices':[{'name':'gpu-7'}]}}");
        struct slice_rec *s[2] = {};
        const struct drain_device ok[] = { { DRV, "node-1", "gpu-1" }, { DRV, "node-1", "gpu-0" } };
        const struct drain_device unknown[] = { { DRV, "node-1", "gpu-7" } };
        const struct drain_device other_node[] = { { DRV, "node-2", "gpu-7" } };
        const struct drain_device other_driver[] = { { "nic.example.com", "node-1", "gpu-0" } };
        char msg[768];

        (void)state;
        assert_int_equal(slice_rec_from_json(j1, &s[0]), 0);
        assert_int_equal(slice_rec_from_json(j2, &s[1]), 0);
        assert_int_equal(s[0]->n_devices, 2);
        assert_string_equal(s[0]->devices[1], "gpu-1");
        assert_int_equal(drain_devices_on_node(ok, 2, (const struct slice_rec *const *)s, 2, "node-1", msg,
                                               sizeof(msg)),
                         0);
        assert_int_equal(drain_devices_on_node(unknown, 1, (const struct slice_rec *const *)s, 2, "node-1",
                                               msg, sizeof(msg)),
                         -ENXIO);
        assert_non_null(strstr(msg, "list no device of that name"));
        /* node-2's device is not node-1's */
        assert_int_equal(drain_devices_on_node(other_node, 1, (const struct slice_rec *const *)s, 2,
                                               "node-1", msg, sizeof(msg)),
                         -ENXIO);
        assert_non_null(strstr(msg, "no pool of that name"));
        assert_int_equal(drain_devices_on_node(other_driver, 1, (const struct slice_rec *const *)s, 2,
                                               "node-1", msg, sizeof(msg)),
                         -ENXIO);
        assert_non_null(strstr(msg, "no ResourceSlice of that driver"));
        slice_rec_free(s[0]);
        slice_rec_free(s[1]);
        cJSON_Delete(j1);
        cJSON_Delete(j2);
}

/* Overlaps: the node's own drain, a drain of the device's driver, another device drain
 * with a device in common (or one whose record names none); not another driver's, not a
 * device drain of other devices, not this drain itself (a rerun). */
static void test_conflict(void **state) {
        const struct drain_device mine[] = { { DRV, "node-1", "gpu-0" } };
        char scope[DRAIN_DEVICE_SCOPE_SIZE], *o;
        struct node_rec *n;

        (void)state;
        drain_devices_scope(mine, 1, scope);

        n = node_with("drainer.io/state", "drained", NULL);
        assert_string_equal(o = drain_devices_conflict(n, scope, mine, 1), "node");
        free(o);
        node_rec_free(n);

        n = node_with("drainer.io/state." DRV, "drained", "drainer.io/state.nic.example.com", "drained",
                      NULL);
        assert_string_equal(o = drain_devices_conflict(n, scope, mine, 1), DRV);
        free(o);
        node_rec_free(n);
        n = node_with("drainer.io/state.nic.example.com", "drained", NULL);
        assert_null(drain_devices_conflict(n, scope, mine, 1));
        node_rec_free(n);

        n = node_with("drainer.io/state.device.D0000000000000001", "cordon",
                      "drainer.io/devices.device.D0000000000000001",
                      DRV "/node-1/gpu-3," DRV "/node-1/gpu-0", NULL);
        assert_string_equal(o = drain_devices_conflict(n, scope, mine, 1),
                            DRV "/node-1/gpu-3," DRV "/node-1/gpu-0");
        free(o);
        node_rec_free(n);
        n = node_with("drainer.io/state.device.D0000000000000001", "cordon",
                      "drainer.io/devices.device.D0000000000000001", DRV "/node-1/gpu-00", NULL);
        assert_null(drain_devices_conflict(n, scope, mine, 1));
        node_rec_free(n);
        n = node_with("drainer.io/state.device.D0000000000000001", "cordon", NULL);
        assert_non_null(o = drain_devices_conflict(n, scope, mine, 1));
        free(o);
        node_rec_free(n);

        /* this drain's own record: a rerun resumes it */
        {
                char k1[128], k2[128];

                snprintf(k1, sizeof(k1), "drainer.io/state.%s", scope);
                snprintf(k2, sizeof(k2), "drainer.io/devices.%s", scope);
                n = node_with(k1, "evict-claim-holders", k2, DRV "/node-1/gpu-0", "drainer.io/state-since.x",
                              "2026-01-01T00:00:00Z", NULL);
                assert_null(drain_devices_conflict(n, scope, mine, 1));
                /* and a driver drain of the device's driver sees it */
                assert_string_equal(o = drain_devices_of_driver(n, DRV), DRV "/node-1/gpu-0");
                free(o);
                assert_null(drain_devices_of_driver(n, "gpu.example"));
                assert_null(drain_devices_of_driver(n, "nic.example.com"));
                /* and a node drain sees it as a scope */
                assert_string_equal(drain_scope_conflict(n, NULL), scope);
                node_rec_free(n);
        }
}

struct seen {
        char devices[256], phase[64];
        size_t n;
};

static void on_device_drain(const char *devices, const char *phase, const char *scope, void *userdata) {
        struct seen *s = userdata;

        (void)scope;
        snprintf(s->devices, sizeof(s->devices), "%s", strna(devices));
        snprintf(s->phase, sizeof(s->phase), "%s", strna(phase));
        s->n++;
}

static void on_driver_drain(const char *driver, size_t len, const char *phase, void *userdata) {
        (void)driver, (void)len, (void)phase;
        (*(size_t *)userdata)++;
}

/* The state round trip: the isolate patch built from the scope view, with the devices
 * added, renamed to the scope's keys; the Node it makes reads back as this drain's state
 * (phase, rules, started-at) and as a device drain for status (not a driver's); the
 * finish patch removes every key of the scope, the devices too, and nothing else. */
static void test_state_round_trip(void **state) {
        const struct drain_device devs[] = { { DRV, "node-1", "gpu-0" }, { DRV, "node-1", "gpu-2" } };
        char scope[DRAIN_DEVICE_SCOPE_SIZE], *body = NULL, *list;
        struct node_rec *n = node_with("drainer.io/message", "node's own", NULL), *after = NULL;
        struct drain_scope_view v;
        _cleanup_(drain_state_done) struct drain_state st = {};
        cJSON *patch, *node_json, *ann, *a;
        struct seen seen = {};
        size_t drivers = 0, keys = 0;

        (void)state;
        drain_devices_scope(devs, 2, scope);
        assert_int_equal(drain_scope_view_init(&v, n, scope), 0);
        assert_int_equal(v.node.n_annotations, 0);
        assert_int_equal(drain_patch_isolate(&v.node, 1764950400000000, "rule-a,rule-b", "m", &body), 0);
        list = drain_devices_format(devs, 2);
        assert_string_equal(list, DRV "/node-1/gpu-0," DRV "/node-1/gpu-2");
        assert_int_equal(drain_devices_patch_add(&body, list), 0);
        assert_int_equal(drain_scope_patch(scope, &body), 0);
        drain_scope_view_done(&v);

        /* apply the merge patch's annotations to the node */
        patch = cJSON_Parse(body);
        assert_non_null(patch);
        node_json =
                sq("{'metadata':{'name':'node-1','resourceVersion':'43','annotations':{'drainer.io/message':"
                   "'node\\u0027s own'}}}");
        ann = (cJSON *)json_path(node_json, "metadata.annotations");
        cJSON_ArrayForEach(a, json_path(patch, "metadata.annotations")) {
                assert_non_null(strstr(a->string, scope)); /* only the scope's keys */
                if (cJSON_IsString(a))
                        cJSON_AddStringToObject(ann, a->string, a->valuestring);
                keys++;
        }
        assert_true(keys >= 5);
        assert_int_equal(node_rec_from_json(node_json, &after), 0);

        assert_int_equal(drain_scope_view_init(&v, after, scope), 0);
        assert_int_equal(drain_state_parse(&v.node, &st, NULL), 0);
        assert_true(st.has_phase);
        assert_int_equal(st.phase, DRAIN_PHASE_CORDON);
        assert_string_equal(st.taint_rules, "rule-a,rule-b");
        assert_false(st.has_was_unschedulable); /* nothing was cordoned */
        assert_true(st.started_at_usec > 0);
        assert_null(st.message == NULL ? NULL : strstr(st.message, "node's own"));

        drain_devices_foreach(after, on_device_drain, &seen);
        assert_int_equal(seen.n, 1);
        assert_string_equal(seen.devices, list);
        assert_string_equal(seen.phase, "cordon");
        drain_scope_foreach(after, on_driver_drain, &drivers);
        assert_int_equal(drivers, 0);

        /* the finish: every key of the scope goes (null), the node's own stays */
        free(body);
        body = NULL;
        assert_int_equal(drain_patch_finish(&v.node, false, false, &body), 0);
        assert_int_equal(drain_scope_patch(scope, &body), 0);
        cJSON_Delete(patch);
        patch = cJSON_Parse(body);
        {
                char k[128];

                snprintf(k, sizeof(k), "drainer.io/devices.%s", scope);
                assert_true(cJSON_IsNull(
                        cJSON_GetObjectItemCaseSensitive(json_path(patch, "metadata.annotations"), k)));
                snprintf(k, sizeof(k), "drainer.io/state.%s", scope);
                assert_true(cJSON_IsNull(
                        cJSON_GetObjectItemCaseSensitive(json_path(patch, "metadata.annotations"), k)));
        }
        assert_null(cJSON_GetObjectItemCaseSensitive(json_path(patch, "metadata.annotations"),
                                                     "drainer.io/message"));
        assert_null(json_path(patch, "spec"));

        drain_scope_view_done(&v);
        cJSON_Delete(patch);
        cJSON_Delete(node_json);
        free(body);
        free(list);
        node_rec_free(n);
        node_rec_free(after);
}

/* The rule of one device: its name follows drainer-LEN-NODE-DRIVER-I with 19 digits (the
 * admission policy's shape; never a driver drain's pool index), its body selects exactly
 * the device, and the check accepts exactly that: not a driver drain's rule of the pool
 * (no device), not another device's, not a NoExecute one. */
static void test_rule(void **state) {
        struct taint_rule_api api = { .served = true,
                                      .prefix = "/apis/resource.k8s.io/v1",
                                      .api_version = "resource.k8s.io/v1" };
        const char *pools[1] = { "node-1" };
        char *name = NULL, *name2 = NULL, *pool_rule = NULL, *body = NULL, why[256];
        const char *digits;
        cJSON *rule, *meta;

        (void)state;
        assert_int_equal(taint_rule_device_name("node-1", DRV, "node-1", "gpu-0", &name), 0);
        assert_int_equal(strncmp(name, "drainer-6-node-1-" DRV "-", strlen("drainer-6-node-1-" DRV "-")), 0);
        digits = name + strlen("drainer-6-node-1-" DRV "-");
        assert_int_equal(strlen(digits), 19);
        assert_int_equal(strspn(digits, "0123456789"), 19);
        assert_int_equal(taint_rule_naming(name, "node-1", DRV), TAINT_RULE_NAME_CURRENT);
        assert_int_equal(taint_rule_naming(name, "node-1-b", DRV), TAINT_RULE_NAME_FOREIGN);
        assert_int_equal(taint_rule_device_name("node-1", DRV, "node-1", "gpu-1", &name2), 0);
        assert_string_not_equal(name, name2);
        assert_int_equal(taint_rule_name("node-1", DRV, 0, &pool_rule), 0);
        assert_string_not_equal(name, pool_rule);

        assert_int_equal(taint_rule_device_body(&api, name, "node-1", DRV, "node-1", "gpu-0", &body), 0);
        rule = cJSON_Parse(body);
        assert_non_null(rule);
        assert_string_equal(json_str(rule, "spec.deviceSelector.device"), "gpu-0");
        assert_string_equal(json_str(rule, "spec.deviceSelector.pool"), "node-1");
        assert_string_equal(json_str(rule, "spec.taint.effect"), "NoSchedule");
        meta = cJSON_GetObjectItemCaseSensitive(rule, "metadata");
        cJSON_AddStringToObject(meta, "uid", "u-1");
        assert_int_equal(
                taint_rule_device_check(rule, name, "node-1", DRV, "node-1", "gpu-0", why, sizeof(why)), 0);
        /* the rule of another device, or under another device's name */
        assert_int_equal(
                taint_rule_device_check(rule, name, "node-1", DRV, "node-1", "gpu-1", why, sizeof(why)),
                -EPERM);
        assert_int_equal(
                taint_rule_device_check(rule, name2, "node-1", DRV, "node-1", "gpu-1", why, sizeof(why)),
                -EPERM);
        /* a driver drain never takes a device rule for its pool rule */
        assert_int_equal(taint_rule_check(rule, name, "node-1", DRV, pools, 1, why, sizeof(why)), -EPERM);
        assert_non_null(strstr(why, "device"));
        /* NoExecute is not drainer's */
        cJSON_ReplaceItemInObjectCaseSensitive((cJSON *)json_path(rule, "spec.taint"), "effect",
                                               cJSON_CreateString("NoExecute"));
        assert_int_equal(
                taint_rule_device_check(rule, name, "node-1", DRV, "node-1", "gpu-0", why, sizeof(why)),
                -EPERM);
        cJSON_Delete(rule);
        free(body);

        /* and a device drain never takes a driver drain's pool rule for its own */
        assert_int_equal(taint_rule_body(&api, pool_rule, "node-1", DRV, "node-1", &body), 0);
        rule = cJSON_Parse(body);
        cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(rule, "metadata"), "uid", "u-2");
        assert_int_equal(
                taint_rule_device_check(rule, pool_rule, "node-1", DRV, "node-1", "gpu-0", why, sizeof(why)),
                -EPERM);
        cJSON_Delete(rule);
        free(body);
        free(name);
        free(name2);
        free(pool_rule);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse),    cmocka_unit_test(test_scope),
                cmocka_unit_test(test_held),     cmocka_unit_test(test_on_node),
                cmocka_unit_test(test_conflict), cmocka_unit_test(test_state_round_trip),
                cmocka_unit_test(test_rule),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
