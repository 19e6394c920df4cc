/* UTF-8-safe prefixes, one-line messages, whitespace trimming, a set of strings. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/text.h"

size_t utf8_prefix(const char *s, size_t max) {
        size_t l = strnlen(s, max + 1);

        if (l <= max)
                return l;
        l = max;
        while (l > 0 && ((unsigned char)s[l] & 0xC0) == 0x80)
                l--;
        return l;
}

char *text_one_line(char *s) {
        for (char *c = s; c && *c; c++)
                if ((unsigned char)*c < 0x20 || *c == 0x7f)
                        *c = '?';
        return s;
}

char *text_strip(char *s) {
        size_t n;
        char *p = s;

        while (*p && isspace((unsigned char)*p))
                p++;
        n = strlen(p);
        while (n > 0 && isspace((unsigned char)p[n - 1]))
                n--;
        memmove(s, p, n);
        s[n] = 0;
        return s;
}

int strv_push_unique(char ***v, size_t *n, const char *s) {
        char **p, *c;

        for (size_t i = 0; i < *n; i++)
                if (strcmp((*v)[i], s) == 0)
                        return 0;
        c = strdup(s);
        p = c ? realloc(*v, (*n + 1) * sizeof(**v)) : NULL;
        if (!p) {
                free(c);
                return -ENOMEM;
        }
        *v = p;
        (*v)[(*n)++] = c;
        return 1;
}

void strv_free_n(char **v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                free(v[i]);
        free(v);
}
