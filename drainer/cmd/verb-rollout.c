/* drainer rollout NAMESPACE/DAEMONSET --driver NAME, the verb: its flags, the drain
 * profile it gives the rollout runner (ctl/rollout.c: the driver-scoped drain and
 * restore, driver-stop none), the drain slots and the Events it shares with it, the
 * progress and summary (text or JSON) and the exit code. SIGINT/SIGTERM stop the
 * runner: the Nodes keep their state, the next run resumes. Runs no loop itself. */
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
#include "drainer/ctl/rollout-runner.h"
#include "drainer/ctl/rolloutsession.h"
#include "drainer/ctl/runsummary.h"
#include "drainer/dra/driverstop.h"
#include "drainer/dra/health.h"
#include "output.h"
#include "verbs.h"

#define DEFAULT_LEASE_NS     "drainer-system"
#define DEFAULT_TIMEOUT_USEC (10 * 60 * USEC_PER_SEC)

enum {
        OPT_RO_DRIVER = 0x200,
        OPT_RO_MAX_PARALLEL,
        OPT_RO_TIMEOUT,
        OPT_RO_LEASE_NS,
        OPT_RO_DRIVER_HEALTH,
        OPT_RO_DRIVER_SELECTOR,
        OPT_RO_IDENTITY,
};

struct rollout_run {
        /* parsed */
        char *ds_arg; /* owned: "NAMESPACE\0DAEMONSET" */
        const char *ds_ns, *ds_name, *driver, *lease_ns, *identity;
        unsigned max_parallel;
        uint64_t timeout_usec;
        struct drain_args a; /* the profile: --driver, --driver-stop none, selectors, health */
        enum output_format fmt;
        char host[256];
        /* running */
        struct app *app;                 /* borrowed */
        struct rollout_session *session; /* owned: the runner, its slots and Events */
        struct driver_rollout *rollout;  /* the session's runner */
        bool said;
        int interrupted; /* the signal that interrupted it: exit EXIT_INTERRUPTED */
        uint64_t t0;
};

/* rollout's flags stored as given */
static const struct argval_field rollout_fields[] = {
        ARGVAL_STRING(OPT_RO_LEASE_NS, struct rollout_run, lease_ns),
        ARGVAL_STRING(OPT_RO_DRIVER_HEALTH, struct rollout_run, a.health),
        ARGVAL_STRING(OPT_RO_IDENTITY, struct rollout_run, identity),
        {},
};

static int on_rollout_opt(int opt, const char *arg, void *userdata) {
        struct rollout_run *run = userdata;
        char msg[256];
        long long v;
        int r;

        if (argval_store(rollout_fields, opt, arg, flag_on(arg), run))
                return 0;
        switch (opt) {
        case OPT_RO_DRIVER:
                if (run->driver)
                        return log_error_errno(EINVAL,
                                               "--driver: given twice (a rollout updates one driver)");
                if (drain_scope_check(arg, msg, sizeof(msg)) < 0)
                        return log_error_errno(EINVAL, "--driver: %s", msg);
                run->driver = arg;
                return 0;
        case OPT_RO_MAX_PARALLEL:
                if (argval_int(arg, 1, 100, &v) < 0)
                        return log_error_errno(EINVAL,
                                               "--max-parallel: \"%s\" is not a number from 1 to 100", arg);
                run->max_parallel = (unsigned)v;
                return 0;
        case OPT_RO_TIMEOUT:
                r = timesrc_parse_duration(arg, &run->timeout_usec);
                if (r < 0 || run->timeout_usec == 0)
                        return log_error_errno(
                                EINVAL, "--timeout: \"%s\" is not a positive duration (90s, 5m)", arg);
                return 0;
        case OPT_RO_DRIVER_SELECTOR:
                return driver_selector_add(run->a.driver_selectors, &run->a.n_driver_selectors, arg);
        default:
                return -EINVAL;
        }
}

