/* Unit tests for HTTP status and metav1.Status -> negative errno. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "drainer/kube/kstatus.h"

static void test_http(void **state) {
        assert_int_equal(http_status_to_errno(200), 0);
        assert_int_equal(http_status_to_errno(201), 0);
        assert_int_equal(http_status_to_errno(400), -EINVAL);
        assert_int_equal(http_status_to_errno(422), -EINVAL);
        assert_int_equal(http_status_to_errno(401), -EACCES);
        assert_int_equal(http_status_to_errno(403), -EACCES);
        assert_int_equal(http_status_to_errno(404), -ENOENT);
        assert_int_equal(http_status_to_errno(409), -EBUSY);
        assert_int_equal(http_status_to_errno(410), -ESTALE);
        assert_int_equal(http_status_to_errno(429), -EAGAIN);
        assert_int_equal(http_status_to_errno(500), -EIO);
        assert_int_equal(http_status_to_errno(503), -EIO);
        assert_int_equal(http_status_to_errno(504), -EIO);
        assert_int_equal(http_status_to_errno(301), -EPROTO);
        assert_int_equal(http_status_to_errno(418), -EPROTO);
        assert_int_equal(http_status_to_errno(0), -EPROTO);
}

static int map(const char *json, char **reason, char **message) {
        cJSON *j = cJSON_Parse(json);
        int r;

        assert_non_null(j);
        r = kube_status_to_errno(j, reason, message);
        cJSON_Delete(j);
        return r;
}

static void test_status(void **state) {
        char *reason = (char *)1, *message = (char *)1;

        assert_int_equal(
                map("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                    "\"message\":\"pods \\\"x\\\" not found\",\"reason\":\"NotFound\",\"details\":"
                    "{\"name\":\"x\",\"kind\":\"pods\"},\"code\":404}",
                    &reason, &message),
                -ENOENT);
        assert_string_equal(reason, "NotFound");
        assert_string_equal(message, "pods \"x\" not found");
        free(reason);
        free(message);

        assert_int_equal(
                map("{\"status\":\"Failure\",\"reason\":\"AlreadyExists\",\"code\":409}", NULL, NULL),
                -EEXIST);
        assert_int_equal(map("{\"status\":\"Failure\",\"reason\":\"Conflict\",\"code\":409}", NULL, NULL),
                         -EBUSY);
        assert_int_equal(map("{\"status\":\"Failure\",\"reason\":\"Expired\",\"code\":410}", NULL, NULL),
                         -ESTALE);
        assert_int_equal(
                map("{\"status\":\"Failure\",\"reason\":\"TooManyRequests\",\"code\":429,"
                    "\"message\":\"Cannot evict pod as it would violate the pod's disruption budget.\","
                    "\"details\":{\"causes\":[{\"reason\":\"DisruptionBudget\",\"message\":"
                    "\"The disruption budget web-pdb needs 2 healthy pods and has 2 currently\"}]}}",
                    NULL, NULL),
                -EAGAIN);
        assert_int_equal(map("{\"status\":\"Failure\",\"reason\":\"Forbidden\",\"code\":403}", NULL, NULL),
                         -EACCES);
        assert_int_equal(
                map("{\"status\":\"Failure\",\"reason\":\"Unauthorized\",\"code\":401}", NULL, NULL),
                -EACCES);
        assert_int_equal(map("{\"status\":\"Failure\",\"reason\":\"Invalid\",\"code\":422}", NULL, NULL),
                         -EINVAL);
        assert_int_equal(map("{\"status\":\"Failure\",\"reason\":\"BadRequest\",\"code\":400}", NULL, NULL),
                         -EINVAL);
        assert_int_equal(
                map("{\"status\":\"Failure\",\"reason\":\"InternalError\",\"code\":500}", NULL, NULL), -EIO);
        assert_int_equal(
                map("{\"status\":\"Failure\",\"reason\":\"ServiceUnavailable\",\"code\":503}", NULL, NULL),
                -EIO);
        assert_int_equal(map("{\"status\":\"Failure\",\"code\":418}", NULL, NULL), -EPROTO);
        assert_int_equal(map("{\"status\":\"Failure\",\"code\":200}", NULL, NULL), -EPROTO);
        assert_int_equal(map("{\"status\":\"Success\",\"code\":200}", NULL, NULL), 0);

        /* no code: the reason decides */
        assert_int_equal(map("{\"status\":\"Failure\",\"reason\":\"Expired\"}", NULL, NULL), -ESTALE);
        assert_int_equal(map("{\"status\":\"Failure\",\"reason\":\"Gone\"}", NULL, NULL), -ESTALE);
        assert_int_equal(map("{\"status\":\"Failure\",\"reason\":\"AlreadyExists\"}", NULL, NULL), -EEXIST);
        assert_int_equal(map("{\"status\":\"Failure\",\"reason\":\"Conflict\"}", NULL, NULL), -EBUSY);
        assert_int_equal(map("{\"status\":\"Failure\",\"reason\":\"Whatever\"}", NULL, NULL), -EPROTO);

        /* absent fields come back as NULL */
        reason = message = (char *)1;
        assert_int_equal(map("{}", &reason, &message), -EPROTO);
        assert_null(reason);
        assert_null(message);
        assert_int_equal(map("[]", &reason, &message), -EPROTO);
        assert_null(reason);
        assert_int_equal(kube_status_to_errno(NULL, &reason, &message), -EPROTO);
        assert_null(message);
}

static void test_retry_after(void **state) {
        cJSON *j = cJSON_Parse("{\"status\":\"Failure\",\"reason\":\"TooManyRequests\",\"code\":429,"
                               "\"details\":{\"retryAfterSeconds\":7}}");

        assert_int_equal(kube_status_retry_after_seconds(j), 7);
        cJSON_Delete(j);
        j = cJSON_Parse("{\"code\":429}");
        assert_int_equal(kube_status_retry_after_seconds(j), 0);
        cJSON_Delete(j);
        assert_int_equal(kube_status_retry_after_seconds(NULL), 0);
}

/* apierrors.HasStatusCause: details.causes[].reason (StatusCause.Type's JSON name). */
static void test_has_cause(void **state) {
        cJSON *j = cJSON_Parse(
                "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Forbidden\",\"code\":403,"
                "\"details\":{\"name\":\"held\",\"kind\":\"pods\",\"causes\":[{\"reason\":"
                "\"FieldValueInvalid\"},"
                "{\"reason\":\"NamespaceTerminating\",\"message\":\"namespace x is being terminated\","
                "\"field\":\"metadata.namespace\"}]}}");
        cJSON *plain = cJSON_Parse(
                "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Forbidden\",\"code\":403}");
        cJSON *odd = cJSON_Parse("{\"details\":{\"causes\":{\"reason\":\"NamespaceTerminating\"}}}");

        (void)state;
        assert_non_null(j);
        assert_true(kube_status_has_cause(j, "NamespaceTerminating"));
        assert_true(kube_status_has_cause(j, "FieldValueInvalid"));
        assert_false(kube_status_has_cause(j, "Forbidden"));
        assert_false(kube_status_has_cause(plain, "NamespaceTerminating"));
        assert_false(kube_status_has_cause(odd, "NamespaceTerminating"));
        assert_false(kube_status_has_cause(NULL, "NamespaceTerminating"));
        assert_false(kube_status_has_cause(j, NULL));
        cJSON_Delete(j);
        cJSON_Delete(plain);
        cJSON_Delete(odd);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_http),
                cmocka_unit_test(test_status),
                cmocka_unit_test(test_retry_after),
                cmocka_unit_test(test_has_cause),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
