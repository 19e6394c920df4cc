/* mwindow: time zones read from TZif files and POSIX TZ strings without TZ, and
 * maintenance windows: open, closed, crossing midnight, the days a DST change skips
 * or repeats an hour, the next change, and bad input refused with a message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "drainer/base/macro.h"
#include "drainer/base/mwindow.h"
#include "drainer/base/timesrc.h"

#define ZONES       FIXTURES "/zoneinfo"
#define BERLIN_RULE "CET-1CEST,M3.5.0,M10.5.0/3"

static int64_t at(const char *rfc3339) {
        int64_t t;

        assert_int_equal(timesrc_parse_rfc3339(rfc3339, &t), 0);
        return t;
}

static struct mwindows *windows(const char *spec) {
        struct mwindows *w = NULL;
        char *err = NULL;
        int r = mwindows_add(&w, spec, ZONES, &err);

        if (r < 0)
                fail_msg("%s: %s", spec, err ? err : "?");
        free(err);
        return w;
}

static void test_zone_offsets(void **state) {
        struct tzone *z = NULL, *p = NULL, *s = NULL, *sp = NULL;
        char *err = NULL;

        assert_int_equal(tzone_load("Europe/Berlin", ZONES, &z, &err), 0);
        assert_int_equal(tzone_load(BERLIN_RULE, ZONES, &p, &err), 0);
        assert_int_equal(tzone_load("Australia/Sydney", ZONES, &s, &err), 0);
        assert_int_equal(tzone_load("AEST-10AEDT,M10.1.0,M4.1.0/3", ZONES, &sp, &err), 0);
        assert_int_equal(tzone_offset(z, at("2026-01-15T12:00:00Z") / 1000000), 3600);
        assert_int_equal(tzone_offset(z, at("2026-07-15T12:00:00Z") / 1000000), 7200);
        /* 2026-03-29 01:00Z: 02:00 CET becomes 03:00 CEST; 2026-10-25 01:00Z back */
        assert_int_equal(tzone_offset(z, at("2026-03-29T00:59:59Z") / 1000000), 3600);
        assert_int_equal(tzone_offset(z, at("2026-03-29T01:00:00Z") / 1000000), 7200);
        assert_int_equal(tzone_offset(z, at("2026-10-25T00:59:59Z") / 1000000), 7200);
        assert_int_equal(tzone_offset(z, at("2026-10-25T01:00:00Z") / 1000000), 3600);
        assert_int_equal(tzone_offset(s, at("2026-01-15T12:00:00Z") / 1000000), 11 * 3600);
        assert_int_equal(tzone_offset(s, at("2026-07-15T12:00:00Z") / 1000000), 10 * 3600);

        /* The file and its rule agree, every 3 hours from 2024 to beyond the file's last
         * transition (the footer takes over), both hemispheres. */
        for (int64_t t = at("2024-01-01T00:00:00Z") / 1000000; t < at("2045-01-01T00:00:00Z") / 1000000;
             t += 3 * 3600) {
                assert_int_equal(tzone_offset(z, t), tzone_offset(p, t));
                assert_int_equal(tzone_offset(s, t), tzone_offset(sp, t));
        }
        tzone_free(z);
        tzone_free(p);
        tzone_free(s);
        tzone_free(sp);
}

/* The C library's answer, in this test process only (the daemon never sets TZ). */
static void test_zone_matches_libc(void **state) {
        struct tzone *z = NULL;
        char *err = NULL;

        if (access("/usr/share/zoneinfo/Europe/Berlin", R_OK) < 0)
                skip();
        assert_int_equal(tzone_load("Europe/Berlin", "/usr/share/zoneinfo", &z, &err), 0);
        setenv("TZ", ":Europe/Berlin", 1);
        tzset();
        for (time_t t = (time_t)(at("1990-01-01T00:00:00Z") / 1000000);
             t < (time_t)(at("2060-01-01T00:00:00Z") / 1000000); t += 7 * 3600 + 17) {
                struct tm tm;

                assert_non_null(localtime_r(&t, &tm));
                assert_int_equal(tzone_offset(z, t), tm.tm_gmtoff);
        }
        unsetenv("TZ");
        tzset();
        tzone_free(z);
}

static void test_window_crossing_midnight(void **state) {
        struct mwindows *w = windows("mon-fri 22:00-06:00 Europe/Berlin");
        int64_t next;

        /* 2026-03-02 is a Monday; Berlin is UTC+1 then */
        assert_false(mwindows_open(w, at("2026-03-02T20:59:00Z")));
        assert_true(mwindows_open(w, at("2026-03-02T21:00:00Z")));
        assert_true(mwindows_open(w, at("2026-03-03T04:59:59Z"))); /* Tue 05:59 */
        assert_false(mwindows_open(w, at("2026-03-03T05:00:00Z")));
        /* Friday's window runs into Saturday; none opens on Saturday or Sunday */
        assert_true(mwindows_open(w, at("2026-03-07T04:00:00Z")));
        assert_false(mwindows_open(w, at("2026-03-07T21:30:00Z")));
        assert_false(mwindows_open(w, at("2026-03-09T04:00:00Z"))); /* Mon 05:00: Sunday's hours */
        assert_false(mwindows_next_change(w, at("2026-03-02T11:00:00Z"), &next));
        assert_int_equal(next, at("2026-03-02T21:00:00Z"));
        assert_true(mwindows_next_change(w, at("2026-03-02T21:00:00Z"), &next));
        assert_int_equal(next, at("2026-03-03T05:00:00Z"));
        /* closed from Saturday 06:00 to Monday 22:00 */
        assert_false(mwindows_next_change(w, at("2026-03-07T05:00:00Z"), &next));
        assert_int_equal(next, at("2026-03-09T21:00:00Z"));
        mwindows_free(w);
}

