/* Small text helpers shared by every layer: UTF-8-safe prefixes, one-line
 * messages, whitespace trimming, a set of strings, the closest word, switch values, a
 * shell word. No I/O but to a FILE given. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Length of the longest prefix of s of at most max bytes that does not cut a
 * UTF-8 sequence. This function can't fail. */
size_t utf8_prefix(const char *s, size_t max);

/* Replaces every control character (< 0x20, 0x7f) of s with '?', one byte for
 * one, so that a message quoting input stays on one line and offsets into it
 * stay right. NULL ok. Returns s. */
char *text_one_line(char *s);

/* A copy of the len bytes of s for a terminal: every control character but
 * '\n' (C0, DEL, the C1 controls U+0080-U+009F, and lone bytes 0x80-0x9f)
 * written as a visible escape (\x1b, \u009b), so that text read from the API
 * (an annotation anyone who may patch the Node wrote) cannot drive the
 * terminal. NULL on out-of-memory. */
char *text_escape_controls(const char *s, size_t len);

/* asprintf() that returns the string, or NULL when out of memory (text_vprintf: with a
 * va_list). It writes the string once, at its size, so a secret formatted into it leaves
 * no copies in freed memory. */
char *text_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *text_vprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* The noun for a count of n: one when n is 1, else many ("1 pod", "0 pods", "2 pods").
 * This function can't fail. */
const char *text_plural(size_t n, const char *one, const char *many);

/* Trims ASCII whitespace at both ends of s, in place. Returns s. */
char *text_strip(char *s);

/* Adds a copy of s to the string array *v of *n unless it holds s already: 1 added,
 * 0 there already, -ENOMEM (*v and *n unchanged). */
int strv_push_unique(char ***v, size_t *n, const char *s);
/* Frees the n strings of v and v. NULL ok. */
void strv_free_n(char **v, size_t n);
/* Inserts s (borrowed) into the n strings of v, sorted by strcmp() and unique, of at
 * most max: a string already there is not added again, and into a full v it goes
 * only if it sorts before the last, which then drops out (so v keeps the max
 * smallest). Returns the new count. This function can't fail. */
size_t strv_sorted_insert(const char **v, size_t n, size_t max, const char *s);

/* The edit distance (Levenshtein: insertions, deletions, substitutions) of a and b;
 * SIZE_MAX ("far") when either is longer than 64 bytes. This function can't fail. */
size_t text_distance(const char *a, const char *b);
/* The first of the n candidates closest to word by text_distance(), when it is at
 * most max_distance away (a typo of it); NULL otherwise. */
const char *text_closest(const char *word, const char *const *candidates, size_t n, size_t max_distance);

/* *p = a copy of v (NULL: none), the old value freed; -ENOMEM leaves *p as it was. */
int text_replace(char **p, const char *v);

/* kubectl's (Go's strconv.ParseBool) switch values: true, True, TRUE, t, T, 1 and their
 * false counterparts. 0 with *ret set, or -EINVAL (*ret untouched). */
int text_parse_bool(const char *s, bool *ret);
/* Writes w as one word the shell reads back as w: as it is when it needs no quoting,
 * else in single quotes (an embedded ' as '\''). */
void text_put_shell_word(FILE *f, const char *w);
/* FNV-1a 64 of s, continuing from h (TEXT_FNV1A_BASIS to start): the same on every run
 * and build, for names that are written down (Node annotations, object names), which the
 * process-keyed hashmap_hash is not. */
#define TEXT_FNV1A_BASIS UINT64_C(0xcbf29ce484222325)
uint64_t text_fnv1a(uint64_t h, const char *s);
