/* Leader election on one coordination.k8s.io/v1 Lease, as client-go's leaderelection
 * package does it for kube-controller-manager (the same three durations and their
 * defaults: lease 15 s, renew deadline 10 s, retry period 2 s), so that of several
 * replicas of `drainer serve --all-nodes` exactly one writes.
 *
 * A candidate reads the Lease every retry period and takes it once its holder has
 * left it unchanged for the lease duration, measured on this process's monotonic
 * clock from when the candidate first saw that version (never the holder's renewTime
 * against our wall clock). The leader renews every retry period with the version it
 * wrote last (a PUT with resourceVersion: two writers cannot both succeed).
 *
 * Fencing: the leader's writes are allowed only until the renew deadline after the
 * last renewal it sent (leader_may_write(), for the client's write gate): the
 * deadline is below the lease duration, so the leader stops writing at least
 * (lease duration - renew deadline) before any candidate can take the Lease, even
 * when it was frozen (SIGSTOP) or cut off. When the deadline passes without a
 * renewal, or the Lease is seen held by another, the tenure is over: lost() runs once
 * and the object does nothing more (the process ends, as kube-controller-manager
 * does, and its restart is a candidate again). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "drainer/base/macro.h"

struct credentials;
struct kube_client;
struct kube_client_options;
struct kube_config;
struct timesrc;
struct transport;
struct leader;

#define LEADER_DEFAULT_LEASE_DURATION_USEC (15 * USEC_PER_SEC)
#define LEADER_DEFAULT_RENEW_DEADLINE_USEC (10 * USEC_PER_SEC)
#define LEADER_DEFAULT_RETRY_PERIOD_USEC   (2 * USEC_PER_SEC)

struct leader_options {
        const char *ns;               /* the Lease's namespace */
        const char *name;             /* the Lease, e.g. "drainer-leader" */
        const char *identity;         /* this process (holderIdentity): unique among replicas */
        uint64_t lease_duration_usec; /* 0: the default */
        uint64_t renew_deadline_usec; /* 0: the default; below the lease duration */
        uint64_t retry_period_usec;   /* 0: the default; below the renew deadline */
};

struct leader_callbacks {
        /* This process holds the Lease: it may write until the renew deadline. */
        void (*started)(struct leader *l, void *userdata);
        /* The tenure is over (the renew deadline passed, or another holds the Lease):
         * stop writing now. error says why (-ETIMEDOUT: no renewal in time; -EBUSY:
         * held by another). Once; the object then only waits to be closed. */
        void (*lost)(struct leader *l, int error, void *userdata);
        /* A persistent error a candidate cannot wait out (RBAC: -EACCES; the Lease in
         * a form it cannot read: -EBADMSG), with the API server's message. May be NULL.
         * The candidate keeps trying every retry period. */
        void (*error)(struct leader *l, int error, const char *message, void *userdata);
};

/* Checks the options: -EINVAL with *ret_message (static) when a duration is out of
 * order (renew deadline >= lease duration, retry period >= renew deadline) or a name is
 * not a valid object name. */
int leader_options_check(const struct leader_options *o, const char **ret_message);
/* identity with a random suffix ("IDENTITY_1a2b3c4d"), unique among replicas even with
 * one identity, as kube-controller-manager's hostname_UUID; into buf (truncated to
 * size). */
void leader_identity_unique(const char *identity, char *buf, size_t size);

int leader_new(struct kube_client *client, struct timesrc *ts, const struct leader_options *o,
               const struct leader_callbacks *cb, void *userdata, struct leader **ret);
/* As leader_new(), over a client of the leader's own on the same transport (owned:
 * freed with the leader), as kube-controller-manager's leader election has its own
 * clientset: requests queued in the process's client (its token bucket) must not hold
 * a renewal back past the renew deadline, and each attempt lasts the renew deadline at
 * most. impersonation: the process's client's (its impersonate_* fields; NULL: none). */
int leader_new_own_client(struct transport *t, struct timesrc *ts, const struct kube_config *cfg,
                          struct credentials *creds, const struct kube_client_options *impersonation,
                          const struct leader_options *o, const struct leader_callbacks *cb, void *userdata,
                          struct leader **ret);
/* Becomes a candidate: reads the Lease now. */
int leader_start(struct leader *l);
bool leader_leading(const struct leader *l);
/* Whether a write of the leader may be sent now: leading, and before the renew
 * deadline after the last renewal sent (on the monotonic clock). */
bool leader_may_write(const struct leader *l);
/* The write gate for the client (kube_client_set_write_gate): the Lease's own writes
 * pass, every other write only while leader_may_write(). */
bool leader_write_gate(const char *method, const char *path, void *userdata);
/* The holder this process last saw ("" when none), for status and logs. */
const char *leader_holder(const struct leader *l);
/* Ends the candidacy or the tenure: cancels what is in flight, gives the Lease back
 * when leading and still inside the renew deadline (holderIdentity cleared, a lease of
 * 1 s, as client-go's ReleaseOnCancel: a replica takes over within its retry period),
 * then done() once nothing is in flight. Once. */
void leader_close(struct leader *l, void (*done)(struct leader *l, void *userdata), void *userdata);
bool leader_idle(const struct leader *l);
void leader_free(struct leader *l);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct leader *, leader_free);
