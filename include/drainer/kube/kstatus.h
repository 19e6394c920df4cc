/* Kubernetes errors as negative errno: HTTP status codes and metav1.Status
 * objects (error bodies and watch ERROR events), converted once, at the
 * boundary, as STYLE.md lists them. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

/* 2xx -> 0; 400/422 -EINVAL; 401/403 -EACCES; 404 -ENOENT; 409 -EBUSY (no
 * Status at hand to tell AlreadyExists from Conflict); 410 -ESTALE; 429
 * -EAGAIN; 5xx -EIO; anything else -EPROTO. This function can't fail. */
int http_status_to_errno(long status);

/* Maps a metav1.Status: its "code" as http_status_to_errno() does, except 409
 * with reason AlreadyExists -> -EEXIST; without a code, its "reason" (NotFound,
 * Conflict, Expired/Gone, TooManyRequests, ...). A Status whose "status" is
 * "Success" yields 0; a missing or malformed Status yields -EPROTO.
 *
 * ret_reason and ret_message (each may be NULL) are always written: a copy of
 * the field, or NULL when absent (or out of memory: they only feed log lines,
 * so that does not turn into an error). Returns 0 or a negative errno. */
int kube_status_to_errno(const cJSON *status, char **ret_reason, char **ret_message);

/* details.retryAfterSeconds of a Status (429, some 5xx), or 0 when absent. */
int64_t kube_status_retry_after_seconds(const cJSON *status);

/* Whether details.causes of a Status has one of this type (e.g. "NamespaceTerminating",
 * corev1.NamespaceTerminatingCause, as apierrors.HasStatusCause reads it; metav1.StatusCause
 * serializes its Type as "reason"). NULL: false. */
bool kube_status_has_cause(const cJSON *status, const char *type);
