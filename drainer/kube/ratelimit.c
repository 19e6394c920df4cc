/* Token bucket in the style of golang.org/x/time/rate's Reserve: tokens
 * refill continuously; a caller that finds the bucket empty takes a token on
 * credit and is told how long to wait. Pure arithmetic over a given "now". */
#include <math.h>

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

static void refill(struct ratelimit *rl, uint64_t now) {
        if (now <= rl->last)
                return;
        rl->tokens += (double)(now - rl->last) * rl->qps / (double)USEC_PER_SEC;
        if (rl->tokens > rl->burst)
                rl->tokens = rl->burst;
        rl->last = now;
}

uint64_t ratelimit_reserve(struct ratelimit *rl, uint64_t now) {
        uint64_t wait = 0;

        rl->granted++;
        if (rl->qps <= 0)
                return 0;
        refill(rl, now);
        rl->tokens -= 1;
        if (rl->tokens < 0)
                wait = (uint64_t)ceil(-rl->tokens * (double)USEC_PER_SEC / rl->qps);
        rl->waited_usec += wait;
        return wait;
}

void ratelimit_cancel(struct ratelimit *rl) {
        if (rl->qps > 0)
                rl->tokens = fmin(rl->tokens + 1, rl->burst);
}
