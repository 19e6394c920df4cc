/* Several engines' progress on one screen, as drain, uncordon and maintain show it:
 * on a live terminal one block redrawn in place (each running node's part,
 * engine_progress_print()'s, in the order of the runs) with the lines that stay
 * printed above it; elsewhere a timestamped line per phase change or new message. A
 * pod whose eviction becomes held, and no longer is, gets a line each (held_log).
 * Writes only to the FILEs it is given; reads the time from the timesrc. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "drainer/base/timesrc.h"
#include "drainer/drain/progress.h"

struct progress_board;

struct progress_board_options {
        FILE *term;              /* the block, the plain lines and the held lines (stderr) */
        bool live;               /* term is a live terminal: the block; else plain lines */
        FILE *trail;             /* where progress_board_put_trail() writes (stdout) */
        bool trail_on_term;      /* trail is the same terminal: its lines go above the block */
        struct progress_sgr sgr; /* the block's colours ("" each for none) */
        struct timesrc *ts;      /* borrowed */
        uint64_t redraw_usec;    /* at most one redraw per this, but for a phase change */
};

/* A board for n runs. Returns 0, or -ENOMEM. */
int progress_board_new(const struct progress_board_options *o, size_t n, struct progress_board **ret);
/* NULL ok. Returns NULL. */
struct progress_board *progress_board_free(struct progress_board *b);

/* Run i (of node) started: its part is drawn from its next progress on. */
void progress_board_start(struct progress_board *b, size_t i);
/* Run i's progress p, started_usec (timesrc_now) being when the run began: the held
 * lines, then the plain line or the block (redrawn at once when the phase changed).
 * Returns 0, or -ENOMEM when a held pod could not be remembered (it is reported again
 * at the next progress). */
int progress_board_update(struct progress_board *b, size_t i, const char *node,
                          const struct engine_progress *p, uint64_t started_usec);
/* Run i ended: its part leaves the block (at the next redraw), its held pods are
 * forgotten. */
void progress_board_end(struct progress_board *b, size_t i);
/* On a live terminal: the block drawn again (without the parts of runs that ended). */
void progress_board_redraw(struct progress_board *b);
/* The block so far stays on the screen, above what is written to term next. */
void progress_board_commit(struct progress_board *b);
/* A line that stays: written to out (term or trail) and flushed; on a live terminal
 * above the block (cleared, the line, redrawn), so that the scrollback keeps every
 * such line as a file has them. */
void progress_board_put(struct progress_board *b, FILE *out, const char *line);
