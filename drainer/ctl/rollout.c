/* The rollout runner (rollout-runner.h): owns the read of the DaemonSet, its
 * revisions and nodes, and per node in progress a node view, the engine runs (the
 * driver-scoped drain and restore), the Node patch or eviction in flight and two
 * timers. Decides nothing about a node itself (drain/rollout.c does, from the Node);
 * prints nothing and never runs the loop: every wait is a timer of the time source,
 * every read a callback. The first node that fails stops the rollout: no other node
 * is started, that node's driver stays out of service (DESIGN.md, "The sequence"). */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/announcer.h"
#include "drainer/client.h"
#include "drainer/collect.h"
#include "drainer/engine.h"
#include "drainer/json.h"
#include "drainer/log.h"
#include "drainer/nodeview.h"
#include "drainer/profile.h"
#include "drainer/rollout-runner.h"
#include "drainer/rollout.h"
#include "drainer/slots.h"
#include "drainer/state.h"
#include "drainer/text.h"
#include "drainer/timesrc.h"

#define ROLLOUT_MAX_NODES     10000
#define EVICT_RETRY_USEC      (5 * USEC_PER_SEC)
#define DAEMONSET_RETRY_USEC  (500 * USEC_PER_MSEC)
#define DAEMONSET_MAX_RETRIES 20
#define CLOSE_CHECK_USEC      (10 * USEC_PER_MSEC)
#define MAX_SPENT_ENGINES     8

/* Where the runner stands. */
enum stage {
        STAGE_NEW,
        STAGE_READ_DAEMONSET,
        STAGE_READ_REVISIONS,
        STAGE_READ_PODS,
        STAGE_READ_NODES,
        STAGE_RUNNING,
        STAGE_FINISHED, /* on_finished is due or said */
        STAGE_STOPPING,
        STAGE_STOPPED,
};

struct rollout_node {
        struct driver_rollout *rollout; /* borrowed: the owner */
        char *name;
        struct node_view *view; /* while in progress */
        struct engine *engine;  /* the drain or restore running (or ended), or NULL */
        /* Engines replaced or stopped, freed once idle (never from their own callback). */
        struct engine *spent[MAX_SPENT_ENGINES];
        size_t n_spent;
        enum engine_goal goal;
        bool engine_ok; /* the last engine run of goal ended with 0 */
        bool started, done, failed, skipped;
        bool slot_wanted;
        int result;
        char *message; /* the last progress or the end */
        char last_step[32];
        struct kube_call *call; /* a record patch or an eviction in flight */
        bool call_cancelled;
        char *evicted_uid; /* the old plugin pod whose eviction was accepted */
        uint64_t t0, t_out, t_back, wait_since;
        char old_pod[256];
        size_t pods_kept; /* pods on the node that stayed running throughout (same UIDs) */
        char **uids0;     /* the node's running pods' UIDs at the start */
        size_t n_uids0;
        struct dtimer timer;    /* an eviction retry; the release once ended */
        struct dtimer deadline; /* the node's timeout */
        bool timers_ready;
};

struct driver_rollout {
        struct kube_client *client;  /* borrowed */
        struct timesrc *ts;          /* borrowed */
        struct transport *transport; /* borrowed */
        char *ds_ns, *ds_name, *driver, *lease_ns;
        unsigned max_parallel;
        uint64_t timeout_usec;
        const struct drain_profile *profile; /* borrowed */
        struct slots *slots;                 /* borrowed, or NULL */
        struct announcer *announcer;         /* borrowed, or NULL */
        const struct driver_rollout_callbacks *cb;
        void *userdata;

        enum stage stage;
        struct kube_collect read; /* the read of the stage */
        unsigned daemonset_attempts;
        struct rollout_daemonset ds;
        cJSON *ds_json; /* owned: ds borrows from it */
        char *target;   /* owned: the update revision's hash */
        char **names;   /* the nodes found so far (before nodes is made) */
        size_t n_names;
        struct rollout_node *nodes; /* owned */
        size_t n;
        bool failing; /* a node failed: no other starts */
        bool reconciling, reconcile_again;
        int finish_error;
        char *finish_message;

