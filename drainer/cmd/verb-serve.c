/* `drainer serve`: the daemon. Watches its Node (or every Node with
 * --all-nodes) for drainer.io/request and runs the drain engine for each node
 * that asks; removing the request undoes a drain. Optional cluster-wide slots
 * (--max-parallel), systemd notify/watchdog, and a logind shutdown inhibitor
 * (--on-shutdown). An idle daemon holds one watch and sends nothing else. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app.h"
#include "drainargs.h"
#include "drainer/announcer.h"
#include "drainer/backoff.h"
#include "drainer/client.h"
#include "drainer/engine.h"
#include "drainer/hashmap.h"
#include "drainer/httpd.h"
#include "drainer/informer.h"
#include "drainer/json.h"
#include "drainer/log.h"
#include "drainer/nodeview.h"
#include "drainer/notify.h"
#include "drainer/objects.h"
#include "drainer/slots.h"
#include "drainer/state.h"
#include "drainer/sysbus.h"
#include "drainer/timesrc.h"
#include "verbs.h"

#define DRAINER_ANN_SHUTDOWN_BOOT "drainer.io/shutdown-boot-id"
#define RETRY_BASE_USEC           (30 * USEC_PER_SEC)
#define PATCH_RETRY_USEC          (2 * USEC_PER_SEC) /* a waiting patch that failed, not a 409 */
#define RETRY_CAP_USEC            (300 * USEC_PER_SEC)
#define SHARED_LINGER_USEC        (30 * USEC_PER_SEC)

enum {
        OPT_NODE = 0x200,
        OPT_ALL_NODES,
        OPT_MAX_PARALLEL,
        OPT_LEASE_NS,
        OPT_ON_SHUTDOWN,
        OPT_IDENTITY,
        OPT_METRICS_ADDR,
};

struct serve_opts {
        const char *node;
        bool all_nodes;
        unsigned max_parallel;
        const char *lease_ns;
        bool on_shutdown;
        const char *identity;
        const char *metrics_addr; /* NULL: HTTPD_DEFAULT_ADDRESS; "": no HTTP endpoint */
};

/* One node this daemon acts for. */
struct managed {
        struct server *srv;
        char *node;
        struct engine *engine; /* owned; running or finishing */
        enum engine_goal goal;
        bool running, stopped;
        unsigned failures;
        uint64_t retry_at; /* monotonic µs; 0 = now */
        char *waiting_msg; /* last "waiting" message written, to write it once */
        struct kube_call *patch;
        /* The Node version the waiting patch in flight was made against, and one the API
         * server refused it on (409: the Node changed since): not written again on that
         * version, the watch brings the next. */
        char *patch_rv, *stale_rv;
        /* Refused because the Node records an action this configuration does not allow:
         * the drainer.io/ annotations then (refused_key), not retried until they change. */
        char *refused_key;
};

struct server {
        struct app *app;
        struct serve_opts o;
        struct drain_args *a;
        /* The Node watch (every node with --all-nodes), and the claims and budgets every
         * engine of this daemon borrows while one runs (one watch each, whatever
         * --max-parallel). Owned; nodes is borrowed from it. */
        struct cluster_view *cluster;
        struct informer *nodes;
        bool cluster_closed;
        struct hashmap *managed; /* node -> struct managed */
        struct slots *slots;
        struct notifier *notifier;
        struct sysbus *bus;
        struct dtimer kick, retry, shutdown_deadline;
        bool kick_armed, ready, stopping, done;
        char boot_id[64];
        bool shutdown_active;
        uv_signal_t sigint, sigterm;
        int result;
        struct httpd *httpd;         /* /metrics, /healthz, /readyz; NULL when disabled */
        struct announcer *announcer; /* owned: every node's Events, --identity their instance */
};

static void serve_reconcile(struct server *srv);

static void kick(struct server *srv) {
        if (srv->stopping || srv->kick_armed)
                return;
        srv->kick_armed = true;
        dtimer_start(&srv->kick, 0);
}

/* Re-evaluates shortly: for engines winding down (their cancelled calls finish on the
 * next turns of the loop). */
static void kick_later(struct server *srv) {
        if (!srv->stopping && !srv->retry.armed)
                dtimer_start(&srv->retry, 50 * USEC_PER_MSEC);
}

static void on_kick(struct dtimer *t) {
        struct server *srv = container_of(t, struct server, kick);

        srv->kick_armed = false;
        serve_reconcile(srv);
}

static void on_retry(struct dtimer *t) {
        serve_reconcile(container_of(t, struct server, retry));
}

static void managed_free(void *p) {
        struct managed *m = p;

        if (!m)
                return;
        engine_free(m->engine);
        free(m->node);
        free(m->waiting_msg);
        free(m->patch_rv);
        free(m->stale_rv);
        free(m->refused_key);
        free(m);
}

static struct managed *managed_get(struct server *srv, const char *node) {
        struct managed *m = hashmap_get(srv->managed, node);

