/* A one-shot, read-only snapshot of a node as a drain sees it: the Node, its
 * pods, the node's ResourceSlices, all ResourceClaims (claims cannot be
 * filtered by node) and, optionally, all PodDisruptionBudgets, read
 * concurrently (paginated lists, claims from the watch cache). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct app;
struct node_rec;
struct kube_result;

struct rec_array {
        void **items;
        size_t n, alloc;
};

struct snapshot {
        struct app *app; /* borrowed */
        const char *node_name;
        bool with_pdbs;
        struct node_rec *node; /* owned, like every record in the arrays */
        struct rec_array pods, claims, slices, pdbs;
        unsigned pending;
        bool done;
        int error;
        char *error_what;
};

/* Starts the reads; run the loop until s->done. s->error then tells how it went
 * (-ENOENT with no node: the node does not exist). */
int snapshot_start(struct snapshot *s);
void snapshot_done(struct snapshot *s);
