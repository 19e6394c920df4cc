/* The evictor: one record per pod it was asked to evict (keyed by uid), the
 * request in flight, the answer, the backoff before a retry. Owns its records,
 * calls and retry timer; decides nothing about which pods go when (the engine
 * asks per group) and never sends a grace period of 0 for a claim holder. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "drainer/base/backoff.h"
#include "drainer/base/hashmap.h"
#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "drainer/base/timesrc.h"
#include "drainer/drain/evictor.h"
#include "drainer/kube/client.h"
#include "drainer/kube/kstatus.h"
#include "drainer/obs/metrics.h"

#define MAX_EVICTIONS 100000

/* kubectl's EvictErrorRetryDelay: how often an eviction refused because the pod's
 * namespace is being deleted goes out again (pkg/drain/drain.go evictPods). */
#define NS_TERMINATING_RETRY_USEC (5 * USEC_PER_SEC)

enum evict_state {
        EV_IN_FLIGHT,
        EV_ACCEPTED,
        EV_RETRY,
};

struct eviction {
        struct evictor *v;
        char *uid, *ns, *name;
        char *pdbs; /* "ns/a, ns/b": the budgets covering the pod when it was sent, for messages */
        enum evict_state state;
        unsigned attempts;
        uint64_t retry_at;
        char *reason;        /* why it is held (429 message) */
        bool pdb;            /* the last answer was 429: a PodDisruptionBudget */
        bool ns_terminating; /* answered 403 NamespaceTerminating (this run, at least once) */
        struct kube_call *call;
};

struct evictor {
        struct kube_client *client; /* borrowed */
        struct timesrc *ts;         /* borrowed */
        struct evictor_options o;
        struct evictor_callbacks cb;
        void *userdata;
        struct hashmap *evictions; /* uid -> struct eviction, owned */
        struct dtimer due;
        struct backoff retry; /* the base, the cap and the jitter's generator */
        bool warned_grace, warned_driver_grace;
        struct evictor_stats stats;
};

static void eviction_free(void *p) {
        struct eviction *ev = p;

        if (!ev)
                return;
        free(ev->uid);
        free(ev->ns);
        free(ev->name);
        free(ev->pdbs);
        free(ev->reason);
        free(ev);
}

/* Arms the retry timer for the earliest of its current due time and at. */
static void due_at(struct evictor *v, uint64_t at) {
        uint64_t now = timesrc_now(v->ts);

        if (v->due.armed && v->due.due <= at)
                return;
        dtimer_start(&v->due, at > now ? at - now : 0);
}

static void on_due(struct dtimer *t) {
        struct evictor *v = container_of(t, struct evictor, due);

        if (v->cb.on_due)
                v->cb.on_due(v, v->userdata);
}

/* 1, 2, 4 ... s up to the cap, each jittered to between half and all of it (the
 * eviction keeps its own count: one backoff, many evictions). */
static uint64_t backoff(struct evictor *v, const struct eviction *ev) {
        return backoff_delay(&v->retry, MAX(ev->attempts, 1u));
}

/* Counts one answer (to an eviction, or to its DELETE with --disable-eviction). */
static void count_answer(const struct kube_result *res) {
        const char *r = res->error == 0         ? "accepted"
                        : res->error == -ENOENT ? "gone"
                        : res->status == 429    ? "pdb_blocked"
                                                : "error";

        metrics_add(metrics_family(DRAINER_METRIC_EVICTIONS), METRIC_LABELS(r), 1);
}

static void answer(struct evictor *v, struct eviction *ev, int error, bool gone) {
        struct evictor_answer a = {
                .ns = ev->ns, .name = ev->name, .error = error, .gone = gone, .reason = ev->reason
        };

        if (v->cb.on_answer)
                v->cb.on_answer(v, &a, v->userdata);
}

