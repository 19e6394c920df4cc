/* Client-side token bucket: qps tokens a second, up to burst banked. One
 * bucket serves every request of a client (--kube-api-qps/--kube-api-burst).
 * Fixed, its rate never changes. Adaptive (--kube-api-qps auto), the rate is
 * additive-increase, multiplicative-decrease between a floor and a ceiling, on
 * what the API server says: halved on pushback (a 429 of its flow control, a
 * 5xx with Retry-After), raised by a step each interval the bucket held callers
 * back while the server answered without pushback and fast, and a pushback's
 * Retry-After holds every caller of the client, not only the one that got it.
 * In both modes a pushback drops the banked burst until a second after its
 * Retry-After, so that the retries of many parallel calls go out paced at the
 * rate, not at one instant. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct ratelimit_adapt {
        double min_qps;         /* the floor: never below (nor above the starting qps) */
        double max_qps;         /* the ceiling: never above (nor below the starting qps) */
        double step_qps;        /* added per interval; 0 = a quarter of the starting qps, at least 1 */
        uint64_t interval_usec; /* 0 = 1 s */
        uint64_t latency_usec;  /* an answer slower than this holds the rate; 0 = 1 s */
};

struct ratelimit {
        double qps;
        double burst;
        double tokens;        /* may go negative: tokens promised to waiting callers */
        uint64_t last;        /* monotonic µs of the last refill; later than now during a pause */
        uint64_t not_before;  /* adaptive: the end of the last pause the server asked for */
        uint64_t calm_until;  /* no burst banked before: retries after a pushback */
        uint64_t waited_usec; /* total delay handed out, for metrics */
        uint64_t granted;

        bool adaptive;
        struct ratelimit_adapt adapt;
        uint64_t window_start; /* the current interval of the increase (may lie ahead: a pause) */
        bool window_waited;    /* a caller waited for a token in it: the bucket was the bound */
        bool window_slow;      /* an answer in it came slower than adapt.latency_usec */
        uint64_t last_cut;     /* when the rate was last cut (0: never) */
        uint64_t pushbacks;    /* answers taken as pushback */
};

/* qps <= 0 disables limiting. burst < 1 is treated as 1. Fixed rate. */
void ratelimit_init(struct ratelimit *rl, double qps, int burst, uint64_t now);

/* Makes the rate adaptive from now on, starting at the current qps (which must be
 * > 0: -EINVAL otherwise); a is copied, its floor and ceiling clamped around the
 * starting qps. */
int ratelimit_set_adaptive(struct ratelimit *rl, const struct ratelimit_adapt *a, uint64_t now);

/* Changes the rate from now on; the tokens already promised keep their times. */
void ratelimit_set_qps(struct ratelimit *rl, double qps, uint64_t now);

/* Reserves one token and returns how long the caller must wait before using
 * it (0 = now). Reservations are first come, first served. This function can't fail. */
uint64_t ratelimit_reserve(struct ratelimit *rl, uint64_t now);

/* Gives back a reservation that was not used (e.g. the request was cancelled while waiting). */
void ratelimit_cancel(struct ratelimit *rl);

/* Takes back a reservation whose caller has not used it yet, unused_wait_usec
 * before it was due, to reserve again at once (ratelimit_reserve) now that the
 * rate or a pause changed: callers waiting in order of their due times keep
 * that order at the new rate. */
void ratelimit_unreserve(struct ratelimit *rl, uint64_t unused_wait_usec);

/* The server pushed back on a request sent at sent_at, asking to wait
 * retry_after_usec (0: it did not say). The banked burst is gone until a second
 * after that. Adaptive: nobody's next token comes before then, and the rate is
 * halved (not below the floor), once per episode: a pushback to a request sent
 * before the last cut says nothing new. Returns whether the rate changed. */
bool ratelimit_pushback(struct ratelimit *rl, uint64_t sent_at, uint64_t retry_after_usec, uint64_t now);

/* The server answered a request without pushback, in latency_usec (0: do not
 * judge the latency, e.g. a list that may be slow for its size). Adaptive: at the
 * end of each interval the rate rises by the step (not above the ceiling) if the
 * bucket held callers back in it and no answer was slow. Returns whether the
 * rate changed. */
bool ratelimit_answered(struct ratelimit *rl, uint64_t latency_usec, uint64_t now);
