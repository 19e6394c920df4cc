/* DeviceTaintRule names and the check of a rule's content (taintrule.h): names of two
 * nodes never collide (node-1 and node-1-b, nodes whose names hold dots and digits),
 * the old names are recognised only for their own node and driver, and a rule is
 * drainer's only when everything taint_rule_body() writes is there and nothing else. */
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

#include "drainer/base/macro.h"
#include "drainer/dra/taintrule.h"

#define DRIVER "gpu.example.com"

static void test_names_never_collide(void **state) {
        /* node names that are prefixes of one another, with '-', '.' and digits in them,
         * and names whose old-style names were the same */
        static const char *const nodes[] = { "node-1",  "node-1-b", "node-1.b", "1-node-1", "6-node-1",
                                             "node-10", "node",     "n",        "a.b-c.d",  "a.b",
                                             "b-c.d-0", "a",        "a-b",      "a-b-0" };
        static const char *const drivers[] = { DRIVER, "b-" DRIVER, "0-" DRIVER, "x" };
        char *names[ELEMENTSOF(nodes) * ELEMENTSOF(drivers) * 2];
        size_t n = 0;

        (void)state;
        for (size_t i = 0; i < ELEMENTSOF(nodes); i++)
                for (size_t d = 0; d < ELEMENTSOF(drivers); d++)
                        for (size_t k = 0; k < 2; k++) {
                                assert_int_equal(taint_rule_name(nodes[i], drivers[d], k * 10, &names[n]),
                                                 0);
                                /* each name is its own node's and driver's, no other's */
                                for (size_t j = 0; j < ELEMENTSOF(nodes); j++)
                                        for (size_t e = 0; e < ELEMENTSOF(drivers); e++)
                                                assert_int_equal(
                                                        taint_rule_naming(names[n], nodes[j], drivers[e]) ==
                                                                TAINT_RULE_NAME_CURRENT,
                                                        i == j && d == e);
                                n++;
                        }
        for (size_t i = 0; i < n; i++)
                for (size_t j = i + 1; j < n; j++)
                        if (streq(names[i], names[j]))
                                fail_msg("%s twice", names[i]);
        assert_string_equal(names[0], "drainer-6-node-1-" DRIVER "-0");
        for (size_t i = 0; i < n; i++)
                free(names[i]);
}

static void test_names(void **state) {
        char *s = NULL, big[250];

        (void)state;
        assert_int_equal(taint_rule_name("node-1-b", DRIVER, 3, &s), 0);
        assert_string_equal(s, "drainer-8-node-1-b-" DRIVER "-3");
        free(s);
        /* node-1's prefix in the old scheme, "drainer-node-1-", is node-1-b's too: the
         * new one is not */
        assert_int_equal(taint_rule_naming("drainer-8-node-1-b-" DRIVER "-3", "node-1", DRIVER),
                         TAINT_RULE_NAME_FOREIGN);
        assert_int_equal(taint_rule_naming("drainer-6-node-1-" DRIVER "-12", "node-1", DRIVER),
                         TAINT_RULE_NAME_CURRENT);
        assert_int_equal(taint_rule_naming("drainer-node-1-" DRIVER "-0", "node-1", DRIVER),
                         TAINT_RULE_NAME_LEGACY);
        assert_int_equal(taint_rule_naming("drainer-node-1-b-" DRIVER "-0", "node-1", DRIVER),
                         TAINT_RULE_NAME_FOREIGN);
        assert_int_equal(taint_rule_naming("drainer-node-1-b-" DRIVER "-0", "node-1", "b-" DRIVER),
                         TAINT_RULE_NAME_LEGACY); /* a name alone says little: the content decides */
        assert_int_equal(taint_rule_naming("drainer-6-node-1-" DRIVER "-", "node-1", DRIVER),
                         TAINT_RULE_NAME_FOREIGN);
        assert_int_equal(taint_rule_naming("drainer-6-node-1-" DRIVER "-0x", "node-1", DRIVER),
                         TAINT_RULE_NAME_FOREIGN);
        assert_int_equal(taint_rule_naming("drainer-6-node-1-" DRIVER "-0", "node-1", "example.com"),
                         TAINT_RULE_NAME_FOREIGN);
        assert_int_equal(taint_rule_naming("admin-quarantine-bad-gpu", "node-1", DRIVER),
                         TAINT_RULE_NAME_FOREIGN);
        assert_int_equal(taint_rule_naming(NULL, "node-1", DRIVER), TAINT_RULE_NAME_FOREIGN);
        /* longer than a DNS subdomain: refused */
        memset(big, 'a', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        assert_int_equal(taint_rule_name(big, DRIVER, 0, &s), -EINVAL);
}

/* A rule as the API server returns what taint_rule_body() wrote, then changed by edit
 * (a JSON merge of one member path: "a.b.c" = value JSON, "null" removes). */
static cJSON *rule(const char *name) {
        struct taint_rule_api api = { .served = true,
                                      .prefix = "/apis/resource.k8s.io/v1",
                                      .api_version = "resource.k8s.io/v1" };
        char *body = NULL;
        cJSON *j, *meta;

        assert_int_equal(taint_rule_body(&api, name, "node-1", DRIVER, "node-1", &body), 0);
        j = cJSON_Parse(body);
        free(body);
        assert_non_null(j);
        meta = cJSON_GetObjectItemCaseSensitive(j, "metadata");
        cJSON_AddStringToObject(meta, "uid", "0b0c0d0e-1111-4222-8333-444455556666");
        cJSON_AddStringToObject(meta, "resourceVersion", "812");
        cJSON_AddStringToObject(
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "spec"), "taint"),
                "timeAdded", "2026-12-05T04:00:00Z");
        cJSON_AddItemToObject(j, "status", cJSON_Parse("{\"conditions\":[]}"));
        return j;
}

