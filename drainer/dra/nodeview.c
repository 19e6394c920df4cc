/* The node view and the cluster view it may borrow from. A node view owns the
 * informers of its node's pods and slices, and of the Node, claims and budgets
 * unless a cluster view lends them; a cluster view owns the shared informers and
 * fans their events out to its subscribers. Neither decides anything: they keep
 * caches current and say when they changed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/buf.h"
#include "drainer/base/log.h"
#include "drainer/base/timesrc.h"
#include "drainer/dra/nodeview.h"

#define N_PARTS 5

static const char *const part_names[N_PARTS] = {
        "node", "pods", "resourceclaims", "resourceslices", "poddisruptionbudgets",
};
static const enum informer_kind part_kinds[N_PARTS] = {
        INFORMER_NODES, INFORMER_PODS, INFORMER_CLAIMS, INFORMER_SLICES, INFORMER_PDBS,
};

static int part_index(unsigned part) {
        for (int i = 0; i < N_PARTS; i++)
                if (part == 1u << i)
                        return i;
        return -1;
}

const char *node_view_part_name(unsigned part) {
        int i = part_index(part);

        return i < 0 ? NULL : part_names[i];
}

/* The DRA API the claims and slices are read from: the newest the server serves,
 * per resource. The informers discover it by listing (informer.h, api_prefixes):
 * v1 first, then v1beta2, then v1beta1; a 404 on each is "not served" (no DRA API:
 * an empty, synced part). This costs a v1 cluster nothing and an older one a 404
 * or two per informer, once at start and again after a 404 mid-run; the cluster
 * view's claims informer is one per process, so serve discovers claims once for
 * all its drains. The records parse every version alike: the fields read
 * (objects.c: a claim's status.allocation.devices.results[].driver/pool/device,
 * status.allocation.nodeSelector, status.reservedFor; a slice's spec.nodeName,
 * driver, pool, nodeSelector, allNodes, perDeviceNodeSelection, the number of
 * spec.devices) have the same names and JSON in resource.k8s.io v1, v1beta2 and
 * v1beta1 (v1beta1's nodeName is a string and allNodes a bool where v1 has
 * pointers: the same JSON; v1beta1 wraps a device's attributes in "basic", which
 * is not read). */
static const char *const dra_prefixes[] = {
        "/apis/resource.k8s.io/v1",
        "/apis/resource.k8s.io/v1beta2",
        "/apis/resource.k8s.io/v1beta1",
        NULL,
};

const char *const *dra_api_prefixes(void) {
        return dra_prefixes;
}

/* ---- the cluster view ---- */

struct sub {
        const struct informer_handlers *h;
        void *userdata;
        const char *key; /* only this record (a Node's name: borrowed), NULL: all */
        bool dead;       /* unsubscribed during a callback: removed after it */
};

struct shared {
        struct cluster_view *cv;
        int part;                   /* index */
        struct informer *inf;       /* owned; NULL while not watched */
        struct informer **retiring; /* stopped, waiting for their cancelled calls */
        size_t n_retiring, a_retiring;
        struct sub *subs;
        size_t n_subs, a_subs;
        unsigned users; /* node views that hold it */
        unsigned depth; /* callbacks running */
        uint64_t idle_since;
};

/* A node's own watch (its pods or slices) that a closed node view left running for the
 * next view of that node (the restore that follows a drain): kept for the linger. */
struct parked {
        char *node;
        int part; /* index */
        struct informer *inf;
        uint64_t since;
};

struct cluster_view {
        struct kube_client *client; /* borrowed */
        struct timesrc *ts;         /* borrowed */
        struct cluster_view_options o;
        char *nodes_fs;
        struct shared sh[N_PARTS]; /* NODE, CLAIMS and PDBS are watched; every part retires */
        struct parked *parked;
        size_t n_parked, a_parked;
        struct dtimer timer; /* linger, retiring informers, the close */
        bool closing;
        void (*close_cb)(void *userdata);
        void *close_ud;
};

/* Nodes, claims and budgets are always shared; slices when the cluster view watches
 * every node (serve --all-nodes: one watch of all slices rather than one per node). */
