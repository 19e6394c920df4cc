/* Drain slots for --max-parallel: one coordination.k8s.io/v1 Lease per slot,
 * shared by every drainer process of the cluster (see slots.h). Owns one lease
 * informer (running only while a node of this process wants or holds a slot),
 * the per-node create/take/renew/release calls and their timers. Never polls:
 * it acts on lease events, on its own answers, and on the one deadline when
 * the first slot held elsewhere expires. Logs at debug level only. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/backoff.h"
#include "drainer/client.h"
#include "drainer/informer.h"
#include "drainer/json.h"
#include "drainer/log.h"
#include "drainer/objects.h"
#include "drainer/slots.h"
#include "drainer/timesrc.h"

#define SLOT_PREFIX       "drainer-slot-"
#define HOLDER_ANNOTATION "drainer.io/holder-process"
/* Every write names its field manager: the per-node admission policy reads the API
 * server's clock from that manager's managedFields entry (deploy/node-policy.yaml). */
#define WRITE_QUERY       "?fieldManager=drainer"
#define DEFAULT_DURATION  (120 * USEC_PER_SEC)
#define MAX_SLOTS         1024u
#define MAX_NODES         10000u
#define MAX_LEASES        10000u /* objects in drainer's namespace the informer may cache */
#define RETRY_BASE_USEC   (1 * USEC_PER_SEC)
#define RETRY_CAP_USEC    (60 * USEC_PER_SEC)
#define RELEASE_ATTEMPTS  5u
#define HOLDERS_CAP       1024u

enum {
        KICK_CHANGED = 1 << 0, /* tell the caller */
        KICK_REEVAL = 1 << 1,  /* waiting nodes try again */
        KICK_GC = 1 << 2,      /* drop nodes that are done; stop the informer when none is left */
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
         * the lease duration (see lease_expiry). */
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
        unsigned max;
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
        unsigned pending; /* KICK_* for notify_timer */
        bool stopping;
        char holders[HOLDERS_CAP];
};

static void try_take(struct slot_node *n);
static void settle(struct slot_node *n);

/* ---- small helpers ---- */

static int replace_str(char **p, const char *v) {
        char *c = NULL;

        if (v && !(c = strdup(v)))
                return -ENOMEM;
        free(*p);
        *p = c;
        return 0;
}

/* "drainer-slot-<i>" without leading zeros -> i, else -1. */
static int slot_index(const char *name) {
        const char *p;
        unsigned long v = 0;

        if (!name || strncmp(name, SLOT_PREFIX, strlen(SLOT_PREFIX)) != 0)
                return -1;
        p = name + strlen(SLOT_PREFIX);
        if (!*p || (p[0] == '0' && p[1]) || strlen(p) > 6)
                return -1;
        for (; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -1;
                v = v * 10 + (unsigned long)(*p - '0');
        }
        return (int)v;
}

static bool persistent_error(int error) {
        /* What waiting cannot fix: RBAC, a request the server refuses as invalid. */
        return error == -EACCES || error == -EPERM || error == -EINVAL;
}

/* A MicroTime: "2026-11-29T15:00:00.123456Z" (the API server wants the six digits). */
static int format_micro(int64_t usec, char *buf, size_t size) {
        int64_t frac = usec % (int64_t)USEC_PER_SEC;
        char sec[32];
        size_t l;
        int r;

        if (frac < 0)
                frac += (int64_t)USEC_PER_SEC;
        r = timesrc_format_rfc3339(usec, sec, sizeof(sec));
        if (r < 0)
                return r;
        l = strlen(sec);
        assert(l > 0 && sec[l - 1] == 'Z');
        sec[l - 1] = 0;
        r = snprintf(buf, size, "%s.%06lldZ", sec, (long long)frac);
        return r < 0 || (size_t)r >= size ? -ENOBUFS : 0;
}

/* Without jitter: a lease retry is one request per node, and its cap moves with the
 * lease duration. */
