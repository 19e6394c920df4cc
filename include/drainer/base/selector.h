/* Kubernetes label selectors in their string form ("a=b,c in (d,e),!f"),
 * parsed and validated as apimachinery's labels.Parse does, and matched
 * against label sets. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "drainer/base/macro.h"

/* A label or annotation: both strings borrowed from whoever holds the array
 * (for records of drainer/objects.h, the record itself). */
struct kv {
        const char *key, *value;
};

/* Value of key among n pairs, or NULL if absent. */
const char *kv_get(const struct kv *kv, size_t n, const char *key);

struct selector;

/* Parses s. The empty string (or only whitespace) gives the empty selector,
 * which matches every label set. Supported: k=v, k==v, k!=v, k in (a,b),
 * k notin (a,b), k, !k, k>N, k<N; requirements separated by commas.
 * Keys must be qualified names ([prefix/]name), values valid label values.
 *
 * Returns 0, -EINVAL for a malformed selector (then *ret_error, if not NULL,
 * gets a malloc'd one-line message saying what and where), or -ENOMEM. */
int selector_parse(const char *s, struct selector **ret, char **ret_error);

/* NULL ok. */
void selector_free(struct selector *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct selector *, selector_free);

/* True if every requirement holds for labels (n pairs; keys unique). A NULL
 * selector matches nothing (so an unset selector never selects by accident). */
bool selector_matches(const struct selector *s, const struct kv *labels, size_t n);

bool selector_is_empty(const struct selector *s);
size_t selector_n_requirements(const struct selector *s);

/* Canonical string form: requirements sorted by key, set values sorted,
 * "==" written as "=". Suitable as a labelSelector query value (after URL
 * encoding). Returns 0 or -ENOMEM. */
int selector_to_string(const struct selector *s, char **ret);

/* Parses a NULL-terminated list of selector strings into an array. On failure
 * nothing is returned and *ret_error (if not NULL) names the bad string.
 * Returns 0, -EINVAL or -ENOMEM. */
int selectors_parse_strv(const char *const *strv, struct selector ***ret, size_t *ret_n, char **ret_error);
/* Frees n selectors and the array. NULL ok. */
void selectors_free(struct selector **v, size_t n);

/* Label key/value syntax (validation.IsQualifiedName / IsValidLabelValue). */
bool label_key_is_valid(const char *k);
bool label_value_is_valid(const char *v);
/* An RFC 1123 label (validation.IsDNS1123Label): what a namespace name must be. */
bool dns1123_label_is_valid(const char *s);
