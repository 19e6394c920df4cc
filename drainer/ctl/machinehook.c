/* The Cluster API pre-drain hook owner (machinehook.h). Owns the Machine watch, one
 * record per held Machine (deleting, with drainer's hook), its hook removal and its
 * Event posts. Asks for drains only through the Nodes' ops (the drain manager), never
 * drains itself; removes nothing but its own hook annotation, tested in the patch.
 * Level-triggered: every Machine or Node change schedules one look at every Machine. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "drainer/base/hashmap.h"
#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "drainer/base/text.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/machinehook.h"
#include "drainer/ctl/manager.h"
#include "drainer/drain/state.h"
#include "drainer/kube/client.h"
#include "drainer/kube/events.h"
#include "drainer/kube/informer.h"
#include "drainer/kube/objects.h"

#define MAX_MACHINES      100000
#define RETRY_USEC        (5 * USEC_PER_SEC) /* a hook removal or drain request that failed */
#define MACHINES_API      "/apis/cluster.x-k8s.io/v1beta2"
/* JSON Pointer (RFC 6901) of the hook: "/" in the key is "~1". */
#define HOOK_JSON_POINTER "/metadata/annotations/pre-drain.delete.hook.machine.cluster.x-k8s.io~1drainer"

/* One Machine whose deletion waits for drainer's hook. */
struct held {
        struct machine_hook *hook;
        char *key; /* "ns/name" */
        char *ns, *name, *uid;
        char *node;         /* status.nodeRef.name when first seen with it */
        char *last_message; /* the Node's drainer.io/message last told on the Machine */
        bool asked;         /* the drain request was written (or found) */
        /* The manager reported this node's drain done (DONE, goal drain) while the Machine
         * was held: what the engine observed (no claim, drivers stopped), not what the
         * Node's annotations say, which anyone who may patch the Node can write. */
        bool drain_seen;
        bool rerun_asked; /* a "drained" this process did not see: the drain asked to run again */
        bool noted_no_node, noted_unknown_node, noted_bad_state;
        bool removed;      /* the hook's removal succeeded: nothing more to do */
        bool gone;         /* no longer held: freed once its calls ended */
        uint64_t retry_at; /* monotonic µs: no removal attempt before */
        struct kube_call *remove_call;
        struct kube_call *event_call;
        /* One Event waits while another is in flight (the newest replaces it). */
        char *pending_type, *pending_reason, *pending_message;
};

struct machine_hook {
        struct kube_client *client; /* borrowed */
        struct timesrc *ts;         /* borrowed */
        const struct machine_hook_nodes_ops *ops;
        void *nodes; /* borrowed */
        const struct machine_hook_handlers *h;
        void *userdata;
        char *namespace, *identity;
        struct informer *machines; /* owned */
        struct hashmap *held;      /* "ns/name" -> struct held */
        struct dtimer reconcile_timer, stop_timer;
        bool timers_ready, started, stopping, stopped, failed;
};

static void note(struct machine_hook *mh, enum log_level level, int error, const char *fmt, ...)
        _printf_(4, 5);

static void note(struct machine_hook *mh, enum log_level level, int error, const char *fmt, ...) {
        _cleanup_free_ char *line = NULL;
        va_list ap;
        int r;

        if (!mh->h || !mh->h->on_note)
                return;
        va_start(ap, fmt);
        r = vasprintf(&line, fmt, ap);
        va_end(ap);
        if (r >= 0)
                mh->h->on_note(mh, level, error, line, mh->userdata);
}

static void schedule(struct machine_hook *mh, uint64_t delay) {
        if (mh->stopping)
                return;
        if (!mh->reconcile_timer.armed || mh->reconcile_timer.due > timesrc_now(mh->ts) + delay)
                dtimer_start(&mh->reconcile_timer, delay);
}

static void stop_check_soon(struct machine_hook *mh) {
        if (mh->stopping && !mh->stopped && !mh->stop_timer.armed)
                dtimer_start(&mh->stop_timer, 0);
}

static void held_free(void *p) {
        struct held *hd = p;

        if (!hd)
                return;
        free(hd->key);
        free(hd->ns);
        free(hd->name);
        free(hd->uid);
        free(hd->node);
        free(hd->last_message);
        free(hd->pending_type);
        free(hd->pending_reason);
        free(hd->pending_message);
        free(hd);
}

static bool held_busy(const struct held *hd) {
        return hd->remove_call || hd->event_call;
}

