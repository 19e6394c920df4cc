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
#include "drainer/ctl/planner.h"
#include "drainer/ctl/runsummary.h"
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
#include "drainverb.h"
#include "verbs.h"

/* ---- plan: one node (and driver), read by the planner (ctl/planner.c) ---- */

static void plan_job_done(struct plan_job *job, int r);
static void plan_step_output(struct plan_job *job);

static void on_planner_closed(void *userdata) {
        struct drain_verb *v = userdata;

        (void)drain_verb_op_ended(v);
}

void drain_verb_plan_free(struct plan_job *job) {
        drain_verb_plan_cancel(job);
        free(job);
}

/* A planner's failure, as the verb logs it: the planner's message, or out of memory. */
static int plan_error(int error, const char *message) {
        return message ? log_error_errno(error, "%s", message) : log_oom();
}

static void on_planner_ready(struct planner *pl, int error, const char *message, void *userdata) {
        struct plan_job *job = userdata;

        if (error < 0) {
                plan_job_done(job, plan_error(error, message));
                return;
        }
        plan_step_output(job);
}

/* The server dry run's answers are in: printed as kubectl prints them. */
static void dry_run_report(struct plan_job *job) {
        _cleanup_(cJSON_Deletep) cJSON *j = job->v->fmt == OUTPUT_JSON ? cJSON_CreateObject() : NULL;
        size_t failed = planner_dry_run_report(planner_result(job->pl), j ? NULL : stdout, j);

        if (j && job->list)
                cJSON_AddItemToArray(job->list, TAKE_PTR(j));
        else if (j)
                drain_verb_print_json(j);
        plan_job_done(job, failed ? -EIO : 0);
}

static void on_dry_cordoned(struct planner *pl, int error, void *userdata) {
        struct plan_job *job = userdata;
        const struct planner_result *res = planner_result(pl);

        if (error < 0) {
                plan_job_done(job,
                              log_error_errno(error, "cordoning node %s (server dry run) failed: %s",
                                              res->node->name,
                                              res->cordon.message ? res->cordon.message : strerror(-error)));
                return;
        }
        if (job->v->fmt != OUTPUT_JSON)
                printf("node/%s cordoned (server dry run)\n", res->node->name);
}

static void on_dry_evicting(struct planner *pl, const struct pod_rec *pod, void *userdata) {
        struct plan_job *job = userdata;

        if (job->v->fmt != OUTPUT_JSON)
                printf("evicting pod %s/%s (server dry run)\n", pod->ns, pod->name);
}

static void on_dry_run_done(struct planner *pl, int error, void *userdata) {
        struct plan_job *job = userdata;

        if (error < 0) {
                plan_job_done(job, log_oom());
                return;
        }
        dry_run_report(job);
}

/* kubectl drain --dry-run=server (planner_dry_run), printed as kubectl prints it
 * ("evicting pod NS/NAME (server dry run)"); any error but a budget's 429 or a
 * namespace being deleted is exit 1. */
static void plan_server_dry_run(struct plan_job *job) {
        _cleanup_free_ char *m = NULL;
        int r = planner_dry_run(job->pl, &m);

        if (r < 0)
                plan_job_done(job, plan_error(r, m));
}

static void plan_step_output(struct plan_job *job) {
        const struct drain_args *a = &job->args;
        const struct planner_result *res = planner_result(job->pl);
        const struct node_input *in = res->in;
        const struct plan *p = &res->plan;
        const struct oos_args *oos = &job->v->o.oos;
        const struct plan_report report = {
                .plan = p,
                .plan_options = &res->po,
                .in = in,
                .out_of_service = oos->on,
                .out_of_service_after_usec = oos->after_usec,
                .seam = res->seam_known ? &res->seam : NULL,
                .preview = &res->preview,
        };
        int r = 0;

        if (a->dry_run_server && p->n_blockers == 0) {
                plan_server_dry_run(job);
                return;
        }
        if (a->dry_run_server)
                log_error("refused (nothing sent to the server): the drain would be refused by the "
                          "blockers below");
        if (job->v->fmt == OUTPUT_JSON) {
                _cleanup_(cJSON_Deletep) cJSON *j = plan_report_to_json(&report);

                if (j && job->list)
                        cJSON_AddItemToArray(job->list, TAKE_PTR(j));
                else if (!j)
                        r = log_oom();
                else
                        drain_verb_print_json(j);
        } else
                r = plan_report_print(&report, stdout);
        plan_job_done(job, r < 0 ? r : (p->n_blockers > 0 ? -EPERM : 0));
}

/* One node's plan (or server dry run) for a node drain or one driver's. With list (-l,
 * -o json), its JSON goes there instead of stdout. */
static int plan_job_start(struct drain_verb *v, const char *node, const struct drain_args *args,
                          cJSON *list) {
        static const struct planner_callbacks cb = {
                .on_ready = on_planner_ready,
                .on_cordoned = on_dry_cordoned,
                .on_evicting = on_dry_evicting,
                .on_dry_run_done = on_dry_run_done,
        };
        struct plan_job *job = calloc(1, sizeof(*job));
        int r;

        if (!job)
                return log_oom();
        job->v = v;
        job->node = node;
        job->args = *args;
        job->list = list;
        r = planner_new(v->app->client, v->app->transport, v->app->ts,
                        &(const struct planner_options){
                                .node = node,
                                .profile = &job->args.profile,
                                .key_from_daemonset = job->args.stop_from_daemonset,
                        },
                        &cb, job, &job->pl);
        if (r < 0) {
                free(job);
                return log_error_errno(r, "Cannot start the API requests: %m");
        }
        v->in_flight++; /* until the planner is closed */
        v->job = job;
        return 0;
}

/* Closes the job's planner (no callback of it runs after this; the verb's stop waits
 * for its reads to end). */
void drain_verb_plan_cancel(struct plan_job *job) {
        if (job->pl)
                planner_close(TAKE_PTR(job->pl), on_planner_closed, job->v);
}

/* ---- plan: every node (NODE or -l's) times every --driver, one at a time ---- */

static size_t plan_n_nodes(const struct drain_verb *v) {
        return v->o.selector ? v->n_names : 1;
}

static size_t plan_n_drivers(const struct drain_verb *v) {
        return v->a.profile.n_drivers > 1 ? v->a.profile.n_drivers : 1;
}

static void plans_next(struct drain_verb *v);

/* One driver's plan of the node ended with r: the node's worst of them (nodeset.h);
 * after its last, the node's exit code and its entry in the list. */
static void plan_driver_done(struct drain_verb *v, int r) {
        cJSON *items = v->plan_doc ? cJSON_GetObjectItem(v->plan_doc, "items") : NULL;
        int c1;

        v->plan_node_worst = nodeset_worst_result(v->plan_node_worst, r);
        if (++v->plan_driver < plan_n_drivers(v))
                return;
        c1 = drain_verb_exit_code(v->plan_node_worst);
        v->code = nodeset_worst_exit(v->code, c1);
        if (items && v->o.selector) {
                if ((size_t)cJSON_GetArraySize(items) == v->plan_items_before) /* its plan failed */
                        cJSON_AddItemToArray(items,
                                             run_summary_new(true, v->names[v->plan_node], NULL, "error"));
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
        plan_driver_done(v, r);
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
                plan_driver_done(v, r); /* nothing started: this plan failed */
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
                v->plan_doc = run_summary_list_new(v->verb, v->o.selector, 0, 0);
        v->code = EXIT_DONE;
        plans_next(v);
}
