/* Unit tests for the persisted drain state: parsing the drainer.io/
 * annotations (valid, absent, each malformed value and its message), the
 * driver-stop JSON round trip, and the merge patches, read back with cJSON. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "drainer/base/json.h"
#include "drainer/base/timesrc.h"
#include "drainer/drain/state.h"
#include "drainer/kube/objects.h"
#include "fakes/test-env.h"

/* 2025-09-02T12:00:00Z */
#define NOW_USEC  INT64_C(1756814400000000)
#define NOW_RFC   "2025-09-02T12:00:00Z"
#define LATER_RFC "2025-09-02T12:00:10Z"

static cJSON *load(const char *name) {
        char rel[256];

        snprintf(rel, sizeof rel, "state/%s", name);
        return test_fixture_json(rel);
}

static struct node_rec *node_from_cjson(const cJSON *j) {
        struct node_rec *n = NULL;

        assert_int_equal(node_rec_from_json(j, &n), 0);
        return n;
}

/* Inline JSON written with ' for ", so the tests stay readable. */
static struct node_rec *node_json(const char *sq) {
        char *s = strdup(sq);
        cJSON *j;
        struct node_rec *n;

        assert_non_null(s);
        for (char *p = s; *p; p++)
                if (*p == '\'')
                        *p = '"';
        j = cJSON_Parse(s);
        if (!j)
                fail_msg("bad inline JSON: %s", s);
        n = node_from_cjson(j);
        cJSON_Delete(j);
        free(s);
        return n;
}

static struct node_rec *node_fixture(const char *name) {
        cJSON *j = load(name);
        struct node_rec *n = node_from_cjson(j);

        cJSON_Delete(j);
        return n;
}

/* node-1 with resourceVersion 42 and the given annotation pairs (NULL-terminated);
 * built with cJSON so values may hold anything. */
static struct node_rec *node_with(const char *key, ...) {
        cJSON *j, *meta, *ann;
        struct node_rec *n;
        va_list ap;

        j = cJSON_CreateObject();
        meta = cJSON_AddObjectToObject(j, "metadata");
        cJSON_AddStringToObject(meta, "name", "node-1");
        cJSON_AddStringToObject(meta, "resourceVersion", "42");
        ann = cJSON_AddObjectToObject(meta, "annotations");
        va_start(ap, key);
        for (const char *k = key; k; k = va_arg(ap, const char *))
                cJSON_AddStringToObject(ann, k, va_arg(ap, const char *));
        va_end(ap);
        n = node_from_cjson(j);
        cJSON_Delete(j);
        return n;
}

static cJSON *parse_patch(const char *s) {
        cJSON *j;

        assert_non_null(s);
        j = cJSON_Parse(s);
        if (!j)
                fail_msg("patch is not JSON: %s", s);
        return j;
}

static const cJSON *annotation(const cJSON *patch, const char *key) {
        return cJSON_GetObjectItemCaseSensitive(json_path(patch, "metadata.annotations"), key);
}

static void assert_ann_string(const cJSON *patch, const char *key, const char *value) {
        const cJSON *a = annotation(patch, key);

        if (!cJSON_IsString(a))
                fail_msg("annotation %s is not a string", key);
        assert_string_equal(a->valuestring, value);
}

static void assert_ann_null(const cJSON *patch, const char *key) {
        if (!cJSON_IsNull(annotation(patch, key)))
                fail_msg("annotation %s is not null", key);
}

static void assert_ann_absent(const cJSON *patch, const char *key) {
        if (annotation(patch, key))
                fail_msg("annotation %s is in the patch", key);
}

static void assert_rv(const cJSON *patch, const char *rv) {
        assert_string_equal(json_str(patch, "metadata.resourceVersion"), rv);
}

/* Compares spec.taints with "key=value:effect" strings (value part omitted when none). */
static void assert_taints(const cJSON *patch, const char *const *want, size_t n_want) {
        const cJSON *arr = json_path(patch, "spec.taints"), *t;
        size_t i = 0;

        assert_true(cJSON_IsArray(arr));
        assert_int_equal(cJSON_GetArraySize(arr), n_want);
        cJSON_ArrayForEach(t, arr) {
                char buf[256];
                const char *v = json_str(t, "value");

                /* Only key, value, effect and timeAdded (kept as it was): nothing else. */
                assert_int_equal(cJSON_GetArraySize(t), (v ? 3 : 2) + (json_str(t, "timeAdded") ? 1 : 0));
                snprintf(buf, sizeof buf, "%s%s%s:%s", json_str(t, "key"), v ? "=" : "", v ? v : "",
                         json_str(t, "effect"));
                assert_string_equal(buf, want[i]);
                i++;
        }
}

/* ---- enums ---- */

static void test_enums(void **state) {
        static const char *const phases[] = {
                "waiting",       "preflight",    "cordon",  "evict-claim-holders", "evict-rest",
                "wait-released", "stop-drivers", "drained", "restore-drivers",     "uncordon"
        };
        static const char *const kinds[] = { "taint", "label", "systemd", "none" };

        assert_int_equal(ELEMENTSOF(phases), _DRAIN_PHASE_MAX);
        for (int i = 0; i < _DRAIN_PHASE_MAX; i++) {
                assert_string_equal(drain_phase_to_string((enum drain_phase)i), phases[i]);
                assert_int_equal(drain_phase_from_string(phases[i]), i);
        }
        assert_null(drain_phase_to_string(_DRAIN_PHASE_MAX));
        assert_null(drain_phase_to_string(_DRAIN_PHASE_INVALID));
        assert_int_equal(drain_phase_from_string("Cordon"), _DRAIN_PHASE_INVALID);
        assert_int_equal(drain_phase_from_string(NULL), _DRAIN_PHASE_INVALID);

        assert_string_equal(drain_request_to_string(DRAIN_REQUEST_DRAIN), "drain");
        assert_string_equal(drain_request_to_string(DRAIN_REQUEST_UNCORDON), "uncordon");
        assert_string_equal(drain_request_to_string(DRAIN_REQUEST_NONE), "none");
        assert_int_equal(drain_request_from_string("drain"), DRAIN_REQUEST_DRAIN);
        assert_int_equal(drain_request_from_string("uncordon"), DRAIN_REQUEST_UNCORDON);
        assert_int_equal(drain_request_from_string("banana"), _DRAIN_REQUEST_INVALID);
        assert_null(drain_request_to_string(_DRAIN_REQUEST_MAX));

        /* The strategies, by the names records and --driver-stop use; taint first (the default). */
        for (size_t i = 0; i < ELEMENTSOF(kinds); i++) {
                assert_non_null(driver_stop_strategies[i]);
                assert_string_equal(driver_stop_strategies[i]->name, kinds[i]);
                assert_ptr_equal(driver_stop_find(kinds[i]), driver_stop_strategies[i]);
        }
        assert_null(driver_stop_strategies[ELEMENTSOF(kinds)]);
        assert_ptr_equal(driver_stop_or_default(NULL), &driver_stop_taint);
        assert_null(driver_stop_find("label:foo"));
        assert_null(driver_stop_find(NULL));
        assert_string_equal(driver_stop_names(false), "taint, label, systemd or none");
        assert_string_equal(driver_stop_names(true), "taint, label:KEY, systemd:UNIT or none");
}

/* ---- parse ---- */

static void test_parse_absent(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n =
                node_json("{'metadata':{'name':'node-1','resourceVersion':'7','annotations':{"
                          "'node.alpha.kubernetes.io/ttl':'0','drainer.io/unknown':'x'}}}");
        _cleanup_(drain_state_done) struct drain_state s = {};
        char *err = NULL;

        assert_int_equal(drain_state_parse(n, &s, &err), 0);
        assert_null(err);
        assert_int_equal(s.request, DRAIN_REQUEST_NONE);
        assert_false(s.has_phase);
        assert_int_equal(s.state_since_usec, 0);
        assert_int_equal(s.started_at_usec, 0);
        assert_false(s.has_was_unschedulable);
        assert_int_equal(s.n_stops, 0);
        assert_null(s.message);
}