        if (m)
                return m;
        m = calloc(1, sizeof(*m));
        if (!m)
                return NULL;
        m->srv = srv;
        m->node = strdup(node);
        if (!m->node || hashmap_put(srv->managed, node, m, NULL) < 0) {
                managed_free(m);
                return NULL;
        }
        return m;
}

/* ---- Node patches of the daemon itself (request, waiting state) ---- */

static void on_serve_patch(const struct kube_result *res, void *userdata) {
        struct managed *m = userdata;

        m->patch = NULL;
        if (res->error >= 0 || res->error == -ECANCELED) {
                m->patch_rv = mfree(m->patch_rv);
                m->stale_rv = mfree(m->stale_rv);
                return kick(m->srv);
        }
        /* Not written, so written again: a conflict once the watch shows the newer Node, any
         * other failure after a pause. */
        m->waiting_msg = mfree(m->waiting_msg);
        if (res->error == -EBUSY) {
                log_debug("node %s: the Node changed under the annotations' patch (409), writing them "
                          "again on the newer version",
                          m->node);
                free(m->stale_rv);
                m->stale_rv = TAKE_PTR(m->patch_rv);
                return kick(m->srv);
        }
        log_warning("node %s: updating annotations failed: %s, retrying", m->node,
                    res->message ? res->message : strerror(-res->error));
        m->patch_rv = mfree(m->patch_rv);
        if (!m->srv->stopping &&
            (!m->srv->retry.armed || m->srv->retry.due > timesrc_now(m->srv->app->ts) + PATCH_RETRY_USEC))
                dtimer_start(&m->srv->retry, PATCH_RETRY_USEC);
}

static void send_patch(struct managed *m, char *body) {
        _cleanup_free_ char *path = NULL;

        if (!body)
                return;
        if (asprintf(&path, "/api/v1/nodes/%s", m->node) >= 0)
                (void)kube_patch(m->srv->app->client, path, KUBE_PATCH_MERGE, body, on_serve_patch, m,
                                 &m->patch);
        free(body);
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
        struct managed *m = userdata;

        log_set_field("PHASE", drain_phase_to_string(phase));
        log_info("node %s: %s%s%s", m->node, drain_phase_to_string(phase), message ? ": " : "",
                 strempty(message));
        if (m->srv->notifier)
                notifier_status(m->srv->notifier, "node %s: %s", m->node, drain_phase_to_string(phase));
}

static void on_engine_notice(struct engine *e, const struct engine_notice *n, void *userdata) {
        struct managed *m = userdata;

        announcer_notice(m->srv->announcer, n);
}

static void on_engine_finished(struct engine *e, const struct engine_summary *s, void *userdata) {
        struct managed *m = userdata;
        struct server *srv = m->srv;

        m->running = false;
        m->refused_key = mfree(m->refused_key);
        if (s->result == 0) {
                m->failures = 0;
                log_info("node %s: %s", m->node, strna(s->message));
        } else if (s->result == -EPERM && s->needs_flag &&
                   (m->refused_key = refusal_key(informer_get(srv->nodes, m->node)))) {
                /* Retrying cannot help: only another configuration (a restart with
                 * s->needs_flag) or other annotations can. Reported once (the engine wrote
                 * drainer.io/message, the announcer a DrainerBlocked Event); wait for a change. */
                log_error("node %s: %s; waiting until its drainer.io/ annotations change", m->node,
                          strna(s->message));
        } else {
                /* Without jitter: one engine per node, restarted at most every 30 s. */
                uint64_t d = backoff_exponential(RETRY_BASE_USEC, RETRY_CAP_USEC, ++m->failures);

                m->retry_at = timesrc_now(srv->app->ts) + d;
                log_error("node %s: %s (%s); retrying in %llu s", m->node, strna(s->message),
                          s->result == -EPERM ? "refused" : strerror(-s->result),
                          (unsigned long long)(d / USEC_PER_SEC));
                dtimer_start(&srv->retry, d);
        }
        if (srv->notifier)
                notifier_status(srv->notifier, "node %s: %s", m->node,
                                s->result == 0 ? (m->goal == ENGINE_GOAL_DRAIN ? "drained" : "in service")
                                               : "failed, retrying");
        kick(srv);
}

static int start_engine(struct managed *m, enum engine_goal goal) {
        struct server *srv = m->srv;
        static const struct engine_callbacks cb = {
                .on_phase = on_engine_phase,
                .on_notice = on_engine_notice,
                .on_finished = on_engine_finished,
        };
        struct engine_options eo;
        int r;

        drain_profile_engine_options(&srv->a->profile, m->node, goal, &eo);
        eo.units = sysbus_units(srv->bus);
        eo.shared = srv->cluster;
        engine_free(m->engine);
        m->engine = NULL;
        r = engine_new(srv->app->client, srv->app->transport, srv->app->ts, &eo, &cb, m, &m->engine);
        if (r < 0)
                return r;
        m->stopped = false;
        m->goal = goal;
        m->running = true;
        log_info("node %s: %s requested", m->node, goal == ENGINE_GOAL_DRAIN ? "drain" : "uncordon");
        r = engine_start(m->engine);
        if (r < 0)
                m->running = false;
        return r;
}

