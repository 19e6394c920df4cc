/* The cluster side of the upgrade question: whether the DRA driver of a
 * driver-scoped drain gets seamless upgrades, for `plan --driver` (says so) and
 * `maintain --driver` (runs its command without evicting anything, unless
 * --force-drain). The decision itself is driver_upgrade_seamless (upgrade.h), the one
 * doctor's driver-rollout check makes; this reads what it needs: the driver's
 * DaemonSet (the controller of a driver pod on the node; with several, the one whose
 * pod template names the driver) and the kubelet versions of the nodes its pods run
 * on. Asynchronous: one read at a time, done runs once from the loop. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "drainer/kube/objects.h"

struct kube_client;
struct timesrc;
struct seamless_check;

struct seamless_answer {
        bool seamless;
        char daemonset[512]; /* "ns/name", or "" when none was found */
        char why[768];       /* for people: the reason either way */
};

/* error 0: ans says (seamless false with a reason when no DaemonSet is found);
 * else a read failed (-ECANCELED after seamless_check_cancel) and what says which
 * (ans NULL). The check is freed after done returns. */
typedef void (*seamless_done_fn)(int error, const char *what, const struct seamless_answer *ans,
                                 void *userdata);

/* driver: the driver's name; drivers: the node's driver pods (the DaemonSet-controlled
 * ones among them count; copied, the caller may free them after this call). 0, or a
 * negative errno (nothing started; done never runs). */
int seamless_check_start(struct kube_client *client, struct timesrc *ts, const char *driver,
                         const struct pod_rec *const *drivers, size_t n, seamless_done_fn done,
                         void *userdata, struct seamless_check **ret);
/* done runs later with -ECANCELED. */
void seamless_check_cancel(struct seamless_check *s);
