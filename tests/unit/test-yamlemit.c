/* yamlemit: a cJSON document written as YAML by libyaml: block mappings and
 * sequences, strings that would read back as something else quoted, every string
 * reading back as itself (line breaks, control characters), numbers as cJSON
 * prints them, a document nested too deep refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "drainer/base/yamlemit.h"

/* What json_to_yaml() wrote for the JSON text json (malloc'd). */
static char *emitted(const char *json, bool explicit_start) {
        cJSON *j = cJSON_Parse(json);
        FILE *f = tmpfile();
        char *buf = calloc(1, 65536), *err = NULL;
        size_t n;

        assert_non_null(j);
        assert_non_null(f);
        assert_non_null(buf);
        assert_int_equal(json_to_yaml(j, f, explicit_start, &err), 0);
        assert_null(err);
        rewind(f);
        n = fread(buf, 1, 65535, f);
        buf[n] = 0;
        fclose(f);
        cJSON_Delete(j);
        return buf;
}

static void test_nested(void **state) {
        char *out = emitted(
                "{\"node\": \"n1\", \"pods\": [{\"name\": \"a\", \"claims\": [\"c1\", \"c2\"]},"
                " {\"name\": \"b\", \"claims\": []}], \"opts\": {}, \"deep\": {\"x\": {\"y\": [[1]]}}}",
                false);

        assert_string_equal(out, "node: n1\n"
                                 "pods:\n"
                                 "- name: a\n"
                                 "  claims:\n"
                                 "  - c1\n"
                                 "  - c2\n"
                                 "- name: b\n"
                                 "  claims: []\n"
                                 "opts: {}\n"
                                 "deep:\n"
                                 "  x:\n"
                                 "    'y':\n" /* y is a YAML 1.1 bool */
                                 "    - - 1\n");
        free(out);
}

static void test_scalars(void **state) {
        char *out = emitted("{\"t\": true, \"f\": false, \"none\": null, \"int\": 3, \"neg\": -42,"
                            " \"frac\": 1.011, \"big\": 1e20, \"third\": 0.3333333333333333}",
                            false);

        assert_string_equal(out, "t: true\n"
                                 "f: false\n"
                                 "none: null\n"
                                 "int: 3\n"
                                 "neg: -42\n"
                                 "frac: 1.011\n"
                                 "big: 1e+20\n"
                                 "third: 0.33333333333333331\n");
        free(out);
}

static void test_quoting(void **state) {
        char *out = emitted("{\"yes\": \"yes\", \"one\": \"1\", \"empty\": \"\", \"null\": \"null\","
                            " \"tilde\": \"~\", \"off\": \"Off\", \"when\": \"2026-12-05T10:47:52Z\","
                            " \"neg\": \"-5\", \"dot\": \".5\", \"inf\": \".inf\", \"plain\": \"a-b\","
                            " \"colon\": \"a: b\"}",
                            false);

        /* keys too: yes and null would read back as a bool and a null */
        assert_string_equal(out, "'yes': 'yes'\n"
                                 "one: '1'\n"
                                 "empty: ''\n"
                                 "'null': 'null'\n"
                                 "tilde: '~'\n"
                                 "'off': 'Off'\n"
                                 "when: '2026-12-05T10:47:52Z'\n"
                                 "neg: '-5'\n"
                                 "dot: '.5'\n"
                                 "'inf': '.inf'\n"
                                 "plain: a-b\n"
                                 "colon: 'a: b'\n");
        free(out);
}

/* The scalars of a YAML text, read back by libyaml, as a cJSON array of
 * [value, plain] pairs. */
static cJSON *read_back(const char *yaml) {
        yaml_parser_t p;
        yaml_event_t ev;
        cJSON *a = cJSON_CreateArray();
        bool done = false;

        assert_true(yaml_parser_initialize(&p));
        yaml_parser_set_input_string(&p, (const unsigned char *)yaml, strlen(yaml));
        while (!done) {
                assert_true(yaml_parser_parse(&p, &ev));
                if (ev.type == YAML_SCALAR_EVENT) {
                        cJSON *pair = cJSON_CreateArray();

                        cJSON_AddItemToArray(pair, cJSON_CreateString((const char *)ev.data.scalar.value));
                        cJSON_AddItemToArray(
                                pair, cJSON_CreateBool(ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE));
                        cJSON_AddItemToArray(a, pair);
                }
                done = ev.type == YAML_STREAM_END_EVENT;
                yaml_event_delete(&ev);
        }
        yaml_parser_delete(&p);
        return a;
}

static void test_strings_read_back(void **state) {
        static const char *const strings[] = {
                "two\nlines",
                "trailing\n",
                "\x01\x1b[31mred",
                "tab\there",
                " lead",
                "trail ",
                "# not a comment",
                "- not a list",
                "{not: flow}",
                "quote's",
                "\"dq\"",
                "é €",
                "yes",
                "1",
                "",
                "0x1f",
                "1:20",
                "+1",
                "null",
        };

        for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++) {
                cJSON *doc = cJSON_CreateArray(), *back;
                FILE *f = tmpfile();
                char buf[4096] = "", *err = NULL;
                const cJSON *pair;

                cJSON_AddItemToArray(doc, cJSON_CreateString(strings[i]));
                assert_int_equal(json_to_yaml(doc, f, true, &err), 0);
                rewind(f);
                buf[fread(buf, 1, sizeof(buf) - 1, f)] = 0;
                fclose(f);
                assert_memory_equal(buf, "---", 3); /* explicit_start */
                back = read_back(buf);
                assert_int_equal(cJSON_GetArraySize(back), 1);
                pair = cJSON_GetArrayItem(back, 0);
                if (strcmp(cJSON_GetArrayItem(pair, 0)->valuestring, strings[i]) != 0)
                        fail_msg("string %zu read back as \"%s\" from \"%s\"", i,
                                 cJSON_GetArrayItem(pair, 0)->valuestring, buf);
                /* a plain scalar would be typed by the reader: only for text that is no
                 * bool, null or number */
                if (i >= 12)
                        assert_false(cJSON_IsTrue(cJSON_GetArrayItem(pair, 1)));
                cJSON_Delete(back);
                cJSON_Delete(doc);
        }
}

static void test_nan_is_null(void **state) {
        cJSON *doc = cJSON_CreateObject();
        FILE *f = tmpfile();
        char buf[256] = "";

        cJSON_AddNumberToObject(doc, "x", 0.0 / 0.0);
        assert_int_equal(json_to_yaml(doc, f, false, NULL), 0);
        rewind(f);
        buf[fread(buf, 1, sizeof(buf) - 1, f)] = 0;
        fclose(f);
        assert_string_equal(buf, "x: null\n");
        cJSON_Delete(doc);
}

static void test_too_deep(void **state) {
        cJSON *root = cJSON_CreateArray(), *c = root;
        FILE *f = tmpfile();
        char *err = NULL;

        for (int i = 0; i < 70; i++) {
                cJSON *next = cJSON_CreateArray();

                cJSON_AddItemToArray(c, next);
                c = next;
        }
        assert_int_equal(json_to_yaml(root, f, false, &err), -E2BIG);
        assert_string_equal(err, "the document is nested too deep");
        free(err);
        fclose(f);
        cJSON_Delete(root);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_nested),      cmocka_unit_test(test_scalars),
                cmocka_unit_test(test_quoting),     cmocka_unit_test(test_strings_read_back),
                cmocka_unit_test(test_nan_is_null), cmocka_unit_test(test_too_deep),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
