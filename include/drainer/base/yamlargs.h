/* A YAML mapping file read as command-line words: `key: value` becomes
 * "--key=value", `key: [a, b]` "--key=a" "--key=b", each word with the file, the
 * line and the key it came from, so that whoever parses the words can say where a
 * bad one was written. Which keys exist is the caller's to judge. */
#pragma once

#include <stddef.h>

#define YAMLARGS_MAX     256 /* words of one file */
#define YAMLARGS_KEY_MAX 128 /* bytes of a key, with its NUL */

struct yamlargs_word {
        char *word;       /* owned: "--key=value" */
        const char *file; /* borrowed: the path given to yamlargs_load() */
        size_t line;      /* 1-based: the value's (a list item's own) */
        char key[YAMLARGS_KEY_MAX];
};

struct yamlargs {
        struct yamlargs_word *words; /* owned, n of them */
        size_t n;
};

/* What a key written without a value (`key:`, `key: ~`) needs, for its error line
 * ("a duration is needed (e.g. 30s)"); NULL: "a value is needed". */
typedef const char *(*yamlargs_need_fn)(const char *key);

/* Reads path, a YAML mapping of flag names to scalars or lists of scalars, into
 * words in file order. Keys in skip (NULL-terminated, may be NULL) are left out.
 * `key: ""` is "--key=", `key: false` "--key=false": the value as written. Errors,
 * each a one-line message in *ret_error (NULL ok) that starts with "PATH:LINE: "
 * and names the key where there is one: a file that cannot be read (-errno, no
 * line), invalid YAML (-EINVAL, libyaml's line), a document that is not a mapping,
 * a nested mapping, a list of lists, an alias, a key that is not a flag name, a key
 * without a value (-EINVAL), more than YAMLARGS_MAX words (-E2BIG). -ENOMEM without
 * a message. On failure *ret is left empty. */
int yamlargs_load(const char *path, const char *const *skip, yamlargs_need_fn need, struct yamlargs *ret,
                  char **ret_error);
/* Frees the words. NULL ok; y is empty after. */
void yamlargs_done(struct yamlargs *y);
/* The word of y that is this very pointer (not an equal string: where a word of an
 * argv came from), or NULL. y NULL ok. */
const struct yamlargs_word *yamlargs_find(const struct yamlargs *y, const char *word);
