/* Kubernetes API client over a transport: authentication, one token bucket
 * for all requests, retries with capped exponential backoff and jitter for
 * idempotent calls, Status errors mapped to negative errno, paginated lists,
 * streaming watches, patches, creates, replaces and the Eviction subresource. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/base/macro.h"
#include "drainer/kube/watchdec.h"

struct transport;
struct timesrc;
struct kube_config;
struct kube_client;
struct kube_call;

struct credentials;

/* The client's rate changed (adaptive only): old and new requests per second, and
 * whether the server pushed back (a cut) or not (a raise). */
typedef void (*kube_rate_fn)(double old_qps, double qps, bool pushback, void *userdata);

struct kube_client_options {
        double qps; /* <= 0: no limit; adaptive: where the rate starts */
        int burst;
        /* --kube-api-qps auto: the rate adapts to what the server allows between
         * qps_min and qps_max (ratelimit.h); needs qps > 0. */
        bool adaptive;
        double qps_min; /* 0: KUBE_QPS_MIN_DEFAULT (or qps if lower) */
        double qps_max; /* 0: KUBE_QPS_MAX_DEFAULT (or qps if higher) */
        kube_rate_fn on_rate;
        void *rate_userdata;
        uint64_t request_timeout_usec; /* per attempt, not watches; 0 = 30 s; KUBE_NO_TIMEOUT: none */
        unsigned max_attempts;         /* for retried calls; 0 = 8 */
        uint64_t backoff_base_usec;    /* 0 = 250 ms */
        uint64_t backoff_cap_usec;     /* 0 = 30 s */
        unsigned random_seed;          /* jitter; 0 = from the clock */
        unsigned list_chunk;           /* objects per list request for every list (kubectl's
                                        * --chunk-size); 0 = each list's own (500) */
        /* --as / --as-group: every request carries Impersonate-User (and one
         * Impersonate-Group per group); borrowed, checked by kube_client_new (no control
         * characters). Groups need a user, as kubectl says. */
        const char *impersonate_user;
        const char *const *impersonate_groups;
        size_t n_impersonate_groups; /* at most KUBE_MAX_IMPERSONATE_GROUPS */
};

#define KUBE_MAX_IMPERSONATE_GROUPS 16
#define KUBE_QPS_MIN_DEFAULT        5.0 /* client-go's default rate */
#define KUBE_QPS_MAX_DEFAULT        100.0
#define KUBE_NO_TIMEOUT             (UINT64_C(1) << 62) /* --request-timeout 0, as kubectl's */

struct kube_result {
        int error;                /* 0 on success, else negative errno */
        long status;              /* HTTP status of the last attempt, 0 if none */
        const char *reason;       /* Status reason on errors (e.g. "TooManyRequests"), or NULL */
        const char *message;      /* Status message or transport error text, or NULL */
        const cJSON *json;        /* parsed body on success; NULL for watches and empty bodies */
        const cJSON *status_body; /* the metav1.Status of an error answer (details.causes ...), or NULL */
        const char *resource_version; /* lists: metadata.resourceVersion of the list */
        uint64_t retry_after_usec;    /* from a 429/5xx answer handed back to the caller */
        unsigned attempts;
};

/* Runs exactly once per started call, never from inside the call that started it. */
typedef void (*kube_done_fn)(const struct kube_result *res, void *userdata);
/* Watch events; the object is valid only during the call. Return < 0 to stop the watch. */
typedef int (*kube_event_fn)(enum watch_event_type type, const cJSON *object, void *userdata);
/* One page of a list: items is the "items" array. Return < 0 to stop. */
typedef int (*kube_page_fn)(const cJSON *items, void *userdata);

enum kube_patch_type {
        KUBE_PATCH_MERGE,
        KUBE_PATCH_STRATEGIC,
        KUBE_PATCH_JSON,
        _KUBE_PATCH_TYPE_MAX,
};

struct kube_call_params {
        const char *method;
        const char *path;         /* absolute path with query, e.g. "/api/v1/nodes/n1" */
        const char *content_type; /* for bodies */
        const char *body;
        size_t body_len;
        bool retry;             /* retry 429, 5xx and connection errors (idempotent calls only) */
        kube_event_fn on_event; /* set for a watch: the body is a stream of events */
        uint64_t timeout_usec;  /* 0 = client default; ignored for watches */
};

/* t, ts, cfg (the server) and creds (each request's credentials) are borrowed and must
 * outlive the client. opts may be NULL. */
int kube_client_new(struct transport *t, struct timesrc *ts, const struct kube_config *cfg,
                    struct credentials *creds, const struct kube_client_options *opts,
                    struct kube_client **ret);