static bool is_shared_part(const struct cluster_view *cv, int i) {
        return part_kinds[i] == INFORMER_NODES || part_kinds[i] == INFORMER_CLAIMS ||
               part_kinds[i] == INFORMER_PDBS || (part_kinds[i] == INFORMER_SLICES && cv->o.share_slices);
}

/* The node a record of part i is about, for the subscribers that want one node's. */
static const char *rec_node(const void *rec, int part) {
        if (part_kinds[part] == INFORMER_NODES)
                return ((const struct node_rec *)rec)->name;
        if (part_kinds[part] == INFORMER_SLICES)
                return ((const struct slice_rec *)rec)->node_name;
        return NULL;
}

static bool sub_wants(const struct sub *s, const void *rec, int part) {
        return !s->dead && (!s->key || streq_ptr(rec_node(rec, part), s->key));
}

static void compact_subs(struct shared *sh) {
        size_t k = 0;

        if (sh->depth > 0)
                return;
        for (size_t i = 0; i < sh->n_subs; i++)
                if (!sh->subs[i].dead)
                        sh->subs[k++] = sh->subs[i];
        sh->n_subs = k;
}

/* Fan-out: each live subscriber that wants the record; the array may grow (new
 * subscribers hear from the next event on) or shrink (marked dead) meanwhile. */
#define FAN_OUT(sh, rec, call)                                                  \
        do {                                                                    \
                size_t _n = (sh)->n_subs;                                       \
                (sh)->depth++;                                                  \
                for (size_t _i = 0; _i < _n; _i++) {                            \
                        struct sub *s = &(sh)->subs[_i];                        \
                        if ((rec) ? sub_wants(s, (rec), (sh)->part) : !s->dead) \
                                call;                                           \
                }                                                               \
                (sh)->depth--;                                                  \
                compact_subs(sh);                                               \
        } while (0)

static void on_shared_add(struct informer *inf, const void *rec, void *userdata) {
        struct shared *sh = userdata;

        FAN_OUT(sh, rec, if (s->h->on_add) s->h->on_add(inf, rec, s->userdata));
}

/* An update goes to the subscribers of the record's node before and after it (a slice
 * whose node changed leaves one view and comes to another). */
static void on_shared_update(struct informer *inf, const void *old, const void *rec, void *userdata) {
        struct shared *sh = userdata;
        size_t n = sh->n_subs;

        sh->depth++;
        for (size_t i = 0; i < n; i++) {
                struct sub *s = &sh->subs[i];

                if ((sub_wants(s, rec, sh->part) || sub_wants(s, old, sh->part)) && s->h->on_update)
                        s->h->on_update(inf, old, rec, s->userdata);
        }
        sh->depth--;
        compact_subs(sh);
}

static void on_shared_delete(struct informer *inf, const void *rec, void *userdata) {
        struct shared *sh = userdata;

        FAN_OUT(sh, rec, if (s->h->on_delete) s->h->on_delete(inf, rec, s->userdata));
}

static void on_shared_synced(struct informer *inf, void *userdata) {
        struct shared *sh = userdata;

        FAN_OUT(sh, (const void *)NULL, if (s->h->on_synced) s->h->on_synced(inf, s->userdata));
}

static void on_shared_error(struct informer *inf, int error, const char *message, void *userdata) {
        struct shared *sh = userdata;

        FAN_OUT(sh, (const void *)NULL,
                if (s->h->on_error) s->h->on_error(inf, error, message, s->userdata));
}

static void cluster_timer_arm(struct cluster_view *cv, uint64_t after);

/* A stopped shared informer's last call ended: free it, or finish a close, now. */
static void on_shared_stopped(struct informer *inf, void *userdata) {
        struct shared *sh = userdata;

        cluster_timer_arm(sh->cv, 0);
}

static const struct informer_handlers shared_handlers = {
        .on_add = on_shared_add,
        .on_update = on_shared_update,
        .on_delete = on_shared_delete,
        .on_synced = on_shared_synced,
        .on_error = on_shared_error,
        .on_stopped = on_shared_stopped,
};

