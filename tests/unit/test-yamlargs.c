/* yamlargs: a YAML mapping file as "--key=value" words, each with its file, line
 * and key; lists as one word per item, keys skipped, every error one line that
 * names the file, the line and the key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/yamlargs.h"
#include "fakes/test-env.h"

static char *dir;

static int setup(void **state) {
        dir = test_private_dir("yamlargs");
        return 0;
}

static int teardown(void **state) {
        test_private_dir_remove(dir);
        dir = NULL;
        return 0;
}

static const char *need_duration(const char *key) {
        return strcmp(key, "timeout") == 0 ? "a duration is needed (e.g. 30s)" : NULL;
}

/* Loads yaml written to a file; returns the result, *ret_path the file's path. */
static int load(const char *yaml, const char *const *skip, struct yamlargs *ret, char **ret_error,
                char **ret_path) {
        *ret_path = test_write_file(dir, "c.yaml", yaml);
        return yamlargs_load(*ret_path, skip, need_duration, ret, ret_error);
}

static void assert_word(const struct yamlargs *y, size_t i, const char *word, size_t line, const char *key) {
        assert_true(i < y->n);
        assert_string_equal(y->words[i].word, word);
        assert_int_equal(y->words[i].line, line);
        assert_string_equal(y->words[i].key, key);
        assert_ptr_equal(yamlargs_find(y, y->words[i].word), &y->words[i]);
}

static void test_words(void **state) {
        static const char *const skip[] = { "node", NULL };
        struct yamlargs y;
        char *err = NULL, *path;

        assert_int_equal(load("# drainer\n"
                              "grace-period: 30\n"
                              "force: true\n"
                              "node: n1\n"                          /* skipped */
                              "driver-selector: [app=a, 'app=b']\n" /* one word each */
                              "driver-namespace:\n"
                              "  - ns1\n"
                              "  - ns2\n"
                              "pod-selector: \"\"\n" /* a value: the empty string */
                              "dry-run: false\n",
                              skip, &y, &err, &path),
                         0);
        assert_null(err);
        assert_int_equal(y.n, 8);
        assert_word(&y, 0, "--grace-period=30", 2, "grace-period");
        assert_word(&y, 1, "--force=true", 3, "force");
        assert_word(&y, 2, "--driver-selector=app=a", 5, "driver-selector");
        assert_word(&y, 3, "--driver-selector=app=b", 5, "driver-selector");
        assert_word(&y, 4, "--driver-namespace=ns1", 7, "driver-namespace");
        assert_word(&y, 5, "--driver-namespace=ns2", 8, "driver-namespace");
        assert_word(&y, 6, "--pod-selector=", 9, "pod-selector");
        assert_word(&y, 7, "--dry-run=false", 10, "dry-run");
        assert_string_equal(y.words[0].file, path);
        /* the very pointer, not an equal string */
        assert_null(yamlargs_find(&y, "--force=true"));
        assert_null(yamlargs_find(NULL, y.words[0].word));
        yamlargs_done(&y);
        assert_int_equal(y.n, 0);
        assert_null(y.words);
        yamlargs_done(&y); /* twice: a no-op */
        free(path);
}

static void test_empty_file(void **state) {
        struct yamlargs y;
        char *err = NULL, *path;

        assert_int_equal(load("# nothing\n", NULL, &y, &err, &path), 0);
        assert_int_equal(y.n, 0);
        yamlargs_done(&y);
        free(path);
}

