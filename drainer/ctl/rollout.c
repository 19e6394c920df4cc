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

#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "drainer/base/text.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/announcer.h"
#include "drainer/ctl/profile.h"
#include "drainer/ctl/rollout-runner.h"
#include "drainer/dra/nodeview.h"
#include "drainer/drain/engine.h"
#include "drainer/drain/rollout.h"
#include "drainer/drain/state.h"
#include "drainer/kube/client.h"
#include "drainer/kube/collect.h"
#include "drainer/kube/slots.h"

#define ROLLOUT_MAX_NODES     10000
#define EVICT_RETRY_USEC      (5 * USEC_PER_SEC)
#define DAEMONSET_RETRY_USEC  (500 * USEC_PER_MSEC)
#define DAEMONSET_MAX_RETRIES 20
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

static void reconcile(struct driver_rollout *rollout);

static const char *const result_names[_DRIVER_ROLLOUT_RESULT_MAX] = {
        [DRIVER_ROLLOUT_NOT_STARTED] = "not-started", [DRIVER_ROLLOUT_INTERRUPTED] = "interrupted",
        [DRIVER_ROLLOUT_SKIPPED] = "skipped",         [DRIVER_ROLLOUT_UPDATED] = "updated",
        [DRIVER_ROLLOUT_TIMEOUT] = "timeout",         [DRIVER_ROLLOUT_REFUSED] = "refused",
        [DRIVER_ROLLOUT_FAILED] = "failed",
};

const char *driver_rollout_result_to_string(enum driver_rollout_result result) {
        return result >= 0 && result < _DRIVER_ROLLOUT_RESULT_MAX ? result_names[result] : NULL;
}

static bool running(const struct driver_rollout *rollout) {
        return rollout->stage < STAGE_STOPPING;
}

/* ---- the end: said once, from the loop ---- */

static void finish(struct driver_rollout *rollout, int error, const char *fmt, ...) _printf_(3, 4);
static void finish(struct driver_rollout *rollout, int error, const char *fmt, ...) {
        va_list ap;

        if (rollout->stage >= STAGE_FINISHED)
                return;
        rollout->stage = STAGE_FINISHED;
        rollout->finish_error = error;
        if (fmt) {
                va_start(ap, fmt);
                if (vasprintf(&rollout->finish_message, fmt, ap) < 0)
                        rollout->finish_message = NULL;
                va_end(ap);
        }
        dtimer_start(&rollout->finish, 0);
}

static void on_finish_timer(struct dtimer *t) {
        struct driver_rollout *rollout = container_of(t, struct driver_rollout, finish);

        if (rollout->stage == STAGE_FINISHED && rollout->cb->on_finished)
                rollout->cb->on_finished(rollout, rollout->finish_error, rollout->finish_message,
                                         rollout->userdata);
}

/* ---- the reads at the start: the DaemonSet, its update revision, its nodes ---- */

static void close_check_soon(struct driver_rollout *rollout);
static void on_daemonset_read(struct kube_collect *c, void *userdata);
static void on_revisions_read(struct kube_collect *c, void *userdata);
static void on_pods_read(struct kube_collect *c, void *userdata);
static void on_nodes_read(struct kube_collect *c, void *userdata);

static int read_daemonset(struct driver_rollout *rollout) {
        _cleanup_free_ char *path = NULL;

        if (asprintf(&path, "/apis/apps/v1/namespaces/%s/daemonsets/%s", rollout->ds_ns, rollout->ds_name) <
            0)
                return -ENOMEM;
        rollout->stage = STAGE_READ_DAEMONSET;
        return kube_collect_get(rollout->client, path, on_daemonset_read, rollout, &rollout->read);
}

static void on_retry_timer(struct dtimer *t) {
        struct driver_rollout *rollout = container_of(t, struct driver_rollout, retry);
        int r;

        if (rollout->stage != STAGE_READ_DAEMONSET)
                return;
        r = read_daemonset(rollout);
        if (r < 0)
                finish(rollout, r, "cannot read DaemonSet %s/%s: %s", rollout->ds_ns, rollout->ds_name,
                       strerror(-r));
}

/* A read ended: false (and the rollout finished or stopping) unless it may go on. */
static bool read_ok(struct driver_rollout *rollout, struct kube_collect *c, const char *what) {
        if (!running(rollout) || c->error == -ECANCELED) {
                kube_collect_done(c);
                return false;
        }
        if (c->error < 0) {
                finish(rollout, c->error, "cannot %s: %s", what,
                       c->message ? c->message : strerror(-c->error));
                kube_collect_done(c);
                return false;
        }
        return true;
}

/* The DaemonSet, checked (OnDelete), waiting a little for the controller to observe
 * the newest spec. */