static int rollout_parse(int argc, char **argv, struct global_flags *g, void *state) {
        static const struct option opts[] = {
                { "driver", required_argument, NULL, OPT_RO_DRIVER },
                { "max-parallel", required_argument, NULL, OPT_RO_MAX_PARALLEL },
                { "timeout", required_argument, NULL, OPT_RO_TIMEOUT },
                { "lease-namespace", required_argument, NULL, OPT_RO_LEASE_NS },
                { "driver-health", required_argument, NULL, OPT_RO_DRIVER_HEALTH },
                { "driver-selector", required_argument, NULL, OPT_RO_DRIVER_SELECTOR },
                { "identity", required_argument, NULL, OPT_RO_IDENTITY },
                {},
        };
        struct rollout_run *run = state;
        const char *env_ns = getenv("POD_NAMESPACE");
        char *slash;
        int r;

        run->max_parallel = 1;
        run->timeout_usec = DEFAULT_TIMEOUT_USEC;
        run->a = (struct drain_args){
                .verb = "rollout", .profile.grace = -1, .profile.stop = &driver_stop_none, .stop_given = true
        };
        r = verb_parse(argc, argv, g, opts, on_rollout_opt, run);
        if (r <= 0)
                return r;
        if (optind + 1 != argc) {
                log_error("rollout: give exactly one NAMESPACE/DAEMONSET (the DRA driver's DaemonSet)");
                return -EINVAL;
        }
        run->ds_arg = strdup(argv[optind]);
        if (!run->ds_arg)
                return log_oom();
        slash = strchr(run->ds_arg, '/');
        if (!slash || slash == run->ds_arg || !slash[1] || strchr(slash + 1, '/')) {
                log_error("rollout: \"%s\" is not NAMESPACE/DAEMONSET", argv[optind]);
                return -EINVAL;
        }
        *slash = 0;
        run->ds_ns = run->ds_arg;
        run->ds_name = slash + 1;
        if (!run->driver) {
                log_error("rollout: --driver NAME is required (the driver's name as in its ResourceSlices, "
                          "e.g. gpu.example.com)");
                return -EINVAL;
        }
        if (!run->lease_ns)
                run->lease_ns = env_ns && *env_ns ? env_ns : DEFAULT_LEASE_NS;
        gethostname(run->host, sizeof(run->host) - 1);
        if (!run->identity)
                run->identity = run->host;
        run->a.profile.drivers[0] = run->driver;
        run->a.profile.n_drivers = 1;
        if (run->a.health) {
                _cleanup_free_ char *err = NULL;

                r = health_target_parse(run->a.health, &run->a.profile.health_target, &err);
                if (r < 0) {
                        log_error("--driver-health: %s",
                                  err ? err : "not PORT[/SERVICE] or unix:PATH[#SERVICE]");
                        return -EINVAL;
                }
                run->a.profile.has_health = true;
        }
        r = driver_selectors_parse(run->a.driver_selectors, run->a.n_driver_selectors,
                                   &run->a.profile.drv_sels, &run->a.profile.n_drv_sels);
        if (r < 0)
                return -EINVAL;
        run->fmt = g->output;
        return 1;
}

/* ---- the outcome ---- */

/* The worst node decides: an error, else a timeout, else a refusal. */
static int rollout_exit_code(const struct rollout_run *run) {
        enum driver_rollout_result worst = driver_rollout_worst(run->rollout);

        return run->interrupted                  ? EXIT_INTERRUPTED(run->interrupted)
               : worst == DRIVER_ROLLOUT_TIMEOUT ? EXIT_TIMEOUT
               : worst == DRIVER_ROLLOUT_REFUSED ? EXIT_REFUSED
               : worst == DRIVER_ROLLOUT_FAILED  ? EXIT_ERROR
                                                 : EXIT_DONE;
}

static void print_summary(const struct rollout_run *run, int code) {
        size_t n = driver_rollout_n_nodes(run->rollout), updated, skipped;
        const char *target = strna(driver_rollout_revision(run->rollout));
        double seconds = (double)(timesrc_now(run->app->ts) - run->t0) / USEC_PER_SEC;

        driver_rollout_count(run->rollout, &updated, &skipped);
        if (run->fmt == OUTPUT_JSON) {
                char ds[512];
                _cleanup_(cJSON_Deletep) cJSON *j = NULL;

                snprintf(ds, sizeof(ds), "%s/%s", run->ds_ns, run->ds_name);
                j = driver_rollout_summary_json(run->rollout, ds, run->driver, run->max_parallel, seconds,
                                                run->interrupted != 0, code);
                if (!j)
                        return (void)log_oom();
                (void)output_print(j, false); /* -o json, yaml or name */
        } else
                printf("rollout of %s/%s to revision %s: %zu updated, %zu already on it, %zu not done%s "
                       "(%.1f s)\n",
                       run->ds_ns, run->ds_name, target, updated, skipped, n - updated - skipped,
                       run->interrupted ? ", interrupted: run it again to resume" : "", seconds);
        fflush(stdout);
}