static uint64_t backoff(unsigned failures, uint64_t cap) {
        return backoff_exponential(RETRY_BASE_USEC, cap, failures);
}

static void kick(struct slots *s, unsigned what) {
        if (s->stopping)
                return;
        s->pending |= what;
        if (!s->notify_timer.armed)
                dtimer_start(&s->notify_timer, 0);
}

static const struct lease_rec *cached(struct slots *s, int i) {
        char key[512];

        if (!s->watch || !s->watch->synced)
                return NULL;
        if (snprintf(key, sizeof(key), "%s/" SLOT_PREFIX "%d", s->ns, i) >= (int)sizeof(key))
                return NULL;
        return informer_get(s->watch->inf, key);
}

static uint64_t lease_duration(struct slots *s, const struct lease_rec *rec) {
        return rec->duration_seconds > 0 ? (uint64_t)rec->duration_seconds * USEC_PER_SEC : s->duration_usec;
}

/* Notes when this process first saw this version of slot i's lease. */
static void observe(struct slots *s, int i, const struct lease_rec *rec) {
        struct slot_view *v = &s->views[i];

        if (!rec->resource_version || streq_ptr(v->seen_rv, rec->resource_version))
                return;
        if (replace_str(&v->seen_rv, rec->resource_version) < 0)
                v->seen_rv = mfree(v->seen_rv); /* then seen again, later: never too early */
        v->seen_at = timesrc_now(s->ts);
}

/* When the holder's tenure ends, on this process's monotonic clock: a lease duration
 * after this process first saw the lease's current version. Not renewTime + duration
 * against our wall clock: renewTime is the holder's wall clock, and between two nodes
 * clocks differ. With a taker's clock D ahead of the holder's (or the holder's D
 * behind), a live holder would look expired D early and its slot be taken while it
 * drains (two drains under --max-parallel 1); D behind, a dead holder's slot would be
 * waited for D longer; a renewTime of 2099 would hold a slot until then. Observed
 * this way, as client-go's leader election does (observedTime), skew does not matter:
 * a holder that renews every third of the duration always changes the version in
 * time, and a dead one is over at most one duration after we first looked (plus the
 * watch's delay). The price: a process that starts next to a long-dead lease waits one
 * duration before it takes it. A holder without times cannot be valid: over at once. */
static uint64_t lease_expiry(struct slots *s, int i, const struct lease_rec *rec) {
        struct slot_view *v = &s->views[i];

        if (!rec->renew_time_usec && !rec->acquire_time_usec)
                return 0;
        observe(s, i, rec);
        if (!streq_ptr(v->seen_rv, rec->resource_version))
                return timesrc_now(s->ts) + lease_duration(s, rec);
        return v->seen_at + lease_duration(s, rec);
}

static bool lease_expired(struct slots *s, int i, const struct lease_rec *rec, uint64_t now) {
        return lease_expiry(s, i, rec) < now;
}

static struct slot_node *node_find(struct slots *s, const char *name) {
        for (struct slot_node *n = s->nodes; n; n = n->next)
                if (streq(n->name, name))
                        return n;
        return NULL;
}

