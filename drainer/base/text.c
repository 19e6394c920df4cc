/* UTF-8-safe prefixes, one-line messages, whitespace trimming, a set of strings, the closest word,
 * switch values, a shell word. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/macro.h"
#include "drainer/base/text.h"

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

char *text_escape_controls(const char *s, size_t len) {
        static const char hex[] = "0123456789abcdef";
        size_t n = 0;
        char *out, *o;

        /* At most 6 bytes ("\\u0080") for 2 in, 4 ("\\x1b") for 1 in. */
        if (len > (SIZE_MAX - 1) / 4)
                return NULL;
        out = o = malloc(len * 4 + 1);
        if (!out)
                return NULL;
        while (n < len) {
                unsigned char c = (unsigned char)s[n];

                if ((c < 0x20 && c != '\n') || c == 0x7f) {
                        *o++ = '\\';
                        *o++ = 'x';
                        *o++ = hex[c >> 4];
                        *o++ = hex[c & 0xf];
                        n++;
                } else if (c >= 0xc2 && c <= 0xf4) {
                        size_t k = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4, i = 1;

                        while (i < k && n + i < len && ((unsigned char)s[n + i] & 0xc0) == 0x80)
                                i++;
                        if (i == k && c == 0xc2 && (unsigned char)s[n + 1] <= 0x9f) {
                                /* U+0080-U+009F: the C1 controls (CSI is U+009B). */
                                unsigned char c1 = (unsigned char)s[n + 1];

                                memcpy(o, "\\u00", 4);
                                o += 4;
                                *o++ = hex[c1 >> 4];
                                *o++ = hex[c1 & 0xf];
                        } else {
                                /* A whole sequence, or the lead byte of a broken one
                                 * (what follows is looked at on its own). */
                                i = i == k ? k : 1;
                                memcpy(o, s + n, i);
                                o += i;
                        }
                        n += i;
                } else if (c >= 0x80 && c <= 0x9f) {
                        /* A stray byte some terminals read as an 8-bit C1 control. */
                        *o++ = '\\';
                        *o++ = 'x';
                        *o++ = hex[c >> 4];
                        *o++ = hex[c & 0xf];
                        n++;
                } else
                        *o++ = s[n++];
        }
        *o = 0;
        return out;
}

char *text_vprintf(const char *fmt, va_list ap) {
        va_list measure;
        char *s;
        int n;

        /* Measured, then written once: vasprintf() grows its buffer with realloc() and
         * frees the copies it outgrew unwiped, which must not happen to a secret. */
        va_copy(measure, ap);
        n = vsnprintf(NULL, 0, fmt, measure);
        va_end(measure);
        if (n < 0)
                return NULL;
        s = malloc((size_t)n + 1);
        if (!s)
                return NULL;
        vsnprintf(s, (size_t)n + 1, fmt, ap);
        return s;
}

char *text_printf(const char *fmt, ...) {
        va_list ap;
        char *s;

        va_start(ap, fmt);
        s = text_vprintf(fmt, ap);
        va_end(ap);
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

const char *text_plural(size_t n, const char *one, const char *many) {
        return n == 1 ? one : many;
}

size_t strv_sorted_insert(const char **v, size_t n, size_t max, const char *s) {
        size_t at;

        for (at = 0; at < n; at++) {
                int c = strcmp(s, v[at]);

                if (c == 0)
                        return n;
                if (c < 0)
                        break;
        }
        if (at >= max)
                return n;
        if (n == max)
                n--; /* the last drops out */
        memmove(v + at + 1, v + at, (n - at) * sizeof(*v));
        v[at] = s;
        return n + 1;
}

size_t text_distance(const char *a, const char *b) {
        size_t la = strlen(a), lb = strlen(b), d[65][65];

        if (la > 64 || lb > 64)
                return SIZE_MAX;
        for (size_t i = 0; i <= la; i++)
                d[i][0] = i;
        for (size_t j = 0; j <= lb; j++)
                d[0][j] = j;
        for (size_t i = 1; i <= la; i++)
                for (size_t j = 1; j <= lb; j++) {
                        size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);

                        best = MIN(best, d[i - 1][j] + 1);
                        d[i][j] = MIN(best, d[i][j - 1] + 1);
                }
        return d[la][lb];
}

const char *text_closest(const char *word, const char *const *candidates, size_t n, size_t max_distance) {
        const char *best = NULL;
        size_t best_d = SIZE_MAX;

        for (size_t i = 0; i < n; i++) {
                size_t d = text_distance(word, candidates[i]);

                if (d < best_d)
                        best = candidates[i], best_d = d;
        }
        return best && best_d <= max_distance ? best : NULL;
}

int text_replace(char **p, const char *v) {
        char *c = NULL;

        if (v && !(c = strdup(v)))
                return -ENOMEM;
        free(*p);
        *p = c;
        return 0;
}

int text_parse_bool(const char *s, bool *ret) {
        static const char *const on[] = { "true", "True", "TRUE", "t", "T", "1" };
        static const char *const off[] = { "false", "False", "FALSE", "f", "F", "0" };

        for (size_t i = 0; s && i < ELEMENTSOF(on); i++)
                if (streq(s, on[i]) || streq(s, off[i])) {
                        *ret = streq(s, on[i]);
                        return 0;
                }
        return -EINVAL;
}

void text_put_shell_word(FILE *f, const char *w) {
        if (*w && strspn(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789@%+=:,./_-") ==
                          strlen(w)) {
                fputs(w, f);
                return;
        }
        fputc('\'', f);
        for (; *w; w++)
                if (*w == '\'')
                        fputs("'\\''", f);
                else
                        fputc(*w, f);
        fputc('\'', f);
}

uint64_t text_fnv1a(uint64_t h, const char *s) {
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * UINT64_C(0x100000001b3);
        return h;
}
