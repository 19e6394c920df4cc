/* The preparation of the runs (preparation.h): the node list of a selector, each run's
 * driver label KEY, maintain's seamless check, one step at a time from the loop. Owns
 * its list call, its snapshot and its reads; changes nothing, prints nothing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/log.h"
#include "drainer/ctl/driverkey.h"
#include "drainer/ctl/preparation.h"
#include "drainer/dra/snapshot.h"
#include "drainer/drain/nodeset.h"
#include "drainer/drain/plan.h"
#include "drainer/kube/client.h"

struct drain_preparation {
        struct kube_client *client; /* borrowed */
        struct timesrc *ts;         /* borrowed */
        const struct preparation_callbacks *cb;
        void *userdata;

        /* the node list */
        struct kube_call *list_call;
        char **names;
        size_t n_names;

        /* one node's snapshot: the keys' (one per node) or the seamless check's */
        struct node_snapshot *snap;
        bool snap_reading;
        const char *snap_node;

        /* the keys */
        const struct fleet_run *runs; /* borrowed */
        size_t n_runs, key_at;
        struct driver_key_read *key_read;

        /* the seamless check */
        const struct drain_profile *seam_profile; /* borrowed */
        struct seamless_check *seam_check;

        unsigned pending; /* callbacks still to come (reads, cancels, the snapshot's close) */
        bool closing;
        void (*closed)(void *userdata);
        void *closed_userdata;
};

static void maybe_closed(struct drain_preparation *p) {
        if (!p->closing || p->pending > 0)
                return;
        if (p->closed)
                p->closed(p->closed_userdata);
        nodeset_free(p->names, p->n_names);
        free(p);
}

/* A callback came: false if the preparation is closing (the callback then does nothing more). */
static bool op_ended(struct drain_preparation *p) {
        p->pending--;
        if (!p->closing)
                return true;
        maybe_closed(p);
        return false;
}

static void on_snapshot_closed(void *userdata) {
        struct drain_preparation *p = userdata;

        p->pending--;
        maybe_closed(p);
}

static void close_snapshot(struct drain_preparation *p) {
        if (!p->snap)
                return;
        if (p->snap_reading) {
                /* still reading: closing it ends the read (its done never runs) */
                p->snap_reading = false;
                p->pending--;
        }
        p->pending++;
        node_snapshot_close(TAKE_PTR(p->snap), on_snapshot_closed, p);
}

static int start_snapshot(struct drain_preparation *p, const char *node, node_snapshot_fn done) {
        int r = node_snapshot_start(p->client, p->ts, node, false, done, p, &p->snap);

        if (r < 0)
                return r;
        p->snap_node = node;
        p->snap_reading = true;
        p->pending++;
        return 0;
}

int drain_preparation_new(struct kube_client *client, struct timesrc *ts,
                          const struct preparation_callbacks *cb, void *userdata,
                          struct drain_preparation **ret) {
        struct drain_preparation *p = calloc(1, sizeof(*p));

        if (!p)
                return -ENOMEM;
        p->client = client;
        p->ts = ts;
        p->cb = cb;
        p->userdata = userdata;
        *ret = p;
        return 0;
}

/* ---- the nodes of a selector ---- */

static int on_node_page(const cJSON *items, void *userdata) {
        struct drain_preparation *p = userdata;

        return nodeset_add_page(items, &p->names, &p->n_names);
}

static void on_node_list(const struct kube_result *res, void *userdata) {
        struct drain_preparation *p = userdata;
        size_t n;

        p->list_call = NULL;
        if (!op_ended(p))
                return;
        if (res->error < 0)
                return p->cb->on_nodes(p, res->error, res->message, NULL, 0, p->userdata);
        nodeset_sort(p->names, &p->n_names);
        n = p->n_names;
        p->n_names = 0;
        p->cb->on_nodes(p, 0, NULL, TAKE_PTR(p->names), n, p->userdata);
}

int drain_preparation_list_nodes(struct drain_preparation *p, const char *selector) {
        _cleanup_free_ char *path = NULL, *err = NULL;
        int r;

        r = nodeset_list_path(selector, &path, &err);
        if (r < 0)
                return r;
        r = kube_list(p->client, path, 500, NULL, on_node_page, on_node_list, p, &p->list_call);
        if (r < 0)
                return r;
        p->pending++;
        return 0;
}

/* ---- each run's KEY ---- */

static void keys_next(struct drain_preparation *p);

static void keys_failed(struct drain_preparation *p, int error, const char *message) {
        close_snapshot(p);
        p->cb->on_keys_done(p, error, message, p->userdata);
}

static void on_key(int error, const char *key, const char *from, const char *why, void *userdata) {
        struct drain_preparation *p = userdata;

        p->key_read = NULL;
        if (!op_ended(p))
                return;
        p->cb->on_key(p, p->key_at, error, key, from, why, p->userdata);
        if (p->closing)
                return;
        p->key_at++;
        keys_next(p);
}