static void edit(cJSON *j, const char *path, const char *value) {
        char buf[256], *p = buf, *dot;
        cJSON *o = j;

        snprintf(buf, sizeof(buf), "%s", path);
        while ((dot = strchr(p, '|'))) { /* '|' separates the levels: keys hold dots */
                cJSON *next;

                *dot = '\0';
                next = cJSON_GetObjectItemCaseSensitive(o, p);
                if (!next)
                        next = cJSON_AddObjectToObject(o, p);
                o = next;
                p = dot + 1;
        }
        cJSON_DeleteItemFromObjectCaseSensitive(o, p);
        if (value)
                cJSON_AddItemToObject(o, p, cJSON_Parse(value));
}

static void test_check(void **state) {
        static const char *const pools[] = { "node-1", "node-1-nics" };
        static const struct {
                const char *path, *value, *why;
        } bad[] = {
                { "metadata|annotations|drainer.io/node", "\"node-2\"",
                  "annotation drainer.io/node is node-2" },
                { "metadata|annotations|drainer.io/node", NULL, "annotation drainer.io/node is n/a" },
                { "metadata|labels|app.kubernetes.io/managed-by", "\"admin\"", "managed-by is admin" },
                { "metadata|uid", NULL, "no uid" },
                { "metadata|name", "\"drainer-6-node-1-" DRIVER "-1\"", "another object" },
                { "spec|deviceSelector|pool", "\"node-2\"", "pool node-2, not a pool" },
                { "spec|deviceSelector|pool", NULL, "pool n/a" },
                { "spec|deviceSelector|driver", "\"nic.example.com\"", "driver nic.example.com" },
                { "spec|deviceSelector|device", "\"gpu-0\"", "deviceSelector has device" },
                { "spec|deviceSelector|selectors", "[]", "deviceSelector has selectors" },
                { "spec|taint|effect", "\"NoExecute\"", "taint is not" },
                { "spec|taint|key", "\"example.com/bad\"", "taint is not" },
                { "spec|taint|value", "\"x\"", "taint is not" },
                { "spec|other", "{}", "spec has other" },
                { "spec|deviceSelector", NULL, "no spec.deviceSelector" },
        };
        char why[256];
        cJSON *j;

        (void)state;
        j = rule("drainer-6-node-1-" DRIVER "-0");
        assert_int_equal(taint_rule_check(j, "drainer-6-node-1-" DRIVER "-0", "node-1", DRIVER, pools, 2,
                                          why, sizeof(why)),
                         0);
        /* a null member is no member; an empty value is no value */
        edit(j, "spec|deviceSelector|device", "null");
        edit(j, "spec|taint|value", "\"\"");
        assert_int_equal(taint_rule_check(j, "drainer-6-node-1-" DRIVER "-0", "node-1", DRIVER, pools, 2,
                                          why, sizeof(why)),
                         0);
        /* the pool must be one of the node's */
        assert_int_equal(taint_rule_check(j, "drainer-6-node-1-" DRIVER "-0", "node-1", DRIVER, pools + 1, 1,
                                          why, sizeof(why)),
                         -EPERM);
        assert_int_equal(taint_rule_check(j, "drainer-6-node-1-" DRIVER "-0", "node-1", DRIVER, NULL, 0, why,
                                          sizeof(why)),
                         -EPERM);
        /* node-1-b's rule by the same content is not node-1's: name and annotation */
        assert_int_equal(taint_rule_check(j, "drainer-6-node-1-" DRIVER "-0", "node-1-b", DRIVER, pools, 2,
                                          why, sizeof(why)),
                         -EPERM);
        assert_non_null(strstr(why, "name is not drainer's for node node-1-b"));
        cJSON_Delete(j);
        /* drainer's rule under the old name: drainer's */
        j = rule("drainer-node-1-" DRIVER "-0");
        assert_int_equal(taint_rule_check(j, "drainer-node-1-" DRIVER "-0", "node-1", DRIVER, pools, 2, why,
                                          sizeof(why)),
                         0);
        cJSON_Delete(j);
        /* an admin's rule of another name */
        j = rule("admin-quarantine-bad-gpu");
        assert_int_equal(taint_rule_check(j, "admin-quarantine-bad-gpu", "node-1", DRIVER, pools, 2, why,
                                          sizeof(why)),
                         -EPERM);
        assert_non_null(strstr(why, "name is not drainer's"));
        cJSON_Delete(j);

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                j = rule("drainer-6-node-1-" DRIVER "-0");
                edit(j, bad[i].path, bad[i].value);
                why[0] = '\0';
                assert_int_equal(taint_rule_check(j, "drainer-6-node-1-" DRIVER "-0", "node-1", DRIVER,
                                                  pools, 2, why, sizeof(why)),
                                 -EPERM);
                if (!strstr(why, bad[i].why))
                        fail_msg("%s: %s, not %s", bad[i].path, why, bad[i].why);
                cJSON_Delete(j);
        }
        /* not an object at all */
        j = cJSON_Parse("[]");
        assert_int_equal(taint_rule_check(j, "x", "node-1", DRIVER, pools, 2, why, sizeof(why)), -EPERM);
        cJSON_Delete(j);
        assert_int_equal(taint_rule_check(NULL, "x", "node-1", DRIVER, pools, 2, why, sizeof(why)), -EPERM);
}