static void on_daemonset_read(struct kube_collect *c, void *userdata) {
        struct driver_rollout *rollout = userdata;
        _cleanup_free_ char *what = NULL, *path = NULL;
        char msg[1024];
        int r;

        close_check_soon(rollout); /* stopping: this read was what it waited for */

        if (asprintf(&what, "read DaemonSet %s/%s", rollout->ds_ns, rollout->ds_name) < 0)
                what = NULL;
        if (!read_ok(rollout, c, what ? what : "read the DaemonSet"))
                return;
        cJSON_Delete(rollout->ds_json);
        rollout->ds_json = TAKE_PTR(c->json);
        kube_collect_done(c);
        if (!rollout->ds_json)
                return finish(rollout, -EINVAL, "DaemonSet %s/%s: an empty answer", rollout->ds_ns,
                              rollout->ds_name);
        r = rollout_daemonset_parse(rollout->ds_json, &rollout->ds, msg, sizeof(msg));
        if (r < 0)
                return finish(rollout, r, "DaemonSet %s/%s: %s", rollout->ds_ns, rollout->ds_name, msg);
        r = rollout_preflight(&rollout->ds, msg, sizeof(msg));
        if (r == -EPERM)
                return finish(rollout, r, "refused: %s", msg);
        if (r == -EAGAIN && rollout->daemonset_attempts++ < DAEMONSET_MAX_RETRIES) {
                /* A get every 500 ms for at most 10 s: the controller syncs in well under a
                 * second; a controller that is down is an error to report. */
                dtimer_start(&rollout->retry, DAEMONSET_RETRY_USEC);
                return;
        }
        if (r < 0)
                return finish(rollout, -ETIMEDOUT, "%s: is kube-controller-manager running?", msg);
        if (asprintf(&path, "/apis/apps/v1/namespaces/%s/controllerrevisions", rollout->ds_ns) < 0)
                return finish(rollout, -ENOMEM, "out of memory");
        rollout->stage = STAGE_READ_REVISIONS;
        r = kube_collect_list(rollout->client, path, 500, NULL, on_revisions_read, rollout, &rollout->read);
        if (r < 0)
                finish(rollout, r, "cannot list the ControllerRevisions of namespace %s: %s", rollout->ds_ns,
                       strerror(-r));
}

static void on_revisions_read(struct kube_collect *c, void *userdata) {
        struct driver_rollout *rollout = userdata;
        _cleanup_free_ char *what = NULL, *path = NULL;
        const char *hash = NULL;
        int r;

        close_check_soon(rollout); /* stopping: this read was what it waited for */

        if (asprintf(&what, "list the ControllerRevisions of namespace %s", rollout->ds_ns) < 0)
                what = NULL;
        if (!read_ok(rollout, c, what ? what : "list the ControllerRevisions"))
                return;
        r = rollout_update_revision(c->items, rollout->ds.uid, &hash);
        if (r >= 0 && !(rollout->target = strdup(hash)))
                r = -ENOMEM;
        kube_collect_done(c);
        if (r == -ENOMEM)
                return finish(rollout, r, "out of memory");
        if (r < 0)
                return finish(rollout, r, "DaemonSet %s/%s: no ControllerRevision of its own%s",
                              rollout->ds_ns, rollout->ds_name,
                              r == -EINVAL ? " with a controller-revision-hash label" : "");
        if (asprintf(&path, "/api/v1/namespaces/%s/pods", rollout->ds_ns) < 0)
                return finish(rollout, -ENOMEM, "out of memory");
        rollout->stage = STAGE_READ_PODS;
        r = kube_collect_list(rollout->client, path, 500, NULL, on_pods_read, rollout, &rollout->read);
        if (r < 0)
                finish(rollout, r, "cannot list the pods of namespace %s: %s", rollout->ds_ns, strerror(-r));
}

/* The nodes: those of the DaemonSet's pods, and those whose Node still records this
 * driver's rollout or driver drain (a node whose pod is gone, resumed). */
static void on_pods_read(struct kube_collect *c, void *userdata) {
        struct driver_rollout *rollout = userdata;
        _cleanup_free_ char *what = NULL;
        const cJSON *it;
        int r;

        close_check_soon(rollout); /* stopping: this read was what it waited for */

        if (asprintf(&what, "list the pods of namespace %s", rollout->ds_ns) < 0)
                what = NULL;
        if (!read_ok(rollout, c, what ? what : "list the pods"))
                return;
        cJSON_ArrayForEach(it, c->items) {
                const cJSON *ref;
                const char *node_name = json_str(it, "spec.nodeName");
                bool ours = false;

                cJSON_ArrayForEach(ref, json_path(it, "metadata.ownerReferences")) ours =
                        ours || (json_bool(ref, "controller", false) &&
                                 streq_ptr(json_str(ref, "uid"), rollout->ds.uid));
                if (!ours || !node_name)
                        continue;
                if (strv_push_unique(&rollout->names, &rollout->n_names, node_name) < 0) {
                        kube_collect_done(c);
                        return finish(rollout, -ENOMEM, "out of memory");
                }
        }
        kube_collect_done(c);
        rollout->stage = STAGE_READ_NODES;
        r = kube_collect_list(rollout->client, "/api/v1/nodes", 500, NULL, on_nodes_read, rollout,
                              &rollout->read);
        if (r < 0)
                finish(rollout, r, "cannot list the nodes: %s", strerror(-r));
}