static void test_parse_full(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n = node_fixture("node-drained.json");
        _cleanup_(drain_state_done) struct drain_state s = {};
        int64_t t;

        assert_int_equal(drain_state_parse(n, &s, NULL), 0);
        assert_int_equal(s.request, DRAIN_REQUEST_DRAIN);
        assert_true(s.has_phase);
        assert_int_equal(s.phase, DRAIN_PHASE_DRAINED);
        assert_int_equal(timesrc_parse_rfc3339("2025-09-02T11:04:30Z", &t), 0);
        assert_int_equal(s.state_since_usec, t);
        assert_int_equal(timesrc_parse_rfc3339("2025-09-02T11:00:00Z", &t), 0);
        assert_int_equal(s.started_at_usec, t);
        assert_true(s.has_was_unschedulable);
        assert_false(s.was_unschedulable);
        assert_string_equal(s.message, "drained in 4m30s; 3 pods evicted, 2 claims released");

        assert_int_equal(s.n_stops, 5);
        assert_ptr_equal(s.stops[0].ops, &driver_stop_taint);
        assert_null(s.stops[0].arg);
        assert_false(s.stops[0].had_old);
        assert_string_equal(s.stops[0].daemonset, "dra-system/gpu-kubelet-plugin");
        assert_int_equal(s.stops[0].n_drivers, 1);
        assert_string_equal(s.stops[0].drivers[0], "gpu.example.com");

        assert_ptr_equal(s.stops[1].ops, &driver_stop_label);
        assert_string_equal(s.stops[1].arg, "nvidia.com/gpu.deploy.dra-driver");
        assert_true(s.stops[1].had_old);
        assert_string_equal(s.stops[1].old_value, "true");
        assert_null(s.stops[1].daemonset);
        assert_int_equal(s.stops[1].n_drivers, 2);
        assert_string_equal(s.stops[1].drivers[0], "gpu.nvidia.com");
        assert_string_equal(s.stops[1].drivers[1], "compute-domain.nvidia.com");

        assert_ptr_equal(s.stops[2].ops, &driver_stop_label);
        assert_string_equal(s.stops[2].arg, "example.com/nic-driver");
        assert_true(s.stops[2].had_old);
        assert_null(s.stops[2].old_value);
        assert_int_equal(s.stops[2].n_drivers, 0);

        assert_ptr_equal(s.stops[3].ops, &driver_stop_systemd);
        assert_string_equal(s.stops[3].arg, "fpga-dra-plugin.service");
        assert_int_equal(s.stops[3].n_drivers, 1);

        assert_ptr_equal(s.stops[4].ops, &driver_stop_none);
        assert_null(s.stops[4].arg);
        assert_string_equal(s.stops[4].daemonset, "kube-system/net-dra");

        /* done() leaves an empty state; a second done() is harmless. */
        drain_state_done(&s);
        assert_int_equal(s.n_stops, 0);
        assert_null(s.message);
}

static void test_parse_each_phase_and_request(void **state) {
        for (int i = 0; i < _DRAIN_PHASE_MAX; i++) {
                _cleanup_(node_rec_freep) struct node_rec *n =
                        node_with(DRAINER_ANN_STATE, drain_phase_to_string((enum drain_phase)i),
                                  DRAINER_ANN_REQUEST, i % 2 ? "drain" : "uncordon",
                                  DRAINER_ANN_WAS_UNSCHEDULABLE, i % 2 ? "true" : "false", NULL);
                _cleanup_(drain_state_done) struct drain_state s = {};

                assert_int_equal(drain_state_parse(n, &s, NULL), 0);
                assert_true(s.has_phase);
                assert_int_equal(s.phase, i);
                assert_int_equal(s.request, i % 2 ? DRAIN_REQUEST_DRAIN : DRAIN_REQUEST_UNCORDON);
                assert_true(s.has_was_unschedulable);
                assert_int_equal(s.was_unschedulable, i % 2);
        }
}

/* Parses one annotation value that must be refused; returns the message. */
static char *parse_bad(const char *key, const char *value) {
        _cleanup_(node_rec_freep) struct node_rec *n = node_with(key, value, NULL);
        struct drain_state s = { .request = DRAIN_REQUEST_UNCORDON, .n_stops = 3 };
        char *err = NULL;

        assert_int_equal(drain_state_parse(n, &s, &err), -EBADMSG);
        if (!err)
                fail_msg("no message for %s=%s", key, value);
        /* *ret is written only on success. */
        assert_int_equal(s.request, DRAIN_REQUEST_UNCORDON);
        assert_int_equal(s.n_stops, 3);
        /* One line, whatever the value. */
        assert_null(strchr(err, '\n'));
        assert_true(strncmp(err, "node node-1: annotation ", 24) == 0);
        /* Without a message pointer the error is the same. */
        assert_int_equal(drain_state_parse(n, &s, NULL), -EBADMSG);
        return err;
}

#define RESET_HINT                                                                                          \
        "to reset, run: kubectl annotate node node-1 drainer.io/state- drainer.io/state-since- "            \
        "drainer.io/started-at- drainer.io/driver-stop- drainer.io/message- (drainer.io/was-unschedulable " \
        "records who cordoned: keep it, or remove it and uncordon by hand)"

static void assert_contains(const char *haystack, const char *needle) {
        if (!strstr(haystack, needle))
                fail_msg("\"%s\" does not contain \"%s\"", haystack, needle);
}

static void test_parse_bad_state(void **state) {
        _cleanup_free_ char *e1 = parse_bad(DRAINER_ANN_STATE, "banana");
        _cleanup_free_ char *e2 = parse_bad(DRAINER_ANN_STATE, "");
        _cleanup_free_ char *e3 = parse_bad(DRAINER_ANN_STATE, "Drained");

        assert_string_equal(e1, "node node-1: annotation drainer.io/state=\"banana\" is not a drainer phase "
                                "(preflight, cordon, evict-claim-holders, evict-rest, wait-released, "
                                "stop-drivers, drained, restore-drivers, uncordon); " RESET_HINT);
        assert_contains(e2, "drainer.io/state=\"\" is not a drainer phase");
        assert_contains(e3, "drainer.io/state=\"Drained\" is not a drainer phase");
}

static void test_parse_bad_request(void **state) {
        _cleanup_free_ char *e1 = parse_bad(DRAINER_ANN_REQUEST, "banana");
        _cleanup_free_ char *e2 = parse_bad(DRAINER_ANN_REQUEST, "none");
        _cleanup_free_ char *e3 = parse_bad(DRAINER_ANN_REQUEST, "");

        assert_string_equal(e1, "node node-1: annotation drainer.io/request=\"banana\" is not a request "
                                "(drain, uncordon); to reset, run: kubectl annotate node node-1 "
                                "drainer.io/request-");
        assert_contains(e2, "drainer.io/request=\"none\" is not a request (drain, uncordon)");
        assert_contains(e3, "drainer.io/request=\"\" is not a request (drain, uncordon)");
}

static void test_parse_bad_times(void **state) {
        _cleanup_free_ char *e1 = parse_bad(DRAINER_ANN_STATE_SINCE, "yesterday");
        _cleanup_free_ char *e2 = parse_bad(DRAINER_ANN_STARTED_AT, "2025-09-02 11:00:00");
        _cleanup_free_ char *e3 = parse_bad(DRAINER_ANN_STARTED_AT, "1970-01-01T00:00:00Z");
        _cleanup_free_ char *e4 = parse_bad(DRAINER_ANN_STATE_SINCE, "");

        assert_string_equal(e1, "node node-1: annotation drainer.io/state-since=\"yesterday\" is not an "
                                "RFC 3339 time; " RESET_HINT);
        assert_contains(e2,
                        "drainer.io/started-at=\"2025-09-02 11:00:00\" is not an RFC 3339 time; to reset");
        assert_contains(e3, "drainer.io/started-at=\"1970-01-01T00:00:00Z\" is not an RFC 3339 time");
        assert_contains(e4, "drainer.io/state-since=\"\" is not an RFC 3339 time");

        /* Offsets and fractions are RFC 3339 too. */
        {
                _cleanup_(node_rec_freep) struct node_rec *n =
                        node_with(DRAINER_ANN_STATE_SINCE, "2025-09-02T14:00:00.5+02:00",
                                  DRAINER_ANN_STARTED_AT, NOW_RFC, NULL);
                _cleanup_(drain_state_done) struct drain_state s = {};

                assert_int_equal(drain_state_parse(n, &s, NULL), 0);
                assert_int_equal(s.state_since_usec, NOW_USEC + 500000);
                assert_int_equal(s.started_at_usec, NOW_USEC);
        }
}

static void test_parse_bad_was_unschedulable(void **state) {
        _cleanup_free_ char *e1 = parse_bad(DRAINER_ANN_WAS_UNSCHEDULABLE, "yes");
        _cleanup_free_ char *e2 = parse_bad(DRAINER_ANN_WAS_UNSCHEDULABLE, "True");

        assert_string_equal(e1,
                            "node node-1: annotation drainer.io/was-unschedulable=\"yes\" is not true or "
                            "false; record whether the node was cordoned before drainer cordoned it: "
                            "kubectl annotate --overwrite node node-1 drainer.io/was-unschedulable=true "
                            "(or =false)");
        assert_contains(e2, "=\"True\" is not true or false");
}

