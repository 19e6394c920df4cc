/* An engine's progress as people read it on a terminal: one node's part of the live
 * block that drain, uncordon and maintain redraw in place (the phase and its time, the
 * pods left per eviction group, the claims and driver pods, the first pods held, the
 * Node not Ready, what the engine waits for). Writes only to the FILE given. */
#pragma once

#include <stdio.h>

#include "drainer/drain/engine.h"

/* The colours of a terminal ("\033[1m", ...), or "" each for none. */
struct progress_sgr {
        const char *bold, *cyan, *yellow, *off;
};

/* The group's name in the block ("claim holders", "other pods", ...; "staying"). */
const char *evict_group_label(enum evict_group g);

/* Prints node's block for p, seconds into its run; returns how many lines it printed. */
int engine_progress_print(FILE *f, const char *node, const struct engine_progress *p, double seconds,
                          const struct progress_sgr *sgr);
