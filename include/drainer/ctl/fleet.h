/* The fleet runner: one goal over a list of runs (a node, or one --driver of a node),
 * at most max_parallel at once, each run with its own engine and its state on its Node
 * (drain, uncordon; -l and several --driver). maintain is drain, a command, restore:
 * every run drained, then the command once (uv_spawn, its exit through a callback), then
 * every run restored, also after a failed command with restore_on_failure; written here
 * once, for one run and for many. A run that fails does not stop the others;
 * drain_fleet_stop() (an interrupt) stops each running engine where it is and starts no
 * other. The engines' notices become Events on their Node (announcer.h); everything
 * else is the caller's, through callbacks: no printing, no argv, no exit codes. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/base/macro.h"
#include "drainer/ctl/profile.h"
#include "drainer/dra/units.h"
#include "drainer/drain/engine.h"

struct kube_client;
struct transport;
struct timesrc;
struct uv_loop_s;
struct announcer;
struct drain_fleet;

enum fleet_goal {
        FLEET_GOAL_DRAIN,
        FLEET_GOAL_UNCORDON,
        FLEET_GOAL_MAINTAIN, /* drain, the command, restore */
        _FLEET_GOAL_MAX,
};

/* One run as the caller names it. */
struct fleet_run {
        const char *node;                    /* borrowed */
        const struct drain_profile *profile; /* borrowed: the node's, or scoped to one driver */
};

/* What the fleet knows of one run: read by the callbacks, valid until drain_fleet_free(). */
struct fleet_node {
        size_t index;
        const char *node;                    /* borrowed */
        const struct drain_profile *profile; /* borrowed */
        enum engine_goal goal;               /* the goal of the engine now running, or of the last one */
        bool started; /* this goal's engine was started (false: an interrupt came first) */
        /* The last goal's end: 0, -ETIMEDOUT, -EPERM (refused: summary says by what), -EINTR
         * (interrupted: drain_fleet_stop), or another error (message says which). */
        int result;
        const char *message;    /* the engine's final message, or why it could not start; NULL */
        const char *needs_flag; /* -EPERM by a recorded action: the flag that allows it (engine.h) */
        /* The engine finished (not interrupted first): its summary. summary.plan is valid
         * only during on_node_done; message and needs_flag point to the two above. */
        bool summary_valid;
        struct engine_summary summary;
        /* Over every goal this run had in this fleet (maintain's drain and restore): the
         * phases' times and whether each was seen, pods evicted, claims waited for, changed. */
        struct engine_summary total;
        uint64_t started_usec;     /* the first start of this run (monotonic) */
        uint64_t run_started_usec; /* the current (or last) goal's start */
        /* The last progress: the phase (after an interrupt, the one the Node shows), the node. */
        bool progress_seen;
        bool has_phase;
        enum drain_phase phase;
        bool node_not_ready, out_of_service;
        bool node_seen; /* the Node was read: the two above are observed, else unknown */
        const char *progress_message;
        /* Pods whose eviction met a namespace being deleted, "ns/name", over every goal. */
        char **ns_terminating;
        size_t n_ns_terminating;
        int command_status; /* maintain: the command's exit status; -1 while not run */
};

struct drain_fleet_callbacks {
        /* The engine of n is about to start for n->goal. */
        void (*on_node_start)(struct drain_fleet *f, const struct fleet_node *n, void *userdata);
        void (*on_progress)(struct drain_fleet *f, const struct fleet_node *n,
                            const struct engine_progress *p, void *userdata);
        void (*on_trail)(struct drain_fleet *f, const struct fleet_node *n, const struct engine_trail *t,
                         void *userdata);
        /* n's goal ended: its engine idle, its Events posted (or, n->started false, it was
         * never started: an interrupt came first). Once per run and goal. */
        void (*on_node_done)(struct drain_fleet *f, const struct fleet_node *n, void *userdata);
        /* maintain: every run is drained and the command starts / exited with status
         * (128 + N for signal N; 127 with error < 0 when it could not be started). */
        void (*on_command)(struct drain_fleet *f, char *const *argv, void *userdata);
        void (*on_command_done)(struct drain_fleet *f, int status, int error, void *userdata);
        /* Once: every goal ended and everything the fleet had on the loop is closed. */
        void (*on_finished)(struct drain_fleet *f, void *userdata);
};

struct drain_fleet_options {
        enum fleet_goal goal;
        const struct fleet_run *runs; /* copied (the strings and profiles stay borrowed) */
        size_t n_runs;
        unsigned max_parallel;   /* runs at once; 0: 1 */
        char *const *command;    /* maintain: argv, NULL-terminated (borrowed) */
        bool restore_on_failure; /* maintain: restore after a failed command too */
        struct units units;      /* the systemd:UNIT strategy's unit control; ops NULL: none */
        bool share_informers;    /* one watch of Nodes, claims and budgets for every run (-l) */
        uint64_t linger_usec;    /* ... kept this long after a run let go (the next borrows it warm) */
        bool out_of_service;     /* engine.h's, for every drain */
        uint64_t out_of_service_after_usec;
        /* a run that cannot read its Node within the client's request timeout gives up
         * (engine.h: unread_timeout_usec): a one-shot command's, not a daemon's */
        bool bound_unread;
        const char *instance; /* this process in the Events (the host name); copied */
};

/* loop: where the command runs (maintain). Returns 0, -EINVAL (no run, a maintain without
 * a command) or -ENOMEM. */
int drain_fleet_new(struct kube_client *client, struct transport *transport, struct timesrc *ts,
                    struct uv_loop_s *loop, const struct drain_fleet_options *o,
                    const struct drain_fleet_callbacks *cb, void *userdata, struct drain_fleet **ret);
/* Sets the runs going (the first from the loop, never from inside this call). */
int drain_fleet_start(struct drain_fleet *f);
/* Interrupt: each running engine stops where it is (its state stays on its Node: the
 * same command resumes it), no other run starts, a running command is waited for;
 * on_finished follows. Idempotent. */
void drain_fleet_stop(struct drain_fleet *f);
bool drain_fleet_interrupted(const struct drain_fleet *f);
size_t drain_fleet_size(const struct drain_fleet *f);
const struct fleet_node *drain_fleet_node(const struct drain_fleet *f, size_t i);
/* Before drain_fleet_start() or after on_finished. NULL ok. */
void drain_fleet_free(struct drain_fleet *f);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct drain_fleet *, drain_fleet_free);

/* A command run asynchronously (uv_spawn, stdio inherited): done runs once, from the
 * loop, with its exit status (128 + N for signal N), or 127 and error < 0 when it could
 * not be started; the handle frees itself then. Returns 0 or -ENOMEM. */
typedef void (*fleet_command_fn)(int status, int error, void *userdata);
int fleet_command_spawn(struct uv_loop_s *loop, char *const *argv, fleet_command_fn done, void *userdata);
