/* The drain's persisted state: drainer.io/ annotations on the Node, parsed
 * and validated, and the JSON merge patches that move it on. Pure functions
 * over records; the engine sends the patches. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "drainer/base/macro.h"
#include "drainer/dra/driverstop.h" /* struct driver_stop_record, DRAIN_TAINT_KEY */
#include "drainer/kube/objects.h"   /* struct node_rec */

struct node_rec;

#define DRAINER_ANN_PREFIX            "drainer.io/"
#define DRAINER_ANN_REQUEST           "drainer.io/request"
#define DRAINER_ANN_STATE             "drainer.io/state"
#define DRAINER_ANN_STATE_SINCE       "drainer.io/state-since"
#define DRAINER_ANN_STARTED_AT        "drainer.io/started-at"
#define DRAINER_ANN_WAS_UNSCHEDULABLE "drainer.io/was-unschedulable"
#define DRAINER_ANN_DRIVER_STOP       "drainer.io/driver-stop"
#define DRAINER_ANN_MESSAGE           "drainer.io/message"
/* Who asked for what drainer.io/request says, in the asker's words, written with the
 * request (serve's Cluster API hook and shutdown drain do; a person may): quoted by
 * the Event of the drain's start, kept and removed with the request. */
#define DRAINER_ANN_REQUESTED_BY      "drainer.io/requested-by"
/* RFC 3339: when this drain applied OUT_OF_SERVICE_TAINT (--out-of-service); only a
 * taint drainer recorded here is ever removed by drainer (uncordon, node Ready). */
#define DRAINER_ANN_OUT_OF_SERVICE    "drainer.io/out-of-service"

/* Driver-scoped drains (--driver NAME): the DeviceTaintRules this drain created, their
 * names separated by commas (kept so the uncordon deletes exactly these, even once the
 * driver's ResourceSlices are gone). */
#define DRAINER_ANN_TAINT_RULES "drainer.io/taint-rules"

/* Upstream's non-graceful node shutdown taint (KEP-2268): with it on a node that is
 * not Ready, kube-controller-manager's pod GC force-deletes the node's terminating
 * pods (pkg/controller/podgc gcTerminating) and the taint-eviction controller deletes
 * the others (NoExecute), so their claims are released without the kubelet. */
#define OUT_OF_SERVICE_TAINT_KEY    "node.kubernetes.io/out-of-service"
#define OUT_OF_SERVICE_TAINT_VALUE  "nodeshutdown"
#define OUT_OF_SERVICE_TAINT_EFFECT "NoExecute"

/* The phases of DESIGN.md, in order. Names are the annotation values. */
enum drain_phase {
        DRAIN_PHASE_WAITING,   /* "waiting": serve waits for a --max-parallel slot; nothing changed yet */
        DRAIN_PHASE_PREFLIGHT, /* "preflight" */
        DRAIN_PHASE_CORDON,    /* "cordon" */
        DRAIN_PHASE_EVICT_CLAIM_HOLDERS, /* "evict-claim-holders" */
        DRAIN_PHASE_EVICT_REST,          /* "evict-rest" */
        DRAIN_PHASE_WAIT_RELEASED,       /* "wait-released" */
        DRAIN_PHASE_STOP_DRIVERS,        /* "stop-drivers" */
        DRAIN_PHASE_DRAINED,             /* "drained" */
        DRAIN_PHASE_RESTORE_DRIVERS,     /* "restore-drivers" */
        DRAIN_PHASE_UNCORDON,            /* "uncordon" */
        _DRAIN_PHASE_MAX,
        _DRAIN_PHASE_INVALID = -EINVAL,
};

const char *drain_phase_to_string(enum drain_phase p);
enum drain_phase drain_phase_from_string(const char *s);

/* Where a phase stands in a drain's life. */
enum drain_stage {
        DRAIN_STAGE_QUEUED,    /* waiting: nothing changed on the node yet */
        DRAIN_STAGE_CHECKING,  /* preflight: read-only */
        DRAIN_STAGE_TAKING,    /* cordon .. stop-drivers: the node is being taken out */
        DRAIN_STAGE_DRAINED,   /* drained: out of service */
        DRAIN_STAGE_RESTORING, /* restore-drivers, uncordon: being put back */
        _DRAIN_STAGE_MAX,
        _DRAIN_STAGE_INVALID = -EINVAL,
};