/* All calls must have completed (cancel them first). NULL ok. */
void kube_client_free(struct kube_client *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct kube_client *, kube_client_free);

/* Cancels every call in flight; each done callback runs later with -ECANCELED. */
void kube_client_cancel_all(struct kube_client *c);
size_t kube_client_calls_in_flight(const struct kube_client *c);

struct kube_client_stats {
        uint64_t requests; /* HTTP requests sent (every attempt) */
        uint64_t retries;
        uint64_t throttled_usec; /* time spent waiting for the token bucket */
        double qps;              /* the token bucket's rate now (<= 0: no limit) */
        uint64_t pushbacks;      /* answers taken as the server's pushback (429, 5xx + Retry-After) */
        uint64_t watch_events;
        uint64_t last_ok_usec;    /* monotonic µs of the last answer that was not a 5xx, 0 if none */
        uint64_t last_error_usec; /* ... of the last transport failure or 5xx answer, 0 if none */
        /* Since when every answer has been a failure (monotonic µs; 0: the last answer was
         * not one), and what the last failure was ("Connection refused", "HTTP 503"). */
        uint64_t failing_since_usec;
        char last_error[96];
};
void kube_client_get_stats(const struct kube_client *c, struct kube_client_stats *ret);
/* Whether the API server is silent now: it never answered, or has answered only
 * failures for 5 s or more. Then *ret_message says what was waited for and the last
 * failure ("timed out waiting for the API server URL: ..."; NULL when out of memory). */
bool kube_client_silent(const struct kube_client *c, char **ret_message);
/* How long one request may take (--request-timeout, 30 s by default); 0: no bound. */
uint64_t kube_client_request_timeout(const struct kube_client *c);

/* Fencing: gate(method, path, userdata) is asked right before each attempt of a write
 * (any method but GET) leaves for the server; false: it is not sent, and the call ends
 * with -ENOLCK. Leader election's: only the leader writes, and only until its renew
 * deadline (leader_write_gate). NULL removes it. */
typedef bool (*kube_write_gate_fn)(const char *method, const char *path, void *userdata);
void kube_client_set_write_gate(struct kube_client *c, kube_write_gate_fn gate, void *userdata);

int kube_call_start(struct kube_client *c, const struct kube_call_params *p, kube_done_fn done,
                    void *userdata, struct kube_call **ret_call);
/* The done callback runs later with -ECANCELED (unless it already ran: then a no-op is
 * not allowed: only cancel calls whose done has not run). */
void kube_call_cancel(struct kube_call *call);

int kube_get(struct kube_client *c, const char *path, kube_done_fn done, void *userdata,
             struct kube_call **ret_call);
/* Lists page by page (limit, continue). path may carry a query already. rv "0" reads the
 * watch cache (the server then ignores limit); NULL reads from etcd. */
int kube_list(struct kube_client *c, const char *path, unsigned limit, const char *rv, kube_page_fn on_page,
              kube_done_fn done, void *userdata, struct kube_call **ret_call);
/* Watches from resource_version with bookmarks; done runs when the stream ends. An ERROR
 * event never reaches on_event: the client ends the watch with its Status (410 Gone is
 * -ESTALE: relist). */
int kube_watch(struct kube_client *c, const char *path, const char *resource_version,
               unsigned timeout_seconds, kube_event_fn on_event, kube_done_fn done, void *userdata,
               struct kube_call **ret_call);
int kube_patch(struct kube_client *c, const char *path, enum kube_patch_type type, const char *body,
               kube_done_fn done, void *userdata, struct kube_call **ret_call);
/* DELETE with an optional DeleteOptions body. Not retried. */
int kube_delete(struct kube_client *c, const char *path, const char *body, kube_done_fn done, void *userdata,
                struct kube_call **ret_call);
int kube_create(struct kube_client *c, const char *path, const char *body, kube_done_fn done, void *userdata,
                struct kube_call **ret_call);
/* PUT: replaces the object at path with body (JSON). Not retried: the body carries
 * the resourceVersion it was built from, so a resend after a lost answer would fail
 * with 409 although the first attempt succeeded; the caller decides. */
int kube_replace(struct kube_client *c, const char *path, const char *body, kube_done_fn done,
                 void *userdata, struct kube_call **ret_call);
/* policy/v1 Eviction. grace_seconds < 0: the pod's own. A 429 (PDB) is handed back, not retried. */
int kube_evict(struct kube_client *c, const char *ns, const char *name, int64_t grace_seconds, bool dry_run,
               kube_done_fn done, void *userdata, struct kube_call **ret_call);

/* Percent-encodes a query parameter value. Returns NULL on OOM. */
char *kube_query_escape(const char *s);
