/* `drainer doctor`: a read-only audit of the cluster against the upstream DRA
 * cluster-admin good practices. Runs the reads (drainer/doctor/gather.c) and,
 * with --prometheus, the guide's queries (drainer/doctor/prom.c) at once,
 * then judges what they found and prints the report. Never writes. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/app.h"
#include "drainer/claims.h"
#include "drainer/client.h"
#include "drainer/doctor-gather.h"
#include "drainer/doctor-prom.h"
#include "drainer/doctor-rules.h"
#include "drainer/json.h"
#include "drainer/log.h"
#include "drainer/objects.h"
#include "drainer/selector.h"
#include "drainer/verbs.h"

#define MAX_DRIVER_SELECTORS DOCTOR_DRIVER_SELECTORS_MAX

struct doctor_opts {
        const char *node;
        const char *prometheus;
        const char *driver_selectors[MAX_DRIVER_SELECTORS + 1];
        size_t n_driver_selectors;
};

static int on_doctor_opt(int opt, const char *arg, void *userdata) {
        struct doctor_opts *o = userdata;

        switch (opt) {
        case 'N':
                o->node = arg;
                return 0;
        case 'P':
                if (strncmp(arg, "http://", 7) != 0 && strncmp(arg, "https://", 8) != 0)
                        return log_error_errno(
                                EINVAL, "--prometheus: expected an http:// or https:// URL, got \"%s\"",
                                arg);
                o->prometheus = arg;
                return 0;
        case 'D':
                if (o->n_driver_selectors >= MAX_DRIVER_SELECTORS)
                        return log_error_errno(EINVAL, "--driver-selector: at most %d selectors",
                                               MAX_DRIVER_SELECTORS);
                o->driver_selectors[o->n_driver_selectors++] = arg;
                return 0;
        }
        return -EINVAL;
}

static int str_push_unique(char ***v, size_t *n, const char *s) {
        char **p, *c;

        for (size_t i = 0; i < *n; i++)
                if (streq((*v)[i], s))
                        return 0;
        c = strdup(s);
        p = c ? realloc(*v, (*n + 1) * sizeof(**v)) : NULL;
        if (!p) {
                free(c);
                return -ENOMEM;
        }
        *v = p;
        (*v)[(*n)++] = c;
        return 1;
}

static void strv_free_n(char **v, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

/* asprintf() that returns the string, or NULL when out of memory. */
static char *strf(const char *fmt, ...) _printf_(1, 2);
static char *strf(const char *fmt, ...) {
        va_list ap;
        char *s;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&s, fmt, ap);
        va_end(ap);
        return r < 0 ? NULL : s;
}

/* ---- the findings ---- */

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

