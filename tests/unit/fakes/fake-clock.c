/* Fake time source (see fake-clock.h). Timers are a plain list scanned for the
 * earliest due one: tests hold a handful. Owns the per-timer records; never
 * reads a real clock. */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "drainer/base/macro.h"
#include "fakes/fake-clock.h"

struct fake_timer {
        struct fake_timer *next;
        struct fake_clock *clock;
        struct dtimer *t;
        uint64_t seq; /* arming order, breaks ties of due */
        bool armed;
};

struct fake_clock {
        struct timesrc base;
        uint64_t now;
        uint64_t mono_start;
        int64_t real_start;
        uint64_t seq;
        uint64_t fired;
        size_t n_timers;
        struct fake_timer *timers;
};

static uint64_t fc_now(struct timesrc *s) {
        return container_of(s, struct fake_clock, base)->now;
}

static int64_t fc_realtime(struct timesrc *s) {
        struct fake_clock *c = container_of(s, struct fake_clock, base);

        return c->real_start + (int64_t)(c->now - c->mono_start);
}

static int fc_timer_init(struct timesrc *s, struct dtimer *t) {
        struct fake_clock *c = container_of(s, struct fake_clock, base);
        struct fake_timer *ft = calloc(1, sizeof(*ft));

        if (!ft)
                return -ENOMEM;
        ft->clock = c;
        ft->t = t;
        ft->next = c->timers;
        c->timers = ft;
        c->n_timers++;
        t->impl = ft;
        return 0;
}

static void fc_timer_arm(struct timesrc *s, struct dtimer *t) {
        struct fake_clock *c = container_of(s, struct fake_clock, base);
        struct fake_timer *ft = t->impl;

        ft->armed = true;
        ft->seq = c->seq++;
}

static void fc_timer_disarm(struct timesrc *s, struct dtimer *t) {
        struct fake_timer *ft = t->impl;

        ft->armed = false;
}

static void fc_timer_done(struct timesrc *s, struct dtimer *t) {
        struct fake_clock *c = container_of(s, struct fake_clock, base);
        struct fake_timer *ft = t->impl;

        for (struct fake_timer **p = &c->timers; *p; p = &(*p)->next)
                if (*p == ft) {
                        *p = ft->next;
                        c->n_timers--;
                        free(ft);
                        return;
                }
        assert(!"fake clock: unknown timer");
}

static const struct timesrc_ops fake_ops = {
        .now = fc_now,
        .realtime = fc_realtime,
        .timer_init = fc_timer_init,
        .timer_arm = fc_timer_arm,
        .timer_disarm = fc_timer_disarm,
        .timer_done = fc_timer_done,
};

struct fake_clock *fake_clock_new(uint64_t mono_start, int64_t real_start) {
        struct fake_clock *c = calloc(1, sizeof(*c));

        if (!c)
                return NULL;
        c->base.ops = &fake_ops;
        c->now = c->mono_start = mono_start;
        c->real_start = real_start;
        return c;
}

void fake_clock_free(struct fake_clock *c) {
        if (!c)
                return;
        assert(c->n_timers == 0 && "fake clock freed with timers still initialized");
        free(c);
}

struct timesrc *fake_clock_timesrc(struct fake_clock *c) {
        return &c->base;
}

struct fake_clock *fake_clock_from_timesrc(struct timesrc *s) {
        assert(s->ops == &fake_ops);
        return container_of(s, struct fake_clock, base);
}

uint64_t fake_clock_now(const struct fake_clock *c) {
        return c->now;
}

static struct fake_timer *earliest(const struct fake_clock *c) {
        struct fake_timer *best = NULL;

        for (struct fake_timer *ft = c->timers; ft; ft = ft->next)
                if (ft->armed && (!best || ft->t->due < best->t->due ||
                                  (ft->t->due == best->t->due && ft->seq < best->seq)))
                        best = ft;
        return best;
}

/* Fires the earliest timer if it is due at or before target. */
static bool fire_one(struct fake_clock *c, uint64_t target) {
        struct fake_timer *ft = earliest(c);
        struct dtimer *t;

        if (!ft || ft->t->due > target)
                return false;
        t = ft->t;
        if (t->due > c->now)
                c->now = t->due;
        ft->armed = false;
        t->armed = false;
        c->fired++;
        /* The callback may re-arm, stop or release this or any other timer. */
        t->cb(t);
        return true;
}

void fake_clock_advance(struct fake_clock *c, uint64_t usec) {
        uint64_t target = c->now + usec;
        unsigned n = 0;

        while (fire_one(c, target)) {
                n++;
                assert(n < FAKE_CLOCK_MAX_FIRES && "fake clock: timers keep firing (busy loop?)");
        }
        c->now = target;
}

int fake_clock_step(struct fake_clock *c, uint64_t limit_usec) {
        uint64_t next = fake_clock_next_due(c);

        if (next == UINT64_MAX || next > c->now + limit_usec) {
                c->now += limit_usec;
                return 0;
        }
        fake_clock_advance(c, next > c->now ? next - c->now : 0);
        return 1;
}

size_t fake_clock_timers(const struct fake_clock *c) {
        return c->n_timers;
}

size_t fake_clock_armed(const struct fake_clock *c) {
        size_t n = 0;

        for (struct fake_timer *ft = c->timers; ft; ft = ft->next)
                n += ft->armed;
        return n;
}

uint64_t fake_clock_fired(const struct fake_clock *c) {
        return c->fired;
}

uint64_t fake_clock_next_due(const struct fake_clock *c) {
        struct fake_timer *ft = earliest(c);

        return ft ? ft->t->due : UINT64_MAX;
}
