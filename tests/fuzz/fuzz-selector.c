/* Fuzzes the label selector parser (selector.h). The input is a selector
 * string, optionally followed by a NUL byte and a label set, one "key=value"
 * per line. A selector that parses must print (selector_to_string) as a string
 * that parses again and prints the same, with as many requirements, and both
 * must agree on whether the label set matches. A refused one gets -EINVAL and
 * a one-line message. */
#include <errno.h>

#include "drainer/base/selector.h"
#include "fuzz-common.h"

#define MAX_LABELS 32

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        fuzz_setup_logging();
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct selector *sel = NULL, *again = NULL;
        char *in = fuzz_strndup(data, size), *err = NULL, *s1 = NULL, *s2 = NULL;
        struct kv labels[MAX_LABELS];
        size_t n_labels = 0, sel_len = strlen(in);
        int r;

        /* The label set after the first NUL: "k=v" lines; invalid keys are left out
         * (label sets come from the API and are valid). */
        if (sel_len < size) {
                char *save = NULL;

                for (char *line = strtok_r(in + sel_len + 1, "\n", &save); line && n_labels < MAX_LABELS;
                     line = strtok_r(NULL, "\n", &save)) {
                        char *eq = strchr(line, '=');
                        bool dup = false;

                        if (!eq)
                                continue;
                        *eq = 0;
                        if (!label_key_is_valid(line) || !label_value_is_valid(eq + 1))
                                continue;
                        for (size_t i = 0; i < n_labels; i++)
                                dup |= streq(labels[i].key, line);
                        if (dup)
                                continue;
                        labels[n_labels++] = (struct kv){ line, eq + 1 };
                }
        }

        r = selector_parse(in, &sel, &err);
        fuzz_check(r == 0 || r == -EINVAL || r == -ENOMEM, "selector_parse returned %d", r);
        if (r < 0) {
                fuzz_check(!sel, "a failed parse returned a selector");
                fuzz_check(err || r == -ENOMEM, "-EINVAL without a message");
                fuzz_check(fuzz_one_line(err), "message is not one line: %s", err);
                goto out;
        }
        fuzz_check(sel && !err, "parse succeeded with a message or without a selector");

        r = selector_to_string(sel, &s1);
        fuzz_check(r == 0 && s1, "selector_to_string returned %d", r);
        r = selector_parse(s1, &again, &err);
        fuzz_check(r == 0, "\"%s\" printed as \"%s\", which does not parse: %s", in, s1, strna(err));
        r = selector_to_string(again, &s2);
        fuzz_check(r == 0 && s2, "selector_to_string returned %d", r);
        fuzz_check(streq(s1, s2), "\"%s\" printed as \"%s\", which prints as \"%s\"", in, s1, s2);
        fuzz_check(selector_n_requirements(sel) == selector_n_requirements(again),
                   "\"%s\": %zu requirements, \"%s\": %zu", in, selector_n_requirements(sel), s1,
                   selector_n_requirements(again));
        fuzz_check(selector_is_empty(sel) == selector_is_empty(again), "emptiness differs");
        fuzz_check(selector_is_empty(sel) == (*s1 == 0), "empty selector \"%s\" printed as \"%s\"", in, s1);
        fuzz_check(selector_matches(sel, labels, n_labels) == selector_matches(again, labels, n_labels),
                   "\"%s\" and its printed form \"%s\" disagree on a label set", in, s1);
        fuzz_check(!selector_is_empty(sel) || selector_matches(sel, labels, n_labels),
                   "the empty selector did not match");

        /* Also as one entry of a list. */
        {
                const char *strv[] = { in, s1, NULL };
                struct selector **v = NULL;
                size_t n = 0;
                char *e = NULL;

                r = selectors_parse_strv(strv, &v, &n, &e);
                fuzz_check(r == 0 && n == 2, "selectors_parse_strv returned %d (%zu)", r, n);
                selectors_free(v, n);
                free(e);
        }

out:
        fuzz_check(!selector_matches(NULL, labels, n_labels), "a NULL selector matched");
        selector_free(sel);
        selector_free(again);
        free(s1);
        free(s2);
        free(err);
        free(in);
        return 0;
}
