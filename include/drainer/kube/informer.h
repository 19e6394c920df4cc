/* Informers: list, then watch from the list's resourceVersion; bookmarks move
 * it on; 410 Gone relists; errors reconnect with backoff. Each keeps a compact
 * cache (struct pod_rec, claim_rec, node_rec, slice_rec, lease_rec, pdb_rec)
 * keyed "ns/name" or "name", and reports add/update/delete and the first sync.
 * One set of handlers each: sharing one among many users is the node view's
 * (nodeview.h). */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/base/macro.h"

struct kube_client;
struct timesrc;
struct informer;

enum informer_kind {
        INFORMER_NODES,
        INFORMER_PODS,
        INFORMER_CLAIMS,
        INFORMER_SLICES,
        INFORMER_LEASES,   /* coordination.k8s.io/v1 */
        INFORMER_PDBS,     /* policy/v1 PodDisruptionBudgets */
        INFORMER_MACHINES, /* cluster.x-k8s.io/v1beta2 Cluster API Machines */
        /* core/v1 Namespaces, cached as struct node_rec: their name, resourceVersion,
         * labels and drainer.io/ annotations (serve's pause); the rest stays empty. */
        INFORMER_NAMESPACES,
        _INFORMER_KIND_MAX,
        _INFORMER_KIND_INVALID = -EINVAL,
};

const char *informer_kind_to_string(enum informer_kind k);

struct informer_handlers {
        void (*on_add)(struct informer *inf, const void *rec, void *userdata);
        void (*on_update)(struct informer *inf, const void *old_rec, const void *rec, void *userdata);
        void (*on_delete)(struct informer *inf, const void *rec, void *userdata);
        /* After the first complete list (once), and after every relist. */
        void (*on_synced)(struct informer *inf, void *userdata);
        /* A list or watch failed; the informer retries by itself with backoff.
         * message is the server's Status message, or NULL. */
        void (*on_error)(struct informer *inf, int error, const char *message, void *userdata);
        /* After informer_stop(): its call in flight ended (informer_idle() turned true),
         * from that call's callback; the informer may be freed from it. Not called when
         * nothing was in flight at the stop. */
        void (*on_stopped)(struct informer *inf, void *userdata);
};

struct informer_options {
        enum informer_kind kind;
        const char *field_selector; /* e.g. "spec.nodeName=node-1", or NULL */
        const char *label_selector; /* or NULL */
        unsigned page_limit;        /* 0 = 500 */
        size_t max_objects;         /* 0 = 100000: more is an error, not a crash */
        bool list_from_cache;       /* resourceVersion=0 on the first list (the watch cache) */
        uint64_t backoff_base_usec; /* 0 = 1 s */
        uint64_t backoff_cap_usec;  /* 0 = 30 s */
        /* Namespaced kinds only (pods, claims, leases): list and watch this one
         * namespace (.../namespaces/NS/leases) instead of all; NULL = all.
         * informer_new() fails with -EINVAL for cluster-scoped kinds. */
        const char *namespace;
        /* List once (paginated), report on_synced, and never watch: a snapshot. A failed
         * list is reported (on_error) and not retried. */
        bool once;
        /* With once: read this one object with a GET of its name (a 404 is an empty
         * cache) rather than a list; the selectors do not apply. informer_new() fails
         * with -EINVAL for a name without once. */
        const char *name;
        /* The group/version path to list and watch, e.g. "/apis/resource.k8s.io/v1beta2";
         * NULL: the kind's own (resource.k8s.io/v1 for claims and slices). The records
         * are built from the v1 shape. */
        const char *api_prefix;
        /* Or the group/versions the kind may be served at, best first, NULL-terminated
         * (at most INFORMER_MAX_PREFIXES; api_prefix is then ignored): this is the
         * discovery of what the server serves, by the list itself. A list answered
         * 404 (the collection is not served at that version: a collection list is
         * never 404 otherwise) tries the next one at once, round the list as
         * k8s.io/dynamic-resource-allocation/client does; when none serves it, the
         * informer is "not served": its cache is empty, on_synced runs (the
         * records' absence is the truth), no error is reported, and it looks again
         * every not_served_recheck_usec (a once informer does not). A watch answered
         * 404 (the version went away mid-run) relists, which discovers again. */
        const char *const *api_prefixes;
        uint64_t not_served_recheck_usec; /* 0 = 60 s */
};

#define INFORMER_MAX_PREFIXES 4

struct informer_stats {
        uint64_t lists;   /* list calls started (relists included) */
        uint64_t watches; /* watch calls started */
        uint64_t relists_410;
        uint64_t errors;
        uint64_t events;
};

int informer_new(struct kube_client *client, struct timesrc *ts, const struct informer_options *opts,
                 const struct informer_handlers *h, void *userdata, struct informer **ret);
int informer_start(struct informer *inf);
/* Cancels list/watch and timers; the informer can be freed once informer_idle() is true
 * (after the loop ran the cancelled calls' callbacks). */
void informer_stop(struct informer *inf);
bool informer_idle(const struct informer *inf);
void informer_free(struct informer *inf);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct informer *, informer_free);

bool informer_synced(const struct informer *inf);
/* Whether it watches (started, not stopped, not a once informer that is done). */
bool informer_running(const struct informer *inf);
/* Hands the informer's events to other handlers from the next one on (an owner passing
 * a running informer on, e.g. the cluster view keeping a node's watches for the next
 * run of that node). Also from inside one of its callbacks. */
void informer_set_handlers(struct informer *inf, const struct informer_handlers *h, void *userdata);
/* The group/version prefix it lists and watches (one of api_prefixes, or the kind's),
 * or NULL while it is "not served" (every api_prefixes answered 404). */
const char *informer_api_prefix(const struct informer *inf);
const char *informer_resource_version(const struct informer *inf);
size_t informer_size(const struct informer *inf);
const void *informer_get(const struct informer *inf, const char *key);
/* Start with *i = 0. The cache must not change during the iteration. */
bool informer_iterate(const struct informer *inf, size_t *i, const void **ret_rec);
/* A malloc'd array of the cached records (borrowed: valid until the cache changes),
 * for code that wants them all at once, e.g. plan_build(). -ENOMEM on failure. */
int informer_collect(const struct informer *inf, const void ***ret, size_t *ret_n);
void informer_get_stats(const struct informer *inf, struct informer_stats *ret);
/* Bytes held by the cached records. */
size_t informer_cache_bytes(const struct informer *inf);
