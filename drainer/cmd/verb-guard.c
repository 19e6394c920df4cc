/* `drainer guard`: the preStop hook of a DRA driver's DaemonSet, the verb: its
 * flags, where its lines go, its signals and its exit codes; the deciding (hold the
 * driver's termination while the node is being drained and a claim or another
 * claim-holding pod is left on it) is the guard controller's (ctl/guard.c). Run as
 * an exec hook it does that once and exits; with --listen it is a native sidecar of
 * the driver's pod, and the guard server (ctl/guardserver.c) answers each GET of
 * /guard (the driver container's httpGet preStop hook) when the run would have
 * exited. Watches, never polls, and writes nothing. */
#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "drainargs.h"
#include "drainer/base/argval.h"
#include "drainer/base/log.h"
#include "drainer/base/selector.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/guard.h"
#include "drainer/ctl/guardserver.h"
#include "drainer/obs/httpd.h"
#include "verbs.h"

struct guard_opts {
        const char *node;
        const char *listen;     /* --listen HOST:PORT, or NULL: one run (the exec form) */
        int64_t grace_seconds;  /* --grace-period-seconds, -1 if not given */
        uint64_t deadline_usec; /* --deadline, 0 if not given */
        const char *driver_selectors[MAX_DRIVER_SELECTORS + 1];
        size_t n_driver_selectors;
        const char *driver_namespaces[MAX_DRIVER_NAMESPACES + 1];
        size_t n_driver_namespaces;
};

/* The verb's state (verbs.h): the flags, what the controller is given, and either
 * the one run (the exec form) or the server. */
struct guard_verb {
        struct guard_opts opts;
        struct selector **sels; /* owned */
        size_t n_sels;
        char *own_pod; /* owned: "$POD_NAMESPACE/$POD_NAME", or NULL */
        struct guard_config cfg;
        struct app *app;             /* borrowed */
        struct guard_run *run;       /* owned: the exec form's one run */
        struct guard_server *server; /* owned: the server form's */
        bool server_stopping;
        unsigned closing; /* what stop closes and has not called back yet */
};

static int on_guard_opt(int opt, const char *arg, void *userdata) {
        struct guard_opts *o = userdata;
        long long v;

        switch (opt) {
        case 'N':
                o->node = arg;
                return 0;
        case 'G':
                if (argval_int(arg, 1, 86400, &v) < 0)
                        return log_error_errno(
                                EINVAL, "--grace-period-seconds: invalid value \"%s\" (1..86400)", arg);
                o->grace_seconds = v;
                return 0;
        case 'T':
                if (timesrc_parse_duration(arg, &o->deadline_usec) < 0 || o->deadline_usec == 0)
                        return log_error_errno(EINVAL, "--deadline: invalid duration \"%s\" (e.g. 90s, 5m)",
                                               arg);
                return 0;
        case 'L': {
                _cleanup_free_ char *host = NULL;
                uint16_t port;

                if (httpd_parse_address(arg, &host, &port) < 0)
                        return log_error_errno(EINVAL,
                                               "--listen: invalid address \"%s\" (HOST:PORT, [V6]:PORT or "
                                               ":PORT; port 0: any free one)",
                                               arg);
                o->listen = arg;
                return 0;
        }
        case 'D':
                return driver_selector_add(o->driver_selectors, &o->n_driver_selectors, arg);
        case 'S':
                return driver_namespace_add(o->driver_namespaces, &o->n_driver_namespaces, arg);
        }
        return -EINVAL;
}

static int exit_code_of(enum guard_outcome outcome) {
        switch (outcome) {
        case GUARD_RELEASED:
                return EXIT_DONE;
        case GUARD_TIMED_OUT:
                return EXIT_TIMEOUT;
        default:
                return EXIT_ERROR;
        }
}

/* Every line of the controller goes to the log (a hook's output ends up in a log
 * file or an Event). */
static void on_run_note(struct guard_run *g, enum log_level level, const char *line, void *userdata) {
        log_full_errno(level, 0, "%s", line);
}

/* ---- the exec form: one run, its exit code ---- */

static void on_exec_done(struct guard_run *g, enum guard_outcome outcome, const char *result,
                         void *userdata) {
        struct guard_verb *v = userdata;

        app_quit(v->app, exit_code_of(outcome));
}

static const struct guard_handlers exec_handlers = {
        .on_note = on_run_note,
        .on_done = on_exec_done,
};

static void on_exec_signal(struct app *a, int signum, void *userdata) {
        struct guard_verb *v = userdata;
        _cleanup_free_ char *line = NULL;
        const char *counts;

        if (!v->run || guard_run_finished(v->run))
                return;
        counts = guard_run_held_counts(v->run);
        if (asprintf(&line, "interrupted by signal %d after %.1f s%s%s", signum,
                     guard_run_elapsed_seconds(v->run), counts ? ": still held: " : "",
                     strempty(counts)) < 0)
                line = NULL;
        guard_run_fail(v->run, line ? line : "interrupted by a signal");
}

static int exec_start(struct guard_verb *v) {
        int r;

        r = guard_run_new(v->app->client, v->app->ts, &v->cfg, &exec_handlers, v, &v->run);
        if (r < 0)
                return log_oom();
        /* A failure to start ends the run: on_exec_done says so. */
        (void)guard_run_start(v->run, NULL);
        return 0;
}

/* ---- the server form (--listen): one run per GET /guard (ctl/guardserver.c) ---- */

static void on_server_note(struct guard_server *s, enum log_level level, int error, const char *line,
                           void *userdata) {
        log_full_errno(level, error, "%s", line);
}

