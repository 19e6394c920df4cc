/* Device health (serve --on-unhealthy-device=report|drain-device): which devices of the served
 * node, or of every node, are reported unhealthy, and which turned so or healthy
 * again since the last look. Two reports count (DESIGN.md "Device health"):
 *   - the driver's own device taint: a NoSchedule or NoExecute taint on the device in
 *     its ResourceSlice (KEP-5055; only the driver writes its slices);
 *   - a pod's status.allocatedResourcesStatus (KEP-4680: the kubelet copies the
 *     driver's health stream there) saying Unhealthy, read for one node only: every
 *     pod of the cluster is not worth a watch in the cluster mode.
 * Each change is an Event on the Node (through the borrowed announcer) and a metric
 * (drainer_device_unhealthy, drainer_device_health_changes_total), and is told to the
 * caller. Acts on nothing: nothing is evicted, tainted or written but the Events.
 * Prints nothing, never runs the loop. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/base/macro.h"

struct kube_client;
struct timesrc;
struct announcer;
struct node_rec;
struct device_health;

/* What serve does about a device reported unhealthy. */
enum device_health_action {
        DEVICE_HEALTH_OFF,    /* "off": nothing is watched */
        DEVICE_HEALTH_REPORT, /* "report": Events and metrics */
        DEVICE_HEALTH_DRAIN,  /* "drain-device": and a device-scoped drain of it (the drain manager's) */
        _DEVICE_HEALTH_ACTION_MAX,
        _DEVICE_HEALTH_ACTION_INVALID = -EINVAL,
};
const char *device_health_action_to_string(enum device_health_action a);
enum device_health_action device_health_action_from_string(const char *s);

struct device_health_options {
        const char *node;                 /* the one node; NULL: every node (the drivers' taints only) */
        enum device_health_action action; /* REPORT or DRAIN: what the Events say is done */
        uint64_t debounce_usec;           /* a look this long after a change; 0: 1 s */
};

struct device_health_change {
        const char *node;
        /* "DRIVER/POOL/DEVICE"; for a pod's report that names no device the node publishes
         * (a CDI device ID), that resourceID */
        const char *device;
        bool unhealthy;      /* turned unhealthy; false: no longer reported so */
        bool published;      /* device names a device of a ResourceSlice of node (it can be drained) */
        const char *message; /* who reports it (the Event's message), one line */
};

struct device_health_handlers {
        /* The Node by name, for the Events' involvedObject (NULL: no Event). */
        const struct node_rec *(*node)(const char *name, void *userdata);
        void (*on_change)(struct device_health *d, const struct device_health_change *c, void *userdata);
        /* A watch failed (what: "resourceslices", "pods"); it retries by itself. */
        void (*on_error)(struct device_health *d, const char *what, int error, const char *message,
                         void *userdata);
        /* After device_health_stop(): both watches ended; it may be freed now. */
        void (*on_stopped)(struct device_health *d, void *userdata);
};

/* o's strings are copied; h and the announcer are borrowed. */
int device_health_new(struct kube_client *client, struct timesrc *ts, struct announcer *announcer,
                      const struct device_health_options *o, const struct device_health_handlers *h,
                      void *userdata, struct device_health **ret);
int device_health_start(struct device_health *d);
/* Stops the watches; on_stopped follows from the loop. */
void device_health_stop(struct device_health *d);
bool device_health_idle(const struct device_health *d);
void device_health_free(struct device_health *d);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct device_health *, device_health_free);

/* How many devices are reported unhealthy now (after the last look). */
size_t device_health_count(const struct device_health *d);