static int report_permissions(const struct doctor_data *d, struct doctor_report *rep) {
        size_t asked = 0, exempt[_DOCTOR_SUBJECT_ROLE_MAX] = {}, writers = 0, wide = 0, namespaced = 0;
        struct doctor_finding *f;

        if (d->lists[DOCTOR_LIST_CLUSTER_ROLE_BINDINGS].error < 0 ||
            d->lists[DOCTOR_LIST_ROLE_BINDINGS].error < 0)
                return list_error_finding(d, rep, DOCTOR_SECTION_PERMISSIONS, "dra-api-writers",
                                          d->lists[DOCTOR_LIST_CLUSTER_ROLE_BINDINGS].error < 0
                                                  ? DOCTOR_LIST_CLUSTER_ROLE_BINDINGS
                                                  : DOCTOR_LIST_ROLE_BINDINGS,
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
                struct doctor_subject_ent *e = d->subjects.v[i];
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

        /* Who may use claims: namespaced, as the guide expects. */
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

static int report_driver(const struct doctor_data *d, struct doctor_report *rep,
                         const struct doctor_driver *dr) {
        _cleanup_free_ char *subject = NULL;
        const struct doctor_group *ds_group = NULL;
        struct doctor_finding *f;
        enum doctor_rollout rollout = DOCTOR_ROLLOUT_NO_SURGE;
        bool have_ds = false;

        subject = strf("driver %s", dr->name);
        if (!subject)
                return -ENOMEM;
        if (dr->n_nodes == 0) {
                f = doctor_report_add(
                        rep, DOCTOR_SECTION_DRIVER, DOCTOR_PASS, "driver-daemonset", subject,
                        "publishes no node-local ResourceSlices (%zu network-attached or all-node "
                        "slices): no kubelet plugin to check",
                        dr->n_slices);
                return f ? 0 : -ENOMEM;
        }

        /* Its deployment: a DaemonSet, found through its pods. */
        if (dr->n_groups == 0) {
                f = doctor_report_add(
                        rep, DOCTOR_SECTION_DRIVER, DOCTOR_WARN, "driver-daemonset", subject,
                        "no DRA driver pod found on its %zu nodes (by the driver selectors): its "
                        "deployment, liveness probe, upgrade strategy and drain guard are not checked",
                        dr->n_nodes);
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
                                      "DaemonSet %s/%s: %zu pods, slices on %zu nodes", g->ns, g->name,
                                      g->n_pods, dr->n_nodes);
                if (!f || doctor_finding_add_object(f, "DaemonSet %s/%s", g->ns, g->name) < 0)
                        return -ENOMEM;
                if (!ds_group)
                        ds_group = g;
        }

        for (size_t j = 0; j < dr->n_groups; j++) {
                const struct doctor_group *g = d->groups.v[dr->groups[j]];
                const cJSON *c, *containers;
                enum doctor_probe best = DOCTOR_PROBE_NONE;
                const char *best_container = NULL, *surge;
                char list[512] = "";

                if (!g->ds)
                        continue;
                have_ds = true;
                containers = json_path(g->ds, "spec.template.spec.containers");

                /* Liveness probe: gRPC preferred. */
                cJSON_ArrayForEach(c, containers) {
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

                /* Seamless upgrade: old and new plugin side by side during a rollout. */
                rollout = doctor_daemonset_rollout(g->ds, &surge);
                if (rollout == DOCTOR_ROLLOUT_SURGE)
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
                                doctor_rollout_to_string(rollout));
                        if (f && doctor_finding_set_fix(
                                         f, "if the driver supports seamless upgrades (kubeletplugin "
                                            "RollingUpdate), set updateStrategy.rollingUpdate "
                                            "maxSurge: 1, maxUnavailable: 0") < 0)
                                return -ENOMEM;
                }
                if (!f || doctor_finding_add_object(f, "DaemonSet %s/%s", g->ns, g->name) < 0)
                        return -ENOMEM;

                /* The drainer guard as preStop: other drain tools cannot stop it too early. */
                cJSON_ArrayForEach(c, containers) if (doctor_container_has_guard(c)) {
                        const char *name = json_str(c, "name");

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

        /* Its pods now: Running and Ready, and SERVING where they declare a gRPC liveness port. */
        if (dr->n_groups > 0) {
                size_t total = 0, probed = 0, bad = 0, unknown = 0;
                _cleanup_free_ char *first = NULL;

                f = doctor_report_add(rep, DOCTOR_SECTION_LIVENESS, DOCTOR_PASS, "driver-health", subject,
                                      "%s", "");
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
                                        why = strf("%s%s", strna(pod_phase_to_string(p->rec->phase)),
                                                   p->rec->ready ? "" : ", not Ready");
                                else if (p->probed && p->probe_error == -ECONNREFUSED)
                                        why = strf("gRPC health %s:%d refused the connection",
                                                   p->rec->pod_ip, p->rec->grpc_probe_port);
                                else if (p->probed && p->probe_error < 0) {
                                        warn = true;
                                        why = strf("gRPC health %s:%d not reachable from here (%s)",
                                                   p->rec->pod_ip, p->rec->grpc_probe_port,
                                                   p->probe_message ? p->probe_message
                                                                    : strerror(-p->probe_error));
                                } else if (p->probed && p->probe_status != HEALTH_SERVING)
                                        why = strf("gRPC health %s",
                                                   strna(health_status_to_string(p->probe_status)));
                                probed += p->probed && p->probe_error == 0 &&
                                          p->probe_status == HEALTH_SERVING;
                                if (!why)
                                        continue;
                                if (warn)
                                        unknown++;
                                else
                                        bad++;
                                if (!first)
                                        first = strdup(why);
                                if (doctor_finding_add_object(f, "Pod %s/%s on %s: %s", p->rec->ns,
                                                              p->rec->name, strna(p->rec->node_name),
                                                              why) < 0)
                                        return -ENOMEM;
                        }
                }
                free(f->message);
                if (bad > 0) {
                        f->status = DOCTOR_FAIL;
                        f->message = strf(
                                "%zu of %zu driver pods are not healthy (%s%s): pods with claims cannot "
                                "start there and finished ones are not cleaned up",
                                bad, total, strna(first), bad > 1 ? ", ..." : "");
                        if (doctor_finding_set_fix(
                                    f, "look at those pods (kubectl describe, logs); the liveness probe "
                                       "should restart a hung driver") < 0)
                                return -ENOMEM;
                } else if (unknown > 0) {
                        f->status = DOCTOR_WARN;
                        f->message =
                                strf("%zu driver pods are Running and Ready, but %zu could not be probed "
                                     "(%s): doctor runs outside the pod network?",
                                     total, unknown, strna(first));
                        if (doctor_finding_set_fix(
                                    f, "run doctor where pod IPs are reachable (a pod, a node) to "
                                       "probe the drivers' gRPC health") < 0)
                                return -ENOMEM;
                } else
                        f->message = strf(
                                "%zu driver pods%s%s Running and Ready; %zu answer SERVING on their gRPC "
                                "liveness port%s",
                                total, d->node ? " on " : "", d->node ? d->node : "", probed,
                                probed < total ? " (the others declare none)" : "");
                if (!f->message)
                        return -ENOMEM;
                if (doctor_finding_add_detail(f, "pods", (double)total) < 0 ||
                    doctor_finding_add_detail(f, "serving", (double)probed) < 0)
                        return -ENOMEM;
        }

        /* Seamless upgrade needs kubelet 1.33+ on every node where the driver runs. */
        {
                char **nodes = NULL;
                size_t n_nodes = 0, n_old = 0, n_unknown = 0;
                const char *first_ok = NULL;

                for (size_t j = 0; j < dr->n_nodes; j++)
                        if (doctor_data_in_scope(d, dr->nodes[j]) &&
                            str_push_unique(&nodes, &n_nodes, dr->nodes[j]) < 0)
                                goto oom;
                for (size_t j = 0; j < dr->n_groups; j++) {
                        const struct doctor_group *g = d->groups.v[dr->groups[j]];

                        for (size_t q = 0; q < g->n_pods; q++) {
                                const char *nn =
                                        ((struct doctor_pod *)d->driver_pods.v[g->pods[q]])->rec->node_name;

                                if (nn && doctor_data_in_scope(d, nn) &&
                                    str_push_unique(&nodes, &n_nodes, nn) < 0)
                                        goto oom;
                        }
                }
                f = doctor_report_add(rep, DOCTOR_SECTION_SEAMLESS_UPGRADE, DOCTOR_PASS, "kubelet-versions",
                                      subject, "%s", "");
                if (!f)
                        goto oom;
                for (size_t j = 0; j < n_nodes; j++) {
                        const struct node_rec *n = doctor_data_node(d, nodes[j]);
                        const char *v = n ? n->kubelet_version : NULL;
                        int k = doctor_kubelet_seamless(v);

                        if (k > 0) {
                                first_ok = first_ok ? first_ok : v;
                                continue;
                        }
                        if (k == 0)
                                n_old++;
                        else
                                n_unknown++;
                        if (doctor_finding_add_object(f, "Node %s (kubelet %s)", nodes[j],
                                                      v ? v : "unknown") < 0)
                                goto oom;
                }
                free(f->message);
                f->message = NULL;
                if (n_old > 0 && have_ds && rollout == DOCTOR_ROLLOUT_SURGE) {
                        f->status = DOCTOR_FAIL;
                        f->message =
                                strf("%zu of %zu nodes of the driver run a kubelet older than 1.33, yet its "
                                     "DaemonSet surges: two instances of the plugin on such a kubelet break "
                                     "the driver during every rollout",
                                     n_old, n_nodes);
                } else if (n_old > 0) {
                        f->status = DOCTOR_WARN;
                        f->message =
                                strf("a mixed cluster: %zu of %zu nodes of the driver run a kubelet older "
                                     "than 1.33, where seamless driver upgrades are not available",
                                     n_old, n_nodes);
                } else if (n_unknown > 0) {
                        f->status = DOCTOR_WARN;
                        f->message = strf("%zu of %zu nodes of the driver report a kubelet version doctor "
                                          "cannot read",
                                          n_unknown, n_nodes);
                } else
                        f->message =
                                strf("all %zu nodes of the driver run kubelet 1.33 or newer (%s): seamless "
                                     "upgrades are possible",
                                     n_nodes, strna(first_ok));
                if (!f->message)
                        goto oom;
                if (n_old > 0 &&
                    doctor_finding_set_fix(f, "upgrade the kubelets of those nodes to 1.33 or newer%s",
                                           rollout == DOCTOR_ROLLOUT_SURGE && have_ds
                                                   ? ", or roll the driver out without maxSurge until then"
                                                   : " before relying on seamless driver upgrades") < 0)
                        goto oom;
                strv_free_n(nodes, n_nodes);
                return 0;
        oom:
                strv_free_n(nodes, n_nodes);
                return -ENOMEM;
        }
}

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

        cJSON_ArrayForEach(
                c,
                json_path(g->ds,
                          "spec.template.spec.containers")) if (doctor_container_has_guard(c)) return true;
        return false;
}

