/* buf: appends up to the cap and never past it (-E2BIG, nothing appended), the NUL
 * after the data, clear that keeps or drops the memory, steal, printf, in-place
 * writes; capped arrays; whole-file reads (the cap exactly, one byte over, an empty
 * file, a directory, a missing one); and a secret buffer that leaves no copy of its
 * bytes in freed memory after growing, clearing and freeing (a plain one does, which
 * shows that the scan sees freed memory). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "drainer/base/buf.h"
#include "fakes/test-env.h"

static void test_append_cap(void **state) {
        struct buf b = BUF_INIT(10, false);

        assert_null(b.data);
        assert_int_equal(buf_room(&b), 10);
        assert_int_equal(buf_append(&b, "hello", 5), 0);
        assert_string_equal(b.data, "hello");
        assert_int_equal(b.len, 5);
        assert_int_equal(buf_append(&b, NULL, 0), 0);
        assert_int_equal(buf_append(&b, " world", 6), -E2BIG);
        assert_string_equal(b.data, "hello"); /* nothing appended */
        assert_int_equal(buf_puts(&b, "12345"), 0);
        assert_int_equal(b.len, 10);
        assert_int_equal(buf_room(&b), 0);
        assert_true(b.size <= 11); /* never allocated past the cap and its NUL */
        assert_int_equal(buf_append(&b, "x", 1), -E2BIG);
        assert_string_equal(b.data, "hello12345");
        buf_done(&b);
        assert_null(b.data);
        assert_int_equal(b.len, 0);
        buf_done(NULL);
}

static void test_grow_printf_steal(void **state) {
        struct buf b;
        char *s;
        size_t n;

        buf_init(&b, BUF_CAP_API_BODY, false);
        for (int i = 0; i < 10000; i++)
                assert_int_equal(buf_printf(&b, "%d,", i), 0);
        assert_int_equal(strlen(b.data), b.len);
        assert_true(b.size > b.len);
        assert_int_equal(strncmp(b.data, "0,1,2,", 6), 0);
        assert_non_null(strstr(b.data, ",9999,"));
        /* longer than printf's small buffer */
        assert_int_equal(buf_printf(&b, "%300s|", "x"), 0);
        assert_int_equal(b.data[b.len - 1], '|');
        s = buf_steal(&b, &n);
        assert_non_null(s);
        assert_int_equal(strlen(s), n);
        assert_null(b.data);
        assert_int_equal(b.len, 0);
        assert_int_equal(b.cap, BUF_CAP_API_BODY);
        free(s);
        /* an empty buffer gives "" */
        s = buf_steal(&b, &n);
        assert_string_equal(s, "");
        assert_int_equal(n, 0);
        free(s);
}

static void test_clear_tail(void **state) {
        struct buf b = BUF_INIT(1 << 20, false);
        char *p;

        assert_int_equal(buf_reserve(&b, 100000), 0);
        p = buf_tail(&b);
        memset(p, 'a', 3);
        buf_advance(&b, 3);
        assert_string_equal(b.data, "aaa");
        buf_clear(&b, 1 << 20); /* kept */
        assert_non_null(b.data);
        assert_string_equal(b.data, "");
        assert_int_equal(b.len, 0);
        buf_clear(&b, 4096); /* larger than that: dropped */
        assert_null(b.data);
        assert_int_equal(b.size, 0);
        buf_done(&b);
}

static void test_grow_array(void **state) {
        int *a = NULL;
        size_t alloc = 0;

        assert_int_equal(buf_grow_array(&a, &alloc, 1, sizeof(*a), 100), 0);
        assert_true(alloc >= 1);
        for (size_t i = 0; i < 100; i++) {
                assert_int_equal(buf_grow_array(&a, &alloc, i + 1, sizeof(*a), 100), 0);
                a[i] = (int)i;
        }
        assert_int_equal(alloc, 100);
        assert_int_equal(buf_grow_array(&a, &alloc, 101, sizeof(*a), 100), -E2BIG);
        assert_int_equal(alloc, 100);
        for (size_t i = 0; i < 100; i++)
                assert_int_equal(a[i], (int)i);
        free(a);
}