/* A held record whose Machine went (or whose hook went): freed once nothing of it is in flight. */
static void held_drop_if_done(struct held *hd) {
        if (hd->gone && !held_busy(hd))
                held_free(hashmap_remove(hd->hook->held, hd->key));
}

/* ---- Events on the Machine ---- */

static int post_event(struct held *hd, const char *type, const char *reason, const char *message);

static void on_event_posted(const struct kube_result *res, void *userdata) {
        struct held *hd = userdata;
        struct machine_hook *mh = hd->hook;

        hd->event_call = NULL;
        if (res->error < 0 && res->error != -ECANCELED)
                note(mh, LOG_LEVEL_WARNING, res->error, "Machine %s: posting an Event failed: %s, ignoring",
                     hd->key, res->message ? res->message : strerror(-res->error));
        if (hd->pending_reason && !mh->stopping) {
                _cleanup_free_ char *t = TAKE_PTR(hd->pending_type), *r = TAKE_PTR(hd->pending_reason),
                                    *m = TAKE_PTR(hd->pending_message);

                (void)post_event(hd, t, r, m);
        }
        held_drop_if_done(hd);
        stop_check_soon(mh);
}

static int post_event(struct held *hd, const char *type, const char *reason, const char *message) {
        struct machine_hook *mh = hd->hook;
        _cleanup_free_ char *json = NULL, *path = NULL;
        int r;

        if (mh->stopping)
                return -ESHUTDOWN;
        if (hd->event_call) {
                free(hd->pending_type);
                free(hd->pending_reason);
                free(hd->pending_message);
                hd->pending_type = strdup(type);
                hd->pending_reason = strdup(reason);
                hd->pending_message = message ? strdup(message) : NULL;
                return 0;
        }
        r = event_build_object(&(const struct event_object){ .api_version = "cluster.x-k8s.io/v1beta2",
                                                             .kind = "Machine",
                                                             .ns = hd->ns,
                                                             .name = hd->name,
                                                             .uid = hd->uid },
                               type, reason, message, timesrc_realtime(mh->ts), mh->identity, &json, &path);
        if (r < 0)
                return r;
        return kube_create(mh->client, path, json, on_event_posted, hd, &hd->event_call);
}

/* ---- the hook's removal ---- */

static void on_hook_removed(const struct kube_result *res, void *userdata) {
        struct held *hd = userdata;
        struct machine_hook *mh = hd->hook;

        hd->remove_call = NULL;
        if (res->error >= 0) {
                hd->removed = true;
                note(mh, LOG_LEVEL_INFO, 0,
                     "Machine %s: node %s is drained (no claim left, drivers stopped): pre-drain hook "
                     "removed",
                     hd->key, strna(hd->node));
                (void)post_event(
                        hd, EVENT_TYPE_NORMAL, MACHINE_HOOK_REASON_REMOVED,
                        "node drained by drainer (no ResourceClaim left on it, DRA drivers stopped): "
                        "pre-drain hook removed");
        } else if (res->error != -ECANCELED) {
                /* 422: a test failed (the hook's value or the Machine changed), 404: gone. The
                 * watch brings the Machine as it is now; other errors are tried again. */
                note(mh, LOG_LEVEL_WARNING, res->error,
                     "Machine %s: removing the pre-drain hook failed: %s, retrying", hd->key,
                     res->message ? res->message : strerror(-res->error));
                hd->retry_at = timesrc_now(mh->ts) + RETRY_USEC;
                schedule(mh, RETRY_USEC);
        }
        held_drop_if_done(hd);
        stop_check_soon(mh);
}

/* A JSON patch that tests the Machine's uid and the hook's value before it removes the
 * hook: it removes drainer's own annotation of this very Machine, or nothing. */
