/* `drainer plan` and `drain --dry-run`: each node's (and --driver's) plan, read
 * asynchronously one step after the other (the snapshot, the DeviceTaintRule
 * discovery, the driver's label key, the health probes, the seamless check), then
 * printed, or sent as kubectl's server dry run. Owns one plan at a time; never runs
 * the loop (verb-drain.c holds the verb's lifecycle). */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app.h"
#include "drainargs.h"
#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "drainer/base/selector.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/driverkey.h"
#include "drainer/ctl/fleet.h"
#include "drainer/dra/health.h"
#include "drainer/dra/nodeview.h"
#include "drainer/dra/seamless.h"
#include "drainer/dra/snapshot.h"
#include "drainer/dra/taintrule.h"
#include "drainer/drain/engine.h"
#include "drainer/drain/nodeset.h"
#include "drainer/drain/plan.h"
#include "drainer/kube/client.h"
#include "drainer/kube/kstatus.h"
#include "drainer/obs/metrics.h"
#include "drainer/sys/sysbus.h"
#include "drainverb.h"
#include "verbs.h"

static const char *dry_outcome(const struct dry_call *c) {
        return c->error == 0 || c->error == -ENOENT ? "evicted"
               : c->ns_terminating                  ? "namespace-terminating"
               : c->error == -EAGAIN                ? "held"
                                                    : "failed";
}
static bool out_of_service_tainted_node(const struct node_rec *n) {
        return node_rec_find_taint(n, OUT_OF_SERVICE_TAINT_KEY, OUT_OF_SERVICE_TAINT_EFFECT) != NULL;
}

/* What the plan says of the node's readiness and of --out-of-service. */
static void plan_print_readiness(const struct node_rec *n, const struct oos_args *oos, FILE *f) {
        char since[64] = "?", due[64] = "?";

        if (n->not_ready_since_usec > 0) {
                (void)timesrc_format_rfc3339(n->not_ready_since_usec, since, sizeof(since));
                (void)timesrc_format_rfc3339(n->not_ready_since_usec + (int64_t)oos->after_usec, due,
                                             sizeof(due));
        }
        if (!n->ready)
                fprintf(f,
                        "\nNode %s is not Ready (since %s): its kubelet is down or not reporting, so it "
                        "can neither\nterminate the evicted pods nor unprepare their ResourceClaims: "
                        "they are not released until it is back.\n",
                        n->name, since);
        if (!oos->on)
                return;
        fprintf(f,
                "\nOut of service (--out-of-service, for a machine that is off): once the node has been "
                "not Ready\nfor %.0f s (--out-of-service-after, from its Ready condition's "
                "lastTransitionTime), drainer applies\nthe taint " OUT_OF_SERVICE_TAINT_KEY
                "=" OUT_OF_SERVICE_TAINT_VALUE ":" OUT_OF_SERVICE_TAINT_EFFECT ": the control plane "
                "then deletes\nthe node's pods and releases their ResourceClaims WITHOUT the kubelet's "
                "unprepare. 'drainer uncordon'\nremoves the taint once the node is Ready again. Now: ",
                (double)oos->after_usec / USEC_PER_SEC);
        if (out_of_service_tainted_node(n))
                fprintf(f, "the node already has that taint.\n");
        else if (n->ready)
                fprintf(f, "the node is Ready: the taint is not applied while it is.\n");
        else if (n->not_ready_since_usec > 0)
                fprintf(f, "not Ready since %s: the taint would go on at %s.\n", since, due);
        else
                fprintf(f, "not Ready since an unknown time: the taint is not applied until the Ready "
                           "condition says since when.\n");
}

