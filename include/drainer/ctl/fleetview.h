/* Where each node of a fleet stands, as its drainer.io/ annotations say: what
 * `drainer status --all` counts and lists. Pure functions of a parsed state. */
#pragma once

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/drain/state.h"
#include "drainer/kube/objects.h"

enum fleet_class {
        FLEET_IN_SERVICE,
        FLEET_REQUESTED, /* asked, not picked up by serve yet */
        FLEET_WAITING,   /* drainer.io/state=waiting: nothing changed yet */
        FLEET_DRAINING,  /* a phase of a drain */
        FLEET_DRAINED,
        FLEET_RESTORING, /* restore-drivers, uncordon, or drained and asked to uncordon */
        FLEET_FAILED,    /* refused (drainer.io/message "refused ..."), or annotations that do not parse */
        _FLEET_CLASS_MAX,
};

extern const char *const fleet_class_names[_FLEET_CLASS_MAX];

/* st NULL: the annotations did not parse. */
enum fleet_class fleet_classify(const struct drain_state *st);
/* Why: for WAITING "slot", "window", "pause" or "error" (from the message serve wrote);
 * for FAILED "refusal" or "bad-state" (st NULL); else NULL. */
const char *fleet_reason(enum fleet_class c, const struct drain_state *st);

/* One node of the fleet as `status --all` lists it. */
struct fleet_row {
        const char *name; /* borrowed: the node_rec's */
        enum fleet_class c;
        const char *reason; /* fleet_reason()'s, or NULL */
        bool has_phase;
        enum drain_phase phase; /* valid when has_phase */
        int64_t since_usec;     /* when the phase began; 0: unknown (or no phase) */
        char *message;          /* owned: the state's message, why it did not parse, or NULL */
};

/* The rows of the n nodes recs, sorted by name (recs is sorted in place), and how
 * many nodes each class holds (counts: _FLEET_CLASS_MAX of them, overwritten).
 * Returns 0, or -ENOMEM with nothing allocated. */
int fleet_rows_build(const struct node_rec **recs, size_t n, struct fleet_row **ret,
                     size_t counts[_FLEET_CLASS_MAX]);
/* NULL ok. Returns NULL. */
struct fleet_row *fleet_rows_free(struct fleet_row *rows, size_t n);

/* The -o json document of `status --all`/`-l`: {selector (when given), nodes, phases:
 * {CLASS: count}, notInService: [{name, status, phase, reason, since, message}]}
 * (a row's field left out when it has none). NULL only for out of memory. */
cJSON *fleet_rows_to_json(const struct fleet_row *rows, size_t n, const size_t counts[_FLEET_CLASS_MAX],
                          const char *selector);