static int remove_hook(struct held *hd, const struct machine_rec *m) {
        struct machine_hook *mh = hd->hook;
        _cleanup_(cJSON_Deletep) cJSON *ops = cJSON_CreateArray();
        _cleanup_free_ char *body = NULL, *path = NULL;
        cJSON *op;

        if (!ops)
                return -ENOMEM;
        if (m->uid) {
                op = cJSON_CreateObject();
                if (!op || !cJSON_AddItemToArray(ops, op) || !cJSON_AddStringToObject(op, "op", "test") ||
                    !cJSON_AddStringToObject(op, "path", "/metadata/uid") ||
                    !cJSON_AddStringToObject(op, "value", m->uid))
                        return -ENOMEM;
        }
        op = cJSON_CreateObject();
        if (!op || !cJSON_AddItemToArray(ops, op) || !cJSON_AddStringToObject(op, "op", "test") ||
            !cJSON_AddStringToObject(op, "path", HOOK_JSON_POINTER) ||
            !cJSON_AddStringToObject(op, "value", strempty(m->hook_value)))
                return -ENOMEM;
        op = cJSON_CreateObject();
        if (!op || !cJSON_AddItemToArray(ops, op) || !cJSON_AddStringToObject(op, "op", "remove") ||
            !cJSON_AddStringToObject(op, "path", HOOK_JSON_POINTER))
                return -ENOMEM;
        body = cJSON_PrintUnformatted(ops);
        if (!body || asprintf(&path, MACHINES_API "/namespaces/%s/machines/%s", m->ns, m->name) < 0)
                return -ENOMEM;
        return kube_patch(mh->client, path, KUBE_PATCH_JSON, body, on_hook_removed, hd, &hd->remove_call);
}

/* ---- the drain request ---- */

/* {"metadata":{"annotations":{"drainer.io/request":"drain","drainer.io/cluster-api-machine":"ns/name"}}} */
static char *request_patch(const char *machine) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        _cleanup_free_ char *by = text_printf("Cluster API: Machine %s is being deleted", machine);
        cJSON *ann;

        ann = o && by ? cJSON_AddObjectToObject(cJSON_AddObjectToObject(o, "metadata"), "annotations")
                      : NULL;
        if (!ann || !cJSON_AddStringToObject(ann, DRAINER_ANN_REQUEST, "drain") ||
            !cJSON_AddStringToObject(ann, DRAINER_ANN_REQUESTED_BY, by) ||
            !cJSON_AddStringToObject(ann, DRAINER_ANN_CLUSTER_API_MACHINE, machine))
                return NULL;
        return cJSON_PrintUnformatted(o);
}

static struct held *held_get(struct machine_hook *mh, const struct machine_rec *m, const char *key) {
        struct held *hd = hashmap_get(mh->held, key);

        if (hd)
                return hd;
        hd = calloc(1, sizeof(*hd));
        if (!hd)
                return NULL;
        hd->hook = mh;
        hd->key = strdup(key);
        hd->ns = strdup(m->ns);
        hd->name = strdup(m->name);
        hd->uid = m->uid ? strdup(m->uid) : NULL;
        if (!hd->key || !hd->ns || !hd->name || (m->uid && !hd->uid) ||
            hashmap_put(mh->held, key, hd, NULL) < 0) {
                held_free(hd);
                return NULL;
        }
        return hd;
}