static void assert_bad_driver_stop(const char *e, const char *why) {
        assert_non_null(why);
        assert_contains(e, "node node-1: annotation drainer.io/driver-stop=\"");
        assert_contains(e, why);
        assert_contains(e, "; " RESET_HINT "; a reset does not restart stopped drivers: set node "
                           "labels that read drainer-paused back and start stopped units by hand");
}

static void test_parse_bad_driver_stop(void **state) {
        static const struct {
                const char *value, *why;
        } cases[] = {
                { "banana", "is not a driver-stop record: is not JSON" },
                { "[", "is not a driver-stop record: is not JSON" },
                { "{}", "is not a driver-stop record: is not a JSON array" },
                { "[1]", "is not a driver-stop record: [0] is not an object" },
                { "[{}]", "[0].strategy is missing" },
        };

        /* Records that are JSON, each bad in one field: fixtures/state/bad-driver-stop.json. */
        _cleanup_(cJSON_Deletep) cJSON *records = test_fixture_json("state/bad-driver-stop.json");
        const cJSON *c;
        size_t n = 0;

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *e = parse_bad(DRAINER_ANN_DRIVER_STOP, cases[i].value);

                assert_bad_driver_stop(e, cases[i].why);
        }
        cJSON_ArrayForEach(c, records) {
                _cleanup_free_ char *value =
                        cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(c, "record"));
                _cleanup_free_ char *e = NULL;

                assert_non_null(value);
                e = parse_bad(DRAINER_ANN_DRIVER_STOP, value);
                assert_bad_driver_stop(e, json_str(c, "error"));
                n++;
        }
        assert_int_equal(n, 19);
}

static void test_parse_bad_value_quoting(void **state) {
        char long_value[200];
        _cleanup_free_ char *e1 = parse_bad(DRAINER_ANN_STATE, "two\nlines\t\"quoted\" back\\slash");
        _cleanup_free_ char *e2 = NULL;

        assert_contains(e1, "drainer.io/state=\"two\\nlines\\x09\\\"quoted\\\" back\\\\slash\" is not");

        memset(long_value, 'x', sizeof long_value - 1);
        long_value[sizeof long_value - 1] = 0;
        e2 = parse_bad(DRAINER_ANN_STATE, long_value);
        /* cut after 64 bytes */
        assert_contains(e2,
                        "=\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...\" is not");
}

/* The first bad annotation wins, and a valid state is not half-returned. */
static void test_parse_bad_after_good(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n =
                node_with(DRAINER_ANN_REQUEST, "drain", DRAINER_ANN_STATE, "drained", DRAINER_ANN_MESSAGE,
                          "hi", DRAINER_ANN_DRIVER_STOP,
                          "[{\"strategy\":\"label\",\"key\":\"k\",\"old\":\"v\"},{\"x\":1}]", NULL);
        struct drain_state s = {};
        _cleanup_free_ char *err = NULL;

        assert_int_equal(drain_state_parse(n, &s, &err), -EBADMSG);
        assert_contains(err, "[1].strategy is missing");
        assert_int_equal(s.n_stops, 0);
        assert_null(s.message);
}

/* ---- driver-stop round trip ---- */

static void test_driver_stop_round_trip(void **state) {
        struct driver_stop_record in[] = {
                { .ops = &driver_stop_taint,
                  .daemonset = (char *)"dra-system/gpu-kubelet-plugin",
                  .drivers = { (char *)"gpu.example.com", (char *)"gpu2.example.com" },
                  .n_drivers = 2 },
                { .ops = &driver_stop_label,
                  .arg = (char *)"nvidia.com/gpu.deploy.dra-driver",
                  .old_value = (char *)"true",
                  .had_old = true,
                  .drivers = { (char *)"gpu.nvidia.com" },
                  .n_drivers = 1 },
                { .ops = &driver_stop_label, .arg = (char *)"example.com/absent", .had_old = true },
                { .ops = &driver_stop_label, .arg = (char *)"unknown-before" },
                { .ops = &driver_stop_label,
                  .arg = (char *)"empty-before",
                  .old_value = (char *)"",
                  .had_old = true },
                { .ops = &driver_stop_systemd, .arg = (char *)"fpga-dra@0.service" },
                { .ops = &driver_stop_none },
        };
        _cleanup_(node_rec_freep) struct node_rec *n = node_with(NULL);
        _cleanup_(node_rec_freep) struct node_rec *back = NULL;
        _cleanup_(drain_state_done) struct drain_state s = {};
        _cleanup_(cJSON_Deletep) cJSON *patch = NULL;
        _cleanup_free_ char *text = NULL;
        const cJSON *a;

        assert_int_equal(drain_patch_driver_stop(n, in, ELEMENTSOF(in), &text), 0);
        patch = parse_patch(text);
        assert_rv(patch, "42");
        a = annotation(patch, DRAINER_ANN_DRIVER_STOP);
        assert_true(cJSON_IsString(a));
        /* Only the annotation changes. */
        assert_int_equal(cJSON_GetArraySize(json_path(patch, "metadata")), 2);
        assert_null(cJSON_GetObjectItemCaseSensitive(patch, "spec"));

        back = node_with(DRAINER_ANN_DRIVER_STOP, a->valuestring, NULL);
        assert_int_equal(drain_state_parse(back, &s, NULL), 0);
        assert_int_equal(s.n_stops, ELEMENTSOF(in));
        for (size_t i = 0; i < ELEMENTSOF(in); i++) {
                assert_ptr_equal(s.stops[i].ops, in[i].ops);
                if (in[i].arg)
                        assert_string_equal(s.stops[i].arg, in[i].arg);
                else
                        assert_null(s.stops[i].arg);
                assert_int_equal(s.stops[i].had_old, in[i].had_old);
                if (in[i].old_value)
                        assert_string_equal(s.stops[i].old_value, in[i].old_value);
                else
                        assert_null(s.stops[i].old_value);
                if (in[i].daemonset)
                        assert_string_equal(s.stops[i].daemonset, in[i].daemonset);
                else
                        assert_null(s.stops[i].daemonset);
                assert_int_equal(s.stops[i].n_drivers, in[i].n_drivers);
                for (size_t j = 0; j < in[i].n_drivers; j++)
                        assert_string_equal(s.stops[i].drivers[j], in[i].drivers[j]);
        }
}

static void test_driver_stop_json_shape(void **state) {
        struct driver_stop_record in[] = {
                { .ops = &driver_stop_label, .arg = (char *)"k", .had_old = true },
                { .ops = &driver_stop_systemd, .arg = (char *)"x.service", .old_value = (char *)"ignored" },
        };
        _cleanup_(node_rec_freep) struct node_rec *n = node_with(NULL);
        _cleanup_(cJSON_Deletep) cJSON *patch = NULL;
        _cleanup_free_ char *text = NULL;

        assert_int_equal(drain_patch_driver_stop(n, in, ELEMENTSOF(in), &text), 0);
        patch = parse_patch(text);
        assert_ann_string(patch, DRAINER_ANN_DRIVER_STOP,
                          "[{\"strategy\":\"label\",\"key\":\"k\",\"old\":null},"
                          "{\"strategy\":\"systemd\",\"unit\":\"x.service\"}]");
}

static void test_driver_stop_empty_and_invalid(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n = node_with(NULL);
        _cleanup_(node_rec_freep) struct node_rec *norv = node_json("{'metadata':{'name':'node-1'}}");
        struct driver_stop_record many[DRAIN_STATE_MAX_STOPS + 1] = {};
        struct driver_stop_record bad[] = {
                { .ops = &driver_stop_label },                           /* no key */
                { .ops = &driver_stop_label, .arg = (char *)"bad key" }, /* bad key */
                { .ops = &driver_stop_label,
                  .arg = (char *)"k",
                  .had_old = true,
                  .old_value = (char *)"-x-" },
                { .ops = &driver_stop_systemd }, /* no unit */
                { .ops = &driver_stop_systemd, .arg = (char *)"nounit" },
                { .ops = &driver_stop_taint, .daemonset = (char *)"x" },
                { .ops = &driver_stop_taint, .drivers = { NULL }, .n_drivers = 1 },
                { .ops = &driver_stop_taint, .drivers = { (char *)"Bad_Driver" }, .n_drivers = 1 },
                { .ops = &driver_stop_taint, .n_drivers = DRIVER_STOP_MAX_DRIVERS + 1 },
                { .ops = NULL }, /* no strategy */
        };
        _cleanup_(cJSON_Deletep) cJSON *patch = NULL;
        _cleanup_free_ char *text = NULL;
        char *out = NULL;

        assert_int_equal(drain_patch_driver_stop(n, NULL, 0, &text), 0);
        patch = parse_patch(text);
        assert_ann_null(patch, DRAINER_ANN_DRIVER_STOP);

        for (size_t i = 0; i < ELEMENTSOF(many); i++)
                many[i].ops = &driver_stop_none;
        assert_int_equal(drain_patch_driver_stop(n, many, DRAIN_STATE_MAX_STOPS, &out), 0);
        free(out);
        out = NULL;
        assert_int_equal(drain_patch_driver_stop(n, many, ELEMENTSOF(many), &out), -EINVAL);
        assert_null(out);

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                if (drain_patch_driver_stop(n, &bad[i], 1, &out) != -EINVAL)
                        fail_msg("record %zu was accepted", i);
                assert_null(out);
        }
        assert_int_equal(drain_patch_driver_stop(norv, many, 1, &out), -EINVAL);
        assert_null(out);
}

