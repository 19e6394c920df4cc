/* `drainer serve`: the daemon's outside face. Its flags, the metrics HTTP endpoint,
 * sd_notify status and watchdog, signals, the logind shutdown inhibitor
 * (--on-shutdown) and the exit code; the work itself (requests on Nodes -> engine
 * goals under slots, retries, refusals) is the drain manager's (ctl/manager.c),
 * whose callbacks this file turns into log lines and STATUS= lines. An idle daemon
 * holds one watch and sends nothing else. */
#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app.h"
#include "drainargs.h"
#include "drainer/base/argval.h"
#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "drainer/base/mwindow.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/devicehealth.h"
#include "drainer/ctl/machinehook.h"
#include "drainer/ctl/manager.h"
#include "drainer/ctl/shutdown.h"
#include "drainer/drain/state.h"
#include "drainer/kube/client.h"
#include "drainer/kube/leader.h"
#include "drainer/kube/objects.h"
#include "drainer/obs/httpd.h"
#include "drainer/sys/notify.h"
#include "drainer/sys/sysbus.h"
#include "verbs.h"

enum {
        OPT_NODE = 0x200,
        OPT_ALL_NODES,
        OPT_MAX_PARALLEL,
        OPT_LEASE_NS,
        OPT_ON_SHUTDOWN,
        OPT_IDENTITY,
        OPT_METRICS_ADDR,
        OPT_LEADER_ELECT,
        OPT_LE_LEASE_DURATION,
        OPT_LE_RENEW_DEADLINE,
        OPT_LE_RETRY_PERIOD,
        OPT_LE_NAMESPACE,
        OPT_LE_NAME,
        OPT_CLUSTER_API,
        OPT_WINDOW,
        OPT_UNHEALTHY_DEVICE,
        OPT_DEVICES_PER_NODE,
};

struct serve_opts {
        const char *node;
        bool all_nodes;
        unsigned max_parallel;
        unsigned max_parallel_percent; /* --max-parallel P%: 1-100; 0: a count */
        struct mwindows *window;       /* owned: --maintenance-window; NULL: any time */
        const char *lease_ns;
        bool on_shutdown;
        const char *identity;
        const char *metrics_addr; /* NULL: HTTPD_DEFAULT_ADDRESS; "": no HTTP endpoint */
        /* --leader-elect (with --all-nodes): kube-controller-manager's flags */
        bool leader_elect;
        uint64_t le_lease_usec, le_renew_usec, le_retry_usec; /* 0: the defaults */
        const char *le_ns;                                    /* NULL: --lease-namespace */
        const char *le_name;                                  /* NULL: drainer-leader */
        bool cluster_api;          /* --cluster-api: own the Machines' pre-drain hook */
        const char *device_health; /* --on-unhealthy-device: devicehealth.h's action, or NULL */
        unsigned devices_per_node; /* --unhealthy-devices-per-node; 0: 1 */
};

/* The verb's state (verbs.h): what parse read, and what start set going. */
struct serve_run {
        struct serve_opts o;
        struct drain_args args;
        struct config_argv config;
        bool config_ready;
        char host[256];
        struct app *app;                   /* borrowed, from start on */
        struct drain_manager *manager;     /* owned */
        struct notifier *notifier;         /* owned; NULL without systemd */
        struct sysbus *bus;                /* owned; NULL without a system bus */
        struct httpd *httpd;               /* /metrics, /healthz, /readyz; NULL when disabled */
        struct shutdown_drain *shutdown;   /* owned: --on-shutdown */
        struct leader *leader;             /* owned: --leader-elect (with a client of its own) */
        char leader_identity[320];         /* --identity and a random suffix */
        bool leading_started;              /* the manager was started as leader */
        struct machine_hook *machine_hook; /* owned: --cluster-api */
        bool hook_stopped, hook_awaited;   /* its on_stopped came / the stop waits for it */
        bool stopping;
        unsigned closing; /* handles and modules whose close has not called back yet */
};

static void on_part_closed(void *userdata);

/* ---- --on-shutdown (ctl/shutdown.c) ---- */

static void on_shutdown_note(struct shutdown_drain *s, enum log_level level, int error, const char *line,
                             void *userdata) {
        log_full_errno(level, error, "%s", line);
}