/* The work is over: the summary (once the nodes are known) and the exit code. */
static void rollout_over(struct rollout_run *run) {
        int code;

        if (run->said)
                return;
        run->said = true;
        if (!run->rollout) { /* a signal after a start that failed: said already */
                app_quit(run->app, EXIT_ERROR);
                return;
        }
        code = rollout_exit_code(run);
        if (driver_rollout_revision(run->rollout))
                print_summary(run, code);
        app_quit(run->app, code);
}

/* ---- the runner's callbacks ---- */

static void on_planned(struct driver_rollout *rollout, const char *revision, size_t n_nodes,
                       void *userdata) {
        struct rollout_run *run = userdata;

        if (run->fmt == OUTPUT_TEXT)
                log_info("rollout of DaemonSet %s/%s (driver %s) to revision %s: %zu %s, %u at a time",
                         run->ds_ns, run->ds_name, run->driver, revision, n_nodes,
                         text_plural(n_nodes, "node", "nodes"), run->max_parallel);
}

static void on_progress(struct driver_rollout *rollout, const char *node, const char *message,
                        void *userdata) {
        struct rollout_run *run = userdata;

        if (run->fmt == OUTPUT_TEXT)
                log_info("%s", message);
}

static void on_node_done(struct driver_rollout *rollout, const char *node, int error, const char *message,
                         void *userdata) {
        if (error == 0)
                log_info("%s", strna(message));
        else
                log_error("%s", strna(message));
}

static void on_finished(struct driver_rollout *rollout, int error, const char *message, void *userdata) {
        struct rollout_run *run = userdata;

        if (error < 0) {
                /* it could not start: said, no summary */
                log_error("%s", strna(message));
                run->said = true;
                app_quit(run->app, error == -EPERM ? EXIT_REFUSED : EXIT_ERROR);
                return;
        }
        rollout_over(run);
}

static void on_signal(struct app *a, int signum, void *userdata) {
        struct rollout_run *run = userdata;

        run->interrupted = run->interrupted ? run->interrupted : signum;
        rollout_over(run);
}

static int rollout_start(struct app *a, void *state) {
        static const struct driver_rollout_callbacks cb = {
                .on_planned = on_planned,
                .on_progress = on_progress,
                .on_node_done = on_node_done,
                .on_finished = on_finished,
        };
        struct rollout_run *run = state;
        enum rollout_session_part failed;
        int r;

        run->app = a;
        run->t0 = timesrc_now(a->ts);
        if (!isatty(STDERR_FILENO))
                log_set_timestamps(true);
        app_signals_start(a, on_signal, run);
        r = rollout_session_new(a->client, a->ts,
                                &(const struct rollout_session_options){
                                        .rollout = {
                                                .ds_namespace = run->ds_ns,
                                                .ds_name = run->ds_name,
                                                .driver = run->driver,
                                                .max_parallel = run->max_parallel,
                                                .timeout_usec = run->timeout_usec,
                                                .profile = &run->a.profile,
                                                .transport = a->transport,
                                                .lease_namespace = run->lease_ns,
                                        },
                                        .instance = run->host,
                                        .identity = run->identity,
                                },
                                &cb, run, &run->session, &failed);
        if (r < 0 && failed == ROLLOUT_SESSION_ANNOUNCER)
                return log_oom();
        if (r < 0 && failed == ROLLOUT_SESSION_SLOTS)
                return log_error_errno(r, "Cannot set up drain slots: %m");
        if (r < 0)
                return log_error_errno(r, "Cannot set up the rollout: %m");
        run->rollout = rollout_session_runner(run->session);
        r = rollout_session_start(run->session);
        if (r < 0)
                return log_error_errno(r, "Cannot start the rollout: %m");
        return 0;
}

/* ---- the wind-down: the session's (the runner, the slots, the Events in flight),
 * then the signals ---- */

static void on_session_stopped(void *userdata) {
        struct rollout_run *run = userdata;

        app_signals_stop(run->app);
        app_stopped(run->app);
}

static void rollout_stop(struct app *a, void *state) {
        struct rollout_run *run = state;

        if (!run->session) { /* start failed before anything was made */
                app_signals_stop(a);
                app_stopped(a);
                return;
        }
        rollout_session_stop(run->session, on_session_stopped, run);
}

static void rollout_free(void *state) {
        struct rollout_run *run = state;

        rollout_session_free(run->session);
        drain_profile_done(&run->a.profile);
        free(run->ds_arg);
}
const struct verb_ops verb_rollout_ops = {
        .state_size = sizeof(struct rollout_run),
        .parse = rollout_parse,
        .start = rollout_start,
        .stop = rollout_stop,
        .free = rollout_free,
};