static int str_cmp(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static void on_nodes_read(struct kube_collect *c, void *userdata) {
        struct driver_rollout *rollout = userdata;
        const cJSON *it;
        char key[256], skey[256];

        close_check_soon(rollout); /* stopping: this read was what it waited for */

        if (!read_ok(rollout, c, "list the nodes"))
                return;
        rollout_record_key(rollout->driver, key, sizeof(key));
        snprintf(skey, sizeof(skey), DRAINER_ANN_STATE ".%s", rollout->driver);
        cJSON_ArrayForEach(it, c->items) {
                const cJSON *ann = json_path(it, "metadata.annotations");
                const char *name = json_str(it, "metadata.name");

                if (name && (json_get_str(ann, key) || json_get_str(ann, skey)) &&
                    strv_push_unique(&rollout->names, &rollout->n_names, name) < 0) {
                        kube_collect_done(c);
                        return finish(rollout, -ENOMEM, "out of memory");
                }
        }
        kube_collect_done(c);
        if (rollout->n_names > ROLLOUT_MAX_NODES)
                return finish(rollout, -E2BIG, "more than %d nodes", ROLLOUT_MAX_NODES);
        if (rollout->n_names > 0)
                qsort(rollout->names, rollout->n_names, sizeof(*rollout->names), str_cmp);
        rollout->nodes = calloc(rollout->n_names ? rollout->n_names : 1, sizeof(*rollout->nodes));
        if (!rollout->nodes)
                return finish(rollout, -ENOMEM, "out of memory");
        for (size_t i = 0; i < rollout->n_names; i++)
                rollout->nodes[i] = (struct rollout_node){ .rollout = rollout, .name = rollout->names[i] };
        rollout->n = rollout->n_names;
        free(rollout->names);
        rollout->names = NULL;
        rollout->n_names = 0;
        rollout->stage = STAGE_RUNNING;
        if (rollout->cb->on_planned)
                rollout->cb->on_planned(rollout, rollout->target, rollout->n, rollout->userdata);
        if (running(rollout))
                reconcile(rollout);
}

/* ---- one node ---- */

static void node_say(struct rollout_node *node, const char *fmt, ...) _printf_(2, 3);
static void node_say(struct rollout_node *node, const char *fmt, ...) {
        struct driver_rollout *rollout = node->rollout;
        _cleanup_free_ char *m = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&m, fmt, ap);
        va_end(ap);
        if (r < 0)
                return;
        if (node->message && streq(node->message, m))
                return;
        free(node->message);
        node->message = TAKE_PTR(m);
        if (rollout->cb->on_progress)
                rollout->cb->on_progress(rollout, node->name, node->message, rollout->userdata);
}

static void on_view_change(struct node_view *v, void *userdata) {
        struct rollout_node *node = userdata;

        reconcile(node->rollout);
}

static void on_view_synced(struct node_view *v, unsigned part, void *userdata) {
        struct rollout_node *node = userdata;

        reconcile(node->rollout);
}

static void on_view_error(struct node_view *v, unsigned part, int error, const char *message,
                          void *userdata) {
        struct rollout_node *node = userdata;

        log_debug("node %s: %s: %s", node->name, node_view_part_name(part),
                  message ? message : strerror(-error));
}

static void on_view_closed(void *userdata) {
        struct driver_rollout *rollout = userdata;

        assert(rollout->views_closing > 0);
        rollout->views_closing--;
        close_check_soon(rollout);
}

/* A node that ended lets go of its watches (from the loop, not from inside the
 * view's own callback). */
static void node_release(struct rollout_node *node) {
        struct driver_rollout *rollout = node->rollout;

        if (node->engine) {
                engine_stop(node->engine);
                if (node->n_spent < ELEMENTSOF(node->spent))
                        node->spent[node->n_spent++] = TAKE_PTR(node->engine);
        }
        if (node->call && !node->call_cancelled) {
                node->call_cancelled = true;
                kube_call_cancel(node->call); /* on_call_done clears it */
        }
        if (node->view) {
                rollout->views_closing++;
                node_view_close(node->view, on_view_closed, rollout);
                node->view = NULL;
        }
}

static void on_node_deadline(struct dtimer *t) {
        struct rollout_node *node = container_of(t, struct rollout_node, deadline);

        reconcile(node->rollout);
}