/* ---- what the manager tells ---- */

static void on_manager_node(struct drain_manager *m, const struct node_rec *n, void *userdata) {
        struct serve_run *run = userdata;

        if (run->shutdown)
                shutdown_drain_node_changed(run->shutdown, n);
        if (run->machine_hook)
                machine_hook_node_changed(run->machine_hook, n);
}

/* ---- --cluster-api (ctl/machinehook.c) ---- */

static void on_hook_note(struct machine_hook *h, enum log_level level, int error, const char *line,
                         void *userdata) {
        log_full_errno(level, error, "cluster-api: %s", line);
}

static void on_hook_failed(struct machine_hook *h, int error, const char *message, void *userdata) {
        struct serve_run *run = userdata;

        log_error_errno(error, "--cluster-api: %s", message);
        app_quit(run->app, EXIT_ERROR);
}

static void on_hook_stopped(struct machine_hook *h, void *userdata) {
        struct serve_run *run = userdata;

        run->hook_stopped = true;
        if (!run->hook_awaited)
                return; /* the manager's stop frees it */
        machine_hook_free(run->machine_hook);
        run->machine_hook = NULL;
        on_part_closed(run);
}

static int start_machine_hook(struct serve_run *run) {
        int r;

        if (!run->machine_hook)
                return 0;
        r = machine_hook_start(run->machine_hook);
        if (r < 0)
                return log_error_errno(r, "--cluster-api: cannot start watching Machines: %m");
        log_info("cluster-api: owning the pre-drain hook " MACHINE_HOOK_ANNOTATION
                 " of Machines being deleted");
        return 0;
}

static void on_manager_event(struct drain_manager *m, const struct drain_manager_event *ev, void *userdata) {
        struct serve_run *run = userdata;
        _cleanup_(drain_manager_text_done) struct drain_manager_text t = {};

        if (ev->kind == DRAIN_MANAGER_READY && run->notifier)
                notifier_ready(run->notifier);
        if (run->machine_hook && ev->goal == ENGINE_GOAL_DRAIN && !ev->device &&
            ev->kind == DRAIN_MANAGER_DONE)
                machine_hook_drain_done(run->machine_hook, ev->node);
        else if (run->machine_hook && ev->goal == ENGINE_GOAL_DRAIN && !ev->device &&
                 (ev->kind == DRAIN_MANAGER_REFUSED || ev->kind == DRAIN_MANAGER_FAILED))
                machine_hook_drain_blocked(run->machine_hook, ev->node, ev->message);
        if (drain_manager_describe(drain_manager_options(m), ev, &t) < 0)
                return (void)log_oom();
        if (ev->kind == DRAIN_MANAGER_PHASE)
                log_set_field("PHASE", drain_phase_to_string(ev->phase));
        if (t.line)
                log_full_errno(t.level, 0, "%s", t.line);
        if (t.status && run->notifier)
                notifier_status(run->notifier, "%s", t.status);
}

/* ---- --leader-elect ---- */

/* The Lease is ours: the manager starts (its first list resumes every drain from the
 * Nodes' annotations, whatever the previous leader left). */
static void on_leader_started(struct leader *l, void *userdata) {
        struct serve_run *run = userdata;
        int r;

        log_info("leading: this replica (%s) holds the Lease %s/%s; watching every Node",
                 run->leader_identity, run->o.le_ns, run->o.le_name);
        if (run->notifier)
                notifier_status(run->notifier, "leading: watching all nodes");
        run->leading_started = true;
        r = drain_manager_start(run->manager);
        if (r < 0) {
                log_error_errno(r, "Cannot start watching nodes: %m");
                app_quit(run->app, EXIT_ERROR);
                return;
        }
        if (start_machine_hook(run) < 0)
                app_quit(run->app, EXIT_ERROR);
}

/* The tenure is over: the client already withholds every write (the renew deadline
 * passed, or another replica holds the Lease). The process ends; restarted, it is a
 * standby again. */
static void on_leader_lost(struct leader *l, int error, void *userdata) {
        struct serve_run *run = userdata;

        log_error("lost the leader Lease %s/%s (%s): stopping; the replica that holds it resumes every "
                  "drain from the Nodes",
                  run->o.le_ns, run->o.le_name,
                  error == -EBUSY ? "another replica holds it" : "not renewed before the renew deadline");
        app_quit(run->app, EXIT_ERROR);
}

