/* The metrics registry as the kube observer: API requests, their durations and
 * rate-limit waits, the client's rate and the server's pushback, watch events and
 * restarts become drainer_api_* and
 * drainer_watch_* series. cmd/ sets it at start; nothing here talks to the API. */
#include <stdio.h>

#include "drainer/base/macro.h"
#include "drainer/base/timesrc.h"
#include "drainer/kube/kobserver.h"
#include "drainer/obs/metrics.h"

static void on_request_done(const char *verb, long status, bool watch, uint64_t duration_usec) {
        char code[24] = "<error>";

        if (status > 0)
                snprintf(code, sizeof(code), "%ld", status);
        metrics_add(metrics_family(DRAINER_METRIC_API_REQUESTS), METRIC_LABELS(verb, code), 1);
        if (!watch)
                metrics_observe(metrics_family(DRAINER_METRIC_API_DURATION), METRIC_LABELS(verb),
                                (double)duration_usec / USEC_PER_SEC);
}

static void on_rate_limited(const char *verb, uint64_t wait_usec) {
        metrics_observe(metrics_family(DRAINER_METRIC_API_RATELIMIT_WAIT), METRIC_LABELS(verb),
                        (double)wait_usec / USEC_PER_SEC);
}

static void on_rate_changed(double qps) {
        metrics_set(metrics_family(DRAINER_METRIC_API_CLIENT_QPS), NULL, qps > 0 ? qps : 0);
}

static void on_pushback(const char *verb, long status) {
        char code[24];

        snprintf(code, sizeof(code), "%ld", status);
        metrics_add(metrics_family(DRAINER_METRIC_API_PUSHBACKS), METRIC_LABELS(verb, code), 1);
}

static void on_watch_event(const char *resource, const char *type) {
        metrics_add(metrics_family(DRAINER_METRIC_WATCH_EVENTS), METRIC_LABELS(resource, type), 1);
}

static void on_watch_ended(const char *resource, const char *reason) {
        metrics_add(metrics_family(DRAINER_METRIC_WATCH_RESTARTS), METRIC_LABELS(resource, reason), 1);
}

const struct kube_observer metrics_kube_observer = {
        .request_done = on_request_done,
        .rate_limited = on_rate_limited,
        .rate_changed = on_rate_changed,
        .pushback = on_pushback,
        .watch_event = on_watch_event,
        .watch_ended = on_watch_ended,
};
