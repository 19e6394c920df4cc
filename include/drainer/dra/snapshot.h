/* A one-shot, read-only snapshot of a node as a drain sees it: a node view
 * (nodeview.h) whose informers list once and never watch: the Node, its pods, the
 * node's ResourceSlices, all ResourceClaims (claims cannot be filtered by node) and,
 * optionally, all PodDisruptionBudgets, read concurrently (paginated lists, claims
 * from the watch cache). Asynchronous: done runs once, from the loop; the first
 * failure ends the reads. */
#pragma once

#include <stdbool.h>

#include "drainer/dra/nodeview.h"

struct kube_client;
struct timesrc;
struct node_snapshot;

/* error 0: node_snapshot_input() holds what was read; -ENOENT: the node does not
 * exist; another negative errno: what (for people: "list claims: ...", "node \"n\"
 * not found") says which read failed. */
typedef void (*node_snapshot_fn)(struct node_snapshot *s, int error, const char *what, void *userdata);

int node_snapshot_start(struct kube_client *client, struct timesrc *ts, const char *node, bool with_pdbs,
                        node_snapshot_fn done, void *userdata, struct node_snapshot **ret);
/* What was read (borrowed from the snapshot until it is closed); in->node is the Node. */
const struct node_input *node_snapshot_input(const struct node_snapshot *s);
/* Stops what is still reading and frees the snapshot once the view's calls have
 * ended; closed (may be NULL) runs then, from the loop. done does not run after this. */
void node_snapshot_close(struct node_snapshot *s, void (*closed)(void *userdata), void *userdata);