static void on_leader_error(struct leader *l, int error, const char *message, void *userdata) {
        struct serve_run *run = userdata;

        log_error("leader election: the Lease %s/%s: %s", run->o.le_ns, run->o.le_name,
                  message ? message : strerror(-error));
}

static void on_leader_closed(struct leader *l, void *userdata) {
        struct serve_run *run = userdata;

        run->leader = NULL;
        leader_free(l);
        on_part_closed(run);
}

/* ---- stopping ---- */

static void on_part_closed(void *userdata) {
        struct serve_run *run = userdata;

        assert(run->closing > 0);
        if (--run->closing == 0)
                app_stopped(run->app);
}

/* The bus may still report to the shutdown drain while it closes (a lock being
 * taken is cancelled): the drain goes after it. */
static void on_bus_closed(void *userdata) {
        struct serve_run *run = userdata;

        run->shutdown = shutdown_drain_free(run->shutdown);
        on_part_closed(run);
}

/* The manager has ended everything of its own: what is left is this file's. */
static void on_manager_stopped(struct drain_manager *m, void *userdata) {
        struct serve_run *run = userdata;

        run->closing++; /* this function's own: app_stopped comes once, after the last */
        drain_manager_free(run->manager);
        run->manager = NULL;
        if (run->machine_hook) {
                if (run->hook_stopped) {
                        machine_hook_free(run->machine_hook);
                        run->machine_hook = NULL;
                } else {
                        run->closing++;
                        run->hook_awaited = true; /* its on_stopped frees it */
                }
        }
        app_signals_stop(run->app);
        if (run->notifier) {
                run->closing++;
                notifier_close(run->notifier, on_part_closed, run);
                run->notifier = NULL;
        }
        if (run->bus) {
                run->closing++;
                sysbus_close(run->bus, on_bus_closed, run);
                run->bus = NULL;
        } else
                run->shutdown = shutdown_drain_free(run->shutdown);
        if (run->httpd) {
                run->closing++;
                httpd_close(run->httpd, on_part_closed, run);
                run->httpd = NULL;
        }
        /* Last: the manager's final writes went out while this replica still led; now the
         * Lease is given back (when still inside the renew deadline) for a standby. */
        if (run->leader) {
                run->closing++;
                leader_close(run->leader, on_leader_closed, run);
        }
        on_part_closed(run);
}

static void on_serve_signal(struct app *a, int signum, void *userdata) {
        log_info("%s: stopping (drains in progress resume from the Nodes' annotations)",
                 signum == SIGTERM ? "SIGTERM" : "SIGINT");
        app_quit(a, EXIT_DONE);
}

/* serve's flags stored as given */
static const struct argval_field serve_fields[] = {
        ARGVAL_STRING(OPT_NODE, struct serve_opts, node),
        ARGVAL_SWITCH(OPT_ALL_NODES, struct serve_opts, all_nodes),
        ARGVAL_STRING(OPT_LEASE_NS, struct serve_opts, lease_ns),
        ARGVAL_SWITCH(OPT_ON_SHUTDOWN, struct serve_opts, on_shutdown),
        ARGVAL_STRING(OPT_IDENTITY, struct serve_opts, identity),
        ARGVAL_SWITCH(OPT_LEADER_ELECT, struct serve_opts, leader_elect),
        ARGVAL_STRING(OPT_LE_NAMESPACE, struct serve_opts, le_ns),
        ARGVAL_STRING(OPT_LE_NAME, struct serve_opts, le_name),
        ARGVAL_SWITCH(OPT_CLUSTER_API, struct serve_opts, cluster_api),
        ARGVAL_STRING(OPT_UNHEALTHY_DEVICE, struct serve_opts, device_health),
        {},
};