static void plan_json_readiness(cJSON *j, const struct node_rec *n, const struct oos_args *oos) {
        char buf[64];
        cJSON *o;

        cJSON_AddBoolToObject(j, "nodeReady", n->ready);
        if (!n->ready && n->not_ready_since_usec > 0 &&
            timesrc_format_rfc3339(n->not_ready_since_usec, buf, sizeof(buf)) >= 0)
                cJSON_AddStringToObject(j, "nodeNotReadySince", buf);
        if (!oos->on)
                return;
        o = cJSON_AddObjectToObject(j, "outOfService");
        if (!o)
                return;
        cJSON_AddStringToObject(o, "taint",
                                OUT_OF_SERVICE_TAINT_KEY "=" OUT_OF_SERVICE_TAINT_VALUE
                                                         ":" OUT_OF_SERVICE_TAINT_EFFECT);
        cJSON_AddNumberToObject(o, "afterSeconds", (double)oos->after_usec / USEC_PER_SEC);
        cJSON_AddBoolToObject(o, "tainted", out_of_service_tainted_node(n));
        if (!n->ready && n->not_ready_since_usec > 0 &&
            timesrc_format_rfc3339(n->not_ready_since_usec + (int64_t)oos->after_usec, buf, sizeof(buf)) >=
                    0)
                cJSON_AddStringToObject(o, "dueAt", buf);
}

/* ---- plan: one node (and driver), read asynchronously ---- */

static void plan_job_done(struct plan_job *job, int r);
static void plan_step_key(struct plan_job *job);
static void plan_step_build(struct plan_job *job);
static void plan_step_probe(struct plan_job *job);
static void plan_step_seamless(struct plan_job *job);
static void plan_step_output(struct plan_job *job);

void drain_verb_plan_free(struct plan_job *job) {
        struct drain_verb *v = job->v;

        drain_verb_close_snapshot(v, job->snap);
        if (job->sv_ready)
                drain_scope_view_done(&job->sv);
        if (job->p_ready)
                plan_done(&job->p);
        for (size_t i = 0; job->calls && i < job->p.n_pods; i++)
                free(job->calls[i].message);
        free(job->calls);
        free(job->cordon.message);
        free(job->key);
        free(job->key_from);
        free(job->key_why);
        free(job);
}

static void on_plan_discovered(int error, const struct taint_rule_api *api, void *userdata) {
        struct plan_job *job = userdata;

        job->disc = NULL;
        if (!drain_verb_op_ended(job->v))
                return;
        if (error < 0) {
                plan_job_done(job, log_error_errno(error,
                                                   "cannot ask the API server whether it serves "
                                                   "DeviceTaintRules: %s",
                                                   strerror(-error)));
                return;
        }
        job->po.isolation = api->served ? PLAN_ISOLATE_TAINT_RULE : PLAN_ISOLATE_CORDON_FALLBACK;
        job->po.taint_rule_api = api->served ? api->api_version : NULL;
        plan_step_key(job);
}

static void on_plan_snapshot(struct node_snapshot *s, int error, const char *what, void *userdata) {
        struct plan_job *job = userdata;
        const char *drv = job->args.profile.n_drivers > 0 ? job->args.profile.drivers[0] : NULL;

        if (!drain_verb_op_ended(job->v))
                return;
        if (error < 0) {
                plan_job_done(job, log_error_errno(error, "%s", strna(what)));
                return;
        }
        job->in = node_snapshot_input(s);
        /* The Node as the drain's scope sees it (--driver: only that driver's keys). */
        if (drain_scope_view_init(&job->sv, job->in->node, drv) < 0) {
                plan_job_done(job, log_oom());
                return;
        }
        job->sv_ready = true;
        job->conflict = drain_scope_conflict(job->in->node, drv);
        if (job->args.profile.n_drivers > 0) {
                /* --driver: where the API server serves DeviceTaintRules (the engine asks the
                 * same at its start) */
                int r = taint_rule_discover(job->v->app->client, on_plan_discovered, job, &job->disc);

                if (r < 0) {
                        plan_job_done(job, log_error_errno(r, "Cannot start the API requests: %m"));
                        return;
                }
                job->v->in_flight++;
                return;
        }
        plan_step_key(job);
}

