/* The drain manager (manager.h): serve's controller over time. Owns the Node watch
 * (a cluster view whose claims and budgets every engine borrows), one engine per
 * node that asks, the slots, the announcer and its own Node patches (the waiting
 * state, requests made for the caller). Level-triggered: every change schedules one
 * reconcile of every watched Node. Tells the caller what happened through callbacks;
 * prints nothing, never runs the loop, never sleeps. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "drainer/base/backoff.h"
#include "drainer/base/hashmap.h"
#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "drainer/base/mwindow.h"
#include "drainer/base/text.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/announcer.h"
#include "drainer/ctl/devicehealth.h"
#include "drainer/ctl/machinehook.h"
#include "drainer/ctl/manager.h"
#include "drainer/ctl/profile.h"
#include "drainer/ctl/shutdown.h"
#include "drainer/dra/nodeview.h"
#include "drainer/drain/device.h"
#include "drainer/drain/engine.h"
#include "drainer/drain/state.h"
#include "drainer/kube/client.h"
#include "drainer/kube/informer.h"
#include "drainer/kube/objects.h"
#include "drainer/kube/slots.h"
#include "drainer/obs/metrics.h"

#define RETRY_BASE_USEC    (30 * USEC_PER_SEC)
#define PATCH_RETRY_USEC   (2 * USEC_PER_SEC) /* a waiting patch that failed, not a 409 */
#define RETRY_CAP_USEC     (300 * USEC_PER_SEC)
#define SHARED_LINGER_USEC (30 * USEC_PER_SEC)
/* Engines winding down: their cancelled calls finish on the next turns of the loop. */
/* While stopping: how often to look whether everything has ended. */
#define MAX_NODES          100000
#define COUNT_TTL_USEC     (60 * USEC_PER_SEC) /* --max-parallel N% for one node: a recount */
#define PAUSE_LINGER_USEC  (10 * USEC_PER_SEC) /* the pause watch, once no new drain asks */

/* One node the manager acts for. */
struct manager_node {
        struct drain_manager *manager;
        char *name;
        struct engine *engine; /* owned; running or finishing */
        enum engine_goal goal;
        bool running, stopped;
        unsigned failures;
        uint64_t retry_at;               /* monotonic µs; 0 = now */
        char *waiting_msg;               /* last "waiting" message written, to write it once */
        int64_t asked_at;                /* wall-clock µs, to the second: when it asked (the queue) */
        struct kube_call *patch;         /* the waiting state */
        struct kube_call *request_patch; /* a request made for the caller */
        /* The Node version the waiting patch in flight was made against, and one the API
         * server refused it on (409: the Node changed since): not written again on that
         * version, the watch brings the next. */
        char *patch_rv, *stale_rv;
        /* Refused because the Node records an action this configuration does not allow:
         * the drainer.io/ annotations then (refused_key), not retried until they change. */
        char *refused_key;
};

/* A device reported unhealthy (DEVICE_HEALTH_DRAIN), drained by an engine of its own:
 * the manager's profile scoped to this one device (its state under the device's scope
 * on the Node, device.h), one drain of a node at a time. */
struct manager_device {
        struct drain_manager *manager;
        char *node, *id; /* id: "DRIVER/POOL/DEVICE" */
        char *buf;       /* the parsed id: profile.devices[0] borrows from it */
        struct drain_profile profile;
        struct engine *engine; /* owned; running or finishing */
        bool wanted;           /* reported unhealthy now */
        bool running, stopped;
        bool done; /* drained, or out of service by another drain: nothing to do while wanted */
        unsigned failures;
        uint64_t retry_at; /* monotonic µs; 0 = now */
        int64_t asked_at;  /* wall-clock µs, to the second: its place in the slots' queue */
        char *said;        /* the last waiting reason told, to tell it once */
};

struct drain_manager {
        struct kube_client *client;  /* borrowed */
        struct transport *transport; /* borrowed */
        struct timesrc *ts;          /* borrowed */
        struct drain_manager_options o;
        const struct drain_manager_callbacks *cb; /* borrowed */
        void *userdata;
        /* The Node watch (every node without o.node), and the claims and budgets every
         * engine borrows while one runs (one watch each, whatever max_parallel). Owned;
         * nodes is borrowed from it. */
        struct cluster_view *cluster;
        struct informer *nodes;
        bool subscribed;
        bool closing;                  /* stopping, everything idle: the cluster view closes */
        bool slots_closed;             /* stopping: the slots' calls and watch ended */
        struct hashmap *managed_nodes; /* name -> struct manager_node */
        struct slots *slots;           /* owned; NULL without max_parallel */
        struct announcer *announcer;   /* owned: every node's Events */
        struct device_health *health;  /* owned: o.device_health */
        struct hashmap *devices;       /* "NODE DEVICE" -> struct manager_device (DEVICE_HEALTH_DRAIN) */
        struct dtimer reconcile_timer, retry_timer, stop_timer;
        bool timers_ready, reconcile_armed, ready, stopping, stopped;
        /* drainer.io/pause on the lease namespace: watched while new drains ask, closed
         * PAUSE_LINGER_USEC after the last asked (an idle daemon holds its Node's watch and
         * nothing else); until it has synced no new drain starts. */
        struct informer *pause_inf; /* owned */
        struct informer *pause_old; /* owned: closed, freed once it has stopped */
        uint64_t pause_asked;       /* when a new drain last asked (monotonic µs) */
        bool paused;
        char *pause_value; /* the annotation's value when it is neither true nor false */
        int pause_error;   /* the namespace cannot be read (RBAC): held, and said so */
        /* The maintenance window: open or not until win_next (wall clock µs). */
        bool win_valid, win_open;
        int64_t win_next;
        bool held_by_window; /* a node waits for the window: wake at win_next */
        /* --max-parallel N%: the slots now; for one node, the Nodes of the cluster as
         * last counted (count_at monotonic µs; 0: never) */
        unsigned limit;
        struct kube_call *count_call;
        size_t n_counted;
        uint64_t count_at;
        int count_error;
};

static const char *const event_kind_names[_DRAIN_MANAGER_EVENT_KIND_MAX] = {
        [DRAIN_MANAGER_READY] = "ready",
        [DRAIN_MANAGER_IDLE] = "idle",
        [DRAIN_MANAGER_STARTED] = "started",
        [DRAIN_MANAGER_SWITCHED] = "switched",
        [DRAIN_MANAGER_PHASE] = "phase",
        [DRAIN_MANAGER_DONE] = "done",
        [DRAIN_MANAGER_REFUSED] = "refused",
        [DRAIN_MANAGER_FAILED] = "failed",
        [DRAIN_MANAGER_START_FAILED] = "start-failed",
        [DRAIN_MANAGER_WAITING] = "waiting",
        [DRAIN_MANAGER_SLOT_ERROR] = "slot-error",
        [DRAIN_MANAGER_BAD_STATE] = "bad-state",
        [DRAIN_MANAGER_PATCH_CONFLICT] = "patch-conflict",
        [DRAIN_MANAGER_PATCH_FAILED] = "patch-failed",
        [DRAIN_MANAGER_WATCH_ERROR] = "watch-error",
        [DRAIN_MANAGER_PAUSE] = "pause",
        [DRAIN_MANAGER_LIMIT] = "limit",
        [DRAIN_MANAGER_DEVICE] = "device",
};

const char *drain_manager_event_kind_to_string(enum drain_manager_event_kind k) {
        return k >= 0 && k < _DRAIN_MANAGER_EVENT_KIND_MAX ? event_kind_names[k] : NULL;
}

size_t drain_manager_running(const struct drain_manager *m) {
        const char *key;
        void *v;
        size_t i = 0, n = 0;

        while (m->managed_nodes && hashmap_iterate(m->managed_nodes, &i, &key, &v))
                n += ((struct manager_node *)v)->running;
        i = 0;
        while (m->devices && hashmap_iterate(m->devices, &i, &key, &v))
                n += ((struct manager_device *)v)->running;
        return n;
}

static void emit(struct drain_manager *m, struct drain_manager_event ev) {
        if (!m->cb || !m->cb->on_event)
                return;
        ev.n_running = drain_manager_running(m);
        m->cb->on_event(m, &ev, m->userdata);
}