static int on_serve_opt(int opt, const char *arg, void *userdata) {
        struct serve_opts *o = userdata;
        long long v;

        if (argval_store(serve_fields, opt, arg, flag_on(arg), o))
                return 0;
        switch (opt) {
        case OPT_MAX_PARALLEL:
                if (argval_percent(arg, &v)) {
                        if (v < 1 || v > 100)
                                return log_error_errno(
                                        EINVAL,
                                        "--max-parallel: invalid percentage \"%s\" (1%%-100%% "
                                        "of the selected nodes)",
                                        arg);
                        o->max_parallel_percent = (unsigned)v;
                        o->max_parallel = 0;
                        return 0;
                }
                if (argval_int(arg, 0, 1000, &v) < 0)
                        return log_error_errno(EINVAL,
                                               "--max-parallel: invalid value \"%s\" (0-1000, 0: no limit; "
                                               "or a percentage of the selected nodes, e.g. 10%%)",
                                               arg);
                o->max_parallel = (unsigned)v;
                o->max_parallel_percent = 0;
                return 0;
        case OPT_DEVICES_PER_NODE:
                if (argval_int(arg, 1, DRAIN_MAX_DEVICES, &v) < 0)
                        return log_error_errno(EINVAL,
                                               "--unhealthy-devices-per-node: invalid value \"%s\" (1-%d)",
                                               arg, DRAIN_MAX_DEVICES);
                o->devices_per_node = (unsigned)v;
                return 0;
        case OPT_WINDOW: {
                _cleanup_free_ char *err = NULL;
                int r = mwindows_add(&o->window, arg, NULL, &err);

                if (r == -ENOMEM)
                        return log_oom();
                if (r < 0)
                        return log_error_errno(EINVAL, "--maintenance-window: %s", strna(err));
                return 0;
        }
        case OPT_LE_LEASE_DURATION:
        case OPT_LE_RENEW_DEADLINE:
        case OPT_LE_RETRY_PERIOD: {
                uint64_t *d = opt == OPT_LE_LEASE_DURATION   ? &o->le_lease_usec
                              : opt == OPT_LE_RENEW_DEADLINE ? &o->le_renew_usec
                                                             : &o->le_retry_usec;

                if (timesrc_parse_duration(arg, d) < 0 || *d < 100 * USEC_PER_MSEC ||
                    *d > 3600 * USEC_PER_SEC)
                        return log_error_errno(
                                EINVAL, "--leader-elect-%s: invalid duration \"%s\" (100ms to 1h, e.g. 15s)",
                                opt == OPT_LE_LEASE_DURATION   ? "lease-duration"
                                : opt == OPT_LE_RENEW_DEADLINE ? "renew-deadline"
                                                               : "retry-period",
                                arg);
                return 0;
        }
        case OPT_METRICS_ADDR: {
                _cleanup_free_ char *host = NULL;
                uint16_t port;

                if (*arg && httpd_parse_address(arg, &host, &port) < 0)
                        return log_error_errno(
                                EINVAL,
                                "--metrics-addr: invalid value \"%s\" (HOST:PORT, [IPV6]:PORT, "
                                ":PORT for every address, or \"\" for none)",
                                arg);
                o->metrics_addr = arg;
                return 0;
        }
        }
        return -EINVAL;
}

/* Their keys in a --config file are skipped by the drain verbs (drain_config_skip), so
 * that one file configures serve and `drainer uncordon` alike. */
const struct option serve_options[] = {
        { "node", required_argument, NULL, OPT_NODE },
        { "all-nodes", no_argument, NULL, OPT_ALL_NODES },
        { "max-parallel", required_argument, NULL, OPT_MAX_PARALLEL },
        { "maintenance-window", required_argument, NULL, OPT_WINDOW },
        { "lease-namespace", required_argument, NULL, OPT_LEASE_NS },
        { "on-shutdown", no_argument, NULL, OPT_ON_SHUTDOWN },
        { "identity", required_argument, NULL, OPT_IDENTITY },
        { "metrics-addr", required_argument, NULL, OPT_METRICS_ADDR },
        { "leader-elect", no_argument, NULL, OPT_LEADER_ELECT },
        { "leader-elect-lease-duration", required_argument, NULL, OPT_LE_LEASE_DURATION },
        { "leader-elect-renew-deadline", required_argument, NULL, OPT_LE_RENEW_DEADLINE },
        { "leader-elect-retry-period", required_argument, NULL, OPT_LE_RETRY_PERIOD },
        { "leader-elect-resource-namespace", required_argument, NULL, OPT_LE_NAMESPACE },
        { "leader-elect-resource-name", required_argument, NULL, OPT_LE_NAME },
        { "cluster-api", no_argument, NULL, OPT_CLUSTER_API },
        { "on-unhealthy-device", required_argument, NULL, OPT_UNHEALTHY_DEVICE },
        { "unhealthy-devices-per-node", required_argument, NULL, OPT_DEVICES_PER_NODE },
        {},
};

