/* The nodes one drain command runs on: `-l/--selector SELECTOR` (the Nodes
 * matching a label selector, as kubectl drain -l lists them), `--max-parallel N`
 * (how many this process drains at once), and the exit code of the command (the
 * worst of the nodes'). Pure: no requests, no logging. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#define NODESET_MAX_PARALLEL 100

/* Validates SELECTOR (as apimachinery's labels.Parse; an empty one would match
 * every node and is refused: name the nodes, or give a selector) and returns the
 * path of the Node list with it ("/api/v1/nodes?labelSelector=..."). 0, -EINVAL
 * with *ret_error (malloc'd) saying why, or -ENOMEM. */
int nodeset_list_path(const char *selector, char **ret_path, char **ret_error);

/* Adds the names of the Nodes of one list page (its "items") to *names (*n of
 * them, realloc'd, each malloc'd). 0, -EBADMSG for an item without a name, or
 * -ENOMEM. */
int nodeset_add_page(const cJSON *items, char ***names, size_t *n);
/* Sorts the names and drops duplicates (a list that paged over a change). */
void nodeset_sort(char **names, size_t *n);
void nodeset_free(char **names, size_t n);
/* The n names separated by spaces, as many as fit into buf (size > 0); returns false
 * when some were left out (the caller says so). */
bool nodeset_join(char *const *names, size_t n, char *buf, size_t size);

/* --max-parallel N: 1..NODESET_MAX_PARALLEL. 0 or -EINVAL. */
int nodeset_parse_max_parallel(const char *s, unsigned *ret);

/* The worse of two exit codes of the drain verbs: 1 (an error) over 3 (timed out:
 * the node is mid-drain) over 4 (refused by a blocker) over 0 (done). An error's own
 * code (7-10: API server unreachable, no such node, kubeconfig, forbidden) is kept
 * when every error has it, else the errors read 1; any other code counts as 1. */
int nodeset_worst_exit(int a, int b);
/* The worse of a node's results so far (worst) and one more (r), as negative errnos: the
 * first failure over a refusal (-EPERM) over 0 (e.g. the plans of several --driver). */
int nodeset_worst_result(int worst, int r);