static int parse(const char *json, struct taint_rule_preview *pv) {
        cJSON *j = cJSON_Parse(json);
        int r;

        assert_non_null(j);
        r = taint_rule_preview_parse(j, pv);
        cJSON_Delete(j);
        return r;
}

#define RULE_STATUS(gen, cond) \
        "{\"metadata\":{\"name\":\"r\",\"generation\":" gen "},\"status\":{\"conditions\":[" cond "]}}"
#define COND(og, reason, msg)                                                              \
        "{\"type\":\"EvictionInProgress\",\"status\":\"False\",\"observedGeneration\":" og \
        ",\"reason\":\"" reason "\",\"message\":\"" msg "\"}"
#define TAIL                                                                                     \
        "if the effect was NoExecute. This information will not be updated again. Recreate the " \
        "DeviceTaintRule to trigger an update."

/* The controller's NoEffect condition (pkg/controller/devicetainteviction, 1.37) read
 * whole; an answer for an older generation, none yet, or a text that changed is no
 * number. */
static void test_preview_parse(void **state) {
        struct taint_rule_preview pv = {};

        assert_int_equal(
                parse(RULE_STATUS("1", COND("1", "NoEffect",
                                            "1 published device selected. 1 allocated device selected. 1 "
                                            "pod would be evicted in 1 namespace " TAIL)),
                      &pv),
                0);
        assert_int_equal(pv.published, 1);
        assert_int_equal(pv.allocated, 1);
        assert_int_equal(pv.pods, 1);
        assert_int_equal(pv.namespaces, 1);
        assert_int_equal(
                parse(RULE_STATUS("3", COND("3", "NoEffect",
                                            "2 published devices selected. 0 allocated devices selected. "
                                            "12 pods would be evicted in 3 different namespaces " TAIL
                                            " 4 pods evicted since starting the controller.")),
                      &pv),
                0);
        assert_int_equal(pv.published, 2);
        assert_int_equal(pv.allocated, 0);
        assert_int_equal(pv.pods, 12);
        assert_int_equal(pv.namespaces, 3);
        /* nothing yet; an older generation's answer */
        assert_int_equal(parse("{\"metadata\":{\"generation\":1}}", &pv), -EAGAIN);
        assert_int_equal(parse(RULE_STATUS("1", ""), &pv), -EAGAIN);
        assert_int_equal(parse(RULE_STATUS("2", COND("1", "NoEffect",
                                                     "1 published device selected. 1 allocated "
                                                     "device selected. 1 pod would be evicted "
                                                     "in 1 namespace " TAIL)),
                               &pv),
                         -EAGAIN);
        /* another effect's condition, a text that changed, numbers cut or too long */
        assert_int_equal(parse(RULE_STATUS("1", COND("1", "OtherEffect",
                                                     "Eviction only happens for the "
                                                     "NoExecute effect.")),
                               &pv),
                         -EBADMSG);
        assert_int_equal(parse(RULE_STATUS("1", COND("1", "NoEffect",
                                                     "1 published device selected. 1 allocated "
                                                     "device selected. 2 pod would be evicted "
                                                     "in 1 namespace " TAIL)),
                               &pv),
                         -EBADMSG);
        assert_int_equal(parse(RULE_STATUS("1", COND("1", "NoEffect",
                                                     "1 published device selected. 1 allocated "
                                                     "device selected.")),
                               &pv),
                         -EBADMSG);
        assert_int_equal(
                parse(RULE_STATUS("1", COND("1", "NoEffect",
                                            "99999999999 published devices selected. 1 allocated device "
                                            "selected. 1 pod would be evicted in 1 namespace " TAIL)),
                      &pv),
                -EBADMSG);
        assert_int_equal(parse("{\"metadata\":{},\"status\":{}}", &pv), -EBADMSG);
        assert_int_equal(parse("[]", &pv), -EBADMSG);
}