        struct dtimer retry;  /* the DaemonSet read again */
        struct dtimer finish; /* on_finished, from the loop */
        struct dtimer close;  /* stopping: the check that everything closed */
        bool timers_ready;
        size_t views_closing;
        void (*stopped)(void *userdata);
        void *stopped_userdata;
};

static void reconcile(struct driver_rollout *ro);

static const char *const result_names[_DRIVER_ROLLOUT_RESULT_MAX] = {
        [DRIVER_ROLLOUT_NOT_STARTED] = "not-started", [DRIVER_ROLLOUT_INTERRUPTED] = "interrupted",
        [DRIVER_ROLLOUT_SKIPPED] = "skipped",         [DRIVER_ROLLOUT_UPDATED] = "updated",
        [DRIVER_ROLLOUT_TIMEOUT] = "timeout",         [DRIVER_ROLLOUT_REFUSED] = "refused",
        [DRIVER_ROLLOUT_FAILED] = "failed",
};

const char *driver_rollout_result_to_string(enum driver_rollout_result r) {
        return r >= 0 && r < _DRIVER_ROLLOUT_RESULT_MAX ? result_names[r] : NULL;
}

static bool running(const struct driver_rollout *ro) {
        return ro->stage < STAGE_STOPPING;
}

/* ---- the end: said once, from the loop ---- */

static void finish(struct driver_rollout *ro, int error, const char *fmt, ...) _printf_(3, 4);
static void finish(struct driver_rollout *ro, int error, const char *fmt, ...) {
        va_list ap;

        if (ro->stage >= STAGE_FINISHED)
                return;
        ro->stage = STAGE_FINISHED;
        ro->finish_error = error;
        if (fmt) {
                va_start(ap, fmt);
                if (vasprintf(&ro->finish_message, fmt, ap) < 0)
                        ro->finish_message = NULL;
                va_end(ap);
        }
        dtimer_start(&ro->finish, 0);
}

static void on_finish_timer(struct dtimer *t) {
        struct driver_rollout *ro = container_of(t, struct driver_rollout, finish);

        if (ro->stage == STAGE_FINISHED && ro->cb->on_finished)
                ro->cb->on_finished(ro, ro->finish_error, ro->finish_message, ro->userdata);
}

/* ---- the reads at the start: the DaemonSet, its update revision, its nodes ---- */

static void on_daemonset_read(struct kube_collect *c, void *userdata);
static void on_revisions_read(struct kube_collect *c, void *userdata);
static void on_pods_read(struct kube_collect *c, void *userdata);
static void on_nodes_read(struct kube_collect *c, void *userdata);

static int read_daemonset(struct driver_rollout *ro) {
        _cleanup_free_ char *path = NULL;

        if (asprintf(&path, "/apis/apps/v1/namespaces/%s/daemonsets/%s", ro->ds_ns, ro->ds_name) < 0)
                return -ENOMEM;
        ro->stage = STAGE_READ_DAEMONSET;
        return kube_collect_get(ro->client, path, on_daemonset_read, ro, &ro->read);
}

static void on_retry_timer(struct dtimer *t) {
        struct driver_rollout *ro = container_of(t, struct driver_rollout, retry);
        int r;

        if (ro->stage != STAGE_READ_DAEMONSET)
                return;
        r = read_daemonset(ro);
        if (r < 0)
                finish(ro, r, "cannot read DaemonSet %s/%s: %s", ro->ds_ns, ro->ds_name, strerror(-r));
}

/* A read ended: false (and the rollout finished or stopping) unless it may go on. */
static bool read_ok(struct driver_rollout *ro, struct kube_collect *c, const char *what) {
        if (!running(ro) || c->error == -ECANCELED) {
                kube_collect_done(c);
                return false;
        }
        if (c->error < 0) {
                finish(ro, c->error, "cannot %s: %s", what, c->message ? c->message : strerror(-c->error));
                kube_collect_done(c);
                return false;
        }
        return true;
}

/* The DaemonSet, checked (OnDelete), waiting a little for the controller to observe
 * the newest spec. */
