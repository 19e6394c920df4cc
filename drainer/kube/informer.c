/* List+watch informer over the API client. Owns its cache of compact records
 * and its calls; never keeps JSON documents. Level of resilience: bookmarks,
 * 410 relist, reconnect with capped, jittered backoff (never a busy loop). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/backoff.h"
#include "drainer/base/hashmap.h"
#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "drainer/base/timesrc.h"
#include "drainer/kube/client.h"
#include "drainer/kube/informer.h"
#include "drainer/kube/kobserver.h"
#include "drainer/kube/objects.h"

/* A watch that lasted this long without error counts as healthy when it ends. */
#define WATCH_MIN_HEALTHY_USEC (1 * USEC_PER_SEC)

struct kind_ops {
        const char *name;
        const char *prefix; /* group/version path, e.g. "/api/v1" */
        bool namespaced;
        int (*from_json)(const cJSON *obj, void **ret);
        void (*free)(void *rec);
        size_t (*size)(const void *rec);
        const char *(*rv)(const void *rec);
        int (*key)(const void *rec, char *buf, size_t size);
};

#define DEFINE_KIND_OPS(type, has_ns)                                                                 \
        static int type##_from_json_v(const cJSON *obj, void **ret) {                                 \
                struct type *r;                                                                       \
                int e = type##_from_json(obj, &r);                                                    \
                if (e >= 0)                                                                           \
                        *ret = r;                                                                     \
                return e;                                                                             \
        }                                                                                             \
        static void type##_free_v(void *rec) {                                                        \
                type##_free(rec);                                                                     \
        }                                                                                             \
        static size_t type##_size_v(const void *rec) {                                                \
                return type##_size(rec);                                                              \
        }                                                                                             \
        static const char *type##_rv_v(const void *rec) {                                             \
                return ((const struct type *)rec)->resource_version;                                  \
        }                                                                                             \
        static int type##_key_v(const void *rec, char *buf, size_t size) {                            \
                const struct type *x = rec;                                                           \
                int n = (has_ns) ? snprintf(buf, size, "%s/%s", strempty(kind_ns_##type(x)), x->name) \
                                 : snprintf(buf, size, "%s", x->name);                                \
                return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;                                \
        }

static inline const char *kind_ns_pod_rec(const struct pod_rec *p) {
        return p->ns;
}
static inline const char *kind_ns_claim_rec(const struct claim_rec *c) {
        return c->ns;
}
static inline const char *kind_ns_node_rec(const struct node_rec *n) {
        return NULL;
}
static inline const char *kind_ns_slice_rec(const struct slice_rec *s) {
        return NULL;
}
static inline const char *kind_ns_lease_rec(const struct lease_rec *l) {
        return l->ns;
}
static inline const char *kind_ns_pdb_rec(const struct pdb_rec *b) {
        return b->ns;
}
static inline const char *kind_ns_machine_rec(const struct machine_rec *m) {
        return m->ns;
}

DEFINE_KIND_OPS(pod_rec, true)
DEFINE_KIND_OPS(claim_rec, true)
DEFINE_KIND_OPS(node_rec, false)
DEFINE_KIND_OPS(slice_rec, false)
DEFINE_KIND_OPS(lease_rec, true)
DEFINE_KIND_OPS(pdb_rec, true)
DEFINE_KIND_OPS(machine_rec, true)

#define KIND(t, n, p, ns) \
        { n, p, ns, t##_from_json_v, t##_free_v, t##_size_v, t##_rv_v, t##_key_v }

static const struct kind_ops kinds[_INFORMER_KIND_MAX] = {
        [INFORMER_NODES] = KIND(node_rec, "nodes", "/api/v1", false),
        [INFORMER_PODS] = KIND(pod_rec, "pods", "/api/v1", true),
        [INFORMER_CLAIMS] = KIND(claim_rec, "resourceclaims", "/apis/resource.k8s.io/v1", true),
        [INFORMER_SLICES] = KIND(slice_rec, "resourceslices", "/apis/resource.k8s.io/v1", false),
        [INFORMER_LEASES] = KIND(lease_rec, "leases", "/apis/coordination.k8s.io/v1", true),
        [INFORMER_PDBS] = KIND(pdb_rec, "poddisruptionbudgets", "/apis/policy/v1", true),
        [INFORMER_MACHINES] = KIND(machine_rec, "machines", "/apis/cluster.x-k8s.io/v1beta2", true),
        [INFORMER_NAMESPACES] = KIND(node_rec, "namespaces", "/api/v1", false),
};

const char *informer_kind_to_string(enum informer_kind k) {
        return k >= 0 && k < _INFORMER_KIND_MAX ? kinds[k].name : NULL;
}

enum informer_state {
        INF_STOPPED,
        INF_LISTING,
        INF_WATCHING,
        INF_BACKOFF,
};

struct informer {
        struct kube_client *client; /* borrowed */
        struct timesrc *ts;         /* borrowed */
        const struct kind_ops *ops;
        struct informer_options opts;
        struct informer_handlers h;
        void *userdata;
        char *path; /* collection path with selectors: paths[cur] */
        char *paths[INFORMER_MAX_PREFIXES];
        const char *prefixes[INFORMER_MAX_PREFIXES]; /* borrowed from the options */
        unsigned n_paths, cur;
        bool discovering; /* api_prefixes given (one or more): a 404 list is "not served" */
        unsigned probes;  /* consecutive 404s of lists, one per prefix tried */
        bool not_served;  /* every prefix answered 404 */
        enum informer_state state;
        struct hashmap *cache; /* owned, and owns its records */
        struct hashmap *fresh; /* the list being built */
        size_t cache_bytes;
        char *rv;
        bool synced, stopping, relist_next;
        struct kube_call *call; /* in flight, or NULL */
        struct dtimer timer;
        unsigned failures;      /* consecutive, for backoff */
        uint64_t watch_started; /* monotonic µs */
        bool watch_got_event;
        struct backoff backoff; /* counts with failures; also spreads watch timeouts */
        int list_error;
        struct informer_stats stats;
};

static void start_list(struct informer *inf);
static void start_watch(struct informer *inf);

static void free_rec(struct informer *inf, void *rec) {
        inf->ops->free(rec);
}

static void set_rv(struct informer *inf, const char *rv) {
        char *n;

        if (!rv || streq_ptr(rv, inf->rv))
                return;
        n = strdup(rv);
        if (!n)
                return; /* keep the old one: a later watch resumes a bit earlier, harmless */
        free(inf->rv);
        inf->rv = n;
}

/* Backs off before the next list or watch. retry_after_usec: the server's
 * Retry-After (a 429 or 5xx answer), a floor under the jittered backoff, up to
 * the backoff cap. */
static void schedule_retry(struct informer *inf, bool relist, uint64_t retry_after_usec) {
        uint64_t d = backoff_delay(&inf->backoff, inf->failures);

        d = MAX(d, MIN(retry_after_usec, inf->opts.backoff_cap_usec));
        inf->relist_next = relist;
        inf->state = INF_BACKOFF;
        log_debug("informer %s: retrying %s in %llu ms", inf->ops->name, relist ? "list" : "watch",
                  (unsigned long long)(d / USEC_PER_MSEC));
        dtimer_start(&inf->timer, d);
}

static void on_timer(struct dtimer *t) {
        struct informer *inf = container_of(t, struct informer, timer);

        if (inf->stopping)
                return;
        if (inf->relist_next || !inf->rv)
                start_list(inf);
        else
                start_watch(inf);
}

static void report_error(struct informer *inf, int error, const char *message) {
        inf->stats.errors++;
        if (inf->h.on_error)
                inf->h.on_error(inf, error, message, inf->userdata);
}

/* Puts one listed object into the fresh cache; a malformed one is skipped. */
static int put_fresh(struct informer *inf, const cJSON *item) {
        char key[512];
        void *rec, *old = NULL;
        int r;

        r = inf->ops->from_json(item, &rec);
        if (r < 0) {
                log_debug("informer %s: skipping a malformed item, ignoring", inf->ops->name);
                return 0;
        }
        r = inf->ops->key(rec, key, sizeof(key));
        if (r >= 0)
                r = hashmap_put(inf->fresh, key, rec, &old);
        if (r < 0) {
                free_rec(inf, rec);
                return r; /* -ENOSPC: more objects than the cap */
        }
        if (old)
                free_rec(inf, old);
        return 0;
}

static int on_list_page(const cJSON *items, void *userdata) {
        struct informer *inf = userdata;
        const cJSON *item;
        int r;

        cJSON_ArrayForEach(item, items) {
                r = put_fresh(inf, item);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Replaces the cache with the fresh list, reporting the differences. */
static void swap_in_fresh(struct informer *inf) {
        struct hashmap *old = inf->cache;
        const char *key;
        void *rec;
        size_t i = 0;

        inf->cache = inf->fresh;
        inf->fresh = NULL;
        inf->cache_bytes = 0;
        while (hashmap_iterate(inf->cache, &i, &key, &rec)) {
                void *prev = hashmap_get(old, key);

                inf->cache_bytes += inf->ops->size(rec);
                if (!prev) {
                        if (inf->h.on_add)
                                inf->h.on_add(inf, rec, inf->userdata);
                } else if (!streq_ptr(inf->ops->rv(prev), inf->ops->rv(rec))) {
                        if (inf->h.on_update)
                                inf->h.on_update(inf, prev, rec, inf->userdata);
                }
        }
        i = 0;
        while (hashmap_iterate(old, &i, &key, &rec))
                if (!hashmap_get(inf->cache, key) && inf->h.on_delete)
                        inf->h.on_delete(inf, rec, inf->userdata);
        hashmap_free(old, (void (*)(void *))inf->ops->free);
}

/* A list answered 404 with api_prefixes: the next one, at once; after every one, "not
 * served": an empty cache, synced, looked at again later. true: handled. */
static bool list_not_found(struct informer *inf) {
        bool was_not_served = inf->not_served;

        if (!inf->discovering)
                return false;
        hashmap_free(inf->fresh, inf->ops->free);
        inf->fresh = NULL;
        if (++inf->probes < inf->n_paths) {
                inf->cur = (inf->cur + 1) % inf->n_paths;
                inf->path = inf->paths[inf->cur];
                log_debug("informer %s: not served at %s, trying %s", inf->ops->name,
                          inf->prefixes[(inf->cur + inf->n_paths - 1) % inf->n_paths],
                          inf->prefixes[inf->cur]);
                start_list(inf);
                return true;
        }
        /* None serves it: what is not served holds nothing. */
        inf->probes = 0;
        inf->cur = (inf->cur + 1) % inf->n_paths; /* back where this probe began */
        inf->path = inf->paths[inf->cur];
        if (!was_not_served)
                log_debug("informer %s: not served by the API server", inf->ops->name);
        inf->not_served = true;
        inf->failures = 0;
        inf->rv = mfree(inf->rv);
        inf->fresh = hashmap_new(inf->opts.max_objects);
        if (inf->fresh)
                swap_in_fresh(inf);
        inf->synced = true;
        inf->state = inf->opts.once ? INF_STOPPED : INF_BACKOFF;
        if (!inf->opts.once) {
                inf->relist_next = true;
                dtimer_start(&inf->timer, inf->opts.not_served_recheck_usec);
        }
        /* Said once: a recheck that finds nothing again changes nothing. */
        if (!was_not_served && inf->h.on_synced)
                inf->h.on_synced(inf, inf->userdata);
        return true;
}

/* The call a stop cancelled ended: last, as the owner may free the informer. */
static void tell_stopped(struct informer *inf) {
        if (inf->stopping && inf->h.on_stopped)
                inf->h.on_stopped(inf, inf->userdata);
}

static void on_list_done(const struct kube_result *res, void *userdata) {
        struct informer *inf = userdata;

        inf->call = NULL;
        if (inf->stopping || res->error == -ECANCELED) {
                hashmap_free(inf->fresh, inf->ops->free);
                inf->fresh = NULL;
                inf->state = INF_STOPPED;
                return tell_stopped(inf);
        }
        if (res->error == -ENOENT && !inf->opts.name && list_not_found(inf))
                return;
        if (res->error < 0) {
                hashmap_free(inf->fresh, inf->ops->free);
                inf->fresh = NULL;
                inf->failures++;
                log_debug("informer %s: list failed: %s", inf->ops->name,
                          res->message ? res->message : strerror(-res->error));
                if (inf->opts.once) {
                        inf->state = INF_STOPPED;
                        return report_error(inf, res->error, res->message);
                }
                report_error(inf, res->error, res->message);
                return schedule_retry(inf, true, res->retry_after_usec);
        }
        inf->failures = 0;
        inf->probes = 0;
        if (inf->not_served)
                log_debug("informer %s: served at %s now", inf->ops->name, inf->prefixes[inf->cur]);
        inf->not_served = false;
        set_rv(inf, res->resource_version);
        swap_in_fresh(inf);
        inf->synced = true;
        if (inf->opts.once)
                inf->state = INF_STOPPED; /* before on_synced: it may start the informer again */
        if (inf->h.on_synced)
                inf->h.on_synced(inf, inf->userdata);
        if (!inf->stopping && inf->state == INF_LISTING)
                start_watch(inf);
}

/* A GET of one object by name (once): its answer as a list's of that object or of none. */
static void on_get_done(const struct kube_result *res, void *userdata) {
        struct informer *inf = userdata;
        struct kube_result lr = *res;
        int r;

        if (res->error == -ENOENT) {
                lr = (struct kube_result){ .status = res->status, .attempts = res->attempts };
        } else if (res->error >= 0 && inf->fresh) {
                r = res->json ? put_fresh(inf, res->json) : 0;
                if (r < 0)
                        lr.error = r;
                else
                        lr.resource_version = json_str(res->json, "metadata.resourceVersion");
        }
        on_list_done(&lr, inf);
}

static void start_list(struct informer *inf) {
        int r;

        inf->fresh = hashmap_new(inf->opts.max_objects);
        if (!inf->fresh) {
                inf->failures++;
                return schedule_retry(inf, true, 0);
        }
        inf->state = INF_LISTING;
        inf->stats.lists++;
        /* The first list may come from the watch cache; after a 410 read from etcd so the
         * resourceVersion we resume from is current. */
        if (inf->opts.name)
                r = kube_get(inf->client, inf->path, on_get_done, inf, &inf->call);
        else
                r = kube_list(inf->client, inf->path, inf->opts.page_limit,
                              inf->opts.list_from_cache && !inf->rv ? "0" : NULL, on_list_page, on_list_done,
                              inf, &inf->call);
        if (r < 0) {
                hashmap_free(inf->fresh, inf->ops->free);
                inf->fresh = NULL;
                inf->failures++;
                report_error(inf, r, NULL);
                schedule_retry(inf, true, 0);
        }
}

static int apply_event(struct informer *inf, enum watch_event_type type, const cJSON *object) {
        char key[512];
        void *rec, *old = NULL;
        int r;

        r = inf->ops->from_json(object, &rec);
        if (r < 0) {
                log_debug("informer %s: malformed %s event, ignoring", inf->ops->name,
                          watch_event_type_to_string(type));
                return 0;
        }
        set_rv(inf, inf->ops->rv(rec));
        r = inf->ops->key(rec, key, sizeof(key));
        if (r < 0) {
                free_rec(inf, rec);
                return 0;
        }
        if (type == WATCH_DELETED) {
                old = hashmap_remove(inf->cache, key);
                if (old) {
                        inf->cache_bytes -= inf->ops->size(old);
                        if (inf->h.on_delete)
                                inf->h.on_delete(inf, old, inf->userdata);
                        free_rec(inf, old);
                }
                free_rec(inf, rec);
                return 0;
        }
        r = hashmap_put(inf->cache, key, rec, &old);
        if (r < 0) {
                free_rec(inf, rec);
                return r;
        }
        inf->cache_bytes += inf->ops->size(rec);
        if (old) {
                inf->cache_bytes -= inf->ops->size(old);
                if (inf->h.on_update)
                        inf->h.on_update(inf, old, rec, inf->userdata);
                free_rec(inf, old);
        } else if (inf->h.on_add)
                inf->h.on_add(inf, rec, inf->userdata);
        return 0;
}

static int on_watch_event(enum watch_event_type type, const cJSON *object, void *userdata) {
        struct informer *inf = userdata;

        inf->stats.events++;
        kube_observe_watch_event(inf->ops->name, strna(watch_event_type_to_string(type)));
        inf->failures = 0;
        inf->watch_got_event = true;
        switch (type) {
        case WATCH_BOOKMARK:
                set_rv(inf, json_str(object, "metadata.resourceVersion"));
                return 0;
        case WATCH_ADDED:
        case WATCH_MODIFIED:
        case WATCH_DELETED:
                return apply_event(inf, type, object);
        default:
                return 0;
        }
}

static void on_watch_done(const struct kube_result *res, void *userdata) {
        struct informer *inf = userdata;

        inf->call = NULL;
        if (inf->stopping || res->error == -ECANCELED) {
                inf->state = INF_STOPPED;
                return tell_stopped(inf);
        }
        kube_observe_watch_end(inf->ops->name, res->error == 0         ? "closed"
                                               : res->error == -ESTALE ? "expired"
                                                                       : "error");
        if (res->error == 0) {
                /* The server ended the watch (timeoutSeconds): resume at once. A watch
                 * that ends at once with nothing in it (a proxy cutting streams) is
                 * treated as a failure so that it backs off instead of spinning. */
                if (inf->watch_got_event ||
                    timesrc_now(inf->ts) - inf->watch_started >= WATCH_MIN_HEALTHY_USEC)
                        return start_watch(inf);
                inf->failures++;
                log_debug("informer %s: watch closed at once without events, retrying", inf->ops->name);
                return schedule_retry(inf, false, 0);
        }
        if (res->error == -ENOENT && inf->discovering) {
                /* The version went away (the API server restarted with another
                 * --runtime-config): list again, which finds what is served now. */
                log_debug("informer %s: watch answered 404, discovering again", inf->ops->name);
                inf->failures = 0;
                return start_list(inf);
        }
        if (res->error == -ESTALE) {
                inf->stats.relists_410++;
                log_debug("informer %s: resourceVersion %s is gone, relisting", inf->ops->name,
                          strna(inf->rv));
                inf->failures = 0;
                return start_list(inf);
        }
        inf->failures++;
        report_error(inf, res->error, res->message);
        schedule_retry(inf, res->error == -ENOSPC, res->retry_after_usec);
}

static void start_watch(struct informer *inf) {
        /* Like client-go: a random timeout between 5 and 10 minutes spreads reconnects. */
        unsigned timeout = 300 + (unsigned)backoff_random(&inf->backoff, 300);
        int r;

        inf->state = INF_WATCHING;
        inf->stats.watches++;
        inf->watch_started = timesrc_now(inf->ts);
        inf->watch_got_event = false;
        r = kube_watch(inf->client, inf->path, inf->rv, timeout, on_watch_event, on_watch_done, inf,
                       &inf->call);
        if (r < 0) {
                inf->failures++;
                report_error(inf, r, NULL);
                schedule_retry(inf, false, 0);
        }
}

int informer_new(struct kube_client *client, struct timesrc *ts, const struct informer_options *opts,
                 const struct informer_handlers *h, void *userdata, struct informer **ret) {
        _cleanup_free_ char *fs = NULL, *ls = NULL, *ns = NULL, *base = NULL;
        const char *prefix;
        struct informer *inf;
        int r;

        if (opts->kind < 0 || opts->kind >= _INFORMER_KIND_MAX)
                return -EINVAL;
        if (opts->namespace && (!kinds[opts->kind].namespaced || !*opts->namespace))
                return -EINVAL;
        if (opts->name && (!opts->once || !*opts->name))
                return -EINVAL;
        inf = calloc(1, sizeof(*inf));
        if (!inf)
                return -ENOMEM;
        inf->client = client;
        inf->ts = ts;
        inf->ops = &kinds[opts->kind];
        inf->opts = *opts;
        if (h)
                inf->h = *h;
        inf->userdata = userdata;
        if (!inf->opts.page_limit)
                inf->opts.page_limit = 500;
        if (!inf->opts.max_objects)
                inf->opts.max_objects = 100000;
        if (!inf->opts.backoff_base_usec)
                inf->opts.backoff_base_usec = USEC_PER_SEC;
        if (!inf->opts.backoff_cap_usec)
                inf->opts.backoff_cap_usec = 30 * USEC_PER_SEC;
        backoff_init(&inf->backoff, inf->opts.backoff_base_usec, inf->opts.backoff_cap_usec, true,
                     backoff_seed(ts, (uint64_t)opts->kind));
        inf->cache = hashmap_new(inf->opts.max_objects);
        if (opts->field_selector && !(fs = kube_query_escape(opts->field_selector)))
                goto oom;
        if (opts->label_selector && !(ls = kube_query_escape(opts->label_selector)))
                goto oom;
        /* Escaping keeps a namespace (a DNS label) as it is, and anything else one path segment. */
        if (opts->namespace && !(ns = kube_query_escape(opts->namespace)))
                goto oom;
        if (!inf->opts.not_served_recheck_usec)
                inf->opts.not_served_recheck_usec = 60 * USEC_PER_SEC;
        if (opts->api_prefixes) {
                while (opts->api_prefixes[inf->n_paths]) {
                        if (inf->n_paths == INFORMER_MAX_PREFIXES) {
                                informer_free(inf);
                                return -EINVAL;
                        }
                        inf->prefixes[inf->n_paths] = opts->api_prefixes[inf->n_paths];
                        inf->n_paths++;
                }
                inf->discovering = true;
        } else {
                inf->prefixes[0] = opts->api_prefix ? opts->api_prefix : inf->ops->prefix;
                inf->n_paths = 1;
        }
        if (inf->n_paths == 0) {
                informer_free(inf);
                return -EINVAL;
        }
        for (unsigned k = 0; k < inf->n_paths; k++) {
                char **path = &inf->paths[k];

                prefix = inf->prefixes[k];
                base = mfree(base);
                if (ns ? asprintf(&base, "%s/namespaces/%s/%s", prefix, ns, inf->ops->name) < 0
                       : asprintf(&base, "%s/%s", prefix, inf->ops->name) < 0) {
                        base = NULL;
                        goto oom;
                }
                if (opts->name) {
                        _cleanup_free_ char *name = kube_query_escape(opts->name);

                        /* Escaped, the name stays one path segment. */
                        if (!name || asprintf(path, "%s/%s", base, name) < 0) {
                                *path = NULL;
                                goto oom;
                        }
                } else if (asprintf(path, "%s%s%s%s%s%s%s", base, fs || ls ? "?" : "",
                                    fs ? "fieldSelector=" : "", strempty(fs), fs && ls ? "&" : "",
                                    ls ? "labelSelector=" : "", strempty(ls)) < 0) {
                        *path = NULL;
                        goto oom;
                }
        }
        inf->path = inf->paths[0];
        if (!inf->cache)
                goto oom;
        r = dtimer_init(&inf->timer, ts, on_timer);
        if (r < 0) {
                informer_free(inf);
                return r;
        }
        *ret = inf;
        return 0;
oom:
        informer_free(inf);
        return -ENOMEM;
}

int informer_start(struct informer *inf) {
        if (inf->state != INF_STOPPED || inf->call)
                return -EBUSY;
        inf->stopping = false;
        start_list(inf);
        return 0;
}

void informer_stop(struct informer *inf) {
        inf->stopping = true;
        if (inf->timer.src)
                dtimer_stop(&inf->timer);
        if (inf->call)
                kube_call_cancel(inf->call);
        else
                inf->state = INF_STOPPED;
}

bool informer_idle(const struct informer *inf) {
        return !inf->call;
}

void informer_free(struct informer *inf) {
        if (!inf)
                return;
        if (inf->timer.src)
                dtimer_done(&inf->timer);
        hashmap_free(inf->cache, inf->ops->free);
        hashmap_free(inf->fresh, inf->ops->free);
        for (unsigned k = 0; k < INFORMER_MAX_PREFIXES; k++)
                free(inf->paths[k]);
        free(inf->rv);
        free(inf);
}

bool informer_synced(const struct informer *inf) {
        return inf->synced;
}

bool informer_running(const struct informer *inf) {
        return !inf->stopping && inf->state != INF_STOPPED;
}

void informer_set_handlers(struct informer *inf, const struct informer_handlers *h, void *userdata) {
        inf->h = *h;
        inf->userdata = userdata;
}

const char *informer_api_prefix(const struct informer *inf) {
        return inf->not_served ? NULL : inf->prefixes[inf->cur];
}

const char *informer_resource_version(const struct informer *inf) {
        return inf->rv;
}

size_t informer_size(const struct informer *inf) {
        return hashmap_size(inf->cache);
}

const void *informer_get(const struct informer *inf, const char *key) {
        return hashmap_get(inf->cache, key);
}

bool informer_iterate(const struct informer *inf, size_t *i, const void **ret_rec) {
        void *v;

        if (!hashmap_iterate(inf->cache, i, NULL, &v))
                return false;
        *ret_rec = v;
        return true;
}

int informer_collect(const struct informer *inf, const void ***ret, size_t *ret_n) {
        size_t n = informer_size(inf), i = 0, k = 0;
        const void **v = calloc(n + 1, sizeof(void *));
        const void *rec;

        if (!v)
                return -ENOMEM;
        while (k < n && informer_iterate(inf, &i, &rec))
                v[k++] = rec;
        *ret = v;
        *ret_n = k;
        return 0;
}

void informer_get_stats(const struct informer *inf, struct informer_stats *ret) {
        *ret = inf->stats;
}

size_t informer_cache_bytes(const struct informer *inf) {
        return inf->cache_bytes;
}
