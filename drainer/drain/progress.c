/* The live view of an engine's progress (progress.h): one node's block of lines,
 * written to a FILE. Reads the progress only; the caller places and redraws the block. */
#include <stdio.h>
#include <string.h>

#include "drainer/base/macro.h"
#include "drainer/base/text.h"
#include "drainer/drain/progress.h"

/* The pods held the block names at most; the rest are counted. */
#define HELD_SHOWN 5

const char *evict_group_label(enum evict_group g) {
        switch (g) {
        case EVICT_GROUP_CLAIM_HOLDERS:
                return "claim holders";
        case EVICT_GROUP_CLAIM_HOLDERS_CRITICAL:
                return "critical claim holders";
        case EVICT_GROUP_REST:
                return "other pods";
        case EVICT_GROUP_REST_CRITICAL:
                return "critical other pods";
        case EVICT_GROUP_DRIVERS:
                return "driver pods";
        default:
                return "staying";
        }
}

int engine_progress_print(FILE *f, const char *node, const struct engine_progress *p, double seconds,
                          const struct progress_sgr *sgr) {
        int lines = 0;

        fprintf(f, "%s%s%s  %s%-20s%s  %5.1f s\n", sgr->bold, node, sgr->off, sgr->cyan,
                p->has_phase ? drain_phase_to_string(p->phase) : "preflight", sgr->off, seconds);
        lines++;
        fprintf(f, "  pods left:");
        for (int g = 0; g < EVICT_GROUP_NONE; g++)
                if (p->pods_left[g] > 0 || g == EVICT_GROUP_CLAIM_HOLDERS || g == EVICT_GROUP_REST)
                        fprintf(f, "  %s %zu", evict_group_label(g), p->pods_left[g]);
        fprintf(f, "\n  claims on the node: %zu   driver pods: %zu   evictions accepted: %zu\n",
                p->claims_left, p->drivers_left, p->evictions_accepted);
        lines += 2;
        for (size_t i = 0; i < p->n_held && i < HELD_SHOWN; i++) {
                /* (the reason is the API server's answer: no control character reaches the terminal) */
                _cleanup_free_ char *safe =
                        text_escape_controls(strna(p->held[i].reason), strlen(strna(p->held[i].reason)));

                fprintf(f, "  %sheld%s %s/%s: %.100s\n", sgr->yellow, sgr->off, p->held[i].ns,
                        p->held[i].name, strna(safe));
                lines++;
        }
        if (p->n_held > HELD_SHOWN) {
                fprintf(f, "  ... and %zu more held\n", p->n_held - HELD_SHOWN);
                lines++;
        }
        if (p->node_not_ready) {
                fprintf(f, "  %snode not Ready%s: %s\n", sgr->yellow, sgr->off,
                        p->out_of_service ? "out-of-service taint on: the control plane deletes its pods"
                                          : "its kubelet cannot finish pods nor unprepare claims");
                lines++;
        }
        fprintf(f, "  %s\n", strna(p->message));
        return lines + 1;
}