static void on_daemonset_read(struct kube_collect *c, void *userdata) {
        struct driver_rollout *ro = userdata;
        _cleanup_free_ char *what = NULL, *path = NULL;
        char msg[1024];
        int r;

        if (asprintf(&what, "read DaemonSet %s/%s", ro->ds_ns, ro->ds_name) < 0)
                what = NULL;
        if (!read_ok(ro, c, what ? what : "read the DaemonSet"))
                return;
        cJSON_Delete(ro->ds_json);
        ro->ds_json = TAKE_PTR(c->json);
        kube_collect_done(c);
        if (!ro->ds_json)
                return finish(ro, -EINVAL, "DaemonSet %s/%s: an empty answer", ro->ds_ns, ro->ds_name);
        r = rollout_daemonset_parse(ro->ds_json, &ro->ds, msg, sizeof(msg));
        if (r < 0)
                return finish(ro, r, "DaemonSet %s/%s: %s", ro->ds_ns, ro->ds_name, msg);
        r = rollout_preflight(&ro->ds, msg, sizeof(msg));
        if (r == -EPERM)
                return finish(ro, r, "refused: %s", msg);
        if (r == -EAGAIN && ro->daemonset_attempts++ < DAEMONSET_MAX_RETRIES) {
                /* A get every 500 ms for at most 10 s: the controller syncs in well under a
                 * second; a controller that is down is an error to report. */
                dtimer_start(&ro->retry, DAEMONSET_RETRY_USEC);
                return;
        }
        if (r < 0)
                return finish(ro, -ETIMEDOUT, "%s: is kube-controller-manager running?", msg);
        if (asprintf(&path, "/apis/apps/v1/namespaces/%s/controllerrevisions", ro->ds_ns) < 0)
                return finish(ro, -ENOMEM, "out of memory");
        ro->stage = STAGE_READ_REVISIONS;
        r = kube_collect_list(ro->client, path, 500, on_revisions_read, ro, &ro->read);
        if (r < 0)
                finish(ro, r, "cannot list the ControllerRevisions of namespace %s: %s", ro->ds_ns,
                       strerror(-r));
}

static void on_revisions_read(struct kube_collect *c, void *userdata) {
        struct driver_rollout *ro = userdata;
        _cleanup_free_ char *what = NULL, *path = NULL;
        const char *hash = NULL;
        int r;

        if (asprintf(&what, "list the ControllerRevisions of namespace %s", ro->ds_ns) < 0)
                what = NULL;
        if (!read_ok(ro, c, what ? what : "list the ControllerRevisions"))
                return;
        r = rollout_update_revision(c->items, ro->ds.uid, &hash);
        if (r >= 0 && !(ro->target = strdup(hash)))
                r = -ENOMEM;
        kube_collect_done(c);
        if (r == -ENOMEM)
                return finish(ro, r, "out of memory");
        if (r < 0)
                return finish(ro, r, "DaemonSet %s/%s: no ControllerRevision of its own%s", ro->ds_ns,
                              ro->ds_name, r == -EINVAL ? " with a controller-revision-hash label" : "");
        if (asprintf(&path, "/api/v1/namespaces/%s/pods", ro->ds_ns) < 0)
                return finish(ro, -ENOMEM, "out of memory");
        ro->stage = STAGE_READ_PODS;
        r = kube_collect_list(ro->client, path, 500, on_pods_read, ro, &ro->read);
        if (r < 0)
                finish(ro, r, "cannot list the pods of namespace %s: %s", ro->ds_ns, strerror(-r));
}

/* The nodes: those of the DaemonSet's pods, and those whose Node still records this
 * driver's rollout or driver drain (a node whose pod is gone, resumed). */
static void on_pods_read(struct kube_collect *c, void *userdata) {
        struct driver_rollout *ro = userdata;
        _cleanup_free_ char *what = NULL;
        const cJSON *it;
        int r;

        if (asprintf(&what, "list the pods of namespace %s", ro->ds_ns) < 0)
                what = NULL;
        if (!read_ok(ro, c, what ? what : "list the pods"))
                return;
        cJSON_ArrayForEach(it, c->items) {
                const cJSON *ref;
                const char *node = json_str(it, "spec.nodeName");
                bool ours = false;

                cJSON_ArrayForEach(ref, json_path(it, "metadata.ownerReferences")) ours =
                        ours ||
                        (json_bool(ref, "controller", false) && streq_ptr(json_str(ref, "uid"), ro->ds.uid));
                if (!ours || !node)
                        continue;
                if (strv_push_unique(&ro->names, &ro->n_names, node) < 0) {
                        kube_collect_done(c);
                        return finish(ro, -ENOMEM, "out of memory");
                }
        }
        kube_collect_done(c);
        ro->stage = STAGE_READ_NODES;
        r = kube_collect_list(ro->client, "/api/v1/nodes", 500, on_nodes_read, ro, &ro->read);
        if (r < 0)
                finish(ro, r, "cannot list the nodes: %s", strerror(-r));
}

