/* Drain slots for --max-parallel: one coordination.k8s.io/v1 Lease per slot,
 * shared by every drainer process of the cluster (see slots.h). This file owns
 * the per-node create/take/renew/release calls and their timers, the choice of a
 * slot and the notify timer; the Lease objects and the lease informer are
 * slots-lease.c's. Never polls: it acts on lease events, on its own answers, and
 * on the one deadline when the first slot held elsewhere expires. Logs at debug
 * level only; asserts only its callers' mistakes, never what a Lease says. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/backoff.h"
#include "drainer/base/log.h"
#include "slots-int.h"

static void try_take(struct slot_node *n);

static void settle(struct slot_node *n);

/* ---- small helpers ---- */

/* Without jitter: a lease retry is one request per node, and its cap moves with the
 * lease duration. */
static uint64_t backoff(unsigned failures, uint64_t cap) {
        return backoff_exponential(RETRY_BASE_USEC, cap, failures);
}

void slots_notify_later(struct slots *s, unsigned what) {
        if (s->stopping)
                return;
        s->pending |= what;
        if (!s->notify_timer.armed)
                dtimer_start(&s->notify_timer, 0);
}

static struct slot_node *node_find(struct slots *s, const char *name) {
        for (struct slot_node *n = s->nodes; n; n = n->next)
                if (streq(n->name, name))
                        return n;
        return NULL;
}

struct slot_node *slots_holder_of(struct slots *s, int i) {
        for (struct slot_node *n = s->nodes; n; n = n->next)
                if (n->slot == i)
                        return n;
        return NULL;
}

static void node_free(struct slot_node *n) {
        if (!n)
                return;
        assert(!n->call);
        dtimer_done(&n->renew_timer);
        dtimer_done(&n->retry_timer);
        free(n->name);
        free(n->rv);
        free(n->used_rv);
        free(n->check_holder);
        free(n);
}

static void on_renew_timer(struct dtimer *t);

static void on_retry_timer(struct dtimer *t);
static void on_close_timer(struct dtimer *t);

