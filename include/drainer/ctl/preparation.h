/* The preparation of drain, uncordon and maintain runs, before the fleet (fleet.h)
 * changes anything: the nodes a label selector matches (paged, sorted), each run's
 * driver label KEY (--driver without --driver-stop: driverkey.h, one snapshot per
 * node), and maintain's seamless check (a driver that upgrades without a drain). Reads
 * only; each answer comes by callback, from the loop; prints nothing. One step at a
 * time. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "drainer/ctl/fleet.h"
#include "drainer/ctl/profile.h"
#include "drainer/dra/seamless.h"

struct kube_client;
struct timesrc;
struct drain_preparation;

struct preparation_callbacks {
        /* The nodes matching the selector, sorted (names taken by the callee: free them
         * with nodeset_free()); error < 0: message is the API server's, or NULL. */
        void (*on_nodes)(struct drain_preparation *p, int error, const char *message, char **names, size_t n,
                         void *userdata);
        /* Run i's KEY (driverkey.h's answer: error 0 with key and from; -EPERM or another
         * error with why). The next run's read follows. */
        void (*on_key)(struct drain_preparation *p, size_t i, int error, const char *key, const char *from,
                       const char *why, void *userdata);
        /* Every run's KEY was answered (error 0), or a read stopped them (message says
         * which; NULL: out of memory). */
        void (*on_keys_done)(struct drain_preparation *p, int error, const char *message, void *userdata);
        /* maintain: the driver's seamless answer, or error and message (NULL: out of memory). */
        void (*on_seamless)(struct drain_preparation *p, int error, const char *message,
                            const struct seamless_answer *ans, void *userdata);
};

int drain_preparation_new(struct kube_client *client, struct timesrc *ts,
                          const struct preparation_callbacks *cb, void *userdata,
                          struct drain_preparation **ret);
/* The Nodes matching selector (validated: nodeset_list_path()). 0, or a negative errno
 * (nothing started, no callback). */
int drain_preparation_list_nodes(struct drain_preparation *p, const char *selector);
/* The KEY of each of the n runs (the fleet's, borrowed until on_keys_done), one after the other,
 * one snapshot for consecutive runs of the same node. 0, or a negative errno. */
int drain_preparation_read_keys(struct drain_preparation *p, const struct fleet_run *runs, size_t n);
/* Whether profile's driver (drivers[0]) upgrades seamlessly, from node's driver pods. */
int drain_preparation_check_seamless(struct drain_preparation *p, const char *node,
                                     const struct drain_profile *profile);
/* Cancels what is in flight; no callback runs after this; closed (NULL ok) runs once
 * every read has ended (from the loop; at once if nothing was in flight), then the
 * preparation is freed. NULL ok (closed does not run). */
void drain_preparation_close(struct drain_preparation *p, void (*closed)(void *userdata), void *userdata);
