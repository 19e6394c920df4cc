/* --driver NAME without --driver-stop: the label strategy, its KEY read from the
 * driver's DaemonSet (driverstop.h driver_stop_label_key), and one run per driver
 * (its own state keys, its own stop). */
#pragma once

#include "drainargs.h"

struct app;
struct snapshot;

/* The label key that stops driver a->drivers[0] on the snapshot's node: from the
 * DaemonSet that controls its plugin pod there or, once stopped, the one recorded in
 * drainer.io/driver-stop.NAME. 0 with *ret_key and *ret_from ("DaemonSet ns/name"),
 * both malloc'd; -EPERM with *ret_why (malloc'd: why none can be taken and what to
 * give instead); another negative errno with *ret_why (an API error). Reads only. */
int driver_key_resolve(struct app *app, const struct snapshot *s, const struct drain_args *a, char **ret_key,
                       char **ret_from, char **ret_why);

/* The run of driver i of a: a shallow copy scoped to that driver alone (borrowing
 * everything of a, so never drain_args_done() on it). */
void drain_args_for_driver(const struct drain_args *a, size_t i, struct drain_args *ret);
