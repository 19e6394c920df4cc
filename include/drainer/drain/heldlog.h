/* The pods whose eviction is held (a PodDisruptionBudget's 429, a namespace being
 * deleted), as lines for a person: one when a pod becomes held (with the reason),
 * one when it no longer is, never again in between, however often the progress is
 * drawn. Pure: no requests, no output of its own. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "drainer/drain/engine.h"

struct held_log {
        char **keys; /* "NS/NAME" of the pods held at the last update */
        size_t n;
};

/* A change: held true, the pod ns/name became held for reason; false, it no longer is
 * (reason NULL). Strings valid during the call. */
typedef void (*held_log_fn)(bool held, const char *ns, const char *name, const char *reason, void *userdata);

/* Compares the n pods held now with those of the last update: fn for each one no
 * longer held, then for each one newly held, in the order given. 0, or -ENOMEM (a
 * pod not remembered is reported again at the next update). */
int held_log_update(struct held_log *l, const struct engine_held *held, size_t n, held_log_fn fn,
                    void *userdata);
/* Forgets every pod (nothing is reported). */
void held_log_clear(struct held_log *l);
