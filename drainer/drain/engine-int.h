/* Private to the drain engine's files (engine.c: lifecycle and reconcile;
 * engine-drain.c, engine-restore.c: the two drives; engine-taintrule.c: the
 * DeviceTaintRules; engine-patch.c: the Node patch pipeline): struct engine and
 * the functions they call each other through. Nothing outside drain/engine*.c
 * includes it; the engine's face is include/drainer/engine.h. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "drainer/base/hashmap.h"
#include "drainer/base/macro.h"
#include "drainer/base/timesrc.h"
#include "drainer/dra/health.h"
#include "drainer/dra/nodeview.h"
#include "drainer/dra/taintrule.h"
#include "drainer/drain/device.h"
#include "drainer/drain/engine.h"
#include "drainer/drain/evictor.h"
#include "drainer/kube/client.h"
#include "drainer/kube/objects.h"

#define HEALTH_RECHECK_USEC (2 * USEC_PER_SEC)
#define HEALTH_TIMEOUT_USEC (5 * USEC_PER_SEC)
/* After a 409 on the Node patch, how long to wait for the watch to bring the newer Node
 * before patching from the cached one again. */
#define CONFLICT_WAIT_USEC  (5 * USEC_PER_SEC)
/* How long a stop waits for the answer to a Node patch in flight. */
#define STOP_WAIT_USEC      (3 * USEC_PER_SEC)
/* Progress messages reach the Node at most this often (DESIGN.md), the last always. */
#define PROGRESS_WRITE_USEC (10 * USEC_PER_SEC)
#define MAX_HELD            64
#define MAX_DRIVER_KEYS     16

struct probe_result {
        int error;
        enum health_status status;
        uint64_t at;
};

struct engine {
        struct kube_client *client;  /* borrowed */
        struct transport *transport; /* borrowed */
        struct timesrc *ts;          /* borrowed */
        struct engine_options o;
        struct engine_callbacks cb;
        void *userdata;

        struct node_view *view; /* owned; NULL once closed */
        unsigned parts;         /* what the view holds for this goal */
        bool view_closing;
        bool pdbs_failed; /* budgets could not be listed: the drain goes on without them */
        struct dtimer reconcile_timer, retry, deadline, unread, stop_wait;
        struct dtimer idle_timer; /* tells on_idle, on the turn after the last call ended */
        bool idle_told;
        bool reconcile_armed;

        struct evictor *evictor; /* owned */
        struct hashmap *probes;  /* pod uid -> struct probe_result, owned */
        struct health_probe *probe;
        char *probe_uid;
        struct hashmap *claims_seen; /* "ns/name" -> CLAIM_ON_NODE or CLAIM_RELEASED */
        struct hashmap *accepted;    /* "ns/name" of pods whose eviction this run had accepted, until gone */

        struct kube_call *node_call; /* the Node patch in flight */
        bool status_patch;           /* ... is one of nodes/NAME/status (--node-conditions) */
        bool patching_phase;         /* ... moves drainer.io/state to patch_phase */
        enum drain_phase patch_phase;
        /* The phase our last answered patch wrote, until the cache shows that version:
         * what the Node shows when a stop comes in between (engine_node_phase). */
        bool has_written_phase;
        enum drain_phase written_phase;

        /* The configured driver-stop strategy's instance for this run (owned). Only its
         * configuration is ever acted on: a recorded stop is undone only when its
         * strategy's undo_allowed() says this configuration may. */
        struct driver_stop *stop;
        char *await_rv;          /* resourceVersion our last patch produced, until the cache has it */
        char *patch_rv;          /* resourceVersion the Node patch in flight is conditional on */
        char *conflict_rv;       /* ... of a patch refused with 409, until the cache moves past it */
        uint64_t conflict_until; /* then patch again anyway (monotonic µs) */
        uint64_t wrote_at;       /* when this run last patched the Node (monotonic µs) */
        bool wrote;
        bool finish_sent; /* uncordon: the final patch went out */

        struct plan plan;
        bool has_plan;
        bool said_no_dra;    /* the cluster serves no DRA API: said once */
        bool said_not_ready; /* a DrainerNodeNotReady Event went out for this not-Ready spell */
        bool said_ready;     /* ... and a DrainerNodeReady Event after it */
        bool said_out_of_service, said_out_of_service_removed;
        bool cordon_sent;   /* this run sent the cordon (a node drain's first write) */
        bool said_cordoned; /* the trail's cordon line went out */
        struct drain_state st;
        bool has_st;

        bool started, finished, stopping, observed;
        bool changed;     /* this run sent a Node patch, an eviction or a unit job */
        char *needs_flag; /* a refusal by configuration: the flag that allows the recorded action */
        bool has_phase;
        enum drain_phase phase;
        uint64_t phase_entered, started_at;
        struct engine_summary summary;
        char *message;
        char *final_message;

        /* --driver: the scope (the first driver's name: its drainer.io/KEY.NAME keys hold
         * the state), the Node as the scope sees it, and the DeviceTaintRules. */
        const char *scope; /* borrowed from o.plan.drivers or dev_scope, NULL: a node drain */
        char dev_scope[DRAIN_DEVICE_SCOPE_SIZE]; /* --device: the devices' scope (device.h) */
        struct drain_scope_view sv;
        bool has_sv;
        struct taint_rule_discovery *disc; /* until its answer */
        bool disc_done;
        struct taint_rule_api rule_api;
        struct kube_call *rule_call; /* the rule POST, GET or DELETE in flight */
        size_t rules_done;           /* rules created (drain) or deleted (uncordon) by this run */
        bool rules_ok;               /* every rule answered: in place / gone */
        /* The rule at rules_done: its create answered 409 (what is there is read and
         * judged before it counts as in place); read (rule_obj the rule as the API server
         * returned it, NULL: 404, gone). */
        bool rule_conflict, rule_read;
        cJSON *rule_obj;  /* owned */
        char *rules_left; /* uncordon: the rules named on the Node but not drainer's, left alone */

