/* Typed, NULL-tolerant lookups into cJSON trees. Owns nothing. */
#include <string.h>

#include "drainer/json.h"

const cJSON *json_path(const cJSON *obj, const char *path) {
        char key[128];

        while (obj && path && *path) {
                const char *dot = strchr(path, '.');
                size_t n = dot ? (size_t)(dot - path) : strlen(path);

                if (n >= sizeof(key))
                        return NULL;
                memcpy(key, path, n);
                key[n] = 0;
                obj = cJSON_GetObjectItemCaseSensitive(obj, key);
                path = dot ? dot + 1 : NULL;
        }
        return obj;
}

const char *json_str(const cJSON *obj, const char *path) {
        return cJSON_GetStringValue(json_path(obj, path));
}

int64_t json_int(const cJSON *obj, const char *path, int64_t def) {
        const cJSON *v = json_path(obj, path);

        if (!cJSON_IsNumber(v) || v->valuedouble != v->valuedouble /* NaN */)
                return def;
        /* Converting an out-of-range double is undefined behaviour: clamp first. */
        if (v->valuedouble >= 9223372036854775807.0)
                return INT64_MAX;
        if (v->valuedouble <= -9223372036854775808.0)
                return INT64_MIN;
        return (int64_t)v->valuedouble;
}

bool json_bool(const cJSON *obj, const char *path, bool def) {
        const cJSON *v = json_path(obj, path);

        return cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}
