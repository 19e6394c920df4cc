/* The guard as a server (`drainer guard --listen`): an HTTP endpoint of one route,
 * GET /guard, each request answered by a guard run (guard.h) when it would have
 * exited: every run in flight reads one shared node view (one list and watch per
 * resource, kept 10 s after the last request), and an answer gives counts, never the
 * names of other namespaces' objects. A controller: no argv, no exit code; its lines
 * go to the caller's on_note. */
#pragma once

#include <stdint.h>

#include "drainer/base/log.h"

struct uv_loop_s;
struct kube_client;
struct timesrc;
struct guard_config;
struct guard_server;

#define GUARD_SERVER_PATH "/guard"

struct guard_server_handlers {
        /* A line for people (a run's, or the server's own; error: the errno it is
         * about, or 0). May be NULL. */
        void (*on_note)(struct guard_server *s, enum log_level level, int error, const char *line,
                        void *userdata);
        /* After guard_server_stop(): every request answered, the endpoint and the view
         * closed. Runs once, from the loop; then guard_server_free(). */
        void (*on_stopped)(struct guard_server *s, void *userdata);
};

/* Listens on address ("HOST:PORT", httpd.h) and serves from the loop on. cfg is
 * borrowed and must outlive the server. 0; or a negative errno (-ENOMEM, httpd_new()'s
 * errors), nothing left but handles that finish closing on the loop's next turn. */
int guard_server_new(struct uv_loop_s *loop, struct kube_client *client, struct timesrc *ts,
                     const struct guard_config *cfg, const char *address,
                     const struct guard_server_handlers *h, void *userdata, struct guard_server **ret);
/* The port actually bound. */
uint16_t guard_server_port(const struct guard_server *s);
/* Requests not answered yet. */
unsigned guard_server_pending(const struct guard_server *s);
/* Stops: every request still waiting is answered 503 ("the guard is stopping (why):
 * still held: COUNTS"), new ones get 503; the endpoint closes once the last answer has
 * left (its connection closed) or after a second at most, the view with the last run;
 * then on_stopped. Nothing the second time. */
void guard_server_stop(struct guard_server *s, const char *why);
/* NULL ok; returns NULL. After on_stopped (or never stopped: at exit). */
struct guard_server *guard_server_free(struct guard_server *s);
