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