static int report_drain(const struct doctor_data *d, struct doctor_report *rep) {
        struct doctor_finding *uncovered = NULL, *f;
        size_t n_dra = 0, by_serve = 0, by_guard = 0, n_unfinished = 0, n_cordoned_claims = 0;
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
                uncovered->subject = strf("%zu nodes", uncovered->n_objects);
                uncovered->message =
                        strf("%zu of %zu nodes with DRA devices have neither a drainer serve "
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

        for (size_t i = 0; i < d->nodes.n; i++) {
                const struct node_rec *n = d->nodes.v[i];
                const char *state = kv_get(n->annotations, n->n_annotations, "drainer.io/state");
                const char *req = kv_get(n->annotations, n->n_annotations, "drainer.io/request");
                const char *since = kv_get(n->annotations, n->n_annotations, "drainer.io/state-since");
                const char *msg = kv_get(n->annotations, n->n_annotations, "drainer.io/message");

                if (!doctor_data_in_scope(d, n->name) || n->n_annotations == 0)
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

        for (size_t i = 0; i < d->cordoned.n; i++) {
                const struct doctor_cordoned *c = d->cordoned.v[i];
                const struct node_rec *n = c->node;
                size_t held = 0;

                if (kv_get(n->annotations, n->n_annotations, "drainer.io/state"))
                        continue; /* drainer is on it: unfinished-drain says so */
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
                f->message =
                        strf("cordoned with %zu ResourceClaims still on it: a drain tool that stops the DRA "
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
                        d->cordoned.n, d->node ? " among " : "", d->node ? d->node : "");
                if (!f)
                        return -ENOMEM;
        }
        return 0;
}

static int report_tuning(const struct doctor_data *d, const char *prom_url,
                         const struct doctor_prom_results *prom, struct doctor_report *rep) {
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
        if (prom_url) {
                r = doctor_report_prometheus(rep, prom_url, prom);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int build_report(const struct doctor_data *d, const char *prom_url,
                        const struct doctor_prom_results *prom, struct doctor_report *rep) {
        int r;

        r = report_permissions(d, rep);
        for (size_t i = 0; r >= 0 && i < d->drivers.n; i++)
                r = report_driver(d, rep, d->drivers.v[i]);
        if (r >= 0 && d->drivers.n == 0) {
                struct doctor_finding *f =
                        doctor_report_add(rep, DOCTOR_SECTION_DRIVER, DOCTOR_PASS, "driver-daemonset", "",
                                          "no ResourceSlice names a DRA driver: nothing "
                                          "to check");

                r = f ? 0 : -ENOMEM;
        }
        if (r >= 0)
                r = report_drain(d, rep);
        if (r >= 0)
                r = report_tuning(d, prom_url, prom, rep);
        if (r >= 0)
                doctor_report_sort(rep);
        return r;
}

static int print_report(const struct doctor_data *d, const struct doctor_opts *o,
                        const struct doctor_report *rep, enum output_format fmt) {
        if (fmt == OUTPUT_JSON) {
                _cleanup_(cJSON_Deletep) cJSON *root = doctor_report_to_json(rep);
                _cleanup_free_ char *out = NULL;
                cJSON *cl, *drv;

                if (!root)
                        return log_oom();
                cl = cJSON_AddObjectToObject(root, "cluster");
                if (!cl)
                        return log_oom();
                cJSON_AddNumberToObject(cl, "nodes", (double)d->nodes.n);
                cJSON_AddNumberToObject(cl, "resourceClaims", (double)d->claims.n);
                drv = cJSON_AddArrayToObject(cl, "drivers");
                for (size_t i = 0; drv && i < d->drivers.n; i++)
                        cJSON_AddItemToArray(drv, cJSON_CreateString(d->drivers.v[i]->name));
                if (o->node)
                        cJSON_AddStringToObject(cl, "node", o->node);
                else
                        cJSON_AddNullToObject(cl, "node");
                if (o->prometheus)
                        cJSON_AddStringToObject(cl, "prometheus", o->prometheus);
                else
                        cJSON_AddNullToObject(cl, "prometheus");
                out = cJSON_Print(root);
                if (!out)
                        return log_oom();
                puts(out);
                fflush(stdout);
                return ferror(stdout) ? -EIO : 0;
        }
        printf("drainer doctor: %zu nodes, %zu ResourceClaims, %zu DRA drivers", d->nodes.n, d->claims.n,
               d->drivers.n);
        for (size_t i = 0; i < d->drivers.n; i++)
                printf("%s%s", i == 0 ? " (" : ", ", d->drivers.v[i]->name);
        printf("%s%s%s; Prometheus: %s\n", d->drivers.n ? ")" : "", o->node ? "; node " : "",
               o->node ? o->node : "", o->prometheus ? o->prometheus : "not asked (--prometheus URL)");
        printf("against \"Good practices for Dynamic Resource Allocation as a Cluster Admin\" "
               "(kubernetes.io/docs/concepts/cluster-administration/dra)\n\n");
        if (doctor_report_print_text(rep, stdout) < 0)
                return -EIO;
        printf("\n%zu FAIL, %zu WARN, %zu PASS\n", doctor_report_count(rep, DOCTOR_FAIL),
               doctor_report_count(rep, DOCTOR_WARN), doctor_report_count(rep, DOCTOR_PASS));
        fflush(stdout);
        return ferror(stdout) ? -EIO : 0;
}

/* ---- the run ---- */

struct run {
        struct doctor_data data;
        struct doctor_prom_results prom;
        struct doctor_gather *gather; /* while gathering */
        bool gathering, asking;
        int gather_error, prom_error;
        char *gather_message;
};

static void on_gathered(int error, const char *message, void *userdata) {
        struct run *run = userdata;

        run->gathering = false;
        run->gather = NULL;
        run->gather_error = error;
        run->gather_message = message ? strdup(message) : NULL;
}

static void on_prom_done(int error, void *userdata) {
        struct run *run = userdata;

        run->asking = false;
        run->prom_error = error;
        /* Not every query could be sent: the report cannot be made; stop the reads. */
        if (error < 0 && run->gathering)
                doctor_gather_cancel(run->gather);
}

static int run_doctor(struct app *a, const struct doctor_opts *o, enum output_format fmt) {
        struct run run = {};
        struct doctor_report rep = {};
        const char *const *selectors =
                o->n_driver_selectors > 0 ? o->driver_selectors : claims_default_driver_selectors;
        int r;

        r = doctor_data_init(&run.data, o->node);
        if (r < 0)
                return log_oom();
        r = doctor_gather_start(a->client, a->transport, &run.data, selectors, on_gathered, &run,
                                &run.gather);
        if (r < 0) {
                r = log_error_errno(r, "Cannot read the cluster: %m");
                goto out;
        }
        run.gathering = true;
        if (o->prometheus) {
                r = doctor_prom_start(a->transport, o->prometheus, &run.prom, on_prom_done, &run);
                if (r < 0) {
                        log_error_errno(r, "--prometheus %s: cannot start a query: %m", o->prometheus);
                        doctor_gather_cancel(run.gather);
                } else
                        run.asking = true;
        }
        /* The reads go on while Prometheus answers. */
        while (run.gathering || run.asking)
                if (uv_run(&a->loop, UV_RUN_ONCE) == 0)
                        break;
        if (r < 0)
                goto out;
        if (run.prom_error < 0) {
                r = log_error_errno(run.prom_error, "--prometheus %s: cannot start a query: %m",
                                    o->prometheus);
                goto out;
        }
        if (run.gather_error < 0) {
                if (run.gather_message)
                        r = log_error_errno(run.gather_error, "%s", run.gather_message);
                else if (run.gather_error == -ENOMEM)
                        r = log_oom();
                else
                        r = log_error_errno(run.gather_error, "Cannot check: %m");
                goto out;
        }
        r = build_report(&run.data, o->prometheus, o->prometheus ? &run.prom : NULL, &rep);
        if (r < 0) {
                r = log_oom();
                goto out;
        }
        r = print_report(&run.data, o, &rep, fmt);
        if (r < 0)
                goto out;
        r = doctor_report_exit_code(&rep);
out:
        doctor_report_done(&rep);
        doctor_prom_results_done(&run.prom);
        free(run.gather_message);
        doctor_data_done(&run.data);
        return r;
}

int verb_doctor(int argc, char **argv, struct global_flags *g) {
        static const struct option extra[] = {
                { "node", required_argument, NULL, 'N' },
                { "prometheus", required_argument, NULL, 'P' },
                { "driver-selector", required_argument, NULL, 'D' },
                {},
        };
        struct doctor_opts o = {};
        struct app a;
        int r;

        r = verb_parse(argc, argv, g, extra, on_doctor_opt, &o);
        if (r <= 0)
                return r < 0 ? EXIT_USAGE : EXIT_DONE;
        if (argc - optind != 0) {
                log_error("drainer doctor: unexpected argument \"%s\" (use --node NODE); see 'drainer "
                          "doctor --help'",
                          argv[optind]);
                return EXIT_USAGE;
        }
        if (o.n_driver_selectors > 0) {
                _cleanup_free_ char *err = NULL;
                struct selector **sels;
                size_t n;

                r = selectors_parse_strv(o.driver_selectors, &sels, &n, &err);
                if (r < 0) {
                        log_error("--driver-selector: %s", err ? err : "invalid selector");
                        return EXIT_USAGE;
                }
                for (size_t i = 0; i < n; i++)
                        if (selector_is_empty(sels[i])) {
                                selectors_free(sels, n);
                                log_error("--driver-selector: an empty selector would match every pod");
                                return EXIT_USAGE;
                        }
                selectors_free(sels, n);
        }

        r = app_init(&a, g);
        if (r < 0) {
                app_done(&a);
                return EXIT_ERROR;
        }
        r = run_doctor(&a, &o, g->output);
        app_done(&a);
        if (r < 0)
                return app_exit_code(r);
        return r;
}