static void on_evicted(const struct kube_result *res, void *userdata) {
        struct eviction *ev = userdata;
        struct evictor *v = ev->v;

        ev->call = NULL;
        if (res->error == -ECANCELED) {
                if (v->cb.on_idle && evictor_idle(v))
                        v->cb.on_idle(v, v->userdata);
                return;
        }
        count_answer(res);
        ev->pdb = res->status == 429;
        free(ev->reason);
        ev->reason = NULL;
        if (res->error == 0 || res->error == -ENOENT) {
                /* Accepted (or the pod is already gone): it terminates on its own now. */
                ev->state = EV_ACCEPTED;
                v->stats.accepted++;
                log_debug("evicted %s/%s", ev->ns, ev->name);
                return answer(v, ev, 0, res->error == -ENOENT);
        }
        if (res->error == -EACCES && kube_status_has_cause(res->status_body, "NamespaceTerminating")) {
                /* The namespace is being deleted: no eviction can be created in it, and
                 * the namespace controller deletes the pod soon. kubectl retries until
                 * the pod is marked deleted, then waits for it; so do we (evictor_evict
                 * stops once the pod is deleting). Not a failure. */
                v->stats.retried++;
                ev->ns_terminating = true;
                ev->state = EV_RETRY;
                if (asprintf(&ev->reason,
                             "namespace %s is being deleted: waiting for the namespace controller to delete "
                             "the pod (the eviction is retried every %u s)",
                             ev->ns, (unsigned)(NS_TERMINATING_RETRY_USEC / USEC_PER_SEC)) < 0)
                        ev->reason = NULL;
                ev->retry_at = timesrc_now(v->ts) + NS_TERMINATING_RETRY_USEC;
                log_debug("eviction of %s/%s: %s", ev->ns, ev->name, strna(ev->reason));
                due_at(v, ev->retry_at);
                return answer(v, ev, -EAGAIN, false);
        }
        if (res->error == -EACCES) {
                ev->state = EV_RETRY;
                ev->retry_at = UINT64_MAX; /* never: the caller gives up */
                ev->reason = strdup(strna(res->message));
                return answer(v, ev, res->error, false);
        }
        /* 429: a PodDisruptionBudget says not now (its message names it). Other errors: retry. */
        v->stats.retried++;
        ev->state = EV_RETRY;
        if (res->error == -EAGAIN && ev->pdbs) {
                if (asprintf(&ev->reason, "PodDisruptionBudget %s: %s", ev->pdbs,
                             res->message ? res->message : "disruption not allowed now") < 0)
                        ev->reason = NULL;
        } else
                ev->reason = strdup(res->message ? res->message : strerror(-res->error));
        ev->retry_at = timesrc_now(v->ts) + (res->retry_after_usec > 0
                                                     ? MIN(res->retry_after_usec, v->o.backoff_cap_usec)
                                                     : backoff(v, ev));
        log_debug("eviction of %s/%s held: %s", ev->ns, ev->name, strna(ev->reason));
        due_at(v, ev->retry_at);
        answer(v, ev, res->error, false);
}

/* Grace period for a pod: the option, but never 0 for a claim holder. Force
 * deletion skips the kubelet's unprepare and lets a device be allocated twice
 * (kubernetes/kubernetes#141471). Nor for a DRA driver pod: force-deleted, its object
 * is gone while the kubelet still runs the plugin, so "the driver is stopped" would
 * be read too early, and a restore would start the next plugin beside it (without
 * seamless upgrade the old one's deregistration then removes the new one's
 * registration socket: seen on real kubelets); it gets its own grace period. */
static int64_t grace_for(struct evictor *v, const struct plan_pod *pp) {
        int64_t g = v->o.grace_seconds;

        if (g == 0 && pp->cls == POD_CLASS_DRIVER) {
                if (!v->warned_driver_grace) {
                        v->warned_driver_grace = true;
                        log_warning("--grace-period=0 would force-delete the DRA driver pods while their "
                                    "plugins still run; using their own grace period");
                }
                return -1;
        }

        if (g == 0 && pp->cls == POD_CLASS_CLAIM_HOLDER) {
                if (!v->warned_grace) {
                        v->warned_grace = true;
                        log_warning("--grace-period=0 would force-delete pods that hold ResourceClaims; "
                                    "using 1 s for them so their devices are unprepared");
                }
                return 1;
        }
        return g;
}

/* "ns/a, ns/b": the budgets covering pp, or NULL. */
static char *pdb_names(const struct plan_pod *pp) {
        char buf[512];
        size_t len = 0;

        if (pp->n_pdbs == 0)
                return NULL;
        buf[0] = 0;
        for (size_t j = 0; j < pp->n_pdbs && len < sizeof(buf); j++)
                len += snprintf(buf + len, sizeof(buf) - len, "%s%s/%s", j ? ", " : "", pp->pdbs[j]->ns,
                                pp->pdbs[j]->name);
        return strdup(buf);
}

static struct eviction *eviction_get(struct evictor *v, const struct pod_rec *p) {
        struct eviction *ev = hashmap_get(v->evictions, p->uid);

        if (ev)
                return ev;
        ev = calloc(1, sizeof(*ev));
        if (!ev)
                return NULL;
        ev->v = v;
        ev->uid = strdup(p->uid);
        ev->ns = strdup(p->ns);
        ev->name = strdup(p->name);
        if (!ev->uid || !ev->ns || !ev->name || hashmap_put(v->evictions, ev->uid, ev, NULL) < 0) {
                eviction_free(ev);
                return NULL;
        }
        return ev;
}