static void reconcile_all(struct drain_manager *m);

static void schedule_reconcile(struct drain_manager *m) {
        if (m->stopping || m->reconcile_armed)
                return;
        m->reconcile_armed = true;
        dtimer_start(&m->reconcile_timer, 0);
}

/* Stopping: something the stop waits for ended (an engine went idle, a patch, the
 * last Event or the slots' last call answered): look again on the next turn. Nothing
 * wakes in between. */
static void stop_check_soon(struct drain_manager *m) {
        if (m->stopping && !m->closing && !m->stop_timer.armed)
                dtimer_start(&m->stop_timer, 0);
}

/* Re-evaluates after delay at the latest. */
static void schedule_retry(struct drain_manager *m, uint64_t delay) {
        if (m->stopping)
                return;
        if (!m->retry_timer.armed || m->retry_timer.due > timesrc_now(m->ts) + delay)
                dtimer_start(&m->retry_timer, delay);
}

static void on_reconcile_timer(struct dtimer *t) {
        struct drain_manager *m = container_of(t, struct drain_manager, reconcile_timer);

        m->reconcile_armed = false;
        reconcile_all(m);
}

static void on_retry_timer(struct dtimer *t) {
        reconcile_all(container_of(t, struct drain_manager, retry_timer));
}

static void manager_node_free(void *p) {
        struct manager_node *mn = p;

        if (!mn)
                return;
        engine_free(mn->engine);
        free(mn->name);
        free(mn->waiting_msg);
        free(mn->patch_rv);
        free(mn->stale_rv);
        free(mn->refused_key);
        free(mn);
}

static struct manager_node *manager_node_get(struct drain_manager *m, const char *name) {
        struct manager_node *mn = hashmap_get(m->managed_nodes, name);

        if (mn)
                return mn;
        mn = calloc(1, sizeof(*mn));
        if (!mn)
                return NULL;
        mn->manager = m;
        mn->name = strdup(name);
        if (!mn->name || hashmap_put(m->managed_nodes, name, mn, NULL) < 0) {
                manager_node_free(mn);
                return NULL;
        }
        return mn;
}

/* ---- the manager's own Node patches (the waiting state, the caller's requests) ---- */

static void on_node_patched(const struct kube_result *res, void *userdata) {
        struct manager_node *mn = userdata;
        struct drain_manager *m = mn->manager;

        mn->patch = NULL;
        stop_check_soon(m);
        if (res->error >= 0 || res->error == -ECANCELED) {
                mn->patch_rv = mfree(mn->patch_rv);
                mn->stale_rv = mfree(mn->stale_rv);
                return schedule_reconcile(m);
        }
        /* Not written, so written again: a conflict once the watch shows the newer Node, any
         * other failure after a pause. */
        mn->waiting_msg = mfree(mn->waiting_msg);
        if (res->error == -EBUSY) {
                emit(m, (struct drain_manager_event){ .kind = DRAIN_MANAGER_PATCH_CONFLICT,
                                                      .node = mn->name,
                                                      .error = res->error });
                free(mn->stale_rv);
                mn->stale_rv = TAKE_PTR(mn->patch_rv);
                return schedule_reconcile(m);
        }
        emit(m, (struct drain_manager_event){ .kind = DRAIN_MANAGER_PATCH_FAILED,
                                              .node = mn->name,
                                              .error = res->error,
                                              .message = res->message,
                                              .retry_usec = PATCH_RETRY_USEC });
        mn->patch_rv = mfree(mn->patch_rv);
        schedule_retry(m, PATCH_RETRY_USEC);
}

static int send_patch(struct manager_node *mn, char *body) {
        _cleanup_free_ char *path = NULL;
        int r;

        if (!body)
                return -ENOMEM;
        if (asprintf(&path, "/api/v1/nodes/%s", mn->name) < 0) {
                free(body);
                return -ENOMEM;
        }
        r = kube_patch(mn->manager->client, path, KUBE_PATCH_MERGE, body, on_node_patched, mn, &mn->patch);
        free(body);
        return r;
}

static void on_request_patched(const struct kube_result *res, void *userdata) {
        struct manager_node *mn = userdata;

        mn->request_patch = NULL;
        stop_check_soon(mn->manager);
        if (res->error < 0 && res->error != -ECANCELED)
                emit(mn->manager, (struct drain_manager_event){ .kind = DRAIN_MANAGER_PATCH_FAILED,
                                                                .node = mn->name,
                                                                .error = res->error,
                                                                .message = res->message });
        schedule_reconcile(mn->manager);
}

int drain_manager_patch_node(struct drain_manager *m, const char *name, char *body) {
        _cleanup_free_ char *path = NULL;
        struct manager_node *mn;
        int r;

        if (!body)
                return -ENOMEM;
        if (m->stopping) {
                free(body);
                return -ESHUTDOWN;
        }
        mn = manager_node_get(m, name);
        if (!mn || asprintf(&path, "/api/v1/nodes/%s", name) < 0) {
                free(body);
                return -ENOMEM;
        }
        /* One at a time: the Node change its answer brings is when the caller looks again. */
        if (mn->request_patch) {
                free(body);
                return -EBUSY;
        }
        r = kube_patch(m->client, path, KUBE_PATCH_MERGE, body, on_request_patched, mn, &mn->request_patch);
        free(body);
        return r;
}

/* ---- engines ---- */

/* What a refusal by configuration depends on: the request, the phase and the record
 * of the driver stops (not the message, which the refusal itself writes). */
static char *refusal_key(const struct node_rec *n) {
        char *k;

        if (!n || asprintf(&k, "%s\n%s\n%s",
                           strempty(kv_get(n->annotations, n->n_annotations, DRAINER_ANN_REQUEST)),
                           strempty(kv_get(n->annotations, n->n_annotations, DRAINER_ANN_STATE)),
                           strempty(kv_get(n->annotations, n->n_annotations, DRAINER_ANN_DRIVER_STOP))) < 0)
                return NULL;
        return k;
}

static void on_engine_phase(struct engine *e, enum drain_phase phase, const char *message, void *userdata) {
        struct manager_node *mn = userdata;

        emit(mn->manager, (struct drain_manager_event){ .kind = DRAIN_MANAGER_PHASE,
                                                        .node = mn->name,
                                                        .goal = mn->goal,
                                                        .phase = phase,
                                                        .message = message });
}

/* Who asked for a node's drain, for drainer_drains_started_total: what the askers
 * serve knows write beside the request. */
static const char *asker_kind(const struct node_rec *n) {
        if (kv_get(n->annotations, n->n_annotations, DRAINER_ANN_CLUSTER_API_MACHINE))
                return "cluster-api";
        if (kv_get(n->annotations, n->n_annotations, DRAINER_ANN_SHUTDOWN_BOOT))
                return "shutdown";
        return "request";
}

static void on_engine_notice(struct engine *e, const struct engine_notice *n, void *userdata) {
        struct manager_node *mn = userdata;

        if (n->kind == ENGINE_NOTICE_DRAIN)
                metrics_add(metrics_family(DRAINER_METRIC_DRAINS_STARTED),
                            METRIC_LABELS(asker_kind(n->node)), 1);
        /* A drain asked for names its asker where the request says (drainer.io/requested-by:
         * serve's Cluster API hook and shutdown drain write it; a person may). */
        announcer_notice_asked(
                mn->manager->announcer, n,
                mn->goal == ENGINE_GOAL_DRAIN
                        ? kv_get(n->node->annotations, n->node->n_annotations, DRAINER_ANN_REQUESTED_BY)
                        : NULL);
}