/* ---- patches ---- */

static void test_patch_cordon_fresh(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n = node_json(
                "{'metadata':{'name':'node-1','resourceVersion':'100','annotations':{"
                "'drainer.io/request':'drain','drainer.io/message':'old'}},"
                "'spec':{'taints':[{'key':'dedicated','value':'ml','effect':'NoExecute',"
                "'timeAdded':'2025-09-01T00:00:00Z'},{'key':'example.com/gpu','effect':'NoSchedule'}]}}");
        static const char *const want[] = { "dedicated=ml:NoExecute", "example.com/gpu:NoSchedule",
                                            "drainer.io/draining:NoSchedule" };
        _cleanup_(cJSON_Deletep) cJSON *patch = NULL;
        _cleanup_free_ char *text = NULL;

        assert_int_equal(drain_patch_cordon(n, NOW_USEC, &text), 0);
        patch = parse_patch(text);
        assert_rv(patch, "100");
        assert_ann_string(patch, DRAINER_ANN_WAS_UNSCHEDULABLE, "false");
        assert_ann_string(patch, DRAINER_ANN_STARTED_AT, NOW_RFC);
        assert_ann_string(patch, DRAINER_ANN_STATE, "evict-claim-holders");
        assert_ann_string(patch, DRAINER_ANN_STATE_SINCE, NOW_RFC);
        /* The message of before (e.g. "waiting for a slot") is replaced. */
        assert_ann_string(patch, DRAINER_ANN_MESSAGE,
                          "cordoned; evicting the pods that hold ResourceClaims");
        assert_ann_absent(patch, DRAINER_ANN_REQUEST);
        assert_ann_absent(patch, DRAINER_ANN_DRIVER_STOP);
        assert_true(cJSON_IsTrue(json_path(patch, "spec.unschedulable")));
        assert_taints(patch, want, ELEMENTSOF(want));
        /* Rewriting the list must not restart a NoExecute taint's toleration clock. */
        assert_string_equal(json_str(cJSON_GetArrayItem(json_path(patch, "spec.taints"), 0), "timeAdded"),
                            "2025-09-01T00:00:00Z");
}

static void test_patch_cordon_already_unschedulable(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n = node_json(
                "{'metadata':{'name':'node-1','resourceVersion':'100'},'spec':{'unschedulable':true}}");
        static const char *const want[] = { "drainer.io/draining:NoSchedule" };
        _cleanup_(cJSON_Deletep) cJSON *patch = NULL;
        _cleanup_free_ char *text = NULL;

        assert_int_equal(drain_patch_cordon(n, NOW_USEC, &text), 0);
        patch = parse_patch(text);
        assert_ann_string(patch, DRAINER_ANN_WAS_UNSCHEDULABLE, "true");
        assert_true(cJSON_IsTrue(json_path(patch, "spec.unschedulable")));
        assert_taints(patch, want, ELEMENTSOF(want));
}

/* A retry after our own cordon: the record of who cordoned and the start time
 * stay, and the drain taint is not added twice. */
static void test_patch_cordon_again(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n = node_json(
                "{'metadata':{'name':'node-1','resourceVersion':'101','annotations':{"
                "'drainer.io/was-unschedulable':'false','drainer.io/started-at':'2025-09-02T11:00:00Z',"
                "'drainer.io/state':'cordon','drainer.io/state-since':'2025-09-02T11:00:00Z'}},"
                "'spec':{'unschedulable':true,'taints':[{'key':'node.kubernetes.io/unschedulable',"
                "'effect':'NoSchedule'},{'key':'drainer.io/draining','effect':'NoSchedule'}]}}");
        _cleanup_(cJSON_Deletep) cJSON *patch = NULL;
        _cleanup_free_ char *text = NULL;

        assert_int_equal(drain_patch_cordon(n, NOW_USEC, &text), 0);
        patch = parse_patch(text);
        assert_rv(patch, "101");
        assert_ann_absent(patch, DRAINER_ANN_WAS_UNSCHEDULABLE);
        assert_ann_absent(patch, DRAINER_ANN_STARTED_AT);
        assert_ann_string(patch, DRAINER_ANN_STATE, "evict-claim-holders");
        assert_ann_string(patch, DRAINER_ANN_STATE_SINCE, NOW_RFC);
        assert_true(cJSON_IsTrue(json_path(patch, "spec.unschedulable")));
        /* unchanged list: not rewritten */
        assert_null(json_path(patch, "spec.taints"));
}

/* The drain taint with a value is still ours (taints are unique by key and effect). */
static void test_patch_cordon_taint_with_value(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n =
                node_json("{'metadata':{'name':'node-1','resourceVersion':'5'},'spec':{'taints':["
                          "{'key':'drainer.io/draining','value':'x','effect':'NoSchedule'},"
                          "{'key':'drainer.io/draining','effect':'NoExecute'}]}}");
        _cleanup_(cJSON_Deletep) cJSON *patch = NULL;
        _cleanup_free_ char *text = NULL;

        assert_int_equal(drain_patch_cordon(n, NOW_USEC, &text), 0);
        patch = parse_patch(text);
        assert_null(json_path(patch, "spec.taints"));
}

/* The start of a driver-scoped drain: the same start as the cordon's, with the rules
 * recorded instead of the node cordoned. */
static void test_patch_isolate(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n =
                node_json("{'metadata':{'name':'node-1','resourceVersion':'100','annotations':{"
                          "'drainer.io/message':'old'}}}");
        _cleanup_(node_rec_freep) struct node_rec *again =
                node_with(DRAINER_ANN_STARTED_AT, "2025-09-02T11:00:00Z", NULL);
        _cleanup_(node_rec_freep) struct node_rec *bad_time =
                node_with(DRAINER_ANN_STARTED_AT, "soon", NULL);
        /* 0 is "absent" to drain_state_parse: never a start drainer wrote */
        _cleanup_(node_rec_freep) struct node_rec *zero_time =
                node_with(DRAINER_ANN_STARTED_AT, "1970-01-01T00:00:00Z", NULL);
        _cleanup_(cJSON_Deletep) cJSON *patch = NULL, *patch2 = NULL;
        _cleanup_free_ char *text = NULL, *text2 = NULL;
        char *out = NULL;

        assert_int_equal(drain_patch_isolate(n, NOW_USEC, "r-1,r-2", "keeping new claims off", &text), 0);
        patch = parse_patch(text);
        assert_rv(patch, "100");
        assert_ann_string(patch, DRAINER_ANN_STARTED_AT, NOW_RFC);
        assert_ann_string(patch, DRAINER_ANN_STATE, "cordon");
        assert_ann_string(patch, DRAINER_ANN_STATE_SINCE, NOW_RFC);
        assert_ann_string(patch, DRAINER_ANN_TAINT_RULES, "r-1,r-2");
        assert_ann_string(patch, DRAINER_ANN_MESSAGE, "keeping new claims off");
        assert_ann_absent(patch, DRAINER_ANN_WAS_UNSCHEDULABLE);
        assert_null(json_path(patch, "spec"));

        assert_int_equal(drain_patch_isolate(again, NOW_USEC, "", "m", &text2), 0);
        patch2 = parse_patch(text2);
        assert_ann_absent(patch2, DRAINER_ANN_STARTED_AT);
        assert_ann_string(patch2, DRAINER_ANN_STATE, "cordon");
        assert_ann_null(patch2, DRAINER_ANN_TAINT_RULES);

        assert_int_equal(drain_patch_isolate(bad_time, NOW_USEC, "r", "m", &out), -EBADMSG);
        assert_int_equal(drain_patch_isolate(zero_time, NOW_USEC, "r", "m", &out), -EBADMSG);
        assert_int_equal(drain_patch_cordon(zero_time, NOW_USEC, &out), -EBADMSG);
        assert_null(out);
}

