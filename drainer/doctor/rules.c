/* The rules of `drainer doctor` (the upstream DRA cluster-admin good
 * practices): findings built from API objects and metric values. Makes no
 * requests. */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/doctor-rules.h"
#include "drainer/json.h"

/* ---- Driver deployment ---- */

static const char *const probe_names[_DOCTOR_PROBE_MAX] = {
        [DOCTOR_PROBE_NONE] = "none",     [DOCTOR_PROBE_GRPC] = "grpc", [DOCTOR_PROBE_HTTP] = "httpGet",
        [DOCTOR_PROBE_TCP] = "tcpSocket", [DOCTOR_PROBE_EXEC] = "exec",
};

const char *doctor_probe_to_string(enum doctor_probe p) {
        return p >= 0 && p < _DOCTOR_PROBE_MAX ? probe_names[p] : NULL;
}

enum doctor_probe doctor_container_liveness(const cJSON *container) {
        const cJSON *p = json_path(container, "livenessProbe");

        if (!cJSON_IsObject(p))
                return DOCTOR_PROBE_NONE;
        if (cJSON_IsObject(json_path(p, "grpc")))
                return DOCTOR_PROBE_GRPC;
        if (cJSON_IsObject(json_path(p, "httpGet")))
                return DOCTOR_PROBE_HTTP;
        if (cJSON_IsObject(json_path(p, "tcpSocket")))
                return DOCTOR_PROBE_TCP;
        if (cJSON_IsObject(json_path(p, "exec")))
                return DOCTOR_PROBE_EXEC;
        return DOCTOR_PROBE_NONE; /* a probe without a handler is refused by the API server anyway */
}

bool doctor_container_has_guard(const cJSON *container) {
        const cJSON *cmd = json_path(container, "lifecycle.preStop.exec.command"), *a;
        bool drainer = false, guard = false;

        cJSON_ArrayForEach(a, cmd) {
                if (!cJSON_IsString(a))
                        continue;
                drainer = drainer || strstr(a->valuestring, "drainer");
                guard = guard || strstr(a->valuestring, "guard");
        }
        return drainer && guard;
}

static const char *const rollout_names[_DOCTOR_ROLLOUT_MAX] = {
        [DOCTOR_ROLLOUT_SURGE] = "RollingUpdate with maxSurge",
        [DOCTOR_ROLLOUT_NO_SURGE] = "RollingUpdate without maxSurge",
        [DOCTOR_ROLLOUT_ON_DELETE] = "OnDelete",
};

const char *doctor_rollout_to_string(enum doctor_rollout r) {
        return r >= 0 && r < _DOCTOR_ROLLOUT_MAX ? rollout_names[r] : NULL;
}

enum doctor_rollout doctor_daemonset_rollout(const cJSON *ds, const char **ret_surge) {
        const char *type = json_str(ds, "spec.updateStrategy.type");
        const cJSON *surge = json_path(ds, "spec.updateStrategy.rollingUpdate.maxSurge");
        bool positive = false;

        if (ret_surge)
                *ret_surge = "0";
        if (streq_ptr(type, "OnDelete"))
                return DOCTOR_ROLLOUT_ON_DELETE;
        if (cJSON_IsNumber(surge)) {
                positive = surge->valuedouble >= 1;
                if (ret_surge)
                        *ret_surge = positive ? "a count" : "0";
        } else if (cJSON_IsString(surge)) {
                /* A percentage of the nodes, rounded up by the DaemonSet controller: any
                 * positive percentage surges at least one pod. */
                char *end;
                double v = strtod(surge->valuestring, &end);

                positive = end != surge->valuestring && v > 0 && (*end == '%' || *end == 0);
                if (ret_surge)
                        *ret_surge = surge->valuestring;
        }
        return positive ? DOCTOR_ROLLOUT_SURGE : DOCTOR_ROLLOUT_NO_SURGE;
}

int doctor_kubelet_version_parse(const char *v, int *ret_major, int *ret_minor) {
        long major, minor;
        char *end;

        if (!v)
                return -EINVAL;
        if (*v == 'v' || *v == 'V')
                v++;
        if (!isdigit((unsigned char)*v))
                return -EINVAL;
        errno = 0;
        major = strtol(v, &end, 10);
        if (errno || *end != '.' || !isdigit((unsigned char)end[1]))
                return -EINVAL;
        minor = strtol(end + 1, &end, 10);
        if (errno || major <= 0 || major > 1000 || minor < 0 || minor > 100000)
                return -EINVAL;
        /* What follows the minor version: ".patch", "-suffix", "+build", or nothing. */
        if (*end && *end != '.' && *end != '-' && *end != '+')
                return -EINVAL;
        *ret_major = (int)major;
        *ret_minor = (int)minor;
        return 0;
}

