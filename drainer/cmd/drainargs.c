/* Shared flags of the drain verbs: parsing and validation (selectors, the
 * driver-stop strategy, the health endpoint, durations), and the --config file
 * they and serve read. Owns the parsed selectors and health target of a struct
 * drain_args. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainargs.h"
#include "drainer/base/argval.h"
#include "drainer/base/log.h"
#include "drainer/base/selector.h"
#include "drainer/base/timesrc.h"
#include "drainer/base/yamlargs.h"

/* The drain flags. Each applies to the verbs flag_verbs() names; given to another
 * verb it is bad usage (exit 2), never silently ignored, and a --config file's key of
 * it is skipped there (one file serves every verb). */
static const struct option drain_options[] = {
        { "pod-selector", required_argument, NULL, OPT_POD_SELECTOR },
        { "grace-period", required_argument, NULL, OPT_GRACE },
        { "timeout", required_argument, NULL, OPT_TIMEOUT },
        { "delete-emptydir-data", no_argument, NULL, OPT_EMPTYDIR },
        { "delete-local-data", no_argument, NULL, OPT_DELETE_LOCAL_DATA },
        { "chunk-size", required_argument, NULL, OPT_CHUNK_SIZE },
        { "force", no_argument, NULL, OPT_FORCE },
        { "disable-eviction", no_argument, NULL, OPT_DISABLE_EVICTION },
        { "dry-run", optional_argument, NULL, OPT_DRY_RUN },
        { "ignore-daemonsets", optional_argument, NULL, OPT_IGNORE_DAEMONSETS },
        { "skip-wait-for-delete-timeout", required_argument, NULL, OPT_SKIP_WAIT_FOR_DELETE },
        { "driver-selector", required_argument, NULL, OPT_DRIVER_SELECTOR },
        { "driver-stop", required_argument, NULL, OPT_DRIVER_STOP },
        { "driver", required_argument, NULL, OPT_DRIVER },
        { "device", required_argument, NULL, OPT_DEVICE },
        { "driver-health", required_argument, NULL, OPT_DRIVER_HEALTH },
        { "ignore-driver-health", no_argument, NULL, OPT_IGNORE_HEALTH },
        { "force-uncordon", no_argument, NULL, OPT_FORCE_UNCORDON },
        { "restore-on-failure", no_argument, NULL, OPT_RESTORE_ON_FAILURE },
        { "force-drain", no_argument, NULL, OPT_FORCE_DRAIN },
        { "skip-driver-stop", no_argument, NULL, OPT_SKIP_DRIVER_STOP },
        { "driver-namespace", required_argument, NULL, OPT_DRIVER_NAMESPACE },
        { "config", required_argument, NULL, OPT_CONFIG },
        { "node-conditions", no_argument, NULL, OPT_NODE_CONDITIONS },
        {},
};

enum {
        VERB_PLAN = 1u << 0,
        VERB_DRAIN = 1u << 1,
        VERB_UNCORDON = 1u << 2,
        VERB_MAINTAIN = 1u << 3,
        VERB_SERVE = 1u << 4,
        VERBS_ALL = VERB_PLAN | VERB_DRAIN | VERB_UNCORDON | VERB_MAINTAIN | VERB_SERVE,
};

static const char *const verb_names[] = { "plan", "drain", "uncordon", "maintain", "serve" };

static unsigned verb_bit(const char *verb) {
        for (size_t i = 0; i < ELEMENTSOF(verb_names); i++)
                if (verb && streq(verb, verb_names[i]))
                        return 1u << i;
        return 0;
}

/* The verbs a drain flag applies to: what selects and evicts pods is for the verbs
 * that drain (plan shows what they would do); what finds, stops and probes drivers
 * for every verb; what undoes for the verbs that restore. A flag not named here
 * applies to the verbs that run a drain. */
