/* The phase engine: level-triggered over a node view (nodeview.h: the node, its
 * pods, ResourceClaims, budgets and the node's ResourceSlices, its own or borrowing
 * serve's cluster view). Every change schedules one engine_reconcile(), which
 * re-reads the state persisted on the Node and takes the next safe step, so a
 * restart simply continues. Evictions are the evictor's (evictor.h); stopping and
 * bringing back the driver is the configured strategy's (driverstop.h), which the
 * engine holds as a pointer to its ops and names none. Its only API writes are the
 * Node's patches and the evictions; it posts no Event: what happened goes to the
 * caller's on_notice, and the caller announces it (Events: announcer.h). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "drainer/base/macro.h"
#include "drainer/dra/units.h"
#include "drainer/drain/plan.h"
#include "drainer/drain/state.h"

struct kube_client;
struct timesrc;
struct transport;
struct health_target;
struct cluster_view;
struct engine;

enum engine_goal {
        ENGINE_GOAL_DRAIN,    /* preflight .. drained */
        ENGINE_GOAL_UNCORDON, /* restore drivers, wait healthy, uncordon */
        _ENGINE_GOAL_MAX,
};

struct engine_options {
        const char *node;
        enum engine_goal goal;
        struct plan_options plan;           /* selectors are borrowed */
        int64_t grace_seconds;              /* < 0: each pod's own */
        bool disable_eviction;              /* DELETE instead of the Eviction API */
        bool force_uncordon;                /* uncordon even if someone else had cordoned */
        bool skip_driver_stop;              /* drain ends after wait-released */
        uint64_t skip_wait_for_delete_usec; /* --skip-wait-for-delete-timeout; 0: wait for every pod */
        const struct health_target *driver_health; /* NULL: no gRPC probe */
        uint64_t timeout_usec;                     /* 0: none; counts from engine_start() of this run */
        /* The Node not read this long after engine_start(): give up with -ETIMEDOUT
         * (nothing was read, so nothing was changed). A one-shot caller's answer to an
         * API server that never answers; 0: wait for it (serve: the server may come up
         * after drainer). */
        uint64_t unread_timeout_usec;
        /* --out-of-service: once the node has been not Ready (its Ready condition's
         * lastTransitionTime) for out_of_service_after_usec during a drain, apply
         * upstream's out-of-service taint, so that the control plane deletes its pods and
         * releases their claims without the kubelet. The one exception to "claims are
         * released by the kubelet's unprepare" (DESIGN.md), opt-in, never implied. */
        bool out_of_service;
        uint64_t out_of_service_after_usec;
        /* --node-conditions: mirror the drain in the Node's DrainInProgress and Drained
         * conditions (KEP-5683; drain_patch_conditions), written through nodes/status
         * before each stage's first action, and set back once the node is restored. */
        bool node_conditions;
        /* Handed to the driver-stop strategy (systemd:UNIT drives units through it); the
         * engine calls none of it. ops NULL: no unit control on this host. */
        struct units units;
        /* Borrowed: the Node, claims and budgets from the informers this process shares
         * (serve); NULL: the engine's node view has informers of its own. */
        struct cluster_view *shared;
};

/* One pod whose eviction a PodDisruptionBudget (or something else) holds back. */
struct engine_held {
        const char *ns, *name; /* borrowed from the cache: valid during the callback */
        const char *reason;    /* e.g. the 429 message naming the PDB */
        bool ns_terminating;   /* its namespace is being deleted (403 NamespaceTerminating) */
};

struct engine_progress {
        enum drain_phase phase;
        bool has_phase;
        size_t pods_left[_EVICT_GROUP_MAX]; /* still on the node, per group */
        size_t claims_left;                 /* claims on the node not owned by drivers */
        size_t drivers_left;                /* driver pods on the node (stop) / not healthy (restore) */
        size_t evictions_accepted;          /* this run */
        size_t evictions_retried;           /* 429s and errors retried */
        const struct engine_held *held;
        size_t n_held;
        const char *message; /* what the engine waits for, or did last */
        bool node_not_ready; /* the Node's Ready condition is not True */
        bool out_of_service; /* the node has the out-of-service taint */
        bool node_seen;      /* the Node was read: the two above are observed, else unknown */
};

/* result:
 *  0           the goal is reached;
 *  -ETIMEDOUT  timeout_usec ran out;
 *  -EPERM      refused, the node left as it was found: by a blocker (plan->blockers; in
 *              preflight, or in any later phase of a drain: the eviction rules hold at
 *              every eviction, whatever the annotations say), by a recorded action this
 *              configuration does not allow (needs_flag says which flag would), or, for
 *              an uncordon, because someone else cordoned the node;
 *  other       errors (API, malformed annotations, ...).
 * A refusal after preflight writes drainer.io/message; every end but -ECANCELED is
 * also an on_notice (ENGINE_NOTICE_DONE, _REFUSED or _FAILED) just before on_finished. */