/* A fresh informer for a shared part (a restarted one must not show an old cache as synced). */
static int shared_start(struct shared *sh) {
        struct cluster_view *cv = sh->cv;
        struct informer_options io = { .kind = part_kinds[sh->part] };
        int r;

        if (sh->inf)
                return 0;
        if (part_kinds[sh->part] == INFORMER_NODES)
                io.field_selector = cv->nodes_fs;
        if (part_kinds[sh->part] == INFORMER_CLAIMS || part_kinds[sh->part] == INFORMER_SLICES)
                /* Claims cannot be filtered by node: all of them, kept compact, listed in pages (a
                 * consistent list is served from the watch cache and honours limit). All slices
                 * too, when shared. */
                io.api_prefixes = dra_prefixes;
        r = informer_new(cv->client, cv->ts, &io, &shared_handlers, sh, &sh->inf);
        if (r < 0)
                return r;
        r = informer_start(sh->inf);
        if (r < 0) {
                informer_free(sh->inf);
                sh->inf = NULL;
        }
        return r;
}

static void cluster_timer_arm(struct cluster_view *cv, uint64_t after) {
        uint64_t at = timesrc_now(cv->ts) + after;

        if (!cv->timer.armed || cv->timer.due > at)
                dtimer_start(&cv->timer, after);
}

/* Stops sh's informer; it is freed once its cancelled call has ended. */
static int retire(struct shared *sh) {
        /* One per restart of the shared informer while calls of the old ones are in flight. */
        int r = buf_grow_array(&sh->retiring, &sh->a_retiring, sh->n_retiring + 1, sizeof(*sh->retiring),
                               BUF_CAP_OBJECTS);

        informer_stop(sh->inf);
        if (r < 0) {
                /* Keep watching rather than free an informer whose call is in flight. */
                return r;
        }
        sh->retiring[sh->n_retiring++] = sh->inf;
        sh->inf = NULL;
        return 0;
}

/* The handlers of a parked informer: its events go nowhere (its cache follows them),
 * its end after a stop comes to the timer. */
static const struct informer_handlers parked_handlers = {
        .on_stopped = on_shared_stopped,
};

/* Stops parked informer k; freed once its cancelled call has ended (with its part's
 * retiring ones, or in place when out of memory, as retire() does). */
static void retire_parked(struct cluster_view *cv, size_t k) {
        struct parked pk = cv->parked[k];
        struct shared *sh = &cv->sh[pk.part];

        cv->parked[k] = cv->parked[--cv->n_parked];
        free(pk.node);
        informer_stop(pk.inf);
        if (buf_grow_array(&sh->retiring, &sh->a_retiring, sh->n_retiring + 1, sizeof(*sh->retiring),
                           BUF_CAP_OBJECTS) < 0) {
                /* Out of memory: nobody can wait for it; free it once it is idle, or now. */
                if (informer_idle(pk.inf))
                        informer_free(pk.inf);
                else
                        log_warning("out of memory: leaking a stopped watch of %s", part_names[pk.part]);
                return;
        }
        sh->retiring[sh->n_retiring++] = pk.inf;
}

/* A closing node view's own running watch of part i goes to the cluster view for the
 * linger; true when taken (the caller no longer owns inf). */
static bool park(struct cluster_view *cv, const char *node, int i, struct informer *inf) {
        struct parked pk = { .part = i, .inf = inf, .since = timesrc_now(cv->ts) };

        if ((part_kinds[i] != INFORMER_PODS && part_kinds[i] != INFORMER_SLICES) || cv->closing ||
            cv->o.linger_usec == 0 || !informer_running(inf) || !informer_synced(inf))
                return false;
        for (size_t k = 0; k < cv->n_parked; k++)
                if (cv->parked[k].part == i && streq(cv->parked[k].node, node))
                        return false; /* another view of the node parked one already */
        /* One per node a run let go within the linger: no more than the Nodes. */
        if (buf_grow_array(&cv->parked, &cv->a_parked, cv->n_parked + 1, sizeof(*cv->parked),
                           BUF_CAP_OBJECTS) < 0 ||
            !(pk.node = strdup(node)))
                return false;
        informer_set_handlers(inf, &parked_handlers, &cv->sh[i]);
        cv->parked[cv->n_parked++] = pk;
        cluster_timer_arm(cv, cv->o.linger_usec);
        return true;
}

/* The watch of part i of node a closed view parked, or NULL; the caller owns it and
 * sets its handlers. */