static struct slot_node *slot_holder(struct slots *s, int i) {
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

/* ---- the lease informer ---- */

static void watch_free(struct lease_watch *w) {
        if (!w)
                return;
        informer_free(w->inf);
        free(w);
}

static void watch_retire(struct slots *s) {
        struct lease_watch *w = s->watch;

        if (!w)
                return;
        log_debug("slots: nothing wanted, stopping the lease watch in \"%s\"", s->ns);
        s->watch = NULL;
        informer_stop(w->inf);
        w->next = s->retired;
        s->retired = w;
}

static void reap_retired(struct slots *s) {
        struct lease_watch **p = &s->retired;

        while (*p) {
                struct lease_watch *w = *p;

                if (informer_idle(w->inf)) {
                        *p = w->next;
                        watch_free(w);
                } else
                        p = &w->next;
        }
}

static void lease_event(struct lease_watch *w, const struct lease_rec *rec, bool deleted) {
        struct slots *s = w->s;
        struct slot_node *n;
        struct slot_view *v;
        int i;

        if (w != s->watch)
                return;
        w->error = 0;
        i = slot_index(rec->name);
        if (i >= 0 && (unsigned)i < s->max) {
                v = &s->views[i];
                if (!deleted)
                        observe(s, i, rec);
                /* Watch events arrive in order: once ours shows up the cache is as new as our
                 * write; a deletion always comes after it. */
                if (deleted || streq_ptr(v->own_rv, rec->resource_version))
                        v->own_rv = mfree(v->own_rv);
                v->distrust_absent = false;
                n = slot_holder(s, i);
                if (n && n->wanted && !v->own_rv && (deleted || !streq_ptr(rec->holder, n->name))) {
                        /* Someone else wrote our slot (or the event is older than we think):
                         * renewing at once tells which; a 409 means it is lost. */
                        log_debug("slots: lease \"%s/%s\" changed under \"%s\", verifying", s->ns, rec->name,
                                  n->name);
                        if (n->call)
                                n->verify = true;
                        else
                                dtimer_start(&n->renew_timer, 0);
                }
        }
        kick(s, KICK_CHANGED | KICK_REEVAL);
}

static void on_lease_add(struct informer *inf, const void *rec, void *userdata) {
        lease_event(userdata, rec, false);
}

static void on_lease_update(struct informer *inf, const void *old_rec, const void *rec, void *userdata) {
        lease_event(userdata, rec, false);
}

static void on_lease_delete(struct informer *inf, const void *rec, void *userdata) {
        lease_event(userdata, rec, true);
}

static void on_lease_synced(struct informer *inf, void *userdata) {
        struct lease_watch *w = userdata;
        struct slots *s = w->s;

        if (w != s->watch)
                return;
        w->synced = true;
        w->error = 0;
        /* A fresh list from etcd: it is at least as new as our writes. */
        for (unsigned i = 0; i < s->max; i++)
                s->views[i].own_rv = mfree(s->views[i].own_rv);
        for (struct slot_node *n = s->nodes; n; n = n->next) {
                const struct lease_rec *rec;

                if (n->slot < 0 || !n->wanted)
                        continue;
                rec = cached(s, n->slot);
                if (!rec || !streq_ptr(rec->holder, n->name)) {
                        if (n->call)
                                n->verify = true;
                        else
                                dtimer_start(&n->renew_timer, 0);
                }
        }
        kick(s, KICK_CHANGED | KICK_REEVAL);
}

static void on_lease_error(struct informer *inf, int error, const char *message, void *userdata) {
        struct lease_watch *w = userdata;
        struct slots *s = w->s;

        if (w != s->watch)
                return;
        log_debug("slots: lease watch in \"%s\": %s", s->ns, message ? message : strerror(-error));
        /* Before the first sync nothing works without it (RBAC for leases missing): tell the
         * caller. Later failures of the watch only delay news; the informer retries. */
        if (!w->synced && persistent_error(error) && w->error != error) {
                w->error = error;
                kick(s, KICK_CHANGED);
        }
}

static const struct informer_handlers lease_handlers = {
        .on_add = on_lease_add,
        .on_update = on_lease_update,
        .on_delete = on_lease_delete,
        .on_synced = on_lease_synced,
        .on_error = on_lease_error,
};

static int watch_start(struct slots *s) {
        struct lease_watch *w;
        int r;

        if (s->watch)
                return 0;
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->s = s;
        r = informer_new(s->client, s->ts,
                         &(struct informer_options){
                                 .kind = INFORMER_LEASES,
                                 .namespace = s->ns,
                                 .max_objects = MAX_LEASES,
                         },
                         &lease_handlers, w, &w->inf);
        if (r < 0) {
                free(w);
                return r;
        }
        r = informer_start(w->inf);
        if (r < 0) {
                watch_free(w);
                return r;
        }
        log_debug("slots: watching leases in \"%s\"", s->ns);
        s->watch = w;
        return 0;
}

/* ---- calls ---- */

static char *lease_path(struct slots *s, int i) {
        char *p;

        return asprintf(&p, "%s/" SLOT_PREFIX "%d" WRITE_QUERY, s->leases_path, i) < 0 ? NULL : p;
}

/* The whole Lease, as POST and PUT want it. holder NULL releases it. */
static char *lease_body(struct slots *s, int i, const char *rv, const char *holder, int64_t acquire,
                        int64_t renew, int64_t transitions) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        char name[64], ta[48], tr[48];
        cJSON *meta, *spec, *labels, *ann;
        bool ok;

