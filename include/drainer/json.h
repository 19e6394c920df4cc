/* cJSON conveniences: cleanup helpers and typed lookups that tolerate NULL
 * at every step, so API objects can be read without a ladder of checks. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "drainer/macro.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON *, cJSON_Delete);

/* Follows a dot-separated path of object keys ("metadata.name"); NULL if any step is missing. */
const cJSON *json_path(const cJSON *obj, const char *path);
/* The string at path, or NULL if missing or not a string. */
const char *json_str(const cJSON *obj, const char *path);
/* The integer at path, or def if missing or not a number. */
int64_t json_int(const cJSON *obj, const char *path, int64_t def);
bool json_bool(const cJSON *obj, const char *path, bool def);