static void on_plan_key(int error, const char *key, const char *from, const char *why, void *userdata) {
        struct plan_job *job = userdata;

        job->key_read = NULL;
        if (!drain_verb_op_ended(job->v))
                return;
        if (error < 0 && error != -EPERM) {
                plan_job_done(job, error == -ENOMEM ? log_oom() : log_error_errno(error, "%s", strna(why)));
                return;
        }
        if ((key && !(job->key = strdup(key))) || (from && !(job->key_from = strdup(from))) ||
            (why && !(job->key_why = strdup(why)))) {
                plan_job_done(job, log_oom());
                return;
        }
        job->po.driver_stop_arg = job->key;
        job->po.driver_stop_arg_from = job->key_from;
        plan_step_build(job);
}

/* --driver without --driver-stop: label, KEY from the driver's DaemonSet. */
static void plan_step_key(struct plan_job *job) {
        int r;

        if (!job->args.stop_from_daemonset) {
                plan_step_build(job);
                return;
        }
        r = driver_key_read_start(job->v->app->client, job->v->app->ts, job->in, &job->args.profile,
                                  on_plan_key, job, &job->key_read);
        if (r < 0) {
                plan_job_done(job, r == -ENOMEM ? log_oom()
                                                : log_error_errno(r, "Cannot start the API requests: %m"));
                return;
        }
        job->v->in_flight++;
}

static void plan_step_build(struct plan_job *job) {
        const struct node_rec *pn = &job->sv.node;
        const char *node = job->node;
        int r;

        {
                /* The same refusal as drain's: a plan over nonsense state would mislead. */
                _cleanup_(drain_state_done) struct drain_state st = {};
                _cleanup_free_ char *err = NULL;

                r = drain_state_parse(pn, &st, &err);
                if (r < 0) {
                        log_error("%s", err ? err : "malformed drainer annotations");
                        plan_job_done(job, r);
                        return;
                }
        }
        if (job->in->dra_off)
                job->po.n_driver_selectors = 0; /* no DRA API: no drivers (as the drain's, engine.c) */
        r = plan_build(pn, job->in->pods, job->in->n_pods, job->in->claims, job->in->n_claims,
                       job->in->slices, job->in->n_slices, job->in->pdbs, job->in->n_pdbs, &job->po,
                       &job->p);
        if (r < 0) {
                plan_job_done(job, log_oom());
                return;
        }
        job->p_ready = true;
        /* A node drain and a driver drain of the same node exclude each other (engine.c). */
        if (job->conflict) {
                char m[512];

                if (*job->conflict)
                        snprintf(m, sizeof(m),
                                 "DRA driver %s of node %s is out of service (a driver drain): a node drain "
                                 "waits until it is back (drainer uncordon %s --driver %s)",
                                 job->conflict, node, node, job->conflict);
                else
                        snprintf(m, sizeof(m),
                                 "node %s is being drained: a drain of DRA driver %s waits until that drain "
                                 "is "
                                 "undone (drainer uncordon %s)",
                                 node, job->args.profile.drivers[0], node);
                plan_add_blocker(&job->p, BLOCKER_DRAIN_EXCLUSIVE, NULL, m);
        }
        if (job->key_why)
                plan_add_blocker(&job->p, BLOCKER_DRIVER_STOP_KEY, NULL, job->key_why);
        plan_step_probe(job);
}

static void plan_probe_result(struct plan_job *job, const struct pod_rec *pod, int error,
                              enum health_status status) {
        char m[512];

        if (error == 0 && status == HEALTH_SERVING)
                return;
        snprintf(m, sizeof(m),
                 "DRA driver pod %s/%s does not answer SERVING on its health endpoint: %s "
                 "(use --ignore-driver-health to override)",
                 pod->ns, pod->name, error < 0 ? strerror(-error) : health_status_to_string(status));
        plan_add_blocker(&job->p, BLOCKER_DRIVER_UNHEALTHY, pod, m);
}