/* Each bad file: its result and its message (%1$s the folder). */
static void test_errors(void **state) {
        static const struct {
                const char *yaml;
                int r;
                const char *message;
        } cases[] = {
                { "force: true\ntimeout:\n", -EINVAL,
                  "%1$s/c.yaml:2: timeout: a duration is needed (e.g. 30s)" },
                { "timeout: ~\n", -EINVAL, "%1$s/c.yaml:1: timeout: a duration is needed (e.g. 30s)" },
                { "a: 1\nb: null\n", -EINVAL, "%1$s/c.yaml:2: b: a value is needed" },
                /* a list item without a value: its own line */
                { "x:\n  - a\n  - ~\n", -EINVAL, "%1$s/c.yaml:3: x: a value is needed" },
                { "- a\n- b\n", -EINVAL, "%1$s/c.yaml:1: a list needs a key" },
                { "just a string\n", -EINVAL,
                  "%1$s/c.yaml:1: the config file must be a mapping of flag names (key: value)" },
                { "a: 1\nb:\n  c: 2\n", -EINVAL, "%1$s/c.yaml:3: b: nested mappings are not config keys" },
                { "a: [[1]]\n", -EINVAL, "%1$s/c.yaml:1: a: a list of lists is not a value" },
                { "a: &x 1\nb: *x\n", -EINVAL, "%1$s/c.yaml:2: b: aliases are not config values" },
                { "\"a=b\": 1\n", -EINVAL, "%1$s/c.yaml:1: \"a=b\" is not a flag name" },
                { "\"\": 1\n", -EINVAL, "%1$s/c.yaml:1: \"\" is not a flag name" },
                /* a tab where YAML wants indentation: libyaml's message and line */
                { "a: 1\nb:\n\t- c\n", -EINVAL,
                  "%1$s/c.yaml:3: found character that cannot start any token" },
                { "a: 1\nb: [c\n", -EINVAL, "%1$s/c.yaml:3: did not find expected ',' or ']'" },
                /* a duplicate key is no error: both words, the flag parser decides */
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct yamlargs y = { .n = 99 };
                char *err = NULL, *path, *want = test_subst_dir(cases[i].message, dir);
                int r = load(cases[i].yaml, NULL, &y, &err, &path);

                if (r != cases[i].r || !err || strcmp(err, want) != 0)
                        fail_msg("case %zu: %d \"%s\", want %d \"%s\"", i, r, err ? err : "(null)",
                                 cases[i].r, want);
                assert_int_equal(y.n, 0);
                assert_null(y.words);
                free(err);
                free(want);
                free(path);
        }
}

static void test_duplicate_keys(void **state) {
        struct yamlargs y;
        char *err = NULL, *path;

        assert_int_equal(load("timeout: 1m\ntimeout: 2m\n", NULL, &y, &err, &path), 0);
        assert_int_equal(y.n, 2);
        assert_word(&y, 0, "--timeout=1m", 1, "timeout");
        assert_word(&y, 1, "--timeout=2m", 2, "timeout");
        yamlargs_done(&y);
        free(path);
}

static void test_skipped_null(void **state) {
        static const char *const skip[] = { "timeout", NULL };
        struct yamlargs y;
        char *err = NULL, *path;

        /* a skipped key is not judged: another verb's to judge */
        assert_int_equal(load("timeout:\nforce: true\n", skip, &y, &err, &path), 0);
        assert_int_equal(y.n, 1);
        assert_word(&y, 0, "--force=true", 2, "force");
        yamlargs_done(&y);
        free(path);
}

static void test_too_many(void **state) {
        char *yaml = calloc(1, 64 * (YAMLARGS_MAX + 2)), *err = NULL, *path, *want;
        struct yamlargs y;
        size_t len = 0;

        assert_non_null(yaml);
        len += (size_t)sprintf(yaml + len, "x:\n");
        for (size_t i = 0; i <= YAMLARGS_MAX; i++)
                len += (size_t)sprintf(yaml + len, "  - v%zu\n", i);
        assert_int_equal(load(yaml, NULL, &y, &err, &path), -E2BIG);
        want = test_asprintf("%s:%d: x: too many settings (at most %d)", path, YAMLARGS_MAX + 2,
                             YAMLARGS_MAX);
        assert_string_equal(err, want);
        free(want);
        free(err);
        free(path);
        free(yaml);
}

static void test_unreadable(void **state) {
        struct yamlargs y;
        char *err = NULL, *path = test_asprintf("%s/missing.yaml", dir), *want;

        assert_int_equal(yamlargs_load(path, NULL, NULL, &y, &err), -ENOENT);
        want = test_asprintf("%s: cannot read the config file: No such file or directory", path);
        assert_string_equal(err, want);
        free(want);
        free(err);
        free(path);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_words),        cmocka_unit_test(test_empty_file),
                cmocka_unit_test(test_errors),       cmocka_unit_test(test_duplicate_keys),
                cmocka_unit_test(test_skipped_null), cmocka_unit_test(test_too_many),
                cmocka_unit_test(test_unreadable),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