static unsigned flag_verbs(int opt) {
        switch (opt) {
        case OPT_POD_SELECTOR:
        case OPT_EMPTYDIR:
        case OPT_DELETE_LOCAL_DATA:
        case OPT_FORCE:
                return VERB_PLAN | VERB_DRAIN | VERB_MAINTAIN | VERB_SERVE;
        case OPT_CHUNK_SIZE: /* kubectl's list paging size: every verb lists */
                return VERBS_ALL;
        case OPT_DRIVER: /* serve drains whole nodes */
                return VERB_PLAN | VERB_DRAIN | VERB_UNCORDON | VERB_MAINTAIN;
        case OPT_DEVICE: /* one node's devices */
                return VERB_PLAN | VERB_DRAIN | VERB_UNCORDON;
        case OPT_IGNORE_DAEMONSETS: /* kubectl's flag, for copied kubectl drain commands */
                return VERB_PLAN | VERB_DRAIN | VERB_MAINTAIN;
        case OPT_DRY_RUN:
                return VERB_DRAIN | VERB_MAINTAIN;
        case OPT_TIMEOUT:
                return VERB_DRAIN | VERB_UNCORDON | VERB_MAINTAIN | VERB_SERVE;
        case OPT_DRIVER_SELECTOR:
        case OPT_DRIVER_NAMESPACE:
        case OPT_DRIVER_STOP:
        case OPT_DRIVER_HEALTH:
        case OPT_IGNORE_HEALTH:
        case OPT_CONFIG:
                return VERBS_ALL;
        case OPT_FORCE_UNCORDON:
                return VERB_UNCORDON | VERB_MAINTAIN | VERB_SERVE;
        case OPT_NODE_CONDITIONS: /* what writes the Node */
                return VERB_DRAIN | VERB_UNCORDON | VERB_MAINTAIN | VERB_SERVE;
        case OPT_RESTORE_ON_FAILURE:
        case OPT_FORCE_DRAIN:
                return VERB_MAINTAIN;
        default: /* --grace-period, --disable-eviction, --skip-driver-stop, ... */
                return VERB_DRAIN | VERB_MAINTAIN | VERB_SERVE;
        }
}

static const char *flag_name(int opt) {
        for (const struct option *o = drain_options; o->name; o++)
                if (o->val == opt)
                        return o->name;
        return "?";
}

static int flag_refused(const char *verb, int opt) {
        unsigned m = flag_verbs(opt);
        char list[128] = "";
        size_t n = 0, k = 0;

        for (size_t i = 0; i < ELEMENTSOF(verb_names); i++)
                n += !!(m & (1u << i));
        for (size_t i = 0; i < ELEMENTSOF(verb_names); i++) {
                size_t len = strlen(list);

                if (!(m & (1u << i)))
                        continue;
                k++;
                snprintf(list + len, sizeof(list) - len, "%s%s",
                         k == 1   ? ""
                         : k == n ? " and "
                                  : ", ",
                         verb_names[i]);
        }
        return log_error_errno(
                EINVAL, "drainer %s: --%s does not apply to %s (a flag of %s); see 'drainer %s --help'",
                verb, flag_name(opt), verb, list, verb);
}

int drain_flag_applies(const char *verb, const char *word, bool *ret_takes_value) {
        const struct option *o = argval_long_option(drain_options, SIZE_MAX, word, ret_takes_value);

        return o ? !!(flag_verbs(o->val) & verb_bit(verb)) : -ENOENT;
}

size_t drain_config_skip(const char *verb, const char **buf, size_t size) {
        unsigned bit = verb_bit(verb);
        size_t n = 0;

        if (size == 0)
                return 0;
        if (bit != VERB_SERVE)
                for (const struct option *o = serve_options; o->name && n + 1 < size; o++)
                        buf[n++] = o->name;
        for (const struct option *o = drain_options; o->name && n + 1 < size; o++)
                if (!(flag_verbs(o->val) & bit))
                        buf[n++] = o->name;
        buf[n] = NULL;
        return n;
}

