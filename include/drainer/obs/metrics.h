/* Metrics: a registry of counters, gauges and histograms with labels, capped
 * in families and series, rendered in the Prometheus text exposition format
 * 0.0.4 (and as JSON for the one-shot verbs' -o json summaries). drainer's
 * own metrics are defined once, in metrics.c, and live in a process-wide
 * default registry (metrics_default()), so the instrumented modules (client,
 * informer, engine) record into it without new parameters. Not thread-safe:
 * everything runs on the one loop. This header needs only libc and cJSON, so
 * any layer may include it, as it may include log.h. */
#pragma once

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include "drainer/base/macro.h"

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#define METRICS_MAX_LABELS      4   /* label names per family */
#define METRICS_MAX_BUCKETS     32  /* histogram upper bounds, +Inf not counted */
#define METRICS_MAX_LABEL_VALUE 256 /* bytes; a longer value is refused (-E2BIG) */
#define METRICS_MAX_HELP        512

/* Label values, one per label name of the family, in order. */
#define METRIC_LABELS(...) ((const char *const[]){ __VA_ARGS__, NULL })

enum metric_type {
        METRIC_COUNTER,
        METRIC_GAUGE,
        METRIC_HISTOGRAM,
        _METRIC_TYPE_MAX,
        _METRIC_TYPE_INVALID = -EINVAL,
};

const char *metric_type_to_string(enum metric_type t);
enum metric_type metric_type_from_string(const char *s);

struct metric_desc {
        const char *name; /* [a-zA-Z_:][a-zA-Z0-9_:]*; counters end in "_total" */
        const char *help; /* one line, at most METRICS_MAX_HELP bytes */
        enum metric_type type;
        const char *labels[METRICS_MAX_LABELS + 1]; /* NULL-terminated; "le" only as histograms add it */
        const double *buckets; /* histograms: increasing finite upper bounds; NULL: Prometheus' defaults */
        size_t n_buckets;
};

struct metrics_options {
        size_t max_families; /* 0 = 256 */
        size_t max_series;   /* over all families; 0 = 20000. Past it observations are dropped. */
};

struct metrics;
struct metric_family;

int metrics_new(const struct metrics_options *o, struct metrics **ret);
/* NULL ok. Returns NULL. */
struct metrics *metrics_free(struct metrics *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct metrics *, metrics_free);

/* Registers a family, or finds the one of that name when the description is the
 * same (type, labels, buckets: registering twice is harmless). Strings are copied.
 * -EINVAL (bad name, label, help or buckets), -EEXIST (the name is taken by a
 * different description), -ENOSPC (max_families), -ENOMEM. */
int metrics_register(struct metrics *m, const struct metric_desc *d, struct metric_family **ret);
struct metric_family *metrics_find(const struct metrics *m, const char *name);

/* Recording. values: METRIC_LABELS(...) with one value per label name, or NULL for
 * a family without labels. A NULL family is ignored (returns -EINVAL), so a caller
 * may pass metrics_family() without checking for out-of-memory. A new series past
 * max_series is dropped and counted (metrics_dropped()): -ENOSPC.
 *  metrics_add:     counters (v >= 0) and gauges
 *  metrics_set:     gauges; counters too, for collectors that mirror a total kept
 *                   elsewhere (it must not go down)
 *  metrics_observe: histograms
 * -EINVAL for the wrong type, the wrong number of values, a negative counter
 * increment; -E2BIG for a value over METRICS_MAX_LABEL_VALUE; -ENOMEM. */
int metrics_add(struct metric_family *f, const char *const *values, double v);
int metrics_set(struct metric_family *f, const char *const *values, double v);
int metrics_observe(struct metric_family *f, const char *const *values, double v);
/* Forgets one series (-ENOENT if there is none). */
int metrics_remove(struct metric_family *f, const char *const *values);
/* Forgets the family's series whose label `label` has this value. Returns how many. */
size_t metrics_remove_where(struct metric_family *f, const char *label, const char *value);
/* The same in every family with such a label (e.g. everything about a node that
 * is back in service). Returns how many. */
size_t metrics_remove_label(struct metrics *m, const char *label, const char *value);

/* Reading, for tests and summaries: counters and gauges; -ENOENT without the series. */
int metrics_get(const struct metric_family *f, const char *const *values, double *ret);
int metrics_get_histogram(const struct metric_family *f, const char *const *values,
                          unsigned long long *ret_count, double *ret_sum);
size_t metrics_series(const struct metrics *m);
unsigned long long metrics_dropped(const struct metrics *m);

/* A collector runs before every rendering to refresh values kept elsewhere
 * (process metrics). At most 8. -ENOSPC past that. */
