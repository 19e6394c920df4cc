/* --driver-stop taint (the default): the drain taint is on the node from the
 * cordon on, so an evicted driver pod is not recreated by its DaemonSet while
 * the taint is untolerated; stopping is evicting the driver pods, undoing is
 * the drain taint's removal (the caller's, in every restore). Keeps no state. */
#include <stdio.h>
#include <stdlib.h>

#include "drainer/base/text.h"
#include "drainer/dra/driverstop.h"
#include "drainer/kube/objects.h"

static const struct node_taint drain_taint = { .key = DRAIN_TAINT_KEY, .effect = DRAIN_TAINT_EFFECT };

/* A driver whose DaemonSet tolerates the drain taint would come straight back. */
static int taint_pod_blocker(const char *arg, const struct pod_rec *pod, char **ret_message) {
        if (!tolerations_tolerate(pod->tolerations, pod->n_tolerations, &drain_taint))
                return 0;
        if (asprintf(ret_message,
                     "DaemonSet of DRA driver pod %s/%s tolerates %s:%s, so the taint strategy cannot stop "
                     "it; use --driver-stop label:KEY or none",
                     pod->ns, pod->name, DRAIN_TAINT_KEY, DRAIN_TAINT_EFFECT) < 0)
                return -ENOMEM;
        return 1;
}

static void taint_describe(const char *arg, const struct pod_rec *const *drivers, size_t n, FILE *f) {
        driver_stop_print_pods(f, drivers, n, "evict ");
}

static void taint_stop(struct driver_stop *s, const struct driver_stop_view *v,
                       struct driver_stop_action *ret) {
        driver_stop_action_set(ret, v->driver_pods > 0 ? DRIVER_STOP_EVICT : DRIVER_STOP_WAIT, NULL);
}

static bool taint_stopped(struct driver_stop *s, const struct driver_stop_view *v, char *msg, size_t size) {
        snprintf(msg, size, "stopping DRA drivers: %zu driver %s left", v->driver_pods,
                 text_plural(v->driver_pods, "pod", "pods"));
        return v->driver_pods == 0;
}

static void taint_undo(struct driver_stop *s, const struct driver_stop_record *r,
                       const struct driver_stop_view *v, struct driver_stop_action *ret) {
        driver_stop_action_set(ret, DRIVER_STOP_WAIT, NULL);
}

static bool taint_undone(struct driver_stop *s, const struct driver_stop_record *r,
                         const struct driver_stop_view *v, char *msg, size_t size) {
        return driver_stop_pods_back(r, v, msg, size);
}

/* The drain taint goes in every restore; nothing else to undo. */
static bool taint_undo_allowed(const struct driver_stop_ops *ops, const char *arg,
                               const struct driver_stop_record *r) {
        return true;
}

const struct driver_stop_ops driver_stop_taint = {
        .name = "taint",
        .evicts_driver_pods = true,
        .removes_driver_pods = true,
        .pod_blocker = taint_pod_blocker,
        .describe = taint_describe,
        .stop = taint_stop,
        .stopped = taint_stopped,
        .undo = taint_undo,
        .undone = taint_undone,
        .undo_allowed = taint_undo_allowed,
};
