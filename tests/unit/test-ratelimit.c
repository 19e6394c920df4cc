/* ratelimit: burst, then qps pacing over a fake "now"; cancellations give
 * their token back; qps <= 0 disables limiting; the server's pushback pauses
 * every caller; the adaptive rate rises under demand without pushback, halves
 * once per episode of pushback, stays within its floor and ceiling; a fixed
 * rate never changes. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "drainer/base/timesrc.h"
#include "drainer/kube/ratelimit.h"

#define MS USEC_PER_MSEC

static void test_burst_then_pacing(void **state) {
        struct ratelimit rl;
        uint64_t now = 1000 * MS;

        ratelimit_init(&rl, 5, 2, now);
        /* The burst goes out at once. */
        assert_int_equal(ratelimit_reserve(&rl, now), 0);
        assert_int_equal(ratelimit_reserve(&rl, now), 0);
        /* Then one token each 200 ms, first come first served. */
        assert_int_equal(ratelimit_reserve(&rl, now), 200 * MS);
        assert_int_equal(ratelimit_reserve(&rl, now), 400 * MS);
        assert_int_equal(ratelimit_reserve(&rl, now), 600 * MS);
        assert_int_equal(rl.waited_usec, 1200 * MS);
        assert_int_equal(rl.granted, 5);

        /* 100 ms later the next caller queues behind those promised tokens. */
        now += 100 * MS;
        assert_int_equal(ratelimit_reserve(&rl, now), 700 * MS);

        /* After a long pause the bucket is full again, but not fuller than burst. */
        now += 60 * 1000 * MS;
        assert_int_equal(ratelimit_reserve(&rl, now), 0);
        assert_int_equal(ratelimit_reserve(&rl, now), 0);
        assert_int_equal(ratelimit_reserve(&rl, now), 200 * MS);

        /* Steady state: one call each 200 ms never waits. */
        now += 200 * MS;
        for (int i = 0; i < 10; i++) {
                now += 200 * MS;
                assert_int_equal(ratelimit_reserve(&rl, now), 0);
        }
        /* A time that went backwards (or stood still) refills nothing. */
        assert_int_equal(ratelimit_reserve(&rl, now - 50 * MS), 200 * MS);
}

static void test_fractional_qps(void **state) {
        struct ratelimit rl;

        ratelimit_init(&rl, 0.5, 1, 0);
        assert_int_equal(ratelimit_reserve(&rl, 0), 0);
        assert_int_equal(ratelimit_reserve(&rl, 0), 2 * USEC_PER_SEC);
        assert_int_equal(ratelimit_reserve(&rl, 1 * USEC_PER_SEC), 3 * USEC_PER_SEC);
}

static void test_cancel_gives_back(void **state) {
        struct ratelimit rl;

        ratelimit_init(&rl, 5, 2, 0);
        assert_int_equal(ratelimit_reserve(&rl, 0), 0);
        assert_int_equal(ratelimit_reserve(&rl, 0), 0);
        assert_int_equal(ratelimit_reserve(&rl, 0), 200 * MS);
        assert_int_equal(ratelimit_reserve(&rl, 0), 400 * MS);
        /* The caller promised the 400 ms token gave up: the next one takes its place. */
        ratelimit_cancel(&rl);
        assert_int_equal(ratelimit_reserve(&rl, 0), 400 * MS);
        /* Cancelling more than was taken never banks more than burst. */
        for (int i = 0; i < 10; i++)
                ratelimit_cancel(&rl);
        assert_true(rl.tokens <= 2.0);
        assert_int_equal(ratelimit_reserve(&rl, 0), 0);
        assert_int_equal(ratelimit_reserve(&rl, 0), 0);
        assert_int_equal(ratelimit_reserve(&rl, 0), 200 * MS);
}