        struct engine_held held[MAX_HELD];
        size_t n_held;
        struct engine_held ns_terminating[MAX_HELD]; /* for the summary */

        /* metrics (metrics.h, the default registry) */
        bool m_state_seen;                /* the Node's state was read at least once */
        bool m_phase_here;                /* the current phase was entered while this run watched */
        int64_t m_phase_since;            /* its drainer.io/state-since, µs; 0 if unknown */
        char *m_drivers[MAX_DRIVER_KEYS]; /* the driver label values this engine set */
        size_t n_m_drivers;
};

/* ---- engine.c: lifecycle, reconcile, what the caller is told ---- */

/* Replaces the progress message (e->message). */
void engine_set_message(struct engine *e, const char *fmt, ...) _printf_(2, 3);
/* One line of the audit trail (engine.h), to the caller's on_trail. */
void engine_trail(struct engine *e, enum engine_trail_kind kind, const char *ns, const char *name);
/* A reconcile on the next turn of the loop (once, however often asked). */
void engine_schedule_reconcile(struct engine *e);
/* Something of a stopped engine ended: if that was the last, on_idle follows (once). */
void engine_note_idle(struct engine *e);
/* Arms the retry timer for the earliest of its current due time and at (monotonic µs). */
void engine_retry_at(struct engine *e, uint64_t at);
/* A notice of kind about node n in the current phase, to the caller's on_notice. */
void engine_tell(struct engine *e, const struct node_rec *n, enum engine_notice_kind kind,
                 const char *message);
/* Ends the run with result (0, -EPERM refused, -ETIMEDOUT, another error): the summary,
 * the metrics, the notice, then on_finished. Only the first call counts. */
void engine_finish(struct engine *e, int result, const char *fmt, ...) _printf_(3, 4);

/* ---- engine-patch.c: the Node patch, refusals, the driver-stop record ---- */

/* Whether reconcile may act on the cached Node n: no patch in flight, the cache holds
 * the version our last patch produced, and not the version a patch was refused from
 * with 409 (for CONFLICT_WAIT_USEC at most). */
bool engine_patch_settled(struct engine *e, const struct node_rec *n);
/* Sends a merge patch of the Node (takes ownership of body); its answer reconciles. */
void engine_patch_node(struct engine *e, char *body);
void engine_patch_phase(struct engine *e, const struct node_rec *n, enum drain_phase p, const char *msg);
/* A strategy's SET_LABEL (value NULL: remove the label). */
void engine_patch_label(struct engine *e, const struct node_rec *n, const char *key, const char *value);
bool engine_sync_conditions(struct engine *e, const struct node_rec *n);
void engine_write_progress(struct engine *e, const struct node_rec *n);
void engine_refuse_preflight(struct engine *e);
void engine_refuse_on_node(struct engine *e, const struct node_rec *n, const char *msg);
void engine_refuse_blockers(struct engine *e, const struct node_rec *n, enum drain_phase ph);
void engine_refuse_record(struct engine *e, const struct node_rec *n, const struct driver_stop_record *r,
                          bool stop);
const struct driver_stop_record *engine_undo_refused(const struct engine *e);
const struct driver_stop_record *engine_stop_not_configured(const struct engine *e);
void engine_record_driver_stop(struct engine *e, const struct node_rec *n, bool with_phase);
/* The DRA driver pods of the plan (healthy_only: Running, Ready, not deleting). */
size_t engine_driver_pods(const struct plan *p, bool healthy_only);
struct driver_stop_view engine_driver_view(struct engine *e, const struct node_rec *n);

/* ---- engine-taintrule.c: DeviceTaintRules of a driver-scoped drain ---- */

/* Asks the API server whether it serves DeviceTaintRules; the answer decides
 * e->o.plan.isolation and reconciles. */
int engine_discover_rules(struct engine *e);
bool engine_uses_rules(const struct engine *e);
bool engine_isolated(const struct engine *e, const struct node_rec *n);
void engine_isolate(struct engine *e, const struct node_rec *n);
bool engine_create_rules(struct engine *e, const struct node_rec *n);
bool engine_delete_rules(struct engine *e, const struct node_rec *n);

/* ---- engine-drain.c, engine-restore.c: the drives ---- */

void engine_drive_drain(struct engine *e, const struct node_rec *n);
void engine_drive_restore(struct engine *e, const struct node_rec *n);
int engine_drivers_probed(struct engine *e, bool restoring, const struct pod_rec **ret_bad);

/* ---- small questions about the Node ---- */

static inline bool out_of_service_tainted(const struct node_rec *n) {
        return node_rec_find_taint(n, OUT_OF_SERVICE_TAINT_KEY, OUT_OF_SERVICE_TAINT_EFFECT) != NULL;
}

static inline bool node_cordoned(const struct node_rec *n) {
        return n->unschedulable && node_rec_find_taint(n, DRAIN_TAINT_KEY, DRAIN_TAINT_EFFECT);
}
