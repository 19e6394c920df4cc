/* The node view: what a drain of one node looks at, kept current by informers:
 * the Node (by name), its pods (spec.nodeName), its ResourceSlices, all
 * ResourceClaims (claims cannot be filtered by node) and all PodDisruptionBudgets;
 * node_view_collect() turns them into the plan's input. Used by the engine, the
 * guard, status and the one-shot snapshot (plan, status: informers that list once).
 *
 * The cluster-wide informers (Nodes, claims, budgets) can be borrowed from a
 * cluster view that every node view of a process shares: `serve --all-nodes
 * --max-parallel N` holds one watch of each whatever N is (and of every
 * ResourceSlice, if asked: a view then sees only its node's); the node's pods (and
 * otherwise its slices) are a node view's own, server-side filtered. The cluster
 * view watches claims, budgets and slices only while a node view uses them (and, if
 * asked, a little longer, so that one engine following another does not list every
 * claim again, nor the node's pods: a closing view leaves its own watches to the
 * cluster view for as long): an idle daemon watches its Nodes and nothing else.
 *
 * The DRA API version is discovered per resource (claims, slices) by their
 * informers, newest first: resource.k8s.io/v1, v1beta2, v1beta1, or none (no DRA
 * API: the part is synced and empty); node_view_dra_api() says which (nodeview.c
 * has why the records need nothing else). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/kube/informer.h"
#include "drainer/kube/objects.h"

struct kube_client;
struct timesrc;
struct node_view;
struct cluster_view;

/* The parts of a node view (a bit set). */
enum {
        NODE_VIEW_NODE = 1u << 0,   /* the Node, by name */
        NODE_VIEW_PODS = 1u << 1,   /* pods with spec.nodeName */
        NODE_VIEW_CLAIMS = 1u << 2, /* every ResourceClaim */
        NODE_VIEW_SLICES = 1u << 3, /* ResourceSlices with spec.nodeName */
        NODE_VIEW_PDBS = 1u << 4,   /* every PodDisruptionBudget */
        NODE_VIEW_ALL = 0x1fu,
};

/* The group/versions the DRA API may be served at, newest first, NULL-terminated
 * (informer.h's api_prefixes): what every watch of claims or slices lists. */
const char *const *dra_api_prefixes(void);

/* "node", "pods", "resourceclaims", "resourceslices", "poddisruptionbudgets" (one part). */
const char *node_view_part_name(unsigned part);

/* ---- the cluster view: informers shared by many node views ---- */

struct cluster_view_options {
        /* The Nodes to watch: "metadata.name=N" (serve --node), NULL: every node. */
        const char *nodes_field_selector;
        /* Claims and budgets stay watched this long after the last node view let go, so
         * that a restore following a drain borrows a warm cache (serve --all-nodes);
         * 0: they go with the last view. A node view's own watches of its pods (and
         * slices) stay as long, for the next view of the same node. */
        uint64_t linger_usec;
        /* One watch of every ResourceSlice, shared like the claims, rather than one per
         * node view (a cluster view of every node: serve --all-nodes). */
        bool share_slices;
};

int cluster_view_new(struct kube_client *client, struct timesrc *ts, const struct cluster_view_options *o,
                     struct cluster_view **ret);
/* Starts the Node watch. */
int cluster_view_start(struct cluster_view *cv);
/* The Node informer, for reads (get, iterate, synced). Borrowed. */
struct informer *cluster_view_nodes(const struct cluster_view *cv);
/* Another user of the Node informer's events (serve): h runs for every Node. One
 * subscription per userdata; unsubscribe before userdata goes. */
int cluster_view_subscribe_nodes(struct cluster_view *cv, const struct informer_handlers *h, void *userdata);
void cluster_view_unsubscribe_nodes(struct cluster_view *cv, void *userdata);
/* Stops everything; cb runs from the loop once every call has ended (the node views
 * that borrow from it must be closed first). cb may be NULL. */
