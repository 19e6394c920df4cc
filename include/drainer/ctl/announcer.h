/* What an admin acts on, as Kubernetes Events on the Node: the caller's side of the
 * engine's notices (engine.h's on_notice), shared by drain, uncordon, maintain and
 * serve. Which notice becomes which Event (reason, type, wording) is decided here;
 * the bodies are events.h's, posted through the rate-limited client, best effort.
 * Owns the Events in flight: a caller waits for announcer_idle() before it exits (a
 * free before that lets them finish into nothing). */
#pragma once

#include <stdbool.h>

#include "drainer/base/macro.h"
#include "drainer/drain/engine.h"

struct kube_client;
struct timesrc;
struct announcer;
struct node_rec;

/* instance: this process's name in the Events (source.host, reportingInstance: the
 * host name, serve's --identity); copied; NULL leaves it out. Returns 0 or -ENOMEM. */
int announcer_new(struct kube_client *client, struct timesrc *ts, const char *instance,
                  struct announcer **ret);
/* Posts the Event for notice n, if it is one (every kind is, today). A failure to build
 * or to post is logged at debug level and changes nothing. */
void announcer_notice(struct announcer *a, const struct engine_notice *n);
/* The same, naming who asked for the run (by: NULL or "" for nobody named) in the
 * Events of its start and waits: "drain started (asked by BY): ...", BY made one line
 * and cut to 200 bytes. */
void announcer_notice_asked(struct announcer *a, const struct engine_notice *n, const char *by);
/* Posts an Event of this type and reason (events.h) about Node n, best effort as above:
 * what a controller other than an engine tells (device health). */
void announcer_post(struct announcer *a, const struct node_rec *n, const char *type, const char *reason,
                    const char *message);
/* No Event in flight. */
bool announcer_idle(const struct announcer *a);
/* idle(userdata) runs each time the last Event in flight answers (announcer_idle() turned
 * true), from that answer's callback: a caller that found it busy waits for it. NULL: none. */
void announcer_set_idle_fn(struct announcer *a, void (*idle)(void *userdata), void *userdata);
/* With Events in flight the memory goes with the last of them (their answers ignored). */
void announcer_free(struct announcer *a);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct announcer *, announcer_free);
