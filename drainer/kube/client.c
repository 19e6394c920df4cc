/* The Kubernetes API client: every request goes through one token bucket
 * (fixed, or adapting to the server's pushback), gets the current credentials,
 * and is retried (idempotent calls only, and any call the server's flow control
 * refused unrun) with capped exponential backoff and jitter, or after the
 * server's Retry-After. Owns its calls; borrows transport, time source and
 * config. Logs at debug level only. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "drainer/base/backoff.h"
#include "drainer/base/buf.h"
#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "drainer/base/text.h"
#include "drainer/base/timesrc.h"
#include "drainer/kube/client.h"
#include "drainer/kube/credentials.h"
#include "drainer/kube/kobserver.h"
#include "drainer/kube/kstatus.h"
#include "drainer/kube/kubeconfig.h"
#include "drainer/kube/ratelimit.h"
#include "drainer/kube/transport.h"

/* Resends of a call the server went away from without answering (a stream refused
 * by GOAWAY, a dropped connection: see transport.h), as Go's HTTP/2 transport does;
 * each goes through the token bucket again, and none counts as an attempt. */
#define RESENDS_MAX   6U
/* "xxxxxxxx-xxxx-4xxx-Nxxx-xxxxxxxxxxxx" and its NUL */
#define AUDIT_ID_SIZE 37

struct kube_client {
        struct transport *transport;   /* borrowed */
        struct timesrc *ts;            /* borrowed */
        const struct kube_config *cfg; /* borrowed: the server */
        struct credentials *creds;     /* borrowed */
        struct kube_client_options opts;
        struct ratelimit rl;
        struct kube_client_stats stats;
        uint64_t audit_prefix;   /* random per client: the first half of each Audit-ID */
        uint64_t audit_seq;      /* attempts sent so far: the second half */
        struct backoff backoff;  /* retries; each call counts its own attempts */
        struct kube_call *calls; /* owned, doubly linked */
        size_t n_calls;
        uint64_t wait_seq;                                  /* reservations made so far */
        char *impersonate[1 + KUBE_MAX_IMPERSONATE_GROUPS]; /* "Impersonate-User: ..." etc., owned */
        size_t n_impersonate;
        kube_write_gate_fn write_gate; /* NULL: every write is sent */
        void *write_gate_userdata;
};

/* A header value from a flag: printable, no CR/LF (no header injection), not empty. */
static bool header_value_ok(const char *v) {
        if (!v || !*v)
                return false;
        for (const unsigned char *p = (const unsigned char *)v; *p; p++)
                if (*p < 0x20 || *p == 0x7f)
                        return false;
        return true;
}

enum call_state {
        CALL_BACKOFF, /* waiting out a retry delay; no token reserved yet */
        CALL_WAITING, /* holds a token-bucket reservation, waiting until it is due */
        CALL_AUTH,    /* its token used, waiting for credentials (an exec plugin runs) */
        CALL_SENT,
        CALL_FINISHING, /* done is scheduled */
};

struct kube_call {
        struct kube_client *client;
        struct kube_call *prev, *next;
        enum call_state state;
        struct dtimer timer;
        char *method, *path, *content_type, *body;
        size_t body_len;
        bool retry, watch, refreshed_auth, cancelled;
        struct credentials_wait cwait;
        uint64_t cred_generation; /* of the credentials the last attempt was sent with */
        uint64_t rejected;        /* a 401 refused that generation: send only newer ones */
        kube_event_fn on_event;
        kube_done_fn done;
        void *userdata;
        uint64_t timeout_usec;
        unsigned attempts;
        unsigned resends;
        struct http_call *http;
        uint64_t sent_at;             /* monotonic µs of the last attempt, for metrics */
        uint64_t wait_seq;            /* CALL_WAITING: order of its reservation */
        char audit_id[AUDIT_ID_SIZE]; /* of the last attempt */

        /* watch stream */
        struct watch_decoder dec;
        bool got_event;
        int stream_error;
        int abort_error; /* we aborted the stream (ERROR event, callback), message kept */
        struct buf raw;  /* first bytes of a stream, kept to parse a Status on HTTP errors */

        /* list pagination */
        kube_page_fn on_page;
        char *list_base; /* path without limit/continue */
        unsigned limit;
        char *rv;
        char *list_rv;

        /* result, kept until done runs */
        int error;
        long status;
        char *reason, *message;
        cJSON *json;
        cJSON *status_body; /* the Status of an error answer */
        uint64_t retry_after_usec;
};

static void call_dispatch(struct kube_call *call);
static void call_finish_later(struct kube_call *call, int error);

static void call_unlink(struct kube_call *call) {
        struct kube_client *c = call->client;

        if (!c)
                return;
        if (call->prev)
                call->prev->next = call->next;
        else
                c->calls = call->next;
        if (call->next)
                call->next->prev = call->prev;
        call->prev = call->next = NULL;
        c->n_calls--;
        call->client = NULL;
}

/* Releases the call; it no longer touches the client once unlinked, so the client
 * may already be gone (freed from the last call's done callback). */
static void call_free(struct kube_call *call) {
        credentials_unwait(&call->cwait);
        call_unlink(call);
        dtimer_done(&call->timer);
        if (call->watch)
                watch_decoder_done(&call->dec);
        free(call->method);
        free(call->path);
        free(call->content_type);
        free(call->body);
        buf_done(&call->raw);
        free(call->list_base);
        free(call->rv);
        free(call->list_rv);
        free(call->reason);
        free(call->message);
        cJSON_Delete(call->status_body);
        cJSON_Delete(call->json);
        free(call);
}

static void call_throttle(struct kube_call *call);