int doctor_kubelet_seamless(const char *v) {
        int major, minor;

        if (doctor_kubelet_version_parse(v, &major, &minor) < 0)
                return -EINVAL;
        return major > 1 || (major == 1 && minor >= 33);
}

/* ---- Tuning at scale ---- */

void doctor_scaled_floor(size_t nodes, size_t claims, double *ret_qps, int *ret_burst) {
        double scale = MAX((double)nodes / DOCTOR_FLOOR_NODES, (double)claims / DOCTOR_FLOOR_CLAIMS);

        *ret_qps = ceil(DOCTOR_FLOOR_QPS * scale);
        *ret_burst = (int)ceil(DOCTOR_FLOOR_BURST * scale);
}

int doctor_report_client_qps(struct doctor_report *r, const char *component, const char *pod,
                             const struct doctor_client_conn *conn, size_t nodes, size_t claims,
                             bool have_prometheus) {
        bool kcm = streq(component, "kube-controller-manager");
        double floor_qps, qps = 0;
        int floor_burst, burst = 0;
        struct doctor_finding *f;

        doctor_scaled_floor(nodes, claims, &floor_qps, &floor_burst);
        if (!pod) {
                f = doctor_report_add(r, DOCTOR_SECTION_TUNING, have_prometheus ? DOCTOR_PASS : DOCTOR_WARN,
                                      "client-qps", component,
                                      "no static pod of %s in kube-system: its "
                                      "--kube-api-qps/--kube-api-burst are not visible "
                                      "(a managed control plane, or not run as a pod)%s",
                                      component,
                                      have_prometheus ? "; judged by the metrics below instead"
                                                      : "; cannot compare them");
                if (!f)
                        return -ENOMEM;
                if (!have_prometheus &&
                    doctor_finding_set_fix(
                            f,
                            "run doctor with --prometheus URL so that the guide's metrics tell "
                            "whether the %s needs more (at 100 nodes and 800 claims the guide "
                            "measured QPS 75 / burst 150 for kube-controller-manager)",
                            component) < 0)
                        return -ENOMEM;
                goto details;
        }
        if (conn->config_file && !(conn->have_qps && conn->have_burst)) {
                f = doctor_report_add(
                        r, DOCTOR_SECTION_TUNING, DOCTOR_WARN, "client-qps", component,
                        "%s reads its client settings from --config (clientConnection.qps/burst), "
                        "which is a file on its host: not visible from here",
                        pod);
                if (!f || doctor_finding_add_object(f, "Pod %s", pod) < 0 ||
                    doctor_finding_set_fix(
                            f,
                            "make sure clientConnection.qps >= %.0f and burst >= %d in that file "
                            "(the guide's floor at 100 nodes and 800 claims, scaled to %zu nodes "
                            "and %zu claims)",
                            floor_qps, floor_burst, nodes, claims) < 0)
                        return -ENOMEM;
                goto details;
        }
        qps = conn->have_qps ? conn->qps : kcm ? DOCTOR_KCM_DEFAULT_QPS : DOCTOR_SCHEDULER_DEFAULT_QPS;
        burst = conn->have_burst ? conn->burst
                : kcm            ? DOCTOR_KCM_DEFAULT_BURST
                                 : DOCTOR_SCHEDULER_DEFAULT_BURST;
        if (qps >= floor_qps && burst >= floor_burst) {
                f = doctor_report_add(
                        r, DOCTOR_SECTION_TUNING, DOCTOR_PASS, "client-qps", component,
                        "--kube-api-qps %g%s, --kube-api-burst %d%s: at or above the guide's floor "
                        "scaled to %zu nodes and %zu claims (%.0f/%d)",
                        qps, conn->have_qps ? "" : " (default)", burst, conn->have_burst ? "" : " (default)",
                        nodes, claims, floor_qps, floor_burst);
                if (!f || doctor_finding_add_object(f, "Pod %s", pod) < 0)
                        return -ENOMEM;
        } else {
                f = doctor_report_add(
                        r, DOCTOR_SECTION_TUNING, DOCTOR_WARN, "client-qps", component,
                        "--kube-api-qps %g%s, --kube-api-burst %d%s: below the guide's floor for "
                        "DRA clusters (QPS 75 / burst 150 at 100 nodes and 800 claims) scaled to "
                        "%zu nodes and %zu claims: %.0f/%d%s",
                        qps, conn->have_qps ? "" : " (default)", burst, conn->have_burst ? "" : " (default)",
                        nodes, claims, floor_qps, floor_burst,
                        kcm ? ""
                            : " (the guide measured kube-controller-manager; a scheduler whose "
                              "QPS is too low finds nodes fast but binds pods late)");
                if (!f || doctor_finding_add_object(f, "Pod %s", pod) < 0 ||
                    doctor_finding_set_fix(
                            f, "set --kube-api-qps=%.0f --kube-api-burst=%d (or more) on %s",
                            MAX(floor_qps, kcm ? DOCTOR_KCM_DEFAULT_QPS : DOCTOR_SCHEDULER_DEFAULT_QPS),
                            MAX(floor_burst,
                                kcm ? DOCTOR_KCM_DEFAULT_BURST : DOCTOR_SCHEDULER_DEFAULT_BURST),
                            component) < 0)
                        return -ENOMEM;
        }
details:
        if (doctor_finding_add_detail(f, "nodes", (double)nodes) < 0 ||
            doctor_finding_add_detail(f, "claims", (double)claims) < 0 ||
            doctor_finding_add_detail(f, "floorQPS", floor_qps) < 0 ||
            doctor_finding_add_detail(f, "floorBurst", floor_burst) < 0)
                return -ENOMEM;
        if (pod && !(conn->config_file && !(conn->have_qps && conn->have_burst)) &&
            (doctor_finding_add_detail(f, "qps", qps) < 0 ||
             doctor_finding_add_detail(f, "burst", burst) < 0))
                return -ENOMEM;
        return 0;
}