static void on_node_timer(struct dtimer *t) {
        struct rollout_node *node = container_of(t, struct rollout_node, timer);

        if (node->done || node->failed)
                return node_release(node);
        reconcile(node->rollout);
}

static void announce_failed(struct rollout_node *node, const char *message) {
        const struct node_rec *n = node->view ? node_view_node(node->view) : NULL;
        struct engine_notice notice = {
                .kind = ENGINE_NOTICE_FAILED,
                .node = n,
                .phase = DRAIN_PHASE_DRAINED,
                .message = message,
        };

        if (n && node->rollout->announcer)
                announcer_notice(node->rollout->announcer, &notice);
}

static void node_end(struct rollout_node *node, int result, const char *fmt, ...) _printf_(3, 4);
static void node_end(struct rollout_node *node, int result, const char *fmt, ...) {
        struct driver_rollout *rollout = node->rollout;
        _cleanup_free_ char *m = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        node->result = result;
        if (result == 0)
                node->done = true;
        else {
                node->failed = true;
                rollout->failing = true;
                announce_failed(node, m);
        }
        free(node->message);
        node->message = TAKE_PTR(m);
        if (node->timers_ready) {
                dtimer_stop(&node->deadline);
                dtimer_start(&node->timer, 0); /* node_release */
        }
        /* A node that failed keeps its slot while something of it is out of service (the
         * Lease expires by itself once no process renews it); one that changed nothing (it
         * failed before its drain started) gives it back at once. */
        if (rollout->slots && node->slot_wanted &&
            (result == 0 ||
             !rollout_failed_keeps_slot(node->view ? node_view_node(node->view) : NULL, rollout->driver)))
                slots_release(rollout->slots, node->name);
        if (rollout->cb->on_node_done)
                rollout->cb->on_node_done(rollout, node->name, result, node->message, rollout->userdata);
}

static void on_engine_progress(struct engine *e, const struct engine_progress *p, void *userdata) {
        struct rollout_node *node = userdata;

        if (p->message)
                node_say(node, "node %s: %s", node->name, p->message);
}

static void on_engine_notice(struct engine *e, const struct engine_notice *n, void *userdata) {
        struct rollout_node *node = userdata;

        if (node->rollout->announcer)
                announcer_notice(node->rollout->announcer, n);
}

static void on_engine_finished(struct engine *e, const struct engine_summary *s, void *userdata) {
        struct rollout_node *node = userdata;
        struct driver_rollout *rollout = node->rollout;

        node->engine_ok = s->result == 0;
        if (!running(rollout))
                return;
        if (s->result < 0) {
                const char *what = node->goal == ENGINE_GOAL_DRAIN ? "drain" : "restore";

                if (node->goal == ENGINE_GOAL_UNCORDON && s->result == -ETIMEDOUT)
                        node_end(node, s->result,
                                 "node %s: the new driver %s (revision %s) did not become healthy within "
                                 "--timeout: %s; the rollout stops here, the driver of node %s stays out of "
                                 "service (drainer.io/state.%s); fix it and run the rollout again",
                                 node->name, rollout->driver, rollout->target, strna(s->message), node->name,
                                 rollout->driver);
                else
                        node_end(node, s->result, "node %s: the %s of driver %s failed: %s", node->name,
                                 what, rollout->driver, strna(s->message));
        }
        reconcile(rollout);
}

/* A stopped engine (running, replaced or spent) has nothing in flight any more. */
static void on_engine_idle(struct engine *e, void *userdata) {
        struct rollout_node *node = userdata;

        close_check_soon(node->rollout);
}

static int engine_run(struct rollout_node *node, enum engine_goal goal) {
        struct driver_rollout *rollout = node->rollout;
        uint64_t spent = timesrc_now(rollout->ts) - node->t0;
        struct engine_options eo;
        static const struct engine_callbacks cb = {
                .on_progress = on_engine_progress,
                .on_notice = on_engine_notice,
                .on_finished = on_engine_finished,
                .on_idle = on_engine_idle,
        };
        int r;

        /* the rollout's profile: each pod's own grace, the driver's health */
        drain_profile_engine_options(rollout->profile, node->name, goal, &eo);
        /* The node's timeout counts from its start in this run. */
        eo.timeout_usec = rollout->timeout_usec > spent ? rollout->timeout_usec - spent : 1;
        if (node->engine) {
                if (node->n_spent == ELEMENTSOF(node->spent)) {
                        node_end(node, -E2BIG, "node %s: the engine was restarted too often", node->name);
                        return -E2BIG;
                }
                engine_stop(node->engine);
                node->spent[node->n_spent++] = TAKE_PTR(node->engine);
        }
        node->goal = goal;
        node->engine_ok = false;
        r = engine_new(rollout->client, rollout->transport, rollout->ts, &eo, &cb, node, &node->engine);
        if (r >= 0)
                r = engine_start(node->engine);
        if (r < 0)
                node_end(node, r, "node %s: cannot start the engine: %s", node->name, strerror(-r));
        return r;
}