/* One held Machine: ask for its Node's drain, tell how it goes, remove the hook once drained. */
static void reconcile_machine(struct machine_hook *mh, struct held *hd, const struct machine_rec *m) {
        _cleanup_(drain_state_done) struct drain_state st = {};
        _cleanup_free_ char *err = NULL, *msg = NULL;
        const struct node_rec *n;
        uint64_t now = timesrc_now(mh->ts);
        int r;

        if (hd->removed || hd->remove_call)
                return;
        if (!m->node_name) {
                /* Cluster API itself skips the pre-drain hooks of a Machine without a Node. */
                if (!hd->noted_no_node) {
                        hd->noted_no_node = true;
                        note(mh, LOG_LEVEL_WARNING, 0,
                             "Machine %s has no status.nodeRef: no node to drain, its pre-drain hook is "
                             "left as it is",
                             hd->key);
                        (void)post_event(
                                hd, EVENT_TYPE_WARNING, MACHINE_HOOK_REASON_NO_NODE,
                                "the Machine has no status.nodeRef: drainer has no node to drain and leaves "
                                "its pre-drain hook as it is");
                }
                return;
        }
        if (!hd->node || !streq(hd->node, m->node_name)) {
                free(hd->node);
                hd->node = strdup(m->node_name);
                hd->asked = hd->drain_seen = hd->rerun_asked = false;
        }
        n = mh->ops->node(mh->nodes, m->node_name);
        if (!n) {
                if (!hd->noted_unknown_node) {
                        hd->noted_unknown_node = true;
                        if (asprintf(&msg, "node %s (status.nodeRef) is not found: the pre-drain hook stays",
                                     m->node_name) >= 0) {
                                note(mh, LOG_LEVEL_WARNING, 0, "Machine %s: %s", hd->key, msg);
                                (void)post_event(hd, EVENT_TYPE_WARNING, MACHINE_HOOK_REASON_BLOCKED, msg);
                        }
                }
                return;
        }
        hd->noted_unknown_node = false;
        if (drain_state_parse(n, &st, &err) < 0) {
                /* The manager reports it on the Node; the Machine says why its hook stays. */
                if (!hd->noted_bad_state) {
                        hd->noted_bad_state = true;
                        if (asprintf(&msg, "node %s: %s; the pre-drain hook stays", n->name,
                                     err ? err : "its drainer.io/ annotations cannot be read") >= 0)
                                (void)post_event(hd, EVENT_TYPE_WARNING, MACHINE_HOOK_REASON_BLOCKED, msg);
                }
                return;
        }
        hd->noted_bad_state = false;
        if (st.request == DRAIN_REQUEST_DRAIN && st.has_phase && st.phase == DRAIN_PHASE_DRAINED &&
            !hd->drain_seen) {
                /* Annotations are requests, never authority: a "drained" this process did not
                 * see the engine reach (written by hand, or by a drainer before a restart) is
                 * checked by running the drain again (its state removed, its request kept). */
                if (hd->rerun_asked)
                        return;
                r = mh->ops->patch(
                        mh->nodes, n->name,
                        strdup("{\"metadata\":{\"annotations\":{\"" DRAINER_ANN_STATE "\":null}}}"));
                if (r == -EBUSY)
                        return;
                if (r < 0) {
                        note(mh, LOG_LEVEL_WARNING, r,
                             "Machine %s: asking for the drain of node %s failed: %s, retrying", hd->key,
                             n->name, strerror(-r));
                        return schedule(mh, RETRY_USEC);
                }
                hd->rerun_asked = true;
                note(mh, LOG_LEVEL_INFO, 0,
                     "Machine %s: node %s says drained, but this drainer did not see that drain finish: "
                     "draining it "
                     "again to check before the pre-drain hook goes",
                     hd->key, n->name);
                return;
        }
        if (st.request == DRAIN_REQUEST_DRAIN && st.has_phase && st.phase == DRAIN_PHASE_DRAINED) {
                if (hd->retry_at > now)
                        return schedule(mh, hd->retry_at - now);
                r = remove_hook(hd, m);
                if (r < 0) {
                        note(mh, LOG_LEVEL_WARNING, r,
                             "Machine %s: cannot remove the pre-drain hook: %s, retrying", hd->key,
                             strerror(-r));
                        hd->retry_at = now + RETRY_USEC;
                        schedule(mh, RETRY_USEC);
                }
                return;
        }
        if (st.request != DRAIN_REQUEST_DRAIN) {
                r = mh->ops->patch(mh->nodes, n->name, request_patch(hd->key));
                if (r == -EBUSY)
                        return; /* the previous one's answer brings the Node again */
                if (r < 0) {
                        note(mh, LOG_LEVEL_WARNING, r,
                             "Machine %s: asking for the drain of node %s failed: %s, retrying", hd->key,
                             n->name, strerror(-r));
                        return schedule(mh, RETRY_USEC);
                }
                if (!hd->asked) {
                        note(mh, LOG_LEVEL_INFO, 0,
                             "Machine %s is being deleted: draining node %s before Cluster API does",
                             hd->key, n->name);
                        if (asprintf(&msg,
                                     "Machine deleted: drainer drains node %s (claim holders first, every "
                                     "claim "
                                     "released, DRA drivers last) and keeps the pre-drain hook until it is "
                                     "drained",
                                     n->name) >= 0)
                                (void)post_event(hd, EVENT_TYPE_NORMAL, MACHINE_HOOK_REASON_DRAIN, msg);
                }
                hd->asked = true;
                return;
        }
        hd->asked = true;
        /* Draining: the Node's message (written at most every few seconds) is told on the Machine. */
        if (st.message && (!hd->last_message || !streq(hd->last_message, st.message))) {
                free(hd->last_message);
                hd->last_message = strdup(st.message);
                if (asprintf(&msg, "node %s: %s: %s (the pre-drain hook stays until it is drained)", n->name,
                             st.has_phase ? drain_phase_to_string(st.phase) : "waiting", st.message) >= 0)
                        (void)post_event(hd, EVENT_TYPE_NORMAL, MACHINE_HOOK_REASON_WAITING, msg);
        }
}

