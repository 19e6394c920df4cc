/* backoff: doubling from the base up to the cap (never overflowing), equal jitter
 * inside [d/2, d], the same delays for the same seed (on the fake clock too), reset,
 * and a retry loop on the fake clock that waits exactly what the helper says. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "drainer/base/backoff.h"
#include "drainer/base/macro.h"
#include "fakes/fake-clock.h"

#define SEC UINT64_C(1000000)

static void test_exponential(void **state) {
        assert_int_equal(backoff_exponential(SEC, 30 * SEC, 0), SEC);
        assert_int_equal(backoff_exponential(SEC, 30 * SEC, 1), SEC);
        assert_int_equal(backoff_exponential(SEC, 30 * SEC, 2), 2 * SEC);
        assert_int_equal(backoff_exponential(SEC, 30 * SEC, 5), 16 * SEC);
        assert_int_equal(backoff_exponential(SEC, 30 * SEC, 6), 30 * SEC);
        assert_int_equal(backoff_exponential(SEC, 30 * SEC, 1000000), 30 * SEC);
        /* A cap near UINT64_MAX: doubling never wraps around. */
        assert_int_equal(backoff_exponential(3, UINT64_MAX - 1, 200), UINT64_MAX - 1);
        assert_int_equal(backoff_exponential(UINT64_MAX / 2 + 1, UINT64_MAX, 2), UINT64_MAX);
        /* A cap under the base: the cap wins. */
        assert_int_equal(backoff_exponential(10 * SEC, SEC, 1), SEC);
}

static void test_no_jitter_next_reset(void **state) {
        struct backoff b;
        const uint64_t want[] = { 1, 2, 4, 8, 16, 30, 30 };

        backoff_init(&b, SEC, 30 * SEC, false, 0);
        for (size_t i = 0; i < ELEMENTSOF(want); i++)
                assert_int_equal(backoff_next(&b), want[i] * SEC);
        assert_int_equal(b.failures, ELEMENTSOF(want));
        backoff_reset(&b);
        assert_int_equal(b.failures, 0);
        assert_int_equal(backoff_next(&b), SEC);
        /* backoff_delay() does not count. */
        assert_int_equal(backoff_delay(&b, 3), 4 * SEC);
        assert_int_equal(b.failures, 1);
}

static void test_equal_jitter(void **state) {
        struct backoff a, b, c;
        bool differs = false, low = false, high = false;

        backoff_init(&a, 250000, 30 * SEC, true, 7);
        backoff_init(&b, 250000, 30 * SEC, true, 7);
        backoff_init(&c, 250000, 30 * SEC, true, 8);
        for (unsigned n = 1; n <= 12; n++)
                for (int k = 0; k < 200; k++) {
                        uint64_t d = backoff_exponential(250000, 30 * SEC, n);
                        uint64_t x = backoff_delay(&a, n), y = backoff_delay(&b, n),
                                 z = backoff_delay(&c, n);

                        assert_true(x >= d / 2 && x <= d);
                        assert_int_equal(x, y); /* same seed, same delays */
                        differs |= x != z;
                        low |= x < d / 2 + d / 8;
                        high |= x > d - d / 8;
                }
        assert_true(differs);     /* another seed, other delays */
        assert_true(low && high); /* spread over the whole range, not stuck at one end */
        assert_int_equal(backoff_random(&a, 0), 0);
        for (int k = 0; k < 1000; k++)
                assert_true(backoff_random(&a, 300) < 300);
}

struct retry {
        struct dtimer t;
        unsigned fired;
};

static void on_retry(struct dtimer *t) {
        container_of(t, struct retry, t)->fired++;
}

/* A retry loop as the informer runs it: seeded from the fake clock, every run of the
 * test waits the same times, each one inside its jitter range. */
static void test_fake_clock(void **state) {
        uint64_t first[8], second[8];

        for (int round = 0; round < 2; round++) {
                struct fake_clock *clk = fake_clock_new(1000, INT64_C(1750000000) * 1000000);
                struct timesrc *ts = fake_clock_timesrc(clk);
                struct retry r = {};
                struct backoff b;
                uint64_t *out = round ? second : first;

                assert_non_null(clk);
                backoff_init(&b, SEC, 30 * SEC, true, backoff_seed(ts, 3));
                assert_int_equal(dtimer_init(&r.t, ts, on_retry), 0);
                for (unsigned i = 0; i < ELEMENTSOF(first); i++) {
                        uint64_t d = backoff_next(&b), t0 = fake_clock_now(clk);

                        dtimer_start(&r.t, d);
                        assert_int_equal(fake_clock_step(clk, 60 * SEC), 1);
                        assert_int_equal(r.fired, i + 1);
                        out[i] = fake_clock_now(clk) - t0;
                        assert_int_equal(out[i], d);
                        assert_true(d >= backoff_exponential(SEC, 30 * SEC, i + 1) / 2);
                        assert_true(d <= backoff_exponential(SEC, 30 * SEC, i + 1));
                }
                dtimer_done(&r.t);
                fake_clock_free(clk);
        }
        assert_memory_equal(first, second, sizeof(first));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_exponential),
                cmocka_unit_test(test_no_jitter_next_reset),
                cmocka_unit_test(test_equal_jitter),
                cmocka_unit_test(test_fake_clock),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
