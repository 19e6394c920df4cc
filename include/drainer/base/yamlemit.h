/* A JSON document (cJSON) written as the same document in YAML, by libyaml's
 * emitter: what -o yaml prints. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>

/* Writes j to f as one YAML document in block style: mappings and sequences as
 * they are, every string that would read back as something else (a bool, a null,
 * a number, a timestamp in YAML 1.1 or 1.2: "yes", "1", "") quoted, numbers as
 * cJSON prints them, NaN and infinities as null. With explicit_start the document
 * opens with "---" (a stream of documents). Returns 0, -ENOMEM, -E2BIG (nested
 * deeper than 64), or -EIO (libyaml refused an event or f a write), with a
 * one-line message in *ret_error (NULL ok; NULL when out of memory). */
int json_to_yaml(const cJSON *j, FILE *f, bool explicit_start, char **ret_error);