static void test_window_dst(void **state) {
        struct mwindows *w = windows("sun 01:00-04:00 Europe/Berlin");
        int64_t next;

        /* 2026-03-29: 01:00 CET is 00:00Z, 04:00 CEST is 02:00Z: two hours long */
        assert_false(mwindows_open(w, at("2026-03-28T23:59:00Z")));
        assert_true(mwindows_open(w, at("2026-03-29T00:00:00Z")));
        assert_true(mwindows_next_change(w, at("2026-03-29T00:30:00Z"), &next));
        assert_int_equal(next, at("2026-03-29T02:00:00Z"));
        mwindows_free(w);

        /* an hour the change skips is in no window that day: the next is on Monday */
        w = windows("* 02:00-03:00 Europe/Berlin");
        assert_false(mwindows_next_change(w, at("2026-03-28T12:00:00Z"), &next));
        assert_int_equal(next, at("2026-03-30T00:00:00Z"));
        mwindows_free(w);

        /* an hour it repeats is in it twice: 2026-10-25 02:00-03:00 is 00:00Z-02:00Z */
        w = windows("sun 02:00-03:00 " BERLIN_RULE);
        assert_false(mwindows_open(w, at("2026-10-24T23:59:00Z")));
        assert_true(mwindows_open(w, at("2026-10-25T00:30:00Z")));
        assert_true(mwindows_open(w, at("2026-10-25T01:30:00Z")));
        assert_false(mwindows_open(w, at("2026-10-25T02:00:00Z")));
        mwindows_free(w);
}

static void test_window_days_and_lists(void **state) {
        struct mwindows *w = windows("sat,sun 00:00-24:00; fri-mon 12:00-13:00 UTC");
        int64_t next;

        assert_int_equal(mwindows_count(w), 2);
        assert_true(mwindows_open(w, at("2026-03-07T03:00:00Z")));  /* Saturday */
        assert_true(mwindows_open(w, at("2026-03-09T12:30:00Z")));  /* Monday noon */
        assert_false(mwindows_open(w, at("2026-03-10T12:30:00Z"))); /* Tuesday */
        assert_true(mwindows_open(w, at("2026-03-06T12:00:00Z")));  /* Friday noon */
        mwindows_free(w);

        w = windows("daily 00:00-24:00");
        assert_true(mwindows_next_change(w, at("2026-03-06T12:00:00Z"), &next));
        assert_int_equal(next, at("2026-03-14T12:00:00Z")); /* nothing within 8 days: ask again then */
        mwindows_free(w);
}

static void test_window_bad_input(void **state) {
        static const char *const bad[] = {
                "",
                ";",
                "mon-fri",
                "mon-fri 22:00",
                "mon-fri 22:00-",
                "funday 10:00-11:00",
                "mon,,tue 10:00-11:00",
                "mon 25:00-26:00",
                "mon 10:60-11:00",
                "mon 24:00-01:00",
                "mon 10:00-10:00",
                "mon 1:00-2:00",
                "mon 10:00-11:00 Mars/Olympus",
                "mon 10:00-11:00 ../../etc/passwd",
                "mon 10:00-11:00 /etc/localtime",
                "mon 10:00-11:00 CET-1CEST,M13.5.0,M10.5.0",
                "mon 10:00-11:00 UTC extra",
        };
        char *err;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                struct mwindows *w = NULL;

                err = NULL;
                if (mwindows_add(&w, bad[i], ZONES, &err) != -EINVAL)
                        fail_msg("accepted \"%s\"", bad[i]);
                if (!err || !*err)
                        fail_msg("no message for \"%s\"", bad[i]);
                free(err);
                mwindows_free(w);
        }
        /* a file that is not TZif */
        err = NULL;
        {
                struct tzone *z = NULL;

                assert_int_equal(tzone_load("meson.build", FIXTURES "/..", &z, &err), -EINVAL);
                assert_non_null(err);
                free(err);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_zone_offsets),
                cmocka_unit_test(test_zone_matches_libc),
                cmocka_unit_test(test_window_crossing_midnight),
                cmocka_unit_test(test_window_dst),
                cmocka_unit_test(test_window_days_and_lists),
                cmocka_unit_test(test_window_bad_input),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
