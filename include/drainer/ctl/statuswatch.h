/* `drainer status --watch` as a controller: a node view (nodeview.h) kept current by
 * its informers, and a debounce: once every part asked for has its first list, each
 * change (at most one per debounce interval) is handed to the caller as the plan's
 * input. Reads only, watches and never polls; prints nothing. */
#pragma once

#include <stdint.h>

struct kube_client;
struct timesrc;
struct node_input;
struct status_watch;

struct status_watch_handlers {
        /* The node as it is now (in->node NULL: not found), borrowed for this call;
         * in NULL: out of memory collecting it. From the loop. */
        void (*on_change)(struct status_watch *w, const struct node_input *in, void *userdata);
        /* A list or watch of part failed (message: the server's, or NULL); the view
         * retries by itself. May be NULL. */
        void (*on_error)(struct status_watch *w, const char *part, int error, const char *message,
                         void *userdata);
};

/* Starts watching node's parts (NODE_VIEW_*). 0, or a negative errno (nothing is left
 * but what finishes closing on the loop). */
int status_watch_new(struct kube_client *client, struct timesrc *ts, const char *node, unsigned parts,
                     uint64_t debounce_usec, const struct status_watch_handlers *h, void *userdata,
                     struct status_watch **ret);
/* No callback after this; closed (may be NULL) runs from the loop once the view's
 * calls have ended, then w is freed. NULL ok. */
void status_watch_close(struct status_watch *w, void (*closed)(void *userdata), void *userdata);
