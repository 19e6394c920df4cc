/* Whether the API server can be reached, said to a person while it cannot: once the
 * client has answered nothing but failures for 5 s, a line every 30 s while it lasts,
 * and one when the API server answers again. It ticks (once a second) only while the
 * client fails and calls are in flight: an idle loop is neither kept alive nor woken. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "drainer/base/timesrc.h"
#include "drainer/kube/client.h"

#define KUBE_REACH_AFTER_USEC  (5 * USEC_PER_SEC)
#define KUBE_REACH_REPEAT_USEC (30 * USEC_PER_SEC)
#define KUBE_REACH_TICK_USEC   (1 * USEC_PER_SEC)

/* A line for a person: reachable false, "cannot reach the API server ..."; true, "the
 * API server ... answers again". The line is valid during the call. */
typedef void (*kube_reach_fn)(bool reachable, const char *line, void *userdata);

struct kube_reach {
        struct kube_client *client; /* borrowed */
        struct timesrc *ts;         /* borrowed */
        const char *server;         /* borrowed: the server's URL, for the lines */
        const char *source;         /* borrowed: where it was configured (the kubeconfig) */
        kube_reach_fn fn;
        void *userdata;
        struct dtimer timer;
        bool ready, warned;
        uint64_t warned_at;
};

/* 0, or -ENOMEM. */
int kube_reach_init(struct kube_reach *r, struct kube_client *c, struct timesrc *ts, const char *server,
                    const char *source, kube_reach_fn fn, void *userdata);
/* Before a turn of the loop: arms the tick if the client has seen a failure since
 * (or one is to say that the server answers again). */
void kube_reach_poke(struct kube_reach *r);
/* Stops the tick (a poke arms it again). */
void kube_reach_stop(struct kube_reach *r);
/* Releases the timer. Nothing if not initialized. */
void kube_reach_done(struct kube_reach *r);