static bool engine_running(const struct rollout_node *node) {
        return node->engine && !node->engine_ok && !node->failed && !engine_idle(node->engine);
}

static void on_call_done(const struct kube_result *res, void *userdata) {
        struct rollout_node *node = userdata;

        node->call = NULL;
        node->call_cancelled = false;
        close_check_soon(node->rollout);
        if (res->error == -ECANCELED || !running(node->rollout))
                return;
        if (res->error < 0 && res->error != -ENOENT) {
                log_warning("node %s: %s (retrying)", node->name,
                            res->message ? res->message : strerror(-res->error));
                if (node->timers_ready)
                        dtimer_start(&node->timer, EVICT_RETRY_USEC);
        }
        reconcile(node->rollout);
}

static void on_evicted(const struct kube_result *res, void *userdata) {
        struct rollout_node *node = userdata;

        if (res->error >= 0 || res->error == -ENOENT) {
                if (!node->t_out)
                        node->t_out = timesrc_now(node->rollout->ts);
        } else {
                free(node->evicted_uid);
                node->evicted_uid = NULL;
        }
        on_call_done(res, userdata);
}

static int patch_record(struct rollout_node *node, const char *hash) {
        _cleanup_free_ char *body = NULL, *path = NULL;
        int r = rollout_patch_record(node->rollout->driver, hash, &body);

        if (r < 0 || asprintf(&path, "/api/v1/nodes/%s", node->name) < 0)
                return -ENOMEM;
        return kube_patch(node->rollout->client, path, KUBE_PATCH_MERGE, body, on_call_done, node,
                          &node->call);
}

/* The running pods' UIDs at the node's start, to count those still running at its end. */
static void note_pods(struct rollout_node *node, const struct node_input *in, bool at_start) {
        if (at_start) {
                for (size_t i = 0; i < in->n_pods; i++)
                        if (in->pods[i]->phase == POD_RUNNING && !in->pods[i]->deleting &&
                            !rollout_pod_of(in->pods[i], node->rollout->ds.uid))
                                (void)strv_push_unique(&node->uids0, &node->n_uids0, in->pods[i]->uid);
                return;
        }
        node->pods_kept = 0;
        for (size_t j = 0; j < node->n_uids0; j++)
                for (size_t i = 0; i < in->n_pods; i++)
                        if (streq_ptr(in->pods[i]->uid, node->uids0[j]) &&
                            in->pods[i]->phase == POD_RUNNING && !in->pods[i]->deleting) {
                                node->pods_kept++;
                                break;
                        }
}