/* ---- the guide's Prometheus queries ---- */

enum doctor_wq_verdict doctor_judge_workqueue(struct doctor_metric adds, struct doctor_metric depth,
                                              struct doctor_metric work) {
        bool deep, slow, busy;

        if (!depth.have && !work.have)
                return DOCTOR_WQ_NO_DATA;
        deep = depth.have && depth.value >= DOCTOR_WQ_DEPTH_HIGH;
        slow = work.have && work.value >= DOCTOR_WQ_WORK_SLOW;
        busy = adds.have && adds.value >= DOCTOR_WQ_ADDS_HIGH;
        /* "low Workqueue Add Rate, high Workqueue Depth, and/or high Workqueue Work
         * Duration": the controller is not performing. */
        if (slow || (deep && !busy))
                return DOCTOR_WQ_TUNE_CONTROLLER;
        /* "high Workqueue Add Rate, high Workqueue Depth, but reasonable Workqueue Work
         * Duration": it works, but its (hardcoded) concurrency is not enough. */
        if (deep && busy)
                return DOCTOR_WQ_LOWER_POD_QPS;
        return DOCTOR_WQ_OK;
}

enum doctor_sched_verdict doctor_judge_scheduler(struct doctor_metric sli, struct doctor_metric alg) {
        if (!sli.have && !alg.have)
                return DOCTOR_SCHED_NO_DATA;
        if (alg.have && alg.value >= DOCTOR_SCHED_ALG_SLOW)
                return DOCTOR_SCHED_ALGORITHM_SLOW;
        if (sli.have && sli.value >= DOCTOR_SCHED_SLI_SLOW)
                return DOCTOR_SCHED_BINDING_SLOW;
        return DOCTOR_SCHED_OK;
}

enum doctor_prepare_verdict doctor_judge_prepare(struct doctor_metric kubelet, struct doctor_metric plugin) {
        if (!kubelet.have && !plugin.have)
                return DOCTOR_PREPARE_NO_DATA;
        if (!kubelet.have) {
                /* Only the plugin's view: judge by it alone. */
                if (plugin.value >= DOCTOR_PREPARE_SLOW_SEC)
                        return DOCTOR_PREPARE_DRIVER_SLOW;
                return DOCTOR_PREPARE_OK;
        }
        if (kubelet.value < DOCTOR_PREPARE_SLOW_SEC)
                return DOCTOR_PREPARE_OK;
        if (!plugin.have)
                return DOCTOR_PREPARE_SLOW;
        if (plugin.value >= DOCTOR_PLUGIN_SHARE_MIN * kubelet.value)
                return DOCTOR_PREPARE_DRIVER_SLOW;
        return DOCTOR_PREPARE_KUBELET_SLOW;
}