/* A plain DELETE, still with a grace period (never 0 for claim holders) and the uid as
 * precondition, so a replacement pod of the same name is not hit. */
static int send_delete(struct evictor *v, struct eviction *ev, const struct pod_rec *p, int64_t grace) {
        _cleanup_(cJSON_Deletep) cJSON *opts = cJSON_CreateObject();
        _cleanup_free_ char *path = NULL, *body = NULL;

        if (!opts)
                return -ENOMEM;
        cJSON_AddStringToObject(opts, "kind", "DeleteOptions");
        cJSON_AddStringToObject(opts, "apiVersion", "v1");
        if (grace >= 0)
                cJSON_AddNumberToObject(opts, "gracePeriodSeconds", (double)grace);
        cJSON_AddStringToObject(cJSON_AddObjectToObject(opts, "preconditions"), "uid", p->uid);
        body = cJSON_PrintUnformatted(opts);
        if (!body || asprintf(&path, "/api/v1/namespaces/%s/pods/%s", p->ns, p->name) < 0)
                return -ENOMEM;
        return kube_delete(v->client, path, body, on_evicted, ev, &ev->call);
}

static int submit(struct evictor *v, const struct plan_pod *pp) {
        const struct pod_rec *p = pp->pod;
        struct eviction *ev = eviction_get(v, p);
        int64_t grace = grace_for(v, pp);
        int r;

        if (!ev)
                return -ENOMEM;
        free(ev->pdbs);
        ev->pdbs = pdb_names(pp);
        ev->state = EV_IN_FLIGHT;
        ev->attempts++;
        v->stats.submitted++;
        if (v->o.disable_eviction)
                r = send_delete(v, ev, p, grace);
        else
                r = kube_evict(v->client, p->ns, p->name, grace, false, on_evicted, ev, &ev->call);
        if (r < 0)
                ev->state = EV_RETRY;
        return r;
}

/* PodDisruptionBudgets with an eviction in flight. */
#define MAX_BUSY_PDBS 64

struct busy_pdbs {
        const struct pdb_rec *pdb[MAX_BUSY_PDBS];
        size_t n;
};

static void busy_pdbs_add(struct busy_pdbs *b, const struct plan_pod *pp) {
        for (size_t j = 0; j < pp->n_pdbs && b->n < MAX_BUSY_PDBS; j++)
                b->pdb[b->n++] = pp->pdbs[j];
}

static bool busy_pdbs_hit(const struct busy_pdbs *b, const struct plan_pod *pp) {
        if (pp->n_pdbs > 0 && b->n == MAX_BUSY_PDBS)
                return true; /* cannot tell: wait for an answer */
        for (size_t j = 0; j < pp->n_pdbs; j++)
                for (size_t k = 0; k < b->n; k++)
                        if (b->pdb[k] == pp->pdbs[j])
                                return true;
        return false;
}

/* The budgets of every pod of the plan, whatever its group, with an eviction in flight. */
static void busy_pdbs_collect(struct evictor *v, const struct plan *p, struct busy_pdbs *b) {
        b->n = 0;
        if (v->o.disable_eviction)
                return; /* plain DELETEs: no budget involved */
        for (size_t i = 0; i < p->n_pods; i++) {
                const struct plan_pod *pp = &p->pods[i];
                const struct eviction *ev;

                if (pp->n_pdbs == 0)
                        continue;
                ev = hashmap_get(v->evictions, pp->pod->uid);
                if (ev && ev->state == EV_IN_FLIGHT)
                        busy_pdbs_add(b, pp);
        }
}