static struct informer *unpark(struct cluster_view *cv, const char *node, int i) {
        for (size_t k = 0; k < cv->n_parked; k++) {
                struct parked *pk = &cv->parked[k];
                struct informer *inf;

                if (pk->part != i || !streq(pk->node, node))
                        continue;
                inf = pk->inf;
                free(pk->node);
                cv->parked[k] = cv->parked[--cv->n_parked];
                return inf;
        }
        return NULL;
}

/* Frees retired informers whose calls ended, stops shared parts idle for longer
 * than the linger and parked watches kept longer, and finishes a close. */
static void on_cluster_timer(struct dtimer *t) {
        struct cluster_view *cv = container_of(t, struct cluster_view, timer);
        uint64_t now = timesrc_now(cv->ts), next = UINT64_MAX;
        bool busy = false;

        for (size_t k = 0; k < cv->n_parked;) {
                struct parked *pk = &cv->parked[k];

                if (cv->closing || now - pk->since >= cv->o.linger_usec) {
                        log_debug("no run of node %s needs its %s any more: not watching them", pk->node,
                                  part_names[pk->part]);
                        retire_parked(cv, k);
                        next = now;
                } else {
                        next = MIN(next, pk->since + cv->o.linger_usec);
                        k++;
                }
        }
        for (int i = 0; i < N_PARTS; i++) {
                struct shared *sh = &cv->sh[i];

                for (size_t k = 0; k < sh->n_retiring;)
                        if (informer_idle(sh->retiring[k])) {
                                informer_free(sh->retiring[k]);
                                sh->retiring[k] = sh->retiring[--sh->n_retiring];
                        } else
                                k++;
                if (cv->closing && sh->inf && informer_idle(sh->inf)) {
                        /* stopped in place (retire() was out of memory) */
                        informer_free(sh->inf);
                        sh->inf = NULL;
                }
                if (!cv->closing && sh->inf && sh->users == 0 && part_kinds[i] != INFORMER_NODES) {
                        if (now - sh->idle_since >= cv->o.linger_usec) {
                                log_debug("no drain needs %s any more: not watching them", part_names[i]);
                                if (retire(sh) >= 0)
                                        next = now; /* freed on the next turn if nothing was in flight */
                        } else
                                next = MIN(next, sh->idle_since + cv->o.linger_usec);
                }
                busy = busy || sh->n_retiring > 0 || (cv->closing && sh->inf);
        }
        if (cv->closing && !busy) {
                void (*cb)(void *) = cv->close_cb;
                void *ud = cv->close_ud;

                dtimer_done(&cv->timer);
                for (int i = 0; i < N_PARTS; i++) {
                        free(cv->sh[i].subs);
                        free(cv->sh[i].retiring);
                }
                free(cv->parked);
                free(cv->nodes_fs);
                free(cv);
                if (cb)
                        cb(ud);
                return;
        }
        /* busy: on_shared_stopped comes back when a stopped informer's call ended */
        if (next != UINT64_MAX)
                cluster_timer_arm(cv, next - now);
}

int cluster_view_new(struct kube_client *client, struct timesrc *ts, const struct cluster_view_options *o,
                     struct cluster_view **ret) {
        struct cluster_view *cv = calloc(1, sizeof(*cv));
        int r;

        if (!cv)
                return -ENOMEM;
        cv->client = client;
        cv->ts = ts;
        if (o)
                cv->o = *o;
        if (cv->o.nodes_field_selector && !(cv->nodes_fs = strdup(cv->o.nodes_field_selector))) {
                free(cv);
                return -ENOMEM;
        }
        for (int i = 0; i < N_PARTS; i++)
                cv->sh[i] = (struct shared){ .cv = cv, .part = i };
        r = dtimer_init(&cv->timer, ts, on_cluster_timer);
        if (r < 0) {
                free(cv->nodes_fs);
                free(cv);
                return r;
        }
        *ret = cv;
        return 0;
}

int cluster_view_start(struct cluster_view *cv) {
        return shared_start(&cv->sh[0]);
}

struct informer *cluster_view_nodes(const struct cluster_view *cv) {
        return cv->sh[0].inf;
}

static int shared_subscribe(struct shared *sh, const struct informer_handlers *h, void *userdata,
                            const char *key) {
        /* One per node view: no more than the Nodes an informer holds. */
        int r = buf_grow_array(&sh->subs, &sh->a_subs, sh->n_subs + 1, sizeof(*sh->subs), BUF_CAP_OBJECTS);

        if (r < 0)
                return r;
        sh->subs[sh->n_subs++] = (struct sub){ .h = h, .userdata = userdata, .key = key };
        return 0;
}