/* The drain flags stored as given. */
static const struct argval_field drain_fields[] = {
        ARGVAL_STRING(OPT_POD_SELECTOR, struct drain_args, pod_selector),
        ARGVAL_SWITCH(OPT_EMPTYDIR, struct drain_args, profile.emptydir),
        ARGVAL_SWITCH(OPT_FORCE, struct drain_args, profile.force),
        ARGVAL_SWITCH(OPT_DISABLE_EVICTION, struct drain_args, profile.disable_eviction),
        ARGVAL_STRING(OPT_DRIVER_HEALTH, struct drain_args, health),
        ARGVAL_SWITCH(OPT_IGNORE_HEALTH, struct drain_args, profile.ignore_health),
        ARGVAL_SWITCH(OPT_FORCE_UNCORDON, struct drain_args, profile.force_uncordon),
        ARGVAL_SWITCH(OPT_RESTORE_ON_FAILURE, struct drain_args, profile.restore_on_failure),
        ARGVAL_SWITCH(OPT_FORCE_DRAIN, struct drain_args, profile.force_drain),
        ARGVAL_SWITCH(OPT_SKIP_DRIVER_STOP, struct drain_args, profile.skip_driver_stop),
        ARGVAL_SWITCH(OPT_NODE_CONDITIONS, struct drain_args, profile.node_conditions),
        ARGVAL_STRING(OPT_CONFIG, struct drain_args, config), /* read before parsing: config_argv_build() */
        {},
};

