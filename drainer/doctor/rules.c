/* The rules of `drainer doctor`: every finding against the upstream page "Good
 * practices for Dynamic Resource Allocation as a Cluster Admin", in one place,
 * as pure functions over what gather read (struct doctor_data) and what
 * Prometheus answered. Owns nothing but the findings it adds to the report;
 * makes no request and changes nothing it is given. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/json.h"
#include "drainer/base/text.h"
#include "drainer/base/timesrc.h"
#include "drainer/doctor/doctor-rules.h"
#include "drainer/dra/claims.h"
#include "drainer/dra/health.h"
#include "drainer/kube/objects.h"

static int list_error_finding(const struct doctor_data *d, struct doctor_report *rep, enum doctor_section s,
                              const char *check, enum doctor_list l, const char *fix) {
        struct doctor_finding *f =
                doctor_report_add(rep, s, DOCTOR_WARN, check, "", "cannot %s: %s: not checked",
                                  doctor_list_to_string(l), strna(d->lists[l].message));

        if (!f || doctor_finding_set_fix(f, "%s", fix) < 0)
                return -ENOMEM;
        return 0;
}

#define RBAC_FIX                                                                                \
        "grant doctor's identity the ClusterRole of deploy/doctor (it lists bindings and asks " \
        "SubjectAccessReviews)"

/* ---- Separate permissions ---- */

/* dra-api-writers: only cluster admins, the control plane and DRA drivers may
 * write DeviceClasses and ResourceSlices, as the API server answers for every
 * other subject of a (Cluster)RoleBinding. */
/* Without the bindings there are no subjects to ask about: dra-api-writers says
 * which list failed, claim-users says nothing more. */
static bool bindings_missing(const struct doctor_data *d, enum doctor_list *ret) {
        if (d->lists[DOCTOR_LIST_CLUSTER_ROLE_BINDINGS].error < 0)
                *ret = DOCTOR_LIST_CLUSTER_ROLE_BINDINGS;
        else if (d->lists[DOCTOR_LIST_ROLE_BINDINGS].error < 0)
                *ret = DOCTOR_LIST_ROLE_BINDINGS;
        else
                return false;
        return true;
}

static int check_dra_api_writers(const struct doctor_rule_input *in, struct doctor_report *rep) {
        const struct doctor_data *d = in->data;
        size_t asked = 0, exempt[_DOCTOR_SUBJECT_ROLE_MAX] = {}, writers = 0;
        struct doctor_finding *f;
        enum doctor_list missing;

        if (bindings_missing(d, &missing))
                return list_error_finding(d, rep, DOCTOR_SECTION_PERMISSIONS, "dra-api-writers", missing,
                                          RBAC_FIX);

        if (d->sar_failed > 0) {
                f = doctor_report_add(
                        rep, DOCTOR_SECTION_PERMISSIONS, DOCTOR_WARN, "dra-api-writers", "",
                        "%zu of %zu SubjectAccessReviews failed (%s): who may write DeviceClasses "
                        "and ResourceSlices is not fully known",
                        d->sar_failed, d->n_sars, strna(d->sar_message));
                if (!f || doctor_finding_set_fix(f, "%s", RBAC_FIX) < 0)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < d->subjects.n; i++) {
                const struct doctor_subject_ent *e = d->subjects.v[i];
                char what[256] = "";

                exempt[e->role]++;
                if (e->role != DOCTOR_ROLE_OTHER)
                        continue;
                asked++;
                /* "create, update deviceclasses; create, update, patch, delete resourceslices" */
                for (size_t res = 0; res < _DOCTOR_RES_WRITE_MAX; res++) {
                        bool first = true;

                        for (size_t v = 0; v < DOCTOR_N_WRITE_VERBS; v++) {
                                if (!e->write[res][v])
                                        continue;
                                strcat(what, first ? (what[0] ? "; " : "") : ", ");
                                strcat(what, doctor_write_verbs[v]);
                                first = false;
                        }
                        if (!first) {
                                strcat(what, " ");
                                strcat(what, doctor_write_resources[res]);
                        }
                }
                if (!what[0])
                        continue;
                writers++;
                f = doctor_report_add(
                        rep, DOCTOR_SECTION_PERMISSIONS, DOCTOR_FAIL, "dra-api-writers", e->label,
                        "may %s: only cluster admins and DRA drivers should write DeviceClasses and "
                        "ResourceSlices (the API server: %s)",
                        what, e->n_reasons ? e->reasons[0] : "allowed");
                if (!f)
                        return -ENOMEM;
                /* Name the bindings the API server named; all of the subject's if none. */
                for (int pass = 0; pass < 2; pass++) {
                        size_t named = 0;

                        for (size_t b = 0; b < e->n_bindings; b++) {
                                const struct doctor_binding *bd = d->bindings.v[e->bindings[b]];
                                bool hit = pass == 1;

                                for (size_t k = 0; k < e->n_reasons && !hit; k++)
                                        hit = strstr(e->reasons[k], bd->rbac);
                                if (!hit)
                                        continue;
                                if (doctor_finding_add_object(f, "%s", bd->label) < 0)
                                        return -ENOMEM;
                                named++;
                        }
                        if (named > 0)
                                break;
                }
                if (doctor_finding_set_fix(
                            f,
                            "remove %s from these bindings, or drop create/update/patch/delete on "
                            "deviceclasses and resourceslices (resource.k8s.io) from the roles they "
                            "grant; if it is a DRA driver, run its pods as this ServiceAccount",
                            e->label) < 0)
                        return -ENOMEM;
        }
        if (writers == 0 && d->sar_failed == 0) {
                f = doctor_report_add(
                        rep, DOCTOR_SECTION_PERMISSIONS, DOCTOR_PASS, "dra-api-writers", "",
                        "of the %zu subjects of %zu (Cluster)RoleBindings, %zu are cluster admins, %zu "
                        "the control plane, %zu DRA driver ServiceAccounts; the API server says none "
                        "of the %zu others may write DeviceClasses or ResourceSlices",
                        d->subjects.n, d->bindings.n, exempt[DOCTOR_ROLE_ADMIN],
                        exempt[DOCTOR_ROLE_CONTROL_PLANE], exempt[DOCTOR_ROLE_DRIVER], asked);
                if (!f)
                        return -ENOMEM;
                /* The identities DRA driver pods run as (allowed to write ResourceSlices). */
                for (size_t i = 0; i < d->n_driver_sas; i++)
                        if (doctor_finding_add_object(f, "ServiceAccount %s (runs DRA driver pods)",
                                                      d->driver_sas[i]) < 0)
                                return -ENOMEM;
        }
        return 0;
}

/* claim-users: who may create ResourceClaims and ResourceClaimTemplates:
 * namespaced, as the guide expects. */
