/* Where each node of a fleet stands, as its drainer.io/ annotations say: what
 * `drainer status --all` counts and lists. Pure functions of a parsed state. */
#pragma once

#include "drainer/drain/state.h"

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