static int add_metric_details(struct doctor_finding *f, const char *key, struct doctor_metric m) {
        if (!m.have)
                return 0;
        return doctor_finding_add_detail(f, key, m.value);
}

/* "0.123 s", "+Inf s", "no data" */
static const char *fmt_metric(char *buf, size_t size, struct doctor_metric m, const char *unit) {
        if (!m.have)
                snprintf(buf, size, "no data");
        else if (isinf(m.value))
                snprintf(buf, size, "%sInf%s", m.value > 0 ? "+" : "-", unit);
        else
                snprintf(buf, size, "%.3g%s", m.value, unit);
        return buf;
}

static int report_workqueue(struct doctor_report *r, const char *url, const struct doctor_prom_results *m) {
        enum doctor_wq_verdict v = doctor_judge_workqueue(m->wq_adds, m->wq_depth, m->wq_work);
        char a[32], d[32], w[32];
        struct doctor_finding *f;
        static const char *const check = "resource-claim-workqueue";
        static const char *const subject = "kube-controller-manager";

        if (m->error_kcm) {
                f = doctor_report_add(r, DOCTOR_SECTION_KCM_METRICS, DOCTOR_WARN, check, subject,
                                      "cannot evaluate the resource_claim workqueue queries at %s: %s", url,
                                      m->error_kcm);
                return f ? 0 : -ENOMEM;
        }
        fmt_metric(a, sizeof a, m->wq_adds, "/s");
        fmt_metric(d, sizeof d, m->wq_depth, "");
        fmt_metric(w, sizeof w, m->wq_work, " s");
        switch (v) {
        case DOCTOR_WQ_NO_DATA:
                f = doctor_report_add(
                        r, DOCTOR_SECTION_KCM_METRICS, DOCTOR_WARN, check, subject,
                        "no samples of the resource_claim workqueue (add rate %s, depth %s, p99 "
                        "work %s)",
                        a, d, w);
                if (f && doctor_finding_set_fix(
                                 f, "let Prometheus scrape kube-controller-manager's /metrics (its "
                                    "workqueue_* series with name=\"resource_claim\")") < 0)
                        return -ENOMEM;
                break;
        case DOCTOR_WQ_TUNE_CONTROLLER:
                f = doctor_report_add(
                        r, DOCTOR_SECTION_KCM_METRICS, DOCTOR_WARN, check, subject,
                        "the ResourceClaim controller is not keeping up: add rate %s, depth %s "
                        "(high from %.0f), p99 work %s (slow from %.2g s): %s",
                        a, d, DOCTOR_WQ_DEPTH_HIGH, w, DOCTOR_WQ_WORK_SLOW,
                        m->wq_work.have && m->wq_work.value >= DOCTOR_WQ_WORK_SLOW
                                ? "its syncs are slow"
                                : "items pile up although few are added");
                if (f && doctor_finding_set_fix(f, "raise kube-controller-manager's --kube-api-qps and "
                                                   "--kube-api-burst, and its CPU/memory") < 0)
                        return -ENOMEM;
                break;
        case DOCTOR_WQ_LOWER_POD_QPS:
                f = doctor_report_add(
                        r, DOCTOR_SECTION_KCM_METRICS, DOCTOR_WARN, check, subject,
                        "the ResourceClaim controller works fast (p99 %s) but cannot keep up with "
                        "what is added: add rate %s (high from %.0f/s), depth %s (high from %.0f); "
                        "its concurrency is hardcoded",
                        w, a, DOCTOR_WQ_ADDS_HIGH, d, DOCTOR_WQ_DEPTH_HIGH);
                if (f && doctor_finding_set_fix(f, "lower the pod creation QPS (of Jobs, batch schedulers, "
                                                   "controllers creating pods with claims), so that the "
                                                   "resource_claim queue's add rate becomes manageable") < 0)
                        return -ENOMEM;
                break;
        default:
                f = doctor_report_add(
                        r, DOCTOR_SECTION_KCM_METRICS, DOCTOR_PASS, check, subject,
                        "the ResourceClaim controller keeps up: add rate %s, depth %s, p99 work %s", a, d,
                        w);
                break;
        }
        if (!f || doctor_finding_add_object(f, "query %s", DOCTOR_Q_WQ_ADDS) < 0 ||
            doctor_finding_add_object(f, "query %s", m->depth_query ? m->depth_query : DOCTOR_Q_WQ_DEPTH) <
                    0 ||
            doctor_finding_add_object(f, "query %s", DOCTOR_Q_WQ_WORK) < 0 ||
            add_metric_details(f, "addRate", m->wq_adds) < 0 ||
            add_metric_details(f, "depth", m->wq_depth) < 0 ||
            add_metric_details(f, "workP99Seconds", m->wq_work) < 0)
                return -ENOMEM;
        return 0;
}