/* Takes the node's step: a drain slot first, then what its Node says is next. */
static void node_reconcile(struct rollout_node *node) {
        struct driver_rollout *rollout = node->rollout;
        _cleanup_(node_input_done) struct node_input in = {};
        struct rollout_node_input ri;
        enum rollout_step step;
        char msg[1024];
        uint64_t now = timesrc_now(rollout->ts);
        int r;

        if (node->done || node->failed || !node->view ||
            !node_view_synced(node->view, NODE_VIEW_ALL & ~NODE_VIEW_PDBS))
                return;
        if (node_view_collect(node->view, &in) < 0)
                return node_end(node, -ENOMEM, "node %s: out of memory", node->name);
        if (!in.node)
                return node_end(node, -ENOENT, "node %s: not found", node->name);
        ri = (struct rollout_node_input){ .node = in.node,
                                          .driver = rollout->driver,
                                          .ds_uid = rollout->ds.uid,
                                          .target = rollout->target,
                                          .pods = in.pods,
                                          .n_pods = in.n_pods,
                                          .claims = in.claims,
                                          .n_claims = in.n_claims,
                                          .slices = in.slices,
                                          .n_slices = in.n_slices };
        step = rollout_node_step(&ri, msg, sizeof(msg));
        if (!node->uids0 && step != ROLLOUT_STEP_DONE)
                note_pods(node, &in, true);
        snprintf(node->last_step, sizeof(node->last_step), "%s", rollout_step_to_string(step));

        if (step == ROLLOUT_STEP_DONE) {
                if (!node->started) {
                        node->skipped = true;
                        return node_end(node, 0, "%s: skipped", msg);
                }
                note_pods(node, &in, false);
                if (!node->t_back)
                        node->t_back = now;
                if (node->t_out)
                        return node_end(node, 0,
                                        "node %s: driver %s on revision %s, back in service; out of service "
                                        "for %.1f s, %zu other pods kept running",
                                        node->name, rollout->driver, rollout->target,
                                        (double)(node->t_back - node->t_out) / USEC_PER_SEC,
                                        node->pods_kept);
                return node_end(node, 0, "node %s: driver %s on revision %s, back in service", node->name,
                                rollout->driver, rollout->target);
        }
        if (step == ROLLOUT_STEP_FOREIGN)
                return node_end(node, -EPERM, "refused: %s", msg);

        /* Everything else takes the node out of service, or keeps it out: a slot first. */
        node->started = true;
        node->slot_wanted = true;
        if (rollout->slots) {
                r = slots_acquire(rollout->slots, node->name);
                if (r < 0)
                        return node_end(node, r, "node %s: cannot take a drain slot (Leases in %s): %s",
                                        node->name, strna(rollout->lease_ns), strerror(-r));
                if (r == 0) {
                        node_say(node, "node %s: waiting for a drain slot (held by %s)", node->name,
                                 slots_holders(rollout->slots));
                        return;
                }
        }
        /* The node's timeout starts now, with its slot: the wait for one is not the node's
         * step taking long (it would fail a node that never started). */
        if (!node->t0) {
                node->t0 = now ? now : 1;
                dtimer_start(&node->deadline, rollout->timeout_usec);
        }
        if (node->call || engine_running(node))
                return;
        /* A running engine keeps the timeout itself (and says what remained). */
        if (rollout_timed_out(node->t0, now, rollout->timeout_usec)) {
                /* msg reads "node NODE: what it waits for". */
                const char *what = strstr(msg, ": ") ? strstr(msg, ": ") + 2 : msg;

                return node_end(
                        node, -ETIMEDOUT,
                        step == ROLLOUT_STEP_WAIT
                                ? "node %s: the new driver did not become healthy within --timeout (%s); "
                                  "the rollout stops here, the driver of node %s stays out of service "
                                  "(drainer.io/state.%s); fix it and run the rollout again"
                                : "node %s: not done within --timeout (%s); the rollout stops here, the "
                                  "driver of node %s stays out of service (drainer.io/state.%s); fix it "
                                  "and run the rollout again",
                        node->name, what, node->name, rollout->driver);
        }

        switch (step) {
        case ROLLOUT_STEP_DRAIN: {
                const struct node_rec *n = node_view_node(node->view);
                char key[256];

                if (!kv_get(n->annotations, n->n_annotations,
                            rollout_record_key(rollout->driver, key, sizeof(key)))) {
                        node_say(node, "%s", msg);
                        r = patch_record(node, rollout->target);
                        if (r < 0)
                                node_end(node, r, "node %s: cannot record the rollout: %s", node->name,
                                         strerror(-r));
                        return;
                }
                if (node->engine && node->goal == ENGINE_GOAL_DRAIN && node->engine_ok)
                        return; /* drained: the Node's update is on its way */
                node_say(node, "%s", msg);
                engine_run(node, ENGINE_GOAL_DRAIN);
                return;
        }
        case ROLLOUT_STEP_REPLACE: {
                const struct pod_rec *old = NULL;
                struct rollout_node_facts f;

                rollout_node_facts(&ri, &f);
                old = f.old;
                if (old && !(node->evicted_uid && streq_ptr(node->evicted_uid, old->uid))) {
                        node_say(node, "%s", msg);
                        snprintf(node->old_pod, sizeof(node->old_pod), "%s/%s", old->ns, old->name);
                        free(node->evicted_uid);
                        node->evicted_uid = strdup(old->uid);
                        /* Its own grace period: a driver pod is never deleted with grace 0 (its
                         * object would go while the kubelet still runs the plugin). */
                        r = kube_evict(rollout->client, old->ns, old->name, -1, false, on_evicted, node,
                                       &node->call);
                        if (r < 0)
                                node_end(node, r, "node %s: cannot evict %s: %s", node->name, node->old_pod,
                                         strerror(-r));
                }
                if (!node->wait_since)
                        node->wait_since = now;
                return;
        }
        case ROLLOUT_STEP_WAIT:
                node_say(node, "%s", msg);
                if (!node->t_out)
                        node->t_out = now; /* resumed: counted from here */
                return;
        case ROLLOUT_STEP_RESTORE:
                if (node->engine && node->goal == ENGINE_GOAL_UNCORDON && node->engine_ok)
                        return;
                if (!node->t_out)
                        node->t_out = now;
                node_say(node, "%s", msg);
                engine_run(node, ENGINE_GOAL_UNCORDON);
                return;
        case ROLLOUT_STEP_CLEAR:
                node_say(node, "%s", msg);
                r = patch_record(node, NULL);
                if (r < 0)
                        node_end(node, r, "node %s: cannot clear the rollout record: %s", node->name,
                                 strerror(-r));
                return;
        default:
                return;
        }
}

