/* drainer rollout NAMESPACE/DAEMONSET --driver NAME: updates a DRA driver without
 * seamless upgrade across the cluster, node by node (drain/rollout.h has the steps
 * and why each is safe). Each node's step is decided again from its Node, pods,
 * claims and slices at every change (a node view per node in progress), so a
 * rollout killed anywhere resumes from the Nodes' state. At most --max-parallel
 * nodes are in progress at once, in this process and across the cluster (the Lease
 * slots of `serve --max-parallel`). The first node that fails (its new driver not
 * healthy within --timeout, a drain refused) stops the rollout: no other node is
 * started, that node's driver stays out of service (its DeviceTaintRule, or the
 * cordon, stays), said in the output and in a DrainerFailed Event on the Node. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app.h"
#include "drainargs.h"
#include "drainer/announcer.h"
#include "drainer/claims.h"
#include "drainer/client.h"
#include "drainer/driverstop.h"
#include "drainer/engine.h"
#include "drainer/health.h"
#include "drainer/json.h"
#include "drainer/log.h"
#include "drainer/nodeset.h"
#include "drainer/nodeview.h"
#include "drainer/rollout.h"
#include "drainer/selector.h"
#include "drainer/slots.h"
#include "drainer/state.h"
#include "drainer/text.h"
#include "verbs.h"

#define ROLLOUT_MAX_NODES    10000
#define DEFAULT_LEASE_NS     "drainer-system"
#define EVICT_RETRY_USEC     (5 * USEC_PER_SEC)
#define DEFAULT_TIMEOUT_USEC (10 * 60 * USEC_PER_SEC)

enum {
        OPT_RO_DRIVER = 0x200,
        OPT_RO_MAX_PARALLEL,
        OPT_RO_TIMEOUT,
        OPT_RO_LEASE_NS,
        OPT_RO_DRIVER_HEALTH,
        OPT_RO_DRIVER_SELECTOR,
        OPT_RO_IDENTITY,
};

struct rollout;

struct rnode {
        struct rollout *ro;
        char *name;
        struct node_view *view; /* while in progress */
        struct engine *engine;  /* the drain or restore running, or NULL */
        /* Engines that ended, freed once idle by the verb's main flow (never from a
         * callback: that would need the loop run inside it). */
        struct engine *spent[8];
        size_t n_spent;
        enum engine_goal goal;
        bool engine_ok; /* the last engine run of goal ended with 0 */
        bool started, done, failed, skipped;
        bool slot_wanted;
        int result;
        char *message; /* the last progress or the end */
        char last_step[32];
        struct kube_call *call; /* a record patch or an eviction in flight */
        char *evicted_uid;      /* the old plugin pod whose eviction was accepted */
        uint64_t t0, t_out, t_back, wait_since;
        char old_pod[256];
        size_t pods_kept; /* pods on the node that stayed running throughout (same UIDs) */
        char **uids0;     /* the node's running pods' UIDs at the start */
        size_t n_uids0;
        struct dtimer timer;    /* an eviction retry; the release once ended */
        struct dtimer deadline; /* --timeout of the node */
        bool timer_ready;
};

struct rollout {
        struct app *app;
        const char *ds_ns, *ds_name, *driver, *lease_ns, *identity;
        unsigned max_parallel;
        uint64_t timeout_usec;
        struct drain_args a; /* what the engine is given: --driver, --driver-stop none, selectors */
        struct rollout_daemonset ds;
        cJSON *ds_json; /* owned */
        char *target;   /* owned: the update revision's hash */
        struct rnode *nodes;
        size_t n;
        struct slots *slots;
        struct announcer *announcer;
        bool stopping, interrupted;
        bool all_done; /* every node ended */
        int worst;
        uv_signal_t sigint, sigterm;
        bool kicking, kick_again;
};

static void kick(struct rollout *ro);

/* ---- synchronous reads at the start ---- */

struct get_one {
        bool done;
        int error;
        char *message;
        cJSON *json;
        cJSON *items;
};

static void on_get(const struct kube_result *res, void *userdata) {
        struct get_one *g = userdata;

        g->done = true;
        g->error = res->error;
        g->message = res->message ? strdup(res->message) : NULL;
        if (res->json)
                g->json = cJSON_Duplicate(res->json, true);
}

static int on_page(const cJSON *items, void *userdata) {
        struct get_one *g = userdata;
        const cJSON *it;

        if (!g->items && !(g->items = cJSON_CreateArray()))
                return -ENOMEM;
        cJSON_ArrayForEach(it, items) {
                cJSON *c = cJSON_Duplicate(it, true);

                if (!c)
                        return -ENOMEM;
                cJSON_AddItemToArray(g->items, c);
        }
        return 0;
}

static void get_one_done(struct get_one *g) {
        free(g->message);
        cJSON_Delete(g->json);
        cJSON_Delete(g->items);
        *g = (struct get_one){};
}

static int get_sync(struct app *app, const char *path, struct get_one *g) {
        int r = kube_get(app->client, path, on_get, g, NULL);

        if (r < 0)
                return r;
        app_run_until(app, &g->done);
        return g->error;
}

static int list_sync(struct app *app, const char *path, struct get_one *g) {
        int r = kube_list(app->client, path, 500, NULL, on_page, on_get, g, NULL);

        if (r < 0)
                return r;
        app_run_until(app, &g->done);
        if (g->error >= 0 && !g->items)
                g->items = cJSON_CreateArray();
        return g->error;
}

