/* --driver NAME without --driver-stop: the label strategy, its KEY read from the
 * driver's DaemonSet (driverstop.h driver_stop_label_key): from the DaemonSet that
 * controls the driver's plugin pod on the node or, once stopped, the one recorded in
 * drainer.io/driver-stop.NAME (never an annotation's key: the DaemonSet says which
 * label stops the driver). Reads only; asynchronous, one GET. */
#pragma once

#include "drainer/ctl/profile.h"
#include "drainer/dra/nodeview.h"

struct kube_client;
struct timesrc;
struct driver_key_read;

/* error 0: key and from ("DaemonSet ns/name"); -EPERM: why says why no key can be taken
 * and what to give instead; another negative errno: why says which read failed. The
 * strings are valid during the call; the read is freed after it returns. */
typedef void (*driver_key_fn)(int error, const char *key, const char *from, const char *why, void *userdata);

/* The key that stops driver p->drivers[0] on in's node (in: a snapshot's input, used
 * during this call only). 0, or a negative errno (nothing started, done never runs);
 * done runs once from the loop, never from inside this call. */
int driver_key_read_start(struct kube_client *client, struct timesrc *ts, const struct node_input *in,
                          const struct drain_profile *p, driver_key_fn done, void *userdata,
                          struct driver_key_read **ret);
/* done runs later with -ECANCELED. */
void driver_key_read_cancel(struct driver_key_read *r);
