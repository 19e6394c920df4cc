/* Command-line values, for every verb's flag handler: a decimal integer within
 * bounds, and a table of the flags whose value is stored as given (a string, or a
 * switch's bool) at an offset into the handler's options. No logging: the caller
 * words the error, as each flag's own. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* s as a decimal integer from min to max (a sign allowed, nothing after it). Returns 0
 * with *ret set, or -EINVAL (out of range, empty, trailing characters) with *ret
 * untouched. */
int argval_int(const char *s, long long min, long long max, long long *ret);
/* Whether s is a number followed by a lone '%' ("10%"): true with *ret the number
 * (unbounded: the caller checks its range), false (nothing set) if not. */
bool argval_percent(const char *s, long long *ret);

/* -v's value as getopt hands it ("-vv": "v", "-v=6": "=6", "-v6": "6", "--v=6" and
 * "-v 6": "6"; NULL for a bare -v): kubectl's levels 0-10 mapped onto *verbose's two
 * (1-3: 1, 4 and more: 2), or each v counted. 0, or -EINVAL (not a level 0-10). */
int argval_verbosity(const char *arg, int *verbose);
/* Whether s can be -v's level in the next word ("-v 6"): one or two digits. */
bool argval_is_level(const char *s);

/* Whether argv[1..] (up to a "--") names flag ("--name"), alone or as "--name=VALUE". */
bool argval_argv_has(int argc, char **argv, const char *flag);
/* The value of the last flag ("--name") in argv[1..] (up to a "--"): "--name VALUE" or
 * "--name=VALUE"; NULL if none. */
const char *argval_argv_value(int argc, char **argv, const char *flag);

struct option;
/* The long option of opts (n of them at the most, or up to a zeroed entry) that word
 * ("--name" or "--name=VALUE") names in full, with *ret_takes_value set when its value
 * is the next word; NULL (and *ret_takes_value false) if none. */
const struct option *argval_long_option(const struct option *opts, size_t n, const char *word,
                                        bool *ret_takes_value);
/* The long option of opts (ended by a zeroed entry) closest to name (without "--" and
 * "=VALUE"), when it is close enough to be a typo of it; NULL otherwise. Names of one
 * or two letters (-v, --as) are never suggested. */
const char *argval_closest_option(const struct option *opts, const char *name);

/* A flag stored as given: a switch (`bool`) or a string (`const char *`, borrowed from
 * argv or the --config file) at offset into the handler's options. */
struct argval_field {
        int opt; /* getopt's value; 0 ends a table */
        size_t offset;
        bool is_switch;
};
#define ARGVAL_STRING(o, type, field) \
        { .opt = (o), .offset = offsetof(type, field) }
#define ARGVAL_SWITCH(o, type, field) \
        { .opt = (o), .offset = offsetof(type, field), .is_switch = true }

/* When opt is in table t (ended by opt 0): stores on (a switch) or value (a string) in
 * base and returns 1; returns 0 for a flag not in t. This function can't fail. */
int argval_store(const struct argval_field *t, int opt, const char *value, bool on, void *base);