/* The preview rule: effect None, a 20-digit index (never a drain's rule), drainer's name
 * for (node, driver); taint_rule_preview_check takes it back, a drain's rule not. */
static void test_preview_rule(void **state) {
        static const struct taint_rule_api api = { .served = true,
                                                   .prefix = "/apis/resource.k8s.io/v1",
                                                   .api_version = "resource.k8s.io/v1" };
        _cleanup_free_ char *name = NULL, *dev = NULL, *body = NULL, *dbody = NULL;
        cJSON *j;
        char why[256];

        assert_int_equal(taint_rule_preview_name("node-1", "gpu.example.com", "node-1", "gpu-0", &name), 0);
        assert_int_equal(taint_rule_device_name("node-1", "gpu.example.com", "node-1", "gpu-0", &dev), 0);
        assert_string_not_equal(name, dev);
        assert_int_equal(strlen(name), strlen(dev) + 1);
        assert_int_equal(taint_rule_naming(name, "node-1", "gpu.example.com"), TAINT_RULE_NAME_CURRENT);
        assert_int_equal(
                taint_rule_preview_body(&api, name, "node-1", "gpu.example.com", "node-1", "gpu-0", &body),
                0);
        j = cJSON_Parse(body);
        assert_non_null(j);
        cJSON_AddStringToObject(cJSON_GetObjectItem(j, "metadata"), "uid", "u-1");
        assert_string_equal(
                cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "spec"), "taint"), "effect")
                        ->valuestring,
                "None");
        assert_int_equal(taint_rule_preview_check(j, name, "node-1", "gpu.example.com", "node-1", "gpu-0",
                                                  why, sizeof(why)),
                         0);
        assert_int_equal(taint_rule_device_check(j, name, "node-1", "gpu.example.com", "node-1", "gpu-0",
                                                 why, sizeof(why)),
                         -EPERM);
        cJSON_Delete(j);
        /* a drain's rule (NoSchedule) under the preview's name is not the preview */
        assert_int_equal(
                taint_rule_device_body(&api, name, "node-1", "gpu.example.com", "node-1", "gpu-0", &dbody),
                0);
        j = cJSON_Parse(dbody);
        cJSON_AddStringToObject(cJSON_GetObjectItem(j, "metadata"), "uid", "u-1");
        assert_int_equal(taint_rule_preview_check(j, name, "node-1", "gpu.example.com", "node-1", "gpu-0",
                                                  why, sizeof(why)),
                         -EPERM);
        cJSON_Delete(j);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_names_never_collide),
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_check),
                cmocka_unit_test(test_preview_parse),
                cmocka_unit_test(test_preview_rule),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
