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
struct planner;
struct drain_preparation;
struct drain_run;
struct progress_board;

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

/* One plan (node and driver): the planner's (ctl/planner.h), then its output or its
 * server dry run. */
struct plan_job {
        struct drain_verb *v;
        const char *node;
        struct drain_args args; /* the command's, or scoped to one driver */
        cJSON *list;            /* -l or several --driver with -o json: its items */
        struct planner *pl;     /* owned, until closed */
};

/* What the verb keeps of one run of the fleet (fleet.h's fleet_node is what the fleet
 * knows; its display is the progress board's). */
struct run_display {
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

        /* the preparation (ctl/preparation.h): -l's nodes, the runs' keys, maintain's
         * seamless check */
        struct drain_preparation *prep;
        char **names; /* -l: the nodes */
        size_t n_names;

        /* plan: one job at a time, the nodes (or NODE) times the drivers */
        struct plan_job *job;
        size_t plan_node, plan_driver;
        int plan_node_worst; /* this node's worst result over its drivers */
        cJSON *plan_doc;     /* -o json with a list */
        size_t plan_items_before;

        /* drain, uncordon, maintain: a run per node and driver (ctl/drainrun.h) */
        struct drain_run *run;
        size_t n_runs, runs_per_node;
        struct run_display *disp;
        int keys_worst; /* --driver without --driver-stop: the worst of the key reads */
        struct seamless_answer seam;
        int signum;      /* the first SIGINT or SIGTERM: the exit code says it (EXIT_INTERRUPTED) */
        int stage_worst; /* the worst exit code of the goal now running */
        int maintain_r;  /* maintain of one run: its result as the old sequence gave it */
        int command_status;
        bool tty;   /* stderr is a terminal: one live block for every running node */
        bool trail; /* text output: a line per eviction and claim on stdout (above the live block) */
        struct progress_board *board; /* owned: the live block or the plain lines */
};

/* verb-drain.c */
/* A callback the verb waited for came: false if the verb is stopping (the callback
 * then does nothing more). */
bool drain_verb_op_ended(struct drain_verb *v);
void drain_verb_quit(struct drain_verb *v, int code);
void drain_verb_print_json(cJSON *j);
int drain_verb_exit_code(int r);

/* verb-plan.c */
/* The plans of every node (NODE or -l's) and --driver, one at a time; then quits. */
void drain_verb_plans_start(struct drain_verb *v);
/* Closes the plan's planner (none of its callbacks runs after this). */
void drain_verb_plan_cancel(struct plan_job *job);
void drain_verb_plan_free(struct plan_job *job);