static int report_scheduler(struct doctor_report *r, const char *url, const struct doctor_prom_results *m) {
        enum doctor_sched_verdict v = doctor_judge_scheduler(m->sched_sli, m->sched_alg);
        char s[32], a[32];
        struct doctor_finding *f;
        static const char *const check = "scheduling-latency";
        static const char *const subject = "kube-scheduler";

        if (m->error_scheduler) {
                f = doctor_report_add(r, DOCTOR_SECTION_SCHEDULER_METRICS, DOCTOR_WARN, check, subject,
                                      "cannot evaluate the scheduler queries at %s: %s", url,
                                      m->error_scheduler);
                return f ? 0 : -ENOMEM;
        }
        fmt_metric(s, sizeof s, m->sched_sli, " s");
        fmt_metric(a, sizeof a, m->sched_alg, " s");
        switch (v) {
        case DOCTOR_SCHED_NO_DATA:
                f = doctor_report_add(r, DOCTOR_SECTION_SCHEDULER_METRICS, DOCTOR_WARN, check, subject,
                                      "no samples of the scheduler's latency histograms");
                if (f && doctor_finding_set_fix(f, "let Prometheus scrape kube-scheduler's /metrics") < 0)
                        return -ENOMEM;
                break;
        case DOCTOR_SCHED_ALGORITHM_SLOW:
                f = doctor_report_add(r, DOCTOR_SECTION_SCHEDULER_METRICS, DOCTOR_WARN, check, subject,
                                      "the scheduling algorithm itself is slow: p99 %s (slow from %.2g s), "
                                      "end to end %s",
                                      a, DOCTOR_SCHED_ALG_SLOW, s);
                if (f &&
                    doctor_finding_set_fix(f, "give kube-scheduler more CPU; check how many devices its "
                                              "ResourceSlices hold and how costly the CEL selectors of "
                                              "DeviceClasses and claims are") < 0)
                        return -ENOMEM;
                break;
        case DOCTOR_SCHED_BINDING_SLOW:
                f = doctor_report_add(
                        r, DOCTOR_SECTION_SCHEDULER_METRICS, DOCTOR_WARN, check, subject,
                        "pods wait long from queue to bound (p99 %s, slow from %.0f s) although "
                        "the algorithm is fast (p99 %s): nodes are found quickly but binding "
                        "(or claim creation) lags",
                        s, DOCTOR_SCHED_SLI_SLOW, a);
                if (f && doctor_finding_set_fix(
                                 f, "raise kube-scheduler's client QPS/burst "
                                    "(clientConnection.qps/burst); with ResourceClaimTemplates "
                                    "also check kube-controller-manager (it creates the claims)") < 0)
                        return -ENOMEM;
                break;
        default:
                f = doctor_report_add(r, DOCTOR_SECTION_SCHEDULER_METRICS, DOCTOR_PASS, check, subject,
                                      "scheduling p99 %s end to end, algorithm p99 %s", s, a);
                break;
        }
        if (!f || doctor_finding_add_object(f, "query %s", DOCTOR_Q_SCHED_SLI) < 0 ||
            doctor_finding_add_object(f, "query %s", DOCTOR_Q_SCHED_ALG) < 0 ||
            add_metric_details(f, "sliP99Seconds", m->sched_sli) < 0 ||
            add_metric_details(f, "algorithmP99Seconds", m->sched_alg) < 0)
                return -ENOMEM;
        return 0;
}