static void test_disabled_and_burst_floor(void **state) {
        struct ratelimit rl;

        ratelimit_init(&rl, 0, 0, 0);
        for (int i = 0; i < 1000; i++)
                assert_int_equal(ratelimit_reserve(&rl, 0), 0);
        ratelimit_cancel(&rl);
        assert_int_equal(rl.waited_usec, 0);

        ratelimit_init(&rl, 10, 0, 0); /* burst < 1 acts as 1 */
        assert_int_equal(ratelimit_reserve(&rl, 0), 0);
        assert_int_equal(ratelimit_reserve(&rl, 0), 100 * MS);
}

#define SEC USEC_PER_SEC

/* One interval of demand: callers queue in the bucket (so it is the bound), the
 * server answers each fast. Returns the time at the end of the interval. */
static uint64_t busy_second(struct ratelimit *rl, uint64_t now, uint64_t latency, bool *changed) {
        *changed = false;
        for (int i = 0; i < 10; i++) {
                (void)ratelimit_reserve(rl, now);
                (void)ratelimit_reserve(rl, now);
                now += 100 * MS;
                *changed |= ratelimit_answered(rl, latency, now);
        }
        return now;
}

static void test_adaptive_rises_to_ceiling(void **state) {
        struct ratelimit rl;
        uint64_t now = 1000 * SEC;
        bool changed;

        ratelimit_init(&rl, 20, 1, now);
        assert_int_equal(ratelimit_set_adaptive(&rl, &(struct ratelimit_adapt){ .max_qps = 40 }, now), 0);
        assert_true(rl.adapt.step_qps == 5); /* a quarter of the start */
        assert_true(rl.adapt.min_qps == 20); /* a floor above the start is the start */
        for (int i = 1; i <= 4; i++) {
                now = busy_second(&rl, now, 20 * MS, &changed);
                assert_true(changed);
                assert_true(rl.qps == 20 + 5 * i);
        }
        /* Never above the ceiling. */
        for (int i = 0; i < 10; i++) {
                now = busy_second(&rl, now, 20 * MS, &changed);
                assert_false(changed);
                assert_true(rl.qps == 40);
        }
}

static void test_adaptive_holds(void **state) {
        struct ratelimit rl;
        uint64_t now = 1000 * SEC;
        bool changed;

        ratelimit_init(&rl, 20, 100, now);
        assert_int_equal(ratelimit_set_adaptive(&rl, &(struct ratelimit_adapt){ .max_qps = 100 }, now), 0);
        /* No demand (the burst covers every caller): no reason to rise. */
        for (int i = 0; i < 50; i++) {
                (void)ratelimit_reserve(&rl, now);
                now += 100 * MS;
                assert_false(ratelimit_answered(&rl, 10 * MS, now));
        }
        assert_true(rl.qps == 20);
        /* Demand, but the server answers slowly: hold. */
        ratelimit_init(&rl, 20, 1, now);
        assert_int_equal(ratelimit_set_adaptive(&rl, &(struct ratelimit_adapt){ .max_qps = 100 }, now), 0);
        for (int i = 0; i < 5; i++) {
                now = busy_second(&rl, now, 1500 * MS, &changed);
                assert_false(changed);
        }
        assert_true(rl.qps == 20);
        /* Fast again: it rises. */
        now = busy_second(&rl, now, 10 * MS, &changed);
        assert_true(changed);
        assert_true(rl.qps == 25);
        /* A fixed rate (no ratelimit_set_adaptive) never changes. */
        ratelimit_init(&rl, 20, 1, now);
        for (int i = 0; i < 5; i++) {
                now = busy_second(&rl, now, 10 * MS, &changed);
                assert_false(changed);
                assert_false(ratelimit_pushback(&rl, now, 0, now));
        }
        assert_true(rl.qps == 20);
        assert_int_equal(ratelimit_set_adaptive(&rl, NULL, now), -EINVAL);
        ratelimit_init(&rl, 0, 1, now);
        assert_int_equal(ratelimit_set_adaptive(&rl, &(struct ratelimit_adapt){}, now), -EINVAL);
}