/* The DaemonSet, checked (OnDelete) and its update revision, waiting a little for
 * the controller to observe the newest spec. */
static int read_daemonset(struct rollout *ro) {
        _cleanup_free_ char *path = NULL, *rpath = NULL;
        char msg[1024];
        int r;

        if (asprintf(&path, "/apis/apps/v1/namespaces/%s/daemonsets/%s", ro->ds_ns, ro->ds_name) < 0)
                return log_oom();
        for (unsigned attempt = 0;; attempt++) {
                struct get_one g = {};

                r = get_sync(ro->app, path, &g);
                if (r < 0) {
                        log_error("cannot read DaemonSet %s/%s: %s", ro->ds_ns, ro->ds_name,
                                  g.message ? g.message : strerror(-r));
                        get_one_done(&g);
                        return r;
                }
                cJSON_Delete(ro->ds_json);
                ro->ds_json = TAKE_PTR(g.json);
                get_one_done(&g);
                r = rollout_daemonset_parse(ro->ds_json, &ro->ds, msg, sizeof(msg));
                if (r < 0)
                        return log_error_errno(r, "DaemonSet %s/%s: %s", ro->ds_ns, ro->ds_name, msg);
                r = rollout_preflight(&ro->ds, msg, sizeof(msg));
                if (r == -EPERM) {
                        log_error("refused: %s", msg);
                        return r;
                }
                if (r == -EAGAIN && attempt < 20) {
                        /* A get every 500 ms for at most 10 s: the controller syncs in well
                         * under a second; a controller that is down is an error to report. */
                        uint64_t until = timesrc_now(ro->app->ts) + 500 * USEC_PER_MSEC;

                        while (timesrc_now(ro->app->ts) < until && !ro->interrupted)
                                if (app_run_once(ro->app) == 0)
                                        usleep(10000);
                        continue;
                }
                if (r < 0)
                        return log_error_errno(ETIMEDOUT, "%s: is kube-controller-manager running?", msg);
                break;
        }
        if (asprintf(&rpath, "/apis/apps/v1/namespaces/%s/controllerrevisions", ro->ds_ns) < 0)
                return log_oom();
        {
                struct get_one g = {};
                const char *hash = NULL;

                r = list_sync(ro->app, rpath, &g);
                if (r < 0) {
                        log_error("cannot list the ControllerRevisions of namespace %s: %s", ro->ds_ns,
                                  g.message ? g.message : strerror(-r));
                        get_one_done(&g);
                        return r;
                }
                r = rollout_update_revision(g.items, ro->ds.uid, &hash);
                if (r >= 0)
                        ro->target = strdup(hash);
                get_one_done(&g);
                if (r < 0)
                        return log_error_errno(r, "DaemonSet %s/%s: no ControllerRevision of its own%s",
                                               ro->ds_ns, ro->ds_name,
                                               r == -EINVAL ? " with a controller-revision-hash label" : "");
                if (!ro->target)
                        return log_oom();
        }
        return 0;
}

static int str_cmp(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The nodes: those of the DaemonSet's pods, and those whose Node still records this
 * driver's rollout or driver drain (a node whose pod is gone, resumed), sorted. */
static int read_nodes(struct rollout *ro) {
        _cleanup_free_ char *path = NULL;
        char **names = NULL;
        size_t n = 0;
        struct get_one g = {};
        const cJSON *it;
        char key[256], skey[256];
        int r;

        if (asprintf(&path, "/api/v1/namespaces/%s/pods", ro->ds_ns) < 0)
                return log_oom();
        r = list_sync(ro->app, path, &g);
        if (r < 0) {
                log_error("cannot list the pods of namespace %s: %s", ro->ds_ns,
                          g.message ? g.message : strerror(-r));
                get_one_done(&g);
                return r;
        }
        cJSON_ArrayForEach(it, g.items) {
                const cJSON *ref;
                const char *node = json_str(it, "spec.nodeName");
                bool ours = false;

                cJSON_ArrayForEach(ref, json_path(it, "metadata.ownerReferences")) ours =
                        ours ||
                        (json_bool(ref, "controller", false) && streq_ptr(json_str(ref, "uid"), ro->ds.uid));
                if (!ours || !node)
                        continue;
                if (strv_push_unique(&names, &n, node) < 0)
                        goto oom;
        }
        get_one_done(&g);
        r = list_sync(ro->app, "/api/v1/nodes", &g);
        if (r < 0) {
                log_error("cannot list the nodes: %s", g.message ? g.message : strerror(-r));
                get_one_done(&g);
                strv_free_n(names, n);
                return r;
        }
        rollout_record_key(ro->driver, key, sizeof(key));
        snprintf(skey, sizeof(skey), DRAINER_ANN_STATE ".%s", ro->driver);
        cJSON_ArrayForEach(it, g.items) {
                const cJSON *ann = json_path(it, "metadata.annotations");
                const char *name = json_str(it, "metadata.name");

                if (name && (json_get_str(ann, key) || json_get_str(ann, skey)) &&
                    strv_push_unique(&names, &n, name) < 0)
                        goto oom;
        }
        get_one_done(&g);
        if (n > ROLLOUT_MAX_NODES) {
                strv_free_n(names, n);
                return log_error_errno(E2BIG, "more than %d nodes", ROLLOUT_MAX_NODES);
        }
        qsort(names, n, sizeof(*names), str_cmp);
        ro->nodes = calloc(n ? n : 1, sizeof(*ro->nodes));
        if (!ro->nodes)
                goto oom;
        for (size_t i = 0; i < n; i++)
                ro->nodes[i] = (struct rnode){ .ro = ro, .name = names[i], .result = 0 };
        ro->n = n;
        free(names);
        return 0;
oom:
        get_one_done(&g);
        strv_free_n(names, n);
        return log_oom();
}

/* ---- one node ---- */

static void node_say(struct rnode *rn, const char *fmt, ...) _printf_(2, 3);
static void node_say(struct rnode *rn, const char *fmt, ...) {
        _cleanup_free_ char *m = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&m, fmt, ap);
        va_end(ap);
        if (r < 0)
                return;
        if (rn->message && streq(rn->message, m))
                return;
        free(rn->message);
        rn->message = TAKE_PTR(m);
        if (rn->ro->app->flags.output == OUTPUT_TEXT)
                log_info("%s", rn->message);
}