static int str_cmp(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static void on_nodes_read(struct kube_collect *c, void *userdata) {
        struct driver_rollout *ro = userdata;
        const cJSON *it;
        char key[256], skey[256];

        if (!read_ok(ro, c, "list the nodes"))
                return;
        rollout_record_key(ro->driver, key, sizeof(key));
        snprintf(skey, sizeof(skey), DRAINER_ANN_STATE ".%s", ro->driver);
        cJSON_ArrayForEach(it, c->items) {
                const cJSON *ann = json_path(it, "metadata.annotations");
                const char *name = json_str(it, "metadata.name");

                if (name && (json_get_str(ann, key) || json_get_str(ann, skey)) &&
                    strv_push_unique(&ro->names, &ro->n_names, name) < 0) {
                        kube_collect_done(c);
                        return finish(ro, -ENOMEM, "out of memory");
                }
        }
        kube_collect_done(c);
        if (ro->n_names > ROLLOUT_MAX_NODES)
                return finish(ro, -E2BIG, "more than %d nodes", ROLLOUT_MAX_NODES);
        if (ro->n_names > 0)
                qsort(ro->names, ro->n_names, sizeof(*ro->names), str_cmp);
        ro->nodes = calloc(ro->n_names ? ro->n_names : 1, sizeof(*ro->nodes));
        if (!ro->nodes)
                return finish(ro, -ENOMEM, "out of memory");
        for (size_t i = 0; i < ro->n_names; i++)
                ro->nodes[i] = (struct rollout_node){ .rollout = ro, .name = ro->names[i] };
        ro->n = ro->n_names;
        free(ro->names);
        ro->names = NULL;
        ro->n_names = 0;
        ro->stage = STAGE_RUNNING;
        if (ro->cb->on_planned)
                ro->cb->on_planned(ro, ro->target, ro->n, ro->userdata);
        if (running(ro))
                reconcile(ro);
}

/* ---- one node ---- */

static void node_say(struct rollout_node *rn, const char *fmt, ...) _printf_(2, 3);
static void node_say(struct rollout_node *rn, const char *fmt, ...) {
        struct driver_rollout *ro = rn->rollout;
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
        if (ro->cb->on_progress)
                ro->cb->on_progress(ro, rn->name, rn->message, ro->userdata);
}

static void on_view_change(struct node_view *v, void *userdata) {
        struct rollout_node *rn = userdata;

        reconcile(rn->rollout);
}

static void on_view_synced(struct node_view *v, unsigned part, void *userdata) {
        struct rollout_node *rn = userdata;

        reconcile(rn->rollout);
}

static void on_view_error(struct node_view *v, unsigned part, int error, const char *message,
                          void *userdata) {
        struct rollout_node *rn = userdata;

        log_debug("node %s: %s: %s", rn->name, node_view_part_name(part),
                  message ? message : strerror(-error));
}

static void on_view_closed(void *userdata) {
        struct driver_rollout *ro = userdata;

        assert(ro->views_closing > 0);
        ro->views_closing--;
}

/* A node that ended lets go of its watches (from the loop, not from inside the
 * view's own callback). */
static void node_release(struct rollout_node *rn) {
        struct driver_rollout *ro = rn->rollout;

        if (rn->engine) {
                engine_stop(rn->engine);
                if (rn->n_spent < ELEMENTSOF(rn->spent))
                        rn->spent[rn->n_spent++] = TAKE_PTR(rn->engine);
        }
        if (rn->call && !rn->call_cancelled) {
                rn->call_cancelled = true;
                kube_call_cancel(rn->call); /* on_call_done clears it */
        }
        if (rn->view) {
                ro->views_closing++;
                node_view_close(rn->view, on_view_closed, ro);
                rn->view = NULL;
        }
}

static void on_node_deadline(struct dtimer *t) {
        struct rollout_node *rn = container_of(t, struct rollout_node, deadline);

        reconcile(rn->rollout);
}

static void on_node_timer(struct dtimer *t) {
        struct rollout_node *rn = container_of(t, struct rollout_node, timer);

        if (rn->done || rn->failed)
                return node_release(rn);
        reconcile(rn->rollout);
}

static void announce_failed(struct rollout_node *rn, const char *message) {
        const struct node_rec *n = rn->view ? node_view_node(rn->view) : NULL;
        struct engine_notice notice = {
                .kind = ENGINE_NOTICE_FAILED,
                .node = n,
                .phase = DRAIN_PHASE_DRAINED,
                .message = message,
        };

        if (n && rn->rollout->announcer)
                announcer_notice(rn->rollout->announcer, &notice);
}

static void node_end(struct rollout_node *rn, int result, const char *fmt, ...) _printf_(3, 4);
static void node_end(struct rollout_node *rn, int result, const char *fmt, ...) {
        struct driver_rollout *ro = rn->rollout;
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
                ro->failing = true;
                announce_failed(rn, m);
        }
        free(rn->message);
        rn->message = TAKE_PTR(m);
        if (rn->timers_ready) {
                dtimer_stop(&rn->deadline);
                dtimer_start(&rn->timer, 0); /* node_release */
        }
        /* A node that failed keeps its slot while something of it is out of service (the
         * Lease expires by itself once no process renews it); one that changed nothing (it
         * failed before its drain started) gives it back at once. */
        if (ro->slots && rn->slot_wanted &&
            (result == 0 ||
             !rollout_failed_keeps_slot(rn->view ? node_view_node(rn->view) : NULL, ro->driver)))
                slots_release(ro->slots, rn->name);
        if (ro->cb->on_node_done)
                ro->cb->on_node_done(ro, rn->name, result, rn->message, ro->userdata);
}