/* The Kubernetes verb of a call, as the metrics name it. */
static const char *call_verb(const struct kube_call *call) {
        if (call->watch)
                return "watch";
        if (call->on_page)
                return "list";
        if (streq(call->method, "GET"))
                return "get";
        if (streq(call->method, "POST"))
                return "create";
        if (streq(call->method, "PUT"))
                return "update";
        if (streq(call->method, "PATCH"))
                return "patch";
        if (streq(call->method, "DELETE"))
                return "delete";
        return "other";
}

static void on_call_timer(struct dtimer *t) {
        struct kube_call *call = container_of(t, struct kube_call, timer);

        if (call->state == CALL_BACKOFF)
                return call_throttle(call);
        if (call->state == CALL_FINISHING) {
                struct kube_result res = {
                        .error = call->error,
                        .status = call->status,
                        .reason = call->reason,
                        .message = call->message,
                        .json = call->json,
                        .status_body = call->status_body,
                        .resource_version = call->list_rv,
                        .retry_after_usec = call->retry_after_usec,
                        .attempts = call->attempts,
                };
                kube_done_fn done = call->done;
                void *ud = call->userdata;

                /* Unlink before the callback: it may start new calls, cancel others, or
                 * free the client once nothing else is in flight. */
                call->done = NULL;
                call_unlink(call);
                done(&res, ud);
                call_free(call);
                return;
        }
        call_dispatch(call);
}

static void call_finish_later(struct kube_call *call, int error) {
        call->error = error;
        call->state = CALL_FINISHING;
        dtimer_start(&call->timer, 0);
}

/* Reserves a token now and sends once it is due (always from the timer, never
 * from inside the caller). */
static void call_throttle(struct kube_call *call) {
        struct kube_client *c = call->client;
        uint64_t wait = ratelimit_reserve(&c->rl, timesrc_now(c->ts));

        kube_observe_rate_limit(call_verb(call), wait);
        call->state = CALL_WAITING;
        call->wait_seq = c->wait_seq++;
        dtimer_start(&call->timer, wait);
}

static int cmp_due(const void *a, const void *b) {
        const struct kube_call *x = *(struct kube_call *const *)a, *y = *(struct kube_call *const *)b;

        if (x->timer.due != y->timer.due)
                return x->timer.due < y->timer.due ? -1 : 1;
        return x->wait_seq < y->wait_seq ? -1 : x->wait_seq > y->wait_seq;
}

/* The rate changed or the server asked for a pause: the calls already holding a
 * reservation take a new one, in the order of their old due times, so that the
 * change holds them too (a cut or a pause is not undone by tokens promised at the
 * old rate, a raise is not delayed by them). Without memory for the list, they
 * keep their times. */
static void requeue_waiting(struct kube_client *c) {
        _cleanup_free_ struct kube_call **v = NULL;
        uint64_t now = timesrc_now(c->ts);
        size_t n = 0, i = 0;

        for (struct kube_call *call = c->calls; call; call = call->next)
                n += call->state == CALL_WAITING;
        if (n == 0 || !(v = malloc(n * sizeof(*v))))
                return;
        for (struct kube_call *call = c->calls; call; call = call->next)
                if (call->state == CALL_WAITING)
                        v[i++] = call;
        qsort(v, n, sizeof(*v), cmp_due);
        for (i = 0; i < n; i++)
                ratelimit_unreserve(&c->rl, v[i]->timer.due > now ? v[i]->timer.due - now : 0);
        for (i = 0; i < n; i++) {
                v[i]->wait_seq = c->wait_seq++;
                dtimer_start(&v[i]->timer, ratelimit_reserve(&c->rl, now));
        }
}

/* Sends after delay_usec (a backoff) and the token bucket. The token is reserved
 * only when the backoff is over: reserving it ahead for a future time would let
 * the bucket refill from time that has not passed yet and overrun the qps. */
static void call_schedule(struct kube_call *call, uint64_t delay_usec) {
        if (delay_usec == 0)
                return call_throttle(call);
        call->state = CALL_BACKOFF;
        dtimer_start(&call->timer, delay_usec);
}

static void set_message(struct kube_call *call, const char *reason, const char *message) {
        cJSON_Delete(call->status_body);
        call->status_body = NULL;
        free(call->reason);
        free(call->message);
        call->reason = reason ? strdup(reason) : NULL;
        call->message = message ? strdup(message) : NULL;
}

/* Maps a non-2xx answer: its Status body if there is one, else the HTTP code. */
static int parse_error_body(struct kube_call *call, long status, const char *body, size_t len) {
        _cleanup_(cJSON_Deletep) cJSON *j = NULL;
        char *reason = NULL, *message = NULL;
        int r;

        if (body && len > 0)
                j = cJSON_ParseWithLength(body, len);
        if (streq_ptr(json_get_str(j, "kind"), "Status")) {
                r = kube_status_to_errno(j, &reason, &message);
                free(call->reason);
                free(call->message);
                call->reason = reason;
                call->message = message;
                cJSON_Delete(call->status_body);
                call->status_body = TAKE_PTR(j);
                if (r >= 0)
                        r = http_status_to_errno(status);
                return r;
        }
        set_message(call, NULL, NULL);
        return http_status_to_errno(status);
}

/* What a 429 or 5xx answer says of the server's load. */
struct pushback {
        bool pushback;             /* the server refused work for its load: slow down */
        bool unrun;                /* refused before any handler ran: safe to send again, any verb */
        uint64_t retry_after_usec; /* how long it asked to wait, 0: it did not say */
};

