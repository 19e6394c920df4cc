/* Cluster-wide drain slots for --max-parallel: one coordination.k8s.io/v1 Lease
 * per slot (drainer-slot-0 .. drainer-slot-N-1) in drainer's namespace, shared by
 * every drainer process of the cluster. A slot's holderIdentity is the NODE it
 * was taken for, so whichever process manages that node renews and releases it.
 * Expired leases (unchanged for a lease duration, on this process's monotonic clock:
 * never the holder's renewTime against our wall clock, see slots-lease.c slots_lease_expiry) and
 * leases whose node no longer exists are taken over. Leases
 * are watched (one informer, started only while some node wants or holds a
 * slot), never polled. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/base/macro.h"

struct kube_client;
struct timesrc;
struct slots;

struct slots_options {
        const char *ns;               /* e.g. "drainer-system" */
        unsigned max;                 /* N > 0 */
        uint64_t lease_duration_usec; /* 0 = 120 s; renewed every third of it */
        const char *identity;         /* this process, recorded in an annotation of the Lease */
        /* Whether a node exists (for reclaiming slots of deleted nodes); may be NULL, then
         * the module GETs the node. */
        int (*node_exists)(const char *node, void *userdata);
};

/* Something changed (a slot was taken, freed, or lost): the caller re-evaluates. */
typedef void (*slots_changed_fn)(struct slots *s, void *userdata);

int slots_new(struct kube_client *client, struct timesrc *ts, const struct slots_options *o,
              slots_changed_fn changed, void *userdata, struct slots **ret);
/* Level-triggered: 1 if node holds a slot now, 0 while waiting (an attempt is in
 * flight, or all slots are held: the lease watch calls changed() when one frees),
 * negative errno on a persistent error (e.g. -EACCES: RBAC for leases missing). */
int slots_acquire(struct slots *s, const char *node);
/* The same, first asked first served: asked is when the node asked (any clock, the same
 * for every node; ties go by name). A free slot goes to the oldest waiter of this
 * process that holds none; a younger one waits behind it. Nothing is tried within the
 * call: every node the caller registers on this turn of the loop is counted, then the
 * slots go out oldest first on the next turn (changed() says when one is held). A node
 * that already holds its Lease adopts it, whatever its age. */
int slots_acquire_ordered(struct slots *s, const char *node, int64_t asked);
/* Whether node waits for its turn: it asked, holds no slot, and its last attempt found
 * nothing it may take (changed() is called when that becomes true). */
bool slots_queued(const struct slots *s, const char *node);
/* Gives the node's slot back (holderIdentity cleared). No-op if it holds none. */
void slots_release(struct slots *s, const char *node);
/* Releases the slot of every node of this process that keep() answers false for (its
 * Node was deleted: no reconcile of it will ever release it). */
void slots_release_unless(struct slots *s, bool (*keep)(const char *node, void *userdata), void *userdata);
bool slots_held(const struct slots *s, const char *node);
/* How many slots may be held from now on (1-1024; --max-parallel as a percentage of
 * the nodes, which come and go). A lower limit takes no slot away: slots above it stay
 * with their holders until released, and are not taken again. -EINVAL, -ENOMEM. */
int slots_set_max(struct slots *s, unsigned max);
unsigned slots_max(const struct slots *s);
/* "node-1, node-3": the current holders, for the waiting message. Returns a static
 * buffer valid until the next call. */
const char *slots_holders(struct slots *s);
/* No call of any node in flight and no retry pending: every release given back to
 * the server (a process that ends calls slots_stop only after this, or a slot it
 * released would stay held until the Lease expires). */
bool slots_settled(const struct slots *s);
/* Cancels calls, stops the informer and timers; free once slots_idle(). */
void slots_stop(struct slots *s);
bool slots_idle(const struct slots *s);
/* The end of a process's slots: waits at most settle_usec for slots_settled() (the
 * releases given back to the server), then slots_stop(), then done(s, userdata) once
 * idle: on a later turn of the loop, woken by the answers, the watch's end and the
 * deadline, never by a tick. The slots may be freed from done. Once only. */
void slots_close(struct slots *s, uint64_t settle_usec, void (*done)(struct slots *s, void *userdata),
                 void *userdata);
void slots_free(struct slots *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct slots *, slots_free);
