/* Command-line values: bounded integers and the table of flags stored as given
 * (argval.h). Owns nothing; logs nothing. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/argval.h"
#include "drainer/base/macro.h"
#include "drainer/base/text.h"

int argval_int(const char *s, long long min, long long max, long long *ret) {
        long long v;
        char *end;

        errno = 0;
        v = strtoll(s, &end, 10);
        if (errno || end == s || *end || v < min || v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

bool argval_percent(const char *s, long long *ret) {
        long long v;
        char *end;

        errno = 0;
        v = strtoll(s, &end, 10);
        if (errno || end == s || end[0] != '%' || end[1])
                return false;
        *ret = v;
        return true;
}

int argval_verbosity(const char *arg, int *verbose) {
        long long level;

        if (!arg) {
                (*verbose)++;
                return 0;
        }
        if (strspn(arg, "v") == strlen(arg)) {
                *verbose += 1 + (int)strlen(arg);
                return 0;
        }
        if (argval_int(arg + (*arg == '='), 0, 10, &level) < 0)
                return -EINVAL;
        *verbose = level >= 4 ? 2 : level >= 1 ? 1 : 0;
        return 0;
}

bool argval_is_level(const char *s) {
        return s && *s && strspn(s, "0123456789") == strlen(s) && strlen(s) <= 2;
}

bool argval_argv_has(int argc, char **argv, const char *flag) {
        size_t l = strlen(flag);

        for (int i = 1; i < argc && !streq(argv[i], "--"); i++)
                if (strncmp(argv[i], flag, l) == 0 && (argv[i][l] == 0 || argv[i][l] == '='))
                        return true;
        return false;
}

const char *argval_argv_value(int argc, char **argv, const char *flag) {
        size_t l = strlen(flag);
        const char *value = NULL;

        for (int i = 1; i < argc && !streq(argv[i], "--"); i++)
                if (streq(argv[i], flag) && i + 1 < argc)
                        value = argv[i + 1];
                else if (strncmp(argv[i], flag, l) == 0 && argv[i][l] == '=')
                        value = argv[i] + l + 1;
        return value;
}

const struct option *argval_long_option(const struct option *opts, size_t n, const char *word,
                                        bool *ret_takes_value) {
        size_t len;

        *ret_takes_value = false;
        if (strncmp(word, "--", 2) != 0)
                return NULL;
        word += 2;
        len = strcspn(word, "=");
        for (size_t i = 0; i < n && opts[i].name; i++)
                if (strlen(opts[i].name) == len && strncmp(opts[i].name, word, len) == 0) {
                        *ret_takes_value = !word[len] && opts[i].has_arg == required_argument;
                        return &opts[i];
                }
        return NULL;
}

const char *argval_closest_option(const struct option *opts, const char *name) {
        const char *names[64];
        size_t n = 0;

        for (; opts->name && n < ELEMENTSOF(names); opts++)
                if (strlen(opts->name) > 2)
                        names[n++] = opts->name;
        return text_closest(name, names, n, 2);
}

int argval_store(const struct argval_field *t, int opt, const char *value, bool on, void *base) {
        for (; t->opt; t++) {
                if (t->opt != opt)
                        continue;
                if (t->is_switch)
                        *(bool *)((char *)base + t->offset) = on;
                else
                        *(const char **)((char *)base + t->offset) = value;
                return 1;
        }
        return 0;
}
