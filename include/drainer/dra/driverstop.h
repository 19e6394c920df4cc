/* Driver-stop strategies (DESIGN.md "Driver stop strategies"): how the DRA
 * drivers of a node are stopped once no claim is left on it, and brought back.
 * One const struct driver_stop_ops per strategy, one file each in drainer/dra/
 * (stop-taint.c, stop-label.c, stop-systemd.c, stop-none.c), listed once in
 * driver_stop_strategies[]; the engine holds a pointer to one and names none.
 *
 * An op looks at what the caller observed (struct driver_stop_view) and says what
 * to do next (struct driver_stop_action): nothing now, evict the node's driver
 * pods, or set a node label; the caller (the engine, with its evictor and its
 * Node patches) carries it out, so a strategy needs nothing above dra/. Unit jobs
 * are the one exception: a strategy that drives host services (systemd:UNIT) runs
 * them itself through the unit control cmd/ injects (units.h; the sd-bus
 * implementation is sys/'s), and tells the caller when an answer came
 * (driver_stop_env.changed). */
#pragma once

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "drainer/base/macro.h"
#include "drainer/dra/units.h"

struct node_rec;
struct pod_rec;
struct timesrc;
struct driver_stop;
struct driver_stop_ops;

/* The drain taint: set with the cordon, kept for the whole drain. It keeps every
 * DaemonSet pod that does not tolerate it off the node, which is how the taint
 * strategy stops a driver (its DaemonSet does not recreate the evicted pod). */
#define DRAIN_TAINT_KEY     "drainer.io/draining"
#define DRAIN_TAINT_EFFECT  "NoSchedule"
/* The value the label strategy sets, so that the driver DaemonSet's nodeSelector
 * stops matching. */
#define DRIVER_PAUSED_VALUE "drainer-paused"

#define DRIVER_STOP_MAX_DRIVERS 8
/* Messages of actions and of what a stop waits for. */
#define DRIVER_STOP_MESSAGE_MAX 1024

/* How one driver was stopped, enough to undo it: an entry of drainer.io/driver-stop,
 * [{"strategy":"taint","daemonset":"ns/name","drivers":["gpu.example.com"]},
 *  {"strategy":"label","key":"K","old":"V" or null, "drivers":[...]},
 *  {"strategy":"systemd","unit":"U"}, {"strategy":"none"}]. state.h reads and writes
 * the array and the members every strategy has (strategy, daemonset, drivers); the
 * strategy's own members (key and old, unit) are its read_record/write_record's. */
struct driver_stop_record {
        const struct driver_stop_ops *ops;      /* the strategy that stopped it */
        char *arg;                              /* label key or unit name; NULL for taint/none */
        char *old_value;                        /* label: the value before (NULL = the label was absent) */
        bool had_old;                           /* label: whether old_value is meaningful */
        char *daemonset;                        /* "ns/name" of the driver DaemonSet, or NULL */
        char *drivers[DRIVER_STOP_MAX_DRIVERS]; /* DRA driver names (ResourceSlice spec.driver) */
        size_t n_drivers;
};

/* Frees the strings of r and zeroes it. NULL ok. */
void driver_stop_record_done(struct driver_stop_record *r);

/* What the caller observed of the node, for the ops. */
struct driver_stop_view {
        const struct node_rec *node;
        size_t driver_pods;       /* driver pods on the node, deleting ones included */
        size_t driver_pods_ready; /* ... Running, Ready and not deleting */
};

enum driver_stop_do {
        DRIVER_STOP_WAIT,      /* nothing for the caller to do now (message: for what, if anything) */
        DRIVER_STOP_EVICT,     /* evict the node's driver pods (the plan's drivers group) */
        DRIVER_STOP_SET_LABEL, /* patch the Node: label key to value (value NULL: remove it) */
        DRIVER_STOP_FAIL,      /* give up: error, message */
};

struct driver_stop_action {
        enum driver_stop_do what;
        const char *key, *value; /* SET_LABEL; borrowed from the config, the record or the node */
        int error;               /* FAIL: negative errno */
        char message[DRIVER_STOP_MESSAGE_MAX];
};

