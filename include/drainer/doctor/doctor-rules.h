/* The rules of `drainer doctor`: the cluster audited against the upstream page
 * "Good practices for Dynamic Resource Allocation as a Cluster Admin". Pure:
 * every finding is built here from what gather read (struct doctor_data) and
 * what Prometheus answered (struct doctor_prom_results); no request is made. */
#pragma once

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include "drainer/base/macro.h"
#include "drainer/doctor/doctor-gather.h"
#include "drainer/doctor/doctor-prom.h"
#include "drainer/doctor/doctor-report.h"
#include "drainer/dra/upgrade.h"

/* Every finding of doctor over what gather read (d) and, with --prometheus
 * (prom_url; NULL: not asked), what Prometheus answered (prom), added to rep
 * and sorted. -ENOMEM. */
int doctor_rules_run(const struct doctor_data *d, const char *prom_url,
                     const struct doctor_prom_results *prom, struct doctor_report *rep);

/* ---- the rules, as a table ---- */

/* What a rule reads. */
enum {
        DOCTOR_RULE_NEEDS_DATA = 1u << 0, /* what gather read (struct doctor_data) */
        /* one DRA driver named in ResourceSlices: the rule runs once per driver (once
         * with driver NULL when there is none) */
        DOCTOR_RULE_NEEDS_DRIVER = 1u << 1,
        /* Prometheus's answers: the rule runs only with --prometheus */
        DOCTOR_RULE_NEEDS_PROMETHEUS = 1u << 2,
};

/* What a rule's check is given; what it does not need may be NULL. */
struct doctor_rule_input {
        const struct doctor_data *data;
        const char *prom_url;                   /* NULL: --prometheus not given */
        const struct doctor_prom_results *prom; /* NULL without prom_url */
        const struct doctor_driver *driver;     /* DOCTOR_RULE_NEEDS_DRIVER: this driver, or NULL */
        const char *subject;                    /* "driver NAME" with a driver, else "" */
};

/* One rule: the check its findings carry as their id, the section of the guide it
 * names, what it reads (DOCTOR_RULE_NEEDS_*), and its check, which adds its findings
 * to rep: 0, or -ENOMEM. */
struct doctor_rule {
        const char *id;
        enum doctor_section section;
        unsigned needs;
        int (*check)(const struct doctor_rule_input *in, struct doctor_report *rep);
};

/* Every rule, in the guide's order; doctor_rules_run() runs them in it. */
extern const struct doctor_rule doctor_rules[];
extern const size_t doctor_rules_n;

/* ---- Driver deployment ---- */

enum doctor_probe {
        DOCTOR_PROBE_NONE,
        DOCTOR_PROBE_GRPC,
        DOCTOR_PROBE_HTTP,
        DOCTOR_PROBE_TCP,
        DOCTOR_PROBE_EXEC,
        _DOCTOR_PROBE_MAX,
        _DOCTOR_PROBE_INVALID = -EINVAL,
};

/* "none", "grpc", "httpGet", "tcpSocket", "exec" */
const char *doctor_probe_to_string(enum doctor_probe p);
/* The livenessProbe handler of a core/v1 Container. */
enum doctor_probe doctor_container_liveness(const cJSON *container);
/* Whether the container's preStop hook runs the drainer guard: the exec form
 * (lifecycle.preStop.exec.command: some argument mentions "drainer" and one mentions
 * "guard", so that both ["/usr/bin/drainer", "guard"] and ["sh", "-c", "exec /x/drainer
 * guard"] count), or the sidecar form: an httpGet of /guard to the port that a native
 * sidecar of podspec (an init container with restartPolicy Always) running `drainer
 * guard --listen HOST:PORT` listens on. podspec may be NULL (exec form only). */
bool doctor_container_has_guard(const cJSON *podspec, const cJSON *container);

/* ---- Tuning at scale ---- */

/* The guide's scale test: kube-controller-manager at --kube-api-qps 75 and
 * --kube-api-burst 150 kept pod start-up within SLO at 100 nodes and 800 claims
 * (720 long-running + 80 churning pods, one claim each). */
#define DOCTOR_FLOOR_QPS    75.0
#define DOCTOR_FLOOR_BURST  150
#define DOCTOR_FLOOR_NODES  100
#define DOCTOR_FLOOR_CLAIMS 800

