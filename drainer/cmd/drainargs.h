/* The flags that plan, drain, uncordon, maintain and serve share (named as
 * kubectl drain names them), parsed and validated before any request. */
#pragma once

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>

#include "drainer/base/yamlargs.h"
#include "drainer/ctl/profile.h"
#include "drainer/dra/health.h"
#include "drainer/drain/plan.h"
#include "drainer/drain/state.h"
#include "verbs.h"

#define MAX_DRIVER_SELECTORS  16
#define MAX_DRIVER_NAMESPACES DRAIN_PROFILE_MAX_NAMESPACES

enum {
        OPT_POD_SELECTOR = 0x100,
        OPT_GRACE,
        OPT_TIMEOUT,
        OPT_EMPTYDIR,
        OPT_FORCE,
        OPT_DISABLE_EVICTION,
        OPT_DRY_RUN,
        OPT_DRIVER_SELECTOR,
        OPT_DRIVER_STOP,
        OPT_DRIVER_HEALTH,
        OPT_IGNORE_HEALTH,
        OPT_FORCE_UNCORDON,
        OPT_RESTORE_ON_FAILURE,
        OPT_SKIP_DRIVER_STOP,
        OPT_DRIVER_NAMESPACE,
        OPT_CONFIG,
        OPT_IGNORE_DAEMONSETS,
        OPT_SKIP_WAIT_FOR_DELETE,
        OPT_NODE_CONDITIONS,
        OPT_DRIVER,
        OPT_FORCE_DRAIN,
        OPT_DELETE_LOCAL_DATA,
        OPT_CHUNK_SIZE,
        OPT_DEVICE,
};

struct drain_args {
        const char *verb;
        /* what the flags say about how nodes are drained (profile.h); parsed here */
        struct drain_profile profile;
        const char *pod_selector;
        bool dry_run;
        /* --dry-run=server (dry_run is set too): the cordon patch and every eviction sent
         * with dryRun=All, as kubectl drain --dry-run=server; --dry-run (bare) or
         * --dry-run=client: the plan only; --dry-run=none: no dry run */
        bool dry_run_server;
        const char *driver_selectors[MAX_DRIVER_SELECTORS + 1];
        size_t n_driver_selectors;
        const char *config; /* --config FILE (already read: see config_argv_build) */
        bool stop_given;    /* --driver-stop was given */
        /* --driver without --driver-stop: label, profile.stop_arg still NULL: each driver's
         * KEY is read from its DaemonSet before anything runs (driverkey.h) */
        bool stop_from_daemonset;
        const char *health;
        unsigned chunk_size;                  /* --chunk-size: 0 the default */
        char *device_bufs[DRAIN_MAX_DEVICES]; /* owned: what profile.devices borrow */

        verb_opt_fn more_fn; /* the caller's own flags */
        void *more_ud;
};

/* Parses argv (argv[0] is the verb) with the drain flags plus `more`, whose options
 * go to more_fn (their values must be >= 0x200, or a lower-case letter: its short flag). Returns 1 to go on, 0 after --help,
 * or -EINVAL (logged) on bad usage. */
int parse_drain_args(int argc, char **argv, struct global_flags *g, struct drain_args *a,
                     const struct option *more, verb_opt_fn more_fn, void *more_ud);
void drain_args_done(struct drain_args *a);
/* The --config keys that `verb` (plan, drain, uncordon, maintain, serve) skips: serve's
 * own (for the other verbs) and the drain flags that do not apply to it. Fills buf
 * (NULL-terminated, at most size - 1 keys) and returns how many. */
size_t drain_config_skip(const char *verb, const char **buf, size_t size);
/* Whether the argv word `word` ("--name" or "--name=value"), a drain flag, applies to
 * `verb`: 1 or 0, with *ret_takes_value set when the next word is its value; -ENOENT
 * for a word that is not a drain flag (a global flag, a positional). */
int drain_flag_applies(const char *verb, const char *word, bool *ret_takes_value);

/* --driver-selector SEL, for every verb that takes it (the drain verbs, status, guard,
 * doctor): adds SEL to the n of at most MAX_DRIVER_SELECTORS in v (NULL-terminated);
 * logs and returns -EINVAL when there are too many. */
int driver_selector_add(const char **v, size_t *n, const char *sel);
/* The selectors v (n of them), or claims_default_driver_selectors when n is 0, parsed
 * (selectors_free() them); logs "--driver-selector: ..." and returns -EINVAL for an
 * invalid one or an empty one (it would make every pod a driver pod), -ENOMEM
 * (logged). Call it before any request is made. */
int driver_selectors_parse(const char *const *v, size_t n, struct selector ***ret, size_t *ret_n);
/* The same check, for a verb that hands the selectors on as strings: 0 or -EINVAL
 * (logged), -ENOMEM (logged). */
int driver_selectors_check(const char *const *v, size_t n);

/* --driver-namespace NS for the verbs with flags of their own (status, guard): adds
 * NS to the n of at most MAX_DRIVER_NAMESPACES in v (NULL-terminated); logs and
 * returns -EINVAL when NS is not a namespace name or there are too many. */
int driver_namespace_add(const char **v, size_t *n, const char *ns);

/* --config FILE: the YAML mapping of flag names that serve, plan, drain, uncordon
 * and maintain read, one key per flag (`key: value`, `key: [a, b]` for repeatable
 * flags, `key: true` / `key: false` for a switch), read by base/yamlargs.c. Its
 * settings become "--key=value" words placed after argv[0] (the verb) and before the
 * command line's, so flags win (--force=false turns off `force: true`) and repeatable
 * ones add up. Keys in skip (NULL-terminated, may be NULL) are left out: the drain
 * verbs read serve's file and skip the keys of serve's own flags (serve_options).
 * A key without a value is an error here ("FILE:LINE: timeout: a duration is needed
 * (e.g. 30s)"); an unknown key and a bad value are errors of verb_parse, which names
 * the file and the line (config_origin_of). */
struct config_argv {
        char **argv; /* owned array; the strings are argv's or file's */
        int argc;
        struct yamlargs file; /* the --config file's words */
};
/* Returns 0, or a negative errno (logged: the file, the line). */
int config_argv_build(int argc, char **argv, const char *const *skip, struct config_argv *ret);
void config_argv_done(struct config_argv *c);

/* Where a word of a config_argv's argv came from (its file, line and key): NULL for
 * the command line's. */
const struct yamlargs_word *config_origin_of(const char *word);
/* serve's own flags (node, all-nodes, ...), ended by a zeroed entry: their names are
 * its config keys. */
extern const struct option serve_options[];

/* The run of driver i of a: a shallow copy scoped to that driver alone (borrowing
 * everything of a, so never drain_args_done() on it). */
void drain_args_for_driver(const struct drain_args *a, size_t i, struct drain_args *ret);