static void on_plan_probe(int error, enum health_status status, const char *message, void *userdata) {
        struct plan_job *job = userdata;

        job->probe = NULL;
        if (!drain_verb_op_ended(job->v))
                return;
        plan_probe_result(job, job->p.pods[job->probe_at].pod, error, status);
        job->probe_at++;
        plan_step_probe(job);
}

/* The same health check as the drain's preflight, when an endpoint is configured: one
 * driver pod at a time. */
static void plan_step_probe(struct plan_job *job) {
        const struct drain_profile *pr = &job->args.profile;

        for (; pr->has_health && !pr->ignore_health && job->probe_at < job->p.n_pods; job->probe_at++) {
                const struct pod_rec *pod = job->p.pods[job->probe_at].pod;

                if (job->p.pods[job->probe_at].cls != POD_CLASS_DRIVER || pod->deleting)
                        continue;
                if (health_probe_start(job->v->app->transport, &pr->health_target, pod->pod_ip,
                                       5 * USEC_PER_SEC, on_plan_probe, job, &job->probe) < 0) {
                        plan_probe_result(job, pod, -EIO, HEALTH_UNKNOWN);
                        continue;
                }
                job->v->in_flight++;
                return;
        }
        plan_step_seamless(job);
}

static void on_plan_seamless(int error, const char *what, const struct seamless_answer *ans,
                             void *userdata) {
        struct plan_job *job = userdata;

        job->seam_check = NULL;
        if (!drain_verb_op_ended(job->v))
                return;
        if (error < 0) {
                plan_job_done(job, log_error_errno(error, "%s", strna(what)));
                return;
        }
        job->seam = *ans;
        job->seam_known = true;
        plan_step_output(job);
}

/* The node's driver pods (DaemonSet-controlled, by the profile's selectors). */
int drain_verb_driver_pods(const struct node_input *in, const struct plan_options *po,
                           const struct pod_rec ***ret, size_t *ret_n) {
        const struct pod_rec **dp = calloc(in->n_pods ? in->n_pods : 1, sizeof(*dp));
        size_t n = 0;

        if (!dp)
                return -ENOMEM;
        for (size_t i = 0; i < in->n_pods; i++)
                if (pod_is_driver(in->pods[i], &(const struct driver_filter){
                                                       .selectors = po->driver_selectors,
                                                       .n_selectors = po->n_driver_selectors,
                                                       .namespaces = po->driver_namespaces,
                                                       .n_namespaces = po->n_driver_namespaces,
                                               }))
                        dp[n++] = in->pods[i];
        *ret = dp;
        *ret_n = n;
        return 0;
}

/* --driver: whether the driver upgrades seamlessly */
static void plan_step_seamless(struct plan_job *job) {
        const struct pod_rec **dp;
        size_t n_dp = 0;
        int r;

        if (job->args.profile.n_drivers == 0 || job->in->dra_off) {
                plan_step_output(job);
                return;
        }
        dp = calloc(job->p.n_pods ? job->p.n_pods : 1, sizeof(*dp));
        if (!dp) {
                plan_job_done(job, log_oom());
                return;
        }
        for (size_t i = 0; i < job->p.n_pods; i++)
                if (job->p.pods[i].cls == POD_CLASS_DRIVER)
                        dp[n_dp++] = job->p.pods[i].pod;
        r = seamless_check_start(job->v->app->client, job->v->app->ts, job->args.profile.drivers[0], dp,
                                 n_dp, on_plan_seamless, job, &job->seam_check);
        free(dp);
        if (r < 0) {
                plan_job_done(job, r == -ENOMEM ? log_oom()
                                                : log_error_errno(r, "Cannot start the API requests: %m"));
                return;
        }
        job->v->in_flight++;
}