static void on_engine_finished(struct engine *e, const struct engine_summary *s, void *userdata) {
        struct manager_node *mn = userdata;
        struct drain_manager *m = mn->manager;
        struct drain_manager_event ev = {
                .node = mn->name, .goal = mn->goal, .error = s->result, .message = s->message, .summary = s
        };

        mn->running = false;
        mn->refused_key = mfree(mn->refused_key);
        if (s->result == 0) {
                mn->failures = 0;
                ev.kind = DRAIN_MANAGER_DONE;
        } else if (s->result == -EPERM && s->needs_flag &&
                   (mn->refused_key = refusal_key(informer_get(m->nodes, mn->name)))) {
                /* Retrying cannot help: only another configuration (a restart with
                 * s->needs_flag) or other annotations can. Reported once (the engine wrote
                 * drainer.io/message, the announcer a DrainerBlocked Event); wait for a change. */
                ev.kind = DRAIN_MANAGER_REFUSED;
        } else {
                /* Without jitter: one engine per node, restarted at most every 30 s. */
                uint64_t d = backoff_exponential(RETRY_BASE_USEC, RETRY_CAP_USEC, ++mn->failures);

                mn->retry_at = timesrc_now(m->ts) + d;
                ev.kind = DRAIN_MANAGER_FAILED;
                ev.retry_usec = d;
                schedule_retry(m, d);
        }
        emit(m, ev);
        schedule_reconcile(m);
}

/* A stopped engine wound down: the node can be forgotten or its next engine start. */
static void on_engine_idle(struct engine *e, void *userdata) {
        struct manager_node *mn = userdata;

        schedule_reconcile(mn->manager);
        stop_check_soon(mn->manager);
}

static int start_engine(struct manager_node *mn, enum engine_goal goal) {
        struct drain_manager *m = mn->manager;
        static const struct engine_callbacks cb = {
                .on_phase = on_engine_phase,
                .on_notice = on_engine_notice,
                .on_finished = on_engine_finished,
                .on_idle = on_engine_idle,
        };
        struct engine_options eo;
        int r;

        drain_profile_engine_options(m->o.profile, mn->name, goal, &eo);
        eo.units = m->o.units;
        eo.shared = m->cluster;
        engine_free(mn->engine);
        mn->engine = NULL;
        /* Its turn came: a later wait is another, written again. */
        mn->waiting_msg = mfree(mn->waiting_msg);
        mn->asked_at = 0;
        r = engine_new(m->client, m->transport, m->ts, &eo, &cb, mn, &mn->engine);
        if (r < 0)
                return r;
        mn->stopped = false;
        mn->goal = goal;
        mn->running = true;
        emit(m,
             (struct drain_manager_event){ .kind = DRAIN_MANAGER_STARTED, .node = mn->name, .goal = goal });
        r = engine_start(mn->engine);
        if (r < 0)
                mn->running = false;
        return r;
}

/* What the node's annotations ask for: -1 nothing, else an engine goal. */
static int desired_goal(const struct drain_state *st) {
        if (st->request == DRAIN_REQUEST_DRAIN)
                return st->has_phase && st->phase == DRAIN_PHASE_DRAINED ? -1 : ENGINE_GOAL_DRAIN;
        if (st->request == DRAIN_REQUEST_UNCORDON)
                return ENGINE_GOAL_UNCORDON;
        /* No request but state left: the request was removed during a drain, which means undo. */
        if (st->has_phase)
                return ENGINE_GOAL_UNCORDON;
        return -1;
}

/* drainer.io/state=waiting with msg (taken) on the Node, once per message: why the
 * drain has not started, with state-since the time the node asked (since: the order of
 * the queue, read back by whoever manages the node next). A Node already in a later
 * phase (a drain resumed, or a phase written by hand) keeps it: only drainer.io/message
 * says why it waits; "waiting" would claim that nothing was changed yet. A Node that
 * says it already (a restarted manager) is not written again. */
static void write_waiting_msg(struct manager_node *mn, const struct node_rec *n, bool keep_phase,
                              int64_t since, char *msg) {
        struct drain_manager *m = mn->manager;
        char *body = NULL;

        if (!msg)
                return;
        if (!mn->patch && streq_ptr(kv_get(n->annotations, n->n_annotations, DRAINER_ANN_MESSAGE), msg) &&
            (keep_phase || streq_ptr(kv_get(n->annotations, n->n_annotations, DRAINER_ANN_STATE),
                                     drain_phase_to_string(DRAIN_PHASE_WAITING)))) {
                free(mn->waiting_msg);
                mn->waiting_msg = msg;
                return;
        }
        if (mn->patch || streq_ptr(msg, mn->waiting_msg) ||
            (mn->stale_rv && streq_ptr(mn->stale_rv, n->resource_version)) ||
            (keep_phase ? drain_patch_message(n, msg, &body)
                        : drain_patch_phase(n, DRAIN_PHASE_WAITING, since, msg, &body)) < 0) {
                free(msg);
                return;
        }
        free(mn->patch_rv);
        mn->patch_rv = n->resource_version ? strdup(n->resource_version) : NULL;
        free(mn->waiting_msg);
        mn->waiting_msg = msg;
        emit(m, (struct drain_manager_event){
                        .kind = DRAIN_MANAGER_WAITING, .node = mn->name, .message = mn->waiting_msg });
        (void)send_patch(mn, body);
}

/* The waiting message names neither the holders nor a place in the queue: both change
 * with every handover, and a message that changes is a Node write per waiting node and
 * handover. Written when the node starts waiting; the next write is its turn. */
static void write_waiting(struct manager_node *mn, const struct node_rec *n, bool keep_phase,
                          int64_t since) {
        char ts[64] = "", limit[32];
        char *msg;
        int k;

        /* a percentage as given: its count changes with the nodes, the message must not */
        if (mn->manager->o.max_parallel_percent)
                snprintf(limit, sizeof(limit), "%u%%", mn->manager->o.max_parallel_percent);
        else
                snprintf(limit, sizeof(limit), "%u", mn->manager->o.max_parallel);
        if (keep_phase || timesrc_format_rfc3339(since, ts, sizeof(ts)) < 0)
                k = asprintf(&msg, "waiting for a drain slot (--max-parallel %s) to go on with the drain",
                             limit);
        else
                k = asprintf(&msg,
                             "waiting for a drain slot (--max-parallel %s) since %s; slots go in request "
                             "order",
                             limit, ts);
        if (k >= 0)
                write_waiting_msg(mn, n, keep_phase, since, msg);
}

/* When the node asked for its drain, to the second (what state-since keeps), for the
 * queue's order: the waiting stamp on its Node (written by whoever managed it first),
 * else when this manager first saw the request. A drain already past waiting goes
 * before every waiter (0): it has changed the node, finishing it comes first. */
static int64_t asked_at(struct manager_node *mn, const struct drain_state *st) {
        int64_t t;

        if (st->has_phase && st->phase != DRAIN_PHASE_WAITING)
                return 0;
        if (st->has_phase && st->state_since_usec > 0)
                t = st->state_since_usec;
        else if (mn->asked_at > 0)
                return mn->asked_at;
        else
                t = timesrc_realtime(mn->manager->ts);
        t -= t % (int64_t)USEC_PER_SEC;
        if (!mn->asked_at)
                mn->asked_at = t;
        return t;
}

/* No slot, no drain: the node waits, and says why on the Node too (whoever annotated
 * it reads there, not the daemon's log), once per reason. */
static void slot_failed(struct manager_node *mn, const struct node_rec *n, bool keep_phase, int64_t since,
                        int error) {
        struct drain_manager *m = mn->manager;
        const char *ns = m->o.lease_namespace;
        char *msg = NULL;
        int k;

        if (error == -ENOENT)
                k = asprintf(&msg,
                             "cannot take a drain slot: namespace %s not found (the Leases "
                             "drainer-slot-* of --max-parallel %u live there): create it, "
                             "name another with --lease-namespace, or give --max-parallel 0 "
                             "for no limit",
                             ns, m->o.max_parallel);
        else if (error == -EACCES)
                k = asprintf(&msg,
                             "cannot take a drain slot: forbidden to write Leases in "
                             "namespace %s (grant leases get/list/watch/create/update there, "
                             "as deploy/ does, or give --max-parallel 0 for no limit)",
                             ns);
        else
                k = asprintf(&msg, "cannot take a drain slot (Leases in namespace %s): %s", ns,
                             strerror(-error));
        if (k < 0)
                msg = NULL;
        else if (!streq_ptr(msg, mn->waiting_msg))
                emit(m, (struct drain_manager_event){ .kind = DRAIN_MANAGER_SLOT_ERROR,
                                                      .node = mn->name,
                                                      .error = error,
                                                      .message = msg,
                                                      .retry_usec = RETRY_BASE_USEC });
        write_waiting_msg(mn, n, keep_phase, since ? since : timesrc_realtime(m->ts), msg);
        mn->retry_at = timesrc_now(m->ts) + RETRY_BASE_USEC;
        schedule_retry(m, RETRY_BASE_USEC);
}

