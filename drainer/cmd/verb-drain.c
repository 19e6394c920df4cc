/* `drainer plan|drain|uncordon|maintain`: the four verbs as the composition root runs
 * them (verbs.h: parse, start, stop, free): option parsing shared by the four, the
 * node list of -l, and the display of the fleet runner's progress (ctl/fleet.c: a live
 * block on a terminal, timestamped lines otherwise, the audit trail on stdout, a JSON
 * summary with -o json) with the exit codes; the plans are verb-plan.c's. Never runs
 * the loop; owns nothing beyond one command's lifetime. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app.h"
#include "drainargs.h"
#include "drainer/base/argval.h"
#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "drainer/base/selector.h"
#include "drainer/base/text.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/drainrun.h"
#include "drainer/ctl/preparation.h"
#include "drainer/ctl/runsummary.h"
#include "drainer/dra/health.h"
#include "drainer/dra/nodeview.h"
#include "drainer/dra/seamless.h"
#include "drainer/dra/snapshot.h"
#include "drainer/dra/taintrule.h"
#include "drainer/drain/engine.h"
#include "drainer/drain/nodeset.h"
#include "drainer/drain/plan.h"
#include "drainer/drain/progress.h"
#include "drainer/drain/progressboard.h"
#include "drainer/kube/client.h"
#include "drainer/kube/kstatus.h"
#include "drainer/kube/kubeconfig.h"
#include "drainer/obs/metrics.h"
#include "drainverb.h"
#include "output.h"
#include "verbs.h"

/* --out-of-service and --out-of-service-after: drain, maintain and plan only (serve
 * does not take them: see on_drainlike_opt). */
enum {
        OPT_OUT_OF_SERVICE = 0x210, /* (0x200.. are the fleet's, below) */
        OPT_OUT_OF_SERVICE_AFTER,
};

/* The flags of plan, drain, uncordon and maintain beyond the shared ones (kept
 * here: serve has a --max-parallel of its own, across the cluster). */
enum {
        OPT_NODE_SELECTOR = 'l', /* a lower-case letter: -l too */
        OPT_FLEET_MAX_PARALLEL = 0x200,
        OPT_METRICS_IN_OUTPUT,
};

static const struct argval_field drainlike_fields[] = {
        ARGVAL_STRING(OPT_NODE_SELECTOR, struct drainlike_opts, selector),
        ARGVAL_SWITCH(OPT_METRICS_IN_OUTPUT, struct drainlike_opts, metrics),
        ARGVAL_SWITCH(OPT_OUT_OF_SERVICE, struct drainlike_opts, oos.on),
        {},
};

static int on_drainlike_opt(int opt, const char *arg, void *userdata) {
        struct drainlike_opts *o = userdata;

        if (argval_store(drainlike_fields, opt, arg, flag_on(arg), o))
                return 0;
        switch (opt) {
        case OPT_FLEET_MAX_PARALLEL:
                if (nodeset_parse_max_parallel(arg, &o->max_parallel) < 0)
                        return log_error_errno(EINVAL,
                                               "--max-parallel: invalid value \"%s\" (1-%d nodes at once)",
                                               arg, NODESET_MAX_PARALLEL);
                return 0;
        case OPT_OUT_OF_SERVICE_AFTER:
                if (timesrc_parse_duration(arg, &o->oos.after_usec) < 0 || o->oos.after_usec < USEC_PER_SEC)
                        return log_error_errno(EINVAL,
                                               "--out-of-service-after: invalid duration \"%s\" (at "
                                               "least 1s, e.g. 5m, 90s)",
                                               arg);
                o->oos.after_given = true;
                return 0;
        }
        return -EINVAL;
}

/* ---- what is in flight ---- */

static void maybe_stopped(struct drain_verb *v) {
        if (v->stopping && v->in_flight == 0 && !v->stopped) {
                v->stopped = true;
                app_stopped(v->app);
        }
}

/* A callback came: false if the verb is stopping (the callback then does nothing more). */
bool drain_verb_op_ended(struct drain_verb *v) {
        v->in_flight--;
        if (!v->stopping)
                return true;
        maybe_stopped(v);
        return false;
}

/* Whether a -o json document went to stdout: a failure that printed none prints
 * app_error_summary()'s when the verb quits. */
static bool json_printed;

void drain_verb_quit(struct drain_verb *v, int code) {
        if (v->fmt == OUTPUT_JSON && !json_printed && !v->app->quit) {
                _cleanup_(cJSON_Deletep) cJSON *j =
                        app_error_summary(v->verb, v->o.selector ? NULL : v->node, code, log_last_error());

                drain_verb_print_json(j);
        }
        app_quit(v->app, code);
}

void drain_verb_print_json(cJSON *j) {
        if (output_print(j, false) == 0) /* -o json, yaml or name */
                json_printed = true;
}