/* The server dry run's answers are in: printed as kubectl prints them. */
static void dry_run_report(struct plan_job *job) {
        const struct plan *p = &job->p;
        const struct node_rec *node = &job->sv.node;
        enum output_format fmt = job->v->fmt;
        _cleanup_(cJSON_Deletep) cJSON *j = fmt == OUTPUT_JSON ? cJSON_CreateObject() : NULL;
        cJSON *pods = NULL;
        size_t failed = 0;

        if (j) {
                cJSON_AddStringToObject(j, "node", node->name);
                cJSON_AddStringToObject(j, "dryRun", "server");
                cJSON_AddBoolToObject(j, "cordoned", true);
                pods = cJSON_AddArrayToObject(j, "evictions");
        }
        for (size_t i = 0; i < p->n_pods; i++) {
                const struct plan_pod *pp = &p->pods[i];
                const struct dry_call *c = &job->calls[i];
                const char *outcome;

                if (pp->group == EVICT_GROUP_NONE || pp->pod->deleting)
                        continue;
                outcome = dry_outcome(c);
                failed += streq(outcome, "failed");
                if (j) {
                        cJSON *o = cJSON_CreateObject();

                        cJSON_AddStringToObject(o, "namespace", pp->pod->ns);
                        cJSON_AddStringToObject(o, "name", pp->pod->name);
                        cJSON_AddStringToObject(o, "group", evict_group_to_string(pp->group));
                        cJSON_AddStringToObject(o, "result", outcome);
                        if (c->error < 0 && c->error != -ENOENT)
                                cJSON_AddStringToObject(o, "message",
                                                        c->message ? c->message : strerror(-c->error));
                        cJSON_AddItemToArray(pods, o);
                } else if (streq(outcome, "evicted"))
                        printf("pod/%s evicted (server dry run)\n", pp->pod->name);
                else
                        printf("pod/%s %s (server dry run): %s\n", pp->pod->name,
                               streq(outcome, "held")                    ? "eviction held by a budget"
                               : streq(outcome, "namespace-terminating") ? "in a namespace being deleted"
                                                                         : "eviction failed",
                               c->message ? c->message : strerror(-c->error));
        }
        if (j) {
                cJSON *stays = cJSON_AddArrayToObject(j, "stays");

                for (size_t i = 0; i < p->n_pods; i++)
                        if (p->pods[i].group == EVICT_GROUP_NONE) {
                                cJSON *o = cJSON_CreateObject();

                                cJSON_AddStringToObject(o, "namespace", p->pods[i].pod->ns);
                                cJSON_AddStringToObject(o, "name", p->pods[i].pod->name);
                                cJSON_AddStringToObject(o, "reason", strna(p->pods[i].skip_reason));
                                cJSON_AddItemToArray(stays, o);
                        }
                cJSON_AddBoolToObject(j, "ok", failed == 0);
                if (job->list)
                        cJSON_AddItemToArray(job->list, TAKE_PTR(j));
                else
                        drain_verb_print_json(j);
        } else
                printf("node/%s drained (server dry run)%s\n", node->name,
                       failed ? ", with failed evictions" : "");
        plan_job_done(job, failed ? -EIO : 0);
}