static bool retryable(struct kube_call *call, int error, long status, const struct pushback *pb) {
        if (call->cancelled)
                return false;
        /* A watch's informer decides how to resume it (and honours the Retry-After). */
        if (!call->retry && !(pb->unrun && !call->watch))
                return false;
        if (call->attempts >= call->client->opts.max_attempts)
                return false;
        if (error < 0)
                /* Retry what the network did, not what resending cannot fix (a body over
                 * the cap, TLS/auth refusals, a bad request, a transport shut down). */
                return error != -E2BIG && error != -EACCES && error != -EPERM && error != -EKEYREJECTED &&
                       error != -ECANCELED && error != -EINVAL && error != -ESHUTDOWN;
        return status == 429 || status >= 500;
}

/* Counts events and hands them to the caller. */
static int on_decoded_event(enum watch_event_type type, const cJSON *object, void *userdata) {
        struct kube_call *call = userdata;
        int r;

        call->got_event = true;
        call->client->stats.watch_events++;
        if (type == WATCH_ERROR) {
                /* A Status in the stream ends the watch: 410 Gone (our resourceVersion was
                 * compacted) becomes -ESTALE so the caller relists. */
                char *reason = NULL, *message = NULL;

                r = kube_status_to_errno(object, &reason, &message);
                free(call->reason);
                free(call->message);
                call->reason = reason;
                call->message = message;
                call->status = json_int(object, "code", 0);
                if (r >= 0)
                        r = -EPROTO;
                call->abort_error = r;
                return r;
        }
        r = call->on_event(type, object, call->userdata);
        if (r < 0) {
                set_message(call, NULL, "stopped by the event handler");
                call->abort_error = r;
        }
        return r;
}

static int on_http_data(struct http_call *http, const char *data, size_t n, void *userdata) {
        struct kube_call *call = userdata;
        int r;

        if (!call->got_event && buf_room(&call->raw) > 0) {
                r = buf_append(&call->raw, data, MIN(n, buf_room(&call->raw)));
                if (r < 0)
                        return r;
        }
        if (call->stream_error < 0)
                return 0; /* keep the raw bytes: it may be a Status with an HTTP error */
        r = watch_decoder_feed(&call->dec, data, n, on_decoded_event, call);
        if (r == -EBADMSG && !call->got_event) {
                call->stream_error = r;
                return 0;
        }
        if (r < 0 && call->abort_error == 0) {
                set_message(call, NULL, r == -E2BIG ? "watch event too large" : "malformed watch event");
                call->abort_error = r;
        }
        return r < 0 ? r : 0;
}

static int list_next_page(struct kube_call *call, const char *cont);

/* Retry-After header, else details.retryAfterSeconds of a Status body (429 and some 5xx).
 * body: the buffered body, or for a watch the first bytes of its stream. */
static uint64_t retry_after(const struct http_response *resp, const char *body, size_t body_len) {
        _cleanup_(cJSON_Deletep) cJSON *j = NULL;
        int64_t sec;

        if (resp->retry_after_usec > 0)
                return resp->retry_after_usec;
        if (!body || body_len == 0)
                return 0;
        j = cJSON_ParseWithLength(body, body_len);
        sec = j ? kube_status_retry_after_seconds(j) : 0;
        return sec > 0 ? (uint64_t)sec * USEC_PER_SEC : 0;
}

static bool status_has_cause(const cJSON *status, const char *reason) {
        const cJSON *cause, *causes = json_get(json_get(status, "details"), "causes");

        if (!cJSON_IsArray(causes))
                return false;
        cJSON_ArrayForEach(cause, causes) if (streq_ptr(json_get_str(cause, "reason"), reason)) return true;
        return false;
}

/* kube-apiserver's flow control (API Priority and Fairness rejecting or timing out a
 * request in its queue; --max-requests-inflight without it) answers 429 with a
 * Retry-After and a plain-text body, written before any handler ran (apiserver
 * pkg/server/filters tooManyRequests): such a request did nothing, whatever its verb,
 * as client-go's checkWait assumes when it resends any verb after a Retry-After.
 * Handlers answer with a Status: a PodDisruptionBudget refusing an eviction (the
 * cause DisruptionBudget) says nothing of the server's load; other 429s do, and so
 * does a 5xx that asks to come back later. */
static void classify_answer(const struct kube_call *call, long status, const struct http_response *resp,
                            struct pushback *ret) {
        const char *body = call->watch ? call->raw.data : resp->body;
        size_t len = call->watch ? call->raw.len : resp->body_len;
        _cleanup_(cJSON_Deletep) cJSON *j = NULL;
        bool is_status;

        *ret = (struct pushback){};
        if (status != 429 && status < 500)
                return;
        ret->retry_after_usec = retry_after(resp, body, len);
        if (body && len > 0)
                j = cJSON_ParseWithLength(body, len);
        is_status = streq_ptr(json_get_str(j, "kind"), "Status");
        if (status == 429) {
                ret->pushback = !(is_status && status_has_cause(j, "DisruptionBudget"));
                ret->unrun = !is_status;
        } else
                ret->pushback = ret->retry_after_usec > 0;
}

static void rate_changed(struct kube_client *c, double old, bool pushback) {
        log_debug("API client rate %g -> %g requests/s (%s)", old, c->rl.qps,
                  pushback ? "the server pushed back" : "no pushback");
        kube_observe_rate(c->rl.qps);
        if (c->opts.on_rate)
                c->opts.on_rate(old, c->rl.qps, pushback, c->opts.rate_userdata);
}

/* Feeds the adaptive rate: pushback cuts it; an answer (not a 5xx, not a transport
 * failure, which hold it) may raise it. */
