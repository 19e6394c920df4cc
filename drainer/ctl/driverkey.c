/* The label key that stops a driver, from its DaemonSet (driverkey.h): which DaemonSet
 * is decided from the snapshot (the plan's driver pod, or the recorded stop), its
 * nodeSelector read with one GET. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/log.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/driverkey.h"
#include "drainer/dra/driverstop.h"
#include "drainer/drain/plan.h"
#include "drainer/drain/state.h"
#include "drainer/kube/collect.h"

struct driver_key_read {
        struct kube_collect read;
        struct dtimer answer; /* the refusal, from the loop, when there is nothing to read */
        bool answer_ready;
        char *what; /* "DaemonSet ns/name" */
        char *why;
        int error;
        bool cancelled;
        driver_key_fn done;
        void *userdata;
};

static void read_free(struct driver_key_read *k) {
        kube_collect_done(&k->read);
        if (k->answer_ready)
                dtimer_done(&k->answer);
        free(k->what);
        free(k->why);
        free(k);
}

/* "ns/name" of the DaemonSet of the scope's driver pod on the node, or of the one a
 * label stop of this driver recorded; NULL if neither (with *ret_error 0). */
static char *find_daemonset(const struct node_input *in, const struct drain_profile *p, int *ret_error) {
        _cleanup_(drain_scope_view_done) struct drain_scope_view sv = {};
        _cleanup_(drain_state_done) struct drain_state st = {};
        struct plan_options po;
        struct plan plan;
        char *ds = NULL;
        int r;

        *ret_error = 0;
        drain_profile_plan_options(p, &po);
        po.driver_stop = &driver_stop_label;
        po.driver_stop_arg = NULL;
        r = plan_build(in->node, in->pods, in->n_pods, in->claims, in->n_claims, in->slices, in->n_slices,
                       NULL, 0, &po, &plan);
        if (r < 0)
                return *ret_error = r, NULL;
        for (size_t i = 0; i < plan.n_pods && !ds; i++) {
                const struct pod_rec *pod = plan.pods[i].pod;

                if (plan.pods[i].cls == POD_CLASS_DRIVER && pod->controller &&
                    streq_ptr(pod->controller->kind, "DaemonSet") &&
                    asprintf(&ds, "%s/%s", pod->ns, strna(pod->controller->name)) < 0)
                        ds = NULL, *ret_error = -ENOMEM;
        }
        plan_done(&plan);
        if (ds || *ret_error < 0)
                return ds;
        /* The driver is stopped already (a resume, an uncordon): where its record says. */
        if (drain_scope_view_init(&sv, in->node, p->drivers[0]) < 0)
                return *ret_error = -ENOMEM, NULL;
        if (drain_state_parse(&sv.node, &st, NULL) < 0)
                return NULL; /* the engine refuses the nonsense, saying what it is */
        for (size_t i = 0; i < st.n_stops && !ds; i++)
                if (st.stops[i].ops == &driver_stop_label && st.stops[i].daemonset &&
                    !(ds = strdup(st.stops[i].daemonset)))
                        *ret_error = -ENOMEM;
        return ds;
}

static void on_daemonset(struct kube_collect *c, void *userdata) {
        struct driver_key_read *k = userdata;
        _cleanup_free_ char *key = NULL, *why = NULL;
        int r = c->error;

        if (r == 0 && k->cancelled)
                r = -ECANCELED;
        if (r < 0) {
                if (asprintf(&why, "cannot read %s: %s", k->what, c->message ? c->message : strerror(-r)) <
                    0)
                        why = NULL;
        } else {
                r = driver_stop_label_key(c->json, k->what, &key, &why);
                if (r == -E2BIG || r == -ENOENT)
                        r = -EPERM; /* the DaemonSet names no single key: refused */
        }
        k->done(r, key, k->what, why, k->userdata);
        read_free(k);
}

static void on_answer(struct dtimer *t) {
        struct driver_key_read *k = container_of(t, struct driver_key_read, answer);

        k->done(k->cancelled ? -ECANCELED : k->error, NULL, NULL, k->why, k->userdata);
        read_free(k);
}

int driver_key_read_start(struct kube_client *client, struct timesrc *ts, const struct node_input *in,
                          const struct drain_profile *p, driver_key_fn done, void *userdata,
                          struct driver_key_read **ret) {
        _cleanup_free_ char *ds = NULL, *path = NULL;
        struct driver_key_read *k;
        const char *slash;
        int r;

        if (!in->node || p->n_drivers == 0)
                return -EINVAL;
        k = calloc(1, sizeof(*k));
        if (!k)
                return -ENOMEM;
        k->done = done;
        k->userdata = userdata;
        r = dtimer_init(&k->answer, ts, on_answer);
        if (r < 0) {
                read_free(k);
                return r;
        }
        k->answer_ready = true;
        ds = find_daemonset(in, p, &r);
        if (r < 0) {
                read_free(k);
                return r;
        }
        if (!ds) {
                if (asprintf(&k->why,
                             "--driver %s: no DRA driver pod of %s (a DaemonSet's) is on node %s, so no "
                             "DaemonSet's nodeSelector says which label stops it; give --driver-stop "
                             "label:KEY, systemd:UNIT or none",
                             p->drivers[0], p->drivers[0], in->node->name) < 0) {
                        read_free(k);
                        return -ENOMEM;
                }
                k->error = -EPERM;
                dtimer_start(&k->answer, 0);
                *ret = k;
                return 0;
        }
        slash = strchr(ds, '/');
        if (!slash || asprintf(&k->what, "DaemonSet %s", ds) < 0 ||
            asprintf(&path, "/apis/apps/v1/namespaces/%.*s/daemonsets/%s", (int)(slash - ds), ds,
                     slash + 1) < 0) {
                read_free(k);
                return -ENOMEM;
        }
        r = kube_collect_get(client, path, on_daemonset, k, &k->read);
        if (r < 0) {
                read_free(k);
                return r;
        }
        *ret = k;
        return 0;
}

void driver_key_read_cancel(struct driver_key_read *k) {
        k->cancelled = true;
        kube_collect_cancel(&k->read);
}