/* The floor scaled linearly to this cluster: by the larger of nodes/100 and
 * claims/800, rounded up. This function can't fail. */
void doctor_scaled_floor(size_t nodes, size_t claims, double *ret_qps, int *ret_burst);

/* Defaults when neither flag nor config sets them (client-go settings of the
 * components): kube-controller-manager 20/30, kube-scheduler 50/100. */
#define DOCTOR_KCM_DEFAULT_QPS         20.0
#define DOCTOR_KCM_DEFAULT_BURST       30
#define DOCTOR_SCHEDULER_DEFAULT_QPS   50.0
#define DOCTOR_SCHEDULER_DEFAULT_BURST 100

/* Adds the tuning finding of one component ("kube-controller-manager" or
 * "kube-scheduler"); pod: "ns/name" of its static pod, or NULL when none is
 * visible (managed control planes); conn is ignored then. have_prometheus:
 * the metrics findings judge the component instead. -ENOMEM. */
int doctor_report_client_qps(struct doctor_report *r, const char *component, const char *pod,
                             const struct doctor_client_conn *conn, size_t nodes, size_t claims,
                             bool have_prometheus);

/* ---- Tuning at scale: the guide's Prometheus queries ---- */

/* Where "low" ends and "high" begins. The guide names the patterns, not the
 * numbers; these are drainer's, printed with every finding. */
#define DOCTOR_WQ_ADDS_HIGH     10.0 /* items/s added to the resource_claim queue */
#define DOCTOR_WQ_DEPTH_HIGH    10.0 /* items waiting */
#define DOCTOR_WQ_WORK_SLOW     0.5  /* s, p99 of one sync */
#define DOCTOR_SCHED_SLI_SLOW   5.0  /* s, p99 from queue to bound: the pod start-up SLO budget */
#define DOCTOR_SCHED_ALG_SLOW   0.5  /* s, p99 of the scheduling algorithm alone */
#define DOCTOR_PREPARE_SLOW_SEC 1.0  /* s, p99 of NodePrepareResources / NodeUnprepareResources */
#define DOCTOR_PLUGIN_SHARE_MIN 0.5  /* the plugin's p99 over the kubelet's: "the driver is the slow part" */

enum doctor_wq_verdict {
        DOCTOR_WQ_OK,
        DOCTOR_WQ_NO_DATA,
        DOCTOR_WQ_TUNE_CONTROLLER, /* low adds + high depth, or slow work: QPS, burst, CPU/memory */
        DOCTOR_WQ_LOWER_POD_QPS,   /* high adds + high depth + fast work: concurrency is hardcoded */
        _DOCTOR_WQ_VERDICT_MAX,
};
enum doctor_wq_verdict doctor_judge_workqueue(struct doctor_metric adds, struct doctor_metric depth,
                                              struct doctor_metric work);

enum doctor_sched_verdict {
        DOCTOR_SCHED_OK,
        DOCTOR_SCHED_NO_DATA,
        DOCTOR_SCHED_BINDING_SLOW,   /* end-to-end slow, algorithm fast: QPS/burst, claim creation */
        DOCTOR_SCHED_ALGORITHM_SLOW, /* the algorithm itself is slow: CPU, selectors, devices */
        _DOCTOR_SCHED_VERDICT_MAX,
};
enum doctor_sched_verdict doctor_judge_scheduler(struct doctor_metric sli, struct doctor_metric alg);

enum doctor_prepare_verdict {
        DOCTOR_PREPARE_OK,
        DOCTOR_PREPARE_NO_DATA,
        DOCTOR_PREPARE_DRIVER_SLOW,  /* the plugin's own gRPC operation takes most of it */
        DOCTOR_PREPARE_KUBELET_SLOW, /* the kubelet's side (its API calls, the connection) takes most */
        DOCTOR_PREPARE_SLOW,         /* slow, and no plugin metric to tell where */
        _DOCTOR_PREPARE_VERDICT_MAX,
};
enum doctor_prepare_verdict doctor_judge_prepare(struct doctor_metric kubelet, struct doctor_metric plugin);

/* The findings of the metrics: the resource_claim workqueue, the scheduler,
 * Prepare and Unprepare, from what doctor_prom_start() gathered. An error
 * (Prometheus unreachable, a query refused) of a query group makes its finding
 * a WARN. -ENOMEM. */
int doctor_report_prometheus(struct doctor_report *r, const char *url, const struct doctor_prom_results *m);