/* What each phase means, read by the engine, the state builders, rollout and
 * serve instead of comparing phases by their order (DESIGN.md, "The sequence"). */
struct drain_phase_info {
        enum drain_stage stage;
        bool changes_node;  /* drainer may have changed the node beyond annotations (cordon on) */
        bool evicts_rest;   /* the pods without claims may be evicted (evict-rest .. stop-drivers) */
        bool drivers_back;  /* the drivers are restored already (uncordon) */
        const char *leaves; /* when the phase is left, for messages and docs */
};

/* The entry of p; NULL for a value that is not a phase. */
const struct drain_phase_info *drain_phase_info(enum drain_phase p);
/* Shorthands over the table; false for a value that is not a phase. */
bool drain_phase_changes_node(enum drain_phase p);
bool drain_phase_evicts_rest(enum drain_phase p);
bool drain_phase_drivers_back(enum drain_phase p);
bool drain_phase_in_stage(enum drain_phase p, enum drain_stage stage);

enum drain_request {
        DRAIN_REQUEST_NONE,
        DRAIN_REQUEST_DRAIN,    /* "drain" */
        DRAIN_REQUEST_UNCORDON, /* "uncordon" */
        _DRAIN_REQUEST_MAX,
        _DRAIN_REQUEST_INVALID = -EINVAL,
};

/* NONE reads "none" (for logs); it is never an annotation value. */
const char *drain_request_to_string(enum drain_request r);
enum drain_request drain_request_from_string(const char *s);

#define DRAIN_STATE_MAX_STOPS 8

/* Parsed drainer.io/ annotations. Strings owned. */
struct drain_state {
        enum drain_request request; /* NONE when absent */
        bool has_phase;
        enum drain_phase phase;   /* valid when has_phase */
        int64_t state_since_usec; /* 0 when absent */
        int64_t started_at_usec;  /* 0 when absent */
        bool has_was_unschedulable;
        bool was_unschedulable;
        struct driver_stop_record stops[DRAIN_STATE_MAX_STOPS];
        size_t n_stops;
        char *message;
        int64_t out_of_service_usec; /* drainer.io/out-of-service; 0 when absent */
        char *taint_rules;           /* drainer.io/taint-rules, or NULL */
};

/* Frees the strings of s and leaves it an empty state. NULL ok; usable as
 * _cleanup_(drain_state_done) on a struct drain_state variable. */
void drain_state_done(struct drain_state *s);

/* Parses the drainer.io/ annotations of n. A value that does not parse (an
 * unknown phase, a bad timestamp, was-unschedulable not true/false, driver-stop
 * not the JSON above) is -EBADMSG with *ret_error naming the annotation, the bad
 * value and how to reset: "kubectl annotate node NODE drainer.io/state- ..." or
 * `drainer uncordon NODE --reset`. No annotations at all is a valid empty state.
 *
 * Unknown drainer.io/ keys are ignored. A request other than drain/uncordon is
 * -EBADMSG as well. driver-stop: at most DRAIN_STATE_MAX_STOPS entries of at
 * most DRIVER_STOP_MAX_DRIVERS drivers; label keys, label values, unit names,
 * "ns/name" and driver names are checked; fields an entry's strategy does not
 * use are ignored; "old" present (string or null) sets had_old.
 * *ret is written only on success, *ret_error (if not NULL; one line,
 * malloc'd) only on -EBADMSG. Returns 0, -EBADMSG or -ENOMEM. */
int drain_state_parse(const struct node_rec *n, struct drain_state *ret, char **ret_error);

/* drainer.io/message values (and Event messages) are cut to this many bytes,
 * at a UTF-8 character boundary. */
#define DRAIN_MESSAGE_MAX 1024

