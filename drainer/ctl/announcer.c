/* The engine's notices as Events on the Node (announcer.h): one core/v1 Event per
 * notice, built by events.c and POSTed through the client. Owns the count of Events
 * in flight (so that a caller can wait for them before it exits) and the instance
 * name; never retries, never blocks a drain: an Event is best effort. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/log.h"
#include "drainer/base/text.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/announcer.h"
#include "drainer/drain/state.h"
#include "drainer/kube/client.h"
#include "drainer/kube/events.h"

struct announcer {
        struct kube_client *client; /* borrowed */
        struct timesrc *ts;         /* borrowed */
        char *instance;             /* owned; NULL: none */
        size_t in_flight;
        bool freed; /* announcer_free() ran with Events in flight: the last one frees it */
        void (*idle)(void *userdata);
        void *idle_userdata;
};

/* Each notice's Event: what an admin acts on (DESIGN.md's reasons). */
static const struct {
        const char *type, *reason;
        const char *opening; /* stages: what started, before the phase's message */
} events[_ENGINE_NOTICE_KIND_MAX] = {
        [ENGINE_NOTICE_WAITING] = { EVENT_TYPE_NORMAL, EVENT_REASON_PHASE, "waiting for a drain slot" },
        [ENGINE_NOTICE_DRAIN] = { EVENT_TYPE_NORMAL, EVENT_REASON_PHASE, "drain started" },
        [ENGINE_NOTICE_RESTORE] = { EVENT_TYPE_NORMAL, EVENT_REASON_PHASE, "restore started" },
        [ENGINE_NOTICE_NOT_READY] = { EVENT_TYPE_WARNING, EVENT_REASON_NOT_READY, NULL },
        [ENGINE_NOTICE_READY] = { EVENT_TYPE_NORMAL, EVENT_REASON_READY, NULL },
        [ENGINE_NOTICE_OUT_OF_SERVICE] = { EVENT_TYPE_WARNING, EVENT_REASON_OUT_OF_SERVICE, NULL },
        [ENGINE_NOTICE_OUT_OF_SERVICE_REMOVED] = { EVENT_TYPE_NORMAL, EVENT_REASON_OUT_OF_SERVICE, NULL },
        [ENGINE_NOTICE_FOREIGN_RULE] = { EVENT_TYPE_WARNING, EVENT_REASON_FOREIGN, NULL },
        [ENGINE_NOTICE_DONE] = { EVENT_TYPE_NORMAL, EVENT_REASON_DONE, NULL },
        [ENGINE_NOTICE_REFUSED] = { EVENT_TYPE_WARNING, EVENT_REASON_BLOCKED, NULL },
        [ENGINE_NOTICE_FAILED] = { EVENT_TYPE_WARNING, EVENT_REASON_FAILED, NULL },
};

int announcer_new(struct kube_client *client, struct timesrc *ts, const char *instance,
                  struct announcer **ret) {
        struct announcer *a = calloc(1, sizeof(*a));

        if (!a)
                return -ENOMEM;
        a->client = client;
        a->ts = ts;
        if (instance && !(a->instance = strdup(instance))) {
                free(a);
                return -ENOMEM;
        }
        *ret = a;
        return 0;
}

static void on_event_done(const struct kube_result *res, void *userdata) {
        struct announcer *a = userdata;

        a->in_flight--;
        if (res->error < 0 && res->error != -ECANCELED)
                log_debug("posting an Event failed: %s, ignoring", strna(res->message));
        if (a->in_flight > 0)
                return;
        if (a->freed)
                announcer_free(a);
        else if (a->idle)
                a->idle(a->idle_userdata);
}

/* The longest quote of drainer.io/requested-by in an Event, in bytes. */
#define ASKER_MAX 200

void announcer_notice(struct announcer *a, const struct engine_notice *n) {
        announcer_notice_asked(a, n, NULL);
}

void announcer_notice_asked(struct announcer *a, const struct engine_notice *n, const char *by) {
        _cleanup_free_ char *staged = NULL, *asker = NULL;
        const char *message = n->message;

        if (a->freed || !n->node || (unsigned)n->kind >= _ENGINE_NOTICE_KIND_MAX || !events[n->kind].reason)
                return;
        if (events[n->kind].opening) {
                /* Who asked, perhaps as the asker put it on the Node (anyone who may annotate
                 * it): one line, cut short. */
                if (by && *by) {
                        asker = strndup(by, utf8_prefix(by, ASKER_MAX));
                        if (!asker)
                                return (void)log_debug("cannot build an Event: out of memory, ignoring");
                        text_one_line(asker);
                }
                if (asprintf(&staged, "%s%s%s%s: %s", events[n->kind].opening, asker ? " (asked by " : "",
                             strempty(asker), asker ? ")" : "",
                             n->message ? n->message : drain_phase_to_string(n->phase)) < 0) {
                        staged = NULL;
                        return (void)log_debug("cannot build an Event: out of memory, ignoring");
                }
                message = staged;
        }
        announcer_post(a, n->node, events[n->kind].type, events[n->kind].reason, message);
}

void announcer_post(struct announcer *a, const struct node_rec *n, const char *type, const char *reason,
                    const char *message) {
        _cleanup_free_ char *body = NULL, *path = NULL;
        int r;

        if (a->freed || !n)
                return;
        r = event_build_node(n, type, reason, message, timesrc_realtime(a->ts), a->instance, &body, &path);
        if (r < 0)
                return (void)log_debug("cannot build an Event: %s, ignoring", strerror(-r));
        r = kube_create(a->client, path, body, on_event_done, a, NULL);
        if (r < 0)
                return (void)log_debug("cannot post an Event: %s, ignoring", strerror(-r));
        a->in_flight++;
}

bool announcer_idle(const struct announcer *a) {
        return !a || a->in_flight == 0;
}

void announcer_set_idle_fn(struct announcer *a, void (*idle)(void *userdata), void *userdata) {
        a->idle = idle;
        a->idle_userdata = userdata;
}

/* Freed with Events in flight (an error path that did not wait), it goes with the last
 * of them, whose answers then change nothing. */
void announcer_free(struct announcer *a) {
        if (!a)
                return;
        if (a->in_flight > 0) {
                a->freed = true;
                return;
        }
        free(a->instance);
        free(a);
}
