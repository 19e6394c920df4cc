/* A drain profile: how a node is drained and restored, whoever asks (a verb, serve's
 * manager, the fleet runner, the rollout runner): the eviction rules, the driver-stop
 * strategy, the scope, the timeouts. The non-CLI half of what the drain flags say; the
 * one function below is the only place it becomes an engine's options. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/dra/driverstop.h"
#include "drainer/dra/health.h"
#include "drainer/drain/device.h"
#include "drainer/drain/engine.h"

#define DRAIN_PROFILE_MAX_NAMESPACES 16

struct selector;

struct drain_profile {
        /* which pods go, which are the drivers' */
        struct selector *pod_sel;   /* NULL: every pod */
        struct selector **drv_sels; /* the driver pods' selectors (or the defaults) */
        size_t n_drv_sels;
        const char *driver_namespaces[DRAIN_PROFILE_MAX_NAMESPACES + 1]; /* NULL-terminated */
        size_t n_driver_namespaces;
        bool force;            /* evict pods without a controller */
        bool emptydir;         /* evict pods with emptyDir volumes */
        bool disable_eviction; /* DELETE instead of the Eviction API */
        int64_t grace;         /* seconds; -1: each pod's own */
        uint64_t skip_wait_for_delete_usec;
        /* the drivers: how they stop, the scope, their health */
        const struct driver_stop_ops *stop;
        const char *stop_arg;                             /* label KEY / systemd UNIT, or NULL */
        const char *drivers[DRIVER_STOP_MAX_DRIVERS + 1]; /* --driver scope, NULL-terminated */
        size_t n_drivers;
        bool skip_driver_stop;
        /* --device DRIVER/POOL/DEVICE: the drain is scoped to these devices (strings
         * borrowed from the caller), its state under device_scope (device.h) */
        struct drain_device devices[DRAIN_MAX_DEVICES];
        size_t n_devices;
        char device_scope[DRAIN_DEVICE_SCOPE_SIZE];
        bool ignore_health;
        struct health_target health_target;
        bool has_health;
        /* the node */
        bool force_uncordon;
        bool node_conditions;
        /* over time */
        uint64_t timeout_usec;   /* per goal; 0: none */
        bool restore_on_failure; /* a failed drain is undone (fleet, maintain) */
        bool force_drain;        /* maintain --driver: drain even when the driver upgrades seamlessly */
};

/* The plan options of profile p (selectors borrowed from p). */
void drain_profile_plan_options(const struct drain_profile *p, struct plan_options *ret);
/* The engine options for goal on node under p (selectors borrowed from p): everything
 * the profile says; the caller adds what is its own (units, a shared cluster view, an
 * out-of-service policy, a timeout of its own). */
void drain_profile_engine_options(const struct drain_profile *p, const char *node, enum engine_goal goal,
                                  struct engine_options *ret);
/* The same profile scoped to its i-th --driver only (the scope of one runner per driver). */
void drain_profile_for_driver(const struct drain_profile *p, size_t i, struct drain_profile *ret);
/* Frees what the profile owns (parsed selectors, the health target). */
void drain_profile_done(struct drain_profile *p);