static void test_patch_cordon_refuses(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *bad =
                node_with(DRAINER_ANN_WAS_UNSCHEDULABLE, "maybe", NULL);
        _cleanup_(node_rec_freep) struct node_rec *bad_time =
                node_with(DRAINER_ANN_STARTED_AT, "soon", NULL);
        _cleanup_(node_rec_freep) struct node_rec *norv = node_json("{'metadata':{'name':'node-1'}}");
        char *out = NULL;

        assert_int_equal(drain_patch_cordon(bad, NOW_USEC, &out), -EBADMSG);
        assert_int_equal(drain_patch_cordon(bad_time, NOW_USEC, &out), -EBADMSG);
        assert_int_equal(drain_patch_cordon(norv, NOW_USEC, &out), -EINVAL);
        assert_int_equal(drain_patch_phase(norv, DRAIN_PHASE_DRAINED, NOW_USEC, "x", &out), -EINVAL);
        assert_int_equal(drain_patch_message(norv, "x", &out), -EINVAL);
        assert_int_equal(drain_patch_label(norv, "k", "v", &out), -EINVAL);
        assert_int_equal(drain_patch_remove_taint(norv, NOW_USEC, NULL, &out), -EINVAL);
        assert_int_equal(drain_patch_finish(norv, true, false, &out), -EINVAL);
        assert_int_equal(drain_patch_request(norv, "drain", &out), -EINVAL);
        assert_null(out);
}

static void test_patch_phase(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n = node_with(DRAINER_ANN_STATE, "cordon", NULL);
        _cleanup_(cJSON_Deletep) cJSON *p1 = NULL, *p2 = NULL;
        _cleanup_free_ char *t1 = NULL, *t2 = NULL;
        char *out = NULL;

        assert_int_equal(drain_patch_phase(n, DRAIN_PHASE_EVICT_CLAIM_HOLDERS, NOW_USEC + 10 * USEC_PER_SEC,
                                           "evicting 3 claim holders", &t1),
                         0);
        p1 = parse_patch(t1);
        assert_rv(p1, "42");
        assert_ann_string(p1, DRAINER_ANN_STATE, "evict-claim-holders");
        assert_ann_string(p1, DRAINER_ANN_STATE_SINCE, LATER_RFC);
        assert_ann_string(p1, DRAINER_ANN_MESSAGE, "evicting 3 claim holders");
        assert_int_equal(cJSON_GetArraySize(json_path(p1, "metadata.annotations")), 3);
        assert_null(cJSON_GetObjectItemCaseSensitive(p1, "spec"));

        assert_int_equal(drain_patch_phase(n, DRAIN_PHASE_DRAINED, NOW_USEC, NULL, &t2), 0);
        p2 = parse_patch(t2);
        assert_ann_string(p2, DRAINER_ANN_STATE, "drained");
        assert_ann_null(p2, DRAINER_ANN_MESSAGE);

        assert_int_equal(drain_patch_phase(n, _DRAIN_PHASE_MAX, NOW_USEC, "x", &out), -EINVAL);
        assert_int_equal(drain_patch_phase(n, _DRAIN_PHASE_INVALID, NOW_USEC, "x", &out), -EINVAL);
        assert_null(out);
}

static void test_patch_message(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n = node_with(NULL);
        char msg[DRAIN_MESSAGE_MAX + 100];
        _cleanup_(cJSON_Deletep) cJSON *p1 = NULL, *p2 = NULL, *p3 = NULL;
        _cleanup_free_ char *t1 = NULL, *t2 = NULL, *t3 = NULL;
        const cJSON *m;

        assert_int_equal(drain_patch_message(n, "waiting for 2 claims: ml/a, ml/b", &t1), 0);
        p1 = parse_patch(t1);
        assert_rv(p1, "42");
        assert_ann_string(p1, DRAINER_ANN_MESSAGE, "waiting for 2 claims: ml/a, ml/b");
        assert_int_equal(cJSON_GetArraySize(json_path(p1, "metadata.annotations")), 1);

        assert_int_equal(drain_patch_message(n, NULL, &t2), 0);
        p2 = parse_patch(t2);
        assert_ann_null(p2, DRAINER_ANN_MESSAGE);

        /* 1023 ASCII bytes then a 2-byte character across the limit: cut before it. */
        memset(msg, 'a', sizeof msg);
        memcpy(msg + DRAIN_MESSAGE_MAX - 1, "\xc3\xa9", 2);
        msg[sizeof msg - 1] = 0;
        assert_int_equal(drain_patch_message(n, msg, &t3), 0);
        p3 = parse_patch(t3);
        m = annotation(p3, DRAINER_ANN_MESSAGE);
        assert_true(cJSON_IsString(m));
        assert_int_equal(strlen(m->valuestring), DRAIN_MESSAGE_MAX - 1);
        assert_int_equal(m->valuestring[DRAIN_MESSAGE_MAX - 2], 'a');
}

static void test_patch_label(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n = node_with(NULL);
        _cleanup_(cJSON_Deletep) cJSON *p1 = NULL, *p2 = NULL;
        _cleanup_free_ char *t1 = NULL, *t2 = NULL;
        const cJSON *l;
        char *out = NULL;

        assert_int_equal(drain_patch_label(n, "nvidia.com/gpu.deploy.dra-driver", DRIVER_PAUSED_VALUE, &t1),
                         0);
        p1 = parse_patch(t1);
        assert_rv(p1, "42");
        l = cJSON_GetObjectItemCaseSensitive(json_path(p1, "metadata.labels"),
                                             "nvidia.com/gpu.deploy.dra-driver");
        assert_true(cJSON_IsString(l));
        assert_string_equal(l->valuestring, "drainer-paused");
        assert_null(json_path(p1, "metadata.annotations"));
        assert_null(cJSON_GetObjectItemCaseSensitive(p1, "spec"));

        assert_int_equal(drain_patch_label(n, "nvidia.com/gpu.deploy.dra-driver", NULL, &t2), 0);
        p2 = parse_patch(t2);
        l = cJSON_GetObjectItemCaseSensitive(json_path(p2, "metadata.labels"),
                                             "nvidia.com/gpu.deploy.dra-driver");
        assert_true(cJSON_IsNull(l));

        assert_int_equal(drain_patch_label(n, "bad key", "v", &out), -EINVAL);
        assert_int_equal(drain_patch_label(n, "k", "bad value", &out), -EINVAL);
        assert_int_equal(drain_patch_label(n, NULL, "v", &out), -EINVAL);
        assert_null(out);
}

static void test_patch_remove_taint(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n = node_fixture("node-drained.json");
        _cleanup_(node_rec_freep) struct node_rec *only =
                node_json("{'metadata':{'name':'node-1','resourceVersion':'9'},'spec':{'taints':["
                          "{'key':'drainer.io/draining','effect':'NoSchedule'}]}}");
        _cleanup_(node_rec_freep) struct node_rec *none =
                node_json("{'metadata':{'name':'node-1','resourceVersion':'9'},'spec':{'taints':["
                          "{'key':'a','effect':'NoSchedule'}]}}");
        static const char *const want[] = { "node.kubernetes.io/unschedulable:NoSchedule",
                                            "dedicated=ml:NoExecute" };
        _cleanup_(cJSON_Deletep) cJSON *p1 = NULL, *p2 = NULL, *p3 = NULL;
        _cleanup_free_ char *t1 = NULL, *t2 = NULL, *t3 = NULL;
        const cJSON *taints;

        assert_int_equal(drain_patch_remove_taint(n, NOW_USEC, NULL, &t1), 0);
        p1 = parse_patch(t1);
        assert_rv(p1, "50210");
        assert_ann_string(p1, DRAINER_ANN_STATE, "restore-drivers");
        assert_ann_string(p1, DRAINER_ANN_STATE_SINCE, NOW_RFC);
        assert_taints(p1, want, ELEMENTSOF(want));
        assert_null(json_path(p1, "spec.unschedulable"));

        assert_int_equal(drain_patch_remove_taint(only, NOW_USEC, NULL, &t2), 0);
        p2 = parse_patch(t2);
        taints = json_path(p2, "spec.taints");
        assert_non_null(taints);
        assert_true(cJSON_IsNull(taints));

        assert_int_equal(drain_patch_remove_taint(none, NOW_USEC, NULL, &t3), 0);
        p3 = parse_patch(t3);
        assert_null(cJSON_GetObjectItemCaseSensitive(p3, "spec"));
        assert_ann_string(p3, DRAINER_ANN_STATE, "restore-drivers");
        assert_ann_absent(p3, DRAINER_ANN_MESSAGE);
}

/* The move to restore-drivers with its first step in one write: the message goes
 * along. */
