/* ratelimit: burst, then qps pacing over a fake "now"; cancellations give
 * their token back; qps <= 0 disables limiting. */
#include <setjmp.h>
#include <stdarg.h>
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

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_burst_then_pacing),
                cmocka_unit_test(test_fractional_qps),
                cmocka_unit_test(test_cancel_gives_back),
                cmocka_unit_test(test_disabled_and_burst_floor),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