int drain_verb_exit_code(int r) {
        switch (r) {
        case -EPERM:
                return EXIT_REFUSED;
        case -EOPNOTSUPP: /* --device where no DeviceTaintRule is served */
                return EXIT_UNSUPPORTED;
        default:
                /* 0, 3 (--timeout), 7 (API server unreachable), 8 (no such node), 10
                 * (forbidden), else 1 */
                return app_exit_code(r);
        }
}

/* ---- the display of the runs ---- */

/* On a live terminal: progress_board_put()'s, else a plain write. */
static void put_line_above(struct drain_verb *v, FILE *out, const char *line) {
        progress_board_put(v->board, out, line);
}

static void draw(struct drain_verb *v, const struct fleet_node *n, const struct engine_progress *p) {
        if (v->fmt == OUTPUT_JSON)
                return;
        if (progress_board_update(v->board, n->index, n->node, p, n->run_started_usec) < 0)
                log_oom();
}

/* ---- a run's end: the log lines, the -o json summary, the exit code ---- */

static void add_client_figures(cJSON *j, struct app *app, bool metrics) {
        struct kube_client_stats cs;

        kube_client_get_stats(app->client, &cs);
        cJSON_AddNumberToObject(j, "apiRequests", (double)cs.requests);
        cJSON_AddNumberToObject(j, "watchEvents", (double)cs.watch_events);
        /* The figures `serve` exposes on /metrics, from the same registry. */
        if (metrics) {
                cJSON *m = metrics_default() ? metrics_to_json(metrics_default()) : NULL;

                if (m)
                        cJSON_AddItemToObject(j, "metrics", m);
        }
}

/* One run's summary; per_node: one of several (-l), without the figures of the
 * process (the API client is shared: they are the list's). */
static cJSON *summary_json(struct drain_verb *v, const struct fleet_node *n, const char *verb, int result,
                           bool per_node) {
        const struct run_display *d = &v->disp[n->index];
        cJSON *j = fleet_node_summary_json(
                n, &(const struct run_summary_options){
                           .verb = verb,
                           .result = result,
                           .error = app_exit_code_to_string(drain_verb_exit_code(result)),
                           .message = result == APP_ERR_API_SILENT ? d->api_message : NULL,
                           .rerun = d->rerun,
                           .now_usec = timesrc_now(v->app->ts),
                           .in_list = per_node,
                   });

        if (j && !per_node)
                add_client_figures(j, v->app, v->o.metrics);
        return j;
}

/* The command line as given, for verb, with n->needs_flag ("--driver-stop V") in
 * place of any --driver-stop; for "uncordon" out of maintain, without the flags that
 * are not uncordon's (--restore-on-failure, the drain's) and -- CMD. */
