/* text: UTF-8-safe prefixes (never a cut sequence), one-line messages, trimming, the sorted unique insert. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/text.h"
#include "fakes/test-env.h"

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

static void test_escape_controls(void **state) {
        /* ESC [ 2 J (clear screen), BEL, CR, DEL, the UTF-8 C1 CSI, a stray 8-bit CSI;
         * kept: newlines, tabs escaped, and real UTF-8 (é, €, an emoji) whole. */
        static const char in[] = "a\033[2Jb\007c\rd\x7f|\xc2\x9b"
                                 "31m|\x9b|\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\n\tz";
        char *out = text_escape_controls(in, sizeof(in) - 1);

        assert_non_null(out);
        assert_string_equal(
                out,
                "a\\x1b[2Jb\\x07c\\x0dd\\x7f|\\u009b31m|\\x9b|\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\n\\x09z");
        free(out);
        /* a broken sequence: the lead byte stays, the stray byte after it is escaped */
        out = text_escape_controls("\xe2\x82", 2);
        assert_string_equal(out, "\xe2\\x82");
        free(out);
        out = text_escape_controls("", 0);
        assert_string_equal(out, "");
        free(out);
}

static void test_strip(void **state) {
        char a[] = "  token\n", b[] = "\t\r\n ", c[] = "x", d[] = "a b";

        assert_string_equal(text_strip(a), "token");
        assert_string_equal(text_strip(b), "");
        assert_string_equal(text_strip(c), "x");
        assert_string_equal(text_strip(d), "a b");
}

/* The sorted unique insert the DeviceTaintRule pools and the DRA driver names of a
 * node are collected with: sorted, no duplicate, the max smallest kept. */
static void test_strv_sorted_insert(void **state) {
        const char *v[3] = {};
        size_t n = 0;

        n = strv_sorted_insert(v, n, 3, "m");
        n = strv_sorted_insert(v, n, 3, "c");
        n = strv_sorted_insert(v, n, 3, "x");
        assert_int_equal(n, 3);
        assert_string_equal(v[0], "c");
        assert_string_equal(v[1], "m");
        assert_string_equal(v[2], "x");
        /* there already: not again */
        assert_int_equal(strv_sorted_insert(v, n, 3, "m"), 3);
        assert_string_equal(v[1], "m");
        assert_string_equal(v[2], "x");
        /* full: the largest drops out for a smaller one, a larger one stays out */
        n = strv_sorted_insert(v, n, 3, "a");
        assert_int_equal(n, 3);
        assert_string_equal(v[0], "a");
        assert_string_equal(v[1], "c");
        assert_string_equal(v[2], "m");
        assert_int_equal(strv_sorted_insert(v, n, 3, "z"), 3);
        assert_string_equal(v[2], "m");
        n = strv_sorted_insert(v, n, 3, "d");
        assert_string_equal(v[2], "d");
        /* nothing fits in nothing */
        assert_int_equal(strv_sorted_insert(v, 0, 0, "a"), 0);
        /* one slot: the smallest seen */
        n = strv_sorted_insert(v, 0, 1, "k");
        n = strv_sorted_insert(v, n, 1, "b");
        n = strv_sorted_insert(v, n, 1, "q");
        assert_int_equal(n, 1);
        assert_string_equal(v[0], "b");
}

static void test_plural(void **state) {
        assert_string_equal(text_plural(0, "pod", "pods"), "pods");
        assert_string_equal(text_plural(1, "pod", "pods"), "pod");
        assert_string_equal(text_plural(2, "ResourceClaim", "ResourceClaims"), "ResourceClaims");
        assert_string_equal(text_plural(1, "ResourceClaim", "ResourceClaims"), "ResourceClaim");
}

static void test_distance(void **state) {
        char long_word[70];

        memset(long_word, 'a', sizeof(long_word) - 1);
        long_word[sizeof(long_word) - 1] = 0;
        assert_int_equal(text_distance("", ""), 0);
        assert_int_equal(text_distance("grace", "grace"), 0);
        assert_int_equal(text_distance("", "abc"), 3);
        assert_int_equal(text_distance("grace-perid", "grace-period"), 1); /* insertion */
        assert_int_equal(text_distance("forcee", "force"), 1);             /* deletion */
        assert_int_equal(text_distance("timeuot", "timeout"), 2);          /* a swap is two */
        assert_int_equal(text_distance("kitten", "sitting"), 3);
        assert_int_equal(text_distance(long_word, "a"), SIZE_MAX); /* longer than 64: far */
}