static void reconcile_all(struct machine_hook *mh) {
        _cleanup_free_ char **stale = NULL;
        const void *rec;
        const char *key;
        void *v;
        size_t i = 0, n = 0;

        if (mh->stopping || !mh->machines || !informer_synced(mh->machines))
                return;
        while (informer_iterate(mh->machines, &i, &rec)) {
                const struct machine_rec *m = rec;
                _cleanup_free_ char *k = NULL;
                struct held *hd;

                if (!m->deleting || !m->has_hook)
                        continue;
                if (asprintf(&k, "%s/%s", m->ns, m->name) < 0 || !(hd = held_get(mh, m, k)))
                        continue; /* out of memory: the next change looks again */
                if (hd->uid && m->uid && !streq(hd->uid, m->uid))
                        continue; /* another Machine of that name: the old record goes first */
                hd->gone = false;
                reconcile_machine(mh, hd, m);
        }
        /* Held records of Machines gone or no longer held: collected, then dropped. */
        stale = calloc(hashmap_size(mh->held) + 1, sizeof(char *));
        if (!stale)
                return;
        i = 0;
        while (hashmap_iterate(mh->held, &i, &key, &v)) {
                struct held *hd = v;
                const struct machine_rec *m = informer_get(mh->machines, key);

                if (!m || !m->deleting || !m->has_hook || (hd->uid && m->uid && !streq(hd->uid, m->uid)))
                        stale[n++] = hd->key;
        }
        for (size_t j = 0; j < n; j++) {
                struct held *hd = hashmap_get(mh->held, stale[j]);

                hd->gone = true;
                held_drop_if_done(hd);
        }
}

static void on_reconcile_timer(struct dtimer *t) {
        reconcile_all(container_of(t, struct machine_hook, reconcile_timer));
}

void machine_hook_node_changed(struct machine_hook *mh, const struct node_rec *n) {
        schedule(mh, 0);
}

void machine_hook_drain_done(struct machine_hook *mh, const char *node) {
        const char *key;
        void *v;
        size_t i = 0;

        if (mh->stopping || !node)
                return;
        while (hashmap_iterate(mh->held, &i, &key, &v)) {
                struct held *hd = v;

                if (!hd->gone && hd->node && streq(hd->node, node))
                        hd->drain_seen = true;
        }
        schedule(mh, 0);
}

void machine_hook_drain_blocked(struct machine_hook *mh, const char *node, const char *message) {
        _cleanup_free_ char *msg = NULL;
        const char *key;
        void *v;
        size_t i = 0;

        if (mh->stopping || !node ||
            asprintf(&msg, "node %s cannot be drained: %s; the pre-drain hook stays until it is", node,
                     message ? message : "the drain failed") < 0)
                return;
        while (hashmap_iterate(mh->held, &i, &key, &v)) {
                struct held *hd = v;

                if (!hd->gone && !hd->removed && hd->node && streq(hd->node, node))
                        (void)post_event(hd, EVENT_TYPE_WARNING, MACHINE_HOOK_REASON_BLOCKED, msg);
        }
}

size_t machine_hook_held(const struct machine_hook *mh) {
        const char *key;
        void *v;
        size_t i = 0, n = 0;

        while (mh->held && hashmap_iterate(mh->held, &i, &key, &v))
                n += !((struct held *)v)->gone && !((struct held *)v)->removed;
        return n;
}

/* ---- the Machine watch ---- */

static void on_machine_change(struct informer *inf, const void *rec, void *userdata) {
        schedule(userdata, 0);
}

static void on_machine_update(struct informer *inf, const void *old, const void *rec, void *userdata) {
        schedule(userdata, 0);
}

static void on_machines_synced(struct informer *inf, void *userdata) {
        struct machine_hook *mh = userdata;

        if (!informer_api_prefix(inf)) {
                /* Not served: no Cluster API here (or another version only). */
                if (!mh->failed && mh->h && mh->h->on_failed) {
                        mh->failed = true;
                        mh->h->on_failed(
                                mh, -EPROTONOSUPPORT,
                                "Cluster API Machines (cluster.x-k8s.io/v1beta2) are not served by this API "
                                "server: install Cluster API v1.11 or newer, or run serve without "
                                "--cluster-api",
                                mh->userdata);
                }
                return;
        }
        schedule(mh, 0);
}

static void on_machines_error(struct informer *inf, int error, const char *message, void *userdata) {
        note(userdata, LOG_LEVEL_WARNING, error, "watching Cluster API Machines: %s, retrying",
             message ? message : strerror(-error));
}