/* What the node's annotations ask for: -1 nothing, else an engine goal. */
static int desired_goal(const struct node_rec *n, const struct drain_state *st) {
        if (st->request == DRAIN_REQUEST_DRAIN)
                return st->has_phase && st->phase == DRAIN_PHASE_DRAINED ? -1 : ENGINE_GOAL_DRAIN;
        if (st->request == DRAIN_REQUEST_UNCORDON)
                return ENGINE_GOAL_UNCORDON;
        /* No request but state left: the request was removed during a drain, which means undo. */
        if (st->has_phase)
                return ENGINE_GOAL_UNCORDON;
        return -1;
}

/* Whether node is one of the ", "-separated holders. */
static bool holders_include(const char *holders, const char *node) {
        size_t len = strlen(node);

        for (const char *p = holders; (p = strstr(p, node)); p += len)
                if ((p == holders || p[-1] == ' ') && (p[len] == ',' || p[len] == 0))
                        return true;
        return false;
}

/* drainer.io/state=waiting with msg (taken) on the Node, once per message: why the
 * drain has not started. A Node already in a later phase (a drain resumed, or a phase
 * written by hand) keeps it: only drainer.io/message says why it waits; "waiting"
 * would claim that nothing was changed yet. */
static void write_waiting_msg(struct managed *m, const struct node_rec *n, bool keep_phase, char *msg) {
        char *body = NULL;

        if (!msg)
                return;
        if (m->patch || streq_ptr(msg, m->waiting_msg) ||
            (m->stale_rv && streq_ptr(m->stale_rv, n->resource_version)) ||
            (keep_phase ? drain_patch_message(n, msg, &body)
                        : drain_patch_phase(n, DRAIN_PHASE_WAITING, timesrc_realtime(m->srv->app->ts), msg,
                                            &body)) < 0) {
                free(msg);
                return;
        }
        free(m->patch_rv);
        m->patch_rv = n->resource_version ? strdup(n->resource_version) : NULL;
        free(m->waiting_msg);
        m->waiting_msg = msg;
        log_info("node %s: %s", m->node, m->waiting_msg);
        send_patch(m, body);
}

static void write_waiting(struct managed *m, const struct node_rec *n, bool keep_phase) {
        char *msg;

        if (asprintf(&msg, "waiting for one of %u drain slots (held by %s)", m->srv->o.max_parallel,
                     slots_holders(m->srv->slots)) >= 0)
                write_waiting_msg(m, n, keep_phase, msg);
}

