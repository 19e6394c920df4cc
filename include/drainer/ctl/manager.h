/* The drain manager: serve's controller. It watches its Node (or every Node) for
 * drainer.io/request, turns each request into a goal for the phase engine (engine.h)
 * run with the drain profile's options, holds a --max-parallel slot (slots.h) for
 * every drain, retries failed runs with backoff, reports a refusal by configuration
 * once, and posts the engines' Events (announcer.h). What happens goes to the
 * caller's callbacks: the manager prints nothing, logs only at debug level, and
 * knows no flag, terminal or exit code. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "drainer/base/log.h"
#include "drainer/base/macro.h"
#include "drainer/dra/units.h"
#include "drainer/drain/engine.h"

struct kube_client;
struct transport;
struct timesrc;
struct drain_profile;
struct node_rec;
struct drain_manager;
struct mwindows;

/* The annotation on drainer's namespace (lease_namespace) that pauses the fleet. */
#define DRAINER_ANN_PAUSE "drainer.io/pause"

struct drain_manager_options {
        const char *node;                    /* the one Node to serve; NULL: every Node */
        const struct drain_profile *profile; /* borrowed: how every node is drained and restored */
        struct units units;                  /* for the engines' driver-stop strategies */
        unsigned max_parallel;               /* drain slots (Leases); 0: no limit */
        /* 1-100: max_parallel is this percentage of the selected nodes, rounded down, at
         * least 1 (Karpenter's disruption budgets), recounted as nodes come and go: with
         * every Node (node NULL) the Nodes watched; for one node, the Nodes of the cluster
         * (counted by a list of one item when a drain asks, at most once a minute).
         * 0: max_parallel is a count. */
        unsigned max_parallel_percent;
        /* No new drain starts outside these (borrowed; NULL: any time); drains in flight
         * and undo requests are never held. */
        const struct mwindows *window;
        const char *lease_namespace;  /* where the slot Leases live */
        uint64_t lease_duration_usec; /* 0: the slots' default */
        const char *identity;         /* this process in Leases and Events; NULL: none */
        /* serve --on-unhealthy-device: the served nodes' device health watched
         * (devicehealth.h), each change an Event on the Node, a metric and a DEVICE event;
         * DEVICE_HEALTH_DRAIN: and a device-scoped drain (the profile's, scoped to the one
         * device) of each device reported unhealthy that the node publishes, one device of
         * a node at a time, under the slots, the pause and the window as node drains; a
         * drained device stays so until `drainer uncordon NODE --device` (DESIGN.md
         * "Device health"). */
        int device_health; /* enum device_health_action */
        /* DEVICE_HEALTH_DRAIN: at most this many device drains of one node at once (serve
         * --unhealthy-devices-per-node); 0: 1. */
        unsigned device_drains_per_node;
};

/* What happened, for the caller's logs and status lines. */
enum drain_manager_event_kind {
        DRAIN_MANAGER_READY,          /* the first reconcile after the Node watch synced (n_nodes) */
        DRAIN_MANAGER_IDLE,           /* a reconcile ended with no engine running */
        DRAIN_MANAGER_STARTED,        /* an engine started for goal on node */
        DRAIN_MANAGER_SWITCHED,       /* the request changed under a running engine: goal next */
        DRAIN_MANAGER_PHASE,          /* node entered phase (message: drainer.io/message then) */
        DRAIN_MANAGER_DONE,           /* the engine reached goal (message: its summary) */
        DRAIN_MANAGER_REFUSED,        /* refused by this configuration: reported once, until the
                                       * Node's drainer.io/ annotations change */
        DRAIN_MANAGER_FAILED,         /* the engine gave up (error); retried after retry_usec */
        DRAIN_MANAGER_START_FAILED,   /* an engine could not be started (error) */
        DRAIN_MANAGER_WAITING,        /* node waits (for a slot), message written on the Node */
        DRAIN_MANAGER_SLOT_ERROR,     /* a slot cannot be taken (error, message); retried */
        DRAIN_MANAGER_BAD_STATE,      /* the Node's drainer.io/ annotations cannot be parsed */
        DRAIN_MANAGER_PATCH_CONFLICT, /* a Node patch met a newer Node (409): written again */
        DRAIN_MANAGER_PATCH_FAILED,   /* a Node patch failed (error, message): retried */
        DRAIN_MANAGER_WATCH_ERROR,    /* the Node watch failed (error, message): it retries */
        DRAIN_MANAGER_PAUSE,          /* drainer.io/pause changed (message: "paused"/"resumed") */
        DRAIN_MANAGER_LIMIT,          /* --max-parallel N%: the slots are now max_parallel of n_nodes */
        DRAIN_MANAGER_DEVICE,         /* device_health: a device of node turned unhealthy or not any more
                                       * (unhealthy; message: who reports it) */
        _DRAIN_MANAGER_EVENT_KIND_MAX,
};