static void on_machines_stopped(struct informer *inf, void *userdata) {
        stop_check_soon(userdata);
}

/* ---- lifecycle ---- */

static bool everything_idle(struct machine_hook *mh) {
        const char *key;
        void *v;
        size_t i = 0;

        if (mh->machines && !informer_idle(mh->machines))
                return false;
        while (hashmap_iterate(mh->held, &i, &key, &v))
                if (held_busy(v))
                        return false;
        return true;
}

static void on_stop_timer(struct dtimer *t) {
        struct machine_hook *mh = container_of(t, struct machine_hook, stop_timer);

        if (mh->stopped || !everything_idle(mh))
                return;
        mh->stopped = true;
        if (mh->h && mh->h->on_stopped)
                mh->h->on_stopped(mh, mh->userdata);
}

const struct machine_hook_nodes_ops machine_hook_manager_ops;

static const struct node_rec *manager_node(void *nodes, const char *name) {
        return drain_manager_node(nodes, name);
}

static int manager_patch(void *nodes, const char *name, char *body) {
        return drain_manager_patch_node(nodes, name, body);
}

const struct machine_hook_nodes_ops machine_hook_manager_ops = {
        .node = manager_node,
        .patch = manager_patch,
};

int machine_hook_new(struct kube_client *client, struct timesrc *ts, const struct machine_hook_options *o,
                     const struct machine_hook_nodes_ops *ops, void *nodes,
                     const struct machine_hook_handlers *h, void *userdata, struct machine_hook **ret) {
        static const struct informer_handlers ih = {
                .on_add = on_machine_change,
                .on_update = on_machine_update,
                .on_delete = on_machine_change,
                .on_synced = on_machines_synced,
                .on_error = on_machines_error,
                .on_stopped = on_machines_stopped,
        };
        static const char *const prefixes[] = { MACHINES_API, NULL };
        _cleanup_(machine_hook_freep) struct machine_hook *mh = NULL;
        int r;

        if (!ops || !ops->node || !ops->patch)
                return -EINVAL;
        mh = calloc(1, sizeof(*mh));
        if (!mh)
                return -ENOMEM;
        *mh = (struct machine_hook){
                .client = client, .ts = ts, .ops = ops, .nodes = nodes, .h = h, .userdata = userdata
        };
        if ((o && o->namespace && !(mh->namespace = strdup(o->namespace))) ||
            (o && o->identity && !(mh->identity = strdup(o->identity))))
                return -ENOMEM;
        mh->held = hashmap_new(MAX_MACHINES);
        if (!mh->held)
                return -ENOMEM;
        if ((r = dtimer_init(&mh->reconcile_timer, ts, on_reconcile_timer)) < 0)
                return r;
        if ((r = dtimer_init(&mh->stop_timer, ts, on_stop_timer)) < 0) {
                dtimer_done(&mh->reconcile_timer);
                return r;
        }
        mh->timers_ready = true;
        r = informer_new(client, ts,
                         &(const struct informer_options){
                                 .kind = INFORMER_MACHINES,
                                 .namespace = mh->namespace,
                                 .api_prefixes = prefixes,
                                 .max_objects = MAX_MACHINES,
                         },
                         &ih, mh, &mh->machines);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(mh);
        return 0;
}

int machine_hook_start(struct machine_hook *mh) {
        mh->started = true;
        return informer_start(mh->machines);
}

void machine_hook_stop(struct machine_hook *mh) {
        const char *key;
        void *v;
        size_t i = 0;

        if (mh->stopping)
                return;
        mh->stopping = true;
        dtimer_stop(&mh->reconcile_timer);
        if (mh->machines)
                informer_stop(mh->machines);
        while (hashmap_iterate(mh->held, &i, &key, &v)) {
                struct held *hd = v;

                if (hd->remove_call)
                        kube_call_cancel(hd->remove_call);
                if (hd->event_call)
                        kube_call_cancel(hd->event_call);
        }
        dtimer_start(&mh->stop_timer, 0);
}

void machine_hook_free(struct machine_hook *mh) {
        if (!mh)
                return;
        informer_free(mh->machines);
        hashmap_free(mh->held, held_free);
        if (mh->timers_ready) {
                dtimer_done(&mh->reconcile_timer);
                dtimer_done(&mh->stop_timer);
        }
        free(mh->namespace);
        free(mh->identity);
        free(mh);
}
