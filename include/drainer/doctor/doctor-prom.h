/* The Prometheus side of `drainer doctor`: the guide's queries, verbatim,
 * asked through drainer's own transport (GET URL/api/v1/query), and their
 * answers as numbers. What the numbers mean is for drainer/doctor/rules.c. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "drainer/base/macro.h"

struct transport;

/* The queries, as the guide writes them. The guide's depth query carries the
 * label endpoint="kube-controller-manager" that kube-prometheus-stack adds;
 * when it finds nothing, DOCTOR_Q_WQ_DEPTH_ANY is asked instead. */
#define DOCTOR_Q_WQ_ADDS "sum(rate(workqueue_adds_total{name=\"resource_claim\"}[5m]))"
#define DOCTOR_Q_WQ_DEPTH \
        "sum(workqueue_depth{endpoint=\"kube-controller-manager\", name=\"resource_claim\"})"
#define DOCTOR_Q_WQ_DEPTH_ANY "sum(workqueue_depth{name=\"resource_claim\"})"
#define DOCTOR_Q_WQ_WORK                                                                                    \
        "histogram_quantile(0.99, sum(rate(workqueue_work_duration_seconds_bucket{name=\"resource_claim\"}" \
        "[5m])) by (le))"
#define DOCTOR_Q_SCHED_SLI                                                                                  \
        "histogram_quantile(0.99, sum(increase(scheduler_pod_scheduling_sli_duration_seconds_bucket[5m])) " \
        "by (le))"
#define DOCTOR_Q_SCHED_ALG                                                           \
        "histogram_quantile(0.99, "                                                  \
        "sum(increase(scheduler_scheduling_algorithm_duration_seconds_bucket[5m])) " \
        "by (le))"
#define DOCTOR_Q_KUBELET_PREPARE                                                                   \
        "histogram_quantile(0.99, sum(rate(dra_operations_duration_seconds_bucket{operation_name=" \
        "\"PrepareResources\"}[5m])) by (le))"
#define DOCTOR_Q_KUBELET_UNPREPARE                                                                 \
        "histogram_quantile(0.99, sum(rate(dra_operations_duration_seconds_bucket{operation_name=" \
        "\"UnprepareResources\"}[5m])) by (le))"
#define DOCTOR_Q_PLUGIN_PREPARE                                                                       \
        "histogram_quantile(0.99, sum(rate(dra_grpc_operations_duration_seconds_bucket{method_name=~" \
        "\".*NodePrepareResources\"}[5m])) by (le))"
#define DOCTOR_Q_PLUGIN_UNPREPARE                                                                     \
        "histogram_quantile(0.99, sum(rate(dra_grpc_operations_duration_seconds_bucket{method_name=~" \
        "\".*NodeUnprepareResources\"}[5m])) by (le))"

/* One evaluated query: have = false when the answer held no sample or NaN;
 * +Inf (a quantile beyond the last bucket) is a value. */
struct doctor_metric {
        bool have;
        double value;
};

/* Parses a Prometheus /api/v1/query answer of an aggregated query: a vector
 * (its largest sample) or a scalar. 0 with *ret; -EBADMSG for a malformed
 * answer; -EPROTO for status "error", with *ret_error (malloc'd, the caller
 * frees it; may be NULL) "errorType: error". */
int doctor_prom_parse(const char *body, size_t len, struct doctor_metric *ret, char **ret_error);

/* The answers of the guide's queries. depth_query: the depth query that
 * answered (DOCTOR_Q_WQ_DEPTH, or DOCTOR_Q_WQ_DEPTH_ANY when the guide's found
 * nothing). A query that could not be asked or was refused leaves its metric
 * without a value and the first such error of its group (the workqueue, the
 * scheduler, the kubelets, the plugins) in error_*: a one-line message (owned),
 * NULL when every query of the group was answered. */
struct doctor_prom_results {
        struct doctor_metric wq_adds, wq_depth, wq_work, sched_sli, sched_alg, kubelet_prepare,
                kubelet_unprepare, plugin_prepare, plugin_unprepare;
        const char *depth_query;
        char *error_kcm, *error_scheduler, *error_kubelet, *error_plugin;
};

/* Frees the error messages and resets m. This function can't fail. */
void doctor_prom_results_done(struct doctor_prom_results *m);

/* error: 0, or why the queries could not all be sent (-ENOMEM, or the
 * transport's -EINVAL/-ESHUTDOWN); the results hold what was answered. */
typedef void (*doctor_prom_done_fn)(int error, void *userdata);

/* Asks every query of the guide at url (the HTTP API base; trailing slashes
 * are ignored) at once through t, writing the answers into *m (which must stay
 * valid until done). A failed or refused query is not an error of the call:
 * its group's error_* says what happened. done runs exactly once, when every
 * query sent has been answered, never from inside this call. Fails without
 * running done (-ENOMEM, or the transport's error) when no query could be sent. */
int doctor_prom_start(struct transport *t, const char *url, struct doctor_prom_results *m,
                      doctor_prom_done_fn done, void *userdata);