static void reconcile_node(struct server *srv, const struct node_rec *n) {
        _cleanup_(drain_state_done) struct drain_state st = {};
        _cleanup_free_ char *err = NULL;
        struct managed *m = hashmap_get(srv->managed, n->name);
        uint64_t now = timesrc_now(srv->app->ts);
        int goal, r;

        if (m && m->engine && !m->running && !m->stopped) {
                /* A finished engine watches nothing more: its pods, slices, and its hold on the
                 * shared claims and budgets, go (a drained node waits with one Node watch). */
                engine_stop(m->engine);
                m->stopped = true;
        }
        if (drain_state_parse(n, &st, &err) < 0) {
                /* The engine's run reports this on the Node (message, Event); here just log, once. */
                if (!m || !m->waiting_msg || !streq(m->waiting_msg, err ? err : "")) {
                        log_error("node %s: %s", n->name, strna(err));
                        if ((m = managed_get(srv, n->name))) {
                                free(m->waiting_msg);
                                m->waiting_msg = err ? strdup(err) : NULL;
                        }
                }
                return;
        }
        goal = desired_goal(n, &st);

        /* Slots: held from the first change until the node is back in service. */
        if (srv->slots && (st.has_phase && st.phase != DRAIN_PHASE_WAITING))
                (void)slots_acquire(srv->slots, n->name); /* keeps it renewed */
        if (srv->slots && goal < 0 && !st.has_phase && slots_held(srv->slots, n->name))
                slots_release(srv->slots, n->name);

        if (goal < 0) {
                if (m && !m->running && !m->patch) {
                        /* Done with this node: forget it (keeps the map small in cluster mode). */
                        if (m->engine && !m->stopped) {
                                engine_stop(m->engine);
                                m->stopped = true;
                        }
                        if (!m->engine || engine_idle(m->engine))
                                managed_free(hashmap_remove(srv->managed, n->name));
                        else
                                kick_later(srv);
                }
                return;
        }
        if (!m && !(m = managed_get(srv, n->name)))
                return;
        if (m->running) {
                if (m->goal != (enum engine_goal)goal) {
                        /* The request changed under a running engine: stop it, start the other later. */
                        log_info("node %s: request changed, switching to %s", n->name,
                                 goal == ENGINE_GOAL_DRAIN ? "drain" : "uncordon");
                        engine_stop(m->engine);
                        m->stopped = true;
                        m->running = false;
                        m->retry_at = 0;
                        kick_later(srv);
                }
                return;
        }
        if (m->engine && !m->stopped) {
                /* A finished engine still watches: stop it before starting the next. */
                engine_stop(m->engine);
                m->stopped = true;
        }
        if (m->engine && !engine_idle(m->engine)) {
                kick_later(srv);
                return; /* the previous engine is still winding down */
        }
        if (m->refused_key) {
                _cleanup_free_ char *key = refusal_key(n);

                if (!key || streq(key, m->refused_key))
                        return; /* nothing changed that could make it allowed */
                m->refused_key = mfree(m->refused_key);
                m->failures = 0;
                m->retry_at = 0;
        }
        if (m->goal == (enum engine_goal)goal && m->retry_at > now) {
                dtimer_start(&srv->retry, m->retry_at - now);
                return;
        }
        if (m->goal != (enum engine_goal)goal)
                m->failures = 0;
        /* A drain in any phase holds a slot before it acts: a phase does not prove one is
         * held (it may be written by hand, or the slot lost while this daemon was down). A
         * drain resumed with its Lease still on the server adopts it at once. */
        if (goal == ENGINE_GOAL_DRAIN && srv->slots) {
                bool keep_phase = st.has_phase && st.phase != DRAIN_PHASE_WAITING;

                r = slots_acquire(srv->slots, n->name);
                if (r < 0) {
                        /* No slot, no drain: it waits, and says why on the Node too (whoever
                         * annotated it reads there, not this log), once per reason. */
                        char *msg = NULL;
                        int k;

                        if (r == -ENOENT)
                                k = asprintf(&msg,
                                             "cannot take a drain slot: namespace %s not found (the Leases "
                                             "drainer-slot-* of --max-parallel %u live there): create it, "
                                             "name another with --lease-namespace, or give --max-parallel 0 "
                                             "for no limit",
                                             srv->o.lease_ns, srv->o.max_parallel);
                        else if (r == -EACCES)
                                k = asprintf(
                                        &msg,
                                        "cannot take a drain slot: forbidden to write Leases in "
                                        "namespace %s (grant leases get/list/watch/create/update there, "
                                        "as deploy/ does, or give --max-parallel 0 for no limit)",
                                        srv->o.lease_ns);
                        else
                                k = asprintf(&msg, "cannot take a drain slot (Leases in namespace %s): %s",
                                             srv->o.lease_ns, strerror(-r));
                        if (k < 0)
                                msg = NULL;
                        else if (!m || !streq_ptr(msg, m->waiting_msg))
                                log_error("node %s: %s", n->name, msg);
                        if (m)
                                write_waiting_msg(m, n, keep_phase, msg);
                        else
                                free(msg);
                        m->retry_at = now + RETRY_BASE_USEC;
                        dtimer_start(&srv->retry, RETRY_BASE_USEC);
                        return;
                }
                if (r == 0) {
                        const char *holders = slots_holders(srv->slots);

                        /* Not while our own attempt is landing: the lease watch may show the
                         * node as holder before the create/update call returns. */
                        if (!slots_held(srv->slots, n->name) && holders && *holders &&
                            !holders_include(holders, n->name))
                                write_waiting(m, n, keep_phase);
                        return;
                }
        }
        m->retry_at = 0;
        r = start_engine(m, goal);
        if (r < 0)
                log_error("node %s: cannot start the drain engine: %s", n->name, strerror(-r));
}

static bool node_known(const char *node, void *userdata) {
        struct server *srv = userdata;

        return informer_get(srv->nodes, node);
}

static void serve_reconcile(struct server *srv) {
        const void *rec;
        size_t i = 0, active = 0;

        if (srv->stopping || !informer_synced(srv->nodes))
                return;
        while (informer_iterate(srv->nodes, &i, &rec))
                reconcile_node(srv, rec);
        /* A deleted Node is never reconciled again: its slot goes now (on the delete event,
         * and after every relist), or it would be renewed for ever. */
        if (srv->slots)
                slots_release_unless(srv->slots, node_known, srv);
        i = 0;
        {
                const char *key;
                void *v;

                while (hashmap_iterate(srv->managed, &i, &key, &v))
                        active += ((struct managed *)v)->running;
        }
        if (!srv->ready) {
                srv->ready = true;
                if (srv->notifier)
                        notifier_ready(srv->notifier);
                log_info("serving %s (%zu node%s watched)", srv->o.all_nodes ? "all nodes" : srv->o.node,
                         informer_size(srv->nodes), informer_size(srv->nodes) == 1 ? "" : "s");
        }
        if (srv->notifier && active == 0)
                notifier_status(srv->notifier, "idle: watching %s",
                                srv->o.all_nodes ? "all nodes" : srv->o.node);
}

/* ---- --on-shutdown ---- */