static void on_dry_answer(const struct kube_result *res, void *userdata) {
        struct dry_call *c = userdata;
        struct plan_job *job = c->job;

        c->call = NULL;
        c->done = true;
        c->error = res->error;
        c->status = res->status;
        c->ns_terminating =
                res->error == -EACCES && kube_status_has_cause(res->status_body, "NamespaceTerminating");
        c->message = res->message ? strdup(res->message) : NULL;
        if (!drain_verb_op_ended(job->v))
                return;
        if (c != &job->cordon) {
                if (--job->calls_left == 0)
                        dry_run_report(job);
                return;
        }
        if (c->error < 0) {
                plan_job_done(job, log_error_errno(c->error, "cordoning node %s (server dry run) failed: %s",
                                                   job->sv.node.name,
                                                   c->message ? c->message : strerror(-c->error)));
                return;
        }
        if (job->v->fmt != OUTPUT_JSON)
                printf("node/%s cordoned (server dry run)\n", job->sv.node.name);
        /* an eviction of every pod the plan evicts, all at once */
        job->calls = calloc(MAX(job->p.n_pods, 1u), sizeof(*job->calls));
        if (!job->calls) {
                plan_job_done(job, log_oom());
                return;
        }
        job->calls_left = 1; /* until every eviction is sent */
        for (size_t i = 0; i < job->p.n_pods; i++) {
                const struct plan_pod *pp = &job->p.pods[i];
                int64_t grace = job->args.profile.grace;
                int r;

                job->calls[i].job = job;
                if (pp->group == EVICT_GROUP_NONE || pp->pod->deleting) {
                        job->calls[i].done = true;
                        continue;
                }
                if (grace == 0 && pp->cls == POD_CLASS_CLAIM_HOLDER)
                        grace = 1; /* never 0 for a claim holder, as the drain sends */
                if (grace == 0 && pp->cls == POD_CLASS_DRIVER)
                        grace = -1; /* nor for a DRA driver pod: its own, as the drain sends */
                if (job->v->fmt != OUTPUT_JSON)
                        printf("evicting pod %s/%s (server dry run)\n", pp->pod->ns, pp->pod->name);
                r = kube_evict(job->v->app->client, pp->pod->ns, pp->pod->name, grace, true, on_dry_answer,
                               &job->calls[i], &job->calls[i].call);
                if (r < 0) {
                        job->calls[i].done = true;
                        job->calls[i].error = r;
                        continue;
                }
                job->v->in_flight++;
                job->calls_left++;
        }
        if (--job->calls_left == 0)
                dry_run_report(job);
}

/* kubectl drain --dry-run=server: the cordon patch the drain would send and an
 * eviction of every pod the plan evicts (its groups in order, the driver pods too
 * when the strategy evicts them), each with dryRun=All: the API server runs its
 * admission, budgets and validation, and persists nothing. Printed as kubectl
 * prints it ("evicting pod NS/NAME (server dry run)"). A 429 (a budget says not
 * now) or a namespace being deleted is reported, not retried (no state moves in a
 * dry run); any other error is exit 1. */
static void plan_server_dry_run(struct plan_job *job) {
        const struct node_rec *node = &job->sv.node;
        _cleanup_free_ char *ename = kube_query_escape(node->name), *path = NULL, *body = NULL;
        int r;

        if (!ename || asprintf(&path, "/api/v1/nodes/%s?dryRun=All", ename) < 0) {
                plan_job_done(job, log_oom());
                return;
        }
        r = drain_patch_cordon(node, timesrc_realtime(job->v->app->ts), &body);
        if (r < 0) {
                plan_job_done(
                        job, log_error_errno(r, "cannot build the cordon patch of node %s: %m", node->name));
                return;
        }
        job->cordon.job = job;
        r = kube_patch(job->v->app->client, path, KUBE_PATCH_MERGE, body, on_dry_answer, &job->cordon,
                       &job->cordon.call);
        if (r < 0) {
                plan_job_done(job,
                              log_error_errno(r, "cannot send the cordon patch of node %s: %m", node->name));
                return;
        }
        job->v->in_flight++;
}