static int node_open(struct rollout_node *node) {
        static const struct node_view_handlers h = {
                .on_change = on_view_change,
                .on_synced = on_view_synced,
                .on_error = on_view_error,
        };
        struct driver_rollout *rollout = node->rollout;
        int r;

        node->t0 = 0; /* set when its slot is taken */
        if (!node->timers_ready) {
                r = dtimer_init(&node->timer, rollout->ts, on_node_timer);
                if (r < 0)
                        return r;
                r = dtimer_init(&node->deadline, rollout->ts, on_node_deadline);
                if (r < 0) {
                        dtimer_done(&node->timer);
                        return r;
                }
                node->timers_ready = true;
        }
        r = node_view_new(rollout->client, rollout->ts,
                          &(const struct node_view_options){ .node = node->name }, &h, node, &node->view);
        if (r >= 0)
                r = node_view_start(node->view, NODE_VIEW_ALL & ~NODE_VIEW_PDBS);
        return r;
}

static bool node_active(const struct rollout_node *node) {
        return node->view && !node->done && !node->failed;
}

/* ---- the whole rollout ---- */

/* Every node in progress takes its step; the next nodes start, in order, while
 * max_parallel allows and no node failed; the end once none is left. */
static void reconcile(struct driver_rollout *rollout) {
        size_t active;
        bool over;

        if (rollout->stage != STAGE_RUNNING)
                return;
        if (rollout->reconciling) {
                rollout->reconcile_again = true;
                return;
        }
        rollout->reconciling = true;
        do {
                rollout->reconcile_again = false;
                active = 0;
                for (size_t i = 0; i < rollout->n; i++)
                        if (node_active(&rollout->nodes[i]))
                                node_reconcile(&rollout->nodes[i]);
                for (size_t i = 0; i < rollout->n; i++)
                        active += node_active(&rollout->nodes[i]);
                for (size_t i = 0; i < rollout->n && active < rollout->max_parallel && !rollout->failing;
                     i++) {
                        struct rollout_node *node = &rollout->nodes[i];
                        int r;

                        if (node->view || node->done || node->failed)
                                continue;
                        r = node_open(node);
                        if (r < 0) {
                                node_end(node, r, "node %s: cannot watch it: %s", node->name, strerror(-r));
                                break;
                        }
                        active++;
                        rollout->reconcile_again = true;
                }
        } while (rollout->reconcile_again && rollout->stage == STAGE_RUNNING);
        rollout->reconciling = false;
        if (rollout->stage != STAGE_RUNNING)
                return;
        over = true;
        for (size_t i = 0; i < rollout->n; i++) {
                const struct rollout_node *node = &rollout->nodes[i];

                if (node_active(node) || (!node->view && !node->done && !node->failed && !rollout->failing))
                        over = false;
        }
        if (over)
                finish(rollout, 0, NULL);
}

/* ---- the object ---- */

static void on_close_timer(struct dtimer *t);

