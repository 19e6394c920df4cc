/* The slot Leases as drainer writes and reads them: their names, their JSON (a
 * MicroTime's six digits, the holder annotation, the field manager the per-node
 * admission policy reads), their expiry by observation on this process's clock, and
 * the lease informer (one, running only while a node of this process wants or holds
 * a slot). Nothing a Lease says reaches an assert: a bad one is skipped or refused. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "slots-int.h"

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

const struct lease_rec *slots_cached(struct slots *s, int i) {
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
        if (text_replace(&v->seen_rv, rec->resource_version) < 0)
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
uint64_t slots_lease_expiry(struct slots *s, int i, const struct lease_rec *rec) {
        struct slot_view *v = &s->views[i];

        if (!rec->renew_time_usec && !rec->acquire_time_usec)
                return 0;
        observe(s, i, rec);
        if (!streq_ptr(v->seen_rv, rec->resource_version))
                return timesrc_now(s->ts) + lease_duration(s, rec);
        return v->seen_at + lease_duration(s, rec);
}

bool slots_lease_expired(struct slots *s, int i, const struct lease_rec *rec, uint64_t now) {
        return slots_lease_expiry(s, i, rec) < now;
}

void slots_watch_free(struct lease_watch *w) {
        if (!w)
                return;
        informer_free(w->inf);
        free(w);
}

void slots_watch_retire(struct slots *s) {
        struct lease_watch *w = s->watch;

        if (!w)
                return;
        log_debug("slots: nothing wanted, stopping the lease watch in \"%s\"", s->ns);
        s->watch = NULL;
        informer_stop(w->inf);
        w->next = s->retired;
        s->retired = w;
}

void slots_reap_retired(struct slots *s) {
        struct lease_watch **p = &s->retired;

        while (*p) {
                struct lease_watch *w = *p;

                if (informer_idle(w->inf)) {
                        *p = w->next;
                        slots_watch_free(w);
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
                n = slots_holder_of(s, i);
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
        slots_notify_later(s, NOTIFY_CHANGED | NOTIFY_REEVAL);
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
                rec = slots_cached(s, n->slot);
                if (!rec || !streq_ptr(rec->holder, n->name)) {
                        if (n->call)
                                n->verify = true;
                        else
                                dtimer_start(&n->renew_timer, 0);
                }
        }
        slots_notify_later(s, NOTIFY_CHANGED | NOTIFY_REEVAL);
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
                slots_notify_later(s, NOTIFY_CHANGED);
        }
}

/* A stopped watch's last call ended: the slots may be idle now. */
static void on_lease_stopped(struct informer *inf, void *userdata) {
        struct lease_watch *w = userdata;

        slots_tell_quiet(w->s);
}

static const struct informer_handlers lease_handlers = {
        .on_add = on_lease_add,
        .on_update = on_lease_update,
        .on_delete = on_lease_delete,
        .on_synced = on_lease_synced,
        .on_error = on_lease_error,
        .on_stopped = on_lease_stopped,
};

int slots_watch_start(struct slots *s) {
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
                slots_watch_free(w);
                return r;
        }
        log_debug("slots: watching leases in \"%s\"", s->ns);
        s->watch = w;
        return 0;
}

char *slots_lease_path(struct slots *s, int i) {
        char *p;

        return asprintf(&p, "%s/" SLOT_PREFIX "%d" WRITE_QUERY, s->leases_path, i) < 0 ? NULL : p;
}

/* The whole Lease, as POST and PUT want it. holder NULL releases it. */
char *slots_lease_body(struct slots *s, int i, const char *rv, const char *holder, int64_t acquire,
                       int64_t renew, int64_t transitions) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        char name[64], ta[48], tr[48];
        cJSON *meta, *spec, *labels, *ann;
        bool ok;

        if (!o)
                return NULL;
        snprintf(name, sizeof(name), SLOT_PREFIX "%d", i);
        if ((acquire && timesrc_format_micro(acquire, ta, sizeof(ta)) < 0) ||
            timesrc_format_micro(renew, tr, sizeof(tr)) < 0)
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

int slots_lease_parse(const struct kube_result *res, struct lease_rec **ret) {
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