/* json: the one rule for "" (absent, in every string accessor), NULL and wrong types
 * at every step, member names with dots, integers out of range, the checked string
 * accessor, paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <math.h>

#include "drainer/base/json.h"

static const char *const doc =
        "{\"metadata\": {\"name\": \"n\", \"namespace\": \"\", \"uid\": 7,"
        " \"annotations\": {\"kubernetes.io/config.mirror\": \"\", \"a.b\": \"x\"}},"
        " \"spec\": {\"unschedulable\": true, \"off\": false, \"n\": 42, \"neg\": -3.9,"
        " \"big\": 1e30, \"inf\": 1e999, \"list\": [1, 2, 3], \"nil\": null}}";

static void test_empty_is_absent(void **state) {
        _cleanup_(cJSON_Deletep) cJSON *j = cJSON_Parse(doc);
        const cJSON *meta = json_get(j, "metadata"), *ann = json_get_obj(meta, "annotations");

        assert_non_null(j);
        assert_string_equal(json_get_str(meta, "name"), "n");
        assert_null(json_get_str(meta, "namespace")); /* "" */
        assert_null(json_get_str(meta, "missing"));
        assert_null(json_get_str(meta, "uid")); /* a number */
        assert_string_equal(json_str(j, "metadata.name"), "n");
        assert_null(json_str(j, "metadata.namespace")); /* the same rule on paths */
        /* "" as a value of its own: the member itself */
        assert_non_null(json_get(ann, "kubernetes.io/config.mirror"));
        assert_true(cJSON_IsString(json_get(ann, "kubernetes.io/config.mirror")));
        assert_string_equal(json_get_str(ann, "a.b"), "x"); /* a dot is part of the name */
        assert_null(json_str(ann, "a.b"));                  /* ... not on a path */
}

static void test_null_and_types(void **state) {
        _cleanup_(cJSON_Deletep) cJSON *j = cJSON_Parse(doc);
        const cJSON *spec = json_get(j, "spec");
        int64_t v = 99;
        double d;

        assert_null(json_get(NULL, "x"));
        assert_null(json_get(json_get(spec, "list"), "x")); /* not an object */
        assert_null(json_get_obj(spec, "list"));
        assert_non_null(json_get_arr(spec, "list"));
        assert_null(json_get_arr(NULL, "list"));
        assert_int_equal(json_count(json_get_arr(spec, "list")), 3);
        assert_int_equal(json_count(NULL), 0);
        assert_int_equal(json_count(json_get(spec, "n")), 0);
        assert_true(json_get_true(spec, "unschedulable"));
        assert_false(json_get_true(spec, "off"));
        assert_false(json_get_true(spec, "n"));
        assert_false(json_get_true(NULL, "n"));
        assert_true(json_get_int64(spec, "n", &v));
        assert_int_equal(v, 42);
        assert_true(json_get_int64(spec, "neg", &v));
        assert_int_equal(v, -3);
        v = 99;
        assert_false(json_get_int64(spec, "big", &v)); /* out of range: unset */
        assert_false(json_get_int64(spec, "inf", &v));
        assert_false(json_get_int64(spec, "nil", &v));
        assert_int_equal(v, 99);
        assert_true(json_get_double(spec, "inf", &d));
        assert_true(isinf(d));
        assert_false(json_get_double(spec, "list", &d));
        /* the path accessors clamp instead */
        assert_int_equal(json_int(j, "spec.big", 0), INT64_MAX);
        assert_int_equal(json_int(j, "spec.missing", -1), -1);
        assert_true(json_bool(j, "spec.unschedulable", false));
        assert_true(json_bool(j, "spec.n", true));
        assert_null(json_path(j, "spec.list.x"));
}

static void test_checked(void **state) {
        _cleanup_(cJSON_Deletep) cJSON *j = cJSON_Parse(doc);
        const cJSON *meta = json_get(j, "metadata"), *spec = json_get(j, "spec");
        const char *s = "untouched";

        assert_int_equal(json_get_str_checked(meta, "name", &s), 0);
        assert_string_equal(s, "n");
        assert_int_equal(json_get_str_checked(meta, "namespace", &s), 0);
        assert_null(s);
        assert_int_equal(json_get_str_checked(meta, "missing", &s), 0);
        assert_null(s);
        assert_int_equal(json_get_str_checked(spec, "nil", &s), 0);
        assert_null(s);
        assert_int_equal(json_get_str_checked(meta, "uid", &s), -EINVAL);
        assert_int_equal(json_get_str_checked(spec, "list", &s), -EINVAL);
        assert_int_equal(json_get_str_checked(NULL, "x", &s), 0);
        assert_null(s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_empty_is_absent),
                cmocka_unit_test(test_null_and_types),
                cmocka_unit_test(test_checked),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
