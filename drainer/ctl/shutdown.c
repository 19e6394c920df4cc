/* The drain for a shutdown: owns the deadline before logind's delay runs out and the
 * node's and boot's names; borrows the lock (bus) and the Nodes (nodes) through its ops.
 * Writes only the node's request annotations; prints nothing. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "drainer/base/macro.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/manager.h"
#include "drainer/ctl/shutdown.h"
#include "drainer/drain/state.h"
#include "drainer/kube/objects.h"
#include "drainer/sys/sysbus.h"

struct shutdown_drain {
        const struct shutdown_ops *ops;
        void *bus, *nodes; /* borrowed */
        const struct shutdown_handlers *h;
        void *userdata;
        char *node;
        char boot_id[64];
        bool active; /* a shutdown is under way */
        struct dtimer deadline;
};

static void note(struct shutdown_drain *s, enum log_level level, int error, const char *fmt, ...)
        _printf_(4, 5);

static void note(struct shutdown_drain *s, enum log_level level, int error, const char *fmt, ...) {
        _cleanup_free_ char *line = NULL;
        va_list ap;

        if (!s->h->on_note)
                return;
        va_start(ap, fmt);
        if (vasprintf(&line, fmt, ap) < 0)
                line = NULL;
        va_end(ap);
        s->h->on_note(s, level, error, line ? line : "out of memory", s->userdata);
}

void shutdown_read_boot_id(char *buf, size_t size) {
        FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

        buf[0] = 0;
        if (!f)
                return;
        if (fgets(buf, (int)size, f))
                buf[strcspn(buf, "\n")] = 0;
        fclose(f);
}

/* {"metadata":{"annotations":{drainer.io/request: request, requested-by: who,
 * shutdown-boot-id: boot}}} (boot NULL: removed), malloc'd. */
static char *request_patch(const char *request, const char *boot) {
        _cleanup_(cJSON_Deletep) cJSON *p = cJSON_CreateObject();
        cJSON *ann;

        if (!p)
                return NULL;
        ann = cJSON_AddObjectToObject(cJSON_AddObjectToObject(p, "metadata"), "annotations");
        if (!ann || !cJSON_AddStringToObject(ann, DRAINER_ANN_REQUEST, request) ||
            !cJSON_AddStringToObject(ann, DRAINER_ANN_REQUESTED_BY,
                                     boot ? "shutdown: logind's shutdown or reboot of the node "
                                            "(serve --on-shutdown)"
                                          : "shutdown: the boot after a drain for shutdown "
                                            "(serve --on-shutdown)") ||
            !(boot ? cJSON_AddStringToObject(ann, DRAINER_ANN_SHUTDOWN_BOOT, boot)
                   : cJSON_AddNullToObject(ann, DRAINER_ANN_SHUTDOWN_BOOT)))
                return NULL;
        return cJSON_PrintUnformatted(p);
}

/* A shutdown started: ask for a drain of our node, recording this boot, so the
 * daemon of the next boot knows to restore and uncordon by itself. */
static void on_shutdown(bool active, void *userdata) {
        struct shutdown_drain *s = userdata;
        uint64_t max = 0;
        int r;

        s->active = active;
        if (!active) {
                note(s, LOG_LEVEL_INFO, 0, "shutdown cancelled");
                dtimer_stop(&s->deadline);
                return;
        }
        /* logind waits at most InhibitDelayMaxUSec for us: let go a bit before it. */
        if (s->ops->delay_max(s->bus, &max) < 0 || max == 0)
                max = 5 * 60 * USEC_PER_SEC;
        dtimer_start(&s->deadline, max > 2 * USEC_PER_SEC ? max - 2 * USEC_PER_SEC : max / 2);
        note(s, LOG_LEVEL_INFO, 0, "shutdown: draining node %s before it goes down", s->node);
        if (!s->ops->node(s->nodes, s->node)) {
                s->ops->release(s->bus);
                return;
        }
        r = s->ops->patch(s->nodes, s->node, request_patch("drain", s->boot_id));
        if (r < 0) {
                note(s, LOG_LEVEL_ERROR, r, "shutdown: cannot ask for the drain of node %s: %s", s->node,
                     strerror(-r));
                s->ops->release(s->bus);
        }
}

static void on_deadline(struct dtimer *t) {
        struct shutdown_drain *s = container_of(t, struct shutdown_drain, deadline);

        if (s->ops->holds(s->bus)) {
                note(s, LOG_LEVEL_WARNING, 0,
                     "shutdown: logind's inhibit delay is running out before node %s is drained; releasing "
                     "the lock (after the reboot the daemon restores the node)",
                     s->node);
                s->ops->release(s->bus);
        }
}