static void shared_unsubscribe(struct shared *sh, void *userdata) {
        for (size_t i = 0; i < sh->n_subs; i++)
                if (sh->subs[i].userdata == userdata)
                        sh->subs[i].dead = true;
        compact_subs(sh);
}

int cluster_view_subscribe_nodes(struct cluster_view *cv, const struct informer_handlers *h,
                                 void *userdata) {
        return shared_subscribe(&cv->sh[0], h, userdata, NULL);
}

void cluster_view_unsubscribe_nodes(struct cluster_view *cv, void *userdata) {
        shared_unsubscribe(&cv->sh[0], userdata);
}

/* A node view takes part i: subscribed, and watched from now on. */
static int shared_acquire(struct cluster_view *cv, int i, const struct informer_handlers *h, void *userdata,
                          const char *key) {
        struct shared *sh = &cv->sh[i];
        int r;

        if (cv->closing)
                return -ESHUTDOWN;
        r = shared_subscribe(sh, h, userdata, key);
        if (r < 0)
                return r;
        if (part_kinds[i] != INFORMER_NODES) {
                r = shared_start(sh);
                if (r < 0) {
                        shared_unsubscribe(sh, userdata);
                        return r;
                }
                sh->users++;
        }
        return 0;
}

static void shared_release(struct cluster_view *cv, int i, void *userdata) {
        struct shared *sh = &cv->sh[i];

        shared_unsubscribe(sh, userdata);
        if (part_kinds[i] == INFORMER_NODES || sh->users == 0)
                return;
        if (--sh->users == 0) {
                sh->idle_since = timesrc_now(cv->ts);
                cluster_timer_arm(cv, cv->o.linger_usec);
        }
}

void cluster_view_close(struct cluster_view *cv, void (*cb)(void *userdata), void *userdata) {
        cv->closing = true;
        cv->close_cb = cb;
        cv->close_ud = userdata;
        for (int i = 0; i < N_PARTS; i++) {
                struct shared *sh = &cv->sh[i];

                if (sh->inf && retire(sh) < 0) {
                        /* Out of memory: wait for this one in place. */
                        informer_stop(sh->inf);
                }
        }
        /* Never from inside this call. */
        dtimer_start(&cv->timer, 0);
}

/* ---- the node view ---- */

struct view_part {
        struct node_view *v;
        unsigned part; /* the bit */
};

struct node_view {
        struct kube_client *client; /* borrowed */
        struct timesrc *ts;         /* borrowed */
        char *node;
        unsigned once;
        struct cluster_view *shared; /* borrowed */
        struct node_view_handlers h;
        void *userdata;
        char *node_fs, *pod_fs;
        struct informer *own[N_PARTS]; /* owned */
        struct view_part parts[N_PARTS];
        unsigned started;  /* parts started */
        unsigned borrowed; /* parts held from the cluster view */
        unsigned announce; /* shared parts synced already when taken: on_synced from the timer */
        /* A shared slices part: this node's records, found again only after one of them
         * changed or the informer listed again (not on every collect: every reconcile of
         * every drain would walk every slice of the cluster). */
        struct node_slices *mine;
        struct dtimer timer;
        bool closing;
        void (*close_cb)(void *userdata);
        void *close_ud;
};

struct node_slices {
        const void **recs; /* borrowed from the shared informer's cache */
        size_t n, allocated;
        bool stale;
};

/* Whether a shared part holds other nodes' records too: a view takes only its node's. */
static bool rec_node_keyed(int i) {
        return part_kinds[i] == INFORMER_NODES || part_kinds[i] == INFORMER_SLICES;
}

static struct informer *part_inf(const struct node_view *v, int i) {
        if (v->own[i])
                return v->own[i];
        if (v->borrowed & (1u << i))
                return v->shared->sh[i].inf;
        return NULL;
}

static void on_part_change(struct informer *inf, const void *rec, void *userdata) {
        struct view_part *p = userdata;

        if (p->part == NODE_VIEW_SLICES && p->v->mine)
                p->v->mine->stale = true;
        if (!p->v->closing && p->v->h.on_change)
                p->v->h.on_change(p->v, p->v->userdata);
}