static void note_load(struct kube_call *call, int error, long status, const struct http_response *resp,
                      struct pushback *pb) {
        struct kube_client *c = call->client;
        uint64_t now = timesrc_now(c->ts), latency = now - call->sent_at;
        double old = c->rl.qps;
        bool changed;

        *pb = (struct pushback){};
        if (error == 0)
                classify_answer(call, status, resp, pb);
        if (pb->pushback) {
                kube_observe_pushback(call_verb(call), status);
                changed = ratelimit_pushback(&c->rl, call->sent_at, pb->retry_after_usec, now);
                if (c->rl.adaptive) /* the pause holds the calls already waiting too */
                        requeue_waiting(c);
        } else {
                /* A watch's or list's time says more about its size than about the load. */
                if (call->watch || call->on_page)
                        latency = 0;
                if ((error < 0 && error != call->abort_error) || status >= 500)
                        latency = UINT64_MAX;
                changed = ratelimit_answered(&c->rl, latency, now);
        }
        if (changed && !pb->pushback)
                requeue_waiting(c);
        if (changed)
                rate_changed(c, old, pb->pushback);
}

/* One finished attempt, to the observer, and whether the server answered (readiness). */
static void note_answer(struct kube_call *call, int error, long status) {
        struct kube_client *c = call->client;
        uint64_t now = timesrc_now(c->ts);

        kube_observe_request(call_verb(call), status > 0 ? status : 0, call->watch, now - call->sent_at);
        if ((error < 0 && error != call->abort_error) || status >= 500) {
                if (!c->stats.failing_since_usec)
                        c->stats.failing_since_usec = now;
                c->stats.last_error_usec = now;
                if (error < 0)
                        snprintf(c->stats.last_error, sizeof(c->stats.last_error), "%s",
                                 error == -EKEYREJECTED ? "its certificate is not trusted"
                                                        : transport_strerror(error));
                else
                        snprintf(c->stats.last_error, sizeof(c->stats.last_error), "HTTP %ld", status);
        } else {
                c->stats.last_ok_usec = now;
                c->stats.failing_since_usec = 0;
        }
}

static void on_http_done(struct http_call *http, int error, const struct http_response *resp,
                         void *userdata) {
        struct kube_call *call = userdata;
        struct kube_client *c = call->client;
        long status = resp ? resp->status : 0;
        struct pushback pb = {};
        int r;

        call->http = NULL;
        if (call->abort_error == 0 || call->status == 0)
                call->status = status;
        if (error != -ECANCELED) {
                note_answer(call, error, status);
                note_load(call, error, status, resp, &pb);
        }

        if (call->cancelled) {
                set_message(call, NULL, "cancelled");
                return call_finish_later(call, -ECANCELED);
        }
        if (error < 0 && error == call->abort_error)
                /* We stopped the stream ourselves; reason and message are set. */
                return call_finish_later(call, error);

        log_debug("%s %s: attempt %u (Audit-ID %s): %s%s%ld", call->method, call->path, call->attempts,
                  call->audit_id, error < 0 ? strerror(-error) : "", error < 0 ? ", status " : "status ",
                  status);

        if (error < 0 && resp && resp->unanswered && call->resends < RESENDS_MAX) {
                call->resends++;
                call->attempts--;
                c->stats.retries++;
                log_debug("%s %s: the server went away without answering, resending (%u of %u)",
                          call->method, call->path, call->resends, RESENDS_MAX);
                return call_schedule(call, 0);
        }
        if (error == 0 && status == 401 && !call->refreshed_auth &&
            credentials_may_refresh(c->creds, call->cred_generation)) {
                /* The credentials may have rotated (token or certificate files, exec plugin):
                 * resend once with newer ones; the refresh itself is limited process-wide. */
                call->refreshed_auth = true;
                call->rejected = call->cred_generation;
                call->attempts--;
                return call_schedule(call, 0);
        }
        if (retryable(call, error, status, &pb)) {
                uint64_t delay = backoff_delay(&c->backoff, call->attempts);

                /* The server's Retry-After (adaptive: the bucket holds every call for it too,
                 * ratelimit_pushback). */
                if (pb.retry_after_usec > 0)
                        delay = MIN(pb.retry_after_usec, c->opts.backoff_cap_usec);
                c->stats.retries++;
                log_debug("%s %s: retrying in %llu ms", call->method, call->path,
                          (unsigned long long)(delay / USEC_PER_MSEC));
                return call_schedule(call, delay);
        }
        if (error < 0) {
                set_message(call, NULL,
                            error == -EKEYREJECTED
                                    ? "the API server's certificate is not trusted (not signed by the "
                                      "kubeconfig's "
                                      "certificate-authority, or not issued for this server name)"
                                    : transport_strerror(error));
                return call_finish_later(call, error);
        }
        if (status < 200 || status > 299) {
                /* A watch's answer streams: its Status is in the raw bytes kept. */
                call->retry_after_usec = call->watch ? retry_after(resp, call->raw.data, call->raw.len)
                                                     : retry_after(resp, resp->body, resp->body_len);
                if (call->watch)
                        r = parse_error_body(call, status, call->raw.data, call->raw.len);
                else
                        r = parse_error_body(call, status, resp->body, resp->body_len);
                return call_finish_later(call, r);
        }

        if (call->watch) {
                /* A stream that never produced an event but could not be decoded. */
                return call_finish_later(call, call->got_event ? 0 : call->stream_error);
        }
        if (resp->body && resp->body_len > 0) {
                cJSON_Delete(call->json);
                call->json = cJSON_ParseWithLength(resp->body, resp->body_len);
                if (!call->json) {
                        set_message(call, NULL, "response is not valid JSON");
                        return call_finish_later(call, -EBADMSG);
                }
        }
        if (call->on_page) {
                const cJSON *items = json_get(call->json, "items");
                const cJSON *meta = json_get(call->json, "metadata");
                const char *cont = json_get_str(meta, "continue");
                const char *rv = json_get_str(meta, "resourceVersion");

                if (!cJSON_IsArray(items)) {
                        set_message(call, NULL, "list response has no items array");
                        return call_finish_later(call, -EBADMSG);
                }
                r = call->on_page(items, call->userdata);
                if (r < 0)
                        return call_finish_later(call, r);
                if (rv) {
                        free(call->list_rv);
                        call->list_rv = strdup(rv);
                        if (!call->list_rv)
                                return call_finish_later(call, -ENOMEM);
                }
                if (cont) {
                        r = list_next_page(call, cont);
                        if (r < 0)
                                return call_finish_later(call, r);
                        call->attempts = 0;
                        return call_schedule(call, 0);
                }
                cJSON_Delete(call->json);
                call->json = NULL;
        }
        call_finish_later(call, 0);
}