static void read_boot_id(char *buf, size_t size) {
        FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

        buf[0] = 0;
        if (!f)
                return;
        if (fgets(buf, (int)size, f))
                buf[strcspn(buf, "\n")] = 0;
        fclose(f);
}

/* A shutdown started: ask for a drain of our node, recording this boot, so the
 * daemon of the next boot knows to restore and uncordon by itself. */
static void on_shutdown(bool active, void *userdata) {
        struct server *srv = userdata;
        const struct node_rec *n = informer_get(srv->nodes, srv->o.node);
        _cleanup_(cJSON_Deletep) cJSON *p = cJSON_CreateObject();
        struct managed *m;
        cJSON *ann;

        srv->shutdown_active = active;
        if (!active) {
                log_info("shutdown cancelled");
                dtimer_stop(&srv->shutdown_deadline);
                return;
        }
        {
                /* logind waits at most InhibitDelayMaxUSec for us: let go a bit before it. */
                uint64_t max = 0;

                if (sysbus_inhibit_delay_max(srv->bus, &max) < 0 || max == 0)
                        max = 5 * 60 * USEC_PER_SEC;
                dtimer_start(&srv->shutdown_deadline,
                             max > 2 * USEC_PER_SEC ? max - 2 * USEC_PER_SEC : max / 2);
        }
        log_info("shutdown: draining node %s before it goes down", srv->o.node);
        if (!n || !p || !(m = managed_get(srv, srv->o.node))) {
                sysbus_release_inhibitor(srv->bus);
                return;
        }
        ann = cJSON_AddObjectToObject(cJSON_AddObjectToObject(p, "metadata"), "annotations");
        cJSON_AddStringToObject(ann, DRAINER_ANN_REQUEST, "drain");
        cJSON_AddStringToObject(ann, DRAINER_ANN_SHUTDOWN_BOOT, srv->boot_id);
        send_patch(m, cJSON_PrintUnformatted(p));
}

static void on_shutdown_deadline(struct dtimer *t) {
        struct server *srv = container_of(t, struct server, shutdown_deadline);

        if (srv->bus && sysbus_holds_inhibitor(srv->bus)) {
                log_warning("shutdown: logind's inhibit delay is running out before node %s is drained; "
                            "releasing "
                            "the lock (after the reboot the daemon restores the node)",
                            srv->o.node);
                sysbus_release_inhibitor(srv->bus);
        }
}

static void on_inhibit_result(int error, const char *message, void *userdata) {
        if (error < 0)
                log_error(
                        "--on-shutdown: logind refused the shutdown inhibitor lock: %s; a shutdown will not "
                        "wait for the drain",
                        message ? message : strerror(-error));
        else
                log_info("holding a logind shutdown delay lock: a shutdown drains this node first");
}

/* The drain for a shutdown is done (or failed): let the shutdown go on. */
static void check_shutdown_done(struct server *srv) {
        const struct node_rec *n;
        _cleanup_(drain_state_done) struct drain_state st = {};

        if (!srv->shutdown_active || !srv->bus || !sysbus_holds_inhibitor(srv->bus))
                return;
        n = informer_get(srv->nodes, srv->o.node);
        if (!n || drain_state_parse(n, &st, NULL) < 0)
                return sysbus_release_inhibitor(srv->bus);
        if (st.has_phase && st.phase == DRAIN_PHASE_DRAINED) {
                log_info("node %s drained: releasing the shutdown inhibitor", srv->o.node);
                sysbus_release_inhibitor(srv->bus);
        }
}

/* After a reboot: a drain we asked for at shutdown of another boot is undone. */
static void resume_after_reboot(struct server *srv, const struct node_rec *n) {
        const char *boot = kv_get(n->annotations, n->n_annotations, DRAINER_ANN_SHUTDOWN_BOOT);
        _cleanup_(cJSON_Deletep) cJSON *p = NULL;
        struct managed *m;
        cJSON *ann;

        if (!boot || streq(boot, srv->boot_id))
                return;
        log_info("node %s was drained for a shutdown (boot %s): restoring it", n->name, boot);
        if (!(m = managed_get(srv, n->name)) || !(p = cJSON_CreateObject()))
                return;
        ann = cJSON_AddObjectToObject(cJSON_AddObjectToObject(p, "metadata"), "annotations");
        cJSON_AddStringToObject(ann, DRAINER_ANN_REQUEST, "uncordon");
        cJSON_AddNullToObject(ann, DRAINER_ANN_SHUTDOWN_BOOT);
        send_patch(m, cJSON_PrintUnformatted(p));
}

/* ---- node informer ---- */

static void on_node_change(struct informer *inf, const void *rec, void *userdata) {
        struct server *srv = userdata;

        if (srv->o.on_shutdown && rec && streq_ptr(((const struct node_rec *)rec)->name, srv->o.node)) {
                if (!srv->shutdown_active)
                        resume_after_reboot(srv, rec);
                check_shutdown_done(srv);
        }
        kick(srv);
}

static void on_node_update(struct informer *inf, const void *old, const void *rec, void *userdata) {
        on_node_change(inf, rec, userdata);
}