static int node_new(struct slots *s, const char *name, struct slot_node **ret) {
        struct slot_node *n;
        int r;

        if (s->n_nodes >= MAX_NODES)
                return -ENOSPC;
        n = calloc(1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        n->s = s;
        n->slot = -1;
        n->target = -1;
        n->name = strdup(name);
        r = dtimer_init(&n->renew_timer, s->ts, on_renew_timer);
        if (r >= 0) {
                r = dtimer_init(&n->retry_timer, s->ts, on_retry_timer);
                if (r < 0)
                        dtimer_done(&n->renew_timer);
        }
        if (r < 0 || !n->name) {
                free(n->name);
                free(n);
                return r < 0 ? r : -ENOMEM;
        }
        n->next = s->nodes;
        s->nodes = n;
        s->n_nodes++;
        *ret = n;
        return 0;
}

/* ---- calls ---- */

static void on_call_done(const struct kube_result *res, void *userdata);

static int start_call(struct slot_node *n, enum op op, int target, const char *path, const char *body) {
        struct slots *s = n->s;
        int r;

        assert(!n->call);
        n->queued = false;
        switch (op) {
        case OP_NODECHECK:
                r = kube_get(s->client, path, on_call_done, n, &n->call);
                break;
        case OP_CREATE:
                r = kube_create(s->client, path, body, on_call_done, n, &n->call);
                break;
        default:
                r = kube_replace(s->client, path, body, on_call_done, n, &n->call);
        }
        if (r < 0)
                return r;
        n->op = op;
        n->target = target;
        return 0;
}

/* POST (OP_CREATE) or PUT over the version use_rv (renew, take, release). */
static int start_write(struct slot_node *n, enum op op, int i, const char *use_rv, const char *holder,
                       int64_t acquire, int64_t transitions) {
        struct slots *s = n->s;
        _cleanup_free_ char *path = NULL, *body = NULL;
        int r;

        body = slots_lease_body(s, i, use_rv, holder, acquire, timesrc_realtime(s->ts), transitions);
        if (op == OP_CREATE) {
                if (asprintf(&path, "%s" WRITE_QUERY, s->leases_path) < 0)
                        path = NULL;
        } else
                path = slots_lease_path(s, i);
        if (!body || !path)
                return -ENOMEM;
        r = text_replace(&n->used_rv, use_rv);
        if (r < 0)
                return r;
        log_debug("slots: %s \"%s/" SLOT_PREFIX "%d\" for \"%s\"",
                  op == OP_CREATE  ? "creating"
                  : op == OP_TAKE  ? "taking"
                  : op == OP_RENEW ? "renewing"
                                   : "releasing",
                  s->ns, i, n->name);
        return start_call(n, op, i, path, body);
}

static void arm_retry(struct slot_node *n) {
        n->failures++;
        n->retry_armed = true;
        dtimer_start(&n->retry_timer, backoff(n->failures, RETRY_CAP_USEC));
}

static void record_write(struct slots *s, int i, const struct lease_rec *rec, bool freed) {
        struct slot_view *v = &s->views[i];

        if (text_replace(&v->own_rv, rec->resource_version) < 0)
                v->own_rv = mfree(v->own_rv); /* then trust the cache: at worst one 409 */
        v->own_free = freed;
        v->own_transitions = rec->transitions;
}

/* Makes the node the holder of slot i as the server answered. */
static int hold(struct slot_node *n, int i, const struct lease_rec *rec) {
        if (text_replace(&n->rv, rec->resource_version) < 0)
                return -ENOMEM;
        n->slot = i;
        n->queued = false;
        n->acquire_time = rec->acquire_time_usec;
        n->transitions = rec->transitions;
        return 0;
}

static void done_acquire(struct slot_node *n, enum op op, int i, const struct kube_result *res) {
        struct slots *s = n->s;
        _cleanup_(lease_rec_freep) struct lease_rec *rec = NULL;
        int r = res->error;

        if (r >= 0)
                r = slots_lease_parse(res, &rec);
        if (r >= 0)
                r = hold(n, i, rec);
        if (r >= 0) {
                record_write(s, i, rec, false);
                n->failures = 0;
                n->error = 0;
                dtimer_start(&n->renew_timer, s->duration_usec / 3);
                log_debug("slots: \"%s\" holds \"%s/" SLOT_PREFIX "%d\"", n->name, s->ns, i);
                return slots_notify_later(s, NOTIFY_CHANGED);
        }

        log_debug("slots: %s \"%s/" SLOT_PREFIX "%d\" for \"%s\" failed: %s%s%s",
                  op == OP_CREATE ? "creating" : "taking", s->ns, i, n->name,
                  res->message ? res->message : strerror(-r), res->reason ? ", " : "",
                  strempty(res->reason));
        if (r == -EEXIST || r == -EBUSY || (op == OP_TAKE && r == -ENOENT)) {
                /* Another process was faster (409 Conflict / AlreadyExists), or the lease went
                 * away: what we saw is stale. The informer brings the news; until then leave
                 * that version alone. */
                struct slot_view *v = &s->views[i];

                if (op == OP_CREATE)
                        v->distrust_absent = !slots_cached(s, i);
                else if (text_replace(&v->distrust_rv, n->used_rv) < 0)
                        v->distrust_rv = mfree(v->distrust_rv);
                if (v->own_rv && streq_ptr(v->own_rv, n->used_rv))
                        v->own_rv = mfree(v->own_rv);
                return slots_notify_later(s, NOTIFY_REEVAL);
        }
        /* A take of another holder's lease refused as invalid (422): in per-node mode the
         * admission policy (deploy/node-policy.yaml) judges the holder's tenure by the API
         * server's clock and its renewTime, which may run a little ahead of ours: not over
         * yet there. Retried after the backoff, not reported. */
        if (op == OP_TAKE && r == -EINVAL) {
                arm_retry(n);
                return;
        }
        /* A create answering 404: drainer's namespace does not exist; the caller reports it. */
        if (persistent_error(r) || (op == OP_CREATE && r == -ENOENT)) {
                n->error = r;
                slots_notify_later(s, NOTIFY_CHANGED);
        }
        arm_retry(n);
}

static void lost(struct slot_node *n, const char *why) {
        struct slots *s = n->s;
        struct slot_view *v = &s->views[n->slot];

        log_debug("slots: \"%s\" lost \"%s/" SLOT_PREFIX "%d\": %s", n->name, s->ns, n->slot, why);
        if (text_replace(&v->distrust_rv, n->used_rv) < 0)
                v->distrust_rv = mfree(v->distrust_rv);
        v->own_rv = mfree(v->own_rv);
        dtimer_stop(&n->renew_timer);
        n->slot = -1;
        n->rv = mfree(n->rv);
        n->verify = false;
        slots_notify_later(s, NOTIFY_CHANGED | NOTIFY_REEVAL | NOTIFY_GC);
}

static void done_renew(struct slot_node *n, int i, const struct kube_result *res) {
        struct slots *s = n->s;
        _cleanup_(lease_rec_freep) struct lease_rec *rec = NULL;
        int r = res->error;

        if (n->slot != i)
                return;
        if (r >= 0)
                r = slots_lease_parse(res, &rec);
        if (r >= 0 && streq_ptr(rec->holder, n->name))
                r = hold(n, i, rec);
        else if (r >= 0)
                r = -EBUSY; /* cannot happen with a resourceVersion, but never hold what is not ours */
        if (r >= 0) {
                record_write(s, i, rec, false);
                n->failures = 0;
                if (n->wanted)
                        dtimer_start(&n->renew_timer, s->duration_usec / 3);
                return;
        }
        if (r == -EBUSY || r == -EEXIST || r == -ENOENT)
                return lost(n, r == -ENOENT ? "the lease is gone" : "someone else wrote it");
        /* Anything else: try again soon, well before the lease runs out. Whether it still
         * is ours only a 409 can tell. */
        log_debug("slots: renewing \"%s/" SLOT_PREFIX "%d\" failed: %s, retrying", s->ns, i,
                  res->message ? res->message : strerror(-r));
        n->failures++;
        if (n->wanted)
                dtimer_start(&n->renew_timer,
                             backoff(n->failures, MAX(s->duration_usec / 3, RETRY_BASE_USEC)));
}

static void done_release(struct slot_node *n, int i, const struct kube_result *res) {
        struct slots *s = n->s;
        _cleanup_(lease_rec_freep) struct lease_rec *rec = NULL;
        int r = res->error;

        if (n->slot != i)
                return;
        if (r >= 0 && slots_lease_parse(res, &rec) >= 0)
                record_write(s, i, rec, true);
        if (r >= 0 || r == -EBUSY || r == -EEXIST || r == -ENOENT || ++n->failures >= RELEASE_ATTEMPTS) {
                /* Released; or not ours any more; or given up: the lease then expires by itself. */
                log_debug("slots: \"%s\" released \"%s/" SLOT_PREFIX "%d\"%s%s", n->name, s->ns, i,
                          r < 0 ? ": " : "", r < 0 ? strerror(-r) : "");
                n->slot = -1;
                n->rv = mfree(n->rv);
                n->failures = 0;
                return slots_notify_later(s, NOTIFY_CHANGED | NOTIFY_REEVAL | NOTIFY_GC);
        }
        n->retry_armed = true;
        dtimer_start(&n->retry_timer, backoff(n->failures, RETRY_CAP_USEC));
}

static void done_nodecheck(struct slot_node *n, int i, const struct kube_result *res) {
        struct slots *s = n->s;
        struct slot_view *v = &s->views[i];

        /* Only a 404 says the node is gone; on other errors assume it exists (and do not
         * ask again for a while). */
        free(v->checked_holder);
        v->checked_holder = TAKE_PTR(n->check_holder);
        v->checked_acquire = n->check_acquire;
        v->checked_at = timesrc_now(s->ts);
        v->holder_gone = res->error == -ENOENT;
        log_debug("slots: node \"%s\" holding \"%s/" SLOT_PREFIX "%d\" %s", strna(v->checked_holder), s->ns,
                  i, v->holder_gone ? "is gone" : "exists");
        try_take(n);
}

static void on_call_done(const struct kube_result *res, void *userdata) {
        struct slot_node *n = userdata;
        struct slots *s = n->s;
        enum op op = n->op;
        int i = n->target;

        n->call = NULL;
        n->op = OP_NONE;
        n->target = -1;
        if (res->error == -ECANCELED || s->stopping) {
                n->check_holder = mfree(n->check_holder);
                if (!s->stopping)
                        settle(n);
                return slots_tell_quiet(s);
        }
        switch (op) {
        case OP_CREATE:
        case OP_TAKE:
                done_acquire(n, op, i, res);
                break;
        case OP_RENEW:
                done_renew(n, i, res);
                break;
        case OP_RELEASE:
                done_release(n, i, res);
                break;
        case OP_NODECHECK:
                done_nodecheck(n, i, res);
                break;
        default:
                assert(false);
        }
        settle(n);
        slots_tell_quiet(s);
}

static void start_renew(struct slot_node *n) {
        int r;

        r = start_write(n, OP_RENEW, n->slot, n->rv, n->name, n->acquire_time, n->transitions);
        if (r < 0) {
                n->failures++;
                dtimer_start(&n->renew_timer,
                             backoff(n->failures, MAX(n->s->duration_usec / 3, RETRY_BASE_USEC)));
        }
}

static void start_release(struct slot_node *n) {
        int r;

        dtimer_stop(&n->renew_timer);
        r = start_write(n, OP_RELEASE, n->slot, n->rv, NULL, n->acquire_time, n->transitions);
        if (r < 0) {
                /* Cannot even ask: the lease expires by itself. */
                n->slot = -1;
                n->rv = mfree(n->rv);
                slots_notify_later(n->s, NOTIFY_CHANGED | NOTIFY_REEVAL | NOTIFY_GC);
        }
}

/* After anything changed for the node: release what is no longer wanted, verify, tidy. */
static void settle(struct slot_node *n) {
        struct slots *s = n->s;

        if (s->stopping || n->call)
                return;
        if (n->slot >= 0 && !n->wanted) {
                if (!n->retry_armed)
                        start_release(n);
                return;
        }
        if (n->slot >= 0 && n->verify) {
                n->verify = false;
                start_renew(n);
                return;
        }
        if (n->slot < 0 && !n->wanted)
                slots_notify_later(s, NOTIFY_GC);
}

static void on_renew_timer(struct dtimer *t) {
        struct slot_node *n = container_of(t, struct slot_node, renew_timer);

        if (n->s->stopping || n->slot < 0 || !n->wanted)
                return;
        if (n->call) {
                n->verify = true;
                return;
        }
        start_renew(n);
}

static void on_retry_timer(struct dtimer *t) {
        struct slot_node *n = container_of(t, struct slot_node, retry_timer);

        n->retry_armed = false;
        if (n->s->stopping)
                return;
        if (n->error < 0) {
                n->error = 0;
                slots_notify_later(n->s, NOTIFY_CHANGED);
        }
        settle(n);
        try_take(n);
        slots_tell_quiet(n->s);
}

/* ---- choosing a slot ---- */

static void arm_expiry(struct slots *s, uint64_t expiry) {
        uint64_t now = timesrc_now(s->ts);
        /* Strictly after: expired means expiry < now. */
        uint64_t delay = expiry >= now ? expiry - now + USEC_PER_MSEC : 0;
        uint64_t due = now + delay;

        if (!s->expiry_timer.armed || s->expiry_timer.due > due)
                dtimer_start(&s->expiry_timer, delay);
}

/* 1 exists (or cannot tell), 0 gone, -EINPROGRESS asking the API server. */
static int holder_exists(struct slot_node *n, int i, const struct lease_rec *rec) {
        struct slots *s = n->s;
        struct slot_view *v = &s->views[i];
        _cleanup_free_ char *esc = NULL, *path = NULL;
        int r;

        if (s->node_exists) {
                r = s->node_exists(rec->holder, s->userdata);
                return r == 0 ? 0 : 1;
        }
        if (streq_ptr(v->checked_holder, rec->holder) && v->checked_acquire == rec->acquire_time_usec &&
            timesrc_now(s->ts) - v->checked_at < s->duration_usec)
                return v->holder_gone ? 0 : 1;
        esc = kube_query_escape(rec->holder);
        if (!esc || asprintf(&path, "/api/v1/nodes/%s", esc) < 0)
                return 1;
        if (text_replace(&n->check_holder, rec->holder) < 0)
                return 1;
        n->check_acquire = rec->acquire_time_usec;
        if (start_call(n, OP_NODECHECK, i, path, NULL) < 0) {
                n->check_holder = mfree(n->check_holder);
                return 1;
        }
        return -EINPROGRESS;
}

static int adopt(struct slot_node *n, int i, const struct lease_rec *rec) {
        int r = hold(n, i, rec);

        if (r < 0)
                return r;
        log_debug("slots: \"%s\" already holds \"%s/%s\", renewing", n->name, n->s->ns, rec->name);
        /* The cache may lag behind the server: renewing at once also checks it is ours. */
        dtimer_start(&n->renew_timer, 0);
        return 0;
}

static void take(struct slot_node *n, int i, const char *rv, const char *old_holder,
                 int64_t old_transitions) {
        int64_t now = timesrc_realtime(n->s->ts);
        int64_t tr = old_transitions + (streq_ptr(old_holder, n->name) ? 0 : 1);
        int r;

        r = start_write(n, rv ? OP_TAKE : OP_CREATE, i, rv, n->name, now, rv ? tr : 0);
        if (r < 0)
                arm_retry(n);
}

/* An ordered node that waits for its turn: nothing in flight, no backoff, no error (a
 * node that failed does not hold up the others). */
static bool in_queue(const struct slot_node *n) {
        return n->ordered && n->wanted && n->slot < 0 && !n->call && !n->retry_armed && n->error >= 0;
}

/* Whether a was asked before b: the ask time, then the name (the same order in every
 * process that reads the same stamps). */
static bool asked_before(const struct slot_node *a, const struct slot_node *b) {
        return a->asked < b->asked || (a->asked == b->asked && strcmp(a->name, b->name) < 0);
}

/* The oldest waiter of this process: the only ordered node that may take a free slot. */
static struct slot_node *queue_head(struct slots *s) {
        struct slot_node *h = NULL;

        for (struct slot_node *n = s->nodes; n; n = n->next)
                if (in_queue(n) && (!h || asked_before(n, h)))
                        h = n;
        return h;
}

/* Nothing to take for n now: the caller hears of it once (it then says the node waits). */
static void mark_queued(struct slot_node *n) {
        if (n->queued)
                return;
        n->queued = true;
        slots_notify_later(n->s, NOTIFY_CHANGED);
}

/* One attempt for a waiting node: adopt the slot it already holds, else (an ordered
 * node: only the oldest waiter) take the first absent, free or expired slot, else one
 * whose holder's node is gone. */
static void try_take(struct slot_node *n) {
        struct slots *s = n->s;
        uint64_t now, earliest = UINT64_MAX;
        const struct lease_rec *rec;
        bool busy[MAX_SLOTS] = {};

        if (s->stopping || !n->wanted || n->slot >= 0 || n->call || n->retry_armed || !s->watch ||
            !s->watch->synced)
                return;
        now = timesrc_now(s->ts);
        /* Slots held or targeted by our nodes, once: cluster mode re-evaluates many nodes. */
        for (struct slot_node *m = s->nodes; m; m = m->next) {
                if (m->slot >= 0 && (unsigned)m->slot < s->max)
                        busy[m->slot] = true;
                if (m->call && m->target >= 0 && (unsigned)m->target < s->max)
                        busy[m->target] = true;
        }

        for (unsigned i = 0; i < s->max; i++) {
                struct slot_view *v = &s->views[i];

                rec = slots_cached(s, (int)i);
                if (!rec || !streq_ptr(rec->holder, n->name) || busy[i] || v->own_rv ||
                    streq_ptr(v->distrust_rv, rec->resource_version) || !rec->resource_version)
                        continue;
                if (adopt(n, (int)i, rec) >= 0)
                        return slots_notify_later(s, NOTIFY_CHANGED);
        }
        /* First asked, first served: a younger waiter leaves a free slot to the oldest. */
        if (n->ordered && queue_head(s) != n)
                return mark_queued(n);

        for (unsigned i = 0; i < s->limit; i++) {
                struct slot_view *v = &s->views[i];

                if (busy[i])
                        continue;
                if (v->own_rv && v->own_free)
                        /* We released it and the cache has not caught up yet. */
                        return take(n, (int)i, v->own_rv, NULL, v->own_transitions);
                rec = slots_cached(s, (int)i);
                if (!rec) {
                        if (v->distrust_absent)
                                continue;
                        return take(n, (int)i, NULL, NULL, 0);
                }
                if (!rec->resource_version || streq_ptr(v->distrust_rv, rec->resource_version))
                        continue;
                if (!rec->holder || slots_lease_expired(s, (int)i, rec, now) || streq(rec->holder, n->name))
                        return take(n, (int)i, rec->resource_version, rec->holder, rec->transitions);
                earliest = MIN(earliest, slots_lease_expiry(s, (int)i, rec));
        }

        for (unsigned i = 0; i < s->limit; i++) {
                struct slot_view *v = &s->views[i];
                int r;

                rec = slots_cached(s, (int)i);
                if (busy[i] || !rec || !rec->holder || !rec->resource_version ||
                    streq_ptr(v->distrust_rv, rec->resource_version))
                        continue;
                r = holder_exists(n, (int)i, rec);
                if (r == -EINPROGRESS)
                        return;
                if (r == 0)
                        return take(n, (int)i, rec->resource_version, rec->holder, rec->transitions);
        }

        /* All taken: a watch event, or the first expiry, brings the next chance. */
        if (earliest != UINT64_MAX)
                arm_expiry(s, earliest);
        mark_queued(n);
}

/* ---- the notify timer ---- */

static bool anyone_waiting(struct slots *s) {
        for (struct slot_node *n = s->nodes; n; n = n->next)
                if (n->wanted && n->slot < 0)
                        return true;
        return false;
}

static void gc(struct slots *s) {
        struct slot_node **p = &s->nodes;

        while (*p) {
                struct slot_node *n = *p;

                if (!n->wanted && n->slot < 0 && !n->call) {
                        *p = n->next;
                        s->n_nodes--;
                        node_free(n);
                } else
                        p = &n->next;
        }
        if (!s->nodes)
                slots_watch_retire(s);
        if (!anyone_waiting(s))
                dtimer_stop(&s->expiry_timer);
        slots_reap_retired(s);
}

static void on_notify_timer(struct dtimer *t) {
        struct slots *s = container_of(t, struct slots, notify_timer);
        unsigned what = s->pending;

        s->pending = 0;
        if (s->stopping)
                return;
        gc(s);
        if (what & NOTIFY_REEVAL) {
                struct slot_node *h;

                /* The ordered waiters oldest first, until one finds nothing to take (then
                 * every younger one waits behind it); then everyone else. */
                while ((h = queue_head(s))) {
                        try_take(h);
                        if (in_queue(h))
                                break;
                }
                for (struct slot_node *n = s->nodes; n; n = n->next)
                        try_take(n);
        }
        if ((what & NOTIFY_CHANGED) && s->changed)
                s->changed(s, s->userdata);
}

static void on_expiry_timer(struct dtimer *t) {
        struct slots *s = container_of(t, struct slots, expiry_timer);

        slots_notify_later(s, NOTIFY_REEVAL | NOTIFY_CHANGED);
}

/* ---- API ---- */

int slots_new(struct kube_client *client, struct timesrc *ts, const struct slots_options *o,
              slots_changed_fn changed, void *userdata, struct slots **ret) {
        _cleanup_free_ char *ens = NULL;
        struct slots *s;
        int r;

        assert(client && ts && o && ret);
        if (!o->ns || !*o->ns || o->max == 0 || o->max > MAX_SLOTS)
                return -EINVAL;
        if (o->lease_duration_usec && o->lease_duration_usec < 3 * USEC_PER_SEC)
                return -EINVAL; /* whole seconds on the server, renewed every third */
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->client = client;
        s->ts = ts;
        s->max = s->limit = o->max;
        s->duration_usec = o->lease_duration_usec ? o->lease_duration_usec : DEFAULT_DURATION;
        s->node_exists = o->node_exists;
        s->changed = changed;
        s->userdata = userdata;
        s->ns = strdup(o->ns);
        s->identity = o->identity ? strdup(o->identity) : NULL;
        s->views = calloc(o->max, sizeof(struct slot_view));
        ens = kube_query_escape(o->ns);
        if (!s->ns || (o->identity && !s->identity) || !s->views || !ens ||
            asprintf(&s->leases_path, "/apis/coordination.k8s.io/v1/namespaces/%s/leases", ens) < 0) {
                s->leases_path = NULL;
                r = -ENOMEM;
                goto fail;
        }
        r = dtimer_init(&s->notify_timer, ts, on_notify_timer);
        if (r < 0)
                goto fail;
        r = dtimer_init(&s->expiry_timer, ts, on_expiry_timer);
        if (r < 0) {
                dtimer_done(&s->notify_timer);
                goto fail;
        }
        r = dtimer_init(&s->close_timer, ts, on_close_timer);
        if (r < 0) {
                dtimer_done(&s->notify_timer);
                dtimer_done(&s->expiry_timer);
                goto fail;
        }
        *ret = s;
        return 0;
fail:
        free(s->ns);
        free(s->identity);
        free(s->views);
        free(s->leases_path);
        free(s);
        return r;
}

static int acquire(struct slots *s, const char *node, bool ordered, int64_t asked) {
        struct slot_node *n;
        int r;

        assert(s && node);
        if (s->stopping)
                return -ESHUTDOWN;
        if (!*node)
                return -EINVAL;
        n = node_find(s, node);
        if (!n) {
                r = node_new(s, node, &n);
                if (r < 0)
                        return r;
        }
        n->wanted = true;
        n->ordered = ordered;
        n->asked = asked;
        if (n->call && n->op == OP_RELEASE)
                return 0; /* taken again once the release is through */
        if (n->slot >= 0) {
                /* Wanted again before the release went out: keep it, renewed from now on. */
                if (!n->renew_timer.armed && !n->call)
                        dtimer_start(&n->renew_timer, 0);
                return 1;
        }
        r = slots_watch_start(s);
        if (r < 0)
                return r;
        if (n->error < 0)
                return n->error;
        if (s->watch->error < 0)
                return s->watch->error;
        if (ordered) {
                /* Every node of this turn of the caller registers first; the notify timer
                 * then hands the free slots out oldest first. */
                if (!n->call)
                        slots_notify_later(s, NOTIFY_REEVAL);
                return 0;
        }
        try_take(n);
        return n->slot >= 0 ? 1 : 0;
}

int slots_acquire(struct slots *s, const char *node) {
        return acquire(s, node, false, 0);
}

int slots_acquire_ordered(struct slots *s, const char *node, int64_t asked) {
        return acquire(s, node, true, asked);
}

bool slots_queued(const struct slots *s, const char *node) {
        for (const struct slot_node *n = s->nodes; n; n = n->next)
                if (streq(n->name, node))
                        return n->queued && n->wanted && n->slot < 0 && !n->call;
        return false;
}

void slots_release(struct slots *s, const char *node) {
        struct slot_node *n;

        assert(s && node);
        n = node_find(s, node);
        if (!n || !n->wanted)
                return;
        n->wanted = false;
        n->verify = false;
        dtimer_stop(&n->renew_timer);
        if (n->call && n->op == OP_NODECHECK)
                kube_call_cancel(n->call);
        settle(n);
}

void slots_release_unless(struct slots *s, bool (*keep)(const char *node, void *userdata), void *userdata) {
        assert(s && keep);
        for (struct slot_node *n = s->nodes; n; n = n->next)
                if (n->wanted && !keep(n->name, userdata)) {
                        log_debug("slots: node \"%s\" is gone, releasing its slot", n->name);
                        slots_release(s, n->name);
                }
}

int slots_set_max(struct slots *s, unsigned max) {
        if (max == 0 || max > MAX_SLOTS)
                return -EINVAL;
        if (max > s->max) {
                struct slot_view *v = reallocarray(s->views, max, sizeof(*v));

                if (!v)
                        return -ENOMEM;
                memset(v + s->max, 0, (max - s->max) * sizeof(*v));
                s->views = v;
                s->max = max;
        }
        if (s->limit != max) {
                s->limit = max;
                slots_notify_later(s, NOTIFY_REEVAL | NOTIFY_CHANGED);
        }
        return 0;
}

unsigned slots_max(const struct slots *s) {
        return s->limit;
}

bool slots_held(const struct slots *s, const char *node) {
        for (const struct slot_node *n = s->nodes; n; n = n->next)
                if (streq(n->name, node))
                        return n->wanted && n->slot >= 0;
        return false;
}

const char *slots_holders(struct slots *s) {
        uint64_t now = timesrc_now(s->ts);
        size_t len = 0;

        s->holders[0] = 0;
        for (unsigned i = 0; i < s->max; i++) {
                const struct slot_node *n = slots_holder_of(s, (int)i);
                const struct lease_rec *rec;
                const char *h = NULL;
                int k;

                if (n)
                        h = n->name;
                else if (!(s->views[i].own_rv && s->views[i].own_free)) {
                        rec = slots_cached(s, (int)i);
                        if (rec && rec->holder && !slots_lease_expired(s, (int)i, rec, now))
                                h = rec->holder;
                }
                if (!h)
                        continue;
                k = snprintf(s->holders + len, sizeof(s->holders) - len, "%s%s", len ? ", " : "", h);
                if (k < 0 || (size_t)k >= sizeof(s->holders) - len) {
                        /* Over the cap: end with an ellipsis. */
                        strcpy(s->holders + sizeof(s->holders) - 4, "...");
                        break;
                }
                len += (size_t)k;
        }
        return s->holders;
}

void slots_stop(struct slots *s) {
        if (!s || s->stopping)
                return;
        s->stopping = true;
        s->pending = 0;
        for (struct slot_node *n = s->nodes; n; n = n->next) {
                if (n->call)
                        kube_call_cancel(n->call);
                dtimer_stop(&n->renew_timer);
                dtimer_stop(&n->retry_timer);
                n->retry_armed = false;
        }
        slots_watch_retire(s);
        dtimer_stop(&s->notify_timer);
        dtimer_stop(&s->expiry_timer);
}

void slots_tell_quiet(struct slots *s) {
        if (s->closing && (s->stopping ? slots_idle(s) : slots_settled(s)))
                dtimer_start(&s->close_timer, 0);
}

static void on_close_timer(struct dtimer *t) {
        struct slots *s = container_of(t, struct slots, close_timer);
        void (*done)(struct slots *, void *) = s->close_done;

        if (!s->stopping) {
                uint64_t now = timesrc_now(s->ts);

                if (!slots_settled(s) && now < s->close_deadline)
                        return dtimer_start(&s->close_timer, s->close_deadline - now);
                slots_stop(s);
        }
        if (!slots_idle(s) || !done)
                return; /* the last cancelled call, or the watch's end, comes back here */
        s->close_done = NULL;
        done(s, s->close_userdata); /* last: it may free s */
}

void slots_close(struct slots *s, uint64_t settle_usec, void (*done)(struct slots *s, void *userdata),
                 void *userdata) {
        if (s->closing)
                return;
        s->closing = true;
        s->close_done = done;
        s->close_userdata = userdata;
        s->close_deadline = timesrc_now(s->ts) + settle_usec;
        if (settle_usec == 0)
                slots_stop(s);
        dtimer_start(&s->close_timer, 0);
}

bool slots_settled(const struct slots *s) {
        for (const struct slot_node *n = s->nodes; n; n = n->next)
                if (n->call || n->retry_armed)
                        return false;
        return true;
}

bool slots_idle(const struct slots *s) {
        for (const struct slot_node *n = s->nodes; n; n = n->next)
                if (n->call)
                        return false;
        if (s->watch && !informer_idle(s->watch->inf))
                return false;
        for (const struct lease_watch *w = s->retired; w; w = w->next)
                if (!informer_idle(w->inf))
                        return false;
        return true;
}

void slots_free(struct slots *s) {
        if (!s)
                return;
        assert(slots_idle(s));
        while (s->nodes) {
                struct slot_node *n = s->nodes;

                s->nodes = n->next;
                node_free(n);
        }
        slots_watch_free(s->watch);
        while (s->retired) {
                struct lease_watch *w = s->retired;

                s->retired = w->next;
                slots_watch_free(w);
        }
        for (unsigned i = 0; i < s->max; i++) {
                free(s->views[i].own_rv);
                free(s->views[i].distrust_rv);
                free(s->views[i].checked_holder);
                free(s->views[i].seen_rv);
        }
        dtimer_done(&s->notify_timer);
        dtimer_done(&s->expiry_timer);
        dtimer_done(&s->close_timer);
        free(s->views);
        free(s->ns);
        free(s->identity);
        free(s->leases_path);
        free(s);
}