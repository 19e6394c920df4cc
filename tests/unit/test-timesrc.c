/* timesrc: RFC 3339 parsing and formatting; the libuv time source's one-shot
 * timers, and that releasing them lets the loop close cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <string.h>
#include <uv.h>

#include "drainer/base/macro.h"
#include "drainer/base/timesrc.h"

#define T_2024 INT64_C(1718454645) /* 2024-06-15T12:30:45Z */

static void test_parse(void **state) {
        int64_t t;

        assert_int_equal(timesrc_parse_rfc3339("2024-06-15T12:30:45Z", &t), 0);
        assert_int_equal(t, T_2024 * 1000000);
        assert_int_equal(timesrc_parse_rfc3339("1970-01-01T00:00:00Z", &t), 0);
        assert_int_equal(t, 0);
        /* lower-case separators are allowed by RFC 3339 */
        assert_int_equal(timesrc_parse_rfc3339("2024-06-15t12:30:45z", &t), 0);
        assert_int_equal(t, T_2024 * 1000000);

        /* fractions: any number of digits, cut at microseconds */
        assert_int_equal(timesrc_parse_rfc3339("2024-06-15T12:30:45.5Z", &t), 0);
        assert_int_equal(t, T_2024 * 1000000 + 500000);
        assert_int_equal(timesrc_parse_rfc3339("2024-06-15T12:30:45.123456Z", &t), 0);
        assert_int_equal(t, T_2024 * 1000000 + 123456);
        assert_int_equal(timesrc_parse_rfc3339("2024-06-15T12:30:45.123456789Z", &t), 0);
        assert_int_equal(t, T_2024 * 1000000 + 123456);
        assert_int_equal(timesrc_parse_rfc3339("2024-06-15T12:30:45.000001Z", &t), 0);
        assert_int_equal(t, T_2024 * 1000000 + 1);

        /* offsets: local time minus offset is UTC */
        assert_int_equal(timesrc_parse_rfc3339("2024-06-15T14:30:45+02:00", &t), 0);
        assert_int_equal(t, T_2024 * 1000000);
        assert_int_equal(timesrc_parse_rfc3339("2024-06-15T07:00:45-05:30", &t), 0);
        assert_int_equal(t, T_2024 * 1000000);
        assert_int_equal(timesrc_parse_rfc3339("2024-06-15T12:30:45.25+00:00", &t), 0);
        assert_int_equal(t, T_2024 * 1000000 + 250000);
        /* crossing midnight and a leap day */
        assert_int_equal(timesrc_parse_rfc3339("2024-03-01T01:00:00+02:00", &t), 0);
        assert_int_equal(t, (INT64_C(1709254800) - 7200) * 1000000);
        assert_int_equal(timesrc_parse_rfc3339("2024-02-29T23:00:00Z", &t), 0);
        assert_int_equal(t, INT64_C(1709247600) * 1000000);
}

static void test_parse_invalid(void **state) {
        static const char *const bad[] = {
                "",
                "2024-06-15",
                "2024-06-15T12:30:45",      /* no zone */
                "2024-06-15 12:30:45Z",     /* space for T */
                "2024-06-15T12:30:45.Z",    /* empty fraction */
                "2024-06-15T12:30:45+0200", /* offset without colon */
                "2024-06-15T12:30:45+02",
                "2024-06-15T12:30:45+02:00x",
                "2024-06-15T12:30:45Zjunk",
                "2024-13-15T12:30:45Z",
                "2024-06-00T12:30:45Z",
                "2024-06-15T24:00:00Z",
                "2024-06-15T12:60:00Z",
                "2024-06-15T-1:30:45Z",
                "2024-6-15T12:30:45Z",
                " 2024-06-15T12:30:45Z",
                "2024-06-15T12:30:45+24:00",
                "abcd-ef-ghTij:kl:mnZ",
        };
        int64_t t = 77;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                if (timesrc_parse_rfc3339(bad[i], &t) != -EINVAL)
                        fail_msg("accepted \"%s\"", bad[i]);
        }
        assert_int_equal(timesrc_parse_rfc3339(NULL, &t), -EINVAL);
        assert_int_equal(t, 77); /* untouched on failure */
}

