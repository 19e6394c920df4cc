/* text: UTF-8-safe prefixes (never a cut sequence), one-line messages, trimming. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "drainer/text.h"

static void test_utf8_prefix(void **state) {
        /* "é" is 2 bytes, "€" 3, "𝄞" 4. */
        const char *s = "a\xc3\xa9\xe2\x82\xac\xf0\x9d\x84\x9e";

        assert_int_equal(utf8_prefix("", 0), 0);
        assert_int_equal(utf8_prefix("abc", 0), 0);
        assert_int_equal(utf8_prefix("abc", 3), 3);
        assert_int_equal(utf8_prefix("abc", 10), 3);
        assert_int_equal(utf8_prefix(s, 1), 1);
        assert_int_equal(utf8_prefix(s, 2), 1); /* would cut é */
        assert_int_equal(utf8_prefix(s, 3), 3);
        assert_int_equal(utf8_prefix(s, 4), 3);
        assert_int_equal(utf8_prefix(s, 5), 3); /* would cut € */
        assert_int_equal(utf8_prefix(s, 6), 6);
        for (size_t m = 7; m < 10; m++)
                assert_int_equal(utf8_prefix(s, m), 6); /* would cut 𝄞 */
        assert_int_equal(utf8_prefix(s, 10), 10);
}

static void test_one_line(void **state) {
        char s[] = "a\nb\rc\td\x7f"
                   "e\x1b[31m",
             empty[] = "";

        assert_string_equal(text_one_line(s), "a?b?c?d?e?[31m");
        assert_string_equal(text_one_line(empty), "");
        assert_null(text_one_line(NULL));
}

static void test_strip(void **state) {
        char a[] = "  token\n", b[] = "\t\r\n ", c[] = "x", d[] = "a b";

        assert_string_equal(text_strip(a), "token");
        assert_string_equal(text_strip(b), "");
        assert_string_equal(text_strip(c), "x");
        assert_string_equal(text_strip(d), "a b");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_utf8_prefix),
                cmocka_unit_test(test_one_line),
                cmocka_unit_test(test_strip),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
