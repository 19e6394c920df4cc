/* Unit tests for the Node Event bodies: every core/v1 Event field drainer
 * sets, argument checks, and message cuts at UTF-8 character boundaries. */
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
#include "drainer/kube/events.h"
#include "drainer/kube/objects.h"

/* 2025-09-02T12:00:00Z */
#define NOW_USEC INT64_C(1756814400000000)
#define NOW_RFC  "2025-09-02T12:00:00Z"

static struct node_rec *node(const char *json) {
        cJSON *j = cJSON_Parse(json);
        struct node_rec *n = NULL;

        assert_non_null(j);
        assert_int_equal(node_rec_from_json(j, &n), 0);
        cJSON_Delete(j);
        return n;
}

static struct node_rec *node1(void) {
        return node("{\"metadata\":{\"name\":\"node-1\",\"uid\":\"f6666666-7777-4888-8999-000000000000\","
                    "\"resourceVersion\":\"42\"}}");
}

/* Builds an event and returns its parsed body. */
static cJSON *build(const struct node_rec *n, const char *type, const char *reason, const char *message,
                    const char *host) {
        _cleanup_free_ char *json = NULL, *path = NULL;
        cJSON *j;

        assert_int_equal(event_build_node(n, type, reason, message, NOW_USEC, host, &json, &path), 0);
        assert_string_equal(path, "/api/v1/namespaces/default/events");
        j = cJSON_Parse(json);
        assert_non_null(j);
        return j;
}

static void test_event_fields(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n = node1();
        _cleanup_(cJSON_Deletep) cJSON *e = build(n, EVENT_TYPE_NORMAL, EVENT_REASON_PHASE,
                                                  "cordoned; evicting 3 claim holders", "host-a");

        assert_string_equal(json_str(e, "apiVersion"), "v1");
        assert_string_equal(json_str(e, "kind"), "Event");
        assert_string_equal(json_str(e, "metadata.generateName"), "node-1.");
        assert_string_equal(json_str(e, "metadata.namespace"), "default");
        assert_null(json_path(e, "metadata.name"));

        assert_string_equal(json_str(e, "involvedObject.apiVersion"), "v1");
        assert_string_equal(json_str(e, "involvedObject.kind"), "Node");
        assert_string_equal(json_str(e, "involvedObject.name"), "node-1");
        assert_string_equal(json_str(e, "involvedObject.uid"), "f6666666-7777-4888-8999-000000000000");
        /* cluster-scoped object, legacy event: the API server wants no namespace here */
        assert_null(json_path(e, "involvedObject.namespace"));

        assert_string_equal(json_str(e, "reason"), "DrainerPhase");
        assert_string_equal(json_str(e, "message"), "cordoned; evicting 3 claim holders");
        assert_string_equal(json_str(e, "type"), "Normal");
        assert_string_equal(json_str(e, "source.component"), "drainer");
        assert_string_equal(json_str(e, "source.host"), "host-a");
        assert_string_equal(json_str(e, "firstTimestamp"), NOW_RFC);
        assert_string_equal(json_str(e, "lastTimestamp"), NOW_RFC);
        assert_int_equal(json_int(e, "count", -1), 1);
        assert_string_equal(json_str(e, "reportingComponent"), "drainer");
        assert_string_equal(json_str(e, "reportingInstance"), "host-a");
        /* v1 legacy rules: no eventTime, action or series */
        assert_null(json_path(e, "eventTime"));
        assert_null(json_path(e, "action"));
        assert_null(json_path(e, "series"));
}

static void test_event_reasons_and_types(void **state) {
        static const char *const reasons[] = { EVENT_REASON_PHASE, EVENT_REASON_BLOCKED, EVENT_REASON_FAILED,
                                               EVENT_REASON_DONE };
        static const char *const names[] = { "DrainerPhase", "DrainerBlocked", "DrainerFailed",
                                             "DrainerDone" };
        _cleanup_(node_rec_freep) struct node_rec *n = node1();

        for (size_t i = 0; i < 4; i++) {
                _cleanup_(cJSON_Deletep) cJSON *e =
                        build(n, i % 2 ? EVENT_TYPE_WARNING : EVENT_TYPE_NORMAL, reasons[i], "m", "h");

                assert_string_equal(json_str(e, "reason"), names[i]);
                assert_string_equal(json_str(e, "type"), i % 2 ? "Warning" : "Normal");
        }
}

