/* A driver's rollout with its slots and Events (rolloutsession.h): set up together,
 * wound down in order, each stage going on when the last one said it ended (the
 * runner's, the slots' and the announcer's callbacks): nothing ticks meanwhile. Owns
 * the runner, the slots and the announcer. */
#include <errno.h>
#include <stdlib.h>

#include "drainer/base/macro.h"
#include "drainer/ctl/announcer.h"
#include "drainer/ctl/rolloutsession.h"
#include "drainer/kube/slots.h"

/* What is wound down, in order. */
enum stop_stage {
        STOP_NONE,
        STOP_RUNNER,
        STOP_SLOTS,
        STOP_ANNOUNCER,
        STOP_DONE,
};

struct rollout_session {
        struct announcer *announcer;    /* owned */
        struct slots *slots;            /* owned */
        struct driver_rollout *rollout; /* owned */
        struct dtimer wait;             /* the wind-down's next stage, on a turn of its own */
        bool wait_ready;
        enum stop_stage stage;
        void (*stopped)(void *userdata);
        void *userdata;
};

static void stop_next(struct rollout_session *s);

static void on_slots_changed(struct slots *slots, void *userdata) {
        struct rollout_session *s = userdata;

        if (s->rollout)
                driver_rollout_poke(s->rollout);
}

static void on_wait_timer(struct dtimer *t) {
        stop_next(container_of(t, struct rollout_session, wait));
}

static void on_runner_stopped(void *userdata) {
        struct rollout_session *s = userdata;

        s->stage = STOP_SLOTS;
        stop_next(s);
}

static void on_slots_closed(struct slots *slots, void *userdata) {
        struct rollout_session *s = userdata;

        s->stage = STOP_ANNOUNCER;
        dtimer_start(&s->wait, 0); /* not from inside the slots' own callback */
}

static void on_announcer_idle(void *userdata) {
        struct rollout_session *s = userdata;

        if (s->stage == STOP_ANNOUNCER)
                dtimer_start(&s->wait, 0);
}

int rollout_session_new(struct kube_client *client, struct timesrc *ts,
                        const struct rollout_session_options *o, const struct driver_rollout_callbacks *cb,
                        void *userdata, struct rollout_session **ret,
                        enum rollout_session_part *ret_failed) {
        struct rollout_session *s = calloc(1, sizeof(*s));
        struct driver_rollout_options ro = o->rollout;
        int r;

        *ret_failed = ROLLOUT_SESSION_ANNOUNCER;
        if (!s)
                return -ENOMEM;
        r = dtimer_init(&s->wait, ts, on_wait_timer);
        if (r < 0)
                goto fail;
        s->wait_ready = true;
        r = announcer_new(client, ts, o->instance, &s->announcer);
        if (r < 0)
                goto fail;
        announcer_set_idle_fn(s->announcer, on_announcer_idle, s);
        *ret_failed = ROLLOUT_SESSION_SLOTS;
        r = slots_new(client, ts,
                      &(const struct slots_options){
                              .ns = ro.lease_namespace, .max = ro.max_parallel, .identity = o->identity },
                      on_slots_changed, s, &s->slots);
        if (r < 0)
                goto fail;
        *ret_failed = ROLLOUT_SESSION_RUNNER;
        ro.slots = s->slots;
        ro.announcer = s->announcer;
        r = driver_rollout_new(client, ts, &ro, cb, userdata, &s->rollout);
        if (r < 0)
                goto fail;
        *ret = s;
        return 0;
fail:
        rollout_session_free(s);
        return r;
}

int rollout_session_start(struct rollout_session *s) {
        return driver_rollout_start(s->rollout);
}

struct driver_rollout *rollout_session_runner(const struct rollout_session *s) {
        return s->rollout;
}

static void stop_next(struct rollout_session *s) {
        switch (s->stage) {
        case STOP_NONE:
        case STOP_RUNNER:
                s->stage = STOP_RUNNER;
                driver_rollout_stop(s->rollout, on_runner_stopped, s);
                return;
        case STOP_SLOTS:
                slots_close(s->slots, ROLLOUT_SESSION_SETTLE_USEC, on_slots_closed, s);
                return;
        case STOP_ANNOUNCER:
                if (!announcer_idle(s->announcer))
                        return; /* on_announcer_idle comes with the last answer */
                s->stage = STOP_DONE;
                dtimer_done(&s->wait);
                s->wait_ready = false;
                s->stopped(s->userdata);
                return;
        case STOP_DONE:
                return;
        }
}

void rollout_session_stop(struct rollout_session *s, void (*stopped)(void *userdata), void *userdata) {
        s->stopped = stopped;
        s->userdata = userdata;
        if (s->stage == STOP_NONE)
                stop_next(s);
}

void rollout_session_free(struct rollout_session *s) {
        if (!s)
                return;
        driver_rollout_free(s->rollout);
        slots_free(s->slots);
        announcer_free(s->announcer);
        if (s->wait_ready)
                dtimer_done(&s->wait);
        free(s);
}