static char *url_join(const char *server, const char *path) {
        char *u;

        if (asprintf(&u, "%s%s", server, path) < 0)
                return NULL;
        return u;
}

static void on_call_credentials(struct credentials_wait *w) {
        struct kube_call *call = container_of(w, struct kube_call, cwait);

        /* A cancelled call stopped waiting in kube_call_cancel(). */
        call_dispatch(call);
}

/* A new Audit-ID for each attempt the client sends. kube-apiserver takes the
 * Audit-ID request header as the audit ID of the request (apiserver
 * pkg/endpoints/filters/audit_init.go) and echoes it, so every attempt of drainer is
 * one audit event the operator can find from drainer's -vv log. Only our own
 * attempts get new ones: libcurl's transparent resend of a request whose reused
 * connection died unanswered (lib/transfer.c Curl_retry_request) repeats the same
 * headers, so it keeps the ID of the attempt it repeats, which is how a proxy's log
 * tells it from ours (tests/e2e/test-faults.sh). Unique per client: a random
 * prefix and a counter, in the shape of a version-4 UUID. */
static void next_audit_id(struct kube_client *c, char buf[static AUDIT_ID_SIZE]) {
        uint64_t p = c->audit_prefix, n = c->audit_seq++;

        snprintf(buf, AUDIT_ID_SIZE, "%08" PRIx32 "-%04" PRIx32 "-4%03" PRIx32 "-%04" PRIx32 "-%012" PRIx64,
                 (uint32_t)(p >> 32), (uint32_t)(p >> 16) & 0xffffu, (uint32_t)p & 0xfffu,
                 (uint32_t)(0x8000u | ((n >> 48) & 0x3fffu)), n & UINT64_C(0xffffffffffff));
}

static void call_dispatch(struct kube_call *call) {
        struct kube_client *c = call->client;
        struct kube_credentials creds = {};
        _cleanup_free_ char *url = NULL, *auth = NULL, *ctype = NULL, *err = NULL;
        char audit[sizeof("Audit-ID: ") + AUDIT_ID_SIZE];
        const char *headers[6 + 1 + KUBE_MAX_IMPERSONATE_GROUPS];
        size_t nh = 0;
        int r;

        /* Never blocks: an exec plugin runs on the loop while the call waits. */
        r = credentials_get(c->creds, call->rejected, &creds, &err);
        if (r == -EAGAIN) {
                call->state = CALL_AUTH;
                credentials_wait(c->creds, &call->cwait, on_call_credentials);
                return;
        }
        call->rejected = 0;
        if (r < 0) {
                set_message(call, NULL, err ? err : "cannot get credentials");
                return call_finish_later(call, r);
        }
        call->cred_generation = creds.generation;
        if (c->write_gate && !streq(call->method, "GET") &&
            !c->write_gate(call->method, call->path, c->write_gate_userdata)) {
                set_message(call, NULL, "not sent: this process no longer leads (leader election)");
                return call_finish_later(call, -ENOLCK);
        }
        url = url_join(c->cfg->server, call->path);
        if (!url)
                return call_finish_later(call, -ENOMEM);
        if (creds.token) {
                /* text_printf(), not asprintf(): no outgrown copy of the token is freed unwiped */
                auth = text_printf("Authorization: Bearer %s", creds.token);
                if (!auth)
                        return call_finish_later(call, -ENOMEM);
                headers[nh++] = auth;
        }
        headers[nh++] = "Accept: application/json";
        next_audit_id(c, call->audit_id);
        snprintf(audit, sizeof(audit), "Audit-ID: %s", call->audit_id);
        headers[nh++] = audit;
        if (call->content_type) {
                if (asprintf(&ctype, "Content-Type: %s", call->content_type) < 0)
                        return call_finish_later(call, -ENOMEM);
                headers[nh++] = ctype;
        }
        for (size_t i = 0; i < c->n_impersonate; i++)
                headers[nh++] = c->impersonate[i];
        headers[nh] = NULL;

        if (call->watch) {
                watch_decoder_done(&call->dec);
                watch_decoder_init(&call->dec, BUF_CAP_API_OBJECT);
                call->got_event = false;
                call->stream_error = 0;
                call->abort_error = 0;
                buf_clear(&call->raw, 0);
        }

        struct http_request req = {
                .method = call->method,
                .url = url,
                .headers = headers,
                .body = call->body,
                .body_len = call->body_len,
                .timeout_usec = call->watch ? 0 : call->timeout_usec,
                .max_body = BUF_CAP_API_BODY,
                .stream = call->watch,
                .no_resend = true,
                .client_cert_pem = creds.client_cert_pem,
                .client_cert_pem_len = creds.client_cert_pem_len,
                .client_key_pem = creds.client_key_pem,
                .client_key_pem_len = creds.client_key_pem_len,
        };

        call->attempts++;
        c->stats.requests++;
        call->state = CALL_SENT;
        call->sent_at = timesrc_now(c->ts);
        r = transport_submit(c->transport, &req, call->watch ? on_http_data : NULL, on_http_done, call,
                             &call->http);
        /* The header array holds the token: wipe our copy now that the transport has its own. */
        if (auth)
                explicit_bzero(auth, strlen(auth));
        if (r < 0) {
                set_message(call, NULL, strerror(-r));
                call_finish_later(call, r);
        }
}