void cluster_view_close(struct cluster_view *cv, void (*cb)(void *userdata), void *userdata);

/* ---- the node view ---- */

struct node_view_options {
        const char *node;
        /* Parts listed once and never watched (NODE_VIEW_* bits): a snapshot. Own
         * informers only (a shared part is watched anyway). */
        unsigned once;
        /* Borrowed: the Node, claims and budgets come from there. NULL: the view's own
         * informers of everything (budgets then listed once: a one-shot drain is short,
         * and the Eviction API enforces them anyway). */
        struct cluster_view *shared;
};

struct node_view_handlers {
        /* A record of the view was added, changed or deleted. */
        void (*on_change)(struct node_view *v, void *userdata);
        /* A part has its first complete list (again after every relist). */
        void (*on_synced)(struct node_view *v, unsigned part, void *userdata);
        /* A list or watch of a part failed; the informer retries by itself (a once
         * part does not). message: the server's Status message, or NULL. */
        void (*on_error)(struct node_view *v, unsigned part, int error, const char *message, void *userdata);
};

int node_view_new(struct kube_client *client, struct timesrc *ts, const struct node_view_options *o,
                  const struct node_view_handlers *h, void *userdata, struct node_view **ret);
/* Starts the informers of these parts (more may follow later: the guard watches
 * the Node first, the rest once the node turns out to be draining). */
int node_view_start(struct node_view *v, unsigned parts);
/* Stops the informer of one part of the view's own (the guard's Node, once it has
 * decided). Shared parts are left alone. */
void node_view_stop_part(struct node_view *v, unsigned part);
/* The DRA API a part (NODE_VIEW_CLAIMS or NODE_VIEW_SLICES) is read from, once it is
 * synced: 1 with *ret "resource.k8s.io/v1" (or v1beta2, v1beta1; static), 0 when the
 * server serves it in no version (*ret NULL), -EAGAIN before its first list,
 * -EINVAL for another part. */
int node_view_dra_api(const struct node_view *v, unsigned part, const char **ret);
/* Whether every one of these parts is started and has its first list. */
bool node_view_synced(const struct node_view *v, unsigned parts);
/* The Node, or NULL (not listed yet, or not found). */
const struct node_rec *node_view_node(const struct node_view *v);
/* A pod of the node by "ns/name", or NULL. */
const struct pod_rec *node_view_pod(const struct node_view *v, const char *ns_name);
/* The slices of the node, in no order: start with *i = 0. */
bool node_view_iterate_slices(const struct node_view *v, size_t *i, const struct slice_rec **ret);

/* The plan's input: the records of the started parts, borrowed from the caches
 * (valid until they change: use them before returning to the loop). */
struct node_input {
        const struct node_rec *node; /* NULL if not found */
        const struct pod_rec **pods;
        size_t n_pods;
        const struct claim_rec **claims;
        size_t n_claims;
        const struct slice_rec **slices;
        size_t n_slices;
        const struct pdb_rec **pdbs;
        size_t n_pdbs;
        /* The DRA API the claims (else the slices) were read from, "resource.k8s.io/v1"
         * ..., NULL while not known; dra_off: the server serves none (no DRA: a drain
         * is kubectl drain's, without claim logic). */
        const char *dra_api;
        bool dra_off;
};
/* 0 or -ENOMEM (*ret untouched). */
int node_view_collect(const struct node_view *v, struct node_input *ret);
/* Frees the arrays (not the records). */
void node_input_done(struct node_input *in);

/* Stops the informers and lets go of the shared ones; cb runs from the loop (never
 * from inside this call) once every call of the view has ended, then the view is
 * freed. cb may be NULL; calling it again while the view closes replaces cb and
 * userdata (NULL: tell nobody, for an owner that goes first). */
void node_view_close(struct node_view *v, void (*cb)(void *userdata), void *userdata);