static void on_node_delete(struct informer *inf, const void *rec, void *userdata) {
        kick(userdata);
}

static void on_nodes_synced(struct informer *inf, void *userdata) {
        kick(userdata);
}

static void on_nodes_error(struct informer *inf, int error, const char *message, void *userdata) {
        log_warning("watching nodes: %s, retrying", message ? message : strerror(-error));
}

static void on_serve_signal(uv_signal_t *h, int signum) {
        struct server *srv = h->data;

        log_info("%s: stopping (drains in progress resume from the Nodes' annotations)",
                 signum == SIGTERM ? "SIGTERM" : "SIGINT");
        srv->done = true;
}

/* Cluster mode caches every Node; per-node mode lets the slots module ask the API. */
static int node_exists(const char *node, void *userdata) {
        struct server *srv = userdata;

        return informer_get(srv->nodes, node) ? 1 : 0;
}

static void on_slots_changed(struct slots *s, void *userdata) {
        kick(userdata);
}

static int on_serve_opt(int opt, const char *arg, void *userdata) {
        struct serve_opts *o = userdata;
        char *end;
        long v;

        switch (opt) {
        case OPT_NODE:
                o->node = arg;
                return 0;
        case OPT_ALL_NODES:
                o->all_nodes = true;
                return 0;
        case OPT_MAX_PARALLEL:
                errno = 0;
                v = strtol(arg, &end, 10);
                if (errno || *end || end == arg || v < 0 || v > 1000)
                        return log_error_errno(
                                EINVAL, "--max-parallel: invalid value \"%s\" (0-1000; 0: no limit)", arg);
                o->max_parallel = (unsigned)v;
                return 0;
        case OPT_LEASE_NS:
                o->lease_ns = arg;
                return 0;
        case OPT_ON_SHUTDOWN:
                o->on_shutdown = true;
                return 0;
        case OPT_IDENTITY:
                o->identity = arg;
                return 0;
        case OPT_METRICS_ADDR: {
                _cleanup_free_ char *host = NULL;
                uint16_t port;

                if (*arg && httpd_parse_address(arg, &host, &port) < 0)
                        return log_error_errno(
                                EINVAL,
                                "--metrics-addr: invalid value \"%s\" (HOST:PORT, [IPV6]:PORT, "
                                ":PORT for every address, or \"\" for none)",
                                arg);
                o->metrics_addr = arg;
                return 0;
        }
        }
        return -EINVAL;
}

static const struct option serve_options[] = {
        { "node", required_argument, NULL, OPT_NODE },
        { "all-nodes", no_argument, NULL, OPT_ALL_NODES },
        { "max-parallel", required_argument, NULL, OPT_MAX_PARALLEL },
        { "lease-namespace", required_argument, NULL, OPT_LEASE_NS },
        { "on-shutdown", no_argument, NULL, OPT_ON_SHUTDOWN },
        { "identity", required_argument, NULL, OPT_IDENTITY },
        { "metrics-addr", required_argument, NULL, OPT_METRICS_ADDR },
        {},
};

/* The keys of the flags above in a --config file: the drain verbs skip them, so that
 * one file configures serve and `drainer uncordon` alike. */
const char *const serve_config_keys[] = {
        "node",        "all-nodes", "max-parallel", "lease-namespace",
        "on-shutdown", "identity",  "metrics-addr", NULL,
};

static void on_notifier_closed(void *userdata) {
        *(bool *)userdata = true;
}

/* /readyz: the node watch has synced and the API server answered the last request
 * (a transport failure or a 5xx since the last answer makes it 503 until one
 * succeeds again: the informer retries by itself). */
static bool serve_ready(void *userdata, char *reason, size_t size) {
        struct server *srv = userdata;
        struct kube_client_stats cs;

        if (srv->stopping) {
                snprintf(reason, size, "shutting down");
                return false;
        }
        if (!srv->nodes || !informer_synced(srv->nodes)) {
                snprintf(reason, size, "the node watch has not synced yet");
                return false;
        }
        kube_client_get_stats(srv->app->client, &cs);
        if (cs.last_error_usec > cs.last_ok_usec) {
                snprintf(reason, size, "the API server did not answer the last request");
                return false;
        }
        return true;
}

/* The HTTP endpoint. A taken default address is a warning (serve still works);
 * an address given with --metrics-addr must work. */
static int start_httpd(struct server *srv) {
        const char *addr = srv->o.metrics_addr ? srv->o.metrics_addr : HTTPD_DEFAULT_ADDRESS;
        struct httpd_options ho = {
                .address = addr, .ts = srv->app->ts, .ready = serve_ready, .userdata = srv
        };
        int r;

        if (!*addr)
                return 0;
        r = httpd_new(&srv->app->loop, &ho, &srv->httpd);
        if (r < 0 && !srv->o.metrics_addr) {
                log_warning_errno(
                        r,
                        "Cannot serve /metrics on %s (the default --metrics-addr): %m; going on without "
                        "it",
                        addr);
                return 0;
        }
        if (r < 0)
                return log_error_errno(r, "--metrics-addr %s: cannot listen: %m", addr);
        log_info("serving /metrics, /healthz and /readyz on http://%s", addr);
        return 0;
}

