/* One-shot reads of everything a node's drain depends on, concurrently, into
 * compact records: a node view whose informers list once. Owns the view;
 * borrows the app's client and loop. The first failure ends the snapshot. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "drainer/log.h"
#include "drainer/macro.h"
#include "snapshot.h"

static unsigned parts_of(const struct snapshot *s) {
        return NODE_VIEW_ALL & ~(s->with_pdbs ? 0 : NODE_VIEW_PDBS);
}

static void on_synced(struct node_view *v, unsigned part, void *userdata) {
        struct snapshot *s = userdata;
        int r;

        if (s->done || !node_view_synced(v, parts_of(s)))
                return;
        r = node_view_collect(v, &s->in);
        if (r < 0)
                s->error = r;
        s->node = s->in.node;
        if (r >= 0 && !s->node)
                s->error = -ENOENT;
        s->done = true;
}

static void on_error(struct node_view *v, unsigned part, int error, const char *message, void *userdata) {
        struct snapshot *s = userdata;

        if (s->done)
                return;
        s->error = error;
        if (asprintf(&s->error_what, "list %s: %s", strna(node_view_part_name(part)),
                     message ? message : strerror(-error)) < 0)
                s->error_what = NULL;
        s->done = true;
}

static void on_closed(void *userdata) {
        ((struct snapshot *)userdata)->closed = true;
}

int snapshot_read(struct snapshot *s) {
        int r = snapshot_start(s);

        if (r < 0)
                return log_error_errno(r, "Cannot start the API requests: %m");
        app_run_until(s->app, &s->done);
        if (s->error == -ENOENT && !s->node)
                return log_error_errno(s->error, "node \"%s\" not found", s->node_name);
        if (s->error < 0)
                return log_error_errno(s->error, "%s", strna(s->error_what));
        return 0;
}

void snapshot_done(struct snapshot *s) {
        node_input_done(&s->in);
        s->node = NULL;
        if (s->view) {
                node_view_close(s->view, on_closed, s);
                while (!s->closed && uv_run(&s->app->loop, UV_RUN_ONCE) != 0)
                        ;
                s->view = NULL;
        }
        free(s->error_what);
        s->error_what = NULL;
}

/* Starts the reads; the caller runs the loop until s->done. */
int snapshot_start(struct snapshot *s) {
        static const struct node_view_handlers h = { .on_synced = on_synced, .on_error = on_error };
        int r;

        r = node_view_new(s->app->client, s->app->ts,
                          &(const struct node_view_options){ .node = s->node_name, .once = NODE_VIEW_ALL },
                          &h, s, &s->view);
        if (r < 0)
                return r;
        return node_view_start(s->view, parts_of(s));
}