/* ---- what holds new drains: the pause, the window, an unknown limit ---- */

unsigned drain_manager_percent_of(unsigned pct, size_t n) {
        uint64_t v = (uint64_t)n * pct / 100;

        return v < 1 ? 1 : v > 1024 ? 1024 : (unsigned)v;
}

bool drain_manager_paused(const struct drain_manager *m) {
        return m->paused;
}

static void pause_read(struct drain_manager *m) {
        const struct node_rec *ns = informer_get(m->pause_inf, m->o.lease_namespace);
        const char *v = ns ? kv_get(ns->annotations, ns->n_annotations, DRAINER_ANN_PAUSE) : NULL;
        bool was = m->paused;

        m->pause_value = mfree(m->pause_value);
        /* A value that says neither is an admin's typo: held (the safe side), and said so. */
        m->paused = v && strcasecmp(v, "false") != 0;
        if (m->paused && strcasecmp(v, "true") != 0)
                m->pause_value = strdup(v);
        if (was != m->paused)
                emit(m, (struct drain_manager_event){ .kind = DRAIN_MANAGER_PAUSE,
                                                      .message = m->paused ? "paused" : "resumed" });
}

/* Read on the reconcile, once the cache holds the change (a deletion too). */
static void on_pause_change(struct informer *inf, const void *rec, void *userdata) {
        struct drain_manager *m = userdata;

        if (inf != m->pause_inf)
                return; /* the closed one's last word */
        m->pause_error = 0;
        schedule_reconcile(m);
}

static void on_pause_update(struct informer *inf, const void *old, const void *rec, void *userdata) {
        on_pause_change(inf, rec, userdata);
}

static void on_pause_synced(struct informer *inf, void *userdata) {
        on_pause_change(inf, NULL, userdata);
}

static void on_pause_error(struct informer *inf, int error, const char *message, void *userdata) {
        struct drain_manager *m = userdata;

        if (inf != m->pause_inf)
                return;
        emit(m, (struct drain_manager_event){
                        .kind = DRAIN_MANAGER_WATCH_ERROR, .error = error, .message = message });
        if (!informer_synced(inf) && m->pause_error != error) {
                m->pause_error = error;
                schedule_reconcile(m);
        }
}

static void on_pause_stopped(struct informer *inf, void *userdata) {
        struct drain_manager *m = userdata;

        if (inf == m->pause_old)
                schedule_reconcile(m); /* freed there, off its own callback */
        stop_check_soon(m);
}

/* No new drain asked for PAUSE_LINGER_USEC: the watch closes (the next one that asks
 * opens it again, and waits for its list). */
static void pause_linger(struct drain_manager *m) {
        uint64_t now = timesrc_now(m->ts);

        if (m->pause_old && informer_idle(m->pause_old)) {
                informer_free(m->pause_old);
                m->pause_old = NULL;
        }
        if (!m->pause_inf)
                return;
        if (now - m->pause_asked < PAUSE_LINGER_USEC) {
                schedule_retry(m, PAUSE_LINGER_USEC - (now - m->pause_asked));
                return;
        }
        if (m->pause_old)
                return; /* the one before is still stopping: look again then */
        m->pause_old = m->pause_inf;
        m->pause_inf = NULL;
        m->pause_error = 0;
        informer_stop(m->pause_old);
}

/* 0: known (m->paused says); -EINPROGRESS: not read yet; or the error reading it. */
static int pause_state(struct drain_manager *m) {
        static const struct informer_handlers h = {
                .on_add = on_pause_change,
                .on_update = on_pause_update,
                .on_delete = on_pause_change,
                .on_synced = on_pause_synced,
                .on_error = on_pause_error,
                .on_stopped = on_pause_stopped,
        };
        _cleanup_free_ char *fs = NULL;
        int r;

        if (m->pause_inf)
                return informer_synced(m->pause_inf) ? 0 : m->pause_error ? m->pause_error : -EINPROGRESS;
        if (asprintf(&fs, "metadata.name=%s", m->o.lease_namespace) < 0)
                return -ENOMEM;
        r = informer_new(
                m->client, m->ts,
                &(const struct informer_options){ .kind = INFORMER_NAMESPACES, .field_selector = fs }, &h, m,
                &m->pause_inf);
        if (r >= 0)
                r = informer_start(m->pause_inf);
        if (r < 0) {
                informer_free(m->pause_inf);
                m->pause_inf = NULL;
                return r;
        }
        return -EINPROGRESS;
}

/* The window's state now, recomputed only when it changes (a scan of minutes). */
static bool window_open(struct drain_manager *m, int64_t now) {
        if (!m->win_valid || now >= m->win_next || now < m->win_next - (int64_t)(9 * 86400 * USEC_PER_SEC)) {
                m->win_open = mwindows_next_change(m->o.window, now, &m->win_next);
                m->win_valid = true;
        }
        return m->win_open;
}

static void on_nodes_counted(const struct kube_result *res, void *userdata) {
        struct drain_manager *m = userdata;
        const cJSON *rem;

        m->count_call = NULL;
        stop_check_soon(m);
        if (res->error == -ECANCELED)
                return;
        if (res->error < 0) {
                m->count_error = res->error;
                emit(m, (struct drain_manager_event){ .kind = DRAIN_MANAGER_WATCH_ERROR,
                                                      .error = res->error,
                                                      .message = res->message });
                m->count_at = timesrc_now(m->ts);
                schedule_retry(m, RETRY_BASE_USEC);
                return schedule_reconcile(m);
        }
        /* A list of one item: the rest are counted by the server (no selector: it says). */
        rem = json_path(res->json, "metadata.remainingItemCount");
        m->n_counted = json_count(json_get_arr(res->json, "items")) +
                       (cJSON_IsNumber(rem) && rem->valuedouble > 0 ? (size_t)rem->valuedouble : 0);
        m->count_error = 0;
        m->count_at = timesrc_now(m->ts);
        schedule_reconcile(m);
}

/* The slots for --max-parallel N% of n selected nodes. */
static void set_limit(struct drain_manager *m, size_t n) {
        unsigned v = drain_manager_percent_of(m->o.max_parallel_percent, n);

        if (v == m->limit || slots_set_max(m->slots, v) < 0)
                return;
        m->limit = v;
        emit(m,
             (struct drain_manager_event){ .kind = DRAIN_MANAGER_LIMIT, .n_nodes = n, .max_parallel = v });
}

/* For one node: the limit from the cluster's Nodes, counted at most once a minute
 * while drains ask. 0: known; -EINPROGRESS: the first count is on its way. */
static int limit_for_one(struct drain_manager *m) {
        uint64_t now = timesrc_now(m->ts);
        int r;

        if (!m->count_call && (!m->count_at || now - m->count_at >= COUNT_TTL_USEC)) {
                r = kube_get(m->client, "/api/v1/nodes?limit=1", on_nodes_counted, m, &m->count_call);
                if (r < 0)
                        return r;
        }
        if (m->count_at && !m->count_error)
                set_limit(m, m->n_counted);
        if (m->limit)
                return 0; /* a count of a minute ago is good enough meanwhile */
        return m->count_error ? m->count_error : -EINPROGRESS;
}

/* Whether new drains wait now (the pause, the window, a limit not yet known): 0 they
 * may start; 1 they wait, with why in *ret (NULL: for a turn of the loop, nothing to say). */
