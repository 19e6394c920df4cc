/* cmd/output: -o yaml prints the -o json document through libyaml (strings that
 * would read back as something else are quoted), -o name prints node/NAME per node,
 * and --color, NO_COLOR and TERM decide colour and the live redraw. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "drainer/base/macro.h"
#include "output.h"

/* What output_print(j, compact) wrote on stdout (malloc'd). */
static char *printed(const char *json, bool compact) {
        cJSON *j = cJSON_Parse(json);
        FILE *f = tmpfile();
        int saved = dup(STDOUT_FILENO);
        char *buf = calloc(1, 65536);
        size_t n;

        assert_non_null(j);
        assert_non_null(f);
        assert_non_null(buf);
        fflush(stdout);
        assert_true(dup2(fileno(f), STDOUT_FILENO) >= 0);
        assert_int_equal(output_print(j, compact), 0);
        fflush(stdout);
        assert_true(dup2(saved, STDOUT_FILENO) >= 0);
        close(saved);
        rewind(f);
        n = fread(buf, 1, 65535, f);
        buf[n] = 0;
        fclose(f);
        cJSON_Delete(j);
        return buf;
}

static void test_yaml(void **state) {
        char *out;

        output_set_doc(OUTPUT_DOC_YAML);
        out = printed("{\"node\": \"n1\", \"result\": \"timeout\", \"changed\": false, \"seconds\": 1.011,"
                      " \"n\": 3, \"yes\": \"true\", \"num\": \"123\", \"when\": \"2026-12-05T10:47:52Z\","
                      " \"empty\": \"\", \"none\": null, \"phases\": [], \"opts\": {},"
                      " \"pods\": [{\"name\": \"a: b\", \"ns\": \"demo\"}], \"off\": \"no\"}",
                      false);
        assert_string_equal(out, "node: n1\n"
                                 "result: timeout\n"
                                 "changed: false\n"
                                 "seconds: 1.011\n"
                                 "'n': 3\n" /* keys too: n and yes are YAML 1.1 bools */
                                 "'yes': 'true'\n"
                                 "num: '123'\n"
                                 "when: '2026-12-05T10:47:52Z'\n"
                                 "empty: ''\n"
                                 "none: null\n"
                                 "phases: []\n"
                                 "opts: {}\n"
                                 "pods:\n"
                                 "- name: 'a: b'\n"
                                 "  ns: demo\n"
                                 "'off': 'no'\n");
        free(out);
        /* a stream (status --watch): each document opens with --- */
        out = printed("{\"a\": 1}", true);
        assert_non_null(strstr(out, "---"));
        assert_non_null(strstr(out, "a: 1\n"));
        free(out);
        output_set_doc(OUTPUT_DOC_JSON);
}

static void test_name(void **state) {
        char *out;

        output_set_doc(OUTPUT_DOC_NAME);
        out = printed("{\"node\": \"n1\", \"result\": \"done\"}", false);
        assert_string_equal(out, "node/n1\n");
        free(out);
        /* status: the node is an object */
        out = printed("{\"node\": {\"name\": \"n2\"}}", false);
        assert_string_equal(out, "node/n2\n");
        free(out);
        /* a List (-l), one item per driver of a node counted once; a rollout's nodes */
        out = printed(
                "{\"kind\": \"List\", \"items\": [{\"node\": \"a\"}, {\"node\": \"b\"}, {\"node\": \"b\"}]}",
                false);
        assert_string_equal(out, "node/a\nnode/b\n");
        free(out);
        out = printed("{\"nodes\": [{\"node\": \"c\"}]}", false);
        assert_string_equal(out, "node/c\n");
        free(out);
        /* nothing about a node (version): nothing */
        out = printed("{\"version\": \"1\"}", false);
        assert_string_equal(out, "");
        free(out);
        output_set_doc(OUTPUT_DOC_JSON);
}

static void test_from_string(void **state) {
        assert_int_equal(output_doc_from_string("yaml"), OUTPUT_DOC_YAML);
        assert_int_equal(output_doc_from_string("name"), OUTPUT_DOC_NAME);
        assert_int_equal(output_doc_from_string("json"), OUTPUT_DOC_JSON);
        assert_true(output_doc_from_string("xml") < 0);
        assert_int_equal(output_color_from_string("never"), OUTPUT_COLOR_NEVER);
        assert_true(output_color_from_string("sometimes") < 0);
}

static void test_color(void **state) {
        int master = posix_openpt(O_RDWR | O_NOCTTY), tty = -1, pipefd[2];

        if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0 ||
            (tty = open(ptsname(master), O_RDWR | O_NOCTTY)) < 0) {
                if (master >= 0)
                        close(master);
                skip();
        }
        assert_int_equal(pipe(pipefd), 0);

        output_set_color(OUTPUT_COLOR_AUTO);
        unsetenv("NO_COLOR");
        setenv("TERM", "xterm", 1);
        assert_true(output_live(tty));
        assert_true(output_color(tty));
        assert_string_equal(output_sgr(tty, "\033[1m"), "\033[1m");
        assert_false(output_live(pipefd[1])); /* not a terminal */
        assert_false(output_color(pipefd[1]));
        assert_string_equal(output_sgr(pipefd[1], "\033[1m"), "");

        /* NO_COLOR: no colour, the redraw stays; "" is as unset */
        setenv("NO_COLOR", "1", 1);
        assert_true(output_live(tty));
        assert_false(output_color(tty));
        assert_string_equal(output_sgr(tty, "\033[1m"), "");
        setenv("NO_COLOR", "", 1);
        assert_true(output_color(tty));
        unsetenv("NO_COLOR");

        /* TERM=dumb or no TERM: neither */
        setenv("TERM", "dumb", 1);
        assert_false(output_live(tty));
        assert_false(output_color(tty));
        unsetenv("TERM");
        assert_false(output_live(tty));

        /* --color=always wins over all of it; never over a terminal */
        setenv("NO_COLOR", "1", 1);
        output_set_color(OUTPUT_COLOR_ALWAYS);
        assert_true(output_live(pipefd[1]));
        assert_true(output_color(pipefd[1]));
        unsetenv("NO_COLOR");
        setenv("TERM", "xterm", 1);
        output_set_color(OUTPUT_COLOR_NEVER);
        assert_false(output_live(tty));
        assert_false(output_color(tty));
        output_set_color(OUTPUT_COLOR_AUTO);

        close(pipefd[0]);
        close(pipefd[1]);
        close(tty);
        close(master);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_yaml),
                cmocka_unit_test(test_name),
                cmocka_unit_test(test_from_string),
                cmocka_unit_test(test_color),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