static int on_drain_opt(int opt, const char *arg, void *userdata) {
        struct drain_args *a = userdata;
        long long v;

        if (opt >= OPT_POD_SELECTOR && opt < 0x200 && !(flag_verbs(opt) & verb_bit(a->verb)))
                return flag_refused(a->verb, opt);
        if (argval_store(drain_fields, opt, arg, flag_on(arg), a))
                return 0;
        switch (opt) {
        case OPT_GRACE:
                if (argval_int(arg, -1, LLONG_MAX, &v) < 0)
                        return log_error_errno(EINVAL,
                                               "--grace-period: invalid value \"%s\" (seconds, -1 for "
                                               "each pod's own)",
                                               arg);
                a->profile.grace = v;
                return 0;
        case OPT_TIMEOUT:
                if (timesrc_parse_duration(arg, &a->profile.timeout_usec) < 0)
                        return log_error_errno(EINVAL,
                                               "--timeout: invalid duration \"%s\" (e.g. 90s, 5m, 1h)", arg);
                return 0;
        case OPT_DELETE_LOCAL_DATA:
                /* kubectl's deprecated spelling, still accepted there: its warning */
                log_warning("Flag --delete-local-data has been deprecated, This option is deprecated and "
                            "will be deleted. Use --delete-emptydir-data.");
                a->profile.emptydir = flag_on(arg);
                return 0;
        case OPT_CHUNK_SIZE:
                if (argval_int(arg, 0, 100000, &v) < 0)
                        return log_error_errno(EINVAL,
                                               "--chunk-size: invalid value \"%s\" (objects per list "
                                               "request, 0-100000; 0: drainer's own, 500)",
                                               arg);
                a->chunk_size = (unsigned)v;
                return 0;
        case OPT_DRY_RUN:
                /* kubectl's values; a bare --dry-run is client, as kubectl's was */
                if (!arg || streq(arg, "client") || streq(arg, "true"))
                        a->dry_run = true, a->dry_run_server = false;
                else if (streq(arg, "server"))
                        a->dry_run = a->dry_run_server = true;
                else if (streq(arg, "none") || streq(arg, "false"))
                        a->dry_run = a->dry_run_server = false;
                else
                        return log_error_errno(EINVAL,
                                               "--dry-run: invalid value \"%s\" (none, client or server; a "
                                               "bare --dry-run is client)",
                                               arg);
                return 0;
        case OPT_SKIP_WAIT_FOR_DELETE:
                if (argval_int(arg, 0, 86400 * 365, &v) < 0)
                        return log_error_errno(
                                EINVAL,
                                "--skip-wait-for-delete-timeout: invalid value \"%s\" (seconds, "
                                "0: wait for every pod)",
                                arg);
                a->profile.skip_wait_for_delete_usec = (uint64_t)v * USEC_PER_SEC;
                return 0;
        case OPT_IGNORE_DAEMONSETS:
                /* kubectl drain's flag: DaemonSet pods without claims always stay (the
                 * controller would recreate them); accepted so copied commands work */
                if (arg && !streq(arg, "true")) {
                        if (streq(arg, "false"))
                                return log_error_errno(
                                        EINVAL, "--ignore-daemonsets=false: drainer always leaves the "
                                                "DaemonSet pods without claims on the node (their "
                                                "controller would recreate them); drop the flag");
                        return log_error_errno(EINVAL, "--ignore-daemonsets: invalid value \"%s\" (true)",
                                               arg);
                }
                return 0;
        case OPT_DRIVER_SELECTOR:
                return driver_selector_add(a->driver_selectors, &a->n_driver_selectors, arg);
        case OPT_DRIVER_STOP: {
                char msg[512];

                if (driver_stop_parse(arg, &a->profile.stop, &a->profile.stop_arg, msg, sizeof(msg)) < 0)
                        return log_error_errno(EINVAL, "%s", msg);
                a->stop_given = true;
                return 0;
        }
        case OPT_DRIVER: {
                char msg[512];

                if (drain_scope_check(arg, msg, sizeof(msg)) < 0)
                        return log_error_errno(EINVAL, "%s", msg);
                for (size_t i = 0; i < a->profile.n_drivers; i++)
                        if (streq(a->profile.drivers[i], arg))
                                return log_error_errno(EINVAL, "--driver %s: given twice", arg);
                if (a->profile.n_drivers >= DRIVER_STOP_MAX_DRIVERS)
                        return log_error_errno(EINVAL, "--driver: at most %d drivers",
                                               DRIVER_STOP_MAX_DRIVERS);
                a->profile.drivers[a->profile.n_drivers++] = arg;
                a->profile.drivers[a->profile.n_drivers] = NULL;
                return 0;
        }
        case OPT_DEVICE: {
                struct drain_device d;
                char msg[512], *buf;

                if (a->profile.n_devices >= DRAIN_MAX_DEVICES)
                        return log_error_errno(EINVAL, "--device: at most %d devices", DRAIN_MAX_DEVICES);
                buf = malloc(strlen(arg) + 1);
                if (!buf)
                        return log_oom();
                if (drain_device_parse(arg, buf, &d, msg, sizeof(msg)) < 0) {
                        free(buf);
                        return log_error_errno(EINVAL, "%s", msg);
                }
                for (size_t i = 0; i < a->profile.n_devices; i++)
                        if (drain_device_eq(&a->profile.devices[i], &d)) {
                                free(buf);
                                return log_error_errno(EINVAL, "--device %s: given twice", arg);
                        }
                a->device_bufs[a->profile.n_devices] = buf;
                a->profile.devices[a->profile.n_devices++] = d;
                return 0;
        }
        case OPT_DRIVER_NAMESPACE:
                return driver_namespace_add(a->profile.driver_namespaces, &a->profile.n_driver_namespaces,
                                            arg);
        }
        return a->more_fn ? a->more_fn(opt, arg, a->more_ud) : -EINVAL;
}

void drain_args_for_driver(const struct drain_args *a, size_t i, struct drain_args *ret) {
        *ret = *a;
        drain_profile_for_driver(&a->profile, i, &ret->profile);
}

void drain_args_done(struct drain_args *a) {
        drain_profile_done(&a->profile);
        for (size_t i = 0; i < a->profile.n_devices; i++)
                a->device_bufs[i] = mfree(a->device_bufs[i]);
        a->profile.n_devices = 0;
}

/* Parses and validates everything before any request is made. Returns 1 to go
 * on, 0 after --help, or an exit code < 0 (negated) for bad usage. */