static void on_part_update(struct informer *inf, const void *old, const void *rec, void *userdata) {
        on_part_change(inf, rec, userdata);
}

static void on_part_synced(struct informer *inf, void *userdata) {
        struct view_part *p = userdata;

        /* (after a list every record is a new one) */
        if (p->part == NODE_VIEW_SLICES && p->v->mine)
                p->v->mine->stale = true;
        if (!p->v->closing && p->v->h.on_synced)
                p->v->h.on_synced(p->v, p->part, p->v->userdata);
}

/* One of the view's own informers, stopped by a close, ended its last call. */
static void on_part_stopped(struct informer *inf, void *userdata) {
        struct view_part *p = userdata;

        if (p->v->closing && !p->v->timer.armed)
                dtimer_start(&p->v->timer, 0);
}

static void on_part_error(struct informer *inf, int error, const char *message, void *userdata) {
        struct view_part *p = userdata;

        if (!p->v->closing && p->v->h.on_error)
                p->v->h.on_error(p->v, p->part, error, message, p->v->userdata);
}

static const struct informer_handlers part_handlers = {
        .on_add = on_part_change,
        .on_update = on_part_update,
        .on_delete = on_part_change,
        .on_synced = on_part_synced,
        .on_error = on_part_error,
        .on_stopped = on_part_stopped,
};

static void view_free(struct node_view *v) {
        for (int i = 0; i < N_PARTS; i++)
                informer_free(v->own[i]);
        if (v->mine)
                free(v->mine->recs);
        free(v->mine);
        if (v->timer.src)
                dtimer_done(&v->timer);
        free(v->node);
        free(v->node_fs);
        free(v->pod_fs);
        free(v);
}

static bool own_idle(const struct node_view *v) {
        for (int i = 0; i < N_PARTS; i++)
                if (v->own[i] && !informer_idle(v->own[i]))
                        return false;
        return true;
}

static void on_view_timer(struct dtimer *t) {
        struct node_view *v = container_of(t, struct node_view, timer);

        if (v->closing) {
                void (*cb)(void *) = v->close_cb;
                void *ud = v->close_ud;

                if (!own_idle(v))
                        return; /* on_part_stopped comes back when the last call ended */
                view_free(v);
                if (cb)
                        cb(ud);
                return;
        }
        /* Shared parts that were synced when taken: say so, as if they had just synced. */
        for (int i = 0; i < N_PARTS && !v->closing; i++) {
                unsigned bit = 1u << i;
                struct informer *inf = part_inf(v, i);

                if (!(v->announce & bit))
                        continue;
                v->announce &= ~bit;
                if (inf && informer_synced(inf) && v->h.on_synced)
                        v->h.on_synced(v, bit, v->userdata);
        }
}