struct drain_manager_event {
        enum drain_manager_event_kind kind;
        const char *node;   /* NULL for READY, IDLE, WATCH_ERROR */
        const char *device; /* a device drain's device (DRIVER/POOL/DEVICE): STARTED, PHASE, DONE,
                             * FAILED, START_FAILED, WAITING; else NULL */
        enum engine_goal goal;
        enum drain_phase phase;
        int error;                            /* negative errno, or 0 */
        const char *message;                  /* or NULL */
        const struct engine_summary *summary; /* DONE, REFUSED, FAILED */
        uint64_t retry_usec;                  /* FAILED, SLOT_ERROR */
        size_t n_nodes;                       /* READY */
        size_t n_running;                     /* engines running after this event */
        unsigned max_parallel;                /* LIMIT: the slots now, of n_nodes selected */
        bool unhealthy;                       /* DEVICE */
};

struct drain_manager_callbacks {
        void (*on_event)(struct drain_manager *m, const struct drain_manager_event *ev, void *userdata);
        /* A Node was added or changed, before the manager reconciles it (n borrowed). */
        void (*on_node)(struct drain_manager *m, const struct node_rec *n, void *userdata);
        /* After drain_manager_stop(): every engine, call, Event, slot and watch has ended;
         * the manager may be freed now. Runs from the loop, never from within stop. */
        void (*on_stopped)(struct drain_manager *m, void *userdata);
};

/* Strings of o are borrowed; cb is borrowed and may have NULL members. */
int drain_manager_new(struct kube_client *client, struct transport *transport, struct timesrc *ts,
                      const struct drain_manager_options *o, const struct drain_manager_callbacks *cb,
                      void *userdata, struct drain_manager **ret);
/* Starts the Node watch; requests are acted on from the loop. */
int drain_manager_start(struct drain_manager *m);
/* Stops the engines (drains resume from the Nodes' annotations), cancels calls, stops
 * the slots and the watch; on_stopped follows once all of it has ended. */
void drain_manager_stop(struct drain_manager *m);
void drain_manager_free(struct drain_manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct drain_manager *, drain_manager_free);

/* The Node watch has its first complete list. */
bool drain_manager_synced(const struct drain_manager *m);
/* Ready to act (serve's /readyz): the Node watch has synced and the API server
 * answered the last request (a transport failure or a 5xx since the last answer makes
 * it not ready until one succeeds again). Else false, with why in reason. */
bool drain_manager_ready(const struct drain_manager *m, char *reason, size_t size);
/* The Node as watched, or NULL (borrowed until the next turn of the loop). */
const struct node_rec *drain_manager_node(const struct drain_manager *m, const char *name);
/* Sends the merge patch body (JSON, taken) to the Node name, as the manager's own
 * writes go (a failure is reported as PATCH_FAILED): a request made on the caller's
 * behalf (serve --on-shutdown). Returns 0, or a negative errno (body freed): -EBUSY while
 * the previous one for that Node is in flight. */
int drain_manager_patch_node(struct drain_manager *m, const char *name, char *body);
/* --max-parallel pct% of n selected nodes: rounded down, at least 1, at most 1024. */
unsigned drain_manager_percent_of(unsigned pct, size_t n);
/* Whether new drains are held now by drainer.io/pause on the namespace. */
bool drain_manager_paused(const struct drain_manager *m);
/* The options it was made with (their strings borrowed from the caller). */
const struct drain_manager_options *drain_manager_options(const struct drain_manager *m);
/* How many engines run now. */
size_t drain_manager_running(const struct drain_manager *m);

const char *drain_manager_event_kind_to_string(enum drain_manager_event_kind k);

/* What a daemon says of an event (ctl/managerlog.c): a log line at level (log.h's
 * LOG_LEVEL_*), and the short status a service manager shows (systemd's STATUS=);
 * either NULL when the event has none. */
struct drain_manager_text {
        enum log_level level;
        char *line, *status;
};
/* The text of ev under the manager's options o (the node served, the slots' namespace,
 * --max-parallel P%). 0, or -ENOMEM (ret empty). */
int drain_manager_describe(const struct drain_manager_options *o, const struct drain_manager_event *ev,
                           struct drain_manager_text *ret);
void drain_manager_text_done(struct drain_manager_text *t);