static void on_view_change(struct node_view *v, void *userdata) {
        struct rnode *rn = userdata;

        kick(rn->ro);
}

static void on_view_synced(struct node_view *v, unsigned part, void *userdata) {
        struct rnode *rn = userdata;

        kick(rn->ro);
}

static void on_view_error(struct node_view *v, unsigned part, int error, const char *message,
                          void *userdata) {
        struct rnode *rn = userdata;

        log_debug("node %s: %s: %s", rn->name, node_view_part_name(part),
                  message ? message : strerror(-error));
}

/* A node that ended lets go of its watches (from the loop, not from inside the
 * view's own callback). */
static void node_release(struct rnode *rn) {
        if (rn->engine) {
                engine_stop(rn->engine);
                if (rn->n_spent < ELEMENTSOF(rn->spent))
                        rn->spent[rn->n_spent++] = TAKE_PTR(rn->engine);
        }
        if (rn->call) {
                kube_call_cancel(rn->call);
                rn->call = NULL;
        }
        if (rn->view) {
                node_view_close(rn->view, NULL, NULL);
                rn->view = NULL;
        }
}

static void on_node_deadline(struct dtimer *t) {
        struct rnode *rn = container_of(t, struct rnode, deadline);

        kick(rn->ro);
}

static void on_node_timer(struct dtimer *t) {
        struct rnode *rn = container_of(t, struct rnode, timer);

        if (rn->done || rn->failed)
                return node_release(rn);
        kick(rn->ro);
}

static void announce_failed(struct rnode *rn, const char *message) {
        const struct node_rec *n = rn->view ? node_view_node(rn->view) : NULL;
        struct engine_notice notice = {
                .kind = ENGINE_NOTICE_FAILED,
                .node = n,
                .phase = DRAIN_PHASE_DRAINED,
                .message = message,
        };

        if (n && rn->ro->announcer)
                announcer_notice(rn->ro->announcer, &notice);
}

static void node_end(struct rnode *rn, int result, const char *fmt, ...) _printf_(3, 4);
static void node_end(struct rnode *rn, int result, const char *fmt, ...) {
        _cleanup_free_ char *m = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        rn->result = result;
        if (result == 0)
                rn->done = true;
        else {
                rn->failed = true;
                rn->ro->stopping = true;
                announce_failed(rn, m);
        }
        free(rn->message);
        rn->message = TAKE_PTR(m);
        if (result == 0)
                log_info("%s", strna(rn->message));
        else
                log_error("%s", strna(rn->message));
        if (rn->timer_ready) {
                dtimer_stop(&rn->deadline);
                dtimer_start(&rn->timer, 0); /* node_release */
        }
        /* A node that failed keeps its slot while something of it is out of service (the
         * Lease expires by itself once no process renews it); one that changed nothing (it
         * failed before its drain started) gives it back at once. */
        if (rn->ro->slots && rn->slot_wanted &&
            (result == 0 ||
             !rollout_failed_keeps_slot(rn->view ? node_view_node(rn->view) : NULL, rn->ro->driver)))
                slots_release(rn->ro->slots, rn->name);
}

static void on_engine_progress(struct engine *e, const struct engine_progress *p, void *userdata) {
        struct rnode *rn = userdata;

        if (p->message)
                node_say(rn, "node %s: %s", rn->name, p->message);
}

static void on_engine_notice(struct engine *e, const struct engine_notice *n, void *userdata) {
        struct rnode *rn = userdata;

        announcer_notice(rn->ro->announcer, n);
}

static void on_engine_finished(struct engine *e, const struct engine_summary *s, void *userdata) {
        struct rnode *rn = userdata;

        rn->engine_ok = s->result == 0;
        if (s->result < 0) {
                const char *what = rn->goal == ENGINE_GOAL_DRAIN ? "drain" : "restore";

                if (rn->goal == ENGINE_GOAL_UNCORDON && s->result == -ETIMEDOUT)
                        node_end(rn, s->result,
                                 "node %s: the new driver %s (revision %s) did not become healthy within "
                                 "--timeout: %s; the rollout stops here, the driver of node %s stays out of "
                                 "service (drainer.io/state.%s); fix it and run the rollout again",
                                 rn->name, rn->ro->driver, rn->ro->target, strna(s->message), rn->name,
                                 rn->ro->driver);
                else
                        node_end(rn, s->result, "node %s: the %s of driver %s failed: %s", rn->name, what,
                                 rn->ro->driver, strna(s->message));
        }
        kick(rn->ro);
}

