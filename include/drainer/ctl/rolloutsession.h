/* A driver's rollout with what it shares with the cluster: the rollout runner
 * (rollout-runner.h), the drain slots it takes a node's turn from (kube/slots.h) and
 * the Events it announces (announcer.h), set up together and wound down in order:
 * the runner, then the slots (the releases of nodes that ended well reach the server
 * first, at most ROLLOUT_SESSION_SETTLE_USEC), then the Events still in flight. */
#pragma once

#include <stdint.h>

#include "drainer/base/timesrc.h"
#include "drainer/ctl/rollout-runner.h"

#define ROLLOUT_SESSION_SETTLE_USEC (10 * USEC_PER_SEC)

struct rollout_session;

struct rollout_session_options {
        /* the runner's options; its slots and announcer are the session's own */
        struct driver_rollout_options rollout;
        const char *instance; /* the Events' reporting instance (the host) */
        const char *identity; /* the slots' holder identity */
};

/* What rollout_session_new() could not set up. */
enum rollout_session_part {
        ROLLOUT_SESSION_ANNOUNCER,
        ROLLOUT_SESSION_SLOTS,
        ROLLOUT_SESSION_RUNNER,
};

/* Sets up the announcer, the slots (o->rollout.lease_namespace, max_parallel) and the
 * runner (cb and userdata are the runner's). 0, or a negative errno with
 * *ret_failed saying which part failed (nothing is left to close). */
int rollout_session_new(struct kube_client *client, struct timesrc *ts,
                        const struct rollout_session_options *o, const struct driver_rollout_callbacks *cb,
                        void *userdata, struct rollout_session **ret, enum rollout_session_part *ret_failed);
/* driver_rollout_start()'s. */
int rollout_session_start(struct rollout_session *s);
/* The runner, for its status. */
struct driver_rollout *rollout_session_runner(const struct rollout_session *s);
/* Winds everything down in order; stopped runs once, from the loop, when the last of
 * it has ended (then the session may be freed). */
void rollout_session_stop(struct rollout_session *s, void (*stopped)(void *userdata), void *userdata);
/* Only once stopped (or never started). NULL ok. */
void rollout_session_free(struct rollout_session *s);
