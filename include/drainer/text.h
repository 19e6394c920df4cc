/* Small text helpers shared by every layer: UTF-8-safe prefixes, one-line
 * messages, whitespace trimming, a set of strings. No I/O. */
#pragma once

#include <stddef.h>

/* Length of the longest prefix of s of at most max bytes that does not cut a
 * UTF-8 sequence. This function can't fail. */
size_t utf8_prefix(const char *s, size_t max);

/* Replaces every control character (< 0x20, 0x7f) of s with '?', one byte for
 * one, so that a message quoting input stays on one line and offsets into it
 * stay right. NULL ok. Returns s. */
char *text_one_line(char *s);

/* Trims ASCII whitespace at both ends of s, in place. Returns s. */
char *text_strip(char *s);

/* Adds a copy of s to the string array *v of *n unless it holds s already: 1 added,
 * 0 there already, -ENOMEM (*v and *n unchanged). */
int strv_push_unique(char ***v, size_t *n, const char *s);
/* Frees the n strings of v and v. NULL ok. */
void strv_free_n(char **v, size_t n);