static int engine_run(struct rnode *rn, enum engine_goal goal) {
        struct rollout *ro = rn->ro;
        uint64_t spent = timesrc_now(ro->app->ts) - rn->t0;
        struct engine_options eo;
        static const struct engine_callbacks cb = {
                .on_progress = on_engine_progress,
                .on_notice = on_engine_notice,
                .on_finished = on_engine_finished,
        };
        int r;

        /* the rollout's profile: each pod's own grace, the driver's health */
        drain_profile_engine_options(&ro->a.profile, rn->name, goal, &eo);
        /* The node's --timeout counts from its start in this run. */
        eo.timeout_usec = ro->timeout_usec > spent ? ro->timeout_usec - spent : 1;
        if (rn->engine) {
                if (rn->n_spent == ELEMENTSOF(rn->spent)) {
                        node_end(rn, -E2BIG, "node %s: the engine was restarted too often", rn->name);
                        return -E2BIG;
                }
                engine_stop(rn->engine);
                rn->spent[rn->n_spent++] = TAKE_PTR(rn->engine);
        }
        rn->goal = goal;
        rn->engine_ok = false;
        r = engine_new(ro->app->client, ro->app->transport, ro->app->ts, &eo, &cb, rn, &rn->engine);
        if (r >= 0)
                r = engine_start(rn->engine);
        if (r < 0)
                node_end(rn, r, "node %s: cannot start the engine: %s", rn->name, strerror(-r));
        return r;
}

static bool engine_running(const struct rnode *rn) {
        return rn->engine && !rn->engine_ok && !rn->failed && !engine_idle(rn->engine);
}

static void on_call_done(const struct kube_result *res, void *userdata) {
        struct rnode *rn = userdata;

        rn->call = NULL;
        if (res->error == -ECANCELED)
                return;
        if (res->error < 0 && res->error != -ENOENT) {
                log_warning("node %s: %s (retrying)", rn->name,
                            res->message ? res->message : strerror(-res->error));
                if (rn->timer_ready)
                        dtimer_start(&rn->timer, EVICT_RETRY_USEC);
        }
        kick(rn->ro);
}

static void on_evicted(const struct kube_result *res, void *userdata) {
        struct rnode *rn = userdata;

        if (res->error >= 0 || res->error == -ENOENT) {
                if (!rn->t_out)
                        rn->t_out = timesrc_now(rn->ro->app->ts);
        } else {
                free(rn->evicted_uid);
                rn->evicted_uid = NULL;
        }
        on_call_done(res, userdata);
}

static int patch_record(struct rnode *rn, const char *hash) {
        _cleanup_free_ char *body = NULL, *path = NULL;
        int r = rollout_patch_record(rn->ro->driver, hash, &body);

        if (r < 0 || asprintf(&path, "/api/v1/nodes/%s", rn->name) < 0)
                return log_oom();
        return kube_patch(rn->ro->app->client, path, KUBE_PATCH_MERGE, body, on_call_done, rn, &rn->call);
}

/* The running pods' UIDs at the node's start, to count those still running at its end. */
static void note_pods(struct rnode *rn, const struct node_input *in, bool at_start) {
        if (at_start) {
                for (size_t i = 0; i < in->n_pods; i++)
                        if (in->pods[i]->phase == POD_RUNNING && !in->pods[i]->deleting &&
                            !rollout_pod_of(in->pods[i], rn->ro->ds.uid))
                                (void)strv_push_unique(&rn->uids0, &rn->n_uids0, in->pods[i]->uid);
                return;
        }
        rn->pods_kept = 0;
        for (size_t j = 0; j < rn->n_uids0; j++)
                for (size_t i = 0; i < in->n_pods; i++)
                        if (streq_ptr(in->pods[i]->uid, rn->uids0[j]) && in->pods[i]->phase == POD_RUNNING &&
                            !in->pods[i]->deleting) {
                                rn->pods_kept++;
                                break;
                        }
}

