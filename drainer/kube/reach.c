/* The API server's reachability said to a person (reach.h), from the client's own
 * figures (kube_client_get_stats). Owns its timer; sends nothing. */
#include <errno.h>
#include <stdlib.h>

#include "drainer/base/macro.h"
#include "drainer/base/text.h"
#include "drainer/kube/reach.h"

static void say(struct kube_reach *r, bool reachable, char *line) {
        if (line)
                r->fn(reachable, line, r->userdata);
        free(line);
}

static void on_reach_timer(struct dtimer *t) {
        struct kube_reach *r = container_of(t, struct kube_reach, timer);
        struct kube_client_stats st;
        uint64_t now = timesrc_now(r->ts);

        kube_client_get_stats(r->client, &st);
        if (st.failing_since_usec && now - st.failing_since_usec >= KUBE_REACH_AFTER_USEC &&
            (!r->warned || now - r->warned_at >= KUBE_REACH_REPEAT_USEC)) {
                say(r, false,
                    text_printf("cannot reach the API server %s (%s) for %.0f s: %s; retrying", r->server,
                                r->source, (double)(now - st.failing_since_usec) / USEC_PER_SEC,
                                st.last_error[0] ? st.last_error : "no answer"));
                r->warned = true;
                r->warned_at = now;
        } else if (!st.failing_since_usec && r->warned) {
                say(r, true, text_printf("the API server %s answers again", r->server));
                r->warned = false;
        }
        /* Only while the server fails and calls are in flight. */
        if (st.failing_since_usec && kube_client_calls_in_flight(r->client) > 0)
                dtimer_start(t, KUBE_REACH_TICK_USEC);
}

int kube_reach_init(struct kube_reach *r, struct kube_client *c, struct timesrc *ts, const char *server,
                    const char *source, kube_reach_fn fn, void *userdata) {
        *r = (struct kube_reach){
                .client = c, .ts = ts, .server = server, .source = source, .fn = fn, .userdata = userdata
        };
        if (dtimer_init(&r->timer, ts, on_reach_timer) < 0)
                return -ENOMEM;
        r->ready = true;
        return 0;
}

void kube_reach_poke(struct kube_reach *r) {
        struct kube_client_stats st;

        if (!r->ready || r->timer.armed)
                return;
        kube_client_get_stats(r->client, &st);
        if (st.failing_since_usec || r->warned)
                dtimer_start(&r->timer, KUBE_REACH_TICK_USEC);
}

void kube_reach_stop(struct kube_reach *r) {
        if (r->ready)
                dtimer_stop(&r->timer);
}

void kube_reach_done(struct kube_reach *r) {
        if (!r->ready)
                return;
        dtimer_done(&r->timer);
        r->ready = false;
}