/* /readyz: not while shutting down; a standby is (it is what takes over); else the
 * manager's readiness (its watch synced, the API server answering: 503 until then,
 * the informer retries by itself). */
static bool serve_ready(void *userdata, char *reason, size_t size) {
        struct serve_run *run = userdata;

        if (run->stopping || run->app->quit) {
                snprintf(reason, size, "shutting down");
                return false;
        }
        if (run->leader && !run->leading_started)
                return true;
        if (!run->manager) {
                snprintf(reason, size, "the node watch has not synced yet");
                return false;
        }
        return drain_manager_ready(run->manager, reason, size);
}

/* The HTTP endpoint. A taken default address is a warning (serve still works);
 * an address given with --metrics-addr must work. */
static int start_httpd(struct serve_run *run) {
        const char *addr = run->o.metrics_addr ? run->o.metrics_addr : HTTPD_DEFAULT_ADDRESS;
        struct httpd_options ho = {
                .address = addr, .ts = run->app->ts, .ready = serve_ready, .userdata = run
        };
        int r;

        if (!*addr)
                return 0;
        r = httpd_new(&run->app->loop, &ho, &run->httpd);
        if (r < 0 && !run->o.metrics_addr) {
                log_warning_errno(
                        r,
                        "Cannot serve /metrics on %s (the default --metrics-addr): %m; going on without "
                        "it",
                        addr);
                return 0;
        }
        if (r < 0)
                return log_error_errno(r, "--metrics-addr %s: cannot listen: %m", addr);
        log_info("serving /metrics, /healthz and /readyz on http://%s", addr);
        return 0;
}

/* ---- the verb ---- */

static int serve_parse(int argc, char **argv, struct global_flags *g, void *state) {
        struct serve_run *run = state;
        struct serve_opts *o = &run->o;
        const char *skip[64];
        int vargc, r;
        char **vargv;

        /* At most one node of the cluster out of service at a time unless --max-parallel
         * says otherwise (kured's default): `kubectl annotate nodes --all
         * drainer.io/request=drain` must not empty the cluster at once. */
        o->max_parallel = 1;
        /* the file's keys of flags serve does not take (--dry-run, --restore-on-failure,
         * ...) are other verbs' */
        drain_config_skip("serve", skip, ELEMENTSOF(skip));
        if (config_argv_build(argc, argv, skip, &run->config) < 0)
                return -EINVAL;
        run->config_ready = true;
        vargc = run->config.argc;
        vargv = run->config.argv;

        r = parse_drain_args(vargc, vargv, g, &run->args, serve_options, on_serve_opt, o);
        if (r <= 0)
                return r < 0 ? -EINVAL : 0;
        if (optind != vargc)
                return log_error_errno(
                        EINVAL, "drainer serve: unexpected argument \"%s\"; see 'drainer serve --help'",
                        vargv[optind]);
        if (o->all_nodes && o->node)
                return log_error_errno(EINVAL, "drainer serve: --node and --all-nodes exclude each other");
        if (!o->node && !o->all_nodes)
                o->node = getenv("NODE_NAME");
        if (!o->node && !o->all_nodes)
                return log_error_errno(
                        EINVAL, "drainer serve: say which node: --node NAME, $NODE_NAME, or --all-nodes");
        /* Cluster mode: one client drains the fleet; its rate adapts to the API server
         * unless --kube-api-qps says a number (DESIGN.md "Load on the API server"). */
        if (o->all_nodes && g->qps_mode == QPS_DEFAULT)
                g->qps_mode = QPS_AUTO;
        if (o->on_shutdown && o->all_nodes)
                return log_error_errno(EINVAL,
                                       "drainer serve: --on-shutdown needs --node (the node this host is)");
        if (o->cluster_api && !o->all_nodes)
                return log_error_errno(EINVAL, "drainer serve: --cluster-api needs --all-nodes (a Machine's "
                                               "node may be any node of the cluster)");
        if (o->device_health && device_health_action_from_string(o->device_health) < 0)
                return log_error_errno(EINVAL,
                                       "drainer serve: --on-unhealthy-device: invalid value \"%s\" "
                                       "(report, drain-device, or off)",
                                       o->device_health);
        if (o->devices_per_node && !streq_ptr(o->device_health, "drain-device"))
                return log_error_errno(EINVAL, "drainer serve: --unhealthy-devices-per-node needs "
                                               "--on-unhealthy-device=drain-device");
        if (!o->lease_ns)
                o->lease_ns = getenv("POD_NAMESPACE") ? getenv("POD_NAMESPACE") : "drainer-system";
        gethostname(run->host, sizeof(run->host) - 1);
        if (!o->identity)
                o->identity = run->host;
        if (o->leader_elect) {
                const char *msg;

                if (!o->all_nodes)
                        return log_error_errno(EINVAL, "drainer serve: --leader-elect needs --all-nodes "
                                                       "(one leader among replicas of the cluster mode)");
                if (!o->le_ns)
                        o->le_ns = o->lease_ns;
                if (!o->le_name)
                        o->le_name = "drainer-leader";
                leader_identity_unique(o->identity, run->leader_identity, sizeof(run->leader_identity));
                if (leader_options_check(
                            &(const struct leader_options){
                                    .ns = o->le_ns,
                                    .name = o->le_name,
                                    .identity = run->leader_identity,
                                    .lease_duration_usec = o->le_lease_usec,
                                    .renew_deadline_usec = o->le_renew_usec,
                                    .retry_period_usec = o->le_retry_usec,
                            },
                            &msg) < 0)
                        return log_error_errno(EINVAL, "drainer serve: --leader-elect: %s", msg);
        } else if (o->le_lease_usec || o->le_renew_usec || o->le_retry_usec || o->le_ns || o->le_name)
                return log_error_errno(EINVAL,
                                       "drainer serve: the --leader-elect-* flags need --leader-elect");
        log_set_journal_auto();
        if (o->node)
                log_set_field("NODE", o->node);
        return 1;
}

