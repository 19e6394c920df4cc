/* A one-shot, read-only snapshot of a node as a drain sees it: a node view
 * (nodeview.h) whose informers list once and never watch: the Node, its pods,
 * the node's ResourceSlices, all ResourceClaims (claims cannot be filtered by
 * node) and, optionally, all PodDisruptionBudgets, read concurrently (paginated
 * lists, claims from the watch cache). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "drainer/nodeview.h"

struct app;

struct snapshot {
        struct app *app; /* borrowed */
        const char *node_name;
        bool with_pdbs;
        const struct node_rec *node; /* in.node: NULL when not found */
        struct node_input in;        /* borrowed from the view, valid until snapshot_done() */
        struct node_view *view;      /* owned */
        bool done, closed;
        int error;
        char *error_what;
};

/* Starts the reads; run the loop until s->done. s->error then tells how it went
 * (-ENOENT with no node: the node does not exist). */
int snapshot_start(struct snapshot *s);
/* snapshot_start, the loop run until done, and its failure logged ("node \"N\" not
 * found", or what failed): 0, or the logged error. snapshot_done() either way. */
int snapshot_read(struct snapshot *s);
/* Frees everything, running the loop until the view's calls have ended. */
void snapshot_done(struct snapshot *s);
