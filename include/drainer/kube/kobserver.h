/* What the API client and the informers report as they work, for whoever keeps
 * figures: one observer per process, set once at start like the log's level
 * (cmd/ sets obs/'s metrics observer). Without one nothing is reported. kube/
 * knows no metric, only these events. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct kube_observer {
        /* One attempt of a request ended: status is the HTTP status, 0 when the
         * server did not answer; duration is that of the attempt (for a watch, of
         * its whole stream). */
        void (*request_done)(const char *verb, long status, bool watch, uint64_t duration_usec);
        /* A request waited wait_usec in the client-side token bucket. */
        void (*rate_limited)(const char *verb, uint64_t wait_usec);
        /* The client's rate is now qps requests a second: once at the start of a
         * client with a limit, then at each change of an adaptive rate. */
        void (*rate_changed)(double qps);
        /* The server pushed back on a request of verb: a 429 of its flow control (not a
         * PodDisruptionBudget's), or a 5xx with Retry-After. */
        void (*pushback)(const char *verb, long status);
        /* A watch event of resource arrived (type: ADDED, MODIFIED, DELETED, BOOKMARK,
         * ERROR; "(null)" for one the decoder does not know). */
        void (*watch_event)(const char *resource, const char *type);
        /* A watch of resource ended: "closed" (by the server), "expired" (410),
         * "error". */
        void (*watch_ended)(const char *resource, const char *reason);
};

/* o (NULL: none) is borrowed for the life of the process. */
void kube_observer_set(const struct kube_observer *o);

/* The observer's callbacks, each a no-op without an observer or the callback. */
void kube_observe_request(const char *verb, long status, bool watch, uint64_t duration_usec);
void kube_observe_rate_limit(const char *verb, uint64_t wait_usec);
void kube_observe_rate(double qps);
void kube_observe_pushback(const char *verb, long status);
void kube_observe_watch_event(const char *resource, const char *type);
void kube_observe_watch_end(const char *resource, const char *reason);
