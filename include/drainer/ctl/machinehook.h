/* `serve --cluster-api`: drainer as the owner of a Cluster API pre-drain hook. It
 * watches Machines (cluster.x-k8s.io/v1beta2) being deleted that carry
 * MACHINE_HOOK_ANNOTATION, asks for the drain of each one's Node (status.nodeRef) the
 * way a user does (drainer.io/request=drain, through the drain manager: slots,
 * refusals, state on the Node and resume all hold), and removes the hook (a JSON patch
 * that tests it: only drainer's own) once the Node is drained: no claim left, drivers
 * stopped. Until then the hook stays and an Event on the Machine says why. Prints
 * nothing (its lines go to on_note), knows no flag or exit code. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/base/log.h"
#include "drainer/base/macro.h"

struct kube_client;
struct timesrc;
struct node_rec;
struct machine_hook;

/* Events on the Machine (reasons). */
#define MACHINE_HOOK_REASON_DRAIN   "DrainerHookDrain"   /* the Node's drain was asked for */
#define MACHINE_HOOK_REASON_WAITING "DrainerHookWaiting" /* the drain goes on: the Node's message */
#define MACHINE_HOOK_REASON_BLOCKED "DrainerHookBlocked" /* it cannot finish: the hook stays */
#define MACHINE_HOOK_REASON_NO_NODE "DrainerHookNoNode"  /* no status.nodeRef: nothing done */
#define MACHINE_HOOK_REASON_REMOVED "DrainerHookRemoved" /* drained: the hook was removed */

/* The annotation the Node's drain request carries: which Machine asked (for people). */
#define DRAINER_ANN_CLUSTER_API_MACHINE "drainer.io/cluster-api-machine"

/* The Nodes, through the drain manager: the Node as watched (or NULL) and a merge patch
 * (body taken; -EBUSY while the previous one is in flight). */
struct machine_hook_nodes_ops {
        const struct node_rec *(*node)(void *nodes, const char *name);
        int (*patch)(void *nodes, const char *name, char *body);
};

/* nodes is a struct drain_manager. */
extern const struct machine_hook_nodes_ops machine_hook_manager_ops;

struct machine_hook_options {
        const char *namespace; /* Machines of this namespace only; NULL: every namespace */
        const char *identity;  /* the Events' reportingInstance; NULL: none */
};

struct machine_hook_handlers {
        /* A line for people (error: the errno it is about, or 0). */
        void (*on_note)(struct machine_hook *h, enum log_level level, int error, const char *line,
                        void *userdata);
        /* Machines cannot be served (cluster.x-k8s.io/v1beta2 is not served: -EPROTONOSUPPORT):
         * the hook owner cannot work; the caller decides (serve stops). Once. */
        void (*on_failed)(struct machine_hook *h, int error, const char *message, void *userdata);
        /* After machine_hook_stop(): the watch and every call ended; it may be freed now. */
        void (*on_stopped)(struct machine_hook *h, void *userdata);
};

/* Strings of o are copied; h is borrowed. 0 or a negative errno. */
int machine_hook_new(struct kube_client *client, struct timesrc *ts, const struct machine_hook_options *o,
                     const struct machine_hook_nodes_ops *ops, void *nodes,
                     const struct machine_hook_handlers *h, void *userdata, struct machine_hook **ret);
/* Starts the Machine watch. */
int machine_hook_start(struct machine_hook *h);
/* A Node changed (the manager's on_node): Machines of it are looked at again. */
void machine_hook_node_changed(struct machine_hook *h, const struct node_rec *n);
/* The manager finished the drain of node (DONE, goal drain): its held Machines' hooks may
 * go once the Node says drained. A Node that says drained without this (annotations are
 * anyone's who may patch the Node) is drained again first. */
void machine_hook_drain_done(struct machine_hook *h, const char *node);
/* The drain of node cannot go on (the manager gave up, refused, or cannot read the
 * Node's state): an Event on each of its held Machines says so, with message. */
void machine_hook_drain_blocked(struct machine_hook *h, const char *node, const char *message);
/* Cancels the watch and the calls; on_stopped follows from the loop. */
void machine_hook_stop(struct machine_hook *h);
/* NULL ok. */
void machine_hook_free(struct machine_hook *h);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct machine_hook *, machine_hook_free);
/* Machines held now (deleting, with the hook), for status lines and tests. */
size_t machine_hook_held(const struct machine_hook *h);