static void test_duration(void **state) {
        static const struct {
                const char *s;
                uint64_t usec;
        } good[] = {
                { "0", 0 },
                { "90", 90 * USEC_PER_SEC },
                { "90s", 90 * USEC_PER_SEC },
                { "5m", 300 * USEC_PER_SEC },
                { "1h30m", 5400 * USEC_PER_SEC },
                { "1.5m", 90 * USEC_PER_SEC },
                { ".5s", 500 * USEC_PER_MSEC },
                { "5.s", 5 * USEC_PER_SEC },
                { "250ms", 250 * USEC_PER_MSEC },
                { "1m0.5s", 60 * USEC_PER_SEC + 500 * USEC_PER_MSEC },
                { "10us", 10 },
                { "0.0000001s", 0 },
                { "1.0000001h", 3600 * USEC_PER_SEC + 360 },
                { "2562047h", UINT64_C(2562047) * 3600 * USEC_PER_SEC }, /* Go's largest whole hour */
        };
        static const char *const bad[] = {
                "",     "inf",  "nan",   "INF",   "infinity", "-inf", "1e30h", "1e3",
                "1E3s", "0x10", "0x10s", "+5s",   "-5s",      " 5s",  "5s ",   "5x",
                "s",    ".",    ".s",    "5..5s", "1h-5m",    "5 s",  "nans",  "1d",
        };
        static const char *const too_long[] = {
                "2562048h",
                "99999999999999999999",
                "9999999999999999999999999999999s",
                "153722867m1000000000h",
                "9223372036854s9223372036854s",
        };
        uint64_t v;

        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                v = 12345;
                if (timesrc_parse_duration(good[i].s, &v) != 0)
                        fail_msg("\"%s\" refused", good[i].s);
                if (v != good[i].usec)
                        fail_msg("\"%s\": %llu µs, expected %llu", good[i].s, (unsigned long long)v,
                                 (unsigned long long)good[i].usec);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                v = 12345;
                if (timesrc_parse_duration(bad[i], &v) != -EINVAL)
                        fail_msg("\"%s\" accepted or not -EINVAL", bad[i]);
                assert_int_equal(v, 12345); /* untouched */
        }
        for (size_t i = 0; i < ELEMENTSOF(too_long); i++)
                if (timesrc_parse_duration(too_long[i], &v) != -ERANGE)
                        fail_msg("\"%s\" not -ERANGE", too_long[i]);
        assert_int_equal(timesrc_parse_duration(NULL, &v), -EINVAL);
}

