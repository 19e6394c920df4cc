/* The real time source: libuv's loop time for the monotonic clock and timers,
 * CLOCK_REALTIME for the wall clock, plus RFC 3339 conversions. This is the
 * only file that reads clocks. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "drainer/base/macro.h"
#include "drainer/base/timesrc.h"

struct timesrc_uv {
        struct timesrc base;
        uv_loop_t *loop; /* borrowed */
};

struct uv_dtimer {
        uv_timer_t handle;
        struct dtimer *owner; /* NULL once released */
};

static uint64_t uv_src_now(struct timesrc *s) {
        struct timesrc_uv *u = container_of(s, struct timesrc_uv, base);

        uv_update_time(u->loop);
        return uv_now(u->loop) * USEC_PER_MSEC;
}

static int64_t uv_src_realtime(struct timesrc *s) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * (int64_t)USEC_PER_SEC + ts.tv_nsec / 1000;
}

static void on_uv_timer(uv_timer_t *h) {
        struct uv_dtimer *ut = container_of(h, struct uv_dtimer, handle);
        struct dtimer *t = ut->owner;

        if (!t)
                return;
        t->armed = false;
        t->cb(t);
}

static int uv_src_timer_init(struct timesrc *s, struct dtimer *t) {
        struct timesrc_uv *u = container_of(s, struct timesrc_uv, base);
        struct uv_dtimer *ut = calloc(1, sizeof(*ut));
        int r;

        if (!ut)
                return -ENOMEM;
        r = uv_timer_init(u->loop, &ut->handle);
        if (r < 0) {
                free(ut);
                return r;
        }
        ut->owner = t;
        t->impl = ut;
        return 0;
}

static void uv_src_timer_arm(struct timesrc *s, struct dtimer *t) {
        struct uv_dtimer *ut = t->impl;
        uint64_t now = uv_src_now(s);
        uint64_t delay = t->due > now ? t->due - now : 0;

        /* Round up so a timer never fires before its due time. */
        uv_timer_start(&ut->handle, on_uv_timer, (delay + USEC_PER_MSEC - 1) / USEC_PER_MSEC, 0);
}

static void uv_src_timer_disarm(struct timesrc *s, struct dtimer *t) {
        struct uv_dtimer *ut = t->impl;

        uv_timer_stop(&ut->handle);
}

static void on_uv_timer_closed(uv_handle_t *h) {
        free(container_of((uv_timer_t *)h, struct uv_dtimer, handle));
}

static void uv_src_timer_done(struct timesrc *s, struct dtimer *t) {
        struct uv_dtimer *ut = t->impl;

        ut->owner = NULL;
        uv_timer_stop(&ut->handle);
        uv_close((uv_handle_t *)&ut->handle, on_uv_timer_closed);
}

static const struct timesrc_ops uv_ops = {
        .now = uv_src_now,
        .realtime = uv_src_realtime,
        .timer_init = uv_src_timer_init,
        .timer_arm = uv_src_timer_arm,
        .timer_disarm = uv_src_timer_disarm,
        .timer_done = uv_src_timer_done,
};

int timesrc_uv_new(uv_loop_t *loop, struct timesrc **ret) {
        struct timesrc_uv *u = calloc(1, sizeof(*u));

        if (!u)
                return -ENOMEM;
        u->base.ops = &uv_ops;
        u->loop = loop;
        *ret = &u->base;
        return 0;
}

void timesrc_uv_free(struct timesrc *s) {
        if (s)
                free(container_of(s, struct timesrc_uv, base));
}

int dtimer_init(struct dtimer *t, struct timesrc *src, dtimer_fn cb) {
        *t = (struct dtimer){ .src = src, .cb = cb };
        return src->ops->timer_init(src, t);
}

void dtimer_start(struct dtimer *t, uint64_t after_usec) {
        if (t->armed)
                t->src->ops->timer_disarm(t->src, t);
        t->due = timesrc_now(t->src) + after_usec;
        t->armed = true;
        t->src->ops->timer_arm(t->src, t);
}

void dtimer_stop(struct dtimer *t) {
        if (!t->armed)
                return;
        t->armed = false;
        t->src->ops->timer_disarm(t->src, t);
}

void dtimer_done(struct dtimer *t) {
        if (!t->src || !t->impl)
                return;
        dtimer_stop(t);
        t->src->ops->timer_done(t->src, t);
        t->impl = NULL;
}