static void test_patch_remove_taint_message(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n = node_json(
                "{'metadata':{'name':'node-1','resourceVersion':'7'},'spec':{'unschedulable':true,'taints':["
                "{'key':'drainer.io/draining','effect':'NoSchedule'}]}}");
        _cleanup_(cJSON_Deletep) cJSON *p = NULL;
        _cleanup_free_ char *t = NULL;

        assert_int_equal(drain_patch_remove_taint(n, NOW_USEC, "restoring the DRA drivers", &t), 0);
        p = parse_patch(t);
        assert_ann_string(p, DRAINER_ANN_STATE, "restore-drivers");
        assert_ann_string(p, DRAINER_ANN_MESSAGE, "restoring the DRA drivers");
        assert_true(cJSON_IsNull(json_path(p, "spec.taints")));
}

/* The record of the stop and the move to stop-drivers in one write; without a phase
 * the record alone. */
static void test_patch_driver_stop_phase(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n =
                node_json("{'metadata':{'name':'node-1','resourceVersion':'9'}}");
        struct driver_stop_record rec = { .ops = &driver_stop_taint };
        _cleanup_(cJSON_Deletep) cJSON *p = NULL, *q = NULL;
        _cleanup_free_ char *t = NULL, *u = NULL, *v = NULL;

        assert_int_equal(drain_patch_driver_stop_phase(n, &rec, 1, DRAIN_PHASE_STOP_DRIVERS, NOW_USEC,
                                                       "stopping the DRA drivers", &t),
                         0);
        p = parse_patch(t);
        assert_non_null(annotation(p, DRAINER_ANN_DRIVER_STOP));
        assert_ann_string(p, DRAINER_ANN_STATE, "stop-drivers");
        assert_ann_string(p, DRAINER_ANN_STATE_SINCE, NOW_RFC);
        assert_ann_string(p, DRAINER_ANN_MESSAGE, "stopping the DRA drivers");

        assert_int_equal(drain_patch_driver_stop(n, &rec, 1, &u), 0);
        q = parse_patch(u);
        assert_non_null(annotation(q, DRAINER_ANN_DRIVER_STOP));
        assert_ann_absent(q, DRAINER_ANN_STATE);
        assert_ann_absent(q, DRAINER_ANN_MESSAGE);

        assert_int_equal(drain_patch_driver_stop_phase(n, &rec, 1, (enum drain_phase)99, NOW_USEC, "x", &v),
                         -EINVAL);
        assert_null(v);
}

static const char *const all_annotations[] = {
        DRAINER_ANN_REQUEST,           DRAINER_ANN_STATE,
        DRAINER_ANN_STATE_SINCE,       DRAINER_ANN_STARTED_AT,
        DRAINER_ANN_WAS_UNSCHEDULABLE, DRAINER_ANN_DRIVER_STOP,
        DRAINER_ANN_MESSAGE,
};

static void test_patch_finish_uncordon(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n = node_fixture("node-drained.json");
        static const char *const want[] = { "node.kubernetes.io/unschedulable:NoSchedule",
                                            "dedicated=ml:NoExecute" };
        _cleanup_(cJSON_Deletep) cJSON *patch = NULL;
        _cleanup_free_ char *text = NULL;
        const cJSON *u;

        assert_int_equal(drain_patch_finish(n, true, false, &text), 0);
        patch = parse_patch(text);
        assert_rv(patch, "50210");
        for (size_t i = 0; i < ELEMENTSOF(all_annotations); i++)
                assert_ann_null(patch, all_annotations[i]);
        /* Any other drainer.io/ annotation goes too (e.g. serve's shutdown-boot-id). */
        assert_ann_null(patch, "drainer.io/some-future-key");
        assert_int_equal(cJSON_GetArraySize(json_path(patch, "metadata.annotations")),
                         ELEMENTSOF(all_annotations) + 1);
        u = json_path(patch, "spec.unschedulable");
        assert_true(cJSON_IsBool(u));
        assert_true(cJSON_IsFalse(u));
        assert_taints(patch, want, ELEMENTSOF(want));
        /* labels are the label strategy's business */
        assert_null(json_path(patch, "metadata.labels"));
}

static void test_patch_finish_keep_cordon_and_request(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n =
                node_json("{'metadata':{'name':'node-1','resourceVersion':'77','annotations':{"
                          "'drainer.io/request':'uncordon','drainer.io/state':'uncordon','drainer.io/"
                          "was-unschedulable':'true','drainer.io/requested-by':'ticket 42',"
                          "'drainer.io/shutdown-boot-id':'b'}},"
                          "'spec':{'unschedulable':true}}");
        _cleanup_(cJSON_Deletep) cJSON *patch = NULL;
        _cleanup_free_ char *text = NULL;

        assert_int_equal(drain_patch_finish(n, false, true, &text), 0);
        patch = parse_patch(text);
        assert_rv(patch, "77");
        assert_ann_absent(patch, DRAINER_ANN_REQUEST);
        /* the request kept keeps who asked for it; the rest of drainer.io/ goes */
        assert_ann_absent(patch, DRAINER_ANN_REQUESTED_BY);
        assert_ann_null(patch, "drainer.io/shutdown-boot-id");
        for (size_t i = 1; i < ELEMENTSOF(all_annotations); i++)
                assert_ann_null(patch, all_annotations[i]);
        /* uncordon false: spec.unschedulable left out entirely; no taint to remove */
        assert_null(cJSON_GetObjectItemCaseSensitive(patch, "spec"));
}

/* --out-of-service: the out-of-service taint is added with drainer.io/out-of-service,
 * every other taint kept; the restore and the final patch remove it only when that
 * annotation says drainer applied it; a bad value of it is refused with a hint. */
static void test_patch_out_of_service(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n =
                node_json("{'metadata':{'name':'node-1','resourceVersion':'9'},'spec':{'taints':["
                          "{'key':'a','effect':'NoSchedule'},"
                          "{'key':'drainer.io/draining','effect':'NoSchedule'}]}}");
        _cleanup_(node_rec_freep) struct node_rec *ours = node_json(
                "{'metadata':{'name':'node-1','resourceVersion':'9','annotations':{"
                "'drainer.io/out-of-service':'2025-06-15T14:00:00Z','drainer.io/state':'drained'}},"
                "'spec':{'taints':[{'key':'a','effect':'NoSchedule'},"
                "{'key':'drainer.io/draining','effect':'NoSchedule'},"
                "{'key':'node.kubernetes.io/"
                "out-of-service','value':'nodeshutdown','effect':'NoExecute'}]}}");
        _cleanup_(node_rec_freep) struct node_rec *theirs =
                node_json("{'metadata':{'name':'node-1','resourceVersion':'9','annotations':{"
                          "'drainer.io/state':'drained'}},'spec':{'taints':["
                          "{'key':'drainer.io/draining','effect':'NoSchedule'},"
                          "{'key':'node.kubernetes.io/"
                          "out-of-service','value':'nodeshutdown','effect':'NoExecute'}]}}");
        _cleanup_(node_rec_freep) struct node_rec *bad =
                node_json("{'metadata':{'name':'node-1','resourceVersion':'9','annotations':{"
                          "'drainer.io/out-of-service':'yes'}}}");
        static const char *const added[] = { "a:NoSchedule", "drainer.io/draining:NoSchedule",
                                             "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute" };
        static const char *const kept_a[] = { "a:NoSchedule" };
        static const char *const kept_theirs[] = {
                "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"
        };
        _cleanup_(cJSON_Deletep) cJSON *p1 = NULL, *p2 = NULL, *p3 = NULL, *p4 = NULL;
        _cleanup_free_ char *t1 = NULL, *t2 = NULL, *t3 = NULL, *t4 = NULL, *err = NULL;
        _cleanup_(drain_state_done) struct drain_state st = {};

        assert_int_equal(drain_patch_out_of_service(n, NOW_USEC, "applied", &t1), 0);
        p1 = parse_patch(t1);
        assert_taints(p1, added, ELEMENTSOF(added));
        assert_ann_string(p1, DRAINER_ANN_OUT_OF_SERVICE, NOW_RFC);
        assert_ann_string(p1, DRAINER_ANN_MESSAGE, "applied");

        assert_int_equal(drain_patch_remove_taint(ours, NOW_USEC, NULL, &t2), 0);
        p2 = parse_patch(t2);
        assert_taints(p2, kept_a, ELEMENTSOF(kept_a));
        assert_non_null(strstr(t2, "\"drainer.io/out-of-service\":null"));

        assert_int_equal(drain_patch_finish(ours, true, false, &t3), 0);
        p3 = parse_patch(t3);
        assert_taints(p3, kept_a, ELEMENTSOF(kept_a));
        assert_non_null(strstr(t3, "\"drainer.io/out-of-service\":null"));
        /* set once: no key twice in the patch */
        assert_null(strstr(strstr(t3, "drainer.io/out-of-service") + 1, "drainer.io/out-of-service"));

        assert_int_equal(drain_patch_finish(theirs, true, false, &t4), 0);
        p4 = parse_patch(t4);
        assert_taints(p4, kept_theirs, ELEMENTSOF(kept_theirs));

        assert_int_equal(drain_state_parse(ours, &st, NULL), 0);
        assert_true(st.out_of_service_usec > 0);
        drain_state_done(&st);
        assert_int_equal(drain_state_parse(bad, &st, &err), -EBADMSG);
        assert_non_null(err);
        assert_non_null(strstr(err, "drainer.io/out-of-service-"));
}

