/* --driver NAME: one run per driver, and the default stop of a driver drain: the
 * label strategy with the key of the driver DaemonSet's nodeSelector, read from the
 * API (the DaemonSet, never an annotation, says which label stops the driver; a
 * recorded DaemonSet is only where to look once the pod is gone). Reads only. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "drainer/client.h"
#include "drainer/driverstop.h"
#include "drainer/log.h"
#include "drainer/plan.h"
#include "drainer/state.h"
#include "driverkey.h"
#include "snapshot.h"

void drain_args_for_driver(const struct drain_args *a, size_t i, struct drain_args *ret) {
        *ret = *a;
        drain_profile_for_driver(&a->profile, i, &ret->profile);
}

struct ds_get {
        bool done;
        int error;
        char *key, *why;
        const char *what;
};

static void on_daemonset(const struct kube_result *res, void *userdata) {
        struct ds_get *g = userdata;

        g->done = true;
        g->error = res->error;
        if (res->error < 0) {
                if (asprintf(&g->why, "cannot read %s: %s", g->what,
                             res->message ? res->message : strerror(-res->error)) < 0)
                        g->why = NULL;
                return;
        }
        g->error = driver_stop_label_key(res->json, g->what, &g->key, &g->why);
        if (g->error == -E2BIG || g->error == -ENOENT)
                g->error = -EPERM; /* the DaemonSet names no single key: refused */
}

/* "ns/name" of the DaemonSet of the scope's driver pod on the node, or of the one a
 * label stop of this driver recorded; NULL if neither. */
static char *find_daemonset(const struct snapshot *s, const struct drain_args *a, int *ret_error) {
        _cleanup_(drain_scope_view_done) struct drain_scope_view sv = {};
        _cleanup_(drain_state_done) struct drain_state st = {};
        struct plan_options po;
        struct plan p;
        char *ds = NULL;
        int r;

        *ret_error = 0;
        drain_profile_plan_options(&a->profile, &po);
        po.driver_stop = &driver_stop_label;
        po.driver_stop_arg = NULL;
        r = plan_build(s->node, s->in.pods, s->in.n_pods, s->in.claims, s->in.n_claims, s->in.slices,
                       s->in.n_slices, NULL, 0, &po, &p);
        if (r < 0)
                return *ret_error = r, NULL;
        for (size_t i = 0; i < p.n_pods && !ds; i++) {
                const struct pod_rec *pod = p.pods[i].pod;

                if (p.pods[i].cls == POD_CLASS_DRIVER && pod->controller &&
                    streq_ptr(pod->controller->kind, "DaemonSet") &&
                    asprintf(&ds, "%s/%s", pod->ns, strna(pod->controller->name)) < 0)
                        ds = NULL, *ret_error = -ENOMEM;
        }
        plan_done(&p);
        if (ds || *ret_error < 0)
                return ds;
        /* The driver is stopped already (a resume, an uncordon): where its record says. */
        if (drain_scope_view_init(&sv, s->node, a->profile.drivers[0]) < 0)
                return *ret_error = -ENOMEM, NULL;
        if (drain_state_parse(&sv.node, &st, NULL) < 0)
                return NULL; /* the engine refuses the nonsense, saying what it is */
        for (size_t i = 0; i < st.n_stops && !ds; i++)
                if (st.stops[i].ops == &driver_stop_label && st.stops[i].daemonset &&
                    !(ds = strdup(st.stops[i].daemonset)))
                        *ret_error = -ENOMEM;
        return ds;
}

int driver_key_resolve(struct app *app, const struct snapshot *s, const struct drain_args *a, char **ret_key,
                       char **ret_from, char **ret_why) {
        _cleanup_free_ char *ds = NULL, *path = NULL, *what = NULL;
        struct ds_get g = {};
        const char *slash;
        int r;

        ds = find_daemonset(s, a, &r);
        if (r < 0)
                return r;
        if (!ds) {
                if (asprintf(ret_why,
                             "--driver %s: no DRA driver pod of %s (a DaemonSet's) is on node %s, so no "
                             "DaemonSet's nodeSelector says which label stops it; give --driver-stop "
                             "label:KEY, systemd:UNIT or none",
                             a->profile.drivers[0], a->profile.drivers[0], s->node->name) < 0)
                        return -ENOMEM;
                return -EPERM;
        }
        slash = strchr(ds, '/');
        if (!slash || asprintf(&what, "DaemonSet %s", ds) < 0 ||
            asprintf(&path, "/apis/apps/v1/namespaces/%.*s/daemonsets/%s", (int)(slash - ds), ds,
                     slash + 1) < 0)
                return -ENOMEM;
        g.what = what;
        r = kube_get(app->client, path, on_daemonset, &g, NULL);
        if (r < 0)
                return r;
        app_run_until(app, &g.done);
        if (g.error < 0) {
                *ret_why = g.why;
                return g.error;
        }
        *ret_key = g.key;
        *ret_from = TAKE_PTR(what);
        return 0;
}
