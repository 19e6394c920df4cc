/* The evictor: eviction requests for the pods of a drain plan (policy/v1
 * Eviction, or a DELETE with --disable-eviction), their answers, and their
 * retries: a 429 (a PodDisruptionBudget says not now) or an error is retried
 * with jittered backoff (Retry-After honoured), one eviction in flight per
 * budget. The engine asks it, at every reconcile, to "evict the pods of this
 * group that need it" and hears of each answer through a callback; what to
 * evict when is the engine's, how is the evictor's. Never a grace period of 0
 * for a claim holder. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/base/macro.h"
#include "drainer/drain/plan.h"

struct kube_client;
struct timesrc;
struct evictor;

struct evictor_options {
        int64_t grace_seconds; /* < 0: each pod's own; 0 becomes 1 s for claim holders, their own for driver pods */
        bool disable_eviction;      /* DELETE (uid precondition, grace period) instead of the Eviction API */
        unsigned random_seed;       /* backoff jitter; 0: from the clock */
        uint64_t backoff_base_usec; /* 0: 1 s */
        uint64_t backoff_cap_usec;  /* 0: 20 s */
};

/* One answer. Strings borrowed: valid during the callback. */
struct evictor_answer {
        const char *ns, *name;
        /* 0: accepted (or the pod is gone already): it terminates on its own now;
         * -EACCES: forbidden, not retried; else held (429: a budget, a namespace being
         * deleted (-EAGAIN, evictor_held says so), or an error) and retried later. */
        int error;
        bool gone;          /* error 0: the pod was gone already (404), nothing was evicted */
        const char *reason; /* held or forbidden: why (the 429 message naming the budget) */
};

struct evictor_callbacks {
        void (*on_answer)(struct evictor *v, const struct evictor_answer *a, void *userdata);
        /* A held eviction may go out again: call evictor_evict(). */
        void (*on_due)(struct evictor *v, void *userdata);
        /* After evictor_cancel(): a cancelled request ended and none is left
         * (evictor_idle()), from that request's callback. */
        void (*on_idle)(struct evictor *v, void *userdata);
};

int evictor_new(struct kube_client *client, struct timesrc *ts, const struct evictor_options *o,
                const struct evictor_callbacks *cb, void *userdata, struct evictor **ret);

/* Sends an eviction for each pod of group g of plan p that needs one: not being
 * deleted, none of ours accepted or in flight, its backoff over, no other
 * eviction under one of its budgets in flight (evictions under one budget go out
 * one at a time: concurrent ones conflict on the budget's status, and the API
 * server retries that update past the request's end, which after a crash can
 * leave a running pod counted as disrupted for 2 minutes). Returns true when
 * every pod of the group is accepted for eviction (or already terminating with
 * no answer of ours outstanding), so that a later group never overlaps an earlier
 * one's requests. */
bool evictor_evict(struct evictor *v, const struct plan *p, enum evict_group g);

/* Pods whose eviction is held (a 429 or an error), with the reason, in no order:
 * at most max, borrowed until the next call into the evictor; a retry in flight is still
 * held. Returns how many. */
struct evictor_held {
        const char *ns, *name, *reason;
        bool ns_terminating; /* held because its namespace is being deleted (403 NamespaceTerminating) */
};
size_t evictor_held(const struct evictor *v, struct evictor_held *ret, size_t max);

/* Pods whose eviction was answered 403 NamespaceTerminating in this run (the
 * namespace is being deleted): retried every 5 s until the pod is marked deleted,
 * then waited for like any evicted pod, as kubectl drain does. Held or not any more
 * (reason may be NULL), in no order, at most max; borrowed as evictor_held's. */
size_t evictor_ns_terminating(const struct evictor *v, struct evictor_held *ret, size_t max);

struct evictor_stats {
        size_t submitted;   /* requests sent */
        size_t accepted;    /* answered: accepted, or the pod was gone */
        size_t retried;     /* answers that held an eviction back (retried later) */
        size_t held_by_pdb; /* evictions held now by a 429 */
};
void evictor_get_stats(const struct evictor *v, struct evictor_stats *ret);

/* Cancels the requests in flight (their answers are dropped) and the retry timer;
 * free once evictor_idle(). */
void evictor_cancel(struct evictor *v);
bool evictor_idle(const struct evictor *v);
void evictor_free(struct evictor *v);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct evictor *, evictor_free);