static void test_format(void **state) {
        char buf[32];
        int64_t t;

        assert_int_equal(timesrc_format_rfc3339(T_2024 * 1000000 + 999999, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "2024-06-15T12:30:45Z"); /* second precision, truncated */
        assert_int_equal(timesrc_format_rfc3339(0, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "1970-01-01T00:00:00Z");
        /* before the epoch rounds down, not towards zero */
        assert_int_equal(timesrc_format_rfc3339(-500000, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "1969-12-31T23:59:59Z");
        assert_int_equal(timesrc_format_rfc3339(T_2024 * 1000000, buf, 10), -ENOBUFS);

        /* round trip */
        assert_int_equal(timesrc_format_rfc3339(T_2024 * 1000000, buf, sizeof(buf)), 0);
        assert_int_equal(timesrc_parse_rfc3339(buf, &t), 0);
        assert_int_equal(t, T_2024 * 1000000);
}

struct uv_test {
        struct dtimer a, b, c;
        int fired_a, fired_b, fired_c;
        uint64_t started, at_a, at_b;
        int order[8];
        int n_order;
};

static void on_a(struct dtimer *t) {
        struct uv_test *u = container_of(t, struct uv_test, a);

        u->fired_a++;
        u->at_a = timesrc_now(t->src);
        u->order[u->n_order++] = 'a';
        /* Re-arm from inside the callback: one-shot timers can be restarted. */
        if (u->fired_a < 2)
                dtimer_start(&u->a, 5 * USEC_PER_MSEC);
}

static void on_b(struct dtimer *t) {
        struct uv_test *u = container_of(t, struct uv_test, b);

        u->fired_b++;
        u->at_b = timesrc_now(t->src);
        u->order[u->n_order++] = 'b';
}

static void on_c(struct dtimer *t) {
        struct uv_test *u = container_of(t, struct uv_test, c);

        u->fired_c++;
}

static void test_uv_timers(void **state) {
        struct timesrc *ts = NULL;
        struct uv_test u = {};
        uv_loop_t loop;
        int64_t real;

        assert_int_equal(uv_loop_init(&loop), 0);
        assert_int_equal(timesrc_uv_new(&loop, &ts), 0);

        real = timesrc_realtime(ts);
        assert_true(real > INT64_C(1600000000) * 1000000); /* a plausible wall clock */

        assert_int_equal(dtimer_init(&u.a, ts, on_a), 0);
        assert_int_equal(dtimer_init(&u.b, ts, on_b), 0);
        assert_int_equal(dtimer_init(&u.c, ts, on_c), 0);
        u.started = timesrc_now(ts);
        dtimer_start(&u.b, 20 * USEC_PER_MSEC);
        dtimer_start(&u.a, 2 * USEC_PER_MSEC);
        dtimer_start(&u.c, 1 * USEC_PER_MSEC);
        assert_true(u.c.armed);
        dtimer_stop(&u.c); /* never fires */
        assert_false(u.c.armed);
        dtimer_stop(&u.c); /* twice is fine */

        assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
        assert_int_equal(u.fired_a, 2);
        assert_int_equal(u.fired_b, 1);
        assert_int_equal(u.fired_c, 0);
        assert_false(u.a.armed);
        assert_false(u.b.armed);
        /* a at +2 ms, again at +7 ms, b at +20 ms; never early */
        assert_int_equal(u.n_order, 3);
        assert_memory_equal(u.order, ((int[]){ 'a', 'a', 'b' }), 3 * sizeof(int));
        assert_true(u.at_a - u.started >= 7 * USEC_PER_MSEC);
        assert_true(u.at_b - u.started >= 20 * USEC_PER_MSEC);

        /* An armed timer released: its handle closes, the callback never runs. */
        dtimer_start(&u.b, 1 * USEC_PER_MSEC);
        dtimer_done(&u.a);
        dtimer_done(&u.b);
        dtimer_done(&u.c);
        dtimer_done(&u.c);                                /* idempotent */
        assert_int_equal(uv_loop_close(&loop), UV_EBUSY); /* closes still pending */
        assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
        assert_int_equal(u.fired_b, 1);
        assert_int_equal(uv_loop_close(&loop), 0);
        timesrc_uv_free(ts);
        timesrc_uv_free(NULL);
}

/* A callback may release its own timer and free the struct that holds it. */
struct self_free {
        struct dtimer t;
        int *count;
};

static void on_self_free(struct dtimer *t) {
        struct self_free *s = container_of(t, struct self_free, t);

        (*s->count)++;
        dtimer_done(&s->t);
        free(s);
}

static void test_uv_done_in_callback(void **state) {
        struct timesrc *ts = NULL;
        uv_loop_t loop;
        int count = 0;

        assert_int_equal(uv_loop_init(&loop), 0);
        assert_int_equal(timesrc_uv_new(&loop, &ts), 0);
        for (int i = 0; i < 3; i++) {
                struct self_free *s = calloc(1, sizeof(*s));

                assert_non_null(s);
                s->count = &count;
                assert_int_equal(dtimer_init(&s->t, ts, on_self_free), 0);
                dtimer_start(&s->t, (uint64_t)i * 500);
        }
        assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
        assert_int_equal(count, 3);
        assert_int_equal(uv_loop_close(&loop), 0);
        timesrc_uv_free(ts);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse),     cmocka_unit_test(test_parse_invalid),
                cmocka_unit_test(test_duration),  cmocka_unit_test(test_format),
                cmocka_unit_test(test_uv_timers), cmocka_unit_test(test_uv_done_in_callback),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