static void node_reconcile(struct rnode *rn) {
        struct rollout *ro = rn->ro;
        _cleanup_(node_input_done) struct node_input in = {};
        struct rollout_node_input ri;
        enum rollout_step step;
        char msg[1024];
        uint64_t now = timesrc_now(ro->app->ts);
        int r;

        if (rn->done || rn->failed || !rn->view ||
            !node_view_synced(rn->view, NODE_VIEW_ALL & ~NODE_VIEW_PDBS))
                return;
        if (node_view_collect(rn->view, &in) < 0)
                return (void)log_oom();
        if (!in.node)
                return node_end(rn, -ENOENT, "node %s: not found", rn->name);
        ri = (struct rollout_node_input){ .node = in.node,
                                          .driver = ro->driver,
                                          .ds_uid = ro->ds.uid,
                                          .target = ro->target,
                                          .pods = in.pods,
                                          .n_pods = in.n_pods,
                                          .claims = in.claims,
                                          .n_claims = in.n_claims,
                                          .slices = in.slices,
                                          .n_slices = in.n_slices };
        step = rollout_node_step(&ri, msg, sizeof(msg));
        if (!rn->uids0 && step != ROLLOUT_STEP_DONE)
                note_pods(rn, &in, true);
        snprintf(rn->last_step, sizeof(rn->last_step), "%s", rollout_step_to_string(step));

        if (step == ROLLOUT_STEP_DONE) {
                if (!rn->started) {
                        rn->skipped = true;
                        return node_end(rn, 0, "%s: skipped", msg);
                }
                note_pods(rn, &in, false);
                if (!rn->t_back)
                        rn->t_back = now;
                if (rn->t_out)
                        return node_end(rn, 0,
                                        "node %s: driver %s on revision %s, back in service; out of service "
                                        "for %.1f s, %zu other pods kept running",
                                        rn->name, ro->driver, ro->target,
                                        (double)(rn->t_back - rn->t_out) / USEC_PER_SEC, rn->pods_kept);
                return node_end(rn, 0, "node %s: driver %s on revision %s, back in service", rn->name,
                                ro->driver, ro->target);
        }
        if (step == ROLLOUT_STEP_FOREIGN)
                return node_end(rn, -EPERM, "refused: %s", msg);

        /* Everything else takes the node out of service, or keeps it out: a slot first. */
        rn->started = true;
        rn->slot_wanted = true;
        if (ro->slots) {
                r = slots_acquire(ro->slots, rn->name);
                if (r < 0)
                        return node_end(rn, r, "node %s: cannot take a drain slot (Leases in %s): %s",
                                        rn->name, ro->lease_ns, strerror(-r));
                if (r == 0) {
                        node_say(rn, "node %s: waiting for a drain slot (held by %s)", rn->name,
                                 slots_holders(ro->slots));
                        return;
                }
        }
        /* The node's --timeout starts now, with its slot: the wait for one is not the node's
         * step taking long (it would fail a node that never started). */
        if (!rn->t0) {
                rn->t0 = now ? now : 1;
                dtimer_start(&rn->deadline, ro->timeout_usec);
        }
        if (rn->call || engine_running(rn))
                return;
        /* A running engine keeps the timeout itself (and says what remained). */
        if (rollout_timed_out(rn->t0, now, ro->timeout_usec)) {
                /* msg reads "node NODE: what it waits for". */
                const char *what = strstr(msg, ": ") ? strstr(msg, ": ") + 2 : msg;

                return node_end(
                        rn, -ETIMEDOUT,
                        step == ROLLOUT_STEP_WAIT
                                ? "node %s: the new driver did not become healthy within --timeout (%s); "
                                  "the rollout stops here, the driver of node %s stays out of service "
                                  "(drainer.io/state.%s); fix it and run the rollout again"
                                : "node %s: not done within --timeout (%s); the rollout stops here, the "
                                  "driver of node %s stays out of service (drainer.io/state.%s); fix it "
                                  "and run the rollout again",
                        rn->name, what, rn->name, ro->driver);
        }

        switch (step) {
        case ROLLOUT_STEP_DRAIN: {
                const struct node_rec *n = node_view_node(rn->view);
                char key[256];

                if (!kv_get(n->annotations, n->n_annotations,
                            rollout_record_key(ro->driver, key, sizeof(key)))) {
                        node_say(rn, "%s", msg);
                        r = patch_record(rn, ro->target);
                        if (r < 0)
                                node_end(rn, r, "node %s: cannot record the rollout: %s", rn->name,
                                         strerror(-r));
                        return;
                }
                if (rn->engine && rn->goal == ENGINE_GOAL_DRAIN && rn->engine_ok)
                        return; /* drained: the Node's update is on its way */
                node_say(rn, "%s", msg);
                engine_run(rn, ENGINE_GOAL_DRAIN);
                return;
        }
        case ROLLOUT_STEP_REPLACE: {
                const struct pod_rec *old = NULL;
                struct rollout_node_facts f;

                rollout_node_facts(&ri, &f);
                old = f.old;
                if (old && !(rn->evicted_uid && streq_ptr(rn->evicted_uid, old->uid))) {
                        node_say(rn, "%s", msg);
                        snprintf(rn->old_pod, sizeof(rn->old_pod), "%s/%s", old->ns, old->name);
                        free(rn->evicted_uid);
                        rn->evicted_uid = strdup(old->uid);
                        /* Its own grace period: a driver pod is never deleted with grace 0 (its
                         * object would go while the kubelet still runs the plugin). */
                        r = kube_evict(ro->app->client, old->ns, old->name, -1, false, on_evicted, rn,
                                       &rn->call);
                        if (r < 0)
                                node_end(rn, r, "node %s: cannot evict %s: %s", rn->name, rn->old_pod,
                                         strerror(-r));
                }
                if (!rn->wait_since)
                        rn->wait_since = now;
                return;
        }
        case ROLLOUT_STEP_WAIT:
                node_say(rn, "%s", msg);
                if (!rn->t_out)
                        rn->t_out = now; /* resumed: counted from here */
                return;
        case ROLLOUT_STEP_RESTORE:
                if (rn->engine && rn->goal == ENGINE_GOAL_UNCORDON && rn->engine_ok)
                        return;
                if (!rn->t_out)
                        rn->t_out = now;
                node_say(rn, "%s", msg);
                engine_run(rn, ENGINE_GOAL_UNCORDON);
                return;
        case ROLLOUT_STEP_CLEAR:
                node_say(rn, "%s", msg);
                r = patch_record(rn, NULL);
                if (r < 0)
                        node_end(rn, r, "node %s: cannot clear the rollout record: %s", rn->name,
                                 strerror(-r));
                return;
        default:
                return;
        }
}