int parse_drain_args(int argc, char **argv, struct global_flags *g, struct drain_args *a,
                     const struct option *more, verb_opt_fn more_fn, void *more_ud) {
        _cleanup_free_ char *err = NULL;
        int r;

        a->verb = argv[0];
        a->profile.grace = -1;
        a->profile.stop = driver_stop_or_default(NULL);
        struct option all[64];
        size_t n = 0;

        for (const struct option *o = drain_options; o->name; o++)
                all[n++] = *o;
        for (const struct option *o = more; o && o->name && n < ELEMENTSOF(all) - 1; o++)
                all[n++] = *o;
        all[n] = (struct option){};
        a->more_fn = more_fn;
        a->more_ud = more_ud;
        r = verb_parse(argc, argv, g, all, on_drain_opt, a);
        if (r <= 0)
                return r;
        g->chunk_size = a->chunk_size;
        if (a->pod_selector && selector_parse(a->pod_selector, &a->profile.pod_sel, &err) < 0) {
                log_error("--pod-selector: %s", strna(err));
                return -EINVAL;
        }
        r = driver_selectors_parse(a->driver_selectors, a->n_driver_selectors, &a->profile.drv_sels,
                                   &a->profile.n_drv_sels);
        if (r < 0)
                return r;
        if (a->profile.n_devices > 0) {
                /* a device drain: the devices' DeviceTaintRules, the holders' evictions; no
                 * cordon, no driver stopped */
                if (a->profile.n_drivers > 0)
                        return log_error_errno(EINVAL, "--device and --driver exclude each other: --driver "
                                                       "takes all of a driver's devices out of service, "
                                                       "--device only the ones named");
                if (a->profile.node_conditions)
                        return log_error_errno(EINVAL,
                                               "--node-conditions does not apply with --device: the node "
                                               "is not drained, one device is");
                if (a->dry_run)
                        return log_error_errno(EINVAL, "--dry-run does not apply with --device: drainer "
                                                       "plan NODE --device ... shows what it would do");
                if (a->stop_given || a->profile.skip_driver_stop)
                        return log_error_errno(EINVAL, "--driver-stop and --skip-driver-stop do not apply "
                                                       "with --device: a device drain stops no driver");
                drain_devices_scope(a->profile.devices, a->profile.n_devices, a->profile.device_scope);
        }
        if (a->profile.n_drivers > 0 && a->profile.node_conditions)
                return log_error_errno(EINVAL,
                                       "--node-conditions does not apply with --driver: DrainInProgress and "
                                       "Drained say the node is drained, and a driver's drain is not that");
        if (a->profile.n_drivers > 0 && a->profile.stop == &driver_stop_taint && a->stop_given)
                /* the drain taint keeps every new pod off the node: not a driver's maintenance */
                return log_error_errno(EINVAL,
                                       "--driver-stop taint does not apply with --driver: the drain taint "
                                       "keeps every new pod off the node; use --driver-stop label:KEY, "
                                       "systemd:UNIT or none (without --driver-stop: label, KEY from the "
                                       "driver DaemonSet's nodeSelector)");
        if (a->profile.n_drivers > 0 && !a->stop_given) {
                /* label:KEY, KEY read per driver from its DaemonSet (driverkey.h) */
                a->profile.stop = &driver_stop_label;
                a->profile.stop_arg = NULL;
                a->stop_from_daemonset = true;
        }
        if (a->health) {
                r = health_target_parse(a->health, &a->profile.health_target, &err);
                if (r < 0) {
                        log_error("--driver-health: %s", strna(err));
                        return -EINVAL;
                }
                a->profile.has_health = true;
        }
        return 1;
}

int driver_selector_add(const char **v, size_t *n, const char *sel) {
        if (*n >= MAX_DRIVER_SELECTORS)
                return log_error_errno(EINVAL, "--driver-selector: at most %d selectors",
                                       MAX_DRIVER_SELECTORS);
        v[(*n)++] = sel;
        v[*n] = NULL;
        return 0;
}