static void on_engine_progress(struct engine *e, const struct engine_progress *p, void *userdata) {
        struct rollout_node *rn = userdata;

        if (p->message)
                node_say(rn, "node %s: %s", rn->name, p->message);
}

static void on_engine_notice(struct engine *e, const struct engine_notice *n, void *userdata) {
        struct rollout_node *rn = userdata;

        if (rn->rollout->announcer)
                announcer_notice(rn->rollout->announcer, n);
}

static void on_engine_finished(struct engine *e, const struct engine_summary *s, void *userdata) {
        struct rollout_node *rn = userdata;
        struct driver_rollout *ro = rn->rollout;

        rn->engine_ok = s->result == 0;
        if (!running(ro))
                return;
        if (s->result < 0) {
                const char *what = rn->goal == ENGINE_GOAL_DRAIN ? "drain" : "restore";

                if (rn->goal == ENGINE_GOAL_UNCORDON && s->result == -ETIMEDOUT)
                        node_end(rn, s->result,
                                 "node %s: the new driver %s (revision %s) did not become healthy within "
                                 "--timeout: %s; the rollout stops here, the driver of node %s stays out of "
                                 "service (drainer.io/state.%s); fix it and run the rollout again",
                                 rn->name, ro->driver, ro->target, strna(s->message), rn->name, ro->driver);
                else
                        node_end(rn, s->result, "node %s: the %s of driver %s failed: %s", rn->name, what,
                                 ro->driver, strna(s->message));
        }
        reconcile(ro);
}

static int engine_run(struct rollout_node *rn, enum engine_goal goal) {
        struct driver_rollout *ro = rn->rollout;
        uint64_t spent = timesrc_now(ro->ts) - rn->t0;
        struct engine_options eo;
        static const struct engine_callbacks cb = {
                .on_progress = on_engine_progress,
                .on_notice = on_engine_notice,
                .on_finished = on_engine_finished,
        };
        int r;

        /* the rollout's profile: each pod's own grace, the driver's health */
        drain_profile_engine_options(ro->profile, rn->name, goal, &eo);
        /* The node's timeout counts from its start in this run. */
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
        r = engine_new(ro->client, ro->transport, ro->ts, &eo, &cb, rn, &rn->engine);
        if (r >= 0)
                r = engine_start(rn->engine);
        if (r < 0)
                node_end(rn, r, "node %s: cannot start the engine: %s", rn->name, strerror(-r));
        return r;
}

