/* Unit tests for the label selector parser/matcher, against the behaviour of
 * apimachinery's labels.Parse (including its corner cases). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "drainer/base/selector.h"

/* Parses s, checks its canonical form. */
static void roundtrip(const char *s, const char *canonical) {
        _cleanup_(selector_freep) struct selector *sel = NULL, *again = NULL;
        char *out = NULL, *out2 = NULL, *err = NULL;

        if (selector_parse(s, &sel, &err) < 0)
                fail_msg("\"%s\" failed to parse: %s", s, err);
        assert_int_equal(selector_to_string(sel, &out), 0);
        if (!streq(out, canonical))
                fail_msg("\"%s\" printed as \"%s\", expected \"%s\"", s, out, canonical);
        /* the canonical form parses to itself */
        assert_int_equal(selector_parse(out, &again, NULL), 0);
        assert_int_equal(selector_to_string(again, &out2), 0);
        assert_string_equal(out, out2);
        free(out);
        free(out2);
}

static void bad(const char *s) {
        struct selector *sel = NULL;
        char *err = NULL;
        int r = selector_parse(s, &sel, &err);

        if (r != -EINVAL)
                fail_msg("\"%s\" parsed (r=%d), expected an error", s, r);
        assert_null(sel);
        assert_non_null(err);
        assert_non_null(strstr(err, "invalid selector"));
        free(err);
}

static void test_parse(void **state) {
        roundtrip("", "");
        roundtrip("   ", "");
        roundtrip("a=b", "a=b");
        roundtrip("a==b", "a=b");
        roundtrip("a!=b", "a!=b");
        roundtrip("z=c,x=a,y=b", "x=a,y=b,z=c");
        roundtrip("  x = a ,\ty != b  ", "x=a,y!=b");
        roundtrip("x in (c,a,b)", "x in (a,b,c)");
        roundtrip("x notin ( b , a , a )", "x notin (a,b)");
        roundtrip("x", "x");
        roundtrip("!x", "!x");
        roundtrip(" ! x ", "!x");
        roundtrip("x>1", "x>1");
        roundtrip("x < 10", "x<10");
        roundtrip("x=", "x=");
        roundtrip("x==", "x=");
        roundtrip("x=,y", "x=,y");
        roundtrip("x in ()", "x in ()");
        roundtrip("x in (a,)", "x in (,a)");
        roundtrip("x in (,a)", "x in (,a)");
        roundtrip("x in (,)", "x in ()");
        roundtrip("x in (a,,b)", "x in (,a,b)");
        roundtrip("x in (in,notin)", "x in (in,notin)");
        roundtrip("x=in", "x=in");
        roundtrip("app.kubernetes.io/component=kubeletplugin", "app.kubernetes.io/component=kubeletplugin");
        roundtrip("nvidia-dra-driver-gpu-component=kubelet-plugin,!example.com/paused",
                  "!example.com/paused,nvidia-dra-driver-gpu-component=kubelet-plugin");
        roundtrip("a.b_c-d=E.f_G-9", "a.b_c-d=E.f_G-9");
        roundtrip("x=1,x!=2", "x=1,x!=2");
}

static void test_parse_errors(void **state) {
        bad("x=a=b");
        bad("x in a");
        bad("x in (a");
        bad("x in (a b)");
        bad("x in (a,,)");
        bad("x in (,,)");
        bad("x notin");
        bad("x>a");
        bad("x>-1"); /* an integer, but not a valid label value */
        bad("x=a b");
        bad("!x=a");
        bad("!");
        bad(",x");
        bad("x,");
        bad("x,,y");
        bad("x=!");
        bad("(");
        bad("x = a , ");
        bad("in=a");
        bad("notin");
        bad("-x=a");
        bad("x-=a");
        bad("a/b/c=d");
        bad("/x=a");
        bad("Foo.com/x=y");
        bad("foo..com/x=y");
        bad("x=-a");
        bad("x=a$");
        bad("x=0123456789012345678901234567890123456789012345678901234567890123"); /* 64 */
        bad("x0123456789012345678901234567890123456789012345678901234567890123=a");
        bad("x=>1");
        bad("x!");
        bad("x in (a)(b)");
        bad("x in (a),");

        /* the error text is optional */
        {
                struct selector *sel = NULL;
                assert_int_equal(selector_parse("x in", &sel, NULL), -EINVAL);
                assert_null(sel);
        }
}

