/* argval: bounded integers (the ends, signs, junk, overflow) and the table of flags
 * stored as given. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>

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

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_int),
                cmocka_unit_test(test_store),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