static void on_server_stopped(struct guard_server *s, void *userdata) {
        struct guard_verb *v = userdata;

        app_quit(v->app, EXIT_DONE);
}

/* SIGTERM (the kubelet stops a native sidecar after the pod's other containers):
 * every request still waiting is answered 503, then the server stops, exit 0. */
static void on_server_signal(struct app *a, int signum, void *userdata) {
        struct guard_verb *v = userdata;
        char why[32];
        unsigned n;

        if (v->server_stopping)
                return;
        v->server_stopping = true;
        n = guard_server_pending(v->server);
        log_info("stopping on signal %d (%u request%s waiting)", signum, n, n == 1 ? "" : "s");
        snprintf(why, sizeof(why), "signal %d", signum);
        guard_server_stop(v->server, why);
}

static int server_start(struct guard_verb *v) {
        static const struct guard_server_handlers h = {
                .on_note = on_server_note,
                .on_stopped = on_server_stopped,
        };
        struct app *a = v->app;
        int r;

        r = guard_server_new(&a->loop, a->client, a->ts, &v->cfg, v->opts.listen, &h, v, &v->server);
        if (r == -ENOMEM)
                return log_oom();
        if (r < 0)
                /* app_done() lets the handles of the failed start close */
                return log_error_errno(r, "Cannot listen on %s: %m", v->opts.listen);
        log_info("guarding the DRA driver on node \"%s\": GET %s on %s (port %u) holds until its claims are "
                 "released while the node is being drained, answers at once otherwise",
                 v->cfg.node, GUARD_SERVER_PATH, v->opts.listen, guard_server_port(v->server));
        return 0;
}

/* ---- the verb ---- */

static int guard_parse(int argc, char **argv, struct global_flags *gf, void *state) {
        static const struct option extra[] = {
                { "node", required_argument, NULL, 'N' },
                { "grace-period-seconds", required_argument, NULL, 'G' },
                { "deadline", required_argument, NULL, 'T' },
                { "driver-selector", required_argument, NULL, 'D' },
                { "driver-namespace", required_argument, NULL, 'S' },
                { "listen", required_argument, NULL, 'L' },
                {},
        };
        struct guard_verb *v = state;
        struct guard_opts *o = &v->opts;
        const char *pod_ns = getenv("POD_NAMESPACE"), *pod_name = getenv("POD_NAME");
        int r;

        o->grace_seconds = -1;
        r = verb_parse(argc, argv, gf, extra, on_guard_opt, o);
        if (r <= 0)
                return r;
        if (argc - optind > 0) {
                log_error("drainer guard: unexpected argument \"%s\"; the node is --node NAME or $NODE_NAME",
                          argv[optind]);
                return -EINVAL;
        }
        if (o->deadline_usec && o->grace_seconds >= 0) {
                log_error("drainer guard: --deadline and --grace-period-seconds exclude each other");
                return -EINVAL;
        }
        if (!o->node)
                o->node = getenv("NODE_NAME");
        if (!o->node || !*o->node) {
                log_error(
                        "drainer guard: say which node: --node NAME or $NODE_NAME (fieldRef spec.nodeName)");
                return -EINVAL;
        }
        /* Checked before any request is made; the runs borrow them. */
        r = driver_selectors_parse(o->driver_selectors, o->n_driver_selectors, &v->sels, &v->n_sels);
        if (r < 0)
                return r;
        if (pod_name && *pod_name && pod_ns && *pod_ns &&
            asprintf(&v->own_pod, "%s/%s", pod_ns, pod_name) < 0)
                v->own_pod = NULL;
        v->cfg = (struct guard_config){
                .node = o->node,
                .deadline_usec = o->deadline_usec,
                .grace_seconds = o->grace_seconds,
                .own_pod = v->own_pod,
                .driver_selectors = (const struct selector *const *)v->sels,
                .n_driver_selectors = v->n_sels,
                .driver_namespaces = o->driver_namespaces,
                .n_driver_namespaces = o->n_driver_namespaces,
        };
        /* A hook's output ends up in a log file or an Event: always timestamped lines. */
        log_set_timestamps(true);
        return 1;
}

static int guard_start(struct app *a, void *state) {
        struct guard_verb *v = state;
        int r;

        v->app = a;
        r = v->opts.listen ? server_start(v) : exec_start(v);
        if (r < 0)
                return r;
        app_signals_start(a, v->opts.listen ? on_server_signal : on_exec_signal, v);
        return 0;
}

static void guard_closed_one(struct guard_verb *v) {
        assert(v->closing > 0);
        if (--v->closing == 0)
                app_stopped(v->app);
}

static void on_exec_run_closed(void *userdata) {
        struct guard_verb *v = userdata;

        v->run = guard_run_free(v->run);
        guard_closed_one(v);
}

/* After app_quit: the exec form's run (its cancelled list/watch calls finish), the
 * signal handles. The server quits only once it has closed everything itself; a
 * failed start leaves its endpoint to app_done(). The signals go back to the default. */
static void guard_stop(struct app *a, void *state) {
        struct guard_verb *v = state;

        v->closing = 1; /* this call's own, so that no close completes the stop early */
        if (v->run) {
                v->closing++;
                guard_run_stop(v->run, on_exec_run_closed, v);
        }
        app_signals_stop(a);
        guard_closed_one(v);
}

static void guard_free(void *state) {
        struct guard_verb *v = state;

        guard_server_free(v->server);
        guard_run_free(v->run);
        selectors_free(v->sels, v->n_sels);
        free(v->own_pod);
}

const struct verb_ops verb_guard_ops = {
        .state_size = sizeof(struct guard_verb),
        .parse = guard_parse,
        .start = guard_start,
        .stop = guard_stop,
        .free = guard_free,
};