static int check_claim_users(const struct doctor_rule_input *in, struct doctor_report *rep) {
        const struct doctor_data *d = in->data;
        size_t wide = 0, namespaced = 0;
        struct doctor_finding *f;
        enum doctor_list missing;

        if (bindings_missing(d, &missing))
                return 0;

        for (size_t i = 0; i < d->subjects.n; i++) {
                const struct doctor_subject_ent *e = d->subjects.v[i];

                if (e->role != DOCTOR_ROLE_OTHER)
                        continue;
                if (e->claims_all[DOCTOR_RES_CLAIMS] || e->claims_all[DOCTOR_RES_CLAIM_TEMPLATES]) {
                        wide++;
                        f = doctor_report_add(
                                rep, DOCTOR_SECTION_PERMISSIONS, DOCTOR_WARN, "claim-users", e->label,
                                "may create %s%s%s in every namespace: ResourceClaims and "
                                "ResourceClaimTemplates are namespaced, and the guide expects them "
                                "granted per namespace",
                                e->claims_all[DOCTOR_RES_CLAIMS] ? "ResourceClaims" : "",
                                e->claims_all[DOCTOR_RES_CLAIMS] && e->claims_all[DOCTOR_RES_CLAIM_TEMPLATES]
                                        ? " and "
                                        : "",
                                e->claims_all[DOCTOR_RES_CLAIM_TEMPLATES] ? "ResourceClaimTemplates" : "");
                        if (!f)
                                return -ENOMEM;
                        for (size_t b = 0; b < e->n_bindings; b++) {
                                const struct doctor_binding *bd = d->bindings.v[e->bindings[b]];

                                if (bd->cluster && doctor_finding_add_object(f, "%s", bd->label) < 0)
                                        return -ENOMEM;
                        }
                        if (doctor_finding_set_fix(f,
                                                   "bind %s with RoleBindings in the namespaces where it "
                                                   "deploys workloads instead of a ClusterRoleBinding",
                                                   e->label) < 0)
                                return -ENOMEM;
                        continue;
                }
                for (size_t k = 0; e->claims_ns && k < e->n_claim_ns; k++)
                        if (e->claims_ns[k][DOCTOR_RES_CLAIMS] ||
                            e->claims_ns[k][DOCTOR_RES_CLAIM_TEMPLATES])
                                namespaced++;
        }
        if (wide == 0 && d->sar_failed == 0) {
                if (namespaced == 0)
                        f = doctor_report_add(
                                rep, DOCTOR_SECTION_PERMISSIONS, DOCTOR_PASS, "claim-users", "",
                                "besides cluster admins and the control plane nobody may create "
                                "ResourceClaims or ResourceClaimTemplates, in any namespace");
                else
                        f = doctor_report_add(
                                rep, DOCTOR_SECTION_PERMISSIONS, DOCTOR_PASS, "claim-users", "",
                                "%zu RoleBinding grants let subjects create ResourceClaims or "
                                "ResourceClaimTemplates, each in its own namespace, as the guide "
                                "expects; none in every namespace",
                                namespaced);
                if (!f)
                        return -ENOMEM;
                for (size_t i = 0; i < d->subjects.n; i++) {
                        const struct doctor_subject_ent *e = d->subjects.v[i];

                        for (size_t k = 0; e->role == DOCTOR_ROLE_OTHER && e->claims_ns && k < e->n_claim_ns;
                             k++)
                                if ((e->claims_ns[k][DOCTOR_RES_CLAIMS] ||
                                     e->claims_ns[k][DOCTOR_RES_CLAIM_TEMPLATES]) &&
                                    doctor_finding_add_object(f, "%s in namespace %s", e->label,
                                                              e->claim_ns[k]) < 0)
                                        return -ENOMEM;
                }
        }
        return 0;
}

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

/* Whether the strings of arr mention "drainer" and "guard" (and "--listen", if listen). */
static bool args_run_guard(const cJSON *cmd, const cJSON *args, bool listen, const char **ret_port) {
        const cJSON *arrs[2] = { cmd, args }, *a;
        bool drainer = false, guard = false, l = false;

        for (size_t i = 0; i < ELEMENTSOF(arrs); i++)
                cJSON_ArrayForEach(a, arrs[i]) {
                        const char *v = cJSON_IsString(a) ? a->valuestring : NULL, *colon;

                        if (!v)
                                continue;
                        drainer = drainer || strstr(v, "drainer");
                        guard = guard || strstr(v, "guard");
                        if (strstr(v, "--listen")) {
                                l = true;
                                /* --listen=ADDR or --listen ADDR: the port after the last ':' */
                                colon = strchr(v, '=') ? strrchr(v, ':') : NULL;
                                if (!colon && a->next && cJSON_IsString(a->next))
                                        colon = strrchr(a->next->valuestring, ':');
                                if (colon && ret_port)
                                        *ret_port = colon + 1;
                        }
                }
        /* The image's entrypoint may be drainer itself: args "guard --listen ..." suffice. */
        if (listen)
                return guard && l;
        return drainer && guard;
}

bool doctor_container_has_guard(const cJSON *podspec, const cJSON *container) {
        const cJSON *get = json_path(container, "lifecycle.preStop.httpGet"), *port, *ic;
        char want[16];

        if (args_run_guard(json_path(container, "lifecycle.preStop.exec.command"), NULL, false, NULL))
                return true;
        if (!podspec || !cJSON_IsObject(get) || !streq_ptr(json_str(get, "path"), "/guard"))
                return false;
        port = cJSON_GetObjectItemCaseSensitive(get, "port");
        if (cJSON_IsNumber(port))
                snprintf(want, sizeof want, "%d", port->valueint);
        else if (cJSON_IsString(port))
                snprintf(want, sizeof want, "%s", port->valuestring);
        else
                return false;
        cJSON_ArrayForEach(ic, json_path(podspec, "initContainers")) {
                const char *p = NULL;

                if (!streq_ptr(json_str(ic, "restartPolicy"), "Always") ||
                    !args_run_guard(json_path(ic, "command"), json_path(ic, "args"), true, &p) || !p)
                        continue;
                if (streq(p, want))
                        return true;
        }
        return false;
}

/* The rollout strategy doctor judges a driver's kubelets against: the last of
 * its DaemonSets read (*ret_have_ds false when none was). */
static enum daemonset_rollout driver_rollout(const struct doctor_data *d, const struct doctor_driver *dr,
                                             bool *ret_have_ds) {
        enum daemonset_rollout rollout = DAEMONSET_ROLLOUT_NO_SURGE;

        *ret_have_ds = false;
        for (size_t j = 0; j < dr->n_groups; j++) {
                const struct doctor_group *g = d->groups.v[dr->groups[j]];

                if (!g->ds)
                        continue;
                *ret_have_ds = true;
                rollout = daemonset_rollout(g->ds, NULL);
        }
        return rollout;
}

