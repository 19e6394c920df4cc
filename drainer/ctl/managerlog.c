/* What a daemon says of the drain manager's events (manager.h, drain_manager_describe):
 * its log line and level, and the short status a service manager shows. Words only:
 * nothing here acts, prints or reads more than the event and the manager's options. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/log.h"
#include "drainer/base/macro.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/manager.h"
#include "drainer/drain/state.h"

static const char *goal_name(enum engine_goal goal) {
        return goal == ENGINE_GOAL_DRAIN ? "drain" : "uncordon";
}

static int set(char **ret, const char *fmt, ...) _printf_(2, 3);
static int set(char **ret, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(ret, fmt, ap);
        va_end(ap);
        if (r < 0) {
                *ret = NULL;
                return -ENOMEM;
        }
        return 0;
}

int drain_manager_describe(const struct drain_manager_options *o, const struct drain_manager_event *ev,
                           struct drain_manager_text *ret) {
        const char *served = o->node ? o->node : "all nodes", *msg = ev->message;
        const char *phase = drain_phase_to_string(ev->phase);
        _cleanup_free_ char *who = NULL; /* "NODE", or "NODE device DEVICE" for a device drain */
        const char *node;
        bool paused = streq_ptr(msg, "paused");
        int r = 0;

        if (ev->device && asprintf(&who, "%s device %s", strna(ev->node), ev->device) < 0)
                return -ENOMEM;
        node = who ? who : strna(ev->node);

        *ret = (struct drain_manager_text){ .level = LOG_LEVEL_INFO };
        switch (ev->kind) {
        case DRAIN_MANAGER_READY:
                r = set(&ret->line, "serving %s (%zu node%s watched)", served, ev->n_nodes,
                        ev->n_nodes == 1 ? "" : "s");
                break;
        case DRAIN_MANAGER_IDLE:
                r = set(&ret->status, "idle: watching %s", served);
                break;
        case DRAIN_MANAGER_STARTED:
                r = set(&ret->line, "node %s: %s %s", node, goal_name(ev->goal),
                        ev->device ? "started (the device is reported unhealthy)" : "requested");
                break;
        case DRAIN_MANAGER_SWITCHED:
                r = set(&ret->line, "node %s: request changed, switching to %s", node, goal_name(ev->goal));
                break;
        case DRAIN_MANAGER_PHASE:
                r = set(&ret->line, "node %s: %s%s%s", node, phase, msg ? ": " : "", strempty(msg));
                if (r >= 0)
                        r = set(&ret->status, "node %s: %s", node, phase);
                break;
        case DRAIN_MANAGER_DONE:
                if (ev->device)
                        r = set(&ret->line,
                                "node %s: %s; it stays out of service until `drainer uncordon %s --device "
                                "%s`",
                                node, strna(msg), strna(ev->node), ev->device);
                else
                        r = set(&ret->line, "node %s: %s", node, strna(msg));
                if (r >= 0)
                        r = set(&ret->status, "node %s: %s", node,
                                ev->goal == ENGINE_GOAL_DRAIN ? "drained" : "in service");
                break;
        case DRAIN_MANAGER_REFUSED:
        case DRAIN_MANAGER_FAILED:
                ret->level = LOG_LEVEL_ERROR;
                if (ev->kind == DRAIN_MANAGER_REFUSED)
                        r = set(&ret->line, "node %s: %s; waiting until its drainer.io/ annotations change",
                                node, strna(msg));
                else
                        r = set(&ret->line, "node %s: %s (%s); retrying in %llu s", node, strna(msg),
                                ev->error == -EPERM ? "refused" : strerror(-ev->error),
                                (unsigned long long)(ev->retry_usec / USEC_PER_SEC));
                if (r >= 0)
                        r = set(&ret->status, "node %s: failed, retrying", node);
                break;
        case DRAIN_MANAGER_START_FAILED:
                ret->level = LOG_LEVEL_ERROR;
                r = set(&ret->line, "node %s: cannot start the drain engine: %s", node,
                        strerror(-ev->error));
                break;
        case DRAIN_MANAGER_WAITING:
        case DRAIN_MANAGER_DEVICE:
                ret->level = ev->unhealthy ? LOG_LEVEL_WARNING : LOG_LEVEL_INFO;
                r = set(&ret->line, "node %s: %s", node, strna(msg));
                break;
        case DRAIN_MANAGER_SLOT_ERROR:
        case DRAIN_MANAGER_BAD_STATE:
                ret->level = LOG_LEVEL_ERROR;
                r = set(&ret->line, "node %s: %s", node, strna(msg));
                break;
        case DRAIN_MANAGER_PATCH_CONFLICT:
                ret->level = LOG_LEVEL_DEBUG;
                r = set(&ret->line,
                        "node %s: the Node changed under the annotations' patch (409), writing them again "
                        "on "
                        "the newer version",
                        node);
                break;
        case DRAIN_MANAGER_PATCH_FAILED:
                ret->level = LOG_LEVEL_WARNING;
                r = set(&ret->line, "node %s: updating annotations failed: %s, retrying", node,
                        msg ? msg : strerror(-ev->error));
                break;
        case DRAIN_MANAGER_WATCH_ERROR:
                ret->level = LOG_LEVEL_WARNING;
                r = set(&ret->line, "watching nodes: %s, retrying", msg ? msg : strerror(-ev->error));
                break;
        case DRAIN_MANAGER_PAUSE:
                r = set(&ret->line, "%s=%s on namespace %s: %s", DRAINER_ANN_PAUSE,
                        paused ? "true" : "false", strna(o->lease_namespace),
                        paused ? "drains in flight finish, no new one starts" : "new drains start again");
                if (r >= 0)
                        r = set(&ret->status, "%s", paused ? "paused" : "resumed");
                break;
        case DRAIN_MANAGER_LIMIT:
                r = set(&ret->line, "--max-parallel %u%% of %zu node%s: %u at once", o->max_parallel_percent,
                        ev->n_nodes, ev->n_nodes == 1 ? "" : "s", ev->max_parallel);
                break;
        default:
                break;
        }
        if (r < 0)
                drain_manager_text_done(ret);
        return r;
}

void drain_manager_text_done(struct drain_manager_text *t) {
        t->line = mfree(t->line);
        t->status = mfree(t->status);
}
