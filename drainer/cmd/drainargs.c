/* Shared flags of the drain verbs: parsing and validation (selectors, the
 * driver-stop strategy, the health endpoint, durations). Owns the parsed
 * selectors and health target of a struct drain_args. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/drainargs.h"
#include "drainer/log.h"
#include "drainer/selector.h"
#include "drainer/timesrc.h"

int parse_duration(const char *s, uint64_t *ret) {
        return timesrc_parse_duration(s, ret);
}

static int on_drain_opt(int opt, const char *arg, void *userdata) {
        struct drain_args *a = userdata;
        char *end;

        switch (opt) {
        case OPT_POD_SELECTOR:
                a->pod_selector = arg;
                return 0;
        case OPT_GRACE:
                errno = 0;
                a->grace = strtoll(arg, &end, 10);
                if (errno || *end || end == arg || a->grace < -1)
                        return log_error_errno(EINVAL,
                                               "--grace-period: invalid value \"%s\" (seconds, -1 for "
                                               "each pod's own)",
                                               arg);
                return 0;
        case OPT_TIMEOUT:
                if (parse_duration(arg, &a->timeout_usec) < 0)
                        return log_error_errno(EINVAL,
                                               "--timeout: invalid duration \"%s\" (e.g. 90s, 5m, 1h)", arg);
                return 0;
        case OPT_EMPTYDIR:
                a->emptydir = true;
                return 0;
        case OPT_FORCE:
                a->force = true;
                return 0;
        case OPT_DISABLE_EVICTION:
                a->disable_eviction = true;
                return 0;
        case OPT_DRY_RUN:
                a->dry_run = true;
                return 0;
        case OPT_DRIVER_SELECTOR:
                if (a->n_driver_selectors >= MAX_DRIVER_SELECTORS)
                        return log_error_errno(EINVAL, "--driver-selector: at most %d",
                                               MAX_DRIVER_SELECTORS);
                a->driver_selectors[a->n_driver_selectors++] = arg;
                return 0;
        case OPT_DRIVER_STOP: {
                const char *colon = strchr(arg, ':');
                _cleanup_free_ char *kind = colon ? strndup(arg, colon - arg) : strdup(arg);

                if (!kind)
                        return log_oom();
                a->stop = driver_stop_kind_from_string(kind);
                a->stop_arg = colon ? colon + 1 : NULL;
                if (a->stop < 0 ||
                    ((a->stop == DRIVER_STOP_LABEL || a->stop == DRIVER_STOP_SYSTEMD) &&
                     (!a->stop_arg || !*a->stop_arg)) ||
                    ((a->stop == DRIVER_STOP_TAINT || a->stop == DRIVER_STOP_NONE) && colon))
                        return log_error_errno(EINVAL,
                                               "--driver-stop: invalid value \"%s\" (taint, label:KEY, "
                                               "systemd:UNIT or none)",
                                               arg);
                if (a->stop == DRIVER_STOP_LABEL && !label_key_is_valid(a->stop_arg))
                        return log_error_errno(EINVAL, "--driver-stop: \"%s\" is not a valid label key",
                                               a->stop_arg);
                return 0;
        }
        case OPT_DRIVER_HEALTH:
                a->health = arg;
                return 0;
        case OPT_IGNORE_HEALTH:
                a->ignore_health = true;
                return 0;
        case OPT_FORCE_UNCORDON:
                a->force_uncordon = true;
                return 0;
        case OPT_RESTORE_ON_FAILURE:
                a->restore_on_failure = true;
                return 0;
        case OPT_SKIP_DRIVER_STOP:
                a->skip_driver_stop = true;
                return 0;
        }
        return a->more_fn ? a->more_fn(opt, arg, a->more_ud) : -EINVAL;
}

void drain_args_done(struct drain_args *a) {
        selector_free(a->pod_sel);
        selectors_free(a->drv_sels, a->n_drv_sels);
        if (a->has_health)
                health_target_done(&a->health_target);
}

/* Parses and validates everything before any request is made. Returns 1 to go
 * on, 0 after --help, or an exit code < 0 (negated) for bad usage. */
int parse_drain_args(int argc, char **argv, struct global_flags *g, struct drain_args *a,
                     const struct option *more, verb_opt_fn more_fn, void *more_ud) {
        static const struct option drain_options[] = {
                { "pod-selector", required_argument, NULL, OPT_POD_SELECTOR },
                { "grace-period", required_argument, NULL, OPT_GRACE },
                { "timeout", required_argument, NULL, OPT_TIMEOUT },
                { "delete-emptydir-data", no_argument, NULL, OPT_EMPTYDIR },
                { "force", no_argument, NULL, OPT_FORCE },
                { "disable-eviction", no_argument, NULL, OPT_DISABLE_EVICTION },
                { "dry-run", no_argument, NULL, OPT_DRY_RUN },
                { "driver-selector", required_argument, NULL, OPT_DRIVER_SELECTOR },
                { "driver-stop", required_argument, NULL, OPT_DRIVER_STOP },
                { "driver-health", required_argument, NULL, OPT_DRIVER_HEALTH },
                { "ignore-driver-health", no_argument, NULL, OPT_IGNORE_HEALTH },
                { "force-uncordon", no_argument, NULL, OPT_FORCE_UNCORDON },
                { "restore-on-failure", no_argument, NULL, OPT_RESTORE_ON_FAILURE },
                { "skip-driver-stop", no_argument, NULL, OPT_SKIP_DRIVER_STOP },
                {},
        };
        _cleanup_free_ char *err = NULL;
        int r;

        a->verb = argv[0];
        a->grace = -1;
        a->stop = DRIVER_STOP_TAINT;
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
        if (a->stop == DRIVER_STOP_SYSTEMD && !strchr(a->stop_arg, '.')) {
                log_error("--driver-stop systemd:%s: name the unit with its type, e.g. %s.service",
                          a->stop_arg, a->stop_arg);
                return -EINVAL;
        }
        if (a->pod_selector && selector_parse(a->pod_selector, &a->pod_sel, &err) < 0) {
                log_error("--pod-selector: %s", strna(err));
                return -EINVAL;
        }
        r = selectors_parse_strv(a->n_driver_selectors > 0 ? a->driver_selectors
                                                           : claims_default_driver_selectors,
                                 &a->drv_sels, &a->n_drv_sels, &err);
        if (r < 0) {
                log_error("--driver-selector: %s", strna(err));
                return -EINVAL;
        }
        if (a->health) {
                r = health_target_parse(a->health, &a->health_target, &err);
                if (r < 0) {
                        log_error("--driver-health: %s", strna(err));
                        return -EINVAL;
                }
                a->has_health = true;
        }
        return 1;
}

void fill_plan_options(const struct drain_args *a, struct plan_options *po) {
        *po = (struct plan_options){
                .pod_selector = a->pod_sel,
                .driver_selectors = (const struct selector *const *)a->drv_sels,
                .n_driver_selectors = a->n_drv_sels,
                .force = a->force,
                .delete_emptydir_data = a->emptydir,
                .driver_stop = a->stop,
                .driver_stop_arg = a->stop_arg,
                .ignore_driver_health = a->ignore_health,
        };
}