static void test_validation(void **state) {
        assert_true(label_key_is_valid("a"));
        assert_true(label_key_is_valid("example.com/a-b_c.d"));
        assert_true(label_key_is_valid("kubernetes.io/hostname"));
        assert_true(label_key_is_valid("0"));
        assert_false(label_key_is_valid(""));
        assert_false(label_key_is_valid("a/"));
        assert_false(label_key_is_valid("-a"));
        assert_false(label_key_is_valid("Example.com/a"));
        assert_false(label_key_is_valid("ex_ample.com/a"));
        assert_false(label_key_is_valid("example-.com/a"));
        assert_false(label_key_is_valid(NULL));
        assert_true(label_value_is_valid(""));
        assert_true(label_value_is_valid("v1.2_3-X"));
        assert_true(label_value_is_valid("012345678901234567890123456789012345678901234567890123456789012"));
        assert_false(
                label_value_is_valid("0123456789012345678901234567890123456789012345678901234567890123"));
        assert_false(label_value_is_valid("a/b"));
        assert_false(label_value_is_valid("a."));
}

static bool matches(const char *s, const struct kv *labels, size_t n) {
        _cleanup_(selector_freep) struct selector *sel = NULL;

        assert_int_equal(selector_parse(s, &sel, NULL), 0);
        return selector_matches(sel, labels, n);
}

static void test_matches(void **state) {
        static const struct kv labels[] = {
                { "app", "web" },
                { "tier", "fe" },
                { "n", "5" },
                { "empty", "" },
                { "example.com/role", "gpu" },
        };
        size_t n = ELEMENTSOF(labels);

        assert_true(matches("", labels, n));
        assert_true(matches("", NULL, 0));
        assert_true(matches("app=web", labels, n));
        assert_true(matches("app==web", labels, n));
        assert_false(matches("app=db", labels, n));
        assert_true(matches("app!=db", labels, n));
        assert_false(matches("app!=web", labels, n));
        assert_true(matches("missing!=x", labels, n));
        assert_true(matches("app in (db,web)", labels, n));
        assert_false(matches("app in (db)", labels, n));
        assert_false(matches("missing in (db)", labels, n));
        assert_false(matches("app notin (web)", labels, n));
        assert_true(matches("app notin (db)", labels, n));
        assert_true(matches("missing notin (x)", labels, n));
        assert_true(matches("app", labels, n));
        assert_false(matches("missing", labels, n));
        assert_false(matches("!app", labels, n));
        assert_true(matches("!missing", labels, n));
        assert_true(matches("n>4", labels, n));
        assert_false(matches("n>5", labels, n));
        assert_true(matches("n<6", labels, n));
        assert_false(matches("app>1", labels, n));
        assert_false(matches("missing<1", labels, n));
        assert_true(matches("empty=", labels, n));
        assert_true(matches("empty in ()", labels, n));
        assert_false(matches("missing=", labels, n));
        assert_true(matches("app=web,tier=fe,example.com/role=gpu", labels, n));
        assert_false(matches("app=web,tier=be", labels, n));
        assert_false(matches("app=web", NULL, 0));
        assert_true(matches("!app", NULL, 0));

        /* a NULL selector never matches */
        assert_false(selector_matches(NULL, labels, n));
}

static void test_kv_get(void **state) {
        static const struct kv labels[] = { { "a", "1" }, { "b", "" } };

        assert_string_equal(kv_get(labels, 2, "a"), "1");
        assert_string_equal(kv_get(labels, 2, "b"), "");
        assert_null(kv_get(labels, 2, "c"));
        assert_null(kv_get(NULL, 0, "a"));
}

static void test_strv(void **state) {
        static const char *const good[] = { "a=b", "c in (d)", "", NULL };
        static const char *const worse[] = { "a=b", "c in d", NULL };
        static const char *const none[] = { NULL };
        struct selector **v = NULL;
        size_t n = 99;
        char *err = NULL;

        assert_int_equal(selectors_parse_strv(good, &v, &n, NULL), 0);
        assert_int_equal(n, 3);
        assert_int_equal(selector_n_requirements(v[0]), 1);
        assert_true(selector_is_empty(v[2]));
        selectors_free(v, n);

        v = NULL;
        n = 99;
        assert_int_equal(selectors_parse_strv(worse, &v, &n, &err), -EINVAL);
        assert_null(v);
        assert_int_equal(n, 99);
        assert_non_null(strstr(err, "c in d"));
        free(err);

        assert_int_equal(selectors_parse_strv(none, &v, &n, NULL), 0);
        assert_int_equal(n, 0);
        selectors_free(v, n);
        selectors_free(NULL, 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse),      cmocka_unit_test(test_parse_errors),
                cmocka_unit_test(test_validation), cmocka_unit_test(test_matches),
                cmocka_unit_test(test_kv_get),     cmocka_unit_test(test_strv),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
