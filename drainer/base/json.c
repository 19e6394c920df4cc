/* Typed, NULL-tolerant lookups into cJSON trees, with one rule for "" (json.h).
 * Owns nothing. */
#include <errno.h>
#include <string.h>

#include "drainer/base/json.h"

const cJSON *json_get(const cJSON *o, const char *key) {
        return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

const char *json_get_str(const cJSON *o, const char *key) {
        const cJSON *v = json_get(o, key);

        return cJSON_IsString(v) && *v->valuestring ? v->valuestring : NULL;
}

int json_get_str_checked(const cJSON *o, const char *key, const char **ret) {
        const cJSON *v = json_get(o, key);

        if (v && !cJSON_IsNull(v) && !cJSON_IsString(v))
                return -EINVAL;
        *ret = json_get_str(o, key);
        return 0;
}

const cJSON *json_get_obj(const cJSON *o, const char *key) {
        const cJSON *v = json_get(o, key);

        return cJSON_IsObject(v) ? v : NULL;
}

const cJSON *json_get_arr(const cJSON *o, const char *key) {
        const cJSON *v = json_get(o, key);

        return cJSON_IsArray(v) ? v : NULL;
}

bool json_get_true(const cJSON *o, const char *key) {
        return cJSON_IsTrue(json_get(o, key));
}

bool json_get_int64(const cJSON *o, const char *key, int64_t *ret) {
        const cJSON *v = json_get(o, key);

        if (!cJSON_IsNumber(v))
                return false;
        /* Out of range (or inf, from 1e999; NaN fails both) cannot be converted: unset. */
        if (!(v->valuedouble >= -9223372036854775808.0 && v->valuedouble < 9223372036854775808.0))
                return false;
        *ret = (int64_t)v->valuedouble;
        return true;
}

bool json_get_double(const cJSON *o, const char *key, double *ret) {
        const cJSON *v = json_get(o, key);

        if (!cJSON_IsNumber(v))
                return false;
        *ret = v->valuedouble;
        return true;
}

size_t json_count(const cJSON *o) {
        size_t n = 0;

        for (const cJSON *c = o ? o->child : NULL; c; c = c->next)
                n++;
        return n;
}

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
        const char *s = cJSON_GetStringValue(json_path(obj, path));

        return s && *s ? s : NULL;
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