static bool engine_running(const struct rollout_node *rn) {
        return rn->engine && !rn->engine_ok && !rn->failed && !engine_idle(rn->engine);
}

static void on_call_done(const struct kube_result *res, void *userdata) {
        struct rollout_node *rn = userdata;

        rn->call = NULL;
        rn->call_cancelled = false;
        if (res->error == -ECANCELED || !running(rn->rollout))
                return;
        if (res->error < 0 && res->error != -ENOENT) {
                log_warning("node %s: %s (retrying)", rn->name,
                            res->message ? res->message : strerror(-res->error));
                if (rn->timers_ready)
                        dtimer_start(&rn->timer, EVICT_RETRY_USEC);
        }
        reconcile(rn->rollout);
}

static void on_evicted(const struct kube_result *res, void *userdata) {
        struct rollout_node *rn = userdata;

        if (res->error >= 0 || res->error == -ENOENT) {
                if (!rn->t_out)
                        rn->t_out = timesrc_now(rn->rollout->ts);
        } else {
                free(rn->evicted_uid);
                rn->evicted_uid = NULL;
        }
        on_call_done(res, userdata);
}

static int patch_record(struct rollout_node *rn, const char *hash) {
        _cleanup_free_ char *body = NULL, *path = NULL;
        int r = rollout_patch_record(rn->rollout->driver, hash, &body);

        if (r < 0 || asprintf(&path, "/api/v1/nodes/%s", rn->name) < 0)
                return -ENOMEM;
        return kube_patch(rn->rollout->client, path, KUBE_PATCH_MERGE, body, on_call_done, rn, &rn->call);
}

/* The running pods' UIDs at the node's start, to count those still running at its end. */
static void note_pods(struct rollout_node *rn, const struct node_input *in, bool at_start) {
        if (at_start) {
                for (size_t i = 0; i < in->n_pods; i++)
                        if (in->pods[i]->phase == POD_RUNNING && !in->pods[i]->deleting &&
                            !rollout_pod_of(in->pods[i], rn->rollout->ds.uid))
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

/* Takes the node's step: a drain slot first, then what its Node says is next. */
static void node_reconcile(struct rollout_node *rn) {
        struct driver_rollout *ro = rn->rollout;
        _cleanup_(node_input_done) struct node_input in = {};
        struct rollout_node_input ri;
        enum rollout_step step;
        char msg[1024];
        uint64_t now = timesrc_now(ro->ts);
        int r;

        if (rn->done || rn->failed || !rn->view ||
            !node_view_synced(rn->view, NODE_VIEW_ALL & ~NODE_VIEW_PDBS))
                return;
        if (node_view_collect(rn->view, &in) < 0)
                return node_end(rn, -ENOMEM, "node %s: out of memory", rn->name);
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
                                        rn->name, strna(ro->lease_ns), strerror(-r));
                if (r == 0) {
                        node_say(rn, "node %s: waiting for a drain slot (held by %s)", rn->name,
                                 slots_holders(ro->slots));
                        return;
                }
        }
        /* The node's timeout starts now, with its slot: the wait for one is not the node's
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
                        r = kube_evict(ro->client, old->ns, old->name, -1, false, on_evicted, rn, &rn->call);
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

static int node_open(struct rollout_node *rn) {
        static const struct node_view_handlers h = {
                .on_change = on_view_change,
                .on_synced = on_view_synced,
                .on_error = on_view_error,
        };
        struct driver_rollout *ro = rn->rollout;
        int r;

        rn->t0 = 0; /* set when its slot is taken */
        if (!rn->timers_ready) {
                r = dtimer_init(&rn->timer, ro->ts, on_node_timer);
                if (r < 0)
                        return r;
                r = dtimer_init(&rn->deadline, ro->ts, on_node_deadline);
                if (r < 0) {
                        dtimer_done(&rn->timer);
                        return r;
                }
                rn->timers_ready = true;
        }
        r = node_view_new(ro->client, ro->ts, &(const struct node_view_options){ .node = rn->name }, &h, rn,
                          &rn->view);
        if (r >= 0)
                r = node_view_start(rn->view, NODE_VIEW_ALL & ~NODE_VIEW_PDBS);
        return r;
}

static bool node_active(const struct rollout_node *rn) {
        return rn->view && !rn->done && !rn->failed;
}