        if (!o)
                return NULL;
        snprintf(name, sizeof(name), SLOT_PREFIX "%d", i);
        if ((acquire && format_micro(acquire, ta, sizeof(ta)) < 0) ||
            format_micro(renew, tr, sizeof(tr)) < 0)
                return NULL;
        ok = cJSON_AddStringToObject(o, "apiVersion", "coordination.k8s.io/v1") &&
             cJSON_AddStringToObject(o, "kind", "Lease") &&
             (meta = cJSON_AddObjectToObject(o, "metadata")) &&
             cJSON_AddStringToObject(meta, "name", name) &&
             cJSON_AddStringToObject(meta, "namespace", s->ns) &&
             (!rv || cJSON_AddStringToObject(meta, "resourceVersion", rv)) &&
             (labels = cJSON_AddObjectToObject(meta, "labels")) &&
             cJSON_AddStringToObject(labels, "app.kubernetes.io/managed-by", "drainer") &&
             (!holder || !s->identity ||
              ((ann = cJSON_AddObjectToObject(meta, "annotations")) &&
               cJSON_AddStringToObject(ann, HOLDER_ANNOTATION, s->identity))) &&
             (spec = cJSON_AddObjectToObject(o, "spec")) &&
             (!holder || cJSON_AddStringToObject(spec, "holderIdentity", holder)) &&
             cJSON_AddNumberToObject(spec, "leaseDurationSeconds",
                                     (double)MAX(s->duration_usec / USEC_PER_SEC, 1)) &&
             (!acquire || cJSON_AddStringToObject(spec, "acquireTime", ta)) &&
             cJSON_AddStringToObject(spec, "renewTime", tr) &&
             cJSON_AddNumberToObject(spec, "leaseTransitions", (double)transitions);
        return ok ? cJSON_PrintUnformatted(o) : NULL;
}

static void on_call_done(const struct kube_result *res, void *userdata);

static int start_call(struct slot_node *n, enum op op, int target, const char *path, const char *body) {
        struct slots *s = n->s;
        int r;

        assert(!n->call);
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

        body = lease_body(s, i, use_rv, holder, acquire, timesrc_realtime(s->ts), transitions);
        if (op == OP_CREATE) {
                if (asprintf(&path, "%s" WRITE_QUERY, s->leases_path) < 0)
                        path = NULL;
        } else
                path = lease_path(s, i);
        if (!body || !path)
                return -ENOMEM;
        r = replace_str(&n->used_rv, use_rv);
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

        if (replace_str(&v->own_rv, rec->resource_version) < 0)
                v->own_rv = mfree(v->own_rv); /* then trust the cache: at worst one 409 */
        v->own_free = freed;
        v->own_transitions = rec->transitions;
}

/* Makes the node the holder of slot i as the server answered. */
static int hold(struct slot_node *n, int i, const struct lease_rec *rec) {
        if (replace_str(&n->rv, rec->resource_version) < 0)
                return -ENOMEM;
        n->slot = i;
        n->acquire_time = rec->acquire_time_usec;
        n->transitions = rec->transitions;
        return 0;
}