/* What a bad record member is, for state.h's message ("[i].key \"x\" is not a label key"). */
struct driver_stop_bad {
        const char *field; /* the member */
        const char *value; /* its value, quoted in the message, or NULL */
        const char *what;  /* "is missing", "is not a label key", ... */
};

struct driver_stop_ops {
        const char *name;      /* --driver-stop NAME[:ARG], the record's "strategy" */
        const char *arg_usage; /* "KEY", "UNIT": ARG is required; NULL: the strategy takes none */

        /* The plan (plan.h). */
        bool evicts_driver_pods;  /* the stop evicts the driver pods: they form the drivers group */
        bool removes_driver_pods; /* once stopped, no driver pod is left on the node */
        bool needs_units;         /* the stop drives host units: needs struct units */
        const char *
                pods_stay; /* !evicts_driver_pods: why driver pods stay, e.g. "DRA driver: stopped by label" */
        /* --driver-stop NAME:ARG: 0 if ARG suits the strategy, else -EINVAL with msg the
         * whole error line. NULL: any non-empty ARG. */
        int (*check_arg)(const char *arg, char *msg, size_t size);
        /* A driver pod this strategy cannot stop: *ret_message (malloc'd) names it and what
         * to do instead; 0 when it can, 1 with a message, or -ENOMEM. NULL: none. */
        int (*pod_blocker)(const char *arg, const struct pod_rec *pod, char **ret_message);
        /* `drainer plan`'s line: what the stop will do to these driver pods. */
        void (*describe)(const char *arg, const struct pod_rec *const *drivers, size_t n, FILE *f);

        /* A run's state of the strategy (systemd: the unit's state and the call in flight).
         * NULL when the strategy keeps none. */
        int (*init)(struct driver_stop *s);
        void (*done)(struct driver_stop *s);

        /* Preflight: whether the driver is healthy as the strategy sees it (systemd: the unit
         * is active). 1 healthy; 0 not known yet (ret->message says what it waits for); -EIO
         * not healthy (ret->message is the blocker); another error: give up (ret->message).
         * NULL: nothing to check beyond the driver pods. */
        int (*preflight)(struct driver_stop *s, struct driver_stop_action *ret);
        /* Fills the strategy's part of the record before anything is stopped (label: the
         * value the label had), with pointers borrowed from arg and n. NULL: nothing. */
        void (*fill_record)(const char *arg, const struct node_rec *n, struct driver_stop_record *rec);
        /* The next step of the stop (once no claim is on the node and the record is on it). */
        void (*stop)(struct driver_stop *s, const struct driver_stop_view *v,
                     struct driver_stop_action *ret);
        /* Whether the driver is stopped; if not, msg says what is left. */
        bool (*stopped)(struct driver_stop *s, const struct driver_stop_view *v, char *msg, size_t size);
        /* The next step of undoing record r (the drain taint is the caller's: it goes first,
         * whatever the strategy). s is this run's instance when r is of the configured
         * strategy, else NULL. */
        void (*undo)(struct driver_stop *s, const struct driver_stop_record *r,
                     const struct driver_stop_view *v, struct driver_stop_action *ret);
        /* Whether record r is undone (the driver back, as far as the strategy can tell). */
        bool (*undone)(struct driver_stop *s, const struct driver_stop_record *r,
                       const struct driver_stop_view *v, char *msg, size_t size);

        /* The strategy's own record members. read_record: 0, -EBADMSG (*ret_bad says
         * which member and why), or -ENOMEM; members it does not use are ignored.
         * write_record: 0, -EINVAL (a record read_record would refuse) or -ENOMEM. NULL:
         * none. */
        int (*read_record)(const cJSON *entry, struct driver_stop_record *rec,
                           struct driver_stop_bad *ret_bad);
        int (*write_record)(const struct driver_stop_record *rec, cJSON *entry);
        /* Whether this process's configuration (--driver-stop ops:arg) allows undoing record
         * r, which anyone who may patch the Node could have written (DESIGN.md "Security"). */
        bool (*undo_allowed)(const struct driver_stop_ops *ops, const char *arg,
                             const struct driver_stop_record *r);
        /* drainer_driver_healthy of a driver that is not a pod: with r, whether r names one
         * this instance knows (systemd: the configured unit); with r NULL, the configured
         * one once its state is known. Writes the series' driver label ("systemd:UNIT").
         * NULL: none. */
        bool (*health)(struct driver_stop *s, const struct driver_stop_record *r, char *key, size_t size,
                       bool *ret_healthy);
};