/* ---- the whole rollout ---- */

/* Every node in progress takes its step; the next nodes start, in order, while
 * max_parallel allows and no node failed; the end once none is left. */
static void reconcile(struct driver_rollout *ro) {
        size_t active;
        bool over;

        if (ro->stage != STAGE_RUNNING)
                return;
        if (ro->reconciling) {
                ro->reconcile_again = true;
                return;
        }
        ro->reconciling = true;
        do {
                ro->reconcile_again = false;
                active = 0;
                for (size_t i = 0; i < ro->n; i++)
                        if (node_active(&ro->nodes[i]))
                                node_reconcile(&ro->nodes[i]);
                for (size_t i = 0; i < ro->n; i++)
                        active += node_active(&ro->nodes[i]);
                for (size_t i = 0; i < ro->n && active < ro->max_parallel && !ro->failing; i++) {
                        struct rollout_node *rn = &ro->nodes[i];
                        int r;

                        if (rn->view || rn->done || rn->failed)
                                continue;
                        r = node_open(rn);
                        if (r < 0) {
                                node_end(rn, r, "node %s: cannot watch it: %s", rn->name, strerror(-r));
                                break;
                        }
                        active++;
                        ro->reconcile_again = true;
                }
        } while (ro->reconcile_again && ro->stage == STAGE_RUNNING);
        ro->reconciling = false;
        if (ro->stage != STAGE_RUNNING)
                return;
        over = true;
        for (size_t i = 0; i < ro->n; i++) {
                const struct rollout_node *rn = &ro->nodes[i];

                if (node_active(rn) || (!rn->view && !rn->done && !rn->failed && !ro->failing))
                        over = false;
        }
        if (over)
                finish(ro, 0, NULL);
}

/* ---- the object ---- */

static void on_close_timer(struct dtimer *t);

int driver_rollout_new(struct kube_client *client, struct timesrc *ts,
                       const struct driver_rollout_options *o, const struct driver_rollout_callbacks *cb,
                       void *userdata, struct driver_rollout **ret) {
        _cleanup_(driver_rollout_freep) struct driver_rollout *ro = NULL;
        int r;

        if (!client || !ts || !o || !cb || !ret || !o->ds_namespace || !o->ds_name || !o->driver ||
            !o->profile || o->max_parallel < 1 || o->timeout_usec == 0)
                return -EINVAL;
        ro = calloc(1, sizeof(*ro));
        if (!ro)
                return -ENOMEM;
        *ro = (struct driver_rollout){
                .client = client,
                .ts = ts,
                .transport = o->transport,
                .max_parallel = o->max_parallel,
                .timeout_usec = o->timeout_usec,
                .profile = o->profile,
                .slots = o->slots,
                .announcer = o->announcer,
                .cb = cb,
                .userdata = userdata,
        };
        ro->ds_ns = strdup(o->ds_namespace);
        ro->ds_name = strdup(o->ds_name);
        ro->driver = strdup(o->driver);
        ro->lease_ns = o->lease_namespace ? strdup(o->lease_namespace) : NULL;
        if (!ro->ds_ns || !ro->ds_name || !ro->driver || (o->lease_namespace && !ro->lease_ns))
                return -ENOMEM;
        r = dtimer_init(&ro->retry, ts, on_retry_timer);
        if (r < 0)
                return r;
        r = dtimer_init(&ro->finish, ts, on_finish_timer);
        if (r < 0) {
                dtimer_done(&ro->retry);
                return r;
        }
        r = dtimer_init(&ro->close, ts, on_close_timer);
        if (r < 0) {
                dtimer_done(&ro->retry);
                dtimer_done(&ro->finish);
                return r;
        }
        ro->timers_ready = true;
        *ret = TAKE_PTR(ro);
        return 0;
}

int driver_rollout_start(struct driver_rollout *r) {
        if (r->stage != STAGE_NEW)
                return -EALREADY;
        return read_daemonset(r);
}

void driver_rollout_poke(struct driver_rollout *r) {
        if (r)
                reconcile(r);
}