typedef void (*metrics_collect_fn)(struct metrics *m, void *userdata);
int metrics_add_collector(struct metrics *m, metrics_collect_fn fn, void *userdata);

/* The text exposition format 0.0.4: HELP and TYPE of every family (also of those
 * without series yet), series in the order they appeared, label values and help
 * escaped. *ret is NUL-terminated and the caller's to free(). -E2BIG past
 * BUF_CAP_METRICS_TEXT (buf.h), -ENOMEM. */
int metrics_render(struct metrics *m, char **ret, size_t *ret_len);
/* The same figures as JSON: {"NAME": {"type": "counter", "series": [{"labels":
 * {...}, "value": N}]}, "HIST": {"type": "histogram", "series": [{"labels": {...},
 * "count": N, "sum": S, "buckets": [{"le": 0.1, "count": N}, ...]}]}} with
 * cumulative bucket counts (+Inf is "count"); families without series are left
 * out. NULL on OOM. */
cJSON *metrics_to_json(struct metrics *m);

/* The standard process metrics of client_golang, from /proc/self and getrlimit():
 * process_cpu_seconds_total, process_resident_memory_bytes,
 * process_virtual_memory_bytes, process_start_time_seconds, process_open_fds,
 * process_max_fds. Registers them and their collector. */
int metrics_add_process(struct metrics *m);

/* ---- drainer's own metrics (names, help, labels and buckets in metrics.c) ---- */

enum drainer_metric {
        DRAINER_METRIC_BUILD_INFO,         /* gauge {version} = 1 */
        DRAINER_METRIC_DRAINS,             /* counter {goal, result}: engine runs that ended */
        DRAINER_METRIC_DRAIN_DURATION,     /* histogram {goal, result}: seconds of a run */
        DRAINER_METRIC_PHASE_DURATION,     /* histogram {phase}: seconds a node spent in a phase */
        DRAINER_METRIC_PHASE,              /* gauge {node, phase} = 1 for the node's current phase */
        DRAINER_METRIC_PHASE_START,        /* gauge {node, phase}: Unix time the phase began */
        DRAINER_METRIC_EVICTIONS,          /* counter {result}: accepted, pdb_blocked, gone, error */
        DRAINER_METRIC_EVICTIONS_PDB,      /* gauge {node}: pods whose eviction a PDB holds back now */
        DRAINER_METRIC_CLAIMS,             /* gauge {node}: ResourceClaims on the node (drivers' excepted) */
        DRAINER_METRIC_PODS_PENDING,       /* gauge {node, group}: pods left to evict, per group */
        DRAINER_METRIC_DRIVER_HEALTHY,     /* gauge {node, driver}: 1 healthy, 0 not */
        DRAINER_METRIC_DEVICE_UNHEALTHY,   /* gauge {node, device}: 1 while reported unhealthy */
        DRAINER_METRIC_DEVICE_HEALTH,      /* counter {health}: devices turned unhealthy / healthy */
        DRAINER_METRIC_DRAINS_STARTED,     /* counter {asker}: serve's drain starts, by who asked */
        DRAINER_METRIC_API_REQUESTS,       /* counter {verb, code} */
        DRAINER_METRIC_API_DURATION,       /* histogram {verb}: watches excepted */
        DRAINER_METRIC_API_RATELIMIT_WAIT, /* histogram {verb}: seconds in the client-side token bucket */
        DRAINER_METRIC_API_CLIENT_QPS,  /* gauge: the client's rate now (adaptive: what the server allows) */
        DRAINER_METRIC_API_PUSHBACKS,   /* counter {verb, code}: 429s (not a PDB's), 5xx with Retry-After */
        DRAINER_METRIC_WATCH_EVENTS,    /* counter {resource, type} */
        DRAINER_METRIC_WATCH_RESTARTS,  /* counter {resource, reason}: closed, expired, error */
        DRAINER_METRIC_METRICS_DROPPED, /* counter: observations dropped at the series cap */
        _DRAINER_METRIC_MAX,
        _DRAINER_METRIC_INVALID = -EINVAL,
};

/* The process-wide registry, created on first use with the process metrics and
 * every drainer metric registered (series that only take known label values,
 * such as evictions by result, start at 0). Freed at exit. NULL only on OOM. */
struct metrics *metrics_default(void);
/* A drainer metric's family in the default registry; NULL on OOM (which the
 * recording functions ignore). */
struct metric_family *metrics_family(enum drainer_metric id);
const char *drainer_metric_name(enum drainer_metric id);

/* The kube observer that records requests and watches into the default registry
 * (drainer_api_*, drainer_watch_*): kube_observer_set(&metrics_kube_observer). */
struct kube_observer;
extern const struct kube_observer metrics_kube_observer;