extern const struct driver_stop_ops driver_stop_taint;
extern const struct driver_stop_ops driver_stop_label;
extern const struct driver_stop_ops driver_stop_systemd;
extern const struct driver_stop_ops driver_stop_none;

/* Every strategy, NULL-terminated, the default (taint) first. */
extern const struct driver_stop_ops *const driver_stop_strategies[];

/* The strategy of this name, or NULL. */
const struct driver_stop_ops *driver_stop_find(const char *name);
/* ops, or the default strategy (taint) for NULL. */
const struct driver_stop_ops *driver_stop_or_default(const struct driver_stop_ops *ops);
/* "taint, label, systemd or none" (with_args: "taint, label:KEY, systemd:UNIT or none"). */
const char *driver_stop_names(bool with_args);
/* Parses --driver-stop NAME[:ARG]: *ret_ops and *ret_arg (pointing into value) on
 * success; else -EINVAL with msg the error line. */
int driver_stop_parse(const char *value, const struct driver_stop_ops **ret_ops, const char **ret_arg,
                      char *msg, size_t size);

/* What a strategy may use besides what the ops are shown. */
struct driver_stop_env {
        struct units units; /* host unit control (cmd/ injects it; ops NULL: none on this host) */
        struct timesrc *ts;
        /* An asynchronous answer arrived (a unit job, a state query): look again. */
        void (*changed)(void *userdata);
        /* Look again at this monotonic time at the latest (a retry after a backoff). */
        void (*wake_at)(void *userdata, uint64_t at_usec);
        void *userdata;
};

/* One run's instance of the configured strategy. Strategies reach their own state
 * as data; the rest is theirs to read. */
struct driver_stop {
        const struct driver_stop_ops *ops;
        char *arg; /* owned copy of ARG, or NULL */
        struct driver_stop_env env;
        unsigned host_actions; /* unit jobs sent by this run: the host was changed */
        void *data;            /* the strategy's own, set by init */
};

int driver_stop_new(const struct driver_stop_ops *ops, const char *arg, const struct driver_stop_env *env,
                    struct driver_stop **ret);
/* Calls still running (unit calls cannot be cancelled) finish into nothing. NULL ok. */
void driver_stop_free(struct driver_stop *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct driver_stop *, driver_stop_free);

/* Helpers for the strategies. */
void driver_stop_action_set(struct driver_stop_action *a, enum driver_stop_do what, const char *fmt, ...)
        _printf_(3, 4);
/* DRIVER_STOP_FAIL with error (negative errno) and the message. */
void driver_stop_action_fail(struct driver_stop_action *a, int error, const char *fmt, ...) _printf_(3, 4);
/* "ns/a (DaemonSet ns/x); ns/b (...)", each after verb; "no DRA driver pod on the node". */
void driver_stop_print_pods(FILE *f, const struct pod_rec *const *drivers, size_t n, const char *verb);
/* Whether the driver pods of record r are back: none expected (no DaemonSet was
 * recorded), or one Running and Ready; else msg says what is awaited. */
bool driver_stop_pods_back(const struct driver_stop_record *r, const struct driver_stop_view *v, char *msg,
                           size_t size);
/* The configuration's own strategy and argument, and nothing else. */
bool driver_stop_is_configured(const struct driver_stop_ops *ops, const char *arg,
                               const struct driver_stop_record *r);

/* --driver NAME without --driver-stop: the label key that stops the driver, from its
 * DaemonSet (the apps/v1 object; what names it in messages, e.g. "DaemonSet ns/x"):
 * the one key of spec.template.spec.nodeSelector, keys of kubernetes.io and k8s.io
 * (kubernetes.io/os ...) not counted, since the cluster owns them. 0 with *ret_key
 * (malloc'd); -E2BIG (several keys) or -ENOENT (none) with *ret_why, the refusal
 * (malloc'd, naming the keys and the flag to give); -ENOMEM. */
int driver_stop_label_key(const cJSON *daemonset, const char *what, char **ret_key, char **ret_why);