static void test_closest(void **state) {
        static const char *const flags[] = { "grace-period", "force", "timeout", "driver", "drivers" };

        assert_string_equal(text_closest("grace-perid", flags, 5, 2), "grace-period");
        assert_string_equal(text_closest("forse", flags, 5, 2), "force");
        assert_string_equal(text_closest("timeuot", flags, 5, 2), "timeout");
        /* a tie: the first candidate */
        assert_string_equal(text_closest("driverz", flags, 5, 2), "driver");
        assert_null(text_closest("grace", flags, 5, 2)); /* 7 away: no typo of it */
        assert_null(text_closest("force", flags, 0, 2));
        assert_string_equal(text_closest("fxrcx", flags, 5, 2), "force");
        assert_null(text_closest("fxrcx", flags, 5, 1));
}

/* kubectl's switch values: Go's ParseBool, nothing else (yes, on, "" are refused). */
/* The published FNV-1a 64 vectors, and continuing a hash equals hashing the whole. */
static void test_fnv1a(void **state) {
        assert_true(text_fnv1a(TEXT_FNV1A_BASIS, "") == TEXT_FNV1A_BASIS);
        assert_true(text_fnv1a(TEXT_FNV1A_BASIS, "a") == UINT64_C(0xaf63dc4c8601ec8c));
        assert_true(text_fnv1a(TEXT_FNV1A_BASIS, "foobar") == UINT64_C(0x85944171f73967e8));
        assert_true(text_fnv1a(text_fnv1a(TEXT_FNV1A_BASIS, "foo"), "bar") ==
                    text_fnv1a(TEXT_FNV1A_BASIS, "foobar"));
}

static void test_parse_bool(void **state) {
        static const char *const on[] = { "true", "True", "TRUE", "t", "T", "1" };
        static const char *const off[] = { "false", "False", "FALSE", "f", "F", "0" };
        bool b;

        for (size_t i = 0; i < 6; i++) {
                b = false;
                assert_int_equal(text_parse_bool(on[i], &b), 0);
                assert_true(b);
                assert_int_equal(text_parse_bool(off[i], &b), 0);
                assert_false(b);
        }
        b = true;
        assert_int_equal(text_parse_bool("yes", &b), -EINVAL);
        assert_int_equal(text_parse_bool("", &b), -EINVAL);
        assert_int_equal(text_parse_bool("tRUE", &b), -EINVAL);
        assert_int_equal(text_parse_bool(NULL, &b), -EINVAL);
        assert_true(b); /* untouched */
}

/* A word as the shell reads it back: plain when it can be, else single-quoted. */
static void test_shell_word(void **state) {
        static const char *const words[][2] = {
                { "--driver-stop", "--driver-stop" },
                { "label:gpu.example.com/present", "label:gpu.example.com/present" },
                { "", "''" },
                { "a b", "'a b'" },
                { "it's", "'it'\\''s'" },
                { "$(rm)", "'$(rm)'" },
        };

        for (size_t i = 0; i < 6; i++) {
                char *buf = NULL;
                size_t size = 0;
                FILE *f = open_memstream(&buf, &size);

                assert_non_null(f);
                text_put_shell_word(f, words[i][0]);
                assert_int_equal(fclose(f), 0);
                assert_string_equal(buf, words[i][1]);
                free(buf);
        }
}

/* A token formatted into a header (as the client does) and wiped with it leaves no copy
 * in freed memory. The control: asprintf() frees the buffers it outgrew unwiped (glibc
 * 2.36: 100, 201, 403 and 807 bytes here), and the scan finds the probe there, a piece
 * of the token past the first 16 bytes of those chunks, which glibc reuses. */
static void test_printf_secret(void **state) {
        char token[1201], *s;

        if (TEST_UNDER_ASAN) {
                print_message("under AddressSanitizer: skipped (its quarantine keeps freed memory)\n");
                skip();
        }
        test_random_secret(token, sizeof(token));

        s = text_printf("Authorization: Bearer %s", token);
        assert_non_null(s);
        assert_int_equal(strlen(s), 22 + sizeof(token) - 1);
        explicit_bzero(s, strlen(s));
        free(s);
        assert_false(test_memory_holds(token + 200, 32, token, sizeof(token)));

        assert_true(asprintf(&s, "Authorization: Bearer %s", token) > 0);
        explicit_bzero(s, strlen(s));
        free(s);
        assert_true(test_memory_holds(token + 200, 32, token, sizeof(token)));
        explicit_bzero(token, sizeof(token));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_utf8_prefix),
                cmocka_unit_test(test_one_line),
                cmocka_unit_test(test_strip),
                cmocka_unit_test(test_escape_controls),
                cmocka_unit_test(test_strv_sorted_insert),
                cmocka_unit_test(test_plural),
                cmocka_unit_test(test_distance),
                cmocka_unit_test(test_closest),
                cmocka_unit_test(test_fnv1a),
                cmocka_unit_test(test_parse_bool),
                cmocka_unit_test(test_shell_word),
                cmocka_unit_test(test_printf_secret),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