struct engine_summary {
        int result;
        enum drain_phase last_phase;
        bool has_phase;
        uint64_t phase_usec[_DRAIN_PHASE_MAX]; /* time spent in each phase in this run */
        bool phase_seen[_DRAIN_PHASE_MAX];
        size_t pods_evicted;
        size_t claims_waited; /* distinct claims seen on the node while waiting */
        uint64_t total_usec;
        const char *message;     /* final message (blockers, what remained, ...) */
        const struct plan *plan; /* the last plan (refusals by blockers list them here) */
        /* Whether the node is, or was during this run, out of the state drainer found it in
         * before any drain: a phase past preflight seen, or a Node patch, eviction or unit
         * job sent by this run. false for a refusal in preflight: nothing was changed. */
        bool changed;
        /* -EPERM because drainer.io/driver-stop records an action this run's configuration
         * does not allow: the flag that would, e.g. "--driver-stop systemd:dra-driver.service".
         * NULL otherwise. Nothing was started or changed for it. */
        const char *needs_flag;
        /* Pods whose eviction was answered 403 NamespaceTerminating (their namespace
         * being deleted): retried until marked deleted, then waited for, as kubectl
         * does. Borrowed until the engine is freed. */
        const struct engine_held *ns_terminating;
        size_t n_ns_terminating;
        /* The Node as last seen: its Ready condition not True; the out-of-service taint
         * on it, and whether drainer.io/out-of-service says drainer applied it. */
        bool node_not_ready;
        bool out_of_service, out_of_service_by_drainer;
        /* The Node was read in this run: without it the three above are unknown, not false. */
        bool node_seen;
        /* How new work was kept off (--driver: DeviceTaintRules, or the cordon fallback
         * where the API server serves none); _PLAN_ISOLATION_MAX: not known yet (the
         * discovery had not answered). */
        enum plan_isolation isolation;
};

/* One line of the audit trail (what kubectl drain prints for each pod, and the
 * claims): strings borrowed, valid during the callback. */
enum engine_trail_kind {
        ENGINE_TRAIL_EVICTING,       /* the Eviction (or DELETE) of pod ns/name was accepted */
        ENGINE_TRAIL_POD_GONE,       /* ... and that pod is gone from the node */
        ENGINE_TRAIL_CLAIM_RELEASED, /* ResourceClaim ns/name is not on the node any more */
        ENGINE_TRAIL_CORDONED,       /* node name (ns NULL) is seen cordoned by this drain (once a run) */
        _ENGINE_TRAIL_KIND_MAX,
};

struct engine_trail {
        enum engine_trail_kind kind;
        const char *ns, *name;
        bool deleted; /* pods: by a DELETE (--disable-eviction), not an Eviction */
};

/* What happened that an admin may act on (DESIGN.md: a drain started, blocked, drained,
 * restored, failed; the node going not Ready and back; the out-of-service taint). The
 * engine says what happened; whether and how it is announced (Events on the Node:
 * announcer.h) is the caller's policy. */
enum engine_notice_kind {
        ENGINE_NOTICE_WAITING,        /* a wait for a drain slot started */
        ENGINE_NOTICE_DRAIN,          /* a drain started: its first phase after none, waiting or preflight */
        ENGINE_NOTICE_RESTORE,        /* a restore started */
        ENGINE_NOTICE_NOT_READY,      /* during a drain the node went not Ready (once per spell) */
        ENGINE_NOTICE_READY,          /* ... and is Ready again */
        ENGINE_NOTICE_OUT_OF_SERVICE, /* this run applied the out-of-service taint (once) */
        ENGINE_NOTICE_OUT_OF_SERVICE_REMOVED, /* ... an uncordon removes the one drainer applied */
        /* an uncordon --driver left alone a DeviceTaintRule the Node's drainer.io/taint-rules
         * names that is not drainer's rule for the node and driver (never deleted) */
        ENGINE_NOTICE_FOREIGN_RULE,
        ENGINE_NOTICE_DONE,    /* the goal is reached (result 0) */
        ENGINE_NOTICE_REFUSED, /* refused (-EPERM), see engine_summary */
        ENGINE_NOTICE_FAILED,  /* gave up: timeout or error */
        _ENGINE_NOTICE_KIND_MAX,
};

struct engine_notice {
        enum engine_notice_kind kind;
        /* The Node as last seen (never NULL: without a Node seen there is no notice). */
        const struct node_rec *node;
        /* WAITING, DRAIN, RESTORE: the phase entered and drainer.io/message then (NULL if
         * none); the others: what happened, for people (the summary's message at the end). */
        enum drain_phase phase;
        const char *message;
};

struct engine_callbacks {
        /* After a reconcile that changed something worth showing. */
        void (*on_progress)(struct engine *e, const struct engine_progress *p, void *userdata);
        /* A phase was entered (also when resuming into it). */
        void (*on_phase)(struct engine *e, enum drain_phase phase, const char *message, void *userdata);
        /* Each eviction this run had accepted, each of those pods gone, each claim seen on
         * the node by this run and released (at most once per pod or claim). */
        void (*on_trail)(struct engine *e, const struct engine_trail *t, void *userdata);
        /* Each notice, as it happens (strings and node borrowed: valid during the callback). */
        void (*on_notice)(struct engine *e, const struct engine_notice *n, void *userdata);
        /* Once: the goal is reached (result 0) or the engine gave up. The engine is stopped. */
        void (*on_finished)(struct engine *e, const struct engine_summary *s, void *userdata);
        /* After engine_stop(): once, when nothing of the engine is in flight any more
         * (engine_idle()), on a later turn of the loop than the stop and the answer that
         * ended last. The engine may be freed from it. */
        void (*on_idle)(struct engine *e, void *userdata);
};

int engine_new(struct kube_client *client, struct transport *transport, struct timesrc *ts,
               const struct engine_options *o, const struct engine_callbacks *cb, void *userdata,
               struct engine **ret);
int engine_start(struct engine *e);
/* Stops informers, timers and calls (results: -ECANCELED); a Node patch in flight is
 * given up to 3 s to answer. Free once engine_idle(): on_idle says when. */
void engine_stop(struct engine *e);
bool engine_idle(const struct engine *e);
/* The phase the Node shows as far as the engine knows: the one its last answered
 * patch wrote, or else the one its cache holds; false if none (preflight). */
bool engine_node_phase(const struct engine *e, enum drain_phase *ret);
void engine_free(struct engine *e);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct engine *, engine_free);