int driver_rollout_new(struct kube_client *client, struct timesrc *ts,
                       const struct driver_rollout_options *o, const struct driver_rollout_callbacks *cb,
                       void *userdata, struct driver_rollout **ret) {
        _cleanup_(driver_rollout_freep) struct driver_rollout *rollout = NULL;
        int r;

        if (!client || !ts || !o || !cb || !ret || !o->ds_namespace || !o->ds_name || !o->driver ||
            !o->profile || o->max_parallel < 1 || o->timeout_usec == 0)
                return -EINVAL;
        rollout = calloc(1, sizeof(*rollout));
        if (!rollout)
                return -ENOMEM;
        *rollout = (struct driver_rollout){
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
        rollout->ds_ns = strdup(o->ds_namespace);
        rollout->ds_name = strdup(o->ds_name);
        rollout->driver = strdup(o->driver);
        rollout->lease_ns = o->lease_namespace ? strdup(o->lease_namespace) : NULL;
        if (!rollout->ds_ns || !rollout->ds_name || !rollout->driver ||
            (o->lease_namespace && !rollout->lease_ns))
                return -ENOMEM;
        r = dtimer_init(&rollout->retry, ts, on_retry_timer);
        if (r < 0)
                return r;
        r = dtimer_init(&rollout->finish, ts, on_finish_timer);
        if (r < 0) {
                dtimer_done(&rollout->retry);
                return r;
        }
        r = dtimer_init(&rollout->close, ts, on_close_timer);
        if (r < 0) {
                dtimer_done(&rollout->retry);
                dtimer_done(&rollout->finish);
                return r;
        }
        rollout->timers_ready = true;
        *ret = TAKE_PTR(rollout);
        return 0;
}

int driver_rollout_start(struct driver_rollout *rollout) {
        if (rollout->stage != STAGE_NEW)
                return -EALREADY;
        return read_daemonset(rollout);
}

void driver_rollout_poke(struct driver_rollout *rollout) {
        if (rollout)
                reconcile(rollout);
}

/* Stopping: done once no read, call, engine or view of any node is left. */
static bool all_closed(struct driver_rollout *rollout) {
        if (rollout->read.running || rollout->views_closing > 0)
                return false;
        for (size_t i = 0; i < rollout->n; i++) {
                struct rollout_node *node = &rollout->nodes[i];

                if (node->call || node->engine || node->view)
                        return false;
                for (size_t j = 0; j < node->n_spent; j++)
                        if (!engine_idle(node->spent[j]))
                                return false;
        }
        return true;
}

/* Stopping: something all_closed() waits for ended (a read, a call, a view's close,
 * an engine's on_idle): look again on the next turn. Nothing ticks in between. */
static void close_check_soon(struct driver_rollout *rollout) {
        if (rollout->stage == STAGE_STOPPING && !rollout->close.armed)
                dtimer_start(&rollout->close, 0);
}

static void on_close_timer(struct dtimer *t) {
        struct driver_rollout *rollout = container_of(t, struct driver_rollout, close);

        if (rollout->stage != STAGE_STOPPING || !all_closed(rollout))
                return;
        rollout->stage = STAGE_STOPPED;
        if (rollout->stopped)
                rollout->stopped(rollout->stopped_userdata);
}

void driver_rollout_stop(struct driver_rollout *rollout, void (*stopped)(void *userdata), void *userdata) {
        if (rollout->stage >= STAGE_STOPPING)
                return;
        rollout->stage = STAGE_STOPPING;
        rollout->stopped = stopped;
        rollout->stopped_userdata = userdata;
        dtimer_stop(&rollout->retry);
        dtimer_stop(&rollout->finish);
        kube_collect_cancel(&rollout->read);
        for (size_t i = 0; i < rollout->n; i++) {
                struct rollout_node *node = &rollout->nodes[i];

                if (node->timers_ready) {
                        dtimer_stop(&node->timer);
                        dtimer_stop(&node->deadline);
                }
                node_release(node);
        }
        dtimer_start(&rollout->close, 0);
}

const char *driver_rollout_revision(const struct driver_rollout *rollout) {
        return rollout->target;
}

size_t driver_rollout_n_nodes(const struct driver_rollout *rollout) {
        return rollout->n;
}

void driver_rollout_node_status(const struct driver_rollout *rollout, size_t i,
                                struct driver_rollout_node_status *ret) {
        const struct rollout_node *node;
        enum driver_rollout_result res;

        assert(i < rollout->n);
        node = &rollout->nodes[i];
        res = node->skipped   ? DRIVER_ROLLOUT_SKIPPED
              : node->done    ? DRIVER_ROLLOUT_UPDATED
              : node->failed  ? (node->result == -ETIMEDOUT ? DRIVER_ROLLOUT_TIMEOUT
                                 : node->result == -EPERM   ? DRIVER_ROLLOUT_REFUSED
                                                            : DRIVER_ROLLOUT_FAILED)
              : node->started ? DRIVER_ROLLOUT_INTERRUPTED
                              : DRIVER_ROLLOUT_NOT_STARTED;
        *ret = (struct driver_rollout_node_status){
                .name = node->name,
                .result = res,
                .error = node->failed ? node->result : 0,
                .step = node->last_step,
                .message = node->message,
                .replaced = node->old_pod,
                .has_out = node->t_out && node->t_back,
                .out_usec = node->t_out && node->t_back ? node->t_back - node->t_out : 0,
                .pods_kept = node->pods_kept,
        };
}

void driver_rollout_free(struct driver_rollout *rollout) {
        if (!rollout)
                return;
        /* Only stopped (or never started): nothing of it is on the loop any more. */
        assert(rollout->stage == STAGE_NEW || rollout->stage == STAGE_STOPPED || all_closed(rollout));
        for (size_t i = 0; i < rollout->n; i++) {
                struct rollout_node *node = &rollout->nodes[i];

                for (size_t j = 0; j < node->n_spent; j++)
                        engine_free(node->spent[j]);
                if (node->timers_ready) {
                        dtimer_done(&node->timer);
                        dtimer_done(&node->deadline);
                }
                free(node->name);
                free(node->message);
                free(node->evicted_uid);
                strv_free_n(node->uids0, node->n_uids0);
        }
        free(rollout->nodes);
        strv_free_n(rollout->names, rollout->n_names);
        if (rollout->timers_ready) {
                dtimer_done(&rollout->retry);
                dtimer_done(&rollout->finish);
                dtimer_done(&rollout->close);
        }
        kube_collect_done(&rollout->read);
        free(rollout->target);
        cJSON_Delete(rollout->ds_json);
        free(rollout->finish_message);
        free(rollout->ds_ns);
        free(rollout->ds_name);
        free(rollout->driver);
        free(rollout->lease_ns);
        free(rollout);
}