static void test_adaptive_halves_once_per_episode(void **state) {
        struct ratelimit rl;
        uint64_t now = 1000 * SEC, sent;

        ratelimit_init(&rl, 80, 1, now);
        assert_int_equal(
                ratelimit_set_adaptive(&rl, &(struct ratelimit_adapt){ .min_qps = 15, .max_qps = 100 }, now),
                0);
        sent = now;
        now += 50 * MS;
        assert_true(ratelimit_pushback(&rl, sent, 0, now));
        assert_true(rl.qps == 40);
        /* Twenty parallel requests sent before the cut, answered 429 after it: one cut. */
        for (int i = 0; i < 20; i++) {
                now += MS;
                assert_false(ratelimit_pushback(&rl, sent, 0, now));
        }
        assert_true(rl.qps == 40);
        assert_int_equal(rl.pushbacks, 21);
        /* A request sent after the cut that is pushed back again: another cut. */
        sent = now;
        now += 10 * MS;
        assert_true(ratelimit_pushback(&rl, sent, 0, now));
        assert_true(rl.qps == 20);
        sent = now;
        assert_true(ratelimit_pushback(&rl, sent, 0, now));
        assert_true(rl.qps == 15); /* the floor */
        assert_false(ratelimit_pushback(&rl, now, 0, now));
        assert_true(rl.qps == 15);
        /* No rise in the interval of a cut, even under demand. */
        (void)ratelimit_reserve(&rl, now);
        (void)ratelimit_reserve(&rl, now);
        assert_false(ratelimit_answered(&rl, MS, now + 999 * MS));
}

/* After a pushback the bucket banks no burst until a second after the
 * Retry-After: the retries that come back then go out paced at the rate, not as
 * one burst. Adaptive, the Retry-After also holds every caller. */
static void test_pushback_pauses_everyone(void **state) {
        struct ratelimit rl;
        uint64_t now = 1000 * SEC;

        /* Fixed: a full bucket of 20 ... */
        ratelimit_init(&rl, 10, 20, now);
        assert_false(ratelimit_pushback(&rl, now, 1 * SEC, now));
        /* ... no pause, but no burst: the retries at +1 s go 100 ms apart */
        assert_int_equal(ratelimit_reserve(&rl, now + 1 * SEC), 0);
        assert_int_equal(ratelimit_reserve(&rl, now + 1 * SEC), 100 * MS);
        assert_int_equal(ratelimit_reserve(&rl, now + 1 * SEC), 200 * MS);
        assert_true(rl.qps == 10);
        /* Long after, the burst is back. */
        now += 60 * SEC;
        for (int i = 0; i < 20; i++)
                assert_int_equal(ratelimit_reserve(&rl, now), 0);

        /* Adaptive: every caller waits out the Retry-After, then goes at the (halved) rate. */
        ratelimit_init(&rl, 10, 20, now);
        assert_int_equal(ratelimit_set_adaptive(&rl, &(struct ratelimit_adapt){ .min_qps = 1 }, now), 0);
        assert_true(ratelimit_pushback(&rl, now, 1 * SEC, now));
        assert_int_equal(ratelimit_reserve(&rl, now), 1 * SEC);
        assert_int_equal(ratelimit_reserve(&rl, now), 1 * SEC + 200 * MS);
        assert_int_equal(ratelimit_reserve(&rl, now + 500 * MS), 900 * MS);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_burst_then_pacing),
                cmocka_unit_test(test_fractional_qps),
                cmocka_unit_test(test_cancel_gives_back),
                cmocka_unit_test(test_disabled_and_burst_floor),
                cmocka_unit_test(test_adaptive_rises_to_ceiling),
                cmocka_unit_test(test_adaptive_holds),
                cmocka_unit_test(test_adaptive_halves_once_per_episode),
                cmocka_unit_test(test_pushback_pauses_everyone),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