static int parse_answer(const struct kube_result *res, struct lease_rec **ret) {
        int r;

        if (!res->json)
                return -EBADMSG;
        r = lease_rec_from_json(res->json, ret);
        if (r >= 0 && !(*ret)->resource_version) {
                lease_rec_free(*ret);
                return -EBADMSG;
        }
        return r;
}

static void done_acquire(struct slot_node *n, enum op op, int i, const struct kube_result *res) {
        struct slots *s = n->s;
        _cleanup_(lease_rec_freep) struct lease_rec *rec = NULL;
        int r = res->error;

        if (r >= 0)
                r = parse_answer(res, &rec);
        if (r >= 0)
                r = hold(n, i, rec);
        if (r >= 0) {
                record_write(s, i, rec, false);
                n->failures = 0;
                n->error = 0;
                dtimer_start(&n->renew_timer, s->duration_usec / 3);
                log_debug("slots: \"%s\" holds \"%s/" SLOT_PREFIX "%d\"", n->name, s->ns, i);
                return kick(s, KICK_CHANGED);
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
                        v->distrust_absent = !cached(s, i);
                else if (replace_str(&v->distrust_rv, n->used_rv) < 0)
                        v->distrust_rv = mfree(v->distrust_rv);
                if (v->own_rv && streq_ptr(v->own_rv, n->used_rv))
                        v->own_rv = mfree(v->own_rv);
                return kick(s, KICK_REEVAL);
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
                kick(s, KICK_CHANGED);
        }
        arm_retry(n);
}

static void lost(struct slot_node *n, const char *why) {
        struct slots *s = n->s;
        struct slot_view *v = &s->views[n->slot];

        log_debug("slots: \"%s\" lost \"%s/" SLOT_PREFIX "%d\": %s", n->name, s->ns, n->slot, why);
        if (replace_str(&v->distrust_rv, n->used_rv) < 0)
                v->distrust_rv = mfree(v->distrust_rv);
        v->own_rv = mfree(v->own_rv);
        dtimer_stop(&n->renew_timer);
        n->slot = -1;
        n->rv = mfree(n->rv);
        n->verify = false;
        kick(s, KICK_CHANGED | KICK_REEVAL | KICK_GC);
}

static void done_renew(struct slot_node *n, int i, const struct kube_result *res) {
        struct slots *s = n->s;
        _cleanup_(lease_rec_freep) struct lease_rec *rec = NULL;
        int r = res->error;

        if (n->slot != i)
                return;
        if (r >= 0)
                r = parse_answer(res, &rec);
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
        if (r >= 0 && parse_answer(res, &rec) >= 0)
                record_write(s, i, rec, true);
        if (r >= 0 || r == -EBUSY || r == -EEXIST || r == -ENOENT || ++n->failures >= RELEASE_ATTEMPTS) {
                /* Released; or not ours any more; or given up: the lease then expires by itself. */
                log_debug("slots: \"%s\" released \"%s/" SLOT_PREFIX "%d\"%s%s", n->name, s->ns, i,
                          r < 0 ? ": " : "", r < 0 ? strerror(-r) : "");
                n->slot = -1;
                n->rv = mfree(n->rv);
                n->failures = 0;
                return kick(s, KICK_CHANGED | KICK_REEVAL | KICK_GC);
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
                return;
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
                kick(n->s, KICK_CHANGED | KICK_REEVAL | KICK_GC);
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
                kick(s, KICK_GC);
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
                kick(n->s, KICK_CHANGED);
        }
        settle(n);
        try_take(n);
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
        if (replace_str(&n->check_holder, rec->holder) < 0)
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

/* One attempt for a waiting node: adopt the slot it already holds, else take the
 * first absent, free or expired slot, else one whose holder's node is gone. */
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

                rec = cached(s, (int)i);
                if (!rec || !streq_ptr(rec->holder, n->name) || busy[i] || v->own_rv ||
                    streq_ptr(v->distrust_rv, rec->resource_version) || !rec->resource_version)
                        continue;
                if (adopt(n, (int)i, rec) >= 0)
                        return kick(s, KICK_CHANGED);
        }

        for (unsigned i = 0; i < s->max; i++) {
                struct slot_view *v = &s->views[i];

                if (busy[i])
                        continue;
                if (v->own_rv && v->own_free)
                        /* We released it and the cache has not caught up yet. */
                        return take(n, (int)i, v->own_rv, NULL, v->own_transitions);
                rec = cached(s, (int)i);
                if (!rec) {
                        if (v->distrust_absent)
                                continue;
                        return take(n, (int)i, NULL, NULL, 0);
                }
                if (!rec->resource_version || streq_ptr(v->distrust_rv, rec->resource_version))
                        continue;
                if (!rec->holder || lease_expired(s, (int)i, rec, now) || streq(rec->holder, n->name))
                        return take(n, (int)i, rec->resource_version, rec->holder, rec->transitions);
                earliest = MIN(earliest, lease_expiry(s, (int)i, rec));
        }

        for (unsigned i = 0; i < s->max; i++) {
                struct slot_view *v = &s->views[i];
                int r;

                rec = cached(s, (int)i);
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
                watch_retire(s);
        if (!anyone_waiting(s))
                dtimer_stop(&s->expiry_timer);
        reap_retired(s);
}

