/* Token bucket in the style of golang.org/x/time/rate's Reserve: tokens
 * refill continuously; a caller that finds the bucket empty takes a token on
 * credit and is told how long to wait. The adaptive rate is AIMD, as TCP's
 * congestion window: one cut per episode of pushback, one step up per interval
 * of demand without it. Pure arithmetic over a given "now". */
#include <errno.h>
#include <math.h>

#include "drainer/base/macro.h"
#include "drainer/base/timesrc.h"
#include "drainer/kube/ratelimit.h"

void ratelimit_init(struct ratelimit *rl, double qps, int burst, uint64_t now) {
        *rl = (struct ratelimit){
                .qps = qps,
                .burst = burst < 1 ? 1 : burst,
                .last = now,
        };
        rl->tokens = rl->burst;
}

/* Nothing refills before rl->last: during a pause it lies ahead of now. */
static void refill(struct ratelimit *rl, uint64_t now) {
        if (now <= rl->last)
                return;
        if (rl->qps > 0) {
                double cap = now < rl->calm_until ? fmin(1, rl->burst) : rl->burst;

                rl->tokens += (double)(now - rl->last) * rl->qps / (double)USEC_PER_SEC;
                if (rl->tokens > cap)
                        rl->tokens = cap;
        }
        rl->last = now;
}

static void window_restart(struct ratelimit *rl, uint64_t now) {
        rl->window_start = now;
        rl->window_waited = false;
        rl->window_slow = false;
}

int ratelimit_set_adaptive(struct ratelimit *rl, const struct ratelimit_adapt *a, uint64_t now) {
        if (!(rl->qps > 0) || !a)
                return -EINVAL;
        rl->adapt = *a;
        if (!(rl->adapt.min_qps > 0) || rl->adapt.min_qps > rl->qps)
                rl->adapt.min_qps = rl->qps;
        if (!(rl->adapt.max_qps >= rl->qps))
                rl->adapt.max_qps = rl->qps;
        if (!(rl->adapt.step_qps > 0))
                rl->adapt.step_qps = fmax(1, rl->qps / 4);
        if (!rl->adapt.interval_usec)
                rl->adapt.interval_usec = USEC_PER_SEC;
        if (!rl->adapt.latency_usec)
                rl->adapt.latency_usec = USEC_PER_SEC;
        rl->adaptive = true;
        window_restart(rl, now);
        return 0;
}

void ratelimit_set_qps(struct ratelimit *rl, double qps, uint64_t now) {
        refill(rl, now);
        rl->qps = qps;
}

uint64_t ratelimit_reserve(struct ratelimit *rl, uint64_t now) {
        uint64_t wait = 0;

        rl->granted++;
        refill(rl, now);
        if (rl->not_before > now)
                wait = rl->not_before - now; /* a pause the server asked for */
        if (rl->qps > 0) {
                rl->tokens -= 1;
                if (rl->tokens < 0) {
                        wait += (uint64_t)ceil(-rl->tokens * (double)USEC_PER_SEC / rl->qps);
                        rl->window_waited = true; /* the rate, not a pause, held it back */
                }
        }
        rl->waited_usec += wait;
        return wait;
}

void ratelimit_cancel(struct ratelimit *rl) {
        if (rl->qps > 0)
                rl->tokens = fmin(rl->tokens + 1, rl->burst);
}

void ratelimit_unreserve(struct ratelimit *rl, uint64_t unused_wait_usec) {
        ratelimit_cancel(rl);
        if (rl->granted > 0)
                rl->granted--;
        rl->waited_usec -= MIN(rl->waited_usec, unused_wait_usec);
}

bool ratelimit_pushback(struct ratelimit *rl, uint64_t sent_at, uint64_t retry_after_usec, uint64_t now) {
        double old = rl->qps;

        rl->pushbacks++;
        refill(rl, now);
        /* A loaded server gets no burst until the retries are out: they go at the rate. */
        if (rl->tokens > 1)
                rl->tokens = 1;
        rl->calm_until = MAX(rl->calm_until, now + retry_after_usec + USEC_PER_SEC);
        if (!rl->adaptive)
                return false;
        /* Adaptive: the server's flow control throttles the whole flow (one user), so
         * every caller waits out the Retry-After, not only the refused one. */
        if (now + retry_after_usec > rl->not_before)
                rl->not_before = now + retry_after_usec;
        if (rl->not_before > rl->last)
                rl->last = rl->not_before; /* no refill before it */
        if (rl->last_cut && sent_at < rl->last_cut)
                return false;
        rl->qps = fmax(rl->adapt.min_qps, rl->qps / 2);
        rl->last_cut = now;
        window_restart(rl, rl->not_before); /* the next interval starts after the pause */
        return rl->qps != old;
}

bool ratelimit_answered(struct ratelimit *rl, uint64_t latency_usec, uint64_t now) {
        bool raise;

        if (!rl->adaptive)
                return false;
        if (latency_usec > rl->adapt.latency_usec)
                rl->window_slow = true;
        if (now < rl->window_start + rl->adapt.interval_usec)
                return false;
        raise = rl->window_waited && !rl->window_slow && rl->qps < rl->adapt.max_qps;
        window_restart(rl, now);
        if (!raise)
                return false;
        ratelimit_set_qps(rl, fmin(rl->adapt.max_qps, rl->qps + rl->adapt.step_qps), now);
        return true;
}