bool evictor_evict(struct evictor *v, const struct plan *p, enum evict_group g) {
        uint64_t now = timesrc_now(v->ts);
        struct busy_pdbs busy;
        bool all = true;

        busy_pdbs_collect(v, p, &busy);
        for (size_t i = 0; i < p->n_pods; i++) {
                const struct plan_pod *pp = &p->pods[i];
                struct eviction *ev;

                if (pp->group != g)
                        continue;
                ev = hashmap_get(v->evictions, pp->pod->uid);
                if (pp->pod->deleting) {
                        /* The watch can show the deletion before our eviction's answer
                         * arrives; the group counts as accepted once every answer is in,
                         * so a later group never overlaps an earlier one's requests. */
                        if (ev && ev->state == EV_IN_FLIGHT)
                                all = false;
                        else if (ev && ev->state == EV_RETRY && ev->retry_at != UINT64_MAX)
                                /* Deleted by someone else (the namespace controller, for a
                                 * namespace being deleted): nothing more to send; the engine
                                 * waits for it like any evicted pod. */
                                ev->state = EV_ACCEPTED;
                        continue;
                }
                if (ev && ev->state == EV_ACCEPTED)
                        continue; /* the cache has not shown the deletionTimestamp yet */
                all = false;
                if (ev && ev->state == EV_IN_FLIGHT)
                        continue;
                if (ev && ev->state == EV_RETRY && ev->retry_at > now) {
                        due_at(v, ev->retry_at);
                        continue;
                }
                if (busy_pdbs_hit(&busy, pp))
                        continue; /* its budget's eviction in flight: its answer comes first */
                if (submit(v, pp) < 0)
                        due_at(v, now + v->o.backoff_base_usec);
                else if (!v->o.disable_eviction)
                        busy_pdbs_add(&busy, pp);
        }
        return all;
}

size_t evictor_held(const struct evictor *v, struct evictor_held *ret, size_t max) {
        const char *key;
        void *val;
        size_t i = 0, n = 0;

        while (n < max && hashmap_iterate(v->evictions, &i, &key, &val)) {
                const struct eviction *ev = val;

                /* (a retry in flight is still held: the last answer's reason stands) */
                if ((ev->state == EV_RETRY || ev->state == EV_IN_FLIGHT) && ev->reason)
                        ret[n++] = (struct evictor_held){ ev->ns, ev->name, ev->reason, ev->ns_terminating };
        }
        return n;
}

size_t evictor_ns_terminating(const struct evictor *v, struct evictor_held *ret, size_t max) {
        const char *key;
        void *val;
        size_t i = 0, n = 0;

        while (n < max && hashmap_iterate(v->evictions, &i, &key, &val)) {
                const struct eviction *ev = val;

                if (ev->ns_terminating)
                        ret[n++] = (struct evictor_held){ ev->ns, ev->name, ev->reason, true };
        }
        return n;
}

void evictor_get_stats(const struct evictor *v, struct evictor_stats *ret) {
        const char *key;
        void *val;
        size_t i = 0;

        *ret = v->stats;
        ret->held_by_pdb = 0;
        while (hashmap_iterate(v->evictions, &i, &key, &val))
                ret->held_by_pdb +=
                        ((struct eviction *)val)->state == EV_RETRY && ((struct eviction *)val)->pdb;
}

int evictor_new(struct kube_client *client, struct timesrc *ts, const struct evictor_options *o,
                const struct evictor_callbacks *cb, void *userdata, struct evictor **ret) {
        struct evictor *v = calloc(1, sizeof(*v));
        int r;

        if (!v)
                return -ENOMEM;
        v->client = client;
        v->ts = ts;
        if (o)
                v->o = *o;
        if (!v->o.backoff_base_usec)
                v->o.backoff_base_usec = 1 * USEC_PER_SEC;
        if (!v->o.backoff_cap_usec)
                v->o.backoff_cap_usec = 20 * USEC_PER_SEC;
        backoff_init(&v->retry, v->o.backoff_base_usec, MAX(v->o.backoff_cap_usec, v->o.backoff_base_usec),
                     true, v->o.random_seed ? v->o.random_seed : backoff_seed(ts, (uintptr_t)v));
        if (cb)
                v->cb = *cb;
        v->userdata = userdata;
        v->evictions = hashmap_new(MAX_EVICTIONS);
        if (!v->evictions) {
                free(v);
                return -ENOMEM;
        }
        r = dtimer_init(&v->due, ts, on_due);
        if (r < 0) {
                hashmap_free(v->evictions, NULL);
                free(v);
                return r;
        }
        *ret = v;
        return 0;
}

void evictor_cancel(struct evictor *v) {
        const char *key;
        void *val;
        size_t i = 0;

        dtimer_stop(&v->due);
        while (hashmap_iterate(v->evictions, &i, &key, &val))
                if (((struct eviction *)val)->call)
                        kube_call_cancel(((struct eviction *)val)->call);
}

bool evictor_idle(const struct evictor *v) {
        const char *key;
        void *val;
        size_t i = 0;

        while (hashmap_iterate(v->evictions, &i, &key, &val))
                if (((struct eviction *)val)->call)
                        return false;
        return true;
}

void evictor_free(struct evictor *v) {
        if (!v)
                return;
        dtimer_done(&v->due);
        hashmap_free(v->evictions, eviction_free);
        free(v);
}