/* Merge patches for the Node (JSON text, malloc'd). Each carries
 * metadata.resourceVersion of n, so a concurrent change fails with 409 and the
 * engine retries from the updated cache.
 *
 * Send with Content-Type application/merge-patch+json. A removed annotation or
 * label is set to null. spec.taints is in a patch only when the list changes
 * (then it is the whole list: key, value if any, effect of each taint of n, in
 * order; null when it ends up empty); note that node_rec keeps no timeAdded, so
 * a rewritten list drops it. All return 0, -EINVAL (n has no resourceVersion,
 * or an argument is invalid) or -ENOMEM; *ret only on success.
 *
 * Cordon: in ONE patch (atomic, so a crash never leaves a cordon without the record
 * of who cordoned): was-unschedulable (kept if already recorded, else n's current
 * spec.unschedulable), started-at (kept if set, else now), state=evict-claim-holders
 * (the cordon's own phase is recorded only by a drain with DeviceTaintRules: a node's
 * evictions follow its cordon at once), state-since=now, spec.unschedulable=true,
 * and the taints of n plus
 * drainer.io/draining:NoSchedule (merge patches replace the taints list, hence the
 * resourceVersion precondition). A recorded was-unschedulable or started-at that
 * does not parse is -EBADMSG (drain_state_parse refuses it first). */
int drain_patch_cordon(const struct node_rec *n, int64_t now_usec, char **ret);
/* Moves to phase with a message (state, state-since, message). A NULL message
 * removes drainer.io/message; messages are cut to DRAIN_MESSAGE_MAX. */
int drain_patch_phase(const struct node_rec *n, enum drain_phase phase, int64_t now_usec,
                      const char *message, char **ret);
/* Only the message (progress), no phase change. NULL removes it. */
int drain_patch_message(const struct node_rec *n, const char *message, char **ret);
/* Sets drainer.io/driver-stop to the records (JSON as above); n_stops 0 removes
 * it. Records drain_state_parse would refuse (or more than DRAIN_STATE_MAX_STOPS)
 * are -EINVAL, so what is written always reads back. */
int drain_patch_driver_stop(const struct node_rec *n, const struct driver_stop_record *stops, size_t n_stops,
                            char **ret);
/* ... and in the same write state=phase, state-since=now and the message: the record
 * of the stop and the phase that does it go together. */
int drain_patch_driver_stop_phase(const struct node_rec *n, const struct driver_stop_record *stops,
                                  size_t n_stops, enum drain_phase phase, int64_t now_usec,
                                  const char *message, char **ret);
/* Sets or removes (value NULL) node label key, for the label strategy. Key and
 * value must be valid label syntax (-EINVAL). */
int drain_patch_label(const struct node_rec *n, const char *key, const char *value, char **ret);
/* Removes the drain taint (keeps every other taint), state=restore-drivers,
 * state-since=now, and sets the message unless it is NULL. The out-of-service taint
 * goes too, with drainer.io/out-of-service, when that annotation says drainer applied
 * it (the caller checks first that the node is Ready again); drain_patch_finish the same. */
int drain_patch_remove_taint(const struct node_rec *n, int64_t now_usec, const char *message, char **ret);
/* Final step: spec.unschedulable=false if uncordon is true (else spec.unschedulable
 * is not in the patch), the drain taint removed, and every drainer.io/ annotation
 * removed except request when keep_request. */
int drain_patch_finish(const struct node_rec *n, bool uncordon, bool keep_request, char **ret);
/* --out-of-service on a node not Ready long enough: adds OUT_OF_SERVICE_TAINT (every
 * other taint kept), records drainer.io/out-of-service=now, and sets the message
 * unless it is NULL. */