static int serve_run(struct server *srv) {
        static const struct informer_handlers h = {
                .on_add = on_node_change,
                .on_update = on_node_update,
                .on_delete = on_node_delete,
                .on_synced = on_nodes_synced,
                .on_error = on_nodes_error,
        };
        _cleanup_free_ char *fs = NULL;
        struct app *a = srv->app;
        int r;

        srv->managed = hashmap_new(100000);
        if (!srv->managed)
                return log_oom();
        r = start_httpd(srv);
        if (r < 0)
                return r;
        read_boot_id(srv->boot_id, sizeof(srv->boot_id));
        if (!srv->o.all_nodes && asprintf(&fs, "metadata.name=%s", srv->o.node) < 0)
                return log_oom();
        /* In cluster mode the next drain or restore is seconds away: claims and budgets stay
         * watched a while after the last engine, so that it borrows a warm cache instead of
         * listing every claim again. A per-node daemon that is done lets go of them at once. */
        r = cluster_view_new(a->client, a->ts,
                             &(const struct cluster_view_options){
                                     .nodes_field_selector = fs,
                                     .linger_usec = srv->o.all_nodes ? SHARED_LINGER_USEC : 0,
                             },
                             &srv->cluster);
        if (r >= 0)
                r = cluster_view_subscribe_nodes(srv->cluster, &h, srv);
        if (r < 0)
                return log_error_errno(r, "Cannot set up the node watch: %m");
        if ((r = dtimer_init(&srv->kick, a->ts, on_kick)) < 0 ||
            (r = dtimer_init(&srv->retry, a->ts, on_retry)) < 0 ||
            (r = dtimer_init(&srv->shutdown_deadline, a->ts, on_shutdown_deadline)) < 0)
                return log_oom();
        if (srv->o.max_parallel > 0) {
                struct slots_options so = {
                        .ns = srv->o.lease_ns,
                        .max = srv->o.max_parallel,
                        .identity = srv->o.identity,
                };

                if (srv->o.all_nodes)
                        so.node_exists = node_exists;
                r = slots_new(a->client, a->ts, &so, on_slots_changed, srv, &srv->slots);
                if (r < 0)
                        return log_error_errno(r, "Cannot set up drain slots: %m");
        }
        r = notifier_new(&a->loop, &srv->notifier);
        if (r >= 0)
                r = notifier_start(srv->notifier);
        if (r < 0)
                log_warning_errno(r, "systemd notification setup failed: %m, ignoring");
        /* The system bus: for --on-shutdown, --driver-stop systemd:UNIT, and undoing a drain
         * recorded with it. Without one (a container) only --on-shutdown and systemd fail. */
        r = sysbus_open(&a->loop, &srv->bus);
        if (r < 0) {
                srv->bus = NULL;
                if (srv->o.on_shutdown || srv->a->profile.stop->needs_units)
                        return log_error_errno(r, "Cannot connect to the system bus: %m");
        }
        if (srv->o.on_shutdown) {
                if (r >= 0)
                        r = sysbus_inhibit_shutdown_full(srv->bus, "drainer",
                                                         "Drain this node's DRA workload before shutdown",
                                                         on_shutdown, on_inhibit_result, srv);
                if (r < 0)
                        return log_error_errno(
                                r, "--on-shutdown: cannot take a logind shutdown inhibitor lock: %m");
        }
        r = cluster_view_start(srv->cluster);
        if (r < 0)
                return log_error_errno(r, "Cannot start watching nodes: %m");
        srv->nodes = cluster_view_nodes(srv->cluster);

        uv_signal_init(&a->loop, &srv->sigint);
        uv_signal_init(&a->loop, &srv->sigterm);
        srv->sigint.data = srv->sigterm.data = srv;
        uv_signal_start(&srv->sigint, on_serve_signal, SIGINT);
        uv_signal_start(&srv->sigterm, on_serve_signal, SIGTERM);
        app_run_until(a, &srv->done);
        return 0;
}