/* Stopping: done once no read, call, engine or view of any node is left. */
static bool all_closed(struct driver_rollout *ro) {
        if (ro->read.running || ro->views_closing > 0)
                return false;
        for (size_t i = 0; i < ro->n; i++) {
                struct rollout_node *rn = &ro->nodes[i];

                if (rn->call || rn->engine || rn->view)
                        return false;
                for (size_t j = 0; j < rn->n_spent; j++)
                        if (!engine_idle(rn->spent[j]))
                                return false;
        }
        return true;
}

static void on_close_timer(struct dtimer *t) {
        struct driver_rollout *ro = container_of(t, struct driver_rollout, close);

        if (ro->stage != STAGE_STOPPING)
                return;
        if (!all_closed(ro)) {
                dtimer_start(&ro->close, CLOSE_CHECK_USEC);
                return;
        }
        ro->stage = STAGE_STOPPED;
        if (ro->stopped)
                ro->stopped(ro->stopped_userdata);
}

void driver_rollout_stop(struct driver_rollout *r, void (*stopped)(void *userdata), void *userdata) {
        if (r->stage >= STAGE_STOPPING)
                return;
        r->stage = STAGE_STOPPING;
        r->stopped = stopped;
        r->stopped_userdata = userdata;
        dtimer_stop(&r->retry);
        dtimer_stop(&r->finish);
        kube_collect_cancel(&r->read);
        for (size_t i = 0; i < r->n; i++) {
                struct rollout_node *rn = &r->nodes[i];

                if (rn->timers_ready) {
                        dtimer_stop(&rn->timer);
                        dtimer_stop(&rn->deadline);
                }
                node_release(rn);
        }
        dtimer_start(&r->close, 0);
}

const char *driver_rollout_revision(const struct driver_rollout *r) {
        return r->target;
}

size_t driver_rollout_n_nodes(const struct driver_rollout *r) {
        return r->n;
}

void driver_rollout_node_status(const struct driver_rollout *r, size_t i,
                                struct driver_rollout_node_status *ret) {
        const struct rollout_node *rn;
        enum driver_rollout_result res;

        assert(i < r->n);
        rn = &r->nodes[i];
        res = rn->skipped   ? DRIVER_ROLLOUT_SKIPPED
              : rn->done    ? DRIVER_ROLLOUT_UPDATED
              : rn->failed  ? (rn->result == -ETIMEDOUT ? DRIVER_ROLLOUT_TIMEOUT
                               : rn->result == -EPERM   ? DRIVER_ROLLOUT_REFUSED
                                                        : DRIVER_ROLLOUT_FAILED)
              : rn->started ? DRIVER_ROLLOUT_INTERRUPTED
                            : DRIVER_ROLLOUT_NOT_STARTED;
        *ret = (struct driver_rollout_node_status){
                .name = rn->name,
                .result = res,
                .error = rn->failed ? rn->result : 0,
                .step = rn->last_step,
                .message = rn->message,
                .replaced = rn->old_pod,
                .has_out = rn->t_out && rn->t_back,
                .out_usec = rn->t_out && rn->t_back ? rn->t_back - rn->t_out : 0,
                .pods_kept = rn->pods_kept,
        };
}

void driver_rollout_free(struct driver_rollout *r) {
        if (!r)
                return;
        /* Only stopped (or never started): nothing of it is on the loop any more. */
        assert(r->stage == STAGE_NEW || r->stage == STAGE_STOPPED || all_closed(r));
        for (size_t i = 0; i < r->n; i++) {
                struct rollout_node *rn = &r->nodes[i];

                for (size_t j = 0; j < rn->n_spent; j++)
                        engine_free(rn->spent[j]);
                if (rn->timers_ready) {
                        dtimer_done(&rn->timer);
                        dtimer_done(&rn->deadline);
                }
                free(rn->name);
                free(rn->message);
                free(rn->evicted_uid);
                strv_free_n(rn->uids0, rn->n_uids0);
        }
        free(r->nodes);
        strv_free_n(r->names, r->n_names);
        if (r->timers_ready) {
                dtimer_done(&r->retry);
                dtimer_done(&r->finish);
                dtimer_done(&r->close);
        }
        kube_collect_done(&r->read);
        free(r->target);
        cJSON_Delete(r->ds_json);
        free(r->finish_message);
        free(r->ds_ns);
        free(r->ds_name);
        free(r->driver);
        free(r->lease_ns);
        free(r);
}
