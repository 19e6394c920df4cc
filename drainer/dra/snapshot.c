/* One-shot reads of everything a node's drain depends on, concurrently, into compact
 * records (snapshot.h): a node view whose informers list once. Owns the view. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/log.h"
#include "drainer/base/macro.h"
#include "drainer/dra/snapshot.h"

struct node_snapshot {
        char *node_name;
        bool with_pdbs;
        struct node_view *view;
        struct node_input in;
        bool has_input;
        bool finished; /* done ran, or the caller closed */
        char *what;
        node_snapshot_fn done;
        void *userdata;
        void (*closed)(void *userdata);
        void *closed_userdata;
};

static unsigned parts_of(const struct node_snapshot *s) {
        return NODE_VIEW_ALL & ~(s->with_pdbs ? 0 : NODE_VIEW_PDBS);
}

static void finish(struct node_snapshot *s, int error) {
        s->finished = true;
        s->done(s, error, s->what, s->userdata);
}

static void on_synced(struct node_view *v, unsigned part, void *userdata) {
        struct node_snapshot *s = userdata;
        int r;

        if (s->finished || !node_view_synced(v, parts_of(s)))
                return;
        r = node_view_collect(v, &s->in);
        if (r < 0) {
                if (asprintf(&s->what, "cannot read node \"%s\": %s", s->node_name, strerror(-r)) < 0)
                        s->what = NULL;
                finish(s, r);
                return;
        }
        s->has_input = true;
        if (!s->in.node) {
                if (asprintf(&s->what, "node \"%s\" not found", s->node_name) < 0)
                        s->what = NULL;
                finish(s, -ENOENT);
                return;
        }
        finish(s, 0);
}

static void on_error(struct node_view *v, unsigned part, int error, const char *message, void *userdata) {
        struct node_snapshot *s = userdata;

        if (s->finished)
                return;
        if (asprintf(&s->what, "list %s: %s", strna(node_view_part_name(part)),
                     message ? message : strerror(-error)) < 0)
                s->what = NULL;
        finish(s, error);
}

static void snapshot_free(struct node_snapshot *s) {
        if (s->has_input)
                node_input_done(&s->in);
        free(s->what);
        free(s->node_name);
        free(s);
}

int node_snapshot_start(struct kube_client *client, struct timesrc *ts, const char *node, bool with_pdbs,
                        node_snapshot_fn done, void *userdata, struct node_snapshot **ret) {
        static const struct node_view_handlers h = { .on_synced = on_synced, .on_error = on_error };
        struct node_snapshot *s;
        int r;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->with_pdbs = with_pdbs;
        s->done = done;
        s->userdata = userdata;
        s->node_name = strdup(node);
        if (!s->node_name) {
                snapshot_free(s);
                return -ENOMEM;
        }
        r = node_view_new(client, ts,
                          &(const struct node_view_options){ .node = s->node_name, .once = NODE_VIEW_ALL },
                          &h, s, &s->view);
        if (r < 0) {
                snapshot_free(s);
                return r;
        }
        r = node_view_start(s->view, parts_of(s));
        if (r < 0) {
                /* nothing reads yet: the view closes without calls in flight */
                s->finished = true;
                node_snapshot_close(s, NULL, NULL);
                return r;
        }
        *ret = s;
        return 0;
}

const struct node_input *node_snapshot_input(const struct node_snapshot *s) {
        return &s->in;
}

static void on_view_closed(void *userdata) {
        struct node_snapshot *s = userdata;
        void (*closed)(void *) = s->closed;
        void *ud = s->closed_userdata;

        snapshot_free(s);
        if (closed)
                closed(ud);
}

void node_snapshot_close(struct node_snapshot *s, void (*closed)(void *userdata), void *userdata) {
        if (!s)
                return;
        s->finished = true;
        s->closed = closed;
        s->closed_userdata = userdata;
        node_view_close(s->view, on_view_closed, s);
}
