/* The cluster side of the upgrade question: whether the DRA driver of a
 * driver-scoped drain gets seamless upgrades, for `plan --driver` (says so) and `maintain
 * --driver` (runs its command without evicting anything, unless --force-drain).
 * The decision itself is driver_upgrade_seamless (upgrade.h), the one doctor's
 * driver-rollout check makes; this reads what it needs: the driver's DaemonSet
 * (the controller of a driver pod on the node; with several, the one whose pod
 * template names the driver) and the kubelet versions of the nodes its pods run
 * on. Synchronous: runs the app's loop until the reads are done. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "app.h"
#include "drainer/objects.h"

struct seamless_answer {
        bool seamless;
        char daemonset[512]; /* "ns/name", or "" when none was found */
        char why[768];       /* for people: the reason either way */
};

/* driver: the driver's name; pods: the node's pods (its driver pods are the
 * DaemonSet-controlled ones among them, filtered by is_driver). 0 with *ret filled
 * (seamless false with a reason when no DaemonSet is found), or a negative errno
 * of a read that failed (logged). */
int seamless_check(struct app *app, const char *driver, const struct pod_rec *const *drivers, size_t n,
                   struct seamless_answer *ret);