static void plan_step_output(struct plan_job *job) {
        const struct drain_args *a = &job->args;
        const struct node_input *in = job->in;
        struct plan *p = &job->p;
        const struct oos_args *oos = &job->v->o.oos;
        int r = 0;

        if (a->dry_run_server && p->n_blockers == 0) {
                plan_server_dry_run(job);
                return;
        }
        if (a->dry_run_server)
                log_error("refused (nothing sent to the server): the drain would be refused by the "
                          "blockers below");
        if (job->v->fmt == OUTPUT_JSON) {
                _cleanup_(cJSON_Deletep) cJSON *j = plan_to_json(p, &job->po);

                if (j && in->dra_api)
                        cJSON_AddStringToObject(j, "draApi", in->dra_api);
                else if (j)
                        cJSON_AddNullToObject(j, "draApi");
                if (j) {
                        cJSON_AddBoolToObject(j, "draServed", !in->dra_off);
                        plan_json_readiness(j, in->node, oos);
                }
                if (j && job->seam_known) {
                        cJSON *o = cJSON_AddObjectToObject(j, "seamlessUpgrade");

                        if (o) {
                                cJSON_AddBoolToObject(o, "seamless", job->seam.seamless);
                                if (job->seam.daemonset[0])
                                        cJSON_AddStringToObject(o, "daemonset", job->seam.daemonset);
                                cJSON_AddStringToObject(o, "reason", job->seam.why);
                        }
                }
                if (j && job->list)
                        cJSON_AddItemToArray(job->list, TAKE_PTR(j));
                else if (!j)
                        r = log_oom();
                else
                        drain_verb_print_json(j);
        } else {
                if (in->dra_off)
                        printf("DRA: not served by this cluster (no resource.k8s.io v1, v1beta2 or "
                               "v1beta1): "
                               "drained as kubectl drain would, without claim logic\n");
                else if (in->dra_api)
                        printf("DRA API: %s\n", in->dra_api);
                r = plan_print_text(p, &job->po, stdout);
                plan_print_readiness(in->node, oos, stdout);
                if (job->seam_known && job->seam.seamless)
                        printf("Seamless upgrade of %s: yes, %s: to update it, no drain is needed "
                               "('maintain --driver' runs its command without evicting anything; "
                               "--force-drain drains first)\n",
                               a->profile.drivers[0], job->seam.why);
                else if (job->seam_known)
                        printf("Seamless upgrade of %s: no, %s; to update it across the cluster: drainer "
                               "rollout %s --driver %s\n",
                               a->profile.drivers[0], job->seam.why,
                               job->seam.daemonset[0] ? job->seam.daemonset : "NAMESPACE/DAEMONSET",
                               a->profile.drivers[0]);
        }
        plan_job_done(job, r < 0 ? r : (p->n_blockers > 0 ? -EPERM : 0));
}

/* One node's plan (or server dry run) for a node drain or one driver's. With list (-l,
 * -o json), its JSON goes there instead of stdout. */
static int plan_job_start(struct drain_verb *v, const char *node, const struct drain_args *args,
                          cJSON *list) {
        struct plan_job *job = calloc(1, sizeof(*job));
        int r;

        if (!job)
                return log_oom();
        job->v = v;
        job->node = node;
        job->args = *args;
        job->list = list;
        drain_profile_plan_options(&job->args.profile, &job->po);
        r = node_snapshot_start(v->app->client, v->app->ts, node, true, on_plan_snapshot, job, &job->snap);
        if (r < 0) {
                free(job);
                return log_error_errno(r, "Cannot start the API requests: %m");
        }
        v->in_flight++;
        v->job = job;
        return 0;
}

/* Stops what the job is waiting for (its callback then says the verb is stopping). */
void drain_verb_plan_cancel(struct plan_job *job) {
        if (job->disc)
                taint_rule_discovery_cancel(job->disc);
        if (job->key_read)
                driver_key_read_cancel(job->key_read);
        if (job->probe)
                health_probe_cancel(job->probe);
        if (job->seam_check)
                seamless_check_cancel(job->seam_check);
        if (job->cordon.call)
                kube_call_cancel(job->cordon.call);
        for (size_t i = 0; job->calls && i < job->p.n_pods; i++)
                if (job->calls[i].call)
                        kube_call_cancel(job->calls[i].call);
}