static void on_notify_timer(struct dtimer *t) {
        struct slots *s = container_of(t, struct slots, notify_timer);
        unsigned what = s->pending;

        s->pending = 0;
        if (s->stopping)
                return;
        gc(s);
        if (what & KICK_REEVAL)
                for (struct slot_node *n = s->nodes; n; n = n->next)
                        try_take(n);
        if ((what & KICK_CHANGED) && s->changed)
                s->changed(s, s->userdata);
}

static void on_expiry_timer(struct dtimer *t) {
        struct slots *s = container_of(t, struct slots, expiry_timer);

        kick(s, KICK_REEVAL | KICK_CHANGED);
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
        s->max = o->max;
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

int slots_acquire(struct slots *s, const char *node) {
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
        if (n->call && n->op == OP_RELEASE)
                return 0; /* taken again once the release is through */
        if (n->slot >= 0) {
                /* Wanted again before the release went out: keep it, renewed from now on. */
                if (!n->renew_timer.armed && !n->call)
                        dtimer_start(&n->renew_timer, 0);
                return 1;
        }
        r = watch_start(s);
        if (r < 0)
                return r;
        if (n->error < 0)
                return n->error;
        if (s->watch->error < 0)
                return s->watch->error;
        try_take(n);
        return n->slot >= 0 ? 1 : 0;
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
                const struct slot_node *n = slot_holder(s, (int)i);
                const struct lease_rec *rec;
                const char *h = NULL;
                int k;

                if (n)
                        h = n->name;
                else if (!(s->views[i].own_rv && s->views[i].own_free)) {
                        rec = cached(s, (int)i);
                        if (rec && rec->holder && !lease_expired(s, (int)i, rec, now))
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
        watch_retire(s);
        dtimer_stop(&s->notify_timer);
        dtimer_stop(&s->expiry_timer);
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
        watch_free(s->watch);
        while (s->retired) {
                struct lease_watch *w = s->retired;

                s->retired = w->next;
                watch_free(w);
        }
        for (unsigned i = 0; i < s->max; i++) {
                free(s->views[i].own_rv);
                free(s->views[i].distrust_rv);
                free(s->views[i].checked_holder);
                free(s->views[i].seen_rv);
        }
        dtimer_done(&s->notify_timer);
        dtimer_done(&s->expiry_timer);
        free(s->views);
        free(s->ns);
        free(s->identity);
        free(s->leases_path);
        free(s);
}
