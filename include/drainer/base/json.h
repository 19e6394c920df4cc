/* cJSON conveniences: cleanup helpers and typed lookups that tolerate NULL at every
 * step, so API objects can be read without a ladder of checks. One accessor set for
 * the whole program, with one rule for strings:
 *
 *   An empty string reads as absent (NULL). Kubernetes' Go types marshal an unset
 *   string field and "" alike (omitempty writes neither), and for the optional
 *   pointer fields (resourceClaimName, ...) the API server's validation refuses "",
 *   so an object never means by "" anything it does not mean by a missing field.
 *   Where "" is a value of its own (label and annotation values, selector values),
 *   read the member with json_get() and cJSON_IsString().
 *
 * json_get*() take one member name, which may contain dots ("kubernetes.io/config.
 * mirror"); json_path() and the json_str/int/bool() below it follow a dot-separated
 * path of member names instead. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/base/macro.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON *, cJSON_Delete);

/* ---- one member ---- */

/* The member key of object o (case-sensitive), or NULL (o NULL or not an object too). */
const cJSON *json_get(const cJSON *o, const char *key);
/* The string member, or NULL when missing, not a string, or "". */
const char *json_get_str(const cJSON *o, const char *key);
/* The same, but a member that is there and neither a string nor null is -EINVAL (for
 * input whose type errors must be reported, not ignored). 0 with *ret NULL or the string. */
int json_get_str_checked(const cJSON *o, const char *key, const char **ret);
/* The member when it is an object / an array, else NULL. */
const cJSON *json_get_obj(const cJSON *o, const char *key);
const cJSON *json_get_arr(const cJSON *o, const char *key);
/* True only for a member that is JSON true. */
bool json_get_true(const cJSON *o, const char *key);
/* A number member as an integer: false (and *ret untouched) when missing, not a number,
 * NaN or outside int64_t (1e999 included): such a value counts as unset. */
bool json_get_int64(const cJSON *o, const char *key, int64_t *ret);
/* A number member as it is (NaN and infinities included): false when missing or not a number. */
bool json_get_double(const cJSON *o, const char *key, double *ret);
/* How many members or elements o has (0 for NULL or a scalar). */
size_t json_count(const cJSON *o);

/* ---- a path of members ---- */

/* Follows a dot-separated path of object keys ("metadata.name"); NULL if any step is missing. */
const cJSON *json_path(const cJSON *obj, const char *path);
/* The string at path, or NULL if missing, not a string, or "" (the rule above). */
const char *json_str(const cJSON *obj, const char *path);
/* The integer at path, clamped to int64_t, or def if missing, not a number, or NaN. */
int64_t json_int(const cJSON *obj, const char *path, int64_t def);
bool json_bool(const cJSON *obj, const char *path, bool def);
