/* Client-side token bucket: qps tokens a second, up to burst banked. One
 * bucket serves every request of a client (--kube-api-qps/--kube-api-burst). */
#pragma once

#include <stdint.h>

struct ratelimit {
        double qps;
        double burst;
        double tokens;        /* may go negative: tokens promised to waiting callers */
        uint64_t last;        /* monotonic µs of the last refill */
        uint64_t waited_usec; /* total delay handed out, for metrics */
        uint64_t granted;
};

/* qps <= 0 disables limiting. burst < 1 is treated as 1. */
void ratelimit_init(struct ratelimit *rl, double qps, int burst, uint64_t now);

/* Reserves one token and returns how long the caller must wait before using
 * it (0 = now). Reservations are first come, first served. This function can't fail. */
uint64_t ratelimit_reserve(struct ratelimit *rl, uint64_t now);

/* Gives back a reservation that was not used (e.g. the request was cancelled while waiting). */
void ratelimit_cancel(struct ratelimit *rl);