static void read_key(struct drain_preparation *p) {
        int r = driver_key_read_start(p->client, p->ts, node_snapshot_input(p->snap),
                                      p->runs[p->key_at].profile, on_key, p, &p->key_read);

        if (r < 0) {
                _cleanup_free_ char *m = NULL;

                if (asprintf(&m, "Cannot start the API requests: %s", strerror(-r)) < 0)
                        m = NULL;
                return keys_failed(p, r, m);
        }
        p->pending++;
}

static void on_keys_snapshot(struct node_snapshot *s, int error, const char *what, void *userdata) {
        struct drain_preparation *p = userdata;

        p->snap_reading = false;
        if (!op_ended(p))
                return;
        if (error < 0)
                return keys_failed(p, error, strna(what));
        read_key(p);
}

/* One snapshot for the runs of a node (they come together: the drivers of one node). */
static void keys_next(struct drain_preparation *p) {
        int r;

        if (p->key_at >= p->n_runs) {
                close_snapshot(p);
                return p->cb->on_keys_done(p, 0, NULL, p->userdata);
        }
        if (p->snap && streq(p->snap_node, p->runs[p->key_at].node))
                return read_key(p);
        close_snapshot(p);
        r = start_snapshot(p, p->runs[p->key_at].node, on_keys_snapshot);
        if (r < 0) {
                _cleanup_free_ char *m = NULL;

                if (asprintf(&m, "Cannot start the API requests: %s", strerror(-r)) < 0)
                        m = NULL;
                keys_failed(p, r, m);
        }
}

int drain_preparation_read_keys(struct drain_preparation *p, const struct fleet_run *runs, size_t n) {
        if (n == 0)
                return -EINVAL;
        p->runs = runs;
        p->n_runs = n;
        p->key_at = 0;
        close_snapshot(p);
        return start_snapshot(p, runs[0].node, on_keys_snapshot);
}

/* ---- maintain's seamless check ---- */

static void on_seamless(int error, const char *what, const struct seamless_answer *ans, void *userdata) {
        struct drain_preparation *p = userdata;

        p->seam_check = NULL;
        if (!op_ended(p))
                return;
        p->cb->on_seamless(p, error, error < 0 ? strna(what) : NULL, error < 0 ? NULL : ans, p->userdata);
}

/* The node's driver pods (DaemonSet-controlled, by the plan options' selectors). */
static int driver_pods(const struct node_input *in, const struct plan_options *po,
                       const struct pod_rec ***ret, size_t *ret_n) {
        const struct pod_rec **dp = calloc(in->n_pods ? in->n_pods : 1, sizeof(*dp));
        size_t n = 0;

        if (!dp)
                return -ENOMEM;
        for (size_t i = 0; i < in->n_pods; i++)
                if (pod_is_driver(in->pods[i], &(const struct driver_filter){
                                                       .selectors = po->driver_selectors,
                                                       .n_selectors = po->n_driver_selectors,
                                                       .namespaces = po->driver_namespaces,
                                                       .n_namespaces = po->n_driver_namespaces,
                                               }))
                        dp[n++] = in->pods[i];
        *ret = dp;
        *ret_n = n;
        return 0;
}

static void on_seamless_snapshot(struct node_snapshot *s, int error, const char *what, void *userdata) {
        struct drain_preparation *p = userdata;
        _cleanup_free_ const struct pod_rec **dp = NULL;
        struct plan_options po;
        size_t n_dp;
        int r;

        p->snap_reading = false;
        if (!op_ended(p))
                return;
        if (error < 0) {
                close_snapshot(p);
                return p->cb->on_seamless(p, error, strna(what), NULL, p->userdata);
        }
        drain_profile_plan_options(p->seam_profile, &po);
        r = driver_pods(node_snapshot_input(s), &po, &dp, &n_dp);
        if (r >= 0)
                r = seamless_check_start(p->client, p->ts, p->seam_profile->drivers[0], dp, n_dp,
                                         on_seamless, p, &p->seam_check);
        close_snapshot(p);
        if (r == -ENOMEM)
                return p->cb->on_seamless(p, r, NULL, NULL, p->userdata);
        if (r < 0) {
                _cleanup_free_ char *m = NULL;

                if (asprintf(&m, "Cannot start the API requests: %s", strerror(-r)) < 0)
                        m = NULL;
                return p->cb->on_seamless(p, r, m, NULL, p->userdata);
        }
        p->pending++;
}

int drain_preparation_check_seamless(struct drain_preparation *p, const char *node,
                                     const struct drain_profile *profile) {
        if (profile->n_drivers == 0)
                return -EINVAL;
        p->seam_profile = profile;
        close_snapshot(p);
        return start_snapshot(p, node, on_seamless_snapshot);
}

void drain_preparation_close(struct drain_preparation *p, void (*closed)(void *userdata), void *userdata) {
        if (!p)
                return;
        p->closing = true;
        p->closed = closed;
        p->closed_userdata = userdata;
        if (p->list_call)
                kube_call_cancel(p->list_call);
        if (p->key_read)
                driver_key_read_cancel(p->key_read);
        if (p->seam_check)
                seamless_check_cancel(p->seam_check);
        close_snapshot(p);
        maybe_closed(p);
}