static int serve_start(struct app *a, void *state) {
        static const struct drain_manager_callbacks cb = {
                .on_event = on_manager_event,
                .on_node = on_manager_node,
                .on_stopped = on_manager_stopped,
        };
        struct serve_run *run = state;
        int r;

        run->app = a;
        r = start_httpd(run);
        if (r < 0)
                return r;
        /* The system bus: for --on-shutdown, --driver-stop systemd:UNIT, and undoing a drain
         * recorded with it. Without one (a container) only --on-shutdown and systemd fail. */
        r = sysbus_open(&a->loop, &run->bus);
        if (r < 0) {
                run->bus = NULL;
                if (run->o.on_shutdown || run->args.profile.stop->needs_units)
                        return log_error_errno(r, "Cannot connect to the system bus: %m");
        }
        r = drain_manager_new(a->client, a->transport, a->ts,
                              &(const struct drain_manager_options){
                                      .node = run->o.all_nodes ? NULL : run->o.node,
                                      .profile = &run->args.profile,
                                      .units = sysbus_units(run->bus),
                                      .max_parallel = run->o.max_parallel,
                                      .max_parallel_percent = run->o.max_parallel_percent,
                                      .window = run->o.window,
                                      .lease_namespace = run->o.lease_ns,
                                      .identity = run->o.identity,
                                      .device_health = device_health_action_from_string(
                                              run->o.device_health ? run->o.device_health : "off"),
                                      .device_drains_per_node = run->o.devices_per_node,
                              },
                              &cb, run, &run->manager);
        if (r < 0)
                return log_error_errno(r, "Cannot set up the node watch and drain slots: %m");
        if (run->o.cluster_api) {
                static const struct machine_hook_handlers hh = {
                        .on_note = on_hook_note,
                        .on_failed = on_hook_failed,
                        .on_stopped = on_hook_stopped,
                };

                r = machine_hook_new(a->client, a->ts,
                                     &(const struct machine_hook_options){ .identity = run->o.identity },
                                     &machine_hook_manager_ops, run->manager, &hh, run, &run->machine_hook);
                if (r < 0)
                        return log_error_errno(r, "--cluster-api: cannot set up the Machine watch: %m");
        }
        r = notifier_new(&a->loop, &run->notifier);
        if (r >= 0)
                r = notifier_start(run->notifier);
        if (r < 0)
                log_warning_errno(r, "systemd notification setup failed: %m, ignoring");
        if (run->o.on_shutdown) {
                static const struct shutdown_handlers sh = { .on_note = on_shutdown_note };
                char boot_id[64];

                shutdown_read_boot_id(boot_id, sizeof(boot_id));
                if (shutdown_drain_new(a->ts, run->o.node, boot_id, &shutdown_sysbus_ops, run->bus,
                                       run->manager, &sh, run, &run->shutdown) < 0)
                        return log_oom();
                r = shutdown_drain_start(run->shutdown);
                if (r < 0)
                        return log_error_errno(
                                r, "--on-shutdown: cannot take a logind shutdown inhibitor lock: %m");
        }
        if (run->o.leader_elect) {
                /* A standby watches nothing but the Lease; the manager starts once this
                 * replica leads, and from then every write of the client passes the gate
                 * only until the leader's renew deadline. */
                static const struct leader_callbacks lcb = {
                        .started = on_leader_started,
                        .lost = on_leader_lost,
                        .error = on_leader_error,
                };

                /* The Lease's requests go through a client of their own over the same
                 * connection: a wave of drains queued in the main client's token bucket must
                 * not hold a renewal back past the renew deadline. */
                r = leader_new_own_client(a->transport, a->ts, a->cfg, a->creds,
                                          &(const struct kube_client_options){
                                                  .impersonate_user = a->flags.as_user,
                                                  .impersonate_groups = a->flags.as_groups,
                                                  .n_impersonate_groups = a->flags.n_as_groups,
                                          },
                                          &(const struct leader_options){
                                                  .ns = run->o.le_ns,
                                                  .name = run->o.le_name,
                                                  .identity = run->leader_identity,
                                                  .lease_duration_usec = run->o.le_lease_usec,
                                                  .renew_deadline_usec = run->o.le_renew_usec,
                                                  .retry_period_usec = run->o.le_retry_usec,
                                          },
                                          &lcb, run, &run->leader);
                if (r < 0)
                        return log_error_errno(r, "Cannot set up leader election: %m");
                kube_client_set_write_gate(a->client, leader_write_gate, run->leader);
                r = leader_start(run->leader);
                if (r < 0)
                        return log_error_errno(r, "Cannot start leader election: %m");
                log_info("standby: %s asks for the Lease %s/%s", run->leader_identity, run->o.le_ns,
                         run->o.le_name);
                if (run->notifier) {
                        notifier_ready(run->notifier);
                        notifier_status(run->notifier, "standby: waiting for the Lease %s/%s", run->o.le_ns,
                                        run->o.le_name);
                }
        } else {
                r = drain_manager_start(run->manager);
                if (r < 0)
                        return log_error_errno(r, "Cannot start watching nodes: %m");
                r = start_machine_hook(run);
                if (r < 0)
                        return r;
        }

        app_signals_start(a, on_serve_signal, run);
        return 0;
}

/* The manager first (engines, slots, Events, the watch), then the rest; app_stopped
 * once the last of it closed. */
static void serve_stop(struct app *a, void *state) {
        struct serve_run *run = state;

        run->stopping = true;
        if (run->notifier)
                notifier_stopping(run->notifier);
        if (run->shutdown)
                shutdown_drain_stop(run->shutdown);
        if (run->machine_hook)
                machine_hook_stop(run->machine_hook); /* before the manager it borrows */
        if (run->manager)
                drain_manager_stop(run->manager); /* on_manager_stopped follows */
        else
                on_manager_stopped(NULL, run);
}

static void serve_free(void *state) {
        struct serve_run *run = state;

        /* (set only when start failed half-way: a stop closes and frees both) */
        if (run->leader && leader_idle(run->leader)) {
                leader_free(run->leader);
                run->leader = NULL;
        }

        mwindows_free(run->o.window);
        run->o.window = NULL;
        drain_args_done(&run->args);
        if (run->config_ready)
                config_argv_done(&run->config);
}

const struct verb_ops verb_serve_ops = {
        .state_size = sizeof(struct serve_run),
        .parse = serve_parse,
        .start = serve_start,
        .stop = serve_stop,
        .free = serve_free,
};