static int hold_reason(struct drain_manager *m, char **ret) {
        int64_t now = timesrc_realtime(m->ts);
        char *msg = NULL, when[64];
        int r, k = 0;

        *ret = NULL;
        m->pause_asked = timesrc_now(m->ts);
        r = pause_state(m);
        if (r == -EINPROGRESS)
                return 1;
        if (r < 0)
                k = asprintf(&msg,
                             "waiting: cannot read namespace %s for %s (%s); no new drain starts until it "
                             "can be read (grant namespaces get/list/watch on it, as deploy/ does)",
                             m->o.lease_namespace, DRAINER_ANN_PAUSE, strerror(-r));
        else if (m->paused && m->pause_value)
                k = asprintf(&msg,
                             "waiting: drains are paused (%s=\"%.64s\" on namespace %s is neither true nor "
                             "false); drains in flight finish, new ones start once it is false or removed",
                             DRAINER_ANN_PAUSE, m->pause_value, m->o.lease_namespace);
        else if (m->paused)
                k = asprintf(&msg,
                             "waiting: drains are paused (%s=true on namespace %s); drains in flight "
                             "finish, new ones start once it is removed",
                             DRAINER_ANN_PAUSE, m->o.lease_namespace);
        else if (m->o.window && !window_open(m, now)) {
                if (timesrc_format_rfc3339(m->win_next, when, sizeof(when)) < 0)
                        snprintf(when, sizeof(when), "?");
                k = asprintf(&msg, "waiting for the maintenance window (next opens %s)", when);
                m->held_by_window = true;
        } else if (m->slots && m->o.max_parallel_percent && m->o.node) {
                r = limit_for_one(m);
                if (r == -EINPROGRESS)
                        return 1;
                if (r < 0)
                        k = asprintf(&msg,
                                     "waiting: cannot count the cluster's Nodes for --max-parallel %u%% "
                                     "(%s), retrying",
                                     m->o.max_parallel_percent, strerror(-r));
                else
                        return 0;
        } else
                return 0;
        *ret = k < 0 ? NULL : msg;
        return 1;
}

/* Whether the new drain of n waits (and says why on its Node, once). */
static bool held(struct manager_node *mn, const struct node_rec *n, const struct drain_state *st) {
        struct drain_manager *m = mn->manager;
        int64_t asked = asked_at(mn, st);
        char *msg;

        if (!hold_reason(m, &msg))
                return false;
        if (!msg)
                return true;
        /* It may hold a slot that landed just now: nobody else waits for its sake. */
        if (m->slots && slots_held(m->slots, n->name))
                slots_release(m->slots, n->name);
        write_waiting_msg(mn, n, false, asked, msg);
        return true;
}

static bool node_device_pending(const struct drain_manager *m, const char *node);

static void reconcile_node(struct drain_manager *m, const struct node_rec *n) {
        _cleanup_(drain_state_done) struct drain_state st = {};
        _cleanup_free_ char *err = NULL;
        struct manager_node *mn = hashmap_get(m->managed_nodes, n->name);
        uint64_t now = timesrc_now(m->ts);
        int goal, r;

        if (mn && mn->engine && !mn->running && !mn->stopped) {
                /* A finished engine watches nothing more: its pods, slices, and its hold on the
                 * shared claims and budgets, go (a drained node waits with one Node watch). */
                engine_stop(mn->engine);
                mn->stopped = true;
        }
        if (drain_state_parse(n, &st, &err) < 0) {
                /* The engine's run reports this on the Node (message, Event); here just once. */
                if (!mn || !mn->waiting_msg || !streq(mn->waiting_msg, err ? err : "")) {
                        emit(m, (struct drain_manager_event){
                                        .kind = DRAIN_MANAGER_BAD_STATE, .node = n->name, .message = err });
                        if ((mn = manager_node_get(m, n->name))) {
                                free(mn->waiting_msg);
                                mn->waiting_msg = err ? strdup(err) : NULL;
                        }
                }
                return;
        }
        goal = desired_goal(&st);

        /* Slots: held from the first change until the node is back in service. */
        if (m->slots && (st.has_phase && st.phase != DRAIN_PHASE_WAITING))
                (void)slots_acquire_ordered(m->slots, n->name, 0); /* keeps it renewed */
        if (m->slots && goal < 0 && !st.has_phase && slots_held(m->slots, n->name) &&
            !node_device_pending(m, n->name))
                slots_release(m->slots, n->name);

        if (goal < 0) {
                if (mn && !mn->running && !mn->patch && !mn->request_patch) {
                        /* Done with this node: forget it (keeps the map small with every node). */
                        if (mn->engine && !mn->stopped) {
                                engine_stop(mn->engine);
                                mn->stopped = true;
                        }
                        /* else forgotten once on_engine_idle says it wound down */
                        if (!mn->engine || engine_idle(mn->engine))
                                manager_node_free(hashmap_remove(m->managed_nodes, n->name));
                }
                return;
        }
        if (!mn && !(mn = manager_node_get(m, n->name)))
                return;
        if (mn->running) {
                if (mn->goal != (enum engine_goal)goal) {
                        /* The request changed under a running engine: stop it, start the other later. */
                        emit(m, (struct drain_manager_event){
                                        .kind = DRAIN_MANAGER_SWITCHED, .node = n->name, .goal = goal });
                        engine_stop(mn->engine);
                        mn->stopped = true;
                        mn->running = false;
                        mn->retry_at = 0; /* the other starts once on_engine_idle comes */
                }
                return;
        }
        if (mn->engine && !mn->stopped) {
                /* A finished engine still watches: stop it before starting the next. */
                engine_stop(mn->engine);
                mn->stopped = true;
        }
        if (mn->engine && !engine_idle(mn->engine))
                return; /* the previous engine is still winding down: on_engine_idle comes */
        if (mn->refused_key) {
                _cleanup_free_ char *key = refusal_key(n);

                if (!key || streq(key, mn->refused_key))
                        return; /* nothing changed that could make it allowed */
                mn->refused_key = mfree(mn->refused_key);
                mn->failures = 0;
                mn->retry_at = 0;
        }
        if (mn->goal == (enum engine_goal)goal && mn->retry_at > now) {
                schedule_retry(m, mn->retry_at - now);
                return;
        }
        if (mn->goal != (enum engine_goal)goal)
                mn->failures = 0;
        /* A new drain (nothing changed on the node yet) waits for the fleet's go: not
         * paused, inside the window, a limit known. Drains in flight and undo go on. */
        if (goal == ENGINE_GOAL_DRAIN && !(st.has_phase && st.phase != DRAIN_PHASE_WAITING) &&
            held(mn, n, &st))
                return;
        /* A drain in any phase holds a slot before it acts: a phase does not prove one is
         * held (it may be written by hand, or the slot lost while this daemon was down). A
         * drain resumed with its Lease still on the server adopts it at once. */
        if (goal == ENGINE_GOAL_DRAIN && m->slots) {
                bool keep_phase = st.has_phase && st.phase != DRAIN_PHASE_WAITING;
                int64_t asked = asked_at(mn, &st);

                /* First asked, first served: the slots hand out free ones oldest first. */
                r = slots_acquire_ordered(m->slots, n->name, asked);
                if (r < 0)
                        return slot_failed(mn, n, keep_phase, asked, r);
                if (r == 0) {
                        /* Only once its attempt found nothing to take: not while it is
                         * landing (the lease watch may show the node as holder before the
                         * create/update call returns), nor for a slot about to be its. */
                        if (slots_queued(m->slots, n->name))
                                write_waiting(mn, n, keep_phase, asked);
                        return;
                }
        }
        mn->retry_at = 0;
        r = start_engine(mn, goal);
        if (r < 0)
                emit(m, (struct drain_manager_event){ .kind = DRAIN_MANAGER_START_FAILED,
                                                      .node = n->name,
                                                      .goal = goal,
                                                      .error = r });
}

static bool node_known(const char *node, void *userdata) {
        struct drain_manager *m = userdata;

        return informer_get(m->nodes, node);
}

static void reconcile_devices(struct drain_manager *m);