static void test_buf_read_file(void **state) {
        char *dir = test_private_dir("buf"), *path;
        struct buf b = BUF_INIT(16, true);
        struct stat st;

        path = test_write_file(dir, "exact", "0123456789abcdef");
        assert_int_equal(buf_read_file(&b, path, &st), 0);
        assert_string_equal(b.data, "0123456789abcdef");
        assert_int_equal(st.st_size, 16);
        buf_clear(&b, 0);
        free(path);

        path = test_write_file(dir, "over", "0123456789abcdefg");
        assert_int_equal(buf_read_file(&b, path, NULL), -EFBIG);
        assert_null(b.data);
        free(path);

        path = test_write_file(dir, "empty", "");
        assert_int_equal(buf_read_file(&b, path, NULL), 0);
        assert_non_null(b.data);
        assert_string_equal(b.data, "");
        buf_clear(&b, 0);
        free(path);

        assert_int_equal(buf_read_file(&b, dir, NULL), -EISDIR);
        assert_true(asprintf(&path, "%s/missing", dir) > 0);
        assert_int_equal(buf_read_file(&b, path, NULL), -ENOENT);
        free(path);

        /* Not a regular file: read until its end, the cap still holds. */
        b.cap = 4;
        assert_int_equal(buf_read_file(&b, "/proc/self/status", NULL), -EFBIG);
        b.cap = 1 << 20;
        assert_int_equal(buf_read_file(&b, "/proc/self/status", NULL), 0);
        assert_non_null(strstr(b.data, "Name:"));
        buf_done(&b);
        test_private_dir_remove(dir);
}

/* A secret appended in pieces (so the buffer moves several times), read from a file,
 * cleared and freed: its tail is nowhere in memory afterwards. The same with a plain
 * buffer is found, so the scan sees freed memory at all. glibc reuses the first 16
 * bytes of a freed chunk: the probe is the tail of the secret. */
static void test_secret_wiped(void **state) {
        char secret[4097], *dir, *path;
        struct buf b;

        if (TEST_UNDER_ASAN) {
                print_message("under AddressSanitizer: skipped (its quarantine keeps freed memory)\n");
                skip();
        }
        test_random_secret(secret, sizeof(secret));

        buf_init(&b, BUF_CAP_EXEC_OUTPUT, true);
        for (size_t i = 0; i < sizeof(secret) - 1; i += 64)
                assert_int_equal(buf_append(&b, secret + i, 64), 0);
        assert_int_equal(buf_printf(&b, "%s", secret), 0);
        buf_clear(&b, SIZE_MAX);
        assert_false(test_memory_holds(secret + 4000, 32, secret, sizeof(secret)));
        for (size_t i = 0; i < sizeof(secret) - 1; i += 100)
                assert_int_equal(buf_append(&b, secret + i, MIN((size_t)100, sizeof(secret) - 1 - i)), 0);
        buf_done(&b);
        assert_false(test_memory_holds(secret + 4000, 32, secret, sizeof(secret)));

        dir = test_private_dir("buf-secret");
        path = test_write_file(dir, "token", secret);
        buf_init(&b, BUF_CAP_TOKEN_FILE, true);
        assert_int_equal(buf_read_file(&b, path, NULL), 0);
        assert_int_equal(b.len, sizeof(secret) - 1);
        buf_done(&b);
        assert_false(test_memory_holds(secret + 4000, 32, secret, sizeof(secret)));
        free(path);
        test_private_dir_remove(dir);

        /* The control: a plain buffer freed unwiped leaves its bytes behind. */
        buf_init(&b, BUF_CAP_EXEC_OUTPUT, false);
        assert_int_equal(buf_append(&b, secret, sizeof(secret) - 1), 0);
        buf_done(&b);
        assert_true(test_memory_holds(secret + 4000, 32, secret, sizeof(secret)));
        explicit_bzero(secret, sizeof(secret));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_append_cap),    cmocka_unit_test(test_grow_printf_steal),
                cmocka_unit_test(test_clear_tail),    cmocka_unit_test(test_grow_array),
                cmocka_unit_test(test_buf_read_file), cmocka_unit_test(test_secret_wiped),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
