/* The drain profile (profile.h) and the one place it becomes engine options. */
#include <string.h>

#include "drainer/base/selector.h"
#include "drainer/ctl/profile.h"

void drain_profile_plan_options(const struct drain_profile *p, struct plan_options *ret) {
        *ret = (struct plan_options){
                .pod_selector = p->pod_sel,
                .driver_selectors = (const struct selector *const *)p->drv_sels,
                .n_driver_selectors = p->n_drv_sels,
                .driver_namespaces = p->driver_namespaces,
                .n_driver_namespaces = p->n_driver_namespaces,
                .force = p->force,
                .delete_emptydir_data = p->emptydir,
                .driver_stop = p->stop,
                .driver_stop_arg = p->stop_arg,
                .ignore_driver_health = p->ignore_health,
                .drivers = p->drivers,
                .n_drivers = p->n_drivers,
                .devices = p->devices,
                .n_devices = p->n_devices,
                /* a driver's drain cordons only when its devices cannot be tainted (a
                 * device's never: the engine refuses it) */
                .isolation = p->n_drivers > 0 || p->n_devices > 0 ? PLAN_ISOLATE_CORDON_FALLBACK
                                                                  : PLAN_ISOLATE_CORDON,
        };
}

void drain_profile_engine_options(const struct drain_profile *p, const char *node, enum engine_goal goal,
                                  struct engine_options *ret) {
        *ret = (struct engine_options){
                .node = node,
                .goal = goal,
                .grace_seconds = p->grace,
                .disable_eviction = p->disable_eviction,
                .skip_wait_for_delete_usec = p->skip_wait_for_delete_usec,
                .force_uncordon = p->force_uncordon,
                .node_conditions = p->node_conditions,
                /* a device drain stops no driver: it keeps serving the node's other devices */
                .skip_driver_stop = p->skip_driver_stop || p->n_devices > 0,
                .driver_health = p->has_health ? &p->health_target : NULL,
                .timeout_usec = p->timeout_usec,
        };
        drain_profile_plan_options(p, &ret->plan);
}

void drain_profile_for_driver(const struct drain_profile *p, size_t i, struct drain_profile *ret) {
        *ret = *p;
        ret->drivers[0] = p->drivers[i];
        ret->drivers[1] = NULL;
        ret->n_drivers = 1;
}

void drain_profile_done(struct drain_profile *p) {
        selector_free(p->pod_sel);
        p->pod_sel = NULL;
        selectors_free(p->drv_sels, p->n_drv_sels);
        p->drv_sels = NULL;
        p->n_drv_sels = 0;
        if (p->has_health)
                health_target_done(&p->health_target);
        p->has_health = false;
}