static void reconcile_all(struct drain_manager *m) {
        const void *rec;
        size_t i = 0;

        if (m->stopping || !m->nodes || !informer_synced(m->nodes))
                return;
        /* --max-parallel N% of every Node watched: recounted on every change of them */
        if (m->slots && m->o.max_parallel_percent && !m->o.node)
                set_limit(m, informer_size(m->nodes));
        if (m->pause_inf && informer_synced(m->pause_inf))
                pause_read(m);
        m->held_by_window = false;
        while (informer_iterate(m->nodes, &i, &rec))
                reconcile_node(m, rec);
        reconcile_devices(m);
        pause_linger(m);
        if (m->held_by_window) {
                int64_t now = timesrc_realtime(m->ts);

                /* the window opens: look again then (a second late: inside it) */
                schedule_retry(m, m->win_next > now ? (uint64_t)(m->win_next - now) + USEC_PER_SEC : 0);
        }
        /* A deleted Node is never reconciled again: its slot goes now (on the delete event,
         * and after every relist), or it would be renewed for ever. */
        if (m->slots)
                slots_release_unless(m->slots, node_known, m);
        if (!m->ready) {
                m->ready = true;
                emit(m, (struct drain_manager_event){ .kind = DRAIN_MANAGER_READY,
                                                      .n_nodes = informer_size(m->nodes) });
        }
        if (drain_manager_running(m) == 0)
                emit(m, (struct drain_manager_event){ .kind = DRAIN_MANAGER_IDLE });
}

/* ---- the Node watch ---- */

static void on_node_change(struct informer *inf, const void *rec, void *userdata) {
        struct drain_manager *m = userdata;

        if (rec && m->cb && m->cb->on_node && !m->stopping)
                m->cb->on_node(m, rec, m->userdata);
        schedule_reconcile(m);
}

static void on_node_update(struct informer *inf, const void *old, const void *rec, void *userdata) {
        on_node_change(inf, rec, userdata);
}

static void on_node_delete(struct informer *inf, const void *rec, void *userdata) {
        schedule_reconcile(userdata);
}

static void on_nodes_synced(struct informer *inf, void *userdata) {
        schedule_reconcile(userdata);
}

static void on_nodes_error(struct informer *inf, int error, const char *message, void *userdata) {
        emit(userdata, (struct drain_manager_event){
                               .kind = DRAIN_MANAGER_WATCH_ERROR, .error = error, .message = message });
}

/* With every Node cached the slots ask the cache; for one node they ask the API. */
static int node_exists(const char *node, void *userdata) {
        struct drain_manager *m = userdata;

        return m->nodes && informer_get(m->nodes, node) ? 1 : 0;
}

static void on_slots_changed(struct slots *s, void *userdata) {
        schedule_reconcile(userdata);
}

static void on_slots_closed(struct slots *s, void *userdata) {
        struct drain_manager *m = userdata;

        m->slots_closed = true;
        stop_check_soon(m);
}

static void on_announcer_idle(void *userdata) {
        stop_check_soon(userdata);
}

/* ---- device drains (o.device_health == DEVICE_HEALTH_DRAIN) ---- */

static void manager_device_free(void *p) {
        struct manager_device *md = p;

        if (!md)
                return;
        engine_free(md->engine);
        free(md->node);
        free(md->id);
        free(md->buf);
        free(md->said);
        free(md);
}

static char *device_key(const char *node, const char *id) {
        char *k;

        return asprintf(&k, "%s %s", node, id) < 0 ? NULL : k;
}

/* The want of a drain of device id on node (created the first time it is reported). */
static struct manager_device *manager_device_get(struct drain_manager *m, const char *node, const char *id) {
        _cleanup_free_ char *key = device_key(node, id);
        struct manager_device *md;
        char msg[256];

        if (!key)
                return NULL;
        md = hashmap_get(m->devices, key);
        if (md)
                return md;
        md = calloc(1, sizeof(*md));
        if (!md)
                return NULL;
        *md = (struct manager_device){ .manager = m, .profile = *m->o.profile };
        if (!(md->node = strdup(node)) || !(md->id = strdup(id)) || !(md->buf = malloc(strlen(id) + 1))) {
                manager_device_free(md);
                return NULL;
        }
        /* (the slices' names are the API server's to check: a device it accepted parses) */
        if (drain_device_parse(id, md->buf, &md->profile.devices[0], msg, sizeof(msg)) < 0) {
                log_debug("device health: %s, not drained", msg);
                manager_device_free(md);
                return NULL;
        }
        md->profile.n_devices = 1;
        md->profile.drivers[0] = NULL;
        md->profile.n_drivers = 0;
        drain_devices_scope(md->profile.devices, 1, md->profile.device_scope);
        md->asked_at = timesrc_realtime(m->ts);
        md->asked_at -= md->asked_at % (int64_t)USEC_PER_SEC;
        if (hashmap_put(m->devices, key, md, NULL) < 0) {
                manager_device_free(md);
                return NULL;
        }
        return md;
}

/* A device drain of node that has not ended: the node's slot stays for it. */
static bool node_device_pending(const struct drain_manager *m, const char *node) {
        const char *key;
        void *v;
        size_t i = 0;

        while (m->devices && hashmap_iterate(m->devices, &i, &key, &v)) {
                const struct manager_device *md = v;

                if (streq(md->node, node) &&
                    (md->running || (md->engine && !engine_idle(md->engine)) || (md->wanted && !md->done)))
                        return true;
        }
        return false;
}

/* How many other device drains of the same node run (or wind down); *ret_one: one of them. */
static size_t node_devices_running(const struct drain_manager *m, const struct manager_device *self,
                                   const struct manager_device **ret_one) {
        const char *key;
        void *v;
        size_t i = 0, n = 0;

        while (hashmap_iterate(m->devices, &i, &key, &v)) {
                const struct manager_device *md = v;

                if (md != self && streq(md->node, self->node) &&
                    (md->running || (md->engine && !engine_idle(md->engine)))) {
                        *ret_one = md;
                        n++;
                }
        }
        return n;
}

/* Why the drain of md waits, told once per reason (msg taken). It may quote the Node's
 * drainer.io/devices.* annotations (another drain's device list): one line, for the log. */
static void device_wait(struct manager_device *md, char *msg) {
        text_one_line(msg);
        if (!msg || streq_ptr(msg, md->said)) {
                free(msg);
                return;
        }
        free(md->said);
        md->said = msg;
        emit(md->manager,
             (struct drain_manager_event){
                     .kind = DRAIN_MANAGER_WAITING, .node = md->node, .device = md->id, .message = msg });
}

static void on_device_phase(struct engine *e, enum drain_phase phase, const char *message, void *userdata) {
        struct manager_device *md = userdata;

        emit(md->manager, (struct drain_manager_event){ .kind = DRAIN_MANAGER_PHASE,
                                                        .node = md->node,
                                                        .device = md->id,
                                                        .goal = ENGINE_GOAL_DRAIN,
                                                        .phase = phase,
                                                        .message = message });
}

static void on_device_notice(struct engine *e, const struct engine_notice *n, void *userdata) {
        struct manager_device *md = userdata;

        if (n->kind == ENGINE_NOTICE_DRAIN)
                metrics_add(metrics_family(DRAINER_METRIC_DRAINS_STARTED), METRIC_LABELS("device-health"),
                            1);
        announcer_notice_asked(md->manager->announcer, n, "device health (serve --on-unhealthy-device)");
}

static void on_device_finished(struct engine *e, const struct engine_summary *s, void *userdata) {
        struct manager_device *md = userdata;
        struct drain_manager *m = md->manager;
        struct drain_manager_event ev = { .node = md->node,
                                          .device = md->id,
                                          .goal = ENGINE_GOAL_DRAIN,
                                          .error = s->result,
                                          .message = s->message,
                                          .summary = s };

        md->running = false;
        if (s->result == 0) {
                md->failures = 0;
                md->done = true;
                ev.kind = DRAIN_MANAGER_DONE;
        } else {
                uint64_t d = backoff_exponential(RETRY_BASE_USEC, RETRY_CAP_USEC, ++md->failures);

                md->retry_at = timesrc_now(m->ts) + d;
                ev.kind = DRAIN_MANAGER_FAILED;
                ev.retry_usec = d;
                schedule_retry(m, d);
        }
        emit(m, ev);
        schedule_reconcile(m);
}

static void on_device_idle(struct engine *e, void *userdata) {
        struct manager_device *md = userdata;

        schedule_reconcile(md->manager);
        stop_check_soon(md->manager);
}