/* --node-conditions: each phase's DrainInProgress/Drained, only what differs, the
 * transition time only where the status changes, and nothing over someone else's. */
static const cJSON *condition_in(const cJSON *patch, const char *type) {
        const cJSON *c;

        cJSON_ArrayForEach(
                c, json_get_arr(json_get_obj(patch, "status"),
                                "conditions")) if (streq_ptr(json_get_str(c, "type"), type)) return c;
        return NULL;
}

static void assert_condition(const cJSON *patch, const char *type, const char *status, const char *reason,
                             bool transition) {
        const cJSON *c = condition_in(patch, type);

        assert_non_null(c);
        assert_string_equal(json_get_str(c, "status"), status);
        assert_string_equal(json_get_str(c, "reason"), reason);
        assert_string_equal(json_get_str(c, "lastHeartbeatTime"), NOW_RFC);
        if (transition)
                assert_string_equal(json_get_str(c, "lastTransitionTime"), NOW_RFC);
        else
                assert_null(json_get_str(c, "lastTransitionTime"));
        assert_non_null(json_get_str(c, "message"));
}

static cJSON *conditions_patch(const struct node_rec *n, bool has_phase, enum drain_phase p) {
        char *body = NULL;
        int r = drain_patch_conditions(n, has_phase, p, NOW_USEC, &body);
        cJSON *j;

        assert_true(r >= 0);
        if (r == 0) {
                assert_null(body);
                return NULL;
        }
        assert_non_null(body);
        j = parse_patch(body);
        free(body);
        /* status only: never metadata (no resourceVersion: the list merges by type) */
        assert_null(cJSON_GetObjectItemCaseSensitive(j, "metadata"));
        assert_null(cJSON_GetObjectItemCaseSensitive(j, "spec"));
        return j;
}

static void test_patch_conditions(void **state) {
        (void)state;
        struct node_rec *fresh = node_json("{'metadata':{'name':'n1','resourceVersion':'5'},"
                                           "'status':{'conditions':[{'type':'Ready','status':'True'}]}}");
        struct node_rec *draining =
                node_json("{'metadata':{'name':'n1','resourceVersion':'6'},'status':{'conditions':["
                          "{'type':'Ready','status':'True'},"
                          "{'type':'DrainInProgress','status':'True','reason':'DrainerDraining'},"
                          "{'type':'Drained','status':'False','reason':'DrainerDraining'}]}}");
        struct node_rec *theirs =
                node_json("{'metadata':{'name':'n1','resourceVersion':'7'},'status':{'conditions':["
                          "{'type':'DrainInProgress','status':'True','reason':'OtherTool'}]}}");
        cJSON *j;

        /* A node without them, no drain: nothing. Waiting and preflight are no drain. */
        assert_null(conditions_patch(fresh, false, 0));
        assert_null(conditions_patch(fresh, true, DRAIN_PHASE_WAITING));
        assert_null(conditions_patch(fresh, true, DRAIN_PHASE_PREFLIGHT));

        /* Every draining phase: in progress, not drained; both new. */
        for (enum drain_phase p = DRAIN_PHASE_CORDON; p < DRAIN_PHASE_DRAINED; p++) {
                j = conditions_patch(fresh, true, p);
                assert_non_null(j);
                assert_int_equal(cJSON_GetArraySize(json_get_arr(json_get_obj(j, "status"), "conditions")),
                                 2);
                assert_condition(j, "DrainInProgress", "True", "DrainerDraining", true);
                assert_condition(j, "Drained", "False", "DrainerDraining", true);
                assert_null(condition_in(j, "Ready")); /* the kubelet's stay out of it */
                cJSON_Delete(j);
                /* ... and already said: nothing. */
                assert_null(conditions_patch(draining, true, p));
        }

        /* Drained: both change status. */
        j = conditions_patch(draining, true, DRAIN_PHASE_DRAINED);
        assert_condition(j, "DrainInProgress", "False", "DrainerDrained", true);
        assert_condition(j, "Drained", "True", "DrainerDrained", true);
        cJSON_Delete(j);

        /* Restoring: Drained False keeps its transition time, only the reason moves. */
        j = conditions_patch(draining, true, DRAIN_PHASE_RESTORE_DRIVERS);
        assert_condition(j, "DrainInProgress", "False", "DrainerRestoring", true);
        assert_condition(j, "Drained", "False", "DrainerRestoring", false);
        cJSON_Delete(j);

        /* No drain recorded any more: ours go back to False (DrainerRestored). */
        j = conditions_patch(draining, false, 0);
        assert_condition(j, "DrainInProgress", "False", "DrainerRestored", true);
        assert_condition(j, "Drained", "False", "DrainerRestored", false);
        cJSON_Delete(j);

        /* Someone else's condition is left alone when no drain is recorded, and taken
         * over (it is the node's drain now) while drainer drains. */
        assert_null(conditions_patch(theirs, false, 0));
        j = conditions_patch(theirs, true, DRAIN_PHASE_EVICT_REST);
        assert_condition(j, "DrainInProgress", "True", "DrainerDraining", false);
        assert_condition(j, "Drained", "False", "DrainerDraining", true);
        cJSON_Delete(j);

        free(fresh);
        free(draining);
        free(theirs);
}

static void test_patch_request(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n = node_with(NULL);
        _cleanup_(cJSON_Deletep) cJSON *p1 = NULL, *p2 = NULL;
        _cleanup_free_ char *t1 = NULL, *t2 = NULL;
        char *out = NULL;

        assert_int_equal(drain_patch_request(n, "drain", &t1), 0);
        p1 = parse_patch(t1);
        assert_rv(p1, "42");
        assert_ann_string(p1, DRAINER_ANN_REQUEST, "drain");
        assert_int_equal(cJSON_GetArraySize(json_path(p1, "metadata.annotations")), 1);

        assert_int_equal(drain_patch_request(n, NULL, &t2), 0);
        p2 = parse_patch(t2);
        assert_ann_null(p2, DRAINER_ANN_REQUEST);

        assert_int_equal(drain_patch_request(n, "none", &out), -EINVAL);
        assert_int_equal(drain_patch_request(n, "banana", &out), -EINVAL);
        assert_null(out);
}

/* A cordon patch applied to the node reads back as the state it meant. */
static void test_patch_cordon_reads_back(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n = node_with(DRAINER_ANN_REQUEST, "drain", NULL);
        _cleanup_(node_rec_freep) struct node_rec *after = NULL;
        _cleanup_(drain_state_done) struct drain_state s = {};
        _cleanup_(cJSON_Deletep) cJSON *patch = NULL, *obj = NULL;
        _cleanup_free_ char *text = NULL;

        assert_int_equal(drain_patch_cordon(n, NOW_USEC, &text), 0);
        patch = parse_patch(text);
        obj = cJSON_Parse("{\"metadata\":{\"name\":\"node-1\",\"resourceVersion\":\"42\","
                          "\"annotations\":{\"drainer.io/request\":\"drain\"}}}");
        assert_non_null(obj);
        /* RFC 7386 for the parts the patch touches */
        {
                cJSON *ann = cJSON_GetObjectItemCaseSensitive(
                        cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "annotations");
                const cJSON *a;

                cJSON_ArrayForEach(a, json_path(patch, "metadata.annotations"))
                        cJSON_AddItemToObject(ann, a->string, cJSON_Duplicate(a, true));
                cJSON_AddItemToObject(obj, "spec", cJSON_Duplicate(json_path(patch, "spec"), true));
        }
        assert_int_equal(node_rec_from_json(obj, &after), 0);
        assert_int_equal(drain_state_parse(after, &s, NULL), 0);
        assert_int_equal(s.request, DRAIN_REQUEST_DRAIN);
        assert_true(s.has_phase);
        /* a node's cordon goes with the evictions that follow it at once */
        assert_int_equal(s.phase, DRAIN_PHASE_EVICT_CLAIM_HOLDERS);
        assert_int_equal(s.state_since_usec, NOW_USEC);
        assert_int_equal(s.started_at_usec, NOW_USEC);
        assert_true(s.has_was_unschedulable);
        assert_false(s.was_unschedulable);
        assert_true(after->unschedulable);
        assert_non_null(node_rec_find_taint(after, DRAIN_TAINT_KEY, DRAIN_TAINT_EFFECT));
}

