/* The status watch: owns a node view and a debounce timer; hands the caller the
 * node's input after a change once every watched part is synced. Prints nothing,
 * writes nothing, never polls. */
#include <errno.h>
#include <stdlib.h>

#include "drainer/base/log.h"
#include "drainer/base/macro.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/statuswatch.h"
#include "drainer/dra/nodeview.h"

struct status_watch {
        const struct status_watch_handlers *h;
        void *userdata;
        unsigned parts;
        uint64_t debounce_usec;
        struct node_view *view; /* owned, until closed */
        struct dtimer debounce;
        bool closing;
        void (*closed)(void *userdata);
        void *closed_userdata;
};

static void on_debounce(struct dtimer *t) {
        struct status_watch *w = container_of(t, struct status_watch, debounce);
        _cleanup_(node_input_done) struct node_input in = {};

        if (w->closing || !node_view_synced(w->view, w->parts))
                return;
        if (node_view_collect(w->view, &in) < 0) {
                w->h->on_change(w, NULL, w->userdata);
                return;
        }
        w->h->on_change(w, &in, w->userdata);
}

static void changed(struct status_watch *w) {
        if (!w->closing && !w->debounce.armed && node_view_synced(w->view, w->parts))
                dtimer_start(&w->debounce, w->debounce_usec);
}

static void on_view_change(struct node_view *v, void *userdata) {
        changed(userdata);
}

static void on_view_synced(struct node_view *v, unsigned part, void *userdata) {
        changed(userdata);
}

static void on_view_error(struct node_view *v, unsigned part, int error, const char *message,
                          void *userdata) {
        struct status_watch *w = userdata;

        if (!w->closing && w->h->on_error)
                w->h->on_error(w, strna(node_view_part_name(part)), error, message, w->userdata);
}

static struct status_watch *watch_free(struct status_watch *w) {
        dtimer_done(&w->debounce);
        free(w);
        return NULL;
}

int status_watch_new(struct kube_client *client, struct timesrc *ts, const char *node, unsigned parts,
                     uint64_t debounce_usec, const struct status_watch_handlers *h, void *userdata,
                     struct status_watch **ret) {
        static const struct node_view_handlers vh = {
                .on_change = on_view_change,
                .on_synced = on_view_synced,
                .on_error = on_view_error,
        };
        struct status_watch *w = calloc(1, sizeof(*w));
        int r;

        if (!w)
                return -ENOMEM;
        *w = (struct status_watch){
                .h = h, .userdata = userdata, .parts = parts, .debounce_usec = debounce_usec
        };
        if (dtimer_init(&w->debounce, ts, on_debounce) < 0) {
                free(w);
                return -ENOMEM;
        }
        r = node_view_new(client, ts, &(const struct node_view_options){ .node = node }, &vh, w, &w->view);
        if (r >= 0)
                r = node_view_start(w->view, parts);
        if (r < 0) {
                status_watch_close(w, NULL, NULL);
                return r;
        }
        *ret = w;
        return 0;
}

static void on_view_closed(void *userdata) {
        struct status_watch *w = userdata;
        void (*closed)(void *userdata) = w->closed;
        void *closed_userdata = w->closed_userdata;

        watch_free(w);
        if (closed)
                closed(closed_userdata);
}

void status_watch_close(struct status_watch *w, void (*closed)(void *userdata), void *userdata) {
        if (!w)
                return;
        w->closing = true;
        w->closed = closed;
        w->closed_userdata = userdata;
        dtimer_stop(&w->debounce);
        if (!w->view) {
                watch_free(w);
                return; /* only a failed status_watch_new(), closed NULL */
        }
        node_view_close(TAKE_PTR(w->view), on_view_closed, w);
}
