/* Exponential backoff, capped, with optional equal jitter drawn from a seeded
 * generator of its own (never the process-wide random()), so a test on the fake
 * clock sees the same delays on every run. Used for every retry: API calls
 * (client), list/watch reconnects (informer), exec plugin reruns and 401
 * refreshes (credentials), lease retries (slots), failed drains (serve). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct timesrc;

/* Embedded in its owner. */
struct backoff {
        uint64_t base_usec; /* the first delay; > 0 */
        uint64_t cap_usec;  /* no delay is longer; >= base_usec */
        bool jitter;        /* equal jitter: each delay is d/2 + a random part of [0, d/2] */
        unsigned failures;  /* consecutive failures counted by backoff_next() */
        uint64_t rng;       /* the generator's state (splitmix64) */
};

/* seed: any value (0 too); backoff_seed() derives one from a time source. */
void backoff_init(struct backoff *b, uint64_t base_usec, uint64_t cap_usec, bool jitter, uint64_t seed);

/* A seed from the wall clock of ts (the fake clock's is fixed: tests repeat) mixed with
 * salt, so several owners started at once do not jitter in step. */
uint64_t backoff_seed(struct timesrc *ts, uint64_t salt);

/* base * 2^(n-1), at most cap (n 0 counts as 1); never overflows. Pure: for callers
 * whose cap changes from one call to the next. */
uint64_t backoff_exponential(uint64_t base_usec, uint64_t cap_usec, unsigned n);

/* The delay after the n-th consecutive failure (n >= 1): backoff_exponential() of the
 * owner's base and cap, jittered when asked. Does not count the failure: for callers
 * that keep their own count (per call, per node). */
uint64_t backoff_delay(struct backoff *b, unsigned n);

/* Counts one more failure and returns the delay that follows it. */
uint64_t backoff_next(struct backoff *b);

/* A success: the next failure waits base again. */
void backoff_reset(struct backoff *b);

/* Uniform in [0, n) from the same generator (n 0 gives 0): for spreads that are not
 * delays after failures, such as watch timeouts. */
uint64_t backoff_random(struct backoff *b, uint64_t n);