static int call_new(struct kube_client *c, const struct kube_call_params *p, kube_done_fn done,
                    void *userdata, struct kube_call **ret) {
        struct kube_call *call;
        int r;

        if (!p->method || !p->path || !done)
                return -EINVAL;
        call = calloc(1, sizeof(*call));
        if (!call)
                return -ENOMEM;
        call->client = c;
        call->done = done;
        call->userdata = userdata;
        call->retry = p->retry;
        call->watch = !!p->on_event;
        call->on_event = p->on_event;
        call->timeout_usec = p->timeout_usec ? p->timeout_usec : c->opts.request_timeout_usec;
        call->method = strdup(p->method);
        call->path = strdup(p->path);
        call->content_type = p->content_type ? strdup(p->content_type) : NULL;
        if (p->body) {
                call->body = malloc(p->body_len + 1);
                if (call->body) {
                        memcpy(call->body, p->body, p->body_len);
                        call->body[p->body_len] = 0;
                        call->body_len = p->body_len;
                }
        }
        if (call->watch)
                watch_decoder_init(&call->dec, BUF_CAP_API_OBJECT);
        buf_init(&call->raw, BUF_CAP_API_ERROR, false);

        call->next = c->calls;
        if (c->calls)
                c->calls->prev = call;
        c->calls = call;
        c->n_calls++;

        r = dtimer_init(&call->timer, c->ts, on_call_timer);
        if (r < 0 || !call->method || !call->path || (p->content_type && !call->content_type) ||
            (p->body && !call->body)) {
                call_free(call);
                return r < 0 ? r : -ENOMEM;
        }
        *ret = call;
        return 0;
}

int kube_call_start(struct kube_client *c, const struct kube_call_params *p, kube_done_fn done,
                    void *userdata, struct kube_call **ret_call) {
        struct kube_call *call;
        int r;

        r = call_new(c, p, done, userdata, &call);
        if (r < 0)
                return r;
        call_schedule(call, 0);
        if (ret_call)
                *ret_call = call;
        return 0;
}

void kube_call_cancel(struct kube_call *call) {
        if (!call || call->cancelled || call->state == CALL_FINISHING)
                return;
        call->cancelled = true;
        if (call->state == CALL_SENT && call->http) {
                /* The transport calls on_http_done with -ECANCELED later. */
                transport_cancel(call->client->transport, call->http);
                return;
        }
        if (call->state == CALL_WAITING)
                ratelimit_cancel(&call->client->rl); /* the token was never used */
        if (call->state == CALL_AUTH)
                credentials_unwait(&call->cwait);
        set_message(call, NULL, "cancelled");
        call_finish_later(call, -ECANCELED);
}

void kube_client_cancel_all(struct kube_client *c) {
        for (struct kube_call *call = c->calls; call; call = call->next)
                kube_call_cancel(call);
}

size_t kube_client_calls_in_flight(const struct kube_client *c) {
        return c->n_calls;
}

void kube_client_set_write_gate(struct kube_client *c, kube_write_gate_fn gate, void *userdata) {
        c->write_gate = gate;
        c->write_gate_userdata = userdata;
}

void kube_client_get_stats(const struct kube_client *c, struct kube_client_stats *ret) {
        *ret = c->stats;
        ret->throttled_usec = c->rl.waited_usec;
        ret->qps = c->rl.qps;
        ret->pushbacks = c->rl.pushbacks;
}

bool kube_client_silent(const struct kube_client *c, char **ret_message) {
        const struct kube_client_stats *st = &c->stats;
        uint64_t now = timesrc_now(c->ts);

        if (st->last_ok_usec != 0 &&
            !(st->failing_since_usec && now - st->failing_since_usec >= 5 * USEC_PER_SEC))
                return false;
        if (asprintf(ret_message, "timed out waiting for the API server %s: %s%s", c->cfg->server,
                     st->last_error[0] ? st->last_error : "no answer",
                     st->last_ok_usec == 0
                             ? " (it never answered; the node was not read, nothing was changed)"
                             : "") < 0)
                *ret_message = NULL;
        return true;
}

uint64_t kube_client_request_timeout(const struct kube_client *c) {
        return c->opts.request_timeout_usec == KUBE_NO_TIMEOUT ? 0 : c->opts.request_timeout_usec;
}