int timesrc_format_rfc3339(int64_t usec, char *buf, size_t size) {
        /* Floor, not truncation: -0.5 s is 23:59:59 of the day before. */
        int64_t q = usec / (int64_t)USEC_PER_SEC - (usec % (int64_t)USEC_PER_SEC < 0);
        time_t sec = (time_t)q;
        struct tm tm;

        if (!gmtime_r(&sec, &tm))
                return -EINVAL;
        if (strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
                return -ENOBUFS;
        return 0;
}

int timesrc_format_micro(int64_t usec, char *buf, size_t size) {
        int64_t frac = usec % (int64_t)USEC_PER_SEC;
        char sec[32];
        size_t l;
        int r;

        if (frac < 0)
                frac += (int64_t)USEC_PER_SEC;
        r = timesrc_format_rfc3339(usec, sec, sizeof(sec));
        if (r < 0)
                return r;
        l = strlen(sec);
        if (l == 0 || sec[l - 1] != 'Z')
                return -EINVAL;
        sec[l - 1] = 0;
        r = snprintf(buf, size, "%s.%06lldZ", sec, (long long)frac);
        return r < 0 || (size_t)r >= size ? -ENOBUFS : 0;
}

/* Reads n decimal digits; -1 if any is not a digit. */
static int digits(const char *p, int n) {
        int v = 0;

        for (int i = 0; i < n; i++) {
                if (p[i] < '0' || p[i] > '9')
                        return -1;
                v = v * 10 + (p[i] - '0');
        }
        return v;
}

/* Accepts what the API server and exec plugins write: YYYY-MM-DDTHH:MM:SS,
 * optional fraction (digits past microseconds are dropped), then Z or
 * +HH:MM / -HH:MM. The separators 'T'/'Z' may be lower case (RFC 3339 5.6). */
int timesrc_parse_rfc3339(const char *s, int64_t *ret_usec) {
        struct tm tm = {};
        int64_t frac = 0, scale = 100000, sec;
        int off = 0;
        const char *p;

        if (!s || strnlen(s, 20) < 20)
                return -EINVAL;
        tm.tm_year = digits(s, 4);
        tm.tm_mon = digits(s + 5, 2);
        tm.tm_mday = digits(s + 8, 2);
        tm.tm_hour = digits(s + 11, 2);
        tm.tm_min = digits(s + 14, 2);
        tm.tm_sec = digits(s + 17, 2);
        if (s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' || s[16] != ':' ||
            tm.tm_year < 0 || tm.tm_mon < 0 || tm.tm_mday < 0 || tm.tm_hour < 0 || tm.tm_min < 0 ||
            tm.tm_sec < 0)
                return -EINVAL;
        p = s + 19;
        if (*p == '.') {
                p++;
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                for (; *p >= '0' && *p <= '9'; p++) {
                        frac += (*p - '0') * scale;
                        scale /= 10;
                }
        }
        if (*p == 'Z' || *p == 'z')
                p++;
        else if (*p == '+' || *p == '-') {
                int hh, mm;

                if (strnlen(p, 6) < 6 || p[3] != ':')
                        return -EINVAL;
                hh = digits(p + 1, 2);
                mm = digits(p + 4, 2);
                if (hh < 0 || mm < 0 || hh > 23 || mm > 59)
                        return -EINVAL;
                off = (hh * 3600 + mm * 60) * (*p == '-' ? -1 : 1);
                p += 6;
        } else
                return -EINVAL;
        if (*p)
                return -EINVAL;
        if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
            tm.tm_min > 59 || tm.tm_sec > 60)
                return -EINVAL;
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        sec = (int64_t)timegm(&tm) - off;
        *ret_usec = sec * (int64_t)USEC_PER_SEC + frac;
        return 0;
}

/* Go's time.Duration holds at most 2^63-1 ns (about 292 years): nothing longer is a duration. */
#define DURATION_MAX_USEC (UINT64_C(9223372036854775807) / 1000)

int timesrc_parse_duration(const char *s, uint64_t *ret_usec) {
        static const struct {
                const char *name;
                uint64_t usec;
        } units[] = {
                /* longest first: "ms" before "m" */
                { "ms", USEC_PER_MSEC },    { "us", 1 },           { "h", 3600 * USEC_PER_SEC },
                { "m", 60 * USEC_PER_SEC }, { "s", USEC_PER_SEC },
        };
        uint64_t total = 0;
        const char *p = s;

        if (!s || !*s)
                return -EINVAL;
        while (*p) {
                uint64_t whole = 0, frac = 0, frac_scale = 1, unit = USEC_PER_SEC, v;
                const char *start = p;
                size_t ui;

                for (; *p >= '0' && *p <= '9'; p++) {
                        if (whole > (DURATION_MAX_USEC - (uint64_t)(*p - '0')) / 10)
                                return -ERANGE;
                        whole = whole * 10 + (uint64_t)(*p - '0');
                }
                if (*p == '.') {
                        p++;
                        /* Digits past a microsecond of the unit are dropped (the longest unit is
                         * an hour: 10^10 µs, so 10 digits keep every microsecond). */
                        for (; *p >= '0' && *p <= '9'; p++)
                                if (frac_scale < UINT64_C(10000000000)) {
                                        frac = frac * 10 + (uint64_t)(*p - '0');
                                        frac_scale *= 10;
                                }
                }
                /* A number needs a digit: rejects "", ".", "inf", "nan", "+5", " 5", "0x10". */
                if (p == start || (p == start + 1 && *start == '.'))
                        return -EINVAL;
                for (ui = 0; ui < ELEMENTSOF(units); ui++) {
                        size_t n = strlen(units[ui].name);

                        if (strncmp(p, units[ui].name, n) == 0) {
                                unit = units[ui].usec;
                                p += n;
                                break;
                        }
                }
                /* A bare number is seconds; "1e30h": 'e' is no unit. */
                if (ui == ELEMENTSOF(units) && *p)
                        return -EINVAL;
                if (whole > DURATION_MAX_USEC / unit)
                        return -ERANGE;
                v = whole * unit + frac * unit / frac_scale;
                if (v > DURATION_MAX_USEC - total)
                        return -ERANGE;
                total += v;
        }
        *ret_usec = total;
        return 0;
}