/* ---- plan: every node (NODE or -l's) times every --driver, one at a time ---- */

static size_t plan_n_nodes(const struct drain_verb *v) {
        return v->o.selector ? v->n_names : 1;
}

static size_t plan_n_drivers(const struct drain_verb *v) {
        return v->a.profile.n_drivers > 1 ? v->a.profile.n_drivers : 1;
}

static void plans_next(struct drain_verb *v);

/* A node's plans are all done: its exit code, and its entry in the list. */
static void plan_node_done(struct drain_verb *v) {
        cJSON *items = v->plan_doc ? cJSON_GetObjectItem(v->plan_doc, "items") : NULL;
        int c1 = drain_verb_exit_code(v->plan_node_worst);

        v->code = nodeset_worst_exit(v->code, c1);
        if (items && v->o.selector) {
                if ((size_t)cJSON_GetArraySize(items) == v->plan_items_before) {
                        cJSON *e = cJSON_CreateObject();

                        cJSON_AddStringToObject(e, "node", v->names[v->plan_node]);
                        cJSON_AddStringToObject(e, "result", "error");
                        cJSON_AddItemToArray(items, e);
                }
                cJSON_AddNumberToObject(cJSON_GetArrayItem(items, cJSON_GetArraySize(items) - 1), "exitCode",
                                        c1);
        }
        v->plan_node++;
        v->plan_driver = 0;
        v->plan_node_worst = 0;
}

static void plan_job_done(struct plan_job *job, int r) {
        struct drain_verb *v = job->v;

        v->job = NULL;
        drain_verb_plan_free(job);
        /* the worst of the drivers' plans: a failure over a refusal */
        if (plan_n_drivers(v) == 1)
                v->plan_node_worst = r;
        else if (r < 0 && (v->plan_node_worst == 0 || v->plan_node_worst == -EPERM))
                v->plan_node_worst = r;
        if (++v->plan_driver >= plan_n_drivers(v))
                plan_node_done(v);
        plans_next(v);
}

static void plans_next(struct drain_verb *v) {
        while (v->plan_node < plan_n_nodes(v)) {
                const char *node = v->o.selector ? v->names[v->plan_node] : v->node;
                cJSON *items = v->plan_doc ? cJSON_GetObjectItem(v->plan_doc, "items") : NULL;
                struct drain_args one;
                int r;

                if (v->plan_driver == 0) {
                        if (v->fmt != OUTPUT_JSON && v->plan_node > 0)
                                putchar('\n');
                        v->plan_items_before = items ? (size_t)cJSON_GetArraySize(items) : 0;
                } else if (v->fmt != OUTPUT_JSON)
                        putchar('\n');
                if (v->a.profile.n_drivers > 1)
                        drain_args_for_driver(&v->a, v->plan_driver, &one);
                else
                        one = v->a;
                r = plan_job_start(v, node, &one, items);
                if (r >= 0)
                        return;
                /* nothing started: this plan failed */
                if (plan_n_drivers(v) == 1 || v->plan_node_worst == 0 || v->plan_node_worst == -EPERM)
                        v->plan_node_worst = r;
                if (++v->plan_driver >= plan_n_drivers(v))
                        plan_node_done(v);
        }
        if (v->plan_doc) {
                cJSON_SetNumberValue(cJSON_GetObjectItem(v->plan_doc, "exitCode"), v->code);
                drain_verb_print_json(v->plan_doc);
        }
        drain_verb_quit(v, v->code);
}

void drain_verb_plans_start(struct drain_verb *v) {
        /* a list: the nodes of -l, or (NODE) the plans of several --driver */
        if ((v->o.selector || v->a.profile.n_drivers > 1) && v->fmt == OUTPUT_JSON)
                v->plan_doc = drain_verb_list_json(v, v->verb, 0, 0);
        v->code = EXIT_DONE;
        plans_next(v);
}