int kube_client_new(struct transport *t, struct timesrc *ts, const struct kube_config *cfg,
                    struct credentials *creds, const struct kube_client_options *opts,
                    struct kube_client **ret) {
        struct kube_client *c;

        if (!t || !ts || !cfg || !creds)
                return -EINVAL;
        if (opts && (opts->n_impersonate_groups > KUBE_MAX_IMPERSONATE_GROUPS ||
                     (opts->n_impersonate_groups > 0 && !opts->impersonate_user) ||
                     (opts->impersonate_user && !header_value_ok(opts->impersonate_user))))
                return -EINVAL;
        for (size_t i = 0; opts && i < opts->n_impersonate_groups; i++)
                if (!header_value_ok(opts->impersonate_groups[i]))
                        return -EINVAL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->transport = t;
        c->ts = ts;
        c->cfg = cfg;
        c->creds = creds;
        if (opts)
                c->opts = *opts;
        if (!c->opts.request_timeout_usec)
                c->opts.request_timeout_usec = 30 * USEC_PER_SEC;
        if (!c->opts.max_attempts)
                c->opts.max_attempts = 8;
        if (!c->opts.backoff_base_usec)
                c->opts.backoff_base_usec = 250 * USEC_PER_MSEC;
        if (!c->opts.backoff_cap_usec)
                c->opts.backoff_cap_usec = 30 * USEC_PER_SEC;
        backoff_init(&c->backoff, c->opts.backoff_base_usec, c->opts.backoff_cap_usec, true,
                     c->opts.random_seed ? c->opts.random_seed : backoff_seed(ts, 0));
        if (c->opts.random_seed)
                c->audit_prefix = UINT64_C(0x9e3779b97f4a7c15) * c->opts.random_seed;
        else if (getrandom(&c->audit_prefix, sizeof(c->audit_prefix), GRND_NONBLOCK) !=
                 sizeof(c->audit_prefix))
                /* No entropy yet (early boot): the clock, which two processes rarely share to the µs. */
                c->audit_prefix = UINT64_C(0x9e3779b97f4a7c15) * (uint64_t)timesrc_realtime(ts);
        ratelimit_init(&c->rl, c->opts.qps, c->opts.burst, timesrc_now(ts));
        if (c->opts.adaptive) {
                struct ratelimit_adapt a = {
                        .min_qps = c->opts.qps_min > 0 ? c->opts.qps_min
                                                       : MIN(KUBE_QPS_MIN_DEFAULT, c->opts.qps),
                        .max_qps = c->opts.qps_max > 0 ? c->opts.qps_max
                                                       : MAX(KUBE_QPS_MAX_DEFAULT, c->opts.qps),
                };

                if (ratelimit_set_adaptive(&c->rl, &a, timesrc_now(ts)) < 0) {
                        free(c);
                        return -EINVAL;
                }
        }
        /* A client without a limit (serve's leader election has one of its own) leaves the
         * gauge to the one that has. */
        if (c->rl.qps > 0)
                kube_observe_rate(c->rl.qps);
        if (c->opts.impersonate_user) {
                if (asprintf(&c->impersonate[c->n_impersonate++], "Impersonate-User: %s",
                             c->opts.impersonate_user) < 0) {
                        c->n_impersonate--;
                        kube_client_free(c);
                        return -ENOMEM;
                }
                for (size_t i = 0; i < c->opts.n_impersonate_groups; i++)
                        if (asprintf(&c->impersonate[c->n_impersonate++], "Impersonate-Group: %s",
                                     c->opts.impersonate_groups[i]) < 0) {
                                c->n_impersonate--;
                                kube_client_free(c);
                                return -ENOMEM;
                        }
        }
        c->opts.impersonate_user = NULL; /* borrowed: only the headers are kept */
        c->opts.impersonate_groups = NULL;
        *ret = c;
        return 0;
}

void kube_client_free(struct kube_client *c) {
        if (!c)
                return;
        assert(c->n_calls == 0);
        for (size_t i = 0; i < c->n_impersonate; i++)
                free(c->impersonate[i]);
        free(c);
}

int kube_get(struct kube_client *c, const char *path, kube_done_fn done, void *userdata,
             struct kube_call **ret_call) {
        return kube_call_start(c, &(struct kube_call_params){ .method = "GET", .path = path, .retry = true },
                               done, userdata, ret_call);
}

char *kube_query_escape(const char *s) {
        static const char hex[] = "0123456789ABCDEF";
        char *out = malloc(strlen(s) * 3 + 1), *p = out;

        if (!out)
                return NULL;
        for (; *s; s++) {
                unsigned char ch = (unsigned char)*s;

                if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                    ch == '-' || ch == '_' || ch == '.' || ch == '~')
                        *p++ = (char)ch;
                else {
                        *p++ = '%';
                        *p++ = hex[ch >> 4];
                        *p++ = hex[ch & 15];
                }
        }
        *p = 0;
        return out;
}

static int list_next_page(struct kube_call *call, const char *cont) {
        _cleanup_free_ char *econt = NULL;
        char *path;
        const char *sep = strchr(call->list_base, '?') ? "&" : "?";
        int r;

        if (cont) {
                econt = kube_query_escape(cont);
                if (!econt)
                        return -ENOMEM;
                /* A continue token pins the snapshot; resourceVersion must not be sent with it. */
                r = asprintf(&path, "%s%slimit=%u&continue=%s", call->list_base, sep, call->limit, econt);
        } else if (call->rv)
                r = asprintf(&path, "%s%slimit=%u&resourceVersion=%s", call->list_base, sep, call->limit,
                             call->rv);
        else
                r = asprintf(&path, "%s%slimit=%u", call->list_base, sep, call->limit);
        if (r < 0)
                return -ENOMEM;
        free(call->path);
        call->path = path;
        return 0;
}