static int start_device_engine(struct manager_device *md) {
        static const struct engine_callbacks cb = {
                .on_phase = on_device_phase,
                .on_notice = on_device_notice,
                .on_finished = on_device_finished,
                .on_idle = on_device_idle,
        };
        struct drain_manager *m = md->manager;
        struct engine_options eo;
        int r;

        drain_profile_engine_options(&md->profile, md->node, ENGINE_GOAL_DRAIN, &eo);
        eo.units = m->o.units;
        eo.shared = m->cluster;
        engine_free(md->engine);
        md->engine = NULL;
        md->said = mfree(md->said);
        r = engine_new(m->client, m->transport, m->ts, &eo, &cb, md, &md->engine);
        if (r < 0)
                return r;
        md->stopped = false;
        md->running = true;
        emit(m, (struct drain_manager_event){ .kind = DRAIN_MANAGER_STARTED,
                                              .node = md->node,
                                              .device = md->id,
                                              .goal = ENGINE_GOAL_DRAIN });
        r = engine_start(md->engine);
        if (r < 0)
                md->running = false;
        return r;
}

/* One device: whether it can be forgotten (no longer reported, nothing of it running). */
static bool reconcile_device(struct manager_device *md) {
        struct drain_manager *m = md->manager;
        const struct node_rec *n = informer_get(m->nodes, md->node);
        _cleanup_(drain_state_done) struct drain_state st = {};
        _cleanup_free_ char *state_key = NULL, *conflict = NULL;
        const struct manager_device *other;
        uint64_t now = timesrc_now(m->ts);
        const char *phase;
        char *msg;
        int r;

        if (md->engine && !md->running && !md->stopped) {
                engine_stop(md->engine); /* finished: it watches nothing more */
                md->stopped = true;
        }
        if (md->running || (md->engine && !engine_idle(md->engine)))
                return false;
        if (!n || !md->wanted)
                return true;
        if (md->done)
                return false;
        if (drain_state_parse(n, &st, NULL) < 0 || st.request != DRAIN_REQUEST_NONE || st.has_phase) {
                device_wait(md, text_printf("waiting: the node itself is asked to drain or restore, or is "
                                            "drained (its drainer.io/ annotations); the device's drain "
                                            "follows once it is back in service"));
                return false;
        }
        if (asprintf(&state_key, "%s.%s", DRAINER_ANN_STATE, md->profile.device_scope) < 0)
                return false;
        phase = kv_get(n->annotations, n->n_annotations, state_key);
        if (streq_ptr(phase, drain_phase_to_string(DRAIN_PHASE_DRAINED))) {
                md->done = true; /* a drain of this device alone, drained before (by serve, or by hand) */
                device_wait(md, text_printf("already drained: it stays out of service until `drainer "
                                            "uncordon %s --device %s`",
                                            md->node, md->id));
                return false;
        }
        conflict = drain_devices_conflict(n, md->profile.device_scope, md->profile.devices, 1);
        if (conflict && streq(conflict, md->profile.devices[0].driver)) {
                device_wait(md, text_printf("waiting: a drain of its driver %s is in progress on the node",
                                            conflict));
                return false;
        }
        if (conflict) {
                md->done = true; /* another device drain holds it: out of service already, or soon */
                device_wait(md, text_printf("not drained again: the device drain of %s on the node has it",
                                            conflict));
                return false;
        }
        if (node_devices_running(m, md, &other) >= MAX(m->o.device_drains_per_node, 1u)) {
                device_wait(md, text_printf("waiting: %u device drain%s of a node at a time (%s drains now)",
                                            MAX(m->o.device_drains_per_node, 1u),
                                            m->o.device_drains_per_node > 1 ? "s" : "", other->id));
                return false;
        }
        if (md->retry_at > now) {
                schedule_retry(m, md->retry_at - now);
                return false;
        }
        /* a drain not started yet waits for the fleet's go; one in progress goes on */
        if (!phase && hold_reason(m, &msg)) {
                device_wait(md, msg);
                return false;
        }
        if (m->slots) {
                r = slots_acquire_ordered(m->slots, md->node, phase ? 0 : md->asked_at);
                if (r < 0) {
                        device_wait(md, text_printf("cannot take a drain slot (Leases in namespace %s): %s; "
                                                    "retrying",
                                                    m->o.lease_namespace, strerror(-r)));
                        md->retry_at = now + RETRY_BASE_USEC;
                        schedule_retry(m, RETRY_BASE_USEC);
                        return false;
                }
                if (r == 0) {
                        if (slots_queued(m->slots, md->node))
                                device_wait(md,
                                            text_printf("waiting for a drain slot (--max-parallel); slots "
                                                        "go in request order"));
                        return false;
                }
        }
        md->retry_at = 0;
        r = start_device_engine(md);
        if (r < 0)
                emit(m, (struct drain_manager_event){ .kind = DRAIN_MANAGER_START_FAILED,
                                                      .node = md->node,
                                                      .device = md->id,
                                                      .goal = ENGINE_GOAL_DRAIN,
                                                      .error = r });
        return false;
}

static void reconcile_devices(struct drain_manager *m) {
        _cleanup_free_ char **gone = NULL;
        size_t i = 0, n_gone = 0;
        const char *key;
        void *v;

        if (!m->devices || !hashmap_size(m->devices))
                return;
        gone = calloc(hashmap_size(m->devices), sizeof(char *));
        if (!gone)
                return;
        while (hashmap_iterate(m->devices, &i, &key, &v))
                if (reconcile_device(v) && (gone[n_gone] = strdup(key)))
                        n_gone++;
        for (i = 0; i < n_gone; i++) {
                manager_device_free(hashmap_remove(m->devices, gone[i]));
                free(gone[i]);
        }
}

/* ---- device health (o.device_health) ---- */

static const struct node_rec *health_node(const char *name, void *userdata) {
        return drain_manager_node(userdata, name);
}

static void on_health_change(struct device_health *d, const struct device_health_change *c, void *userdata) {
        struct drain_manager *m = userdata;
        struct manager_device *md;

        emit(m, (struct drain_manager_event){ .kind = DRAIN_MANAGER_DEVICE,
                                              .node = c->node,
                                              .message = c->message,
                                              .unhealthy = c->unhealthy });
        if (!m->devices || !c->published || m->stopping)
                return;
        if (c->unhealthy && (md = manager_device_get(m, c->node, c->device))) {
                md->wanted = true;
                md->done = false;
                md->said = mfree(md->said);
        } else if (!c->unhealthy) {
                _cleanup_free_ char *key = device_key(c->node, c->device);

                md = key ? hashmap_get(m->devices, key) : NULL;
                if (md)
                        md->wanted = false; /* a drain in progress ends as it would; none starts */
        }
        schedule_reconcile(m);
}

static void on_health_error(struct device_health *d, const char *what, int error, const char *message,
                            void *userdata) {
        _cleanup_free_ char *msg = NULL;

        if (asprintf(&msg, "device health, %s: %s", what, message ? message : strerror(-error)) < 0)
                msg = NULL;
        emit(userdata, (struct drain_manager_event){
                               .kind = DRAIN_MANAGER_WATCH_ERROR, .error = error, .message = msg });
}

static void on_health_stopped(struct device_health *d, void *userdata) {
        stop_check_soon(userdata);
}

/* ---- lifecycle ---- */

static void on_stop_timer(struct dtimer *t);