static void on_inhibit_result(int error, const char *message, void *userdata) {
        struct shutdown_drain *s = userdata;

        if (error < 0)
                note(s, LOG_LEVEL_ERROR, 0,
                     "--on-shutdown: logind refused the shutdown inhibitor lock: %s; a shutdown will not "
                     "wait for the drain",
                     message ? message : strerror(-error));
        else
                note(s, LOG_LEVEL_INFO, 0,
                     "holding a logind shutdown delay lock: a shutdown drains this node first");
}

/* The drain for a shutdown is done (or failed): let the shutdown go on. */
static void check_done(struct shutdown_drain *s, const struct node_rec *n) {
        _cleanup_(drain_state_done) struct drain_state st = {};

        if (!s->active || !s->ops->holds(s->bus))
                return;
        if (!n || drain_state_parse(n, &st, NULL) < 0)
                return s->ops->release(s->bus);
        if (st.has_phase && st.phase == DRAIN_PHASE_DRAINED) {
                note(s, LOG_LEVEL_INFO, 0, "node %s drained: releasing the shutdown inhibitor", s->node);
                s->ops->release(s->bus);
        }
}

/* After a reboot: a drain we asked for at shutdown of another boot is undone. */
static void resume_after_reboot(struct shutdown_drain *s, const struct node_rec *n) {
        const char *boot = kv_get(n->annotations, n->n_annotations, DRAINER_ANN_SHUTDOWN_BOOT);
        int r;

        if (!boot || streq(boot, s->boot_id))
                return;
        r = s->ops->patch(s->nodes, n->name, request_patch("uncordon", NULL));
        if (r == -EBUSY)
                return; /* asked already: its answer is the next change of the Node */
        if (r < 0)
                note(s, LOG_LEVEL_ERROR, r, "node %s: cannot ask for its restore after the reboot: %s",
                     n->name, strerror(-r));
        else
                note(s, LOG_LEVEL_INFO, 0, "node %s was drained for a shutdown (boot %s): restoring it",
                     n->name, boot);
}

void shutdown_drain_node_changed(struct shutdown_drain *s, const struct node_rec *n) {
        if (!streq_ptr(n->name, s->node))
                return;
        if (!s->active)
                resume_after_reboot(s, n);
        check_done(s, n);
}

int shutdown_drain_start(struct shutdown_drain *s) {
        return s->ops->inhibit(s->bus, on_shutdown, on_inhibit_result, s);
}

void shutdown_drain_stop(struct shutdown_drain *s) {
        dtimer_stop(&s->deadline);
}

int shutdown_drain_new(struct timesrc *ts, const char *node, const char *boot_id,
                       const struct shutdown_ops *ops, void *bus, void *nodes,
                       const struct shutdown_handlers *h, void *userdata, struct shutdown_drain **ret) {
        struct shutdown_drain *s = calloc(1, sizeof(*s));

        if (!s)
                return -ENOMEM;
        *s = (struct shutdown_drain){ .ops = ops, .bus = bus, .nodes = nodes, .h = h, .userdata = userdata };
        snprintf(s->boot_id, sizeof(s->boot_id), "%s", boot_id);
        s->node = strdup(node);
        if (!s->node || dtimer_init(&s->deadline, ts, on_deadline) < 0) {
                free(s->node);
                free(s);
                return -ENOMEM;
        }
        *ret = s;
        return 0;
}

struct shutdown_drain *shutdown_drain_free(struct shutdown_drain *s) {
        if (!s)
                return NULL;
        dtimer_done(&s->deadline);
        free(s->node);
        free(s);
        return NULL;
}

/* ---- the real collaborators: logind over the system bus, the drain manager ---- */

static int bus_inhibit(void *bus, void (*shutdown)(bool active, void *userdata),
                       void (*result)(int error, const char *message, void *userdata), void *userdata) {
        return sysbus_inhibit_shutdown_full(bus, "drainer", "Drain this node's DRA workload before shutdown",
                                            shutdown, result, userdata);
}

static int bus_delay_max(void *bus, uint64_t *ret_usec) {
        return sysbus_inhibit_delay_max(bus, ret_usec);
}

static bool bus_holds(void *bus) {
        return bus && sysbus_holds_inhibitor(bus);
}

static void bus_release(void *bus) {
        sysbus_release_inhibitor(bus);
}

static const struct node_rec *manager_node(void *nodes, const char *name) {
        return drain_manager_node(nodes, name);
}

static int manager_patch(void *nodes, const char *name, char *body) {
        return drain_manager_patch_node(nodes, name, body);
}

const struct shutdown_ops shutdown_sysbus_ops = {
        .inhibit = bus_inhibit,
        .delay_max = bus_delay_max,
        .holds = bus_holds,
        .release = bus_release,
        .node = manager_node,
        .patch = manager_patch,
};
