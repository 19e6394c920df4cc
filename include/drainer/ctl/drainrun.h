/* The run of drain, uncordon and maintain once their nodes are known, in its order:
 * a run per node and --driver (each scoped to its driver: its own state keys and stop),
 * each run's driver label KEY read first where it is to come from the driver's
 * DaemonSet (--driver without --driver-stop; any refusal stops everything before a
 * change), the system bus (the systemd:UNIT strategy), maintain's seamless check (a
 * driver that upgrades without a drain: the command runs alone), then the fleet
 * (fleet.h). Owns the runs, the preparation, the bus, the fleet and the command;
 * reports through callbacks: no argv, no printing, no exit codes. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/ctl/fleet.h"
#include "drainer/ctl/profile.h"
#include "drainer/dra/seamless.h"

struct kube_client;
struct transport;
struct timesrc;
struct uv_loop_s;
struct drain_run;

/* Where a run stopped before (or instead of) its fleet. */
enum drain_run_step {
        DRAIN_RUN_KEYS,        /* the keys' reads could not start or failed (message) */
        DRAIN_RUN_KEY_REFUSED, /* a run's KEY was refused: on_key said why */
        DRAIN_RUN_BUS,         /* the system bus, which the systemd:UNIT strategy needs */
        DRAIN_RUN_SEAMLESS,    /* the seamless check could not start or failed (message) */
        DRAIN_RUN_COMMAND,     /* the command (of a seamless driver) could not be started */
        DRAIN_RUN_FLEET_SETUP, /* the fleet could not be made */
        DRAIN_RUN_FLEET_START, /* ... or started */
};

struct drain_run_callbacks {
        /* Run i's KEY: read (error 0, key and from: the DaemonSet) or not (-EPERM with
         * why, or another error). */
        void (*on_key)(struct drain_run *r, size_t i, const struct fleet_run *run, int error,
                       const char *key, const char *from, const char *why, void *userdata);
        /* The runs are set (every KEY in): the bus, the seamless check or the fleet next. */
        void (*on_runs_set)(struct drain_run *r, void *userdata);
        /* maintain --driver of one run: the driver's answer; seamless: the command runs
         * alone and on_command_done follows, else the fleet starts. */
        void (*on_seamless)(struct drain_run *r, const struct seamless_answer *ans, void *userdata);
        void (*on_command_done)(struct drain_run *r, int status, int error, void *userdata);
        /* The run stopped at step: error, and message (NULL: none, or out of memory). */
        void (*on_failed)(struct drain_run *r, enum drain_run_step step, int error, const char *message,
                          void *userdata);
        /* The fleet's (fleet.h), with this run's userdata. */
        struct drain_fleet_callbacks fleet;
};

struct drain_run_options {
        enum fleet_goal goal;
        const char *const *nodes; /* borrowed */
        size_t n_nodes;
        const struct drain_profile *profile; /* borrowed: the command's (every --driver) */
        bool key_from_daemonset;             /* each run's stop_arg: its driver DaemonSet's KEY */
        unsigned max_parallel;               /* nodes at once (0: 1): their drivers run together */
        char *const *command;                /* maintain: borrowed */
        bool share_informers;
        uint64_t linger_usec;
        bool out_of_service;
        uint64_t out_of_service_after_usec;
        bool bound_unread;    /* fleet.h's */
        const char *instance; /* copied by the fleet */
};

/* 0, -EINVAL (no node) or -ENOMEM. */
int drain_run_new(struct kube_client *client, struct transport *transport, struct timesrc *ts,
                  struct uv_loop_s *loop, const struct drain_run_options *o,
                  const struct drain_run_callbacks *cb, void *userdata, struct drain_run **ret);
/* How many runs: nodes times drivers (at least one each); run i is node i / per node. */
size_t drain_run_size(const struct drain_run *r);
size_t drain_run_per_node(const struct drain_run *r);
/* Starts the first step (its answers come from the loop). 0 or a negative errno. */
int drain_run_start(struct drain_run *r);
/* An interrupt: the fleet's drain_fleet_stop() (nothing before the fleet is stopped). */
void drain_run_interrupt(struct drain_run *r);
/* Cancels what is in flight; no callback runs after this; closed (NULL ok) runs once
 * everything has ended (at once when nothing was in flight, never from inside this
 * call's closes). Then drain_run_free(). NULL ok. */
void drain_run_close(struct drain_run *r, void (*closed)(void *userdata), void *userdata);
/* Before drain_run_start() or after closed. NULL ok. */
void drain_run_free(struct drain_run *r);