int kube_list(struct kube_client *c, const char *path, unsigned limit, const char *rv, kube_page_fn on_page,
              kube_done_fn done, void *userdata, struct kube_call **ret_call) {
        struct kube_call *call;
        int r;

        r = call_new(c, &(struct kube_call_params){ .method = "GET", .path = path, .retry = true }, done,
                     userdata, &call);
        if (r < 0)
                return r;
        call->on_page = on_page;
        call->limit = c->opts.list_chunk ? c->opts.list_chunk : limit ? limit : 500;
        call->list_base = strdup(path);
        call->rv = rv ? strdup(rv) : NULL;
        if (!call->list_base || (rv && !call->rv) || list_next_page(call, NULL) < 0) {
                call_free(call);
                return -ENOMEM;
        }
        call_schedule(call, 0);
        if (ret_call)
                *ret_call = call;
        return 0;
}

int kube_watch(struct kube_client *c, const char *path, const char *resource_version,
               unsigned timeout_seconds, kube_event_fn on_event, kube_done_fn done, void *userdata,
               struct kube_call **ret_call) {
        _cleanup_free_ char *full = NULL, *erv = NULL;
        const char *sep = strchr(path, '?') ? "&" : "?";

        /* Without a resourceVersion the server would first replay every object as ADDED. */
        if (resource_version && !(erv = kube_query_escape(resource_version)))
                return -ENOMEM;
        if (asprintf(&full, "%s%swatch=1&allowWatchBookmarks=true%s%s&timeoutSeconds=%u", path, sep,
                     erv ? "&resourceVersion=" : "", strempty(erv), timeout_seconds) < 0)
                return -ENOMEM;
        return kube_call_start(c,
                               &(struct kube_call_params){
                                       .method = "GET",
                                       .path = full,
                                       .retry = false, /* the informer decides how to resume */
                                       .on_event = on_event,
                               },
                               done, userdata, ret_call);
}

int kube_patch(struct kube_client *c, const char *path, enum kube_patch_type type, const char *body,
               kube_done_fn done, void *userdata, struct kube_call **ret_call) {
        static const char *const ctypes[_KUBE_PATCH_TYPE_MAX] = {
                [KUBE_PATCH_MERGE] = "application/merge-patch+json",
                [KUBE_PATCH_STRATEGIC] = "application/strategic-merge-patch+json",
                [KUBE_PATCH_JSON] = "application/json-patch+json",
        };

        if (type < 0 || type >= _KUBE_PATCH_TYPE_MAX)
                return -EINVAL;
        return kube_call_start(c,
                               &(struct kube_call_params){
                                       .method = "PATCH",
                                       .path = path,
                                       .content_type = ctypes[type],
                                       .body = body,
                                       .body_len = strlen(body),
                                       /* Our patches set fields to fixed values: resending is safe. */
                                       .retry = true,
                               },
                               done, userdata, ret_call);
}

int kube_delete(struct kube_client *c, const char *path, const char *body, kube_done_fn done, void *userdata,
                struct kube_call **ret_call) {
        return kube_call_start(c,
                               &(struct kube_call_params){
                                       .method = "DELETE",
                                       .path = path,
                                       .content_type = body ? "application/json" : NULL,
                                       .body = body,
                                       .body_len = body ? strlen(body) : 0,
                               },
                               done, userdata, ret_call);
}

int kube_create(struct kube_client *c, const char *path, const char *body, kube_done_fn done, void *userdata,
                struct kube_call **ret_call) {
        return kube_call_start(c,
                               &(struct kube_call_params){
                                       .method = "POST",
                                       .path = path,
                                       .content_type = "application/json",
                                       .body = body,
                                       .body_len = strlen(body),
                               },
                               done, userdata, ret_call);
}

int kube_replace(struct kube_client *c, const char *path, const char *body, kube_done_fn done,
                 void *userdata, struct kube_call **ret_call) {
        return kube_call_start(c,
                               &(struct kube_call_params){
                                       .method = "PUT",
                                       .path = path,
                                       .content_type = "application/json",
                                       .body = body,
                                       .body_len = strlen(body),
                               },
                               done, userdata, ret_call);
}

int kube_evict(struct kube_client *c, const char *ns, const char *name, int64_t grace_seconds, bool dry_run,
               kube_done_fn done, void *userdata, struct kube_call **ret_call) {
        _cleanup_(cJSON_Deletep) cJSON *ev = cJSON_CreateObject();
        _cleanup_free_ char *path = NULL, *body = NULL;
        cJSON *meta, *opts;

        if (!ev)
                return -ENOMEM;
        cJSON_AddStringToObject(ev, "apiVersion", "policy/v1");
        cJSON_AddStringToObject(ev, "kind", "Eviction");
        meta = cJSON_AddObjectToObject(ev, "metadata");
        cJSON_AddStringToObject(meta, "name", name);
        cJSON_AddStringToObject(meta, "namespace", ns);
        if (grace_seconds >= 0 || dry_run) {
                opts = cJSON_AddObjectToObject(ev, "deleteOptions");
                if (grace_seconds >= 0)
                        cJSON_AddNumberToObject(opts, "gracePeriodSeconds", (double)grace_seconds);
                if (dry_run)
                        cJSON_AddItemToObject(opts, "dryRun",
                                              cJSON_CreateStringArray((const char *[]){ "All" }, 1));
        }
        body = cJSON_PrintUnformatted(ev);
        if (!body || asprintf(&path, "/api/v1/namespaces/%s/pods/%s/eviction", ns, name) < 0)
                return -ENOMEM;
        /* Not retried here: a 429 means a PodDisruptionBudget said no, which the caller reports. */
        return kube_call_start(c,
                               &(struct kube_call_params){
                                       .method = "POST",
                                       .path = path,
                                       .content_type = "application/json",
                                       .body = body,
                                       .body_len = strlen(body),
                               },
                               done, userdata, ret_call);
}