static void test_event_optional(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n = node("{\"metadata\":{\"name\":\"node-2\"}}");
        _cleanup_(cJSON_Deletep) cJSON *e = build(n, EVENT_TYPE_WARNING, EVENT_REASON_FAILED, NULL, NULL);

        assert_string_equal(json_str(e, "involvedObject.name"), "node-2");
        assert_null(json_path(e, "involvedObject.uid"));
        assert_null(json_path(e, "message"));
        assert_null(json_path(e, "source.host"));
        assert_string_equal(json_str(e, "source.component"), "drainer");
        assert_null(json_path(e, "reportingInstance"));
        assert_string_equal(json_str(e, "reportingComponent"), "drainer");
}

static void test_event_invalid(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n = node1();
        char *json = NULL, *path = NULL;

        assert_int_equal(event_build_node(n, "Error", EVENT_REASON_PHASE, "m", NOW_USEC, "h", &json, &path),
                         -EINVAL);
        assert_int_equal(event_build_node(n, NULL, EVENT_REASON_PHASE, "m", NOW_USEC, "h", &json, &path),
                         -EINVAL);
        assert_int_equal(event_build_node(n, EVENT_TYPE_NORMAL, "", "m", NOW_USEC, "h", &json, &path),
                         -EINVAL);
        assert_int_equal(event_build_node(n, EVENT_TYPE_NORMAL, NULL, "m", NOW_USEC, "h", &json, &path),
                         -EINVAL);
        assert_null(json);
        assert_null(path);
}

static void test_event_truncation(void **state) {
        _cleanup_(node_rec_freep) struct node_rec *n = node1();
        char msg[EVENT_MESSAGE_MAX + 64], host[EVENT_REPORTING_INSTANCE_MAX + 10];

        /* Long ASCII: exactly the limit. */
        memset(msg, 'a', sizeof msg - 1);
        msg[sizeof msg - 1] = 0;
        {
                _cleanup_(cJSON_Deletep) cJSON *e =
                        build(n, EVENT_TYPE_NORMAL, EVENT_REASON_PHASE, msg, "h");

                assert_int_equal(strlen(json_str(e, "message")), EVENT_MESSAGE_MAX);
        }

        /* Exactly the limit stays whole. */
        msg[EVENT_MESSAGE_MAX] = 0;
        {
                _cleanup_(cJSON_Deletep) cJSON *e =
                        build(n, EVENT_TYPE_NORMAL, EVENT_REASON_PHASE, msg, "h");

                assert_string_equal(json_str(e, "message"), msg);
        }

        /* A 3-byte character (U+20AC) straddling the limit is dropped whole. */
        memset(msg, 'a', sizeof msg - 1);
        msg[sizeof msg - 1] = 0;
        memcpy(msg + EVENT_MESSAGE_MAX - 2, "\xe2\x82\xac", 3);
        {
                _cleanup_(cJSON_Deletep) cJSON *e =
                        build(n, EVENT_TYPE_NORMAL, EVENT_REASON_PHASE, msg, "h");
                const char *m = json_str(e, "message");

                assert_int_equal(strlen(m), EVENT_MESSAGE_MAX - 2);
                assert_int_equal(m[EVENT_MESSAGE_MAX - 3], 'a');
        }

        /* ... and one that ends right at the limit is kept. */
        memcpy(msg + EVENT_MESSAGE_MAX - 3, "\xe2\x82\xac", 3);
        msg[EVENT_MESSAGE_MAX - 3 + 3] = 'b';
        {
                _cleanup_(cJSON_Deletep) cJSON *e =
                        build(n, EVENT_TYPE_NORMAL, EVENT_REASON_PHASE, msg, "h");
                const char *m = json_str(e, "message");

                assert_int_equal(strlen(m), EVENT_MESSAGE_MAX);
                assert_memory_equal(m + EVENT_MESSAGE_MAX - 3, "\xe2\x82\xac", 3);
        }

        /* reportingInstance and source.host stay within validation's 128. */
        memset(host, 'h', sizeof host - 1);
        host[sizeof host - 1] = 0;
        {
                _cleanup_(cJSON_Deletep) cJSON *e =
                        build(n, EVENT_TYPE_NORMAL, EVENT_REASON_PHASE, "m", host);

                assert_int_equal(strlen(json_str(e, "reportingInstance")), EVENT_REPORTING_INSTANCE_MAX);
                assert_int_equal(strlen(json_str(e, "source.host")), EVENT_REPORTING_INSTANCE_MAX);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_event_fields),     cmocka_unit_test(test_event_reasons_and_types),
                cmocka_unit_test(test_event_optional),   cmocka_unit_test(test_event_invalid),
                cmocka_unit_test(test_event_truncation),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