/* --driver: the scope view shows only the scope's keys under the plain names (a
 * node drain's only those without a dot), a patch built from it is renamed back,
 * and the two kinds of drain see each other as conflicts. */
static void test_driver_scope(void **state) {
        struct node_rec *n = node_with(
                "drainer.io/state.gpu.example.com", "drained", "drainer.io/driver-stop.gpu.example.com",
                "[{\"strategy\":\"label\",\"key\":\"gpu.example.com/present\",\"old\":\"true\"}]",
                "drainer.io/taint-rules.gpu.example.com", "drainer-node-1-gpu.example.com-0",
                "drainer.io/message", "node's own", NULL);
        _cleanup_(drain_state_done) struct drain_state st = {};
        struct drain_scope_view v;
        char *body = NULL, msg[256];
        cJSON *j;

        assert_int_equal(drain_scope_view_init(&v, n, "gpu.example.com"), 0);
        assert_int_equal(v.node.n_annotations, 3);
        assert_int_equal(drain_state_parse(&v.node, &st, NULL), 0);
        assert_true(st.has_phase);
        assert_int_equal(st.phase, DRAIN_PHASE_DRAINED);
        assert_int_equal(st.n_stops, 1);
        assert_string_equal(st.taint_rules, "drainer-node-1-gpu.example.com-0");
        assert_null(st.message); /* the node's own message is not the driver's */

        /* the finish patch of the scope removes the scope's keys, and only those */
        assert_int_equal(drain_patch_finish(&v.node, false, false, &body), 0);
        assert_int_equal(drain_scope_patch("gpu.example.com", &body), 0);
        j = parse_patch(body);
        assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(json_path(j, "metadata.annotations"),
                                                                  "drainer.io/state.gpu.example.com")));
        assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(
                json_path(j, "metadata.annotations"), "drainer.io/taint-rules.gpu.example.com")));
        assert_null(cJSON_GetObjectItemCaseSensitive(json_path(j, "metadata.annotations"),
                                                     "drainer.io/message"));
        assert_null(
                cJSON_GetObjectItemCaseSensitive(json_path(j, "metadata.annotations"), "drainer.io/state"));
        assert_null(json_path(j, "spec"));
        cJSON_Delete(j);
        free(body);
        drain_scope_view_done(&v);

        /* the node's own view: no driver's key */
        assert_int_equal(drain_scope_view_init(&v, n, NULL), 0);
        assert_int_equal(v.node.n_annotations, 1);
        assert_string_equal(v.node.annotations[0].key, "drainer.io/message");
        drain_scope_view_done(&v);

        /* conflicts: a node drain sees the driver's; the driver's none (no node state);
         * another driver's scope sees none */
        assert_string_equal(drain_scope_conflict(n, NULL), "gpu.example.com");
        assert_null(drain_scope_conflict(n, "gpu.example.com"));
        assert_null(drain_scope_conflict(n, "nic.example.com"));
        node_rec_free(n);
        n = node_with("drainer.io/state", "evict-rest", NULL);
        assert_string_equal(drain_scope_conflict(n, "gpu.example.com"), "");
        assert_null(drain_scope_conflict(n, NULL));
        node_rec_free(n);

        /* names: a DNS subdomain, short enough for drainer.io/was-unschedulable.NAME */
        assert_int_equal(drain_scope_check("gpu.example.com", msg, sizeof(msg)), 0);
        assert_int_equal(drain_scope_check("GPU.example.com", msg, sizeof(msg)), -EINVAL);
        assert_int_equal(
                drain_scope_check("a-very-long-driver-name.with-many.labels.example.com", msg, sizeof(msg)),
                -EINVAL);
        assert_non_null(strstr(msg, "longer than the 45 characters"));
}

/* The phase table: every phase has an entry, the stages follow DESIGN.md's sequence
 * (queued, checking, taking out, drained, restoring, none going back), and the
 * shorthands agree with it; no entry for a value that is not a phase. */
static void test_phase_table(void **state) {
        enum drain_stage last = DRAIN_STAGE_QUEUED;

        for (int p = 0; p < _DRAIN_PHASE_MAX; p++) {
                const struct drain_phase_info *i = drain_phase_info(p);

                assert_non_null(i);
                assert_non_null(i->leaves);
                assert_true(i->stage >= last);
                last = i->stage;
                assert_true(drain_phase_changes_node(p) ==
                            (i->stage != DRAIN_STAGE_QUEUED && i->stage != DRAIN_STAGE_CHECKING));
                assert_true(!i->evicts_rest || i->stage == DRAIN_STAGE_TAKING);
                assert_true(!i->drivers_back || i->stage == DRAIN_STAGE_RESTORING);
        }
        assert_true(drain_phase_in_stage(DRAIN_PHASE_WAITING, DRAIN_STAGE_QUEUED));
        assert_true(drain_phase_in_stage(DRAIN_PHASE_PREFLIGHT, DRAIN_STAGE_CHECKING));
        assert_true(drain_phase_in_stage(DRAIN_PHASE_CORDON, DRAIN_STAGE_TAKING));
        assert_true(drain_phase_in_stage(DRAIN_PHASE_STOP_DRIVERS, DRAIN_STAGE_TAKING));
        assert_true(drain_phase_in_stage(DRAIN_PHASE_DRAINED, DRAIN_STAGE_DRAINED));
        assert_true(drain_phase_in_stage(DRAIN_PHASE_RESTORE_DRIVERS, DRAIN_STAGE_RESTORING));
        assert_false(drain_phase_evicts_rest(DRAIN_PHASE_EVICT_CLAIM_HOLDERS));
        assert_true(drain_phase_evicts_rest(DRAIN_PHASE_EVICT_REST));
        assert_true(drain_phase_drivers_back(DRAIN_PHASE_UNCORDON));
        assert_false(drain_phase_drivers_back(DRAIN_PHASE_RESTORE_DRIVERS));
        assert_null(drain_phase_info(_DRAIN_PHASE_MAX));
        assert_null(drain_phase_info(_DRAIN_PHASE_INVALID));
        assert_false(drain_phase_changes_node(_DRAIN_PHASE_INVALID));
        assert_false(drain_phase_in_stage(_DRAIN_PHASE_MAX, DRAIN_STAGE_QUEUED));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_enums),
                cmocka_unit_test(test_phase_table),
                cmocka_unit_test(test_driver_scope),
                cmocka_unit_test(test_parse_absent),
                cmocka_unit_test(test_parse_full),
                cmocka_unit_test(test_parse_each_phase_and_request),
                cmocka_unit_test(test_parse_bad_state),
                cmocka_unit_test(test_parse_bad_request),
                cmocka_unit_test(test_parse_bad_times),
                cmocka_unit_test(test_parse_bad_was_unschedulable),
                cmocka_unit_test(test_parse_bad_driver_stop),
                cmocka_unit_test(test_parse_bad_value_quoting),
                cmocka_unit_test(test_parse_bad_after_good),
                cmocka_unit_test(test_driver_stop_round_trip),
                cmocka_unit_test(test_driver_stop_json_shape),
                cmocka_unit_test(test_driver_stop_empty_and_invalid),
                cmocka_unit_test(test_patch_cordon_fresh),
                cmocka_unit_test(test_patch_cordon_already_unschedulable),
                cmocka_unit_test(test_patch_cordon_again),
                cmocka_unit_test(test_patch_cordon_taint_with_value),
                cmocka_unit_test(test_patch_cordon_refuses),
                cmocka_unit_test(test_patch_isolate),
                cmocka_unit_test(test_patch_phase),
                cmocka_unit_test(test_patch_message),
                cmocka_unit_test(test_patch_label),
                cmocka_unit_test(test_patch_remove_taint),
                cmocka_unit_test(test_patch_remove_taint_message),
                cmocka_unit_test(test_patch_driver_stop_phase),
                cmocka_unit_test(test_patch_finish_uncordon),
                cmocka_unit_test(test_patch_finish_keep_cordon_and_request),
                cmocka_unit_test(test_patch_out_of_service),
                cmocka_unit_test(test_patch_conditions),
                cmocka_unit_test(test_patch_request),
                cmocka_unit_test(test_patch_cordon_reads_back),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