static int node_open(struct rnode *rn) {
        static const struct node_view_handlers h = {
                .on_change = on_view_change,
                .on_synced = on_view_synced,
                .on_error = on_view_error,
        };
        struct rollout *ro = rn->ro;
        int r;

        rn->t0 = 0; /* set when its slot is taken */
        r = dtimer_init(&rn->timer, ro->app->ts, on_node_timer);
        if (r < 0)
                return r;
        r = dtimer_init(&rn->deadline, ro->app->ts, on_node_deadline);
        if (r < 0) {
                dtimer_done(&rn->timer);
                return r;
        }
        rn->timer_ready = true;
        r = node_view_new(ro->app->client, ro->app->ts,
                          &(const struct node_view_options){ .node = rn->name }, &h, rn, &rn->view);
        if (r >= 0)
                r = node_view_start(rn->view, NODE_VIEW_ALL & ~NODE_VIEW_PDBS);
        return r;
}

/* At the end, from the verb's main flow: everything of the node stopped and freed. */
static void node_close(struct rnode *rn) {
        node_release(rn);
        for (size_t i = 0; i < rn->n_spent; i++) {
                while (!engine_idle(rn->spent[i]))
                        if (uv_run(&rn->ro->app->loop, UV_RUN_ONCE) == 0)
                                break;
                engine_free(rn->spent[i]);
        }
        rn->n_spent = 0;
        if (rn->timer_ready) {
                dtimer_done(&rn->timer);
                dtimer_done(&rn->deadline);
                rn->timer_ready = false;
        }
}

/* ---- the whole rollout ---- */

static void kick(struct rollout *ro) {
        size_t active = 0;

        if (ro->kicking) {
                ro->kick_again = true;
                return;
        }
        ro->kicking = true;
        do {
                ro->kick_again = false;
                active = 0;
                for (size_t i = 0; i < ro->n; i++) {
                        struct rnode *rn = &ro->nodes[i];

                        if (rn->view && !rn->done && !rn->failed)
                                node_reconcile(rn);
                }
                for (size_t i = 0; i < ro->n; i++)
                        if (ro->nodes[i].view && !ro->nodes[i].done && !ro->nodes[i].failed)
                                active++;
                /* Start the next nodes, in order, while the slots of this process allow. */
                for (size_t i = 0;
                     i < ro->n && active < ro->max_parallel && !ro->stopping && !ro->interrupted; i++) {
                        struct rnode *rn = &ro->nodes[i];

                        if (rn->view || rn->done || rn->failed)
                                continue;
                        if (node_open(rn) < 0) {
                                node_end(rn, -ENOMEM, "node %s: cannot watch it", rn->name);
                                break;
                        }
                        active++;
                        ro->kick_again = true;
                }
        } while (ro->kick_again);
        ro->all_done = true;
        for (size_t i = 0; i < ro->n; i++) {
                const struct rnode *rn = &ro->nodes[i];

                if (rn->view && !rn->done && !rn->failed)
                        ro->all_done = false;
                if (!rn->view && !rn->done && !rn->failed && !ro->stopping && !ro->interrupted)
                        ro->all_done = false;
        }
        ro->kicking = false;
}

static void on_slots_changed(struct slots *s, void *userdata) {
        kick(userdata);
}

static void on_signal(uv_signal_t *h, int signum) {
        struct rollout *ro = h->data;

        ro->interrupted = true;
        ro->all_done = true;
}

static int on_rollout_opt(int opt, const char *arg, void *userdata) {
        struct rollout *ro = userdata;
        char msg[256];
        unsigned long v;
        char *end;
        int r;

        switch (opt) {
        case OPT_RO_DRIVER:
                if (ro->driver)
                        return log_error_errno(EINVAL,
                                               "--driver: given twice (a rollout updates one driver)");
                if (drain_scope_check(arg, msg, sizeof(msg)) < 0)
                        return log_error_errno(EINVAL, "--driver: %s", msg);
                ro->driver = arg;
                return 0;
        case OPT_RO_MAX_PARALLEL:
                errno = 0;
                v = strtoul(arg, &end, 10);
                if (errno || end == arg || *end || v < 1 || v > 100)
                        return log_error_errno(EINVAL,
                                               "--max-parallel: \"%s\" is not a number from 1 to 100", arg);
                ro->max_parallel = (unsigned)v;
                return 0;
        case OPT_RO_TIMEOUT:
                r = parse_duration(arg, &ro->timeout_usec);
                if (r < 0 || ro->timeout_usec == 0)
                        return log_error_errno(
                                EINVAL, "--timeout: \"%s\" is not a positive duration (90s, 5m)", arg);
                return 0;
        case OPT_RO_LEASE_NS:
                ro->lease_ns = arg;
                return 0;
        case OPT_RO_DRIVER_HEALTH:
                ro->a.health = arg;
                return 0;
        case OPT_RO_DRIVER_SELECTOR:
                return driver_selector_add(ro->a.driver_selectors, &ro->a.n_driver_selectors, arg);
        case OPT_RO_IDENTITY:
                ro->identity = arg;
                return 0;
        default:
                return -EINVAL;
        }
}