static int report_prepare(struct doctor_report *r, const char *url, const char *op,
                          struct doctor_metric kubelet, struct doctor_metric plugin, const char *error,
                          const char *kubelet_query, const char *plugin_query) {
        enum doctor_prepare_verdict v = doctor_judge_prepare(kubelet, plugin);
        bool unprepare = strstr(op, "Unprepare");
        char k[32], p[32], check[64];
        struct doctor_finding *f;
        const char *drain_note = unprepare ? " (drains wait for it: a node's claims are released only after "
                                             "NodeUnprepareResources)"
                                           : "";

        snprintf(check, sizeof check, "%s-latency", unprepare ? "unprepare" : "prepare");
        if (error) {
                f = doctor_report_add(r, DOCTOR_SECTION_KUBELET_METRICS, DOCTOR_WARN, check, op,
                                      "cannot evaluate the %s queries at %s: %s", op, url, error);
                return f ? 0 : -ENOMEM;
        }
        fmt_metric(k, sizeof k, kubelet, " s");
        fmt_metric(p, sizeof p, plugin, " s");
        switch (v) {
        case DOCTOR_PREPARE_NO_DATA:
                f = doctor_report_add(r, DOCTOR_SECTION_KUBELET_METRICS, DOCTOR_WARN, check, op,
                                      "no samples of %s latency from the kubelets or the DRA plugins", op);
                if (f && doctor_finding_set_fix(f, "let Prometheus scrape the kubelets' /metrics "
                                                   "(dra_operations_duration_seconds) and the DRA drivers' "
                                                   "(dra_grpc_operations_duration_seconds)") < 0)
                        return -ENOMEM;
                break;
        case DOCTOR_PREPARE_DRIVER_SLOW:
                f = doctor_report_add(r, DOCTOR_SECTION_PLUGIN_METRICS, DOCTOR_WARN, check, op,
                                      "%s is slow in the DRA driver itself: p99 %s in the plugin's gRPC "
                                      "handler, %s as the kubelet sees it (slow from %.0f s)%s",
                                      op, p, k, DOCTOR_PREPARE_SLOW_SEC, drain_note);
                if (f &&
                    doctor_finding_set_fix(f,
                                           "look at the DRA driver: its CPU/memory limits, its logs, the "
                                           "device operations it runs in %s",
                                           op) < 0)
                        return -ENOMEM;
                break;
        case DOCTOR_PREPARE_KUBELET_SLOW:
                f = doctor_report_add(
                        r, DOCTOR_SECTION_KUBELET_METRICS, DOCTOR_WARN, check, op,
                        "%s is slow on the kubelet's side: p99 %s as the kubelet sees it but only "
                        "%s in the plugin's gRPC handler (slow from %.0f s)%s",
                        op, k, p, DOCTOR_PREPARE_SLOW_SEC, drain_note);
                if (f &&
                    doctor_finding_set_fix(f, "look at the kubelets: their API client QPS (reading claims), "
                                              "CPU, and the connection to the plugin socket") < 0)
                        return -ENOMEM;
                break;
        case DOCTOR_PREPARE_SLOW:
                f = doctor_report_add(
                        r, DOCTOR_SECTION_KUBELET_METRICS, DOCTOR_WARN, check, op,
                        "%s is slow: p99 %s as the kubelet sees it (slow from %.0f s); no plugin "
                        "metrics to tell whether the driver or the kubelet is the slow part%s",
                        op, k, DOCTOR_PREPARE_SLOW_SEC, drain_note);
                if (f &&
                    doctor_finding_set_fix(f, "scrape the DRA drivers' metrics "
                                              "(dra_grpc_operations_duration_seconds), then look at the "
                                              "slow side") < 0)
                        return -ENOMEM;
                break;
        default:
                f = doctor_report_add(r, DOCTOR_SECTION_KUBELET_METRICS, DOCTOR_PASS, check, op,
                                      "%s p99 %s as the kubelet sees it, %s in the plugin", op, k, p);
                break;
        }
        if (!f || doctor_finding_add_object(f, "query %s", kubelet_query) < 0 ||
            doctor_finding_add_object(f, "query %s", plugin_query) < 0 ||
            add_metric_details(f, "kubeletP99Seconds", kubelet) < 0 ||
            add_metric_details(f, "pluginP99Seconds", plugin) < 0)
                return -ENOMEM;
        return 0;
}

int doctor_report_prometheus(struct doctor_report *r, const char *url, const struct doctor_prom_results *m) {
        const char *kerr = m->error_kubelet ? m->error_kubelet : m->error_plugin;
        int k;

        k = report_workqueue(r, url, m);
        if (k >= 0)
                k = report_scheduler(r, url, m);
        if (k >= 0)
                k = report_prepare(r, url, "NodePrepareResources", m->kubelet_prepare, m->plugin_prepare,
                                   kerr, DOCTOR_Q_KUBELET_PREPARE, DOCTOR_Q_PLUGIN_PREPARE);
        if (k >= 0)
                k = report_prepare(r, url, "NodeUnprepareResources", m->kubelet_unprepare,
                                   m->plugin_unprepare, kerr, DOCTOR_Q_KUBELET_UNPREPARE,
                                   DOCTOR_Q_PLUGIN_UNPREPARE);
        return k;
}