int drain_manager_new(struct kube_client *client, struct transport *transport, struct timesrc *ts,
                      const struct drain_manager_options *o, const struct drain_manager_callbacks *cb,
                      void *userdata, struct drain_manager **ret) {
        static const struct informer_handlers h = {
                .on_add = on_node_change,
                .on_update = on_node_update,
                .on_delete = on_node_delete,
                .on_synced = on_nodes_synced,
                .on_error = on_nodes_error,
        };
        _cleanup_(drain_manager_freep) struct drain_manager *m = NULL;
        _cleanup_free_ char *fs = NULL;
        int r;

        assert(o && o->profile);
        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        *m = (struct drain_manager){
                .client = client, .transport = transport, .ts = ts, .o = *o, .cb = cb, .userdata = userdata
        };
        m->managed_nodes = hashmap_new(MAX_NODES);
        if (!m->managed_nodes)
                return -ENOMEM;
        r = announcer_new(client, ts, o->identity, &m->announcer);
        if (r < 0)
                return r;
        announcer_set_idle_fn(m->announcer, on_announcer_idle, m);
        if (o->node && asprintf(&fs, "metadata.name=%s", o->node) < 0)
                return -ENOMEM;
        /* With every node the next drain or restore is seconds away: claims and budgets stay
         * watched a while after the last engine, so that it borrows a warm cache instead of
         * listing every claim again, and so do a node's own pods for the restore that follows
         * its drain; the slices are one watch of all of them, as the claims (two requests a
         * node less). A manager of one node that is done lets go of them at once. */
        r = cluster_view_new(client, ts,
                             &(const struct cluster_view_options){
                                     .nodes_field_selector = fs,
                                     .linger_usec = o->node ? 0 : SHARED_LINGER_USEC,
                                     .share_slices = !o->node,
                             },
                             &m->cluster);
        if (r < 0)
                return r;
        r = cluster_view_subscribe_nodes(m->cluster, &h, m);
        if (r < 0)
                return r;
        m->subscribed = true;
        if ((r = dtimer_init(&m->reconcile_timer, ts, on_reconcile_timer)) < 0)
                return r;
        if ((r = dtimer_init(&m->retry_timer, ts, on_retry_timer)) < 0 ||
            (r = dtimer_init(&m->stop_timer, ts, on_stop_timer)) < 0) {
                /* the three go together */
                dtimer_done(&m->reconcile_timer);
                if (m->retry_timer.src)
                        dtimer_done(&m->retry_timer);
                return r;
        }
        m->timers_ready = true;
        if (o->max_parallel > 0 || o->max_parallel_percent > 0) {
                struct slots_options so = {
                        .ns = o->lease_namespace,
                        /* a percentage: set once the nodes are counted (set_limit) */
                        .max = o->max_parallel_percent ? 1 : o->max_parallel,
                        .identity = o->identity,
                        .lease_duration_usec = o->lease_duration_usec,
                        .node_exists = o->node ? NULL : node_exists,
                };

                r = slots_new(client, ts, &so, on_slots_changed, m, &m->slots);
                if (r < 0)
                        return r;
        }
        if (o->device_health == DEVICE_HEALTH_DRAIN && !(m->devices = hashmap_new(MAX_NODES)))
                return -ENOMEM;
        if (o->device_health > DEVICE_HEALTH_OFF) {
                static const struct device_health_handlers dh = {
                        .node = health_node,
                        .on_change = on_health_change,
                        .on_error = on_health_error,
                        .on_stopped = on_health_stopped,
                };

                r = device_health_new(
                        client, ts, m->announcer,
                        &(const struct device_health_options){ .node = o->node, .action = o->device_health },
                        &dh, m, &m->health);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(m);
        return 0;
}

int drain_manager_start(struct drain_manager *m) {
        int r;

        r = cluster_view_start(m->cluster);
        if (r < 0)
                return r;
        m->nodes = cluster_view_nodes(m->cluster);
        return m->health ? device_health_start(m->health) : 0;
}

bool drain_manager_synced(const struct drain_manager *m) {
        return m->nodes && !m->stopping && informer_synced(m->nodes);
}

bool drain_manager_ready(const struct drain_manager *m, char *reason, size_t size) {
        struct kube_client_stats cs;

        if (!drain_manager_synced(m)) {
                snprintf(reason, size, "the node watch has not synced yet");
                return false;
        }
        kube_client_get_stats(m->client, &cs);
        if (cs.last_error_usec > cs.last_ok_usec) {
                snprintf(reason, size, "the API server did not answer the last request");
                return false;
        }
        return true;
}

const struct drain_manager_options *drain_manager_options(const struct drain_manager *m) {
        return &m->o;
}

const struct node_rec *drain_manager_node(const struct drain_manager *m, const char *name) {
        return m->nodes ? informer_get(m->nodes, name) : NULL;
}

static void on_cluster_closed(void *userdata) {
        struct drain_manager *m = userdata;

        m->cluster = NULL;
        m->stopped = true;
        if (m->cb && m->cb->on_stopped)
                m->cb->on_stopped(m, m->userdata);
}

static bool everything_idle(struct drain_manager *m) {
        const char *key;
        void *v;
        size_t i = 0;

        if ((m->slots && !m->slots_closed) || !announcer_idle(m->announcer) || m->count_call ||
            !device_health_idle(m->health) || (m->pause_inf && !informer_idle(m->pause_inf)) ||
            (m->pause_old && !informer_idle(m->pause_old)))
                return false;
        while (hashmap_iterate(m->managed_nodes, &i, &key, &v)) {
                struct manager_node *mn = v;

                if ((mn->engine && !engine_idle(mn->engine)) || mn->patch || mn->request_patch)
                        return false;
        }
        i = 0;
        while (m->devices && hashmap_iterate(m->devices, &i, &key, &v))
                if (((struct manager_device *)v)->engine &&
                    !engine_idle(((struct manager_device *)v)->engine))
                        return false;
        return true;
}

/* Stopping: once the engines, patches, Events and slots have ended, the engines go
 * (nobody borrows from the cluster view any more) and the view closes. Looked at after
 * the stop and after each of those ended (stop_check_soon), never on a tick. */
static void on_stop_timer(struct dtimer *t) {
        struct drain_manager *m = container_of(t, struct drain_manager, stop_timer);

        if (!everything_idle(m))
                return;
        m->closing = true;
        hashmap_free(m->managed_nodes, manager_node_free);
        m->managed_nodes = NULL;
        hashmap_free(m->devices, manager_device_free);
        m->devices = NULL;
        m->nodes = NULL;
        if (m->subscribed) {
                cluster_view_unsubscribe_nodes(m->cluster, m);
                m->subscribed = false;
        }
        cluster_view_close(m->cluster, on_cluster_closed, m);
}

void drain_manager_stop(struct drain_manager *m) {
        const char *key;
        void *v;
        size_t i = 0;

        if (m->stopping)
                return;
        m->stopping = true;
        while (hashmap_iterate(m->managed_nodes, &i, &key, &v)) {
                struct manager_node *mn = v;

                if (mn->engine)
                        engine_stop(mn->engine);
                mn->running = false;
                if (mn->patch)
                        kube_call_cancel(mn->patch);
                if (mn->request_patch)
                        kube_call_cancel(mn->request_patch);
        }
        i = 0;
        while (m->devices && hashmap_iterate(m->devices, &i, &key, &v)) {
                struct manager_device *md = v;

                if (md->engine)
                        engine_stop(md->engine);
                md->running = false;
        }
        if (m->slots)
                slots_close(m->slots, 0, on_slots_closed, m);
        if (m->pause_inf)
                informer_stop(m->pause_inf);
        if (m->pause_old)
                informer_stop(m->pause_old);
        if (m->count_call)
                kube_call_cancel(m->count_call);
        if (m->health)
                device_health_stop(m->health);
        dtimer_stop(&m->reconcile_timer);
        m->reconcile_armed = false;
        dtimer_stop(&m->retry_timer);
        dtimer_start(&m->stop_timer, 0);
}

void drain_manager_free(struct drain_manager *m) {
        if (!m)
                return;
        /* Freed without a stop that ended (a failed new): nothing of it ran on the loop. */
        hashmap_free(m->managed_nodes, manager_node_free);
        hashmap_free(m->devices, manager_device_free);
        if (m->cluster) {
                if (m->subscribed)
                        cluster_view_unsubscribe_nodes(m->cluster, m);
                cluster_view_close(m->cluster, NULL, NULL);
        }
        slots_free(m->slots);
        device_health_free(m->health);
        informer_free(m->pause_inf);
        informer_free(m->pause_old);
        free(m->pause_value);
        if (m->timers_ready) {
                dtimer_done(&m->reconcile_timer);
                dtimer_done(&m->retry_timer);
                dtimer_done(&m->stop_timer);
        }
        announcer_free(m->announcer);
        free(m);
}