static cJSON *node_json(const struct rnode *rn) {
        cJSON *j = cJSON_CreateObject();
        const char *result = rn->skipped   ? "skipped"
                             : rn->done    ? "updated"
                             : rn->failed  ? (rn->result == -ETIMEDOUT ? "timeout"
                                              : rn->result == -EPERM   ? "refused"
                                                                       : "failed")
                             : rn->started ? "interrupted"
                                           : "not-started";

        cJSON_AddStringToObject(j, "node", rn->name);
        cJSON_AddStringToObject(j, "result", result);
        if (rn->last_step[0])
                cJSON_AddStringToObject(j, "step", rn->last_step);
        if (rn->old_pod[0])
                cJSON_AddStringToObject(j, "replacedPod", rn->old_pod);
        if (rn->t_out && rn->t_back)
                cJSON_AddNumberToObject(j, "driverOutSeconds",
                                        (double)(rn->t_back - rn->t_out) / USEC_PER_SEC);
        if (rn->done && !rn->skipped)
                cJSON_AddNumberToObject(j, "podsKeptRunning", (double)rn->pods_kept);
        if (rn->message)
                cJSON_AddStringToObject(j, "message", rn->message);
        return j;
}

int verb_rollout(int argc, char **argv, struct global_flags *g) {
        static const struct option opts[] = {
                { "driver", required_argument, NULL, OPT_RO_DRIVER },
                { "max-parallel", required_argument, NULL, OPT_RO_MAX_PARALLEL },
                { "timeout", required_argument, NULL, OPT_RO_TIMEOUT },
                { "lease-namespace", required_argument, NULL, OPT_RO_LEASE_NS },
                { "driver-health", required_argument, NULL, OPT_RO_DRIVER_HEALTH },
                { "driver-selector", required_argument, NULL, OPT_RO_DRIVER_SELECTOR },
                { "identity", required_argument, NULL, OPT_RO_IDENTITY },
                {},
        };
        struct rollout ro = {
                .max_parallel = 1,
                .timeout_usec = DEFAULT_TIMEOUT_USEC,
                .a = { .verb = "rollout",
                       .profile.grace = -1,
                       .profile.stop = &driver_stop_none,
                       .stop_given = true },
        };
        struct app app = {};
        _cleanup_free_ char *ds_arg = NULL;
        const char *env_ns = getenv("POD_NAMESPACE");
        char host[256] = "";
        char *slash;
        int r, code = EXIT_ERROR;
        uint64_t t0;

        r = verb_parse(argc, argv, g, opts, on_rollout_opt, &ro);
        if (r <= 0)
                return r == 0 ? EXIT_DONE : EXIT_USAGE;
        if (optind + 1 != argc) {
                log_error("rollout: give exactly one NAMESPACE/DAEMONSET (the DRA driver's DaemonSet)");
                return EXIT_USAGE;
        }
        ds_arg = strdup(argv[optind]);
        if (!ds_arg)
                return log_oom(), EXIT_ERROR;
        slash = strchr(ds_arg, '/');
        if (!slash || slash == ds_arg || !slash[1] || strchr(slash + 1, '/')) {
                log_error("rollout: \"%s\" is not NAMESPACE/DAEMONSET", argv[optind]);
                return EXIT_USAGE;
        }
        *slash = 0;
        ro.ds_ns = ds_arg;
        ro.ds_name = slash + 1;
        if (!ro.driver) {
                log_error("rollout: --driver NAME is required (the driver's name as in its ResourceSlices, "
                          "e.g. gpu.example.com)");
                return EXIT_USAGE;
        }
        if (!ro.lease_ns)
                ro.lease_ns = env_ns && *env_ns ? env_ns : DEFAULT_LEASE_NS;
        gethostname(host, sizeof(host) - 1);
        if (!ro.identity)
                ro.identity = host;
        ro.a.profile.drivers[0] = ro.driver;
        ro.a.profile.n_drivers = 1;
        if (ro.a.health) {
                _cleanup_free_ char *err = NULL;

                r = health_target_parse(ro.a.health, &ro.a.profile.health_target, &err);
                if (r < 0) {
                        log_error("--driver-health: %s",
                                  err ? err : "not PORT[/SERVICE] or unix:PATH[#SERVICE]");
                        return EXIT_USAGE;
                }
                ro.a.profile.has_health = true;
        }
        if (driver_selectors_parse(ro.a.driver_selectors, ro.a.n_driver_selectors, &ro.a.profile.drv_sels,
                                   &ro.a.profile.n_drv_sels) < 0)
                return EXIT_USAGE;

        r = app_init(&app, g);
        if (r < 0) {
                selectors_free(ro.a.profile.drv_sels, ro.a.profile.n_drv_sels);
                return EXIT_ERROR;
        }
        ro.app = &app;
        uv_signal_init(&app.loop, &ro.sigint);
        uv_signal_init(&app.loop, &ro.sigterm);
        ro.sigint.data = ro.sigterm.data = &ro;
        uv_signal_start(&ro.sigint, on_signal, SIGINT);
        uv_signal_start(&ro.sigterm, on_signal, SIGTERM);
        if (!isatty(STDERR_FILENO))
                log_set_timestamps(true);
        t0 = timesrc_now(app.ts);

        r = read_daemonset(&ro);
        if (r < 0) {
                code = r == -EPERM ? EXIT_REFUSED : EXIT_ERROR;
                goto out;
        }
        r = read_nodes(&ro);
        if (r < 0)
                goto out;
        if (g->output == OUTPUT_TEXT)
                log_info("rollout of DaemonSet %s/%s (driver %s) to revision %s: %zu nodes, %u at a time",
                         ro.ds_ns, ro.ds_name, ro.driver, ro.target, ro.n, ro.max_parallel);
        r = announcer_new(app.client, app.ts, host, &ro.announcer);
        if (r < 0) {
                log_oom();
                goto out;
        }
        r = slots_new(app.client, app.ts,
                      &(const struct slots_options){
                              .ns = ro.lease_ns, .max = ro.max_parallel, .identity = ro.identity },
                      on_slots_changed, &ro, &ro.slots);
        if (r < 0) {
                log_error_errno(r, "Cannot set up drain slots: %m");
                goto out;
        }
        kick(&ro);
        while (!ro.all_done)
                if (app_run_once(&app) == 0)
                        break;

        code = EXIT_DONE;
        for (size_t i = 0; i < ro.n; i++) {
                const struct rnode *rn = &ro.nodes[i];
                int c = rn->failed ? (rn->result == -ETIMEDOUT ? EXIT_TIMEOUT
                                      : rn->result == -EPERM   ? EXIT_REFUSED
                                                               : EXIT_ERROR)
                                   : EXIT_DONE;

                if (c == EXIT_ERROR || (c == EXIT_TIMEOUT && code != EXIT_ERROR) ||
                    (c == EXIT_REFUSED && code == EXIT_DONE))
                        code = c;
        }
        if (ro.interrupted)
                code = EXIT_ERROR;
        {
                size_t updated = 0, skipped = 0;

                for (size_t i = 0; i < ro.n; i++) {
                        updated += ro.nodes[i].done && !ro.nodes[i].skipped;
                        skipped += ro.nodes[i].skipped;
                }
                if (g->output == OUTPUT_JSON) {
                        cJSON *j = cJSON_CreateObject(), *items = cJSON_AddArrayToObject(j, "nodes");
                        _cleanup_free_ char *out = NULL;
                        char ds[512];

                        snprintf(ds, sizeof(ds), "%s/%s", ro.ds_ns, ro.ds_name);
                        cJSON_AddStringToObject(j, "daemonset", ds);
                        cJSON_AddStringToObject(j, "driver", ro.driver);
                        cJSON_AddStringToObject(j, "revision", ro.target);
                        cJSON_AddNumberToObject(j, "maxParallel", ro.max_parallel);
                        for (size_t i = 0; i < ro.n; i++)
                                cJSON_AddItemToArray(items, node_json(&ro.nodes[i]));
                        cJSON_AddNumberToObject(j, "updated", (double)updated);
                        cJSON_AddNumberToObject(j, "skipped", (double)skipped);
                        cJSON_AddNumberToObject(j, "seconds",
                                                (double)(timesrc_now(app.ts) - t0) / USEC_PER_SEC);
                        cJSON_AddBoolToObject(j, "interrupted", ro.interrupted);
                        cJSON_AddNumberToObject(j, "exitCode", code);
                        out = cJSON_Print(j);
                        cJSON_Delete(j);
                        if (out)
                                puts(out);
                } else
                        printf("rollout of %s/%s to revision %s: %zu updated, %zu already on it, %zu not "
                               "done%s "
                               "(%.1f s)\n",
                               ro.ds_ns, ro.ds_name, ro.target, updated, skipped, ro.n - updated - skipped,
                               ro.interrupted ? ", interrupted: run it again to resume" : "",
                               (double)(timesrc_now(app.ts) - t0) / USEC_PER_SEC);
        }
out:
        for (size_t i = 0; i < ro.n; i++)
                node_close(&ro.nodes[i]);
        if (ro.slots) {
                /* Slots of nodes that ended well are given back (at most 10 s for the
                 * answers); the rest expire. */
                uint64_t until = timesrc_now(app.ts) + 10 * USEC_PER_SEC;

                while (!slots_settled(ro.slots) && timesrc_now(app.ts) < until)
                        if (uv_run(&app.loop, UV_RUN_ONCE) == 0)
                                break;
                slots_stop(ro.slots);
                while (!slots_idle(ro.slots))
                        if (uv_run(&app.loop, UV_RUN_ONCE) == 0)
                                break;
                slots_free(ro.slots);
        }
        while (ro.announcer && !announcer_idle(ro.announcer))
                if (uv_run(&app.loop, UV_RUN_ONCE) == 0)
                        break;
        announcer_free(ro.announcer);
        uv_close((uv_handle_t *)&ro.sigint, NULL);
        uv_close((uv_handle_t *)&ro.sigterm, NULL);
        for (size_t i = 0; i < ro.n; i++) {
                free(ro.nodes[i].name);
                free(ro.nodes[i].message);
                free(ro.nodes[i].evicted_uid);
                strv_free_n(ro.nodes[i].uids0, ro.nodes[i].n_uids0);
        }
        free(ro.nodes);
        free(ro.target);
        cJSON_Delete(ro.ds_json);
        selectors_free(ro.a.profile.drv_sels, ro.a.profile.n_drv_sels);
        if (app_done(&app) < 0 && code == EXIT_DONE)
                code = EXIT_ERROR;
        return code;
}
