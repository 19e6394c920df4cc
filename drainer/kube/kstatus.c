/* HTTP status and metav1.Status -> negative errno. Pure functions over a
 * borrowed cJSON tree; owns nothing, logs nothing. */
#include <errno.h>
#include <string.h>

#include "drainer/base/macro.h"
#include "drainer/kube/kstatus.h"

int http_status_to_errno(long status) {
        if (status >= 200 && status < 300)
                return 0;

        switch (status) {
        case 400: /* BadRequest */
        case 422: /* Invalid */
                return -EINVAL;
        case 401: /* Unauthorized */
        case 403: /* Forbidden */
                return -EACCES;
        case 404:
                return -ENOENT;
        case 409:
                return -EBUSY;
        case 410: /* Gone/Expired: our resourceVersion was compacted; relist */
                return -ESTALE;
        case 429: /* throttled, or an eviction refused by a PodDisruptionBudget */
                return -EAGAIN;
        }
        if (status >= 500 && status < 600)
                return -EIO;
        return -EPROTO;
}

static const struct {
        const char *reason;
        int error;
} reason_table[] = {
        { "NotFound", -ENOENT },
        { "AlreadyExists", -EEXIST },
        { "Conflict", -EBUSY },
        { "Gone", -ESTALE },
        { "Expired", -ESTALE },
        { "TooManyRequests", -EAGAIN },
        { "Unauthorized", -EACCES },
        { "Forbidden", -EACCES },
        { "BadRequest", -EINVAL },
        { "Invalid", -EINVAL },
        { "RequestEntityTooLarge", -EINVAL },
        { "InternalError", -EIO },
        { "ServiceUnavailable", -EIO },
        { "Timeout", -EIO },
        { "ServerTimeout", -EIO },
};

static int reason_to_errno(const char *reason) {
        if (reason)
                for (size_t i = 0; i < ELEMENTSOF(reason_table); i++)
                        if (streq(reason, reason_table[i].reason))
                                return reason_table[i].error;
        return -EPROTO;
}

static const char *string_field(const cJSON *o, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

int kube_status_to_errno(const cJSON *status, char **ret_reason, char **ret_message) {
        const char *reason = NULL, *message = NULL, *st;
        const cJSON *code;
        long c = 0;
        int r;

        if (cJSON_IsObject(status)) {
                reason = string_field(status, "reason");
                message = string_field(status, "message");
                code = cJSON_GetObjectItemCaseSensitive(status, "code");
                /* (a code out of int range is no HTTP status, and converting it would be undefined) */
                if (cJSON_IsNumber(code) && code->valuedouble > -2147483648.0 &&
                    code->valuedouble < 2147483648.0)
                        c = (long)code->valuedouble;
                st = string_field(status, "status");

                if (streq_ptr(st, "Success"))
                        r = 0;
                else if (c == 409)
                        /* Create of an existing object vs. update with a stale resourceVersion. */
                        r = streq_ptr(reason, "AlreadyExists") ? -EEXIST : -EBUSY;
                else if (c > 0) {
                        r = http_status_to_errno(c);
                        if (r == 0) /* a failure Status with a 2xx code makes no sense */
                                r = -EPROTO;
                } else
                        r = reason_to_errno(reason);
        } else
                r = -EPROTO;

        if (ret_reason)
                *ret_reason = reason ? strdup(reason) : NULL;
        if (ret_message)
                *ret_message = message ? strdup(message) : NULL;
        return r;
}

int64_t kube_status_retry_after_seconds(const cJSON *status) {
        const cJSON *details = cJSON_GetObjectItemCaseSensitive(status, "details");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(details, "retryAfterSeconds");

        if (!cJSON_IsNumber(v) || v->valuedouble <= 0)
                return 0;
        if (v->valuedouble >= INT32_MAX) /* int32 in metav1.StatusDetails; more cannot convert */
                return INT32_MAX;
        return (int64_t)v->valuedouble;
}

bool kube_status_has_cause(const cJSON *status, const char *type) {
        const cJSON *details = cJSON_GetObjectItemCaseSensitive(status, "details");
        const cJSON *causes = cJSON_GetObjectItemCaseSensitive(details, "causes"), *c;

        if (!type || !cJSON_IsArray(causes))
                return false;
        cJSON_ArrayForEach(c, causes) if (streq_ptr(string_field(c, "reason"),
                                                    type)) /* StatusCause.Type is "reason" in JSON */
                return true;
        return false;
}
