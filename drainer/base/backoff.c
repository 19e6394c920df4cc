/* Exponential backoff with equal jitter over a splitmix64 generator seeded by
 * its owner. Owns nothing; reads no clock itself (the seed comes from the
 * caller's time source). */
#include <assert.h>

#include "drainer/base/backoff.h"
#include "drainer/base/macro.h"
#include "drainer/base/timesrc.h"

static uint64_t splitmix64(uint64_t *state) {
        uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));

        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        return z ^ (z >> 31);
}

void backoff_init(struct backoff *b, uint64_t base_usec, uint64_t cap_usec, bool jitter, uint64_t seed) {
        assert(b);
        assert(base_usec > 0);
        *b = (struct backoff){
                .base_usec = base_usec,
                .cap_usec = MAX(cap_usec, base_usec),
                .jitter = jitter,
                .rng = seed,
        };
}

uint64_t backoff_seed(struct timesrc *ts, uint64_t salt) {
        uint64_t s = (uint64_t)timesrc_realtime(ts) ^ (salt * UINT64_C(0x9e3779b97f4a7c15));

        return splitmix64(&s);
}

uint64_t backoff_exponential(uint64_t base_usec, uint64_t cap_usec, unsigned n) {
        uint64_t d = base_usec;

        for (unsigned i = 1; i < n && d < cap_usec; i++)
                d = d > cap_usec / 2 ? cap_usec : d * 2;
        return MIN(d, cap_usec);
}

uint64_t backoff_random(struct backoff *b, uint64_t n) {
        return n ? splitmix64(&b->rng) % n : 0;
}

uint64_t backoff_delay(struct backoff *b, unsigned n) {
        uint64_t d = backoff_exponential(b->base_usec, b->cap_usec, n);

        /* Equal jitter: half fixed, half random, so that retries of many callers spread
         * out while none comes back sooner than half its delay. */
        return b->jitter ? d / 2 + backoff_random(b, d / 2 + 1) : d;
}

uint64_t backoff_next(struct backoff *b) {
        if (b->failures < UINT32_MAX)
                b->failures++;
        return backoff_delay(b, b->failures);
}

void backoff_reset(struct backoff *b) {
        b->failures = 0;
}
