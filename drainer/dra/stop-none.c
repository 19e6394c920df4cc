/* --driver-stop none: the drivers are left alone (reported only): nothing to
 * stop, nothing to undo, no state. */
#include <stdio.h>

#include "drainer/dra/driverstop.h"

static void none_describe(const char *arg, const struct pod_rec *const *drivers, size_t n, FILE *f) {
        fputs("nothing (--driver-stop none)", f);
}

static void none_stop(struct driver_stop *s, const struct driver_stop_view *v,
                      struct driver_stop_action *ret) {
        driver_stop_action_set(ret, DRIVER_STOP_WAIT, NULL);
}

static bool none_stopped(struct driver_stop *s, const struct driver_stop_view *v, char *msg, size_t size) {
        return true;
}

static void none_undo(struct driver_stop *s, const struct driver_stop_record *r,
                      const struct driver_stop_view *v, struct driver_stop_action *ret) {
        driver_stop_action_set(ret, DRIVER_STOP_WAIT, NULL);
}

/* Nothing was stopped, so no driver pod is awaited either. */
static bool none_undone(struct driver_stop *s, const struct driver_stop_record *r,
                        const struct driver_stop_view *v, char *msg, size_t size) {
        return true;
}

static bool none_undo_allowed(const struct driver_stop_ops *ops, const char *arg,
                              const struct driver_stop_record *r) {
        return true;
}

const struct driver_stop_ops driver_stop_none = {
        .name = "none",
        .pods_stay = "DRA driver, --driver-stop none",
        .describe = none_describe,
        .stop = none_stop,
        .stopped = none_stopped,
        .undo = none_undo,
        .undone = none_undone,
        .undo_allowed = none_undo_allowed,
};
