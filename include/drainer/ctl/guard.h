/* The guard of a DRA driver's termination, as a controller: one run decides, over
 * time, whether the driver on a node may stop. While the node is being drained
 * (cordoned, or tainted by Cluster Autoscaler, Karpenter or drainer) it holds until
 * no ResourceClaim is on the node and no other claim-holding pod is left; otherwise
 * it lets go at once. It reads a node view (its own, or one the caller shares
 * among runs), watches and never polls, writes nothing, and knows no argv, no
 * terminal and no exit code: it says what it decided through its handlers. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/base/log.h"

struct kube_client;
struct node_view;
struct selector;
struct timesrc;
struct guard_run;

#define GUARD_DEFAULT_GRACE_SECONDS 30

/* How a run ended. */
enum guard_outcome {
        GUARD_RELEASED,  /* the driver may stop: not draining, nothing held, or the node gone */
        GUARD_TIMED_OUT, /* gave up at the deadline with something still held */
        GUARD_FAILED,    /* the API could not be read (RBAC, errors), out of memory, or stopped */
        _GUARD_OUTCOME_MAX,
        _GUARD_OUTCOME_INVALID = -EINVAL,
};

const char *guard_outcome_to_string(enum guard_outcome o);

/* What a run guards; every pointer is borrowed and must outlive the run. */
struct guard_config {
        const char *node;
        /* The deadline: deadline_usec if not 0; else a margin before the end of
         * grace_seconds if >= 0; else before the end of own_pod's grace period (its
         * deletion's, when it is being deleted), GUARD_DEFAULT_GRACE_SECONDS until
         * that pod is read or when there is none. */
        uint64_t deadline_usec;
        int64_t grace_seconds;
        const char *own_pod; /* "ns/name" of the driver pod this guards, or NULL */
        const struct selector *const *driver_selectors;
        size_t n_driver_selectors;
        const char *const *driver_namespaces;
        size_t n_driver_namespaces;
};

struct guard_handlers {
        /* A line for people about what the run sees or decided (the start, "waiting:
         * ...", the end): the caller decides where it goes. May be NULL. */
        void (*on_note)(struct guard_run *g, enum log_level level, const char *line, void *userdata);
        /* The run is over; result (borrowed from the run) is its last line, which may
         * be answered to whoever asked: it names no object of another namespace. Runs
         * once, from the loop (never from inside a call of the caller). */
        void (*on_done)(struct guard_run *g, enum guard_outcome outcome, const char *result, void *userdata);
};

/* 0, or -ENOMEM. */
int guard_run_new(struct kube_client *client, struct timesrc *ts, const struct guard_config *cfg,
                  const struct guard_handlers *h, void *userdata, struct guard_run **ret);
/* Starts the run: the deadline counts from now. With shared (borrowed, started by
 * the run as it needs parts of it), the run reads that view, and its owner passes
 * the view's events on with guard_run_view_*() below; else the run has its own.
 * 0, or a negative errno: then the run has ended (on_done comes, GUARD_FAILED). */
int guard_run_start(struct guard_run *g, struct node_view *shared);
/* Ends the run early as GUARD_FAILED with this line (a signal, a server stopping);
 * nothing if it has ended already. on_done follows from the loop. */
void guard_run_fail(struct guard_run *g, const char *line);
/* Seconds since the start, and what the last "waiting" note held in counts ("2
 * ResourceClaims on the node; 1 claim-holding pod", NULL before), for such lines. */
double guard_run_elapsed_seconds(struct guard_run *g);
const char *guard_run_held_counts(const struct guard_run *g);
bool guard_run_finished(const struct guard_run *g);

/* The events of a shared view, passed on by its owner to each run reading it. */
void guard_run_view_changed(struct guard_run *g);
void guard_run_view_synced(struct guard_run *g, unsigned part);
void guard_run_view_error(struct guard_run *g, unsigned part, int error, const char *message);

/* Stops the run's timers and its own view; closed runs from the loop once the
 * view's calls have ended (never from inside this call); then guard_run_free().
 * on_done does not run after this. */
void guard_run_stop(struct guard_run *g, void (*closed)(void *userdata), void *userdata);
/* NULL ok; returns NULL. */
struct guard_run *guard_run_free(struct guard_run *g);
