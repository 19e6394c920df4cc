/* What plan, drain, uncordon and maintain share between verb-drain.c (the flags, the
 * runs and their display, the verbs' lifecycle) and verb-plan.c (the plans, read
 * asynchronously): the verb's state and the few functions one calls in the other.
 * Private to drainer/cmd. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "app.h"
#include "drainargs.h"
#include "drainer/ctl/fleet.h"
#include "drainer/dra/seamless.h"
#include "drainer/drain/plan.h"
#include "drainer/drain/state.h"

struct drain_verb;
struct node_snapshot;
struct node_input;
struct kube_call;
struct taint_rule_discovery;
struct driver_key_read;
struct health_probe;
struct seamless_check;
struct sysbus;

/* One request of a server dry run and its answer. */
struct dry_call {
        struct plan_job *job;
        struct kube_call *call;
        bool done;
        int error;
        long status;
        bool ns_terminating;
        char *message;
};

#define OUT_OF_SERVICE_AFTER_DEFAULT (5 * 60 * USEC_PER_SEC)

struct oos_args {
        bool on;
        bool after_given;
        uint64_t after_usec;
};

struct drainlike_opts {
        const char *selector;
        unsigned max_parallel; /* 0: not given */
        bool metrics;
        struct oos_args oos; /* --out-of-service (not uncordon's) */
};

/* How long the shared claims and budgets stay watched after a node's engine let go:
 * the next node of -l starts at once and borrows a warm cache. */
#define FLEET_LINGER_USEC (10 * USEC_PER_SEC)

/* The -o json summary's schema: 1 since the metrics left it (--metrics-in-output). */
#define SUMMARY_SCHEMA_VERSION 1

/* One plan (node and driver) being read: the reads one after the other, each from
 * the loop (the DeviceTaintRule discovery, the snapshot, the driver's label key, the
 * health probes, the seamless check), then the output or the server dry run. */
struct plan_job {
        struct drain_verb *v;
        const char *node;
        struct drain_args args; /* the command's, or scoped to one driver */
        cJSON *list;            /* -l or several --driver with -o json: its items */
        struct plan_options po;
        struct taint_rule_discovery *disc;
        struct node_snapshot *snap;
        const struct node_input *in; /* the snapshot's */
        struct drain_scope_view sv;
        bool sv_ready;
        const char *conflict;
        struct driver_key_read *key_read;
        char *key, *key_from, *key_why;
        struct plan p;
        bool p_ready;
        size_t probe_at; /* the next pod of p to probe */
        struct health_probe *probe;
        struct seamless_check *seam_check;
        struct seamless_answer seam;
        bool seam_known;
        struct dry_call cordon;
        struct dry_call *calls; /* one per pod of p */
        size_t calls_left;
};

/* The display of one run of the fleet (fleet.h's fleet_node is what the fleet knows). */
struct run_display {
        bool active;         /* its engine runs: its part of the live block is drawn */
        bool has_last_phase; /* the last progress drawn */
        enum drain_phase last_phase;
        char *last_line;
        char *block; /* its part of the live block (terminal) */
        int block_lines;
        int code;          /* its exit code, once reported */
        cJSON *json;       /* its -o json summary, once reported */
        char *rerun;       /* refused by a recorded action: the command to run with the flag */
        char *api_message; /* timed out waiting for the API server: what it said last */
};

struct drain_verb {
        /* parse */
        struct drain_args a;
        bool a_ready;
        struct config_argv c;
        bool c_ready;
        struct drainlike_opts o;
        const char *verb, *node;
        char **cmd;
        bool is_plan, is_maintain;
        int argc; /* the command line as given (before --config), for the rerun line */
        char **argv;
        enum output_format fmt;

        struct app *app;
        bool stopping, stopped;
        unsigned in_flight; /* callbacks still to come: reads, closes, the fleet, a command */
        int code;

        /* -l: the nodes */
        struct kube_call *list_call;
        char **names;
        size_t n_names;
        char *list_message;

        /* plan: one job at a time, the nodes (or NODE) times the drivers */
        struct plan_job *job;
        size_t plan_node, plan_driver;
        int plan_node_worst; /* this node's worst result over its drivers */
        cJSON *plan_doc;     /* -o json with a list */
        size_t plan_items_before;

        /* drain, uncordon, maintain: a run per node and driver */
        struct drain_args *runs;
        struct fleet_run *fleet_runs;
        char **stop_keys;
        size_t n_runs, runs_per_node;
        struct run_display *disp;
        size_t key_at; /* --driver without --driver-stop: the next run whose key is read */
        struct node_snapshot *snap;
        bool snap_reading;
        const char *snap_node;
        struct driver_key_read *key_read;
        int keys_worst;
        struct seamless_check *seam_check;
        struct seamless_answer seam;
        struct sysbus *bus;
        uv_signal_t sigint, sigterm;
        bool signals;
        struct drain_fleet *fleet;
        bool fleet_running;
        int stage_worst; /* the worst exit code of the goal now running */
        int maintain_r;  /* maintain of one run: its result as the old sequence gave it */
        int command_status;
        bool tty;   /* stderr is a terminal: one live block for every running node */
        bool trail; /* stdout is not a terminal (text output): a line per eviction and claim */
        int drawn_lines;
        uint64_t last_draw;
};

/* verb-drain.c */
/* A callback the verb waited for came: false if the verb is stopping (the callback
 * then does nothing more). */
bool drain_verb_op_ended(struct drain_verb *v);
void drain_verb_quit(struct drain_verb *v, int code);
/* Closes s (NULL ok); the verb's stop waits for it. */
void drain_verb_close_snapshot(struct drain_verb *v, struct node_snapshot *s);
void drain_verb_print_json(cJSON *j);
int drain_verb_exit_code(int r);
/* A -o json List (selector: the verb's -l); max_parallel 0: left out. */
cJSON *drain_verb_list_json(struct drain_verb *v, const char *verb, unsigned max_parallel, int code);

/* verb-plan.c */
/* The plans of every node (NODE or -l's) and --driver, one at a time; then quits. */
void drain_verb_plans_start(struct drain_verb *v);
/* Stops what the plan waits for (its callbacks then see the verb stopping). */
void drain_verb_plan_cancel(struct plan_job *job);
void drain_verb_plan_free(struct plan_job *job);
/* The node's driver pods (DaemonSet-controlled, by the plan options' selectors). */
int drain_verb_driver_pods(const struct node_input *in, const struct plan_options *po,
                           const struct pod_rec ***ret, size_t *ret_n);