/* driver-daemonset: the driver's deployment, a DaemonSet found through its pods. */
static int check_driver_daemonset(const struct doctor_rule_input *in, struct doctor_report *rep) {
        const struct doctor_data *d = in->data;
        const struct doctor_driver *dr = in->driver;
        const char *subject = in->subject;
        struct doctor_finding *f;

        if (!dr) {
                f = doctor_report_add(rep, DOCTOR_SECTION_DRIVER, DOCTOR_PASS, "driver-daemonset", "",
                                      "no ResourceSlice names a DRA driver: nothing "
                                      "to check");
                return f ? 0 : -ENOMEM;
        }
        if (dr->n_nodes == 0) {
                f = doctor_report_add(
                        rep, DOCTOR_SECTION_DRIVER, DOCTOR_PASS, "driver-daemonset", subject,
                        "publishes no node-local ResourceSlices (%zu network-attached or all-node "
                        "slices): no kubelet plugin to check",
                        dr->n_slices);
                return f ? 0 : -ENOMEM;
        }
        if (dr->n_groups == 0) {
                f = doctor_report_add(
                        rep, DOCTOR_SECTION_DRIVER, DOCTOR_WARN, "driver-daemonset", subject,
                        "no DRA driver pod found on its %zu %s (by the driver selectors): its "
                        "deployment, liveness probe, upgrade strategy and drain guard are not checked",
                        dr->n_nodes, text_plural(dr->n_nodes, "node", "nodes"));
                if (!f || doctor_finding_set_fix(
                                  f, "pass --driver-selector with the labels of its pods; if it does "
                                     "not run as a pod, make sure whatever runs it restarts it on "
                                     "failed gRPC health checks") < 0)
                        return -ENOMEM;
        }
        for (size_t j = 0; j < dr->n_groups; j++) {
                const struct doctor_group *g = d->groups.v[dr->groups[j]];

                if (!streq_ptr(g->kind, "DaemonSet")) {
                        f = doctor_report_add(rep, DOCTOR_SECTION_DRIVER, DOCTOR_WARN, "driver-daemonset",
                                              subject, "its pods in %s are not run by a DaemonSet (%s%s%s)",
                                              g->ns, g->kind ? g->kind : "no controller", g->kind ? " " : "",
                                              g->kind ? g->name : "");
                        if (!f ||
                            doctor_finding_add_object(f, "%s %s/%s", g->kind ? g->kind : "Pod", g->ns,
                                                      g->name) < 0 ||
                            doctor_finding_set_fix(
                                    f, "deploy the driver as a DaemonSet on the nodes with its devices, "
                                       "as the guide describes") < 0)
                                return -ENOMEM;
                        continue;
                }
                if (g->ds_error < 0) {
                        f = doctor_report_add(rep, DOCTOR_SECTION_DRIVER, DOCTOR_WARN, "driver-daemonset",
                                              subject, "cannot read DaemonSet %s/%s: %s", g->ns, g->name,
                                              strna(g->ds_message));
                        if (!f || doctor_finding_add_object(f, "DaemonSet %s/%s", g->ns, g->name) < 0 ||
                            doctor_finding_set_fix(f, "%s", RBAC_FIX) < 0)
                                return -ENOMEM;
                        continue;
                }
                f = doctor_report_add(rep, DOCTOR_SECTION_DRIVER, DOCTOR_PASS, "driver-daemonset", subject,
                                      "DaemonSet %s/%s: %zu %s, slices on %zu %s", g->ns, g->name, g->n_pods,
                                      text_plural(g->n_pods, "pod", "pods"), dr->n_nodes,
                                      text_plural(dr->n_nodes, "node", "nodes"));
                if (!f || doctor_finding_add_object(f, "DaemonSet %s/%s", g->ns, g->name) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* liveness-probe: a container of each DaemonSet has one, gRPC preferred. */
static int check_liveness_probe(const struct doctor_rule_input *in, struct doctor_report *rep) {
        const struct doctor_data *d = in->data;
        const struct doctor_driver *dr = in->driver;
        const char *subject = in->subject;

        /* Nothing to check without a node-local slice: driver-daemonset says so. */
        if (!dr || dr->n_nodes == 0)
                return 0;
        struct doctor_finding *f;

        for (size_t j = 0; j < dr->n_groups; j++) {
                const struct doctor_group *g = d->groups.v[dr->groups[j]];
                const cJSON *c;
                enum doctor_probe best = DOCTOR_PROBE_NONE;
                const char *best_container = NULL;

                if (!g->ds)
                        continue;
                cJSON_ArrayForEach(c, json_path(g->ds, "spec.template.spec.containers")) {
                        enum doctor_probe p = doctor_container_liveness(c);

                        if (p != DOCTOR_PROBE_NONE &&
                            (best == DOCTOR_PROBE_NONE || p == DOCTOR_PROBE_GRPC) &&
                            best != DOCTOR_PROBE_GRPC) {
                                best = p;
                                best_container = json_str(c, "name");
                        }
                }
                if (best == DOCTOR_PROBE_GRPC)
                        f = doctor_report_add(rep, DOCTOR_SECTION_LIVENESS, DOCTOR_PASS, "liveness-probe",
                                              subject, "container %s has a gRPC liveness probe",
                                              strna(best_container));
                else if (best != DOCTOR_PROBE_NONE) {
                        f = doctor_report_add(rep, DOCTOR_SECTION_LIVENESS, DOCTOR_WARN, "liveness-probe",
                                              subject,
                                              "container %s has a liveness probe, but of type %s, not gRPC",
                                              strna(best_container), doctor_probe_to_string(best));
                        if (f &&
                            doctor_finding_set_fix(f, "probe the driver's gRPC health service instead "
                                                      "(livenessProbe.grpc with its port and service)") < 0)
                                return -ENOMEM;
                } else {
                        f = doctor_report_add(
                                rep, DOCTOR_SECTION_LIVENESS, DOCTOR_FAIL, "liveness-probe", subject,
                                "no container of DaemonSet %s/%s has a liveness probe: a hung driver "
                                "is never restarted",
                                g->ns, g->name);
                        if (f &&
                            doctor_finding_set_fix(f, "add livenessProbe.grpc (the port and service of the "
                                                      "driver's gRPC health server, e.g. 51515/liveness) to "
                                                      "the driver container") < 0)
                                return -ENOMEM;
                }
                if (!f || doctor_finding_add_object(f, "DaemonSet %s/%s", g->ns, g->name) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* rollout-strategy: old and new plugin side by side during a rollout (seamless upgrade). */
static int check_rollout_strategy(const struct doctor_rule_input *in, struct doctor_report *rep) {
        const struct doctor_data *d = in->data;
        const struct doctor_driver *dr = in->driver;
        const char *subject = in->subject;

        /* Nothing to check without a node-local slice: driver-daemonset says so. */
        if (!dr || dr->n_nodes == 0)
                return 0;
        struct doctor_finding *f;

        for (size_t j = 0; j < dr->n_groups; j++) {
                const struct doctor_group *g = d->groups.v[dr->groups[j]];
                enum daemonset_rollout rollout;
                const char *surge;

                if (!g->ds)
                        continue;
                rollout = daemonset_rollout(g->ds, &surge);
                if (rollout == DAEMONSET_ROLLOUT_SURGE)
                        f = doctor_report_add(rep, DOCTOR_SECTION_SEAMLESS_UPGRADE, DOCTOR_PASS,
                                              "rollout-strategy", subject,
                                              "RollingUpdate with maxSurge %s: the new driver pod starts "
                                              "before the old one stops",
                                              surge);
                else {
                        f = doctor_report_add(
                                rep, DOCTOR_SECTION_SEAMLESS_UPGRADE, DOCTOR_WARN, "rollout-strategy",
                                subject,
                                "%s: every driver update leaves each node without its driver for a "
                                "while (pods with claims cannot start, cleanup waits)",
                                daemonset_rollout_to_string(rollout));
                        if (f && doctor_finding_set_fix(
                                         f, "if the driver supports seamless upgrades (kubeletplugin "
                                            "RollingUpdate), set updateStrategy.rollingUpdate "
                                            "maxSurge: 1, maxUnavailable: 0") < 0)
                                return -ENOMEM;
                }
                if (!f || doctor_finding_add_object(f, "DaemonSet %s/%s", g->ns, g->name) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* drain-guard: the drainer guard as preStop hook, so that other drain tools
 * cannot stop the driver too early. */
static int check_drain_guard(const struct doctor_rule_input *in, struct doctor_report *rep) {
        const struct doctor_data *d = in->data;
        const struct doctor_driver *dr = in->driver;
        const char *subject = in->subject;

        /* Nothing to check without a node-local slice: driver-daemonset says so. */
        if (!dr || dr->n_nodes == 0)
                return 0;
        struct doctor_finding *f;

        for (size_t j = 0; j < dr->n_groups; j++) {
                const struct doctor_group *g = d->groups.v[dr->groups[j]];
                const cJSON *c;
                char list[512] = "";

                if (!g->ds)
                        continue;
                cJSON_ArrayForEach(c, json_path(g->ds, "spec.template.spec.containers")) {
                        const char *name = json_str(c, "name");

                        if (!doctor_container_has_guard(json_path(g->ds, "spec.template.spec"), c))
                                continue;
                        if (strlen(list) + strlen(strna(name)) + 3 < sizeof list) {
                                strcat(list, list[0] ? ", " : "");
                                strcat(list, strna(name));
                        }
                }
                if (list[0])
                        f = doctor_report_add(
                                rep, DOCTOR_SECTION_DRAIN, DOCTOR_PASS, "drain-guard", subject,
                                "the drainer guard is the preStop hook of %s: the driver waits until "
                                "the node's claims are released",
                                list);
                else {
                        f = doctor_report_add(
                                rep, DOCTOR_SECTION_DRAIN, DOCTOR_WARN, "drain-guard", subject,
                                "no drainer guard as preStop hook: a drain by another tool (cluster "
                                "autoscaler, Karpenter, a script that evicts DaemonSet pods) may stop "
                                "the driver before the pods whose devices it must unprepare");
                        if (f && doctor_finding_set_fix(
                                         f, "add 'drainer guard' as the preStop hook of the driver "
                                            "container (deploy/driver-guard), or drain only with "
                                            "drainer") < 0)
                                return -ENOMEM;
                }
                if (!f || doctor_finding_add_object(f, "DaemonSet %s/%s", g->ns, g->name) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* karpenter-disruption: a driver that tolerates karpenter.sh/disrupted is never evicted
 * by Karpenter's drain; on the nodes Karpenter manages (label karpenter.sh/nodepool) say
 * what that means for their claims. Other drivers: drain-guard's business. */
static int check_karpenter_disruption(const struct doctor_rule_input *in, struct doctor_report *rep) {
        static const struct node_taint disrupted = { .key = "karpenter.sh/disrupted",
                                                     .effect = "NoSchedule" };
        const struct doctor_data *d = in->data;
        const struct doctor_driver *dr = in->driver;
        struct doctor_finding *f;

        if (!dr || dr->n_nodes == 0)
                return 0;
        for (size_t j = 0; j < dr->n_groups; j++) {
                const struct doctor_group *g = d->groups.v[dr->groups[j]];
                const struct pod_rec *pod = NULL;
                size_t karpenter = 0;

                for (size_t k = 0; k < g->n_pods && !pod; k++) {
                        const struct pod_rec *p = d->driver_pods.v[g->pods[k]]->rec;

                        if (tolerations_tolerate(p->tolerations, p->n_tolerations, &disrupted))
                                pod = p;
                }
                if (!pod)
                        continue;
                for (size_t k = 0; k < dr->n_nodes; k++) {
                        const struct node_rec *n = doctor_data_node(d, dr->nodes[k]);

                        if (n && kv_get(n->labels, n->n_labels, "karpenter.sh/nodepool"))
                                karpenter++;
                }
                if (karpenter == 0)
                        continue;
                f = doctor_report_add(
                        rep, DOCTOR_SECTION_DRAIN, DOCTOR_PASS, "karpenter-disruption", in->subject,
                        "its pods tolerate karpenter.sh/disrupted:NoSchedule, so Karpenter never "
                        "evicts them: on %zu %s of Karpenter's the driver runs until the machine "
                        "is gone, and every claim released by Karpenter's evictions is unprepared "
                        "while it runs; it gets no graceful stop (its ResourceSlices go with the "
                        "Node), and a guard as its preStop hook never runs there",
                        karpenter, karpenter == 1 ? "node" : "nodes");
                if (!f || doctor_finding_add_object(f, "%s %s/%s", g->kind ? g->kind : "Pod", strna(g->ns),
                                                    g->name) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* karpenter-grace: a NodeClaim's terminationGracePeriod against what a drain of its
 * node needs: its claim holders' longest grace, then the DRA driver pods' (as
 * plan_grace_needed). When it runs out Karpenter deletes what is left without the
 * Eviction API, grace periods cut short: a claim holder may be killed and the driver
 * stopped while a claim is on the node. No terminationGracePeriod: Karpenter waits. */
static bool karpenter_nodes_in_scope(const struct doctor_data *d) {
        for (size_t i = 0; i < d->nodes.n; i++)
                if (kv_get(d->nodes.v[i]->labels, d->nodes.v[i]->n_labels, "karpenter.sh/nodepool") &&
                    doctor_data_in_scope(d, d->nodes.v[i]->name))
                        return true;
        return false;
}

static bool is_driver_pod(const struct doctor_data *d, const struct pod_rec *p) {
        for (size_t i = 0; i < d->driver_pods.n; i++)
                if (streq_ptr(d->driver_pods.v[i]->rec->uid, p->uid))
                        return true;
        return false;
}

static bool pod_finished(const struct pod_rec *p) {
        return p->phase == POD_SUCCEEDED || p->phase == POD_FAILED;
}

static int check_karpenter_grace(const struct doctor_rule_input *in, struct doctor_report *rep) {
        const struct doctor_data *d = in->data;
        const struct doctor_list_status *ls = &d->lists[DOCTOR_LIST_NODECLAIMS];
        size_t checked = 0, short_ones = 0;
        struct doctor_finding *f;

        if (ls->error < 0) {
                if (!karpenter_nodes_in_scope(d))
                        return 0; /* not installed, and no node of Karpenter's */
                f = doctor_report_add(rep, DOCTOR_SECTION_DRAIN, DOCTOR_WARN, "karpenter-grace", "",
                                      "nodes of Karpenter's (label karpenter.sh/nodepool), but its "
                                      "NodeClaims cannot be read (%s): their terminationGracePeriod "
                                      "is not checked",
                                      ls->message ? ls->message : strerror(-ls->error));
                return f ? 0 : -ENOMEM;
        }
        for (size_t i = 0; i < d->cordoned.n; i++) {
                const struct doctor_cordoned *c = d->cordoned.v[i];
                const struct doctor_nodeclaim *nc = c->nodeclaim;
                int64_t holders = 0, drivers = 0, need;
                uint64_t usec;

                if (!nc)
                        continue;
                if (timesrc_parse_duration(nc->tgp, &usec) < 0) {
                        f = doctor_report_add(rep, DOCTOR_SECTION_DRAIN, DOCTOR_FAIL, "karpenter-grace",
                                              c->node->name,
                                              "Karpenter NodeClaim %s: terminationGracePeriod \"%s\" is "
                                              "not a duration",
                                              nc->name, nc->tgp);
                        if (!f || doctor_finding_add_object(f, "NodeClaim %s", nc->name) < 0)
                                return -ENOMEM;
                        short_ones++;
                        continue;
                }
                if (c->error < 0) {
                        f = doctor_report_add(rep, DOCTOR_SECTION_DRAIN, DOCTOR_WARN, "karpenter-grace",
                                              c->node->name,
                                              "Karpenter NodeClaim %s sets terminationGracePeriod %s; "
                                              "cannot list the node's pods: not checked",
                                              nc->name, nc->tgp);
                        if (!f)
                                return -ENOMEM;
                        continue;
                }
                for (size_t k = 0; k < c->pods.n; k++) {
                        const struct pod_rec *p = c->pods.v[k];

                        if (pod_finished(p) || is_driver_pod(d, p) || p->n_claims == 0)
                                continue;
                        holders = MAX(holders, p->termination_grace_seconds);
                }
                for (size_t k = 0; k < d->driver_pods.n; k++) {
                        const struct pod_rec *p = d->driver_pods.v[k]->rec;

                        if (streq_ptr(p->node_name, c->node->name) && !pod_finished(p))
                                drivers = MAX(drivers, p->termination_grace_seconds);
                }
                need = holders + drivers;
                checked++;
                if (usec >= (uint64_t)need * USEC_PER_SEC)
                        continue;
                short_ones++;
                f = doctor_report_add(
                        rep, DOCTOR_SECTION_DRAIN, DOCTOR_FAIL, "karpenter-grace", c->node->name,
                        "Karpenter NodeClaim %s: terminationGracePeriod %s is shorter than a drain of "
                        "the node needs (%" PRIi64 " s: its claim holders' grace up to %" PRIi64
                        " s, then the DRA driver's %" PRIi64 " s); when it runs out Karpenter deletes "
                        "what is left without the Eviction API, grace periods cut short, so a claim "
                        "holder may be killed and the driver stopped while a claim is on the node",
                        nc->name, nc->tgp, need, holders, drivers);
                if (!f || doctor_finding_add_object(f, "NodeClaim %s", nc->name) < 0 ||
                    doctor_finding_add_object(f, "Node %s", c->node->name) < 0 ||
                    doctor_finding_set_fix(f,
                                           "set the NodePool's spec.template.spec.terminationGracePeriod "
                                           "to %" PRIi64 " s or more (new NodeClaims take it), or leave "
                                           "it unset: Karpenter then waits for the drain",
                                           need) < 0)
                        return -ENOMEM;
        }
        if (short_ones == 0 && (d->nodeclaims.n > 0 || karpenter_nodes_in_scope(d))) {
                f = doctor_report_add(rep, DOCTOR_SECTION_DRAIN, DOCTOR_PASS, "karpenter-grace", "",
                                      "%zu of Karpenter's NodeClaims set a terminationGracePeriod, none "
                                      "shorter than a drain of its node needs (claim holders' grace, "
                                      "then the DRA driver's); without one Karpenter waits for the drain",
                                      checked);
                if (!f)
                        return -ENOMEM;
        }
        return 0;
}

/* driver-health: its pods now, Running and Ready, and SERVING where they
 * declare a gRPC liveness port. */
static int check_driver_health(const struct doctor_rule_input *in, struct doctor_report *rep) {
        const struct doctor_data *d = in->data;
        const struct doctor_driver *dr = in->driver;
        const char *subject = in->subject;

        /* Nothing to check without a node-local slice: driver-daemonset says so. */
        if (!dr || dr->n_nodes == 0)
                return 0;
        size_t total = 0, probed = 0, bad = 0, unknown = 0;
        _cleanup_free_ char *first = NULL;
        struct doctor_finding *f;

        if (dr->n_groups == 0)
                return 0;
        f = doctor_report_add(rep, DOCTOR_SECTION_LIVENESS, DOCTOR_PASS, "driver-health", subject, "%s", "");
        if (!f)
                return -ENOMEM;
        for (size_t j = 0; j < dr->n_groups; j++) {
                const struct doctor_group *g = d->groups.v[dr->groups[j]];

                for (size_t q = 0; q < g->n_pods; q++) {
                        const struct doctor_pod *p = d->driver_pods.v[g->pods[q]];
                        _cleanup_free_ char *why = NULL;
                        bool warn = false;

                        if (!doctor_data_in_scope(d, p->rec->node_name) || p->rec->deleting)
                                continue;
                        total++;
                        if (p->rec->phase != POD_RUNNING || !p->rec->ready)
                                why = text_printf("%s%s", strna(pod_phase_to_string(p->rec->phase)),
                                                  p->rec->ready ? "" : ", not Ready");
                        else if (p->probed && p->probe_error == -ECONNREFUSED)
                                why = text_printf("gRPC health %s:%d refused the connection", p->rec->pod_ip,
                                                  p->rec->grpc_probe_port);
                        else if (p->probed && p->probe_error < 0) {
                                warn = true;
                                why = text_printf("gRPC health %s:%d not reachable from here (%s)",
                                                  p->rec->pod_ip, p->rec->grpc_probe_port,
                                                  p->probe_message ? p->probe_message
                                                                   : strerror(-p->probe_error));
                        } else if (p->probed && p->probe_status != HEALTH_SERVING)
                                why = text_printf("gRPC health %s",
                                                  strna(health_status_to_string(p->probe_status)));
                        probed += p->probed && p->probe_error == 0 && p->probe_status == HEALTH_SERVING;
                        if (!why)
                                continue;
                        if (warn)
                                unknown++;
                        else
                                bad++;
                        if (!first)
                                first = strdup(why);
                        if (doctor_finding_add_object(f, "Pod %s/%s on %s: %s", p->rec->ns, p->rec->name,
                                                      strna(p->rec->node_name), why) < 0)
                                return -ENOMEM;
                }
        }
        free(f->message);
        if (bad > 0) {
                f->status = DOCTOR_FAIL;
                f->message =
                        text_printf("%zu of %zu driver pods are not healthy (%s%s): pods with claims cannot "
                                    "start there and finished ones are not cleaned up",
                                    bad, total, strna(first), bad > 1 ? ", ..." : "");
                if (doctor_finding_set_fix(f,
                                           "look at those pods (kubectl describe, logs); the liveness probe "
                                           "should restart a hung driver") < 0)
                        return -ENOMEM;
        } else if (unknown > 0) {
                f->status = DOCTOR_WARN;
                f->message =
                        text_printf("%zu driver pods are Running and Ready, but %zu could not be probed "
                                    "(%s): doctor runs outside the pod network?",
                                    total, unknown, strna(first));
                if (doctor_finding_set_fix(f, "run doctor where pod IPs are reachable (a pod, a node) to "
                                              "probe the drivers' gRPC health") < 0)
                        return -ENOMEM;
        } else
                f->message = text_printf(
                        "%zu driver pods%s%s Running and Ready; %zu answer SERVING on their gRPC "
                        "liveness port%s",
                        total, d->node ? " on " : "", d->node ? d->node : "", probed,
                        probed < total ? " (the others declare none)" : "");
        if (!f->message)
                return -ENOMEM;
        if (doctor_finding_add_detail(f, "pods", (double)total) < 0 ||
            doctor_finding_add_detail(f, "serving", (double)probed) < 0)
                return -ENOMEM;
        return 0;
}

/* The nodes of a driver in doctor's scope: those of its node-local slices and of its
 * pods. 0 or -ENOMEM. */
static int driver_nodes(const struct doctor_data *d, const struct doctor_driver *dr, char ***ret,
                        size_t *ret_n) {
        char **nodes = NULL;
        size_t n_nodes = 0;

        for (size_t j = 0; j < dr->n_nodes; j++)
                if (doctor_data_in_scope(d, dr->nodes[j]) &&
                    strv_push_unique(&nodes, &n_nodes, dr->nodes[j]) < 0)
                        goto oom;
        for (size_t j = 0; j < dr->n_groups; j++) {
                const struct doctor_group *g = d->groups.v[dr->groups[j]];

                for (size_t q = 0; q < g->n_pods; q++) {
                        const char *nn = d->driver_pods.v[g->pods[q]]->rec->node_name;

                        if (nn && doctor_data_in_scope(d, nn) && strv_push_unique(&nodes, &n_nodes, nn) < 0)
                                goto oom;
                }
        }
        *ret = nodes;
        *ret_n = n_nodes;
        return 0;
oom:
        strv_free_n(nodes, n_nodes);
        return -ENOMEM;
}

/* kubelet-versions: seamless upgrades need kubelet 1.33+ on every node where
 * the driver runs. */
static int check_kubelet_versions(const struct doctor_rule_input *in, struct doctor_report *rep) {
        const struct doctor_data *d = in->data;
        const struct doctor_driver *dr = in->driver;
        const char *subject = in->subject;

        /* Nothing to check without a node-local slice: driver-daemonset says so. */
        if (!dr || dr->n_nodes == 0)
                return 0;
        bool have_ds;
        enum daemonset_rollout rollout = driver_rollout(d, dr, &have_ds);
        struct doctor_finding *f;
        char **nodes = NULL;
        size_t n_nodes = 0, n_old = 0, n_unknown = 0;
        const char *first_ok = NULL;

        if (driver_nodes(d, dr, &nodes, &n_nodes) < 0)
                return -ENOMEM;
        f = doctor_report_add(rep, DOCTOR_SECTION_SEAMLESS_UPGRADE, DOCTOR_PASS, "kubelet-versions", subject,
                              "%s", "");
        if (!f)
                goto oom;
        for (size_t j = 0; j < n_nodes; j++) {
                const struct node_rec *n = doctor_data_node(d, nodes[j]);
                const char *v = n ? n->kubelet_version : NULL;
                int k = kubelet_seamless_upgrades(v);

                if (k > 0) {
                        first_ok = first_ok ? first_ok : v;
                        continue;
                }
                if (k == 0)
                        n_old++;
                else
                        n_unknown++;
                if (doctor_finding_add_object(f, "Node %s (kubelet %s)", nodes[j], v ? v : "unknown") < 0)
                        goto oom;
        }
        free(f->message);
        f->message = NULL;
        if (n_old > 0 && have_ds && rollout == DAEMONSET_ROLLOUT_SURGE) {
                f->status = DOCTOR_FAIL;
                f->message =
                        text_printf("%zu of %zu nodes of the driver run a kubelet older than 1.33, yet its "
                                    "DaemonSet surges: two instances of the plugin on such a kubelet break "
                                    "the driver during every rollout",
                                    n_old, n_nodes);
        } else if (n_old > 0) {
                f->status = DOCTOR_WARN;
                f->message =
                        text_printf("a mixed cluster: %zu of %zu nodes of the driver run a kubelet older "
                                    "than 1.33, where seamless driver upgrades are not available",
                                    n_old, n_nodes);
        } else if (n_unknown > 0) {
                f->status = DOCTOR_WARN;
                f->message = text_printf("%zu of %zu nodes of the driver report a kubelet version doctor "
                                         "cannot read",
                                         n_unknown, n_nodes);
        } else
                f->message = text_printf(
                        "%s %zu %s of the driver run%s kubelet 1.33 or newer (%s): seamless "
                        "upgrades are possible",
                        n_nodes == 1 ? "the" : "all", n_nodes, text_plural(n_nodes, "node", "nodes"),
                        n_nodes == 1 ? "s" : "", strna(first_ok));
        if (!f->message)
                goto oom;
        if (n_old > 0 &&
            doctor_finding_set_fix(f, "upgrade the kubelets of those nodes to 1.33 or newer%s",
                                   rollout == DAEMONSET_ROLLOUT_SURGE && have_ds
                                           ? ", or roll the driver out without maxSurge until then"
                                           : " before relying on seamless driver upgrades") < 0)
                goto oom;
        strv_free_n(nodes, n_nodes);
        return 0;
oom:
        strv_free_n(nodes, n_nodes);
        return -ENOMEM;
}

/* driver-rollout: how a driver without seamless upgrade is updated safely: with
 * updateStrategy OnDelete and `drainer rollout`, which drains each node's claims of
 * the driver before its plugin is replaced. */
static int check_driver_rollout(const struct doctor_rule_input *in, struct doctor_report *rep) {
        const struct doctor_data *d = in->data;
        const struct doctor_driver *dr = in->driver;
        const char *subject = in->subject;

        /* Nothing to check without a node-local slice: driver-daemonset says so. */
        if (!dr || dr->n_nodes == 0)
                return 0;
        _cleanup_free_ const char **versions = NULL;
        struct doctor_finding *f;
        char **nodes = NULL;
        size_t n_nodes = 0;
        int r = 0;

        if (driver_nodes(d, dr, &nodes, &n_nodes) < 0)
                return -ENOMEM;
        versions = calloc(n_nodes ? n_nodes : 1, sizeof(*versions));
        if (!versions)
                goto oom;
        for (size_t j = 0; j < n_nodes; j++) {
                const struct node_rec *n = doctor_data_node(d, nodes[j]);

                versions[j] = n ? n->kubelet_version : NULL;
        }
        for (size_t j = 0; j < dr->n_groups; j++) {
                const struct doctor_group *g = d->groups.v[dr->groups[j]];
                enum daemonset_rollout rollout;
                char why[512];

                if (!g->ds)
                        continue;
                rollout = daemonset_rollout(g->ds, NULL);
                if (driver_upgrade_seamless(g->ds, versions, n_nodes, why, sizeof(why)) > 0)
                        f = doctor_report_add(rep, DOCTOR_SECTION_SEAMLESS_UPGRADE, DOCTOR_PASS,
                                              "driver-rollout", subject,
                                              "seamless upgrade: %s; no drain is needed to update it", why);
                else if (rollout == DAEMONSET_ROLLOUT_ON_DELETE)
                        f = doctor_report_add(
                                rep, DOCTOR_SECTION_SEAMLESS_UPGRADE, DOCTOR_PASS, "driver-rollout", subject,
                                "no seamless upgrade (%s), and updates wait for a safe rollout: "
                                "drainer rollout %s/%s --driver %s drains each node's claims of "
                                "the driver before its plugin pod is replaced",
                                why, g->ns, g->name, dr->name);
                else {
                        f = doctor_report_add(
                                rep, DOCTOR_SECTION_SEAMLESS_UPGRADE, DOCTOR_WARN, "driver-rollout", subject,
                                "no seamless upgrade (%s): an update replaces the plugin under "
                                "the claims in use on each node",
                                why);
                        if (f &&
                            doctor_finding_set_fix(
                                    f,
                                    "set the DaemonSet's updateStrategy to OnDelete and update the driver "
                                    "with: drainer rollout %s/%s --driver %s (node by node, claims "
                                    "drained first)",
                                    g->ns, g->name, dr->name) < 0)
                                goto oom;
                }
                if (!f || doctor_finding_add_object(f, "DaemonSet %s/%s", g->ns, g->name) < 0)
                        goto oom;
        }
        strv_free_n(nodes, n_nodes);
        return r;
oom:
        strv_free_n(nodes, n_nodes);
        return -ENOMEM;
}

/* ---- Drain ---- */

static bool node_has_dra(const struct doctor_data *d, const char *node) {
        for (size_t k = 0; k < d->drivers.n; k++) {
                const struct doctor_driver *dr = d->drivers.v[k];

                for (size_t j = 0; j < dr->n_nodes; j++)
                        if (streq(dr->nodes[j], node))
                                return true;
        }
        return false;
}

/* Whether a container of the group's DaemonSet runs the drainer guard as its preStop hook. */
static bool group_has_guard(const struct doctor_group *g) {
        const cJSON *c;

        cJSON_ArrayForEach(c, json_path(g->ds, "spec.template.spec.containers")) if (
                doctor_container_has_guard(json_path(g->ds, "spec.template.spec"), c)) return true;
        return false;
}

/* drain-coverage: every node with DRA devices has a drainer serve daemon (on
 * the node, or one in cluster mode) or the drainer guard on all its drivers. */
static int check_drain_coverage(const struct doctor_rule_input *in, struct doctor_report *rep) {
        const struct doctor_data *d = in->data;
        struct doctor_finding *uncovered = NULL, *f;
        size_t n_dra = 0, by_serve = 0, by_guard = 0;
        const struct doctor_pod *cluster_mode = NULL;

        for (size_t i = 0; i < d->drainer_pods.n; i++) {
                const struct doctor_pod *p = d->drainer_pods.v[i];

                if (doctor_pod_running(p) && strstr(p->text, "serve") && strstr(p->text, "--all-nodes"))
                        cluster_mode = p;
        }
        for (size_t i = 0; i < d->nodes.n; i++) {
                const struct node_rec *n = d->nodes.v[i];
                bool serve = false, guard = true, any_driver = false;

                if (!doctor_data_in_scope(d, n->name) || !node_has_dra(d, n->name))
                        continue;
                n_dra++;
                for (size_t k = 0; k < d->drainer_pods.n && !serve; k++) {
                        const struct doctor_pod *p = d->drainer_pods.v[k];

                        serve = doctor_pod_running(p) && streq_ptr(p->rec->node_name, n->name) &&
                                strstr(p->text, "serve");
                }
                for (size_t k = 0; k < d->groups.n; k++) {
                        const struct doctor_group *g = d->groups.v[k];

                        if (!doctor_data_group_on_node(d, g, n->name))
                                continue;
                        any_driver = true;
                        guard = guard && group_has_guard(g);
                }
                guard = guard && any_driver;
                if (serve || cluster_mode) {
                        by_serve++;
                        continue;
                }
                if (guard) {
                        by_guard++;
                        continue;
                }
                if (!uncovered) {
                        uncovered = doctor_report_add(rep, DOCTOR_SECTION_DRAIN, DOCTOR_WARN,
                                                      "drain-coverage", "", "%s", "");
                        if (!uncovered)
                                return -ENOMEM;
                }
                if (doctor_finding_add_object(uncovered, "Node %s", n->name) < 0)
                        return -ENOMEM;
        }
        if (uncovered) {
                free(uncovered->subject);
                free(uncovered->message);
                uncovered->subject = NULL;
                uncovered->subject = text_printf("%zu %s", uncovered->n_objects,
                                                 text_plural(uncovered->n_objects, "node", "nodes"));
                uncovered->message =
                        text_printf("%zu of %zu nodes with DRA devices have neither a drainer serve "
                                    "daemon nor the drainer guard on all their drivers: a drain there can "
                                    "stop the driver before the claim holders",
                                    uncovered->n_objects, n_dra);
                if (!uncovered->subject || !uncovered->message ||
                    doctor_finding_set_fix(uncovered,
                                           "run 'drainer serve' on them (deploy/, or deploy/cluster-mode), "
                                           "or install the drainer guard in the driver DaemonSets "
                                           "(deploy/driver-guard); a drainer under systemd on the host "
                                           "is invisible to doctor") < 0)
                        return -ENOMEM;
        }
        if (n_dra > 0 && (by_serve > 0 || by_guard > 0)) {
                f = doctor_report_add(
                        rep, DOCTOR_SECTION_DRAIN, DOCTOR_PASS, "drain-coverage", "",
                        "%zu of %zu nodes with DRA devices are covered: %zu by drainer serve%s, %zu by "
                        "the drainer guard",
                        by_serve + by_guard, n_dra, by_serve, cluster_mode ? " (cluster mode)" : "",
                        by_guard);
                if (!f || (cluster_mode && doctor_finding_add_object(f, "Pod %s/%s", cluster_mode->rec->ns,
                                                                     cluster_mode->rec->name) < 0))
                        return -ENOMEM;
        }
        return 0;
}

/* The DRA driver of a driver drain's key (drainer.io/KEY.NAME: NAME), or NULL for a
 * node drain's key (no dot after KEY). */
static const char *key_driver(const char *key) {
        static const char prefix[] = "drainer.io/";

        return key && strncmp(key, prefix, sizeof(prefix) - 1) == 0 ? strchr(key + sizeof(prefix) - 1, '.')
                                                                    : NULL;
}

/* unfinished-drain for a drain of DRA driver drv (drainer.io/KEY.drv) on node n. */
static int unfinished_driver_drain(const struct node_rec *n, const char *drv, struct doctor_report *rep) {
        _cleanup_free_ char *ks = NULL, *kss = NULL, *km = NULL;
        struct doctor_finding *f;
        const char *state, *since, *msg;

        if (asprintf(&ks, "drainer.io/state.%s", drv) < 0 ||
            asprintf(&kss, "drainer.io/state-since.%s", drv) < 0 ||
            asprintf(&km, "drainer.io/message.%s", drv) < 0)
                return -ENOMEM;
        state = kv_get(n->annotations, n->n_annotations, ks);
        since = kv_get(n->annotations, n->n_annotations, kss);
        msg = kv_get(n->annotations, n->n_annotations, km);
        f = doctor_report_add(rep, DOCTOR_SECTION_DRAIN, DOCTOR_WARN, "unfinished-drain", n->name,
                              "DRA driver %s is out of service (a drain of that driver): %s%s%s%s", drv,
                              state ? "phase " : "drainer state without a phase", strempty(state),
                              since ? " since " : "", strempty(since));
        if (!f || doctor_finding_add_object(f, "Node %s", n->name) < 0 ||
            (msg && doctor_finding_add_object(f, "%s: %s", km, msg) < 0) ||
            doctor_finding_set_fix(f,
                                   "finish it ('drainer drain %s --driver %s' resumes) or bring the driver "
                                   "back ('drainer uncordon %s --driver %s')",
                                   n->name, drv, n->name, drv) < 0)
                return -ENOMEM;
        return 0;
}

/* unfinished-drain: drainer state left on a node: the node's drain, and each DRA
 * driver's (its own keys, drainer.io/KEY.NAME). */
static int check_unfinished_drain(const struct doctor_rule_input *in, struct doctor_report *rep) {
        const struct doctor_data *d = in->data;
        struct doctor_finding *f;
        size_t n_unfinished = 0;
        int r;

        for (size_t i = 0; i < d->nodes.n; i++) {
                const struct node_rec *n = d->nodes.v[i];
                const char *state = kv_get(n->annotations, n->n_annotations, "drainer.io/state");
                const char *req = kv_get(n->annotations, n->n_annotations, "drainer.io/request");
                const char *since = kv_get(n->annotations, n->n_annotations, "drainer.io/state-since");
                const char *msg = kv_get(n->annotations, n->n_annotations, "drainer.io/message");
                bool node_keys = false;

                if (!doctor_data_in_scope(d, n->name) || n->n_annotations == 0)
                        continue;
                for (size_t k = 0; k < n->n_annotations; k++) {
                        const char *drv = key_driver(n->annotations[k].key);
                        bool seen = false;

                        if (!drv) {
                                node_keys = true;
                                continue;
                        }
                        for (size_t j = 0; j < k && !seen; j++)
                                seen = streq_ptr(key_driver(n->annotations[j].key), drv);
                        if (seen)
                                continue;
                        n_unfinished++;
                        r = unfinished_driver_drain(n, drv + 1, rep);
                        if (r < 0)
                                return r;
                }
                if (!node_keys)
                        continue;
                n_unfinished++;
                f = doctor_report_add(rep, DOCTOR_SECTION_DRAIN, DOCTOR_WARN, "unfinished-drain", n->name,
                                      "drainer state on the node: %s%s%s%s%s%s%s (%s)",
                                      state ? "phase " : "", state ? state : "", since ? " since " : "",
                                      strempty(since), req ? (state ? ", request " : "request ") : "",
                                      strempty(req), msg ? "" : "",
                                      n->unschedulable ? "cordoned" : "schedulable");
                if (!f || doctor_finding_add_object(f, "Node %s", n->name) < 0 ||
                    (msg && doctor_finding_add_object(f, "drainer.io/message: %s", msg) < 0) ||
                    doctor_finding_set_fix(
                            f,
                            "finish it ('drainer drain %s' resumes) or undo it ('drainer uncordon "
                            "%s'); if a drainer serve daemon works on it, let it",
                            n->name, n->name) < 0)
                        return -ENOMEM;
        }
        if (n_unfinished == 0) {
                f = doctor_report_add(rep, DOCTOR_SECTION_DRAIN, DOCTOR_PASS, "unfinished-drain", "",
                                      "no node%s%s holds drainer state of an unfinished drain",
                                      d->node ? " " : "", d->node ? d->node : "");
                if (!f)
                        return -ENOMEM;
        }
        return 0;
}

/* cordoned-with-claims: a cordoned node, outside a drainer drain, with
 * ResourceClaims still on it (DESIGN.md's rule, dra/claims.c). */
static int check_cordoned_with_claims(const struct doctor_rule_input *in, struct doctor_report *rep) {
        const struct doctor_data *d = in->data;
        struct doctor_finding *f;
        size_t n_cordoned_claims = 0;

        size_t n_cordoned = 0;

        for (size_t i = 0; i < d->cordoned.n; i++) {
                const struct doctor_cordoned *c = d->cordoned.v[i];
                const struct node_rec *n = c->node;
                size_t held = 0;

                if (!c->cordoned)
                        continue; /* read for karpenter-grace only */
                n_cordoned++;
                bool drained = kv_get(n->annotations, n->n_annotations, "drainer.io/state");

                for (size_t k = 0; k < n->n_annotations && !drained; k++)
                        drained = strncmp(n->annotations[k].key, "drainer.io/state.", 17) == 0;
                if (drained)
                        continue; /* drainer is on it (a driver's drain may cordon): unfinished-drain says so */
                if (c->error < 0) {
                        f = doctor_report_add(rep, DOCTOR_SECTION_DRAIN, DOCTOR_WARN, "cordoned-with-claims",
                                              n->name,
                                              "cordoned; cannot list its pods, claims on it not checked");
                        if (!f)
                                return -ENOMEM;
                        continue;
                }
                f = NULL;
                for (size_t k = 0; k < d->claims.n; k++) {
                        const struct claim_rec *cl = d->claims.v[k];

                        if (claim_on_node(cl, n->name, (const struct pod_rec *const *)c->pods.v, c->pods.n,
                                          (const struct slice_rec *const *)d->slices.v,
                                          d->slices.n) == CLAIM_NOT_ON_NODE)
                                continue;
                        if (!f) {
                                f = doctor_report_add(rep, DOCTOR_SECTION_DRAIN, DOCTOR_WARN,
                                                      "cordoned-with-claims", n->name, "%s", "");
                                if (!f || doctor_finding_add_object(f, "Node %s", n->name) < 0)
                                        return -ENOMEM;
                        }
                        held++;
                        if (doctor_finding_add_object(f, "ResourceClaim %s/%s", cl->ns, cl->name) < 0)
                                return -ENOMEM;
                }
                if (!f)
                        continue;
                n_cordoned_claims++;
                free(f->message);
                f->message = text_printf(
                        "cordoned with %zu ResourceClaims still on it: a drain tool that stops the DRA "
                        "driver now leaves their pods Terminating with devices never freed",
                        held);
                if (!f->message ||
                    doctor_finding_set_fix(
                            f,
                            "drain it with 'drainer drain %s' (claim holders first, the driver "
                            "last), or uncordon it",
                            n->name) < 0)
                        return -ENOMEM;
        }
        if (n_cordoned_claims == 0) {
                f = doctor_report_add(
                        rep, DOCTOR_SECTION_DRAIN, DOCTOR_PASS, "cordoned-with-claims", "",
                        "%zu cordoned nodes%s%s, none with ResourceClaims still on it outside a "
                        "drainer drain",
                        n_cordoned, d->node ? " among " : "", d->node ? d->node : "");
                if (!f)
                        return -ENOMEM;
        }
        return 0;
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
                            "(the guide's floor at 100 nodes and 800 claims, scaled to %zu %s "
                            "and %zu %s)",
                            floor_qps, floor_burst, nodes, text_plural(nodes, "node", "nodes"), claims,
                            text_plural(claims, "claim", "claims")) < 0)
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

/* client-qps: kube-controller-manager's and kube-scheduler's client settings against
 * the guide's floor (or, without their static pods, whether Prometheus can tell). */
static int check_client_qps(const struct doctor_rule_input *in, struct doctor_report *rep) {
        const struct doctor_data *d = in->data;
        const char *prom_url = in->prom_url;
        static const char *const components[] = { "kube-controller-manager", "kube-scheduler" };
        int r;

        for (size_t i = 0; i < ELEMENTSOF(components); i++) {
                bool seen = false;

                for (size_t k = 0; k < d->cp_pods.n; k++) {
                        const struct doctor_cp_pod *c = d->cp_pods.v[k];

                        if (!streq(c->component, components[i]))
                                continue;
                        seen = true;
                        if (c->error < 0) {
                                struct doctor_finding *f = doctor_report_add(
                                        rep, DOCTOR_SECTION_TUNING, DOCTOR_WARN, "client-qps", components[i],
                                        "%s: cannot read --kube-api-qps/--kube-api-burst from its command "
                                        "line",
                                        c->ns_name);

                                if (!f || doctor_finding_add_object(f, "Pod %s", c->ns_name) < 0)
                                        return -ENOMEM;
                                continue;
                        }
                        r = doctor_report_client_qps(rep, components[i], c->ns_name, &c->conn, d->nodes.n,
                                                     d->claims.n, prom_url);
                        if (r < 0)
                                return r;
                }
                if (seen)
                        continue;
                if (d->lists[DOCTOR_LIST_SYSTEM_PODS].error < 0 &&
                    d->lists[DOCTOR_LIST_SYSTEM_PODS].error != -ECANCELED) {
                        r = list_error_finding(d, rep, DOCTOR_SECTION_TUNING, "client-qps",
                                               DOCTOR_LIST_SYSTEM_PODS, RBAC_FIX);
                        if (r < 0)
                                return r;
                        break;
                }
                r = doctor_report_client_qps(rep, components[i], NULL, NULL, d->nodes.n, d->claims.n,
                                             prom_url);
                if (r < 0)
                        return r;
        }
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

static int check_workqueue(const struct doctor_rule_input *in, struct doctor_report *rep) {
        return report_workqueue(rep, in->prom_url, in->prom);
}

static int check_scheduling_latency(const struct doctor_rule_input *in, struct doctor_report *rep) {
        return report_scheduler(rep, in->prom_url, in->prom);
}

/* The kubelet's error, else the plugin's: either makes both latencies unknown. */
static const char *kubelet_error(const struct doctor_prom_results *m) {
        return m->error_kubelet ? m->error_kubelet : m->error_plugin;
}

static int check_prepare_latency(const struct doctor_rule_input *in, struct doctor_report *rep) {
        const struct doctor_prom_results *m = in->prom;

        return report_prepare(rep, in->prom_url, "NodePrepareResources", m->kubelet_prepare,
                              m->plugin_prepare, kubelet_error(m), DOCTOR_Q_KUBELET_PREPARE,
                              DOCTOR_Q_PLUGIN_PREPARE);
}

static int check_unprepare_latency(const struct doctor_rule_input *in, struct doctor_report *rep) {
        const struct doctor_prom_results *m = in->prom;

        return report_prepare(rep, in->prom_url, "NodeUnprepareResources", m->kubelet_unprepare,
                              m->plugin_unprepare, kubelet_error(m), DOCTOR_Q_KUBELET_UNPREPARE,
                              DOCTOR_Q_PLUGIN_UNPREPARE);
}

/* dra-api: which DRA API the cluster serves. None is its own finding (WARN: the
 * practices are about DRA, which this cluster does not have) and its own exit code,
 * DOCTOR_EXIT_NO_DRA, so a script tells "nothing to audit" from "all good". */
static int check_dra_api(const struct doctor_rule_input *in, struct doctor_report *rep) {
        const struct doctor_data *d = in->data;
        struct doctor_finding *f;

        if (d->dra_api)
                f = doctor_report_add(
                        rep, DOCTOR_SECTION_DRIVER, DOCTOR_PASS, "dra-api", "",
                        "the API server serves %s: ResourceSlices and ResourceClaims read from it",
                        d->dra_api);
        else {
                rep->no_dra = true;
                f = doctor_report_add(rep, DOCTOR_SECTION_DRIVER, DOCTOR_WARN, "dra-api", "",
                                      "the API server serves no DRA API (%s v1, v1beta2 or v1beta1): no "
                                      "ResourceSlices or ResourceClaims to check; drainer drains this "
                                      "cluster as kubectl drain does",
                                      DOCTOR_DRA_GROUP);
                if (f && doctor_finding_set_fix(f, "%s",
                                                "if the cluster should have DRA: enable resource.k8s.io "
                                                "(kube-apiserver --runtime-config; before 1.34 also the "
                                                "DynamicResourceAllocation feature gate)") < 0)
                        return -ENOMEM;
        }
        return f ? 0 : -ENOMEM;
}

/* ---- the table ---- */

/* Every rule, in the order of the guide's page (findings are sorted by section, then
 * by status, then in this order): a new rule is one check function and one entry. The
 * rules that need a driver run one driver after the other (all of the first
 * driver's, then the next's). */
const struct doctor_rule doctor_rules[] = {
        { "dra-api", DOCTOR_SECTION_DRIVER, DOCTOR_RULE_NEEDS_DATA, check_dra_api },
        { "dra-api-writers", DOCTOR_SECTION_PERMISSIONS, DOCTOR_RULE_NEEDS_DATA, check_dra_api_writers },
        { "claim-users", DOCTOR_SECTION_PERMISSIONS, DOCTOR_RULE_NEEDS_DATA, check_claim_users },
        { "driver-daemonset", DOCTOR_SECTION_DRIVER, DOCTOR_RULE_NEEDS_DATA | DOCTOR_RULE_NEEDS_DRIVER,
          check_driver_daemonset },
        { "liveness-probe", DOCTOR_SECTION_LIVENESS, DOCTOR_RULE_NEEDS_DATA | DOCTOR_RULE_NEEDS_DRIVER,
          check_liveness_probe },
        { "rollout-strategy", DOCTOR_SECTION_SEAMLESS_UPGRADE,
          DOCTOR_RULE_NEEDS_DATA | DOCTOR_RULE_NEEDS_DRIVER, check_rollout_strategy },
        { "drain-guard", DOCTOR_SECTION_DRAIN, DOCTOR_RULE_NEEDS_DATA | DOCTOR_RULE_NEEDS_DRIVER,
          check_drain_guard },
        { "karpenter-disruption", DOCTOR_SECTION_DRAIN, DOCTOR_RULE_NEEDS_DATA | DOCTOR_RULE_NEEDS_DRIVER,
          check_karpenter_disruption },
        { "driver-health", DOCTOR_SECTION_LIVENESS, DOCTOR_RULE_NEEDS_DATA | DOCTOR_RULE_NEEDS_DRIVER,
          check_driver_health },
        { "kubelet-versions", DOCTOR_SECTION_SEAMLESS_UPGRADE,
          DOCTOR_RULE_NEEDS_DATA | DOCTOR_RULE_NEEDS_DRIVER, check_kubelet_versions },
        { "driver-rollout", DOCTOR_SECTION_SEAMLESS_UPGRADE,
          DOCTOR_RULE_NEEDS_DATA | DOCTOR_RULE_NEEDS_DRIVER, check_driver_rollout },
        { "drain-coverage", DOCTOR_SECTION_DRAIN, DOCTOR_RULE_NEEDS_DATA, check_drain_coverage },
        { "unfinished-drain", DOCTOR_SECTION_DRAIN, DOCTOR_RULE_NEEDS_DATA, check_unfinished_drain },
        { "cordoned-with-claims", DOCTOR_SECTION_DRAIN, DOCTOR_RULE_NEEDS_DATA, check_cordoned_with_claims },
        { "karpenter-grace", DOCTOR_SECTION_DRAIN, DOCTOR_RULE_NEEDS_DATA, check_karpenter_grace },
        { "client-qps", DOCTOR_SECTION_TUNING, DOCTOR_RULE_NEEDS_DATA, check_client_qps },
        { "resource-claim-workqueue", DOCTOR_SECTION_KCM_METRICS, DOCTOR_RULE_NEEDS_PROMETHEUS,
          check_workqueue },
        { "scheduling-latency", DOCTOR_SECTION_SCHEDULER_METRICS, DOCTOR_RULE_NEEDS_PROMETHEUS,
          check_scheduling_latency },
        { "prepare-latency", DOCTOR_SECTION_KUBELET_METRICS, DOCTOR_RULE_NEEDS_PROMETHEUS,
          check_prepare_latency },
        { "unprepare-latency", DOCTOR_SECTION_KUBELET_METRICS, DOCTOR_RULE_NEEDS_PROMETHEUS,
          check_unprepare_latency },
};

const size_t doctor_rules_n = ELEMENTSOF(doctor_rules);

int doctor_report_prometheus(struct doctor_report *r, const char *url, const struct doctor_prom_results *m) {
        const struct doctor_rule_input in = { .prom_url = url, .prom = m, .subject = "" };
        int k = 0;

        for (size_t i = 0; k >= 0 && i < doctor_rules_n; i++)
                if (doctor_rules[i].needs & DOCTOR_RULE_NEEDS_PROMETHEUS)
                        k = doctor_rules[i].check(&in, r);
        return k;
}

/* The rules [first, end) that need a driver, for each driver in turn (once with none
 * when no ResourceSlice names one). */
static int run_driver_rules(size_t first, size_t end, struct doctor_rule_input in,
                            struct doctor_report *rep) {
        const struct doctor_data *d = in.data;
        int r = 0;

        for (size_t k = 0; r >= 0 && k < MAX(d->drivers.n, (size_t)1); k++) {
                _cleanup_free_ char *subject = NULL;

                if (d->drivers.n > 0) {
                        in.driver = d->drivers.v[k];
                        subject = text_printf("driver %s", in.driver->name);
                        if (!subject)
                                return -ENOMEM;
                        in.subject = subject;
                }
                for (size_t i = first; r >= 0 && i < end; i++)
                        r = doctor_rules[i].check(&in, rep);
        }
        return r;
}

int doctor_rules_run(const struct doctor_data *d, const char *prom_url,
                     const struct doctor_prom_results *prom, struct doctor_report *rep) {
        const struct doctor_rule_input in = { .data = d, .prom_url = prom_url, .prom = prom, .subject = "" };
        int r = 0;

        for (size_t i = 0; r >= 0 && i < doctor_rules_n;) {
                const struct doctor_rule *rule = &doctor_rules[i];
                size_t end = i + 1;

                if (rule->needs & DOCTOR_RULE_NEEDS_DRIVER) {
                        while (end < doctor_rules_n && (doctor_rules[end].needs & DOCTOR_RULE_NEEDS_DRIVER))
                                end++;
                        r = run_driver_rules(i, end, in, rep);
                } else if (!(rule->needs & DOCTOR_RULE_NEEDS_PROMETHEUS) || prom_url)
                        r = rule->check(&in, rep);
                i = end;
        }
        if (r >= 0)
                doctor_report_sort(rep);
        return r;
}