int drain_patch_out_of_service(const struct node_rec *n, int64_t now_usec, const char *message, char **ret);
/* --node-conditions: the node lifecycle conditions of KEP-5683 (DrainInProgress,
 * Drained) that mirror a drain recorded in phase (has_phase false: none), for
 * upstream tools that read them. Draining (cordon .. stop-drivers): DrainInProgress
 * True, Drained False; drained: DrainInProgress False, Drained True; restoring
 * (restore-drivers, uncordon): both False (DrainerRestoring); no drain (no phase,
 * waiting, preflight): both False (DrainerRestored), but only where the condition
 * is drainer's (reason Drainer...): someone else's conditions are theirs, and a
 * node that never had them gets none. Builds a strategic merge patch of the Node's status
 * subresource (Content-Type application/strategic-merge-patch+json; conditions
 * merge by type, so the kubelet's stay) with the conditions whose status or
 * reason differ from n's, lastTransitionTime = now where the status changes. Returns
 * 1 with *ret, 0 (*ret = NULL) when n already says it, -ENOMEM. */
int drain_patch_conditions(const struct node_rec *n, bool has_phase, enum drain_phase phase,
                           int64_t now_usec, char **ret);
/* Sets drainer.io/request (value NULL removes it); value must be "drain" or
 * "uncordon" (-EINVAL). */
int drain_patch_request(const struct node_rec *n, const char *value, char **ret);

/* ---- driver-scoped state ----
 *
 * A drain of one DRA driver of a node (--driver NAME) keeps its state under keys of
 * its own: drainer.io/KEY.NAME for each drainer.io/KEY above (drainer.io/state.NAME,
 * drainer.io/driver-stop.NAME, ...), so a node drain's keys (no dot after
 * "drainer.io/") and each driver's are apart. The scope view shows a node record
 * whose annotations are only the scope's, under the plain names, so every parser
 * and patch builder above works on it unchanged; drain_scope_patch renames a patch
 * built from it back. Scope NULL is the node's own drain. */

/* Whether driver suits a scope: a DNS subdomain (ResourceSlice spec.driver) short
 * enough that drainer.io/was-unschedulable.NAME is a valid annotation key (a name
 * part of at most 63). 0, or -EINVAL with msg the error line. */
int drain_scope_check(const char *driver, char *msg, size_t size);

struct drain_scope_view {
        struct node_rec node; /* n, with only the scope's annotations, renamed */
        struct kv *kv;        /* owned */
        char *keys;           /* owned */
};
/* Fills ret from n for scope (NULL: the node's own keys). 0 or -ENOMEM. */
int drain_scope_view_init(struct drain_scope_view *ret, const struct node_rec *n, const char *scope);
void drain_scope_view_done(struct drain_scope_view *v);

/* Rewrites the drainer.io/ annotation keys of a patch built from a scope view to the
 * scope's (in place: *body is replaced). scope NULL: nothing to do. 0 or -ENOMEM. */
int drain_scope_patch(const char *scope, char **body);

/* Another drain on n that excludes one of scope: for a driver scope, the node's own
 * drain (drainer.io/state set: returns ""); for the node (scope NULL), any driver's
 * (drainer.io/state.NAME set: returns NAME, borrowed from n). NULL: none. */
const char *drain_scope_conflict(const struct node_rec *n, const char *scope);
/* The drivers out of service on n (drainer.io/state.NAME set; device drains are
 * drain_devices_foreach's), for status: calls f for
 * each with its name (borrowed, not NUL-terminated: len) and the phase's value. */
void drain_scope_foreach(const struct node_rec *n,
                         void (*f)(const char *driver, size_t len, const char *phase, void *userdata),
                         void *userdata);

/* Driver-scoped start (instead of the cordon): in ONE patch started-at (kept if set,
 * else now), state=cordon, state-since=now, drainer.io/taint-rules=rules (the
 * DeviceTaintRules about to be created; recorded first, so a crash never leaves a rule
 * without its record) and the message. The node itself is not touched. */
int drain_patch_isolate(const struct node_rec *n, int64_t now_usec, const char *rules, const char *message,
                        char **ret);
/* drainer.io/taint-rules=rules (NULL or "": removed) and the message (unless NULL),
 * nothing else: a rule about to be created that the record does not name yet (a drain
 * recorded by an older drainer, or pools that changed since) is recorded first. */
int drain_patch_taint_rules(const struct node_rec *n, const char *rules, const char *message, char **ret);