int driver_selectors_parse(const char *const *v, size_t n, struct selector ***ret, size_t *ret_n) {
        _cleanup_free_ char *err = NULL;
        int r;

        r = selectors_parse_strv(n > 0 ? v : claims_default_driver_selectors, ret, ret_n, &err);
        if (r == -ENOMEM)
                return log_oom();
        if (r < 0)
                return log_error_errno(EINVAL, "--driver-selector: %s", err ? err : "invalid selector");
        for (size_t i = 0; i < *ret_n; i++)
                if (selector_is_empty((*ret)[i])) {
                        selectors_free(*ret, *ret_n);
                        *ret = NULL;
                        *ret_n = 0;
                        return log_error_errno(EINVAL,
                                               "--driver-selector: an empty selector would match every pod");
                }
        return 0;
}

int driver_selectors_check(const char *const *v, size_t n) {
        struct selector **sels;
        size_t n_sels;
        int r;

        r = driver_selectors_parse(v, n, &sels, &n_sels);
        if (r < 0)
                return r;
        selectors_free(sels, n_sels);
        return 0;
}

int driver_namespace_add(const char **v, size_t *n, const char *ns) {
        if (!dns1123_label_is_valid(ns))
                return log_error_errno(EINVAL, "--driver-namespace: \"%s\" is not a namespace name", ns);
        if (*n >= MAX_DRIVER_NAMESPACES)
                return log_error_errno(EINVAL, "--driver-namespace: at most %d", MAX_DRIVER_NAMESPACES);
        v[(*n)++] = ns;
        v[*n] = NULL;
        return 0;
}

/* ---- --config FILE ---- */

/* The file's words (one file at a time: the verb reads it once, before getopt), for
 * config_origin_of(). */
static struct yamlargs current; /* borrowed: a config_argv's */

const struct yamlargs_word *config_origin_of(const char *word) {
        return yamlargs_find(&current, word);
}

/* What a key with no value (`timeout:`) needs, for its error line. */
static const char *value_needed(const char *key) {
        static const char *const durations[] = { "timeout", "request-timeout", "out-of-service-after" };
        static const char *const switches[] = { "all-nodes",         "on-shutdown",    "cluster-api",
                                                "metrics-in-output", "out-of-service", "verbose" };

        for (size_t i = 0; i < ELEMENTSOF(durations); i++)
                if (streq(key, durations[i]))
                        return "a duration is needed (e.g. 30s)";
        for (size_t i = 0; i < ELEMENTSOF(switches); i++)
                if (streq(key, switches[i]))
                        return "true or false is needed";
        for (const struct option *o = drain_options; o->name; o++)
                if (streq(key, o->name))
                        return o->has_arg == no_argument    ? "true or false is needed"
                               : streq(key, "grace-period") ? "a number of seconds is needed (e.g. 30)"
                                                            : "a value is needed";
        return "a value is needed";
}

int config_argv_build(int argc, char **argv, const char *const *skip, struct config_argv *ret) {
        _cleanup_free_ char *err = NULL;
        /* Found before getopt runs: its settings go before the command line's flags. */
        const char *config = argval_argv_value(argc, argv, "--config");
        int r;

        *ret = (struct config_argv){};
        if (config) {
                current = (struct yamlargs){};
                r = yamlargs_load(config, skip, value_needed, &ret->file, &err);
                if (r == -ENOMEM)
                        return log_oom();
                if (r < 0)
                        return log_error_errno(r, "%s", strna(err));
        }
        ret->argv = calloc((size_t)argc + ret->file.n + 1, sizeof(char *));
        if (!ret->argv) {
                yamlargs_done(&ret->file);
                return log_oom();
        }
        ret->argv[ret->argc++] = argv[0];
        for (size_t i = 0; i < ret->file.n; i++)
                ret->argv[ret->argc++] = ret->file.words[i].word;
        for (int i = 1; i < argc; i++)
                ret->argv[ret->argc++] = argv[i];
        if (ret->file.n > 0)
                current = ret->file;
        return 0;
}

void config_argv_done(struct config_argv *c) {
        if (current.words && current.words == c->file.words)
                current = (struct yamlargs){};
        yamlargs_done(&c->file);
        free(c->argv);
        *c = (struct config_argv){};
}
