/* nodeset: -l/--selector validated as labels.Parse and turned into the Node list's
 * labelSelector query (canonical, escaped; an empty selector refused), the names of
 * a list page (sorted, duplicates dropped, an item without a name an error),
 * --max-parallel's range, and the worst exit code of several nodes. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "drainer/base/macro.h"
#include "drainer/drain/nodeset.h"

static void check_path(const char *sel, const char *want) {
        char *path = NULL, *err = NULL;

        assert_int_equal(nodeset_list_path(sel, &path, &err), 0);
        assert_null(err);
        assert_string_equal(path, want);
        free(path);
}

static void check_bad(const char *sel, const char *needle) {
        char *path = NULL, *err = NULL;

        assert_int_equal(nodeset_list_path(sel, &path, &err), -EINVAL);
        assert_null(path);
        assert_non_null(err);
        assert_non_null(strstr(err, needle));
        free(err);
}

static void test_list_path(void **state) {
        check_path("pool=gpu", "/api/v1/nodes?labelSelector=pool%3Dgpu");
        /* canonical: "==" as "=", requirements by key, set values sorted */
        check_path("zone==a,pool in (y,x)",
                   "/api/v1/nodes?labelSelector=pool%20in%20%28x%2Cy%29%2Czone%3Da");
        check_path("!spot", "/api/v1/nodes?labelSelector=%21spot");
        check_path("e2e.drainer.io/batch", "/api/v1/nodes?labelSelector=e2e.drainer.io%2Fbatch");
        check_bad("", "empty selector");
        check_bad("   ", "empty selector");
}

static void test_list_path_invalid(void **state) {
        char *path = NULL, *err = NULL;

        assert_int_equal(nodeset_list_path("pool=", &path, &err), 0); /* the empty value is a value */
        free(path);
        check_bad("pool in (a", "");
        check_bad("-bad=x", "");
        check_bad("a=b=c", "");
        check_bad("a b", "");
}

static void test_pages(void **state) {
        cJSON *p1 =
                cJSON_Parse("[{\"metadata\":{\"name\":\"node-3\"}},{\"metadata\":{\"name\":\"node-1\"}}]");
        cJSON *p2 =
                cJSON_Parse("[{\"metadata\":{\"name\":\"node-1\"}},{\"metadata\":{\"name\":\"node-2\"}}]");
        cJSON *bad = cJSON_Parse("[{\"metadata\":{}}]");
        cJSON *empty = cJSON_Parse("[]");
        char **names = NULL;
        size_t n = 0;

        assert_int_equal(nodeset_add_page(empty, &names, &n), 0);
        nodeset_sort(names, &n);
        assert_int_equal(n, 0);
        assert_int_equal(nodeset_add_page(p1, &names, &n), 0);
        assert_int_equal(nodeset_add_page(p2, &names, &n), 0);
        assert_int_equal(n, 4);
        nodeset_sort(names, &n);
        assert_int_equal(n, 3);
        assert_string_equal(names[0], "node-1");
        assert_string_equal(names[1], "node-2");
        assert_string_equal(names[2], "node-3");
        assert_int_equal(nodeset_add_page(bad, &names, &n), -EBADMSG);
        nodeset_free(names, n);
        cJSON_Delete(p1);
        cJSON_Delete(p2);
        cJSON_Delete(bad);
        cJSON_Delete(empty);
}

static void test_max_parallel(void **state) {
        unsigned v = 0;

        assert_int_equal(nodeset_parse_max_parallel("1", &v), 0);
        assert_int_equal(v, 1);
        assert_int_equal(nodeset_parse_max_parallel("100", &v), 0);
        assert_int_equal(v, 100);
        assert_int_equal(nodeset_parse_max_parallel("0", &v), -EINVAL);
        assert_int_equal(nodeset_parse_max_parallel("101", &v), -EINVAL);
        assert_int_equal(nodeset_parse_max_parallel("-1", &v), -EINVAL);
        assert_int_equal(nodeset_parse_max_parallel("2x", &v), -EINVAL);
        assert_int_equal(nodeset_parse_max_parallel("", &v), -EINVAL);
        assert_int_equal(nodeset_parse_max_parallel("99999999999999999999", &v), -EINVAL);
}

static void test_worst_result(void **state) {
        assert_int_equal(nodeset_worst_result(0, 0), 0);
        assert_int_equal(nodeset_worst_result(0, -EPERM), -EPERM);
        assert_int_equal(nodeset_worst_result(-EPERM, 0), -EPERM);
        assert_int_equal(nodeset_worst_result(-EPERM, -ENOENT), -ENOENT); /* a failure over a refusal */
        assert_int_equal(nodeset_worst_result(-ENOENT, -EPERM), -ENOENT);
        assert_int_equal(nodeset_worst_result(-ENOENT, -EACCES), -ENOENT); /* the first failure stays */
}

static void test_worst_exit(void **state) {
        assert_int_equal(nodeset_worst_exit(0, 0), 0);
        assert_int_equal(nodeset_worst_exit(0, 4), 4);
        assert_int_equal(nodeset_worst_exit(4, 3), 3);
        assert_int_equal(nodeset_worst_exit(3, 4), 3);
        assert_int_equal(nodeset_worst_exit(3, 1), 1);
        /* 11 (--device where no DeviceTaintRule is served) is kept as 7-10 are */
        assert_int_equal(nodeset_worst_exit(0, 11), 11);
        assert_int_equal(nodeset_worst_exit(4, 11), 11);
        assert_int_equal(nodeset_worst_exit(11, 11), 11);
        assert_int_equal(nodeset_worst_exit(11, 7), 1);
        assert_int_equal(nodeset_worst_exit(1, 0), 1);
        assert_int_equal(nodeset_worst_exit(0, 2), 1); /* anything else is an error */
        assert_int_equal(nodeset_worst_exit(4, 4), 4);
        /* an error's own code is kept while it is the only kind of error */
        assert_int_equal(nodeset_worst_exit(0, 7), 7);
        assert_int_equal(nodeset_worst_exit(7, 3), 7);
        assert_int_equal(nodeset_worst_exit(7, 7), 7);
        assert_int_equal(nodeset_worst_exit(8, 0), 8);
        assert_int_equal(nodeset_worst_exit(7, 8), 1);
        assert_int_equal(nodeset_worst_exit(1, 10), 1);
}

static void test_join(void **state) {
        char *names[] = { "node-1", "node-2", "node-3" };
        char buf[32], small[12];

        assert_true(nodeset_join(names, 3, buf, sizeof(buf)));
        assert_string_equal(buf, "node-1 node-2 node-3");
        assert_false(nodeset_join(names, 3, small, sizeof(small))); /* some left out */
        assert_string_equal(small, "node-1 node");
        assert_true(nodeset_join(names, 0, buf, sizeof(buf)));
        assert_string_equal(buf, "");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_list_path),    cmocka_unit_test(test_list_path_invalid),
                cmocka_unit_test(test_pages),        cmocka_unit_test(test_max_parallel),
                cmocka_unit_test(test_worst_result), cmocka_unit_test(test_worst_exit),
                cmocka_unit_test(test_join),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
