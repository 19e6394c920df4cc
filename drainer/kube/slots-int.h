/* Private to the slot Lease semaphore's files (slots.c: each node's acquire, renew
 * and release, the choice of a slot, the API of slots.h; slots-lease.c: the Lease
 * objects as drainer writes and reads them, their expiry by observation, the lease
 * informer): the structs and the functions they call each other through. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/text.h"
#include "drainer/base/timesrc.h"
#include "drainer/kube/client.h"
#include "drainer/kube/informer.h"
#include "drainer/kube/objects.h"
#include "drainer/kube/slots.h"

#define SLOT_PREFIX "drainer-slot-"

#define HOLDER_ANNOTATION "drainer.io/holder-process"

/* Every write names its field manager: the per-node admission policy reads the API
 * server's clock from that manager's managedFields entry (deploy/node-policy.yaml). */
#define WRITE_QUERY "?fieldManager=drainer"

#define DEFAULT_DURATION (120 * USEC_PER_SEC)

#define MAX_SLOTS 1024u

#define MAX_NODES 10000u

#define MAX_LEASES 10000u /* objects in drainer's namespace the informer may cache */

#define RETRY_BASE_USEC (1 * USEC_PER_SEC)

#define RETRY_CAP_USEC (60 * USEC_PER_SEC)

#define RELEASE_ATTEMPTS 5u

#define HOLDERS_CAP 1024u

enum {
        NOTIFY_CHANGED = 1 << 0, /* tell the caller */
        NOTIFY_REEVAL = 1 << 1,  /* waiting nodes try again */
        NOTIFY_GC = 1 << 2,      /* drop nodes that are done; stop the informer when none is left */
};

enum op {
        OP_NONE,
        OP_CREATE,    /* POST a new lease */
        OP_TAKE,      /* PUT over a free, expired or orphaned lease */
        OP_RENEW,     /* PUT renewTime of our lease */
        OP_RELEASE,   /* PUT with holderIdentity cleared */
        OP_NODECHECK, /* GET the holder's Node */
};

/* A node of this process that wants or holds a slot. */
struct slot_node {
        struct slots *s; /* borrowed */
        struct slot_node *next;
        char *name;
        bool wanted; /* between slots_acquire() and slots_release() */
        int slot;    /* the slot this node holds on the server, as far as we know; -1 if none */
        char *rv;    /* resourceVersion of that lease after our last write (or as adopted) */
        int64_t acquire_time, transitions;
        struct kube_call *call; /* at most one in flight */
        enum op op;             /* of call */
        int target;             /* slot of call */
        char *used_rv;          /* resourceVersion a PUT was made from (to distrust on 409) */
        char *check_holder;     /* OP_NODECHECK: whose node */
        int64_t check_acquire;
        int error; /* persistent error shown by slots_acquire() until the retry timer */
        unsigned failures;
        /* First asked, first served (slots_acquire_ordered): the ask time and the name
         * order the waiting nodes of this process; queued once an attempt found nothing
         * it may take (all held, or an older waiter goes first). */
        bool ordered, queued;
        int64_t asked;
        bool verify;      /* renew as soon as the call in flight ends */
        bool retry_armed; /* backoff after a failed acquire or release */
        struct dtimer renew_timer, retry_timer;
};

/* What this process knows about a slot beyond the informer's cache. */
struct slot_view {
        /* Our last successful write, until the cache shows it (the watch lags). */
        char *own_rv;
        bool own_free; /* ... which released the slot */
        int64_t own_transitions;
        /* A cached version a write was refused for (409): stale, wait for the next event. */
        char *distrust_rv;
        bool distrust_absent; /* create said AlreadyExists while the cache had nothing */
        /* Whether the holder's Node exists, asked once per tenure and lease duration. */
        char *checked_holder;
        int64_t checked_acquire;
        uint64_t checked_at;
        bool holder_gone;
        /* The version of the lease this process has seen, and when it first saw it (its
         * own monotonic clock): the holder's tenure is over once it stays unchanged for
         * the lease duration (see slots_lease_expiry). */
        char *seen_rv;
        uint64_t seen_at;
};

struct lease_watch {
        struct slots *s; /* borrowed */
        struct lease_watch *next;
        struct informer *inf; /* owned */
        bool synced;
        int error; /* persistent list/watch error (RBAC), until the next sync or event */
};

struct slots {
        struct kube_client *client; /* borrowed */
        struct timesrc *ts;         /* borrowed */
        char *ns, *identity, *leases_path;
        /* max: the Leases known (views), the most any limit has been; limit: how many may
         * be taken now (slots_set_max). A limit lowered leaves the slots above it to their
         * holders until released: nobody takes them again. */
        unsigned max, limit;
        uint64_t duration_usec;
        int (*node_exists)(const char *node, void *userdata);
        slots_changed_fn changed;
        void *userdata;

        struct slot_view *views; /* owned, max entries */
        struct slot_node *nodes; /* owned */
        size_t n_nodes;
        struct lease_watch *watch;   /* running, or NULL while nothing is wanted */
        struct lease_watch *retired; /* stopped, freed once idle */

        struct dtimer notify_timer, expiry_timer;
        /* slots_close(): settle until close_deadline, stop, then close_done once idle */
        struct dtimer close_timer;
        bool closing;
        uint64_t close_deadline;
        void (*close_done)(struct slots *s, void *userdata);
        void *close_userdata;
        unsigned pending; /* NOTIFY_* for notify_timer */
        bool stopping;
        char holders[HOLDERS_CAP];
};

static inline bool persistent_error(int error) {
        /* What waiting cannot fix: RBAC, a request the server refuses as invalid. */
        return error == -EACCES || error == -EPERM || error == -EINVAL;
}

/* ---- slots.c ---- */

/* Runs the notify timer's work (NOTIFY_*) on the next turn of the loop. */
void slots_notify_later(struct slots *s, unsigned what);
/* A call, retry or the lease watch ended: a slots_close() looks again. */
void slots_tell_quiet(struct slots *s);
/* The node of this process that holds slot i, or NULL. */
struct slot_node *slots_holder_of(struct slots *s, int i);

/* ---- slots-lease.c ---- */

/* Slot i's Lease as the informer has it; NULL before the first list or when absent. */
const struct lease_rec *slots_cached(struct slots *s, int i);
/* When the holder's tenure of slot i ends (monotonic µs; 0: a holder without times). */
uint64_t slots_lease_expiry(struct slots *s, int i, const struct lease_rec *rec);
bool slots_lease_expired(struct slots *s, int i, const struct lease_rec *rec, uint64_t now);
/* The path of slot i's Lease (malloc'd), or NULL. */
char *slots_lease_path(struct slots *s, int i);
/* The whole Lease, as POST and PUT want it (malloc'd), or NULL. holder NULL releases it. */
char *slots_lease_body(struct slots *s, int i, const char *rv, const char *holder, int64_t acquire,
                       int64_t renew, int64_t transitions);
/* The Lease of an answer to a write; -EBADMSG without one or without a resourceVersion. */
int slots_lease_parse(const struct kube_result *res, struct lease_rec **ret);
/* The lease informer: started while a node wants or holds a slot, retired (stopped,
 * freed once idle) when none does. */
int slots_watch_start(struct slots *s);
void slots_watch_retire(struct slots *s);
void slots_reap_retired(struct slots *s);
void slots_watch_free(struct lease_watch *w);
