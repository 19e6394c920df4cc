/* Private to the persisted state's files (state.c, patch.c, scope.c): what they
 * share beyond include/drainer/state.h. */
#pragma once

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "drainer/drain/state.h"

/* DRA driver names (ResourceSlice spec.driver) are DNS subdomains of at most 63. */
#define DRIVER_NAME_MAX 63

/* A DNS subdomain of at most DRIVER_NAME_MAX characters. */
bool drain_driver_name_is_valid(const char *s);
/* Appends rec as drainer.io/driver-stop writes it to the JSON array arr. */
int drain_stop_to_json(const struct driver_stop_record *rec, cJSON *arr);
