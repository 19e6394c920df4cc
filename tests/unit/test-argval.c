/* argval: bounded integers (the ends, signs, junk, overflow) and the table of flags
 * stored as given. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <string.h>

#include "drainer/base/argval.h"

static void test_int(void **state) {
        long long v = 42;

        (void)state;
        assert_int_equal(argval_int("0", 0, 10, &v), 0);
        assert_int_equal(v, 0);
        assert_int_equal(argval_int("10", 0, 10, &v), 0);
        assert_int_equal(v, 10);
        assert_int_equal(argval_int("-1", -1, 10, &v), 0);
        assert_int_equal(v, -1);
        v = 42;
        assert_int_equal(argval_int("-2", -1, 10, &v), -EINVAL);
        assert_int_equal(argval_int("11", 0, 10, &v), -EINVAL);
        assert_int_equal(argval_int("", 0, 10, &v), -EINVAL);
        assert_int_equal(argval_int("5s", 0, 10, &v), -EINVAL);
        assert_int_equal(argval_int("5%", 0, 10, &v), -EINVAL);
        assert_int_equal(argval_int("x", 0, 10, &v), -EINVAL);
        assert_int_equal(argval_int("99999999999999999999", 0, 10, &v), -EINVAL);
        assert_int_equal(argval_int("99999999999999999999", 0, 9223372036854775807LL, &v), -EINVAL);
        assert_int_equal(v, 42); /* untouched on failure */
}

struct opts {
        const char *name;
        bool on;
        int other;
        const char *label;
};

static const struct argval_field fields[] = {
        ARGVAL_STRING(1, struct opts, name),
        ARGVAL_SWITCH(2, struct opts, on),
        ARGVAL_STRING('l', struct opts, label),
        {},
};

static void test_store(void **state) {
        struct opts o = { .other = 7 };

        (void)state;
        assert_int_equal(argval_store(fields, 1, "a", true, &o), 1);
        assert_string_equal(o.name, "a");
        assert_int_equal(argval_store(fields, 2, NULL, true, &o), 1);
        assert_true(o.on);
        assert_int_equal(argval_store(fields, 2, "false", false, &o), 1);
        assert_false(o.on);
        assert_int_equal(argval_store(fields, 'l', "x=y", true, &o), 1);
        assert_string_equal(o.label, "x=y");
        assert_int_equal(argval_store(fields, 3, "b", true, &o), 0);
        assert_int_equal(argval_store(fields, 0, "b", true, &o), 0);
        assert_string_equal(o.name, "a");
        assert_int_equal(o.other, 7);
}

static void test_percent(void **state) {
        long long v = 7;

        assert_true(argval_percent("10%", &v));
        assert_int_equal(v, 10);
        assert_true(argval_percent("-5%", &v)); /* the caller checks the range */
        assert_int_equal(v, -5);
        assert_false(argval_percent("10", &v));
        assert_false(argval_percent("10%%", &v));
        assert_false(argval_percent("%", &v));
        assert_false(argval_percent("x%", &v));
        assert_false(argval_percent("99999999999999999999%", &v));
        assert_int_equal(v, -5);
}

static void test_verbosity(void **state) {
        int v = 0;

        assert_int_equal(argval_verbosity(NULL, &v), 0); /* -v */
        assert_int_equal(v, 1);
        assert_int_equal(argval_verbosity("v", &v), 0); /* -vv after -v */
        assert_int_equal(v, 3);
        assert_int_equal(argval_verbosity("=6", &v), 0); /* kubectl's levels */
        assert_int_equal(v, 2);
        assert_int_equal(argval_verbosity("2", &v), 0);
        assert_int_equal(v, 1);
        assert_int_equal(argval_verbosity("0", &v), 0);
        assert_int_equal(v, 0);
        assert_int_equal(argval_verbosity("11", &v), -EINVAL);
        assert_int_equal(argval_verbosity("=x", &v), -EINVAL);
        assert_int_equal(v, 0);
        assert_true(argval_is_level("6"));
        assert_true(argval_is_level("10"));
        assert_false(argval_is_level("100"));
        assert_false(argval_is_level("x"));
        assert_false(argval_is_level(""));
        assert_false(argval_is_level(NULL));
}

static void test_argv_scan(void **state) {
        char *argv[] = { "drain",    "--config", "a.yaml", "--out-of-service=true", "--config=b.yaml", "--",
                         "--config", "c.yaml",   NULL };
        char *argv2[] = { "drain", "--out-of-service-after", "5m", "--config", NULL };

        assert_true(argval_argv_has(8, argv, "--out-of-service"));
        assert_false(argval_argv_has(8, argv, "--force"));                     /* after "--": not a flag */
        assert_string_equal(argval_argv_value(8, argv, "--config"), "b.yaml"); /* the last */
        assert_false(argval_argv_has(4, argv2, "--out-of-service"));           /* another flag's prefix */
        assert_null(argval_argv_value(4, argv2, "--config"));                  /* no value after it */
}

static const struct option opts[] = {
        { "grace-period", required_argument, NULL, 1 },
        { "force", no_argument, NULL, 2 },
        { "as", required_argument, NULL, 3 },
        {},
};

static void test_long_option(void **state) {
        bool takes = true;

        assert_ptr_equal(argval_long_option(opts, SIZE_MAX, "--grace-period", &takes), &opts[0]);
        assert_true(takes);
        assert_ptr_equal(argval_long_option(opts, SIZE_MAX, "--grace-period=5", &takes), &opts[0]);
        assert_false(takes);
        assert_ptr_equal(argval_long_option(opts, SIZE_MAX, "--force", &takes), &opts[1]);
        assert_false(takes);
        assert_null(argval_long_option(opts, SIZE_MAX, "--grace", &takes)); /* no abbreviations */
        assert_null(argval_long_option(opts, SIZE_MAX, "-f", &takes));
        assert_null(argval_long_option(opts, 1, "--force", &takes)); /* n bounds it */
        assert_string_equal(argval_closest_option(opts, "forc"), "force");
        assert_string_equal(argval_closest_option(opts, "grace-perod"), "grace-period");
        assert_null(argval_closest_option(opts, "a")); /* never a name of two letters */
        assert_null(argval_closest_option(opts, "something-else"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_percent),   cmocka_unit_test(test_verbosity),
                cmocka_unit_test(test_argv_scan), cmocka_unit_test(test_long_option),
                cmocka_unit_test(test_int),       cmocka_unit_test(test_store),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