static char *rerun_command(const struct drain_verb *v, const struct fleet_node *n, const char *verb) {
        _cleanup_free_ char *flag = strdup(n->needs_flag);
        bool from_maintain = !streq(verb, v->argv[0]);
        char *buf = NULL, *value;
        size_t size = 0;
        FILE *f;

        if (!flag || !(value = strchr(flag, ' ')))
                return NULL;
        *value++ = 0;
        f = open_memstream(&buf, &size);
        if (!f)
                return NULL;
        fprintf(f, "drainer %s", verb);
        for (int i = 1; i < v->argc; i++) {
                const char *w = v->argv[i];

                if (streq(w, "--")) {
                        if (from_maintain)
                                break;
                        fprintf(f, " ");
                        text_put_shell_word(f, flag);
                        fputc(' ', f);
                        text_put_shell_word(f, value);
                        flag[0] = 0;
                }
                if (streq(w, "--driver-stop")) {
                        i++;
                        continue;
                }
                if (strncmp(w, "--driver-stop=", 14) == 0)
                        continue;
                if (from_maintain &&
                    (streq(w, "--out-of-service") || strncmp(w, "--out-of-service-after", 22) == 0)) {
                        /* maintain's --out-of-service is the drain's; uncordon takes none */
                        i += streq(w, "--out-of-service-after");
                        continue;
                }
                if (from_maintain) {
                        bool takes_value = false;

                        /* maintain's drain flags (--force, --grace-period 5, ...) are
                         * not uncordon's: it would refuse them */
                        if (drain_flag_applies(verb, w, &takes_value) == 0) {
                                i += takes_value;
                                continue;
                        }
                }
                fputc(' ', f);
                text_put_shell_word(f, w);
        }
        if (flag[0]) {
                fputc(' ', f);
                text_put_shell_word(f, flag);
                fputc(' ', f);
                text_put_shell_word(f, value);
        }
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

/* Logs how a run ended, and maps a refusal by configuration to exit 1 (-EEXIST). */
static int report_result(struct drain_verb *v, const struct fleet_node *n, const char *what, int r) {
        struct run_display *d = &v->disp[n->index];
        const struct plan *p = n->summary.plan;

        progress_board_commit(v->board);
        if (r == 0)
                log_info("%s", n->message ? n->message : what);
        else if (r == -EINTR && !n->total.changed && !n->has_phase)
                log_error("%s interrupted before it changed anything on node %s", what, n->node);
        else if (r == -EINTR)
                log_error("%s interrupted: the state is on node %s; run the same command again to resume",
                          what, n->node);
        else if (r == -EPERM && n->needs_flag) {
                free(d->rerun);
                d->rerun = rerun_command(v, n, what);
                log_error("%s: %s", what, strna(n->message));
                if (d->rerun)
                        log_error("if that is what the drain did, run: %s", d->rerun);
                return -EEXIST;
        } else if (r == -EPERM && streq(what, "drain") && p && p->n_blockers > 0) {
                /* (an uncordon refuses for other reasons: its message says which) */
                if (n->summary.changed)
                        log_error(
                                "%s: refused by a blocker in phase %s; nothing more was evicted and node %s "
                                "stays in that phase (fix it or add the flag named, then run again to "
                                "resume; or 'drainer uncordon %s'):",
                                what,
                                n->summary.has_phase ? drain_phase_to_string(n->summary.last_phase) : "?",
                                n->node, n->node);
                else
                        log_error("%s: refused by preflight; nothing was changed:", what);
                for (size_t i = 0; i < p->n_blockers; i++)
                        if (fleet_node_blocker_listed(n, &p->blockers[i]))
                                log_error("  %s", p->blockers[i].message);
        } else
                log_error("%s: %s", what, n->message ? n->message : strerror(-r));
        return r;
}

/* The goal the fleet runs now, as the lines and summaries name it. */
static const char *goal_verb(const struct fleet_node *n) {
        return n->goal == ENGINE_GOAL_UNCORDON ? "uncordon" : "drain";
}

/* Each run's summaries make a list: -l, several --driver, maintain of several. */
static bool runs_listed(const struct drain_verb *v) {
        return v->o.selector || v->n_runs > 1;
}

static void on_run_start(struct drain_fleet *f, const struct fleet_node *n, void *userdata) {
        struct drain_verb *v = userdata;

        progress_board_start(v->board, n->index);
        if (v->n_runs > 1 && n->profile->n_drivers == 1)
                log_info("%s of node %s, DRA driver %s: starting (%zu of %zu)", goal_verb(n), n->node,
                         n->profile->drivers[0], n->index + 1, v->n_runs);
        else if (v->n_runs > 1)
                log_info("%s of node %s: starting (%zu of %zu)", goal_verb(n), n->node, n->index + 1,
                         v->n_runs);
}

static void on_run_progress(struct drain_fleet *f, const struct fleet_node *n,
                            const struct engine_progress *p, void *userdata) {
        draw(userdata, n, p);
}

/* The audit trail on stdout (on a terminal above the live block): kubectl drain's
 * lines ("node/N cordoned"; for each pod "evicting pod NS/NAME" once the eviction is
 * accepted, "pod/NAME evicted" once it is gone, "deleting", "deleted" with
 * --disable-eviction; "node/N drained"), and one for each ResourceClaim released
 * from the node. */
static void on_run_trail(struct drain_fleet *f, const struct fleet_node *n, const struct engine_trail *t,
                         void *userdata) {
        struct drain_verb *v = userdata;
        _cleanup_free_ char *line = NULL;

        if (!v->trail)
                return;
        switch (t->kind) {
        case ENGINE_TRAIL_CORDONED:
                line = text_printf("node/%s cordoned\n", n->node);
                break;
        case ENGINE_TRAIL_EVICTING:
                line = text_printf("%s pod %s/%s\n", t->deleted ? "deleting" : "evicting", t->ns, t->name);
                break;
        case ENGINE_TRAIL_POD_GONE:
                line = text_printf("pod/%s %s\n", t->name, t->deleted ? "deleted" : "evicted");
                break;
        case ENGINE_TRAIL_CLAIM_RELEASED:
                line = text_printf("resourceclaim %s/%s released from node/%s\n", t->ns, t->name, n->node);
                break;
        default:
                return;
        }
        if (line)
                put_line_above(v, stdout, line);
        else
                log_oom();
}

/* A node drain that ended drained: the trail's last line (kubectl drain's). */
static void trail_drained(struct drain_verb *v, const struct fleet_node *n) {
        _cleanup_free_ char *line = NULL;

        if (!v->trail || n->result != 0 || n->goal != ENGINE_GOAL_DRAIN || n->profile->n_drivers > 0)
                return;
        line = text_printf("node/%s drained\n", n->node);
        if (line)
                put_line_above(v, stdout, line);
}

/* Interrupted before its turn: not started, nothing changed on it. */
static void report_not_started(struct drain_verb *v, const struct fleet_node *n) {
        struct run_display *d = &v->disp[n->index];

        log_error("%s of node %s: not started (interrupted)", goal_verb(n), n->node);
        d->code = v->signum ? EXIT_INTERRUPTED(v->signum) : EXIT_ERROR;
        if (v->fmt == OUTPUT_JSON) {
                cJSON_Delete(d->json);
                d->json = run_summary_new(true, n->node, goal_verb(n), "not-started");
                cJSON_AddBoolToObject(d->json, "changed", false);
                cJSON_AddNumberToObject(d->json, "exitCode", d->code);
        }
}

static void on_run_done(struct drain_fleet *f, const struct fleet_node *n, void *userdata) {
        struct drain_verb *v = userdata;
        struct run_display *d = &v->disp[n->index];
        const char *verb = goal_verb(n);
        int r;

        if (n->started)
                trail_drained(v, n);
        progress_board_end(v->board, n->index);
        if (!n->started) {
                report_not_started(v, n);
                v->stage_worst = nodeset_worst_exit(v->stage_worst, d->code);
                if (v->is_maintain && v->n_runs == 1)
                        v->maintain_r = -EINTR;
                return;
        }
        free(d->api_message);
        d->api_message = NULL;
        /* --timeout ran out while the API server never answered, or has answered only
         * failures for a while: the run waited for the API server, not for pods */
        if (n->result == -ETIMEDOUT && kube_client_silent(v->app->client, &d->api_message)) {
                /* not "a pod is slow, run again": exit 7, the cause named */
                progress_board_commit(v->board);
                log_error("%s: %s", verb, strna(d->api_message));
                r = APP_ERR_API_SILENT;
        } else
                r = report_result(v, n, verb, n->result);
        if (n->goal == ENGINE_GOAL_UNCORDON && r == -EPERM)
                r = -EEXIST; /* not a refusal by a blocker: exit 1 */
        d->code = r == -EINTR && v->signum ? EXIT_INTERRUPTED(v->signum) : drain_verb_exit_code(r);
        if (v->is_maintain && v->n_runs == 1)
                v->maintain_r = r;
        if (v->fmt == OUTPUT_JSON) {
                /* A refusal reads "refused" whatever its exit code (4 for a blocker, 1 else). */
                cJSON_Delete(d->json);
                d->json = summary_json(v, n, v->is_maintain && !runs_listed(v) ? v->verb : verb,
                                       r == -EEXIST && n->result == -EPERM ? -EPERM : r, runs_listed(v));
                if (runs_listed(v))
                        cJSON_AddNumberToObject(d->json, "exitCode", d->code);
        }
        v->stage_worst = nodeset_worst_exit(v->stage_worst, d->code);
        progress_board_redraw(v->board);
}

static void on_command_start(struct drain_fleet *f, char *const *argv, void *userdata) {
        struct drain_verb *v = userdata;

        v->stage_worst = EXIT_DONE; /* the restore's, next */
        log_info("running: %s", argv[0]);
}

static void on_command_done(struct drain_fleet *f, int status, int error, void *userdata) {
        struct drain_verb *v = userdata;

        v->command_status = status;
        if (error < 0)
                log_error("cannot run \"%s\": %s", v->cmd[0], uv_strerror(error));
        if (status != 0)
                log_error("command \"%s\" exited with status %d%s", v->cmd[0], status,
                          !v->a.profile.restore_on_failure
                                  ? (v->n_runs > 1 ? "; the drivers stay out of service (use "
                                                     "--restore-on-failure to restore them anyway)"
                                                   : "; the node stays drained (use "
                                                     "--restore-on-failure to restore it anyway)")
                          : v->n_runs > 1 ? "; restoring the drivers (--restore-on-failure)"
                                          : "; restoring the node (--restore-on-failure)");
        else
                log_info("command \"%s\" succeeded", v->cmd[0]);
}

/* Every run ended: the summaries, the exit code (a signal's, EXIT_INTERRUPTED, when one
 * ended the command before its work was over, whatever its runs said). */
static void on_fleet_finished(struct drain_fleet *f, void *userdata) {
        struct drain_verb *v = userdata;
        unsigned max_parallel = (v->o.max_parallel ? v->o.max_parallel : 1) * (unsigned)v->runs_per_node;
        int code = v->stage_worst;

        if (v->is_maintain && v->command_status > 0 && code == EXIT_DONE)
                code = EXIT_ERROR; /* restored after a failed command (or not restored at all) */
        if (v->signum && code != EXIT_DONE)
                code = EXIT_INTERRUPTED(v->signum);
        if (v->is_maintain && !runs_listed(v)) {
                /* one summary over the drain, the command and the restore */
                struct run_display *d = &v->disp[0];
                const struct fleet_node *n = drain_fleet_node(f, 0);
                int r = v->maintain_r;

                if (r == 0 && v->command_status > 0)
                        r = -ECHILD;
                code = v->signum && r != 0 ? EXIT_INTERRUPTED(v->signum) : drain_verb_exit_code(r);
                if (v->fmt == OUTPUT_JSON) {
                        if (r == -ECHILD || !d->json) {
                                cJSON_Delete(d->json);
                                d->json = summary_json(v, n, v->verb, r, false);
                        }
                        cJSON_AddNumberToObject(d->json, "exitCode", code);
                        drain_verb_print_json(d->json);
                }
        } else if (v->fmt == OUTPUT_JSON && !runs_listed(v)) {
                cJSON_AddNumberToObject(v->disp[0].json, "exitCode", code);
                drain_verb_print_json(v->disp[0].json);
        } else if (v->fmt == OUTPUT_JSON) {
                /* a List: the nodes of -l, or the drivers of several --driver */
                _cleanup_(cJSON_Deletep) cJSON *j =
                        run_summary_list_new(v->verb, v->o.selector, max_parallel, code);
                cJSON *items = cJSON_GetObjectItem(j, "items");

                for (size_t i = 0; i < v->n_runs; i++)
                        if (v->disp[i].json)
                                cJSON_AddItemToArray(items, TAKE_PTR(v->disp[i].json));
                add_client_figures(j, v->app, v->o.metrics);
                drain_verb_print_json(j);
        }
        drain_verb_quit(v, code);
}

/* SIGINT, SIGTERM: every node's run ends where it is (its state is on its Node, the
 * same command resumes it); no node not started yet is started. */
static void on_signal(struct app *a, int signum, void *userdata) {
        struct drain_verb *v = userdata;

        v->signum = v->signum ? v->signum : signum;
        drain_run_interrupt(v->run);
}

/* ---- drain, uncordon, maintain: the runs (ctl/drainrun.c), as the verb reports them ---- */

static void on_part_closed(void *userdata) {
        struct drain_verb *v = userdata;

        v->in_flight--;
        maybe_stopped(v);
}

static void on_run_command_done(struct drain_run *run, int status, int error, void *userdata) {
        struct drain_verb *v = userdata;
        int code = status == 0 ? EXIT_DONE : EXIT_ERROR;

        if (error < 0)
                log_error("cannot run \"%s\": %s", v->cmd[0], uv_strerror(error));
        if (status != 0)
                log_error("command \"%s\" exited with status %d", v->cmd[0], status);
        else
                log_info("command \"%s\" succeeded", v->cmd[0]);
        if (v->fmt == OUTPUT_JSON) {
                _cleanup_(cJSON_Deletep) cJSON *j =
                        run_summary_seamless(v->node, v->verb, status, v->seam.daemonset, v->seam.why, code);

                drain_verb_print_json(j);
        }
        drain_verb_quit(v, code);
}

static void on_run_seamless(struct drain_run *run, const struct seamless_answer *ans, void *userdata) {
        struct drain_verb *v = userdata;

        v->seam = *ans;
        if (!v->seam.seamless)
                log_info("DRA driver %s: no seamless upgrade (%s): draining its claims first",
                         v->a.profile.drivers[0], v->seam.why);
        else /* A driver that upgrades seamlessly needs no drain */
                log_info("DRA driver %s upgrades seamlessly (%s): running %s without draining anything "
                         "(--force-drain "
                         "drains first)",
                         v->a.profile.drivers[0], v->seam.why, v->cmd[0]);
}

/* The runs are set: signals, and the timestamps of plain lines. */
static void on_runs_set(struct drain_run *run, void *userdata) {
        struct drain_verb *v = userdata;

        app_signals_start(v->app, on_signal, v);
        if (!v->tty)
                log_set_timestamps(true);
}

static void on_run_failed(struct drain_run *run, enum drain_run_step step, int error, const char *message,
                          void *userdata) {
        struct drain_verb *v = userdata;

        if (v->app->quit)
                return; /* out of memory on the way: quit already */
        switch (step) {
        case DRAIN_RUN_KEY_REFUSED:
                drain_verb_quit(v, v->keys_worst);
                return;
        case DRAIN_RUN_KEYS:
        case DRAIN_RUN_SEAMLESS:
                if (message)
                        log_error_errno(error, "%s", message);
                else if (error == -ENOMEM)
                        log_oom();
                else
                        log_error_errno(error, "Cannot start the API requests: %m");
                break;
        case DRAIN_RUN_BUS:
                log_error_errno(error, "--driver-stop systemd: cannot connect to the system bus: %m");
                break;
        case DRAIN_RUN_COMMAND:
                log_oom();
                break;
        case DRAIN_RUN_FLEET_SETUP:
                log_error_errno(error, "Cannot set up the drain: %m");
                break;
        case DRAIN_RUN_FLEET_START:
                log_error_errno(error, "Cannot start watching the nodes: %m");
                break;
        }
        drain_verb_quit(v, EXIT_ERROR);
}

static void on_run_key(struct drain_run *run, size_t i, const struct fleet_run *fr, int error,
                       const char *key, const char *from, const char *why, void *userdata) {
        struct drain_verb *v = userdata;
        int code;

        if (v->app->quit)
                return;
        if (error >= 0) {
                log_info("DRA driver %s of node %s: stopped by label %s (the nodeSelector of %s)",
                         fr->profile->drivers[0], fr->node, key, from);
                return;
        }
        code = error == -EPERM ? EXIT_REFUSED : EXIT_ERROR;
        if (error == -ENOMEM)
                log_oom();
        else
                log_error("%s: refused, nothing was changed: %s", v->verb, strna(why));
        if (v->fmt == OUTPUT_JSON && v->keys_worst == EXIT_DONE) {
                _cleanup_(cJSON_Deletep) cJSON *j =
                        run_summary_refused(fr->node, v->verb, fr->profile->drivers[0], strna(why), code);

                drain_verb_print_json(j);
        }
        v->keys_worst = nodeset_worst_exit(v->keys_worst, code);
}

/* A run per node and driver (--driver: each its own state keys and stop); the drivers
 * of one node run together. */
static void runs_start(struct drain_verb *v) {
        static const struct drain_run_callbacks cb = {
                .on_key = on_run_key,
                .on_runs_set = on_runs_set,
                .on_seamless = on_run_seamless,
                .on_command_done = on_run_command_done,
                .on_failed = on_run_failed,
                .fleet = {
                        .on_node_start = on_run_start,
                        .on_progress = on_run_progress,
                        .on_trail = on_run_trail,
                        .on_node_done = on_run_done,
                        .on_command = on_command_start,
                        .on_command_done = on_command_done,
                        .on_finished = on_fleet_finished,
                },
        };
        char host[256] = "";
        int r;

        gethostname(host, sizeof(host) - 1);
        r = drain_run_new(v->app->client, v->app->transport, v->app->ts, &v->app->loop,
                          &(const struct drain_run_options){
                                  .goal = v->is_maintain               ? FLEET_GOAL_MAINTAIN
                                          : streq(v->verb, "uncordon") ? FLEET_GOAL_UNCORDON
                                                                       : FLEET_GOAL_DRAIN,
                                  .nodes = v->o.selector ? (const char *const *)v->names : &v->node,
                                  .n_nodes = v->o.selector ? v->n_names : 1,
                                  .profile = &v->a.profile,
                                  .key_from_daemonset = v->a.stop_from_daemonset,
                                  .max_parallel = v->o.max_parallel,
                                  .command = v->cmd,
                                  .share_informers = v->o.selector && !v->is_maintain,
                                  .linger_usec = FLEET_LINGER_USEC,
                                  .out_of_service = v->o.oos.on,
                                  .out_of_service_after_usec = v->o.oos.after_usec,
                                  .bound_unread = true,
                                  .instance = host,
                          },
                          &cb, v, &v->run);
        v->tty = output_live(STDERR_FILENO); /* --color, TERM=dumb */
        if (r >= 0) {
                v->in_flight++; /* until the run is closed */
                v->n_runs = drain_run_size(v->run);
                v->runs_per_node = drain_run_per_node(v->run);
                v->disp = calloc(v->n_runs, sizeof(*v->disp));
                r = progress_board_new(
                        &(const struct progress_board_options){
                                .term = stderr,
                                .live = v->tty,
                                .trail = stdout,
                                .trail_on_term = isatty(STDOUT_FILENO),
                                /* NO_COLOR, --color=never: the same block without colour */
                                .sgr = {
                                        .bold = output_sgr(STDERR_FILENO, "\033[1m"),
                                        .cyan = output_sgr(STDERR_FILENO, "\033[36m"),
                                        .yellow = output_sgr(STDERR_FILENO, "\033[33m"),
                                        .off = output_sgr(STDERR_FILENO, "\033[0m"),
                                },
                                .ts = v->app->ts,
                                .redraw_usec = 100 * USEC_PER_MSEC,
                        },
                        v->n_runs, &v->board);
        }
        if (r < 0 || !v->disp) {
                log_oom();
                drain_verb_quit(v, EXIT_ERROR);
                return;
        }
        v->trail = v->fmt != OUTPUT_JSON;
        v->stage_worst = EXIT_DONE;
        v->keys_worst = EXIT_DONE;
        r = drain_run_start(v->run);
        if (r < 0) {
                log_error_errno(r, "Cannot start the API requests: %m");
                drain_verb_quit(v, EXIT_ERROR);
        }
}

/* ---- the verbs ---- */

static void nodes_known(struct drain_verb *v);

static void on_prep_nodes(struct drain_preparation *p, int error, const char *message, char **names,
                          size_t n, void *userdata) {
        struct drain_verb *v = userdata;

        if (error < 0) {
                log_error_errno(error, "cannot list the nodes matching \"%s\": %s", v->o.selector,
                                message ? message : strerror(-error));
                drain_verb_quit(v, EXIT_ERROR);
                return;
        }
        v->names = names;
        v->n_names = n;
        nodes_known(v);
}

/* The nodes are known (NODE, or those -l matched): the plans or the runs. */
static void nodes_known(struct drain_verb *v) {
        if (v->o.selector && v->n_names == 0) {
                /* kubectl says "No resources found"; a drain of nothing is an error here:
                 * the selector is most likely not the one meant */
                log_error("No resources found: no node matches the label selector \"%s\" (nothing "
                          "was changed)",
                          v->o.selector);
                if (v->fmt == OUTPUT_JSON) {
                        _cleanup_(cJSON_Deletep) cJSON *j =
                                run_summary_list_new(v->verb, v->o.selector, 0, EXIT_ERROR);

                        cJSON_AddStringToObject(j, "message", "no node matches the label selector");
                        drain_verb_print_json(j);
                }
                drain_verb_quit(v, EXIT_ERROR);
                return;
        }
        if (v->o.selector) {
                char names[512];
                bool all = nodeset_join(v->names, v->n_names, names, sizeof(names));

                log_info("%s: %zu node%s match%s \"%s\": %s%s", v->verb, v->n_names,
                         v->n_names == 1 ? "" : "s", v->n_names == 1 ? "es" : "", v->o.selector, names,
                         all ? "" : " ...");
        }
        if (v->is_plan || v->a.dry_run)
                drain_verb_plans_start(v);
        else
                runs_start(v);
}

static int drainlike_parse(int argc, char **argv, struct global_flags *g, void *state) {
        /* uncordon takes neither --out-of-service flag: its options start after them */
        static const struct option drainlike_options[] = {
                { "out-of-service", no_argument, NULL, OPT_OUT_OF_SERVICE },
                { "out-of-service-after", required_argument, NULL, OPT_OUT_OF_SERVICE_AFTER },
                { "selector", required_argument, NULL, OPT_NODE_SELECTOR },
                { "max-parallel", required_argument, NULL, OPT_FLEET_MAX_PARALLEL },
                { "metrics-in-output", no_argument, NULL, OPT_METRICS_IN_OUTPUT },
                {},
        };
        struct drain_verb *v = state;
        bool takes_oos = !streq(argv[0], "uncordon");
        const char *skip[64];
        int r;

        v->verb = argv[0];
        v->argc = argc;
        v->argv = argv;
        v->is_plan = streq(v->verb, "plan");
        v->is_maintain = streq(v->verb, "maintain");
        v->o = (struct drainlike_opts){ .oos = { .after_usec = OUT_OF_SERVICE_AFTER_DEFAULT } };
        v->command_status = -1;
        /* --config FILE: the file serve reads (its own keys and the flags of other verbs
         * skipped), flags win. */
        drain_config_skip(v->verb, skip, ELEMENTSOF(skip));
        if (config_argv_build(argc, argv, skip, &v->c) < 0)
                return -EINVAL;
        v->c_ready = true;
        r = parse_drain_args(v->c.argc, v->c.argv, g, &v->a,
                             takes_oos ? drainlike_options : drainlike_options + 2, on_drainlike_opt, &v->o);
        v->a_ready = true;
        v->fmt = g->output; /* -o may come after the verb */
        if (r > 0 && v->o.oos.after_given && !v->o.oos.on) {
                log_error("--out-of-service-after: only with --out-of-service (never implied)");
                r = -EINVAL;
        } else if (r > 0 && v->o.oos.on && !argval_argv_has(argc, argv, "--out-of-service")) {
                /* The one path where claims are released without the kubelet: asked for on
                 * the command line of each run, never by a --config file. */
                log_error("--out-of-service must be given on the command line, not in --config");
                r = -EINVAL;
        }
        if (r <= 0)
                return r;
        /* What each verb takes, as its help says (decided as kubectl's verbs do: drain,
         * uncordon take -l; maintain runs one command for one node). */
        r = 0;
        if (v->o.selector && v->is_maintain)
                r = log_error_errno(EINVAL, "drainer maintain: runs CMD for one NODE; -l/--selector is for "
                                            "drain, uncordon and plan");
        else if (v->o.selector && v->a.profile.n_devices > 0)
                r = log_error_errno(EINVAL, "drainer %s: --device names devices of one NODE, not of -l",
                                    v->verb);
        else if (v->o.max_parallel && (v->is_plan || v->is_maintain || v->a.dry_run))
                r = log_error_errno(EINVAL, "drainer %s: --max-parallel is for drain and uncordon with -l",
                                    v->verb);
        else if (v->a.profile.force_drain && v->a.profile.n_drivers == 0)
                r = log_error_errno(EINVAL, "drainer maintain: --force-drain is for --driver (a node drain "
                                            "always drains)");
        else if (v->o.max_parallel && !v->o.selector)
                r = log_error_errno(EINVAL,
                                    "drainer %s: --max-parallel needs -l/--selector (the nodes to run "
                                    "at once)",
                                    v->verb);
        else if (v->o.metrics && (v->is_plan || v->a.dry_run))
                r = log_error_errno(EINVAL,
                                    "drainer %s: --metrics-in-output is for the summaries of drain, "
                                    "uncordon and maintain",
                                    v->verb);
        else if (v->is_maintain) {
                /* maintain NODE -- CMD [ARGS...]: getopt stops at "--", leaving NODE first. */
                if (v->c.argc - optind < 2)
                        r = log_error_errno(EINVAL, "drainer maintain: expected NODE -- CMD [ARGS...]; see "
                                                    "'drainer maintain --help'");
                else {
                        v->node = v->c.argv[optind];
                        v->cmd = &v->c.argv[optind + 1];
                }
        } else if (v->o.selector && v->c.argc - optind > 0)
                r = log_error_errno(EINVAL, "drainer %s: give NODE or -l/--selector, not both", v->verb);
        else if (!v->o.selector && v->c.argc - optind != 1)
                r = log_error_errno(EINVAL,
                                    "drainer %s: expected exactly one NODE argument (or -l SELECTOR); "
                                    "see 'drainer %s --help'",
                                    v->verb, v->verb);
        else if (!v->o.selector)
                v->node = v->c.argv[optind];
        if (r == 0 && v->o.selector) {
                /* validated before any request: bad usage is exit 2 with nothing sent */
                _cleanup_free_ char *path = NULL, *err = NULL;

                r = nodeset_list_path(v->o.selector, &path, &err);
                if (r == -ENOMEM)
                        r = log_oom();
                else if (r < 0)
                        log_error("-l/--selector: %s", strna(err));
        }
        return r < 0 ? r : 1;
}

static int drainlike_start(struct app *a, void *state) {

        static const struct preparation_callbacks cb = {
                .on_nodes = on_prep_nodes,
        };
        struct drain_verb *v = state;
        int r;

        v->app = a;
        r = drain_preparation_new(a->client, a->ts, &cb, v, &v->prep);
        if (r < 0)
                return log_oom();
        v->in_flight++; /* until the preparation is closed */
        if (!v->o.selector) {
                nodes_known(v);
                return 0;
        }
        /* The names of the Nodes matching -l SELECTOR (validated by parse), sorted. */
        r = drain_preparation_list_nodes(v->prep, v->o.selector);
        if (r == -ENOMEM)
                return log_oom();
        if (r < 0)
                return log_error_errno(r, "cannot list the nodes matching \"%s\": %m", v->o.selector);
        return 0;
}

/* After the work (or a failed start): what is still reading is cancelled, what is open
 * is closed; app_stopped() once the last of it is gone. */
static void drainlike_stop(struct app *a, void *state) {
        struct drain_verb *v = state;

        v->app = a;
        v->stopping = true;
        if (v->job)
                drain_verb_plan_cancel(v->job);
        app_signals_stop(a);
        /* last: their closed may come at once (nothing of them in flight) */
        if (v->run)
                drain_run_close(v->run, on_part_closed, v); /* (its in_flight since runs_start) */
        drain_preparation_close(TAKE_PTR(v->prep), on_part_closed, v);
        maybe_stopped(v);
}

static void drainlike_free(void *state) {
        struct drain_verb *v = state;

        if (v->job)
                drain_verb_plan_free(v->job);
        cJSON_Delete(v->plan_doc);
        drain_run_free(v->run);
        for (size_t i = 0; v->disp && i < v->n_runs; i++) {
                free(v->disp[i].rerun);
                free(v->disp[i].api_message);
                cJSON_Delete(v->disp[i].json);
        }
        free(v->disp);
        progress_board_free(v->board);
        nodeset_free(v->names, v->n_names);
        if (v->a_ready)
                drain_args_done(&v->a);
        if (v->c_ready)
                config_argv_done(&v->c);
}

#define DRAINLIKE_OPS                                                                     \
        {                                                                                 \
                .state_size = sizeof(struct drain_verb), .parse = drainlike_parse,        \
                .start = drainlike_start, .stop = drainlike_stop, .free = drainlike_free, \
        }

const struct verb_ops verb_plan_ops = DRAINLIKE_OPS;
const struct verb_ops verb_drain_ops = DRAINLIKE_OPS;
const struct verb_ops verb_uncordon_ops = DRAINLIKE_OPS;
const struct verb_ops verb_maintain_ops = DRAINLIKE_OPS;