static void serve_teardown(struct server *srv) {
        struct app *a = srv->app;
        const char *key;
        void *v;
        size_t i = 0;
        bool idle;

        srv->stopping = true;
        if (srv->notifier)
                notifier_stopping(srv->notifier);
        while (hashmap_iterate(srv->managed, &i, &key, &v)) {
                struct managed *m = v;

                if (m->engine)
                        engine_stop(m->engine);
                if (m->patch)
                        kube_call_cancel(m->patch);
        }
        if (srv->slots)
                slots_stop(srv->slots);
        if (srv->kick.src) {
                dtimer_stop(&srv->kick);
                dtimer_stop(&srv->retry);
                dtimer_stop(&srv->shutdown_deadline);
        }
        do {
                idle = (!srv->slots || slots_idle(srv->slots)) && announcer_idle(srv->announcer);
                i = 0;
                while (idle && hashmap_iterate(srv->managed, &i, &key, &v)) {
                        struct managed *m = v;

                        idle = (!m->engine || engine_idle(m->engine)) && !m->patch;
                }
        } while (!idle && uv_run(&a->loop, UV_RUN_ONCE) != 0);

        hashmap_free(srv->managed, managed_free);
        /* The engines are gone: nobody borrows from the cluster view any more. */
        srv->nodes = NULL;
        if (srv->cluster) {
                cluster_view_unsubscribe_nodes(srv->cluster, srv);
                cluster_view_close(srv->cluster, on_notifier_closed, &srv->cluster_closed);
                while (!srv->cluster_closed && uv_run(&a->loop, UV_RUN_ONCE) != 0)
                        ;
                srv->cluster = NULL;
        }
        slots_free(srv->slots);
        if (srv->kick.src) {
                dtimer_done(&srv->kick);
                dtimer_done(&srv->retry);
                dtimer_done(&srv->shutdown_deadline);
        }
        if (srv->sigint.loop) {
                uv_close((uv_handle_t *)&srv->sigint, NULL);
                uv_close((uv_handle_t *)&srv->sigterm, NULL);
        }
        if (srv->notifier) {
                bool closed = false;

                notifier_close(srv->notifier, on_notifier_closed, &closed);
                while (!closed && uv_run(&a->loop, UV_RUN_ONCE) != 0)
                        ;
        }
        if (srv->bus) {
                bool closed = false;

                sysbus_close(srv->bus, on_notifier_closed, &closed);
                while (!closed && uv_run(&a->loop, UV_RUN_ONCE) != 0)
                        ;
        }
        if (srv->httpd) {
                bool closed = false;

                httpd_close(srv->httpd, on_notifier_closed, &closed);
                while (!closed && uv_run(&a->loop, UV_RUN_ONCE) != 0)
                        ;
                srv->httpd = NULL;
        }
}

static int serve_main(struct serve_opts *o, struct drain_args *a, struct global_flags *g, int vargc,
                      char **vargv) {
        char host[256] = "";
        struct app app;
        struct server srv = {};
        int r;

        r = parse_drain_args(vargc, vargv, g, a, serve_options, on_serve_opt, o);
        if (r <= 0)
                return r < 0 ? EXIT_USAGE : EXIT_DONE;
        if (optind != vargc)
                return log_error("drainer serve: unexpected argument \"%s\"; see 'drainer serve --help'",
                                 vargv[optind]),
                       EXIT_USAGE;
        if (o->all_nodes && o->node)
                return log_error("drainer serve: --node and --all-nodes exclude each other"), EXIT_USAGE;
        if (!o->node && !o->all_nodes)
                o->node = getenv("NODE_NAME");
        if (!o->node && !o->all_nodes)
                return log_error("drainer serve: say which node: --node NAME, $NODE_NAME, or --all-nodes"),
                       EXIT_USAGE;
        if (o->on_shutdown && o->all_nodes)
                return log_error("drainer serve: --on-shutdown needs --node (the node this host is)"),
                       EXIT_USAGE;
        if (!o->lease_ns)
                o->lease_ns = getenv("POD_NAMESPACE") ? getenv("POD_NAMESPACE") : "drainer-system";
        gethostname(host, sizeof(host) - 1);
        if (!o->identity)
                o->identity = host;
        log_set_journal_auto();
        if (o->node)
                log_set_field("NODE", o->node);

        if (app_init(&app, g) < 0) {
                app_done(&app);
                return EXIT_ERROR;
        }
        srv = (struct server){ .app = &app, .o = *o, .a = a };
        r = announcer_new(app.client, app.ts, o->identity, &srv.announcer);
        if (r < 0) {
                log_error_errno(r, "Cannot set up the Events: %m");
                app_done(&app);
                return EXIT_ERROR;
        }
        r = serve_run(&srv);
        serve_teardown(&srv);
        announcer_free(srv.announcer);
        app_done(&app);
        return r < 0 ? EXIT_ERROR : EXIT_DONE;
}

int verb_serve(int argc, char **argv, struct global_flags *g) {
        /* At most one node of the cluster out of service at a time unless --max-parallel
         * says otherwise (kured's default): `kubectl annotate nodes --all
         * drainer.io/request=drain` must not empty the cluster at once. */
        struct serve_opts o = { .max_parallel = 1 };
        struct drain_args a = {};
        struct config_argv c;
        const char *skip[64];
        int code;

        /* the file's keys of flags serve does not take (--dry-run, --restore-on-failure,
         * ...) are other verbs' */
        drain_config_skip("serve", skip, ELEMENTSOF(skip));
        if (config_argv_build(argc, argv, skip, &c) < 0)
                return EXIT_USAGE;
        code = serve_main(&o, &a, g, c.argc, c.argv);
        drain_args_done(&a);
        config_argv_done(&c);
        return code;
}
