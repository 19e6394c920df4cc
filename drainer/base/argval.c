/* Command-line values: bounded integers and the table of flags stored as given
 * (argval.h). Owns nothing; logs nothing. */
#include <errno.h>
#include <stdlib.h>

#include "drainer/base/argval.h"

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