int node_view_new(struct kube_client *client, struct timesrc *ts, const struct node_view_options *o,
                  const struct node_view_handlers *h, void *userdata, struct node_view **ret) {
        struct node_view *v;
        int r;

        if (!o || !o->node)
                return -EINVAL;
        v = calloc(1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        v->client = client;
        v->ts = ts;
        v->once = o->once;
        v->shared = o->shared;
        if (h)
                v->h = *h;
        v->userdata = userdata;
        for (int i = 0; i < N_PARTS; i++)
                v->parts[i] = (struct view_part){ .v = v, .part = 1u << i };
        v->node = strdup(o->node);
        if (!v->node || asprintf(&v->node_fs, "metadata.name=%s", o->node) < 0) {
                v->node_fs = NULL;
                view_free(v);
                return -ENOMEM;
        }
        if (asprintf(&v->pod_fs, "spec.nodeName=%s", o->node) < 0) {
                v->pod_fs = NULL;
                view_free(v);
                return -ENOMEM;
        }
        r = dtimer_init(&v->timer, ts, on_view_timer);
        if (r < 0) {
                view_free(v);
                return r;
        }
        *ret = v;
        return 0;
}

static int start_own(struct node_view *v, int i) {
        struct informer_options io = { .kind = part_kinds[i], .once = (v->once & (1u << i)) != 0 };
        int r;

        switch (part_kinds[i]) {
        case INFORMER_NODES:
                /* A snapshot reads its Node with a GET, a watch needs the name as a field selector. */
                if (io.once)
                        io.name = v->node;
                else
                        io.field_selector = v->node_fs;
                break;
        case INFORMER_PODS:
                io.field_selector = v->pod_fs;
                break;
        case INFORMER_SLICES:
                io.field_selector = v->pod_fs;
                io.api_prefixes = dra_prefixes;
                break;
        case INFORMER_CLAIMS:
                /* Claims cannot be filtered by node: all of them, kept compact, listed in pages (a
                 * consistent list is served from the watch cache and honours limit). */
                io.api_prefixes = dra_prefixes;
                break;
        case INFORMER_PDBS:
                /* Budgets of a view of its own are listed once: a one-shot drain is short. */
                io.once = true;
                break;
        default:
                break;
        }
        if (!v->own[i] && v->shared && !io.once && (v->own[i] = unpark(v->shared, v->node, i))) {
                /* The watch the node's last run left: running, and synced (said from the timer). */
                log_debug("node %s: watching its %s again from the last run's cache", v->node,
                          part_names[i]);
                informer_set_handlers(v->own[i], &part_handlers, &v->parts[i]);
                v->announce |= 1u << i;
                if (!v->timer.armed)
                        dtimer_start(&v->timer, 0);
                return 0;
        }
        if (!v->own[i]) {
                r = informer_new(v->client, v->ts, &io, &part_handlers, &v->parts[i], &v->own[i]);
                if (r < 0)
                        return r;
        }
        return informer_start(v->own[i]);
}

int node_view_start(struct node_view *v, unsigned parts) {
        int r;

        if (v->closing)
                return -ESHUTDOWN;
        for (int i = 0; i < N_PARTS; i++) {
                unsigned bit = 1u << i;

                if (!(parts & bit) || (v->started & bit))
                        continue;
                if (v->shared && is_shared_part(v->shared, i)) {
                        if (part_kinds[i] == INFORMER_SLICES) {
                                if (!v->mine && !(v->mine = calloc(1, sizeof(*v->mine))))
                                        return -ENOMEM;
                                v->mine->stale = true;
                        }
                        r = shared_acquire(v->shared, i, &part_handlers, &v->parts[i],
                                           rec_node_keyed(i) ? v->node : NULL);
                        if (r < 0)
                                return r;
                        v->borrowed |= bit;
                        if (informer_synced(part_inf(v, i))) {
                                v->announce |= bit;
                                if (!v->timer.armed)
                                        dtimer_start(&v->timer, 0);
                        }
                } else {
                        r = start_own(v, i);
                        if (r < 0)
                                return r;
                }
                v->started |= bit;
        }
        return 0;
}

void node_view_stop_part(struct node_view *v, unsigned part) {
        int i = part_index(part);

        if (i >= 0 && v->own[i])
                informer_stop(v->own[i]);
}

int node_view_dra_api(const struct node_view *v, unsigned part, const char **ret) {
        int i = part_index(part);
        struct informer *inf;
        const char *prefix;

        if (i < 0 || (part_kinds[i] != INFORMER_CLAIMS && part_kinds[i] != INFORMER_SLICES))
                return -EINVAL;
        inf = part_inf(v, i);
        if (!(v->started & part) || !inf || !informer_synced(inf))
                return -EAGAIN;
        prefix = informer_api_prefix(inf);
        if (!prefix) {
                *ret = NULL;
                return 0;
        }
        *ret = prefix + sizeof("/apis/") - 1;
        return 1;
}

bool node_view_synced(const struct node_view *v, unsigned parts) {
        for (int i = 0; i < N_PARTS; i++) {
                struct informer *inf = part_inf(v, i);

                if (!(parts & (1u << i)))
                        continue;
                if (!(v->started & (1u << i)) || !inf || !informer_synced(inf))
                        return false;
        }
        return true;
}

const struct node_rec *node_view_node(const struct node_view *v) {
        struct informer *inf = part_inf(v, 0);

        return inf ? informer_get(inf, v->node) : NULL;
}

const struct pod_rec *node_view_pod(const struct node_view *v, const char *ns_name) {
        struct informer *inf = part_inf(v, part_index(NODE_VIEW_PODS));

        return inf ? informer_get(inf, ns_name) : NULL;
}

/* The node's records of a shared slices part, found again if stale; -ENOMEM. */
static int mine_refresh(const struct node_view *v) {
        struct node_slices *m = v->mine;
        int k = part_index(NODE_VIEW_SLICES);
        struct informer *inf = part_inf(v, k);
        const void *rec;

        if (!m->stale)
                return 0;
        m->n = 0;
        for (size_t it = 0; inf && informer_iterate(inf, &it, &rec);) {
                if (!streq_ptr(rec_node(rec, k), v->node))
                        continue;
                /* a node's slices: one per pool and driver, a handful */
                if (buf_grow_array(&m->recs, &m->allocated, m->n + 1, sizeof(*m->recs), BUF_CAP_OBJECTS) < 0)
                        return -ENOMEM;
                m->recs[m->n++] = rec;
        }
        m->stale = false;
        return 0;
}

bool node_view_iterate_slices(const struct node_view *v, size_t *i, const struct slice_rec **ret) {
        struct informer *inf = part_inf(v, part_index(NODE_VIEW_SLICES));
        const void *rec;

        if ((v->borrowed & NODE_VIEW_SLICES) && v->mine) {
                if (mine_refresh(v) < 0 || *i >= v->mine->n)
                        return false;
                *ret = v->mine->recs[(*i)++];
                return true;
        }
        if (!inf || !informer_iterate(inf, i, &rec))
                return false;
        *ret = rec;
        return true;
}

static int collect(const struct node_view *v, unsigned part, const void ***ret, size_t *ret_n) {
        struct informer *inf = part_inf(v, part_index(part));
        size_t k = 0;

        if (!inf || !(v->started & part)) {
                *ret = calloc(1, sizeof(void *));
                *ret_n = 0;
                return *ret ? 0 : -ENOMEM;
        }
        if (part == NODE_VIEW_SLICES && (v->borrowed & part) && v->mine) {
                /* a shared part of every node's slices: this node's */
                if (mine_refresh(v) < 0 || !(*ret = calloc(v->mine->n + 1, sizeof(void *))))
                        return -ENOMEM;
                for (; k < v->mine->n; k++)
                        (*ret)[k] = v->mine->recs[k];
                *ret_n = k;
                return 0;
        }
        return informer_collect(inf, ret, ret_n);
}

int node_view_collect(const struct node_view *v, struct node_input *ret) {
        struct node_input in = { .node = node_view_node(v) };
        const char *api = NULL;
        int r;

        /* The claims' API, else the slices' (a view of its slices only). */
        r = node_view_dra_api(v, NODE_VIEW_CLAIMS, &api);
        if (r < 0)
                r = node_view_dra_api(v, NODE_VIEW_SLICES, &api);
        in.dra_api = r > 0 ? api : NULL;
        in.dra_off = r == 0;

        if (collect(v, NODE_VIEW_PODS, (const void ***)&in.pods, &in.n_pods) < 0 ||
            collect(v, NODE_VIEW_CLAIMS, (const void ***)&in.claims, &in.n_claims) < 0 ||
            collect(v, NODE_VIEW_SLICES, (const void ***)&in.slices, &in.n_slices) < 0 ||
            collect(v, NODE_VIEW_PDBS, (const void ***)&in.pdbs, &in.n_pdbs) < 0) {
                node_input_done(&in);
                return -ENOMEM;
        }
        *ret = in;
        return 0;
}

void node_input_done(struct node_input *in) {
        free(in->pods);
        free(in->claims);
        free(in->slices);
        free(in->pdbs);
        *in = (struct node_input){};
}

void node_view_close(struct node_view *v, void (*cb)(void *userdata), void *userdata) {
        v->close_cb = cb;
        v->close_ud = userdata;
        if (v->closing)
                return;
        v->closing = true;
        for (int i = 0; i < N_PARTS; i++) {
                if (v->borrowed & (1u << i))
                        shared_release(v->shared, i, &v->parts[i]);
                if (v->own[i] && v->shared && park(v->shared, v->node, i, v->own[i]))
                        v->own[i] = NULL;
                if (v->own[i])
                        informer_stop(v->own[i]);
        }
        v->borrowed = 0;
        /* Never from inside this call: the cancelled calls end on later turns of the loop. */
        dtimer_start(&v->timer, 0);
}
