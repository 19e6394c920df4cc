/* Maintenance windows and the time zones they are written in (mwindow.h). Owns a
 * parsed copy of each zone: the TZif file's 64-bit transitions and its POSIX TZ
 * footer for the years after them. Reads files only in tzone_load (at startup); never
 * touches TZ, tzset() or localtime(): local time is gmtime_r() of t plus the offset. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "drainer/base/mwindow.h"

#define TZIF_MAX_BYTES (256 * 1024) /* the largest zone files are a few KiB */
#define TZ_NAME_MAX    128
#define SCAN_MINUTES   (8 * 24 * 60)

struct tz_rule {
        char kind; /* 'M' (Mm.w.d), 'J' (Jn: 1-365, no Feb 29), 'n' (0-365) */
        int m, w, d, n;
        int32_t time; /* seconds after local midnight; default 02:00 */
};

struct tzone {
        size_t n_trans;
        int64_t *trans;   /* owned, ascending */
        int32_t *offsets; /* owned: the offset from trans[i] on */
        int32_t first_off;
        bool has_footer, has_dst;
        int32_t std_off, dst_off; /* seconds east of UTC */
        struct tz_rule start, end;
};

struct mwindow {
        uint8_t days;     /* bit tm_wday (0 = Sunday): the days it opens */
        int start, end;   /* minutes after midnight; end > start, up to 48 h when crossing */
        struct tzone *tz; /* owned */
};

struct mwindows {
        size_t n;
        struct mwindow w[MWINDOW_MAX];
};

static int fail(char **ret_error, const char *fmt, ...) {
        va_list ap;

        if (ret_error) {
                va_start(ap, fmt);
                if (vasprintf(ret_error, fmt, ap) < 0)
                        *ret_error = NULL;
                va_end(ap);
        }
        return -EINVAL;
}

/* ---- civil time (Howard Hinnant's days_from_civil) ---- */

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
        int64_t era;
        unsigned yoe, doy, doe;

        y -= m <= 2;
        era = (y >= 0 ? y : y - 399) / 400;
        yoe = (unsigned)(y - era * 400);
        doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
        doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        return era * 146097 + (int64_t)doe - 719468;
}

static bool leap_year(int64_t y) {
        return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int64_t year_of(int64_t t) {
        time_t tt = (time_t)t;
        struct tm tm;

        if (!gmtime_r(&tt, &tm))
                return 1970;
        return (int64_t)tm.tm_year + 1900;
}

/* The day (days since the epoch) a rule names in year y. */
static int64_t rule_day(const struct tz_rule *r, int64_t y) {
        static const unsigned mdays[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
        int64_t jan1 = days_from_civil(y, 1, 1), first;
        unsigned len;
        int wd, day;

        if (r->kind == 'J')
                return jan1 + r->n - 1 + (leap_year(y) && r->n >= 60);
        if (r->kind == 'n')
                return jan1 + r->n;
        first = days_from_civil(y, (unsigned)r->m, 1);
        wd = (int)(((first % 7) + 7 + 4) % 7); /* 1970-01-01 was a Thursday */
        day = 1 + (r->d - wd + 7) % 7 + (r->w - 1) * 7;
        len = mdays[r->m - 1] + (r->m == 2 && leap_year(y));
        while ((unsigned)day > len)
                day -= 7;
        return first + day - 1;
}

static int32_t footer_offset(const struct tzone *z, int64_t t) {
        int64_t y, start, end;

        if (!z->has_dst)
                return z->std_off;
        y = year_of(t + z->std_off);
        start = rule_day(&z->start, y) * 86400 + z->start.time - z->std_off;
        end = rule_day(&z->end, y) * 86400 + z->end.time - z->dst_off;
        if (start < end)
                return t >= start && t < end ? z->dst_off : z->std_off;
        return t >= end && t < start ? z->std_off : z->dst_off;
}

int32_t tzone_offset(const struct tzone *z, int64_t t) {
        size_t lo = 0, hi;

        if (!z->n_trans || t < z->trans[0])
                return z->n_trans || !z->has_footer ? z->first_off : footer_offset(z, t);
        if (t >= z->trans[z->n_trans - 1] && z->has_footer)
                return footer_offset(z, t);
        hi = z->n_trans;
        while (hi - lo > 1) {
                size_t mid = lo + (hi - lo) / 2;

                if (z->trans[mid] <= t)
                        lo = mid;
                else
                        hi = mid;
        }
        return z->offsets[lo];
}

/* ---- POSIX TZ strings (the TZif footer, or given as the zone) ---- */

static const char *parse_tz_name(const char *p) {
        const char *s = p;

        if (*p == '<') {
                while (*p && *p != '>')
                        p++;
                return *p == '>' && p - s >= 4 ? p + 1 : NULL;
        }
        while (isalpha((unsigned char)*p))
                p++;
        return p - s >= 3 ? p : NULL;
}

/* [+-]hh[:mm[:ss]], hours up to max_h. */
static const char *parse_hms(const char *p, int max_h, int32_t *ret) {
        int sign = 1, h = 0, m = 0, s = 0;

        if (*p == '+' || *p == '-')
                sign = *p++ == '-' ? -1 : 1;
        if (!isdigit((unsigned char)*p))
                return NULL;
        while (isdigit((unsigned char)*p) && h <= max_h)
                h = h * 10 + (*p++ - '0');
        if (h > max_h)
                return NULL;
        if (*p == ':') {
                p++;
                if (!isdigit((unsigned char)p[0]) || !isdigit((unsigned char)p[1]))
                        return NULL;
                m = (p[0] - '0') * 10 + (p[1] - '0');
                p += 2;
                if (*p == ':') {
                        p++;
                        if (!isdigit((unsigned char)p[0]) || !isdigit((unsigned char)p[1]))
                                return NULL;
                        s = (p[0] - '0') * 10 + (p[1] - '0');
                        p += 2;
                }
                if (m > 59 || s > 59)
                        return NULL;
        }
        *ret = sign * (h * 3600 + m * 60 + s);
        return p;
}

static const char *parse_num(const char *p, int lo, int hi, int *ret) {
        int v = 0;

        if (!isdigit((unsigned char)*p))
                return NULL;
        while (isdigit((unsigned char)*p) && v <= hi)
                v = v * 10 + (*p++ - '0');
        if (v < lo || v > hi)
                return NULL;
        *ret = v;
        return p;
}

static const char *parse_rule(const char *p, struct tz_rule *r) {
        r->time = 7200;
        if (*p == 'M') {
                r->kind = 'M';
                if (!(p = parse_num(p + 1, 1, 12, &r->m)) || *p++ != '.' ||
                    !(p = parse_num(p, 1, 5, &r->w)) || *p++ != '.' || !(p = parse_num(p, 0, 6, &r->d)))
                        return NULL;
        } else if (*p == 'J') {
                r->kind = 'J';
                if (!(p = parse_num(p + 1, 1, 365, &r->n)))
                        return NULL;
        } else {
                r->kind = 'n';
                if (!(p = parse_num(p, 0, 365, &r->n)))
                        return NULL;
        }
        if (*p == '/')
                p = parse_hms(p + 1, 167, &r->time);
        return p;
}

/* "std offset [dst [offset] [,start[/time],end[/time]]]": POSIX offsets are west of UTC. */
static int parse_posix_tz(const char *s, struct tzone *z) {
        const char *p = parse_tz_name(s);
        int32_t off;

        if (!p || !(p = parse_hms(p, 24, &off)))
                return -EINVAL;
        z->std_off = -off;
        z->has_footer = true;
        z->first_off = z->std_off;
        if (!*p)
                return 0;
        if (!(p = parse_tz_name(p)))
                return -EINVAL;
        z->dst_off = z->std_off + 3600;
        if (*p && *p != ',') {
                if (!(p = parse_hms(p, 24, &off)))
                        return -EINVAL;
                z->dst_off = -off;
        }
        /* A zone with a DST name and no rule: POSIX leaves it to the implementation;
         * the tz database never writes one. */
        if (*p != ',' || !(p = parse_rule(p + 1, &z->start)) || *p != ',' ||
            !(p = parse_rule(p + 1, &z->end)) || *p)
                return -EINVAL;
        z->has_dst = true;
        return 0;
}

/* ---- TZif files ---- */

static uint32_t be32(const unsigned char *p) {
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const unsigned char *p) {
        return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

/* Version 2+ only (every tz database release since 2005): its 64-bit block and footer. */
static int parse_tzif(const unsigned char *b, size_t len, struct tzone *z) {
        size_t isut, isstd, leap, timecnt, typecnt, charcnt, v1, off, need;
        const unsigned char *d, *types;

        if (len < 44 || memcmp(b, "TZif", 4) || b[4] < '2')
                return -EINVAL;
        isut = be32(b + 20), isstd = be32(b + 24), leap = be32(b + 28);
        timecnt = be32(b + 32), typecnt = be32(b + 36), charcnt = be32(b + 40);
        if (timecnt > 100000 || typecnt > 256 || charcnt > 10000 || leap > 10000 || isut > 256 ||
            isstd > 256)
                return -EINVAL;
        v1 = timecnt * 5 + typecnt * 6 + charcnt + leap * 8 + isstd + isut;
        off = 44 + v1;
        if (len < off + 44 || memcmp(b + off, "TZif", 4))
                return -EINVAL;
        b += off;
        len -= off;
        isut = be32(b + 20), isstd = be32(b + 24), leap = be32(b + 28);
        timecnt = be32(b + 32), typecnt = be32(b + 36), charcnt = be32(b + 40);
        if (timecnt > 100000 || typecnt == 0 || typecnt > 256 || charcnt > 10000 || leap > 10000 ||
            isut > 256 || isstd > 256)
                return -EINVAL;
        need = 44 + timecnt * 9 + typecnt * 6 + charcnt + leap * 12 + isstd + isut;
        if (len < need)
                return -EINVAL;
        d = b + 44;
        types = d + timecnt * 9;
        z->trans = calloc(timecnt ? timecnt : 1, sizeof(int64_t));
        z->offsets = calloc(timecnt ? timecnt : 1, sizeof(int32_t));
        if (!z->trans || !z->offsets)
                return -ENOMEM;
        for (size_t i = 0; i < timecnt; i++) {
                unsigned idx = d[timecnt * 8 + i];

                if (idx >= typecnt)
                        return -EINVAL;
                z->trans[i] = be64(d + i * 8);
                if (i && z->trans[i] <= z->trans[i - 1])
                        return -EINVAL;
                z->offsets[i] = (int32_t)be32(types + idx * 6);
        }
        z->n_trans = timecnt;
        z->first_off = (int32_t)be32(types); /* type 0: the time before the first transition */
        /* The footer: "\nTZ\n"; empty when the transitions say everything. */
        if (len > need + 1 && b[need] == '\n') {
                const char *f = (const char *)b + need + 1;
                size_t flen = len - need - 1;
                const char *nl = memchr(f, '\n', flen);
                char buf[128];
                int32_t first = z->first_off;

                if (!nl || (size_t)(nl - f) >= sizeof(buf))
                        return -EINVAL;
                if (nl > f) {
                        memcpy(buf, f, (size_t)(nl - f));
                        buf[nl - f] = 0;
                        if (parse_posix_tz(buf, z) < 0)
                                return -EINVAL;
                        z->first_off = first;
                }
        }
        return 0;
}

void tzone_free(struct tzone *z) {
        if (!z)
                return;
        free(z->trans);
        free(z->offsets);
        free(z);
}

static bool tz_name_ok(const char *name) {
        size_t len = strlen(name);

        if (!len || len >= TZ_NAME_MAX || name[0] == '/' || name[0] == '.' || strstr(name, ".."))
                return false;
        for (const char *p = name; *p; p++)
                if (!isalnum((unsigned char)*p) && !strchr("/_+-.", *p))
                        return false;
        return true;
}

static int read_file(const char *path, unsigned char **ret, size_t *ret_len) {
        FILE *f = fopen(path, "rbe");
        unsigned char *b;
        size_t n;

        if (!f)
                return -errno;
        b = malloc(TZIF_MAX_BYTES);
        if (!b) {
                fclose(f);
                return -ENOMEM;
        }
        n = fread(b, 1, TZIF_MAX_BYTES, f);
        fclose(f);
        if (n == TZIF_MAX_BYTES) {
                free(b);
                return -EFBIG;
        }
        *ret = b;
        *ret_len = n;
        return 0;
}

int tzone_load(const char *name, const char *dir, struct tzone **ret, char **ret_error) {
        _cleanup_(tzone_freep) struct tzone *z = NULL;
        _cleanup_free_ unsigned char *b = NULL;
        _cleanup_free_ char *path = NULL;
        size_t len = 0;
        int r;

        z = calloc(1, sizeof(*z));
        if (!z)
                return -ENOMEM;
        if (streq(name, "UTC") || streq(name, "Etc/UTC") || streq(name, "Z")) {
                *ret = TAKE_PTR(z);
                return 0;
        }
        /* A POSIX TZ string (an offset, so a digit; a '/' only in its rules), e.g. "CET-1CEST,M3.5.0,M10.5.0/3". */
        if (!memchr(name, '/', strcspn(name, ",")) && strpbrk(name, "0123456789")) {
                if (parse_posix_tz(name, z) < 0)
                        return fail(ret_error,
                                    "time zone \"%s\": not a POSIX TZ string (e.g. "
                                    "\"CET-1CEST,M3.5.0,M10.5.0/3\") nor a tz database name",
                                    name);
                *ret = TAKE_PTR(z);
                return 0;
        }
        if (!tz_name_ok(name))
                return fail(ret_error, "time zone \"%s\": not a tz database name (e.g. Europe/Berlin, UTC)",
                            name);
        if (!dir)
                dir = secure_getenv("TZDIR");
        if (!dir || !*dir)
                dir = "/usr/share/zoneinfo";
        if (asprintf(&path, "%s/%s", dir, name) < 0) {
                path = NULL;
                return -ENOMEM;
        }
        r = read_file(path, &b, &len);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return fail(ret_error,
                            "time zone \"%s\": cannot read %s: %s (is tzdata installed? a POSIX TZ string "
                            "such as \"CET-1CEST,M3.5.0,M10.5.0/3\" needs no file)",
                            name, path, strerror(-r));
        r = parse_tzif(b, len, z);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return fail(ret_error, "time zone \"%s\": %s is not a TZif file of version 2 or later", name,
                            path);
        *ret = TAKE_PTR(z);
        return 0;
}

/* ---- windows ---- */

static const char *const day_names[7] = { "sunday",   "monday", "tuesday", "wednesday",
                                          "thursday", "friday", "saturday" };

static int parse_day(const char *s, size_t len) {
        for (int i = 0; i < 7; i++)
                if ((len == 3 || len == strlen(day_names[i])) && !strncasecmp(s, day_names[i], len))
                        return i;
        return -1;
}

static int parse_days(const char *s, uint8_t *ret) {
        uint8_t days = 0;

        if (streq(s, "*") || !strcasecmp(s, "daily")) {
                *ret = 0x7f;
                return 0;
        }
        while (*s) {
                size_t len = strcspn(s, ",");
                const char *dash = memchr(s, '-', len);
                int a, b;

                if (dash) {
                        a = parse_day(s, (size_t)(dash - s));
                        b = parse_day(dash + 1, len - (size_t)(dash - s) - 1);
                } else
                        a = b = parse_day(s, len);
                if (a < 0 || b < 0)
                        return -EINVAL;
                for (int d = a;; d = (d + 1) % 7) {
                        days |= 1u << d;
                        if (d == b)
                                break;
                }
                s += len;
                if (*s == ',' && !*++s)
                        return -EINVAL;
        }
        *ret = days;
        return days ? 0 : -EINVAL;
}

static int parse_clock(const char *s, size_t len, int *ret) {
        int h, m;

        if (len != 5 || !isdigit((unsigned char)s[0]) || !isdigit((unsigned char)s[1]) || s[2] != ':' ||
            !isdigit((unsigned char)s[3]) || !isdigit((unsigned char)s[4]))
                return -EINVAL;
        h = (s[0] - '0') * 10 + (s[1] - '0');
        m = (s[3] - '0') * 10 + (s[4] - '0');
        if (m > 59 || h > 24 || (h == 24 && m))
                return -EINVAL;
        *ret = h * 60 + m;
        return 0;
}

static int add_one(struct mwindows *w, const char *spec, const char *tzdir, char **ret_error) {
        char days_s[64] = "", hours_s[32] = "", zone_s[TZ_NAME_MAX] = "", extra[2] = "";
        struct mwindow *mw;
        const char *dash;
        int n, r;

        n = sscanf(spec, " %63s %31s %127s %1s", days_s, hours_s, zone_s, extra);
        if (n < 2 || n > 3)
                return fail(ret_error,
                            "\"%s\": expected DAYS HH:MM-HH:MM [ZONE], e.g. \"mon-fri 22:00-06:00 "
                            "Europe/Berlin\"",
                            spec);
        if (w->n >= MWINDOW_MAX)
                return fail(ret_error, "more than %d maintenance windows", MWINDOW_MAX);
        mw = &w->w[w->n];
        *mw = (struct mwindow){};
        if (parse_days(days_s, &mw->days) < 0)
                return fail(ret_error,
                            "\"%s\": days \"%s\": expected mon..sun, ranges (mon-fri) and lists (sat,sun), "
                            "or * for every day",
                            spec, days_s);
        dash = strchr(hours_s, '-');
        if (!dash || parse_clock(hours_s, (size_t)(dash - hours_s), &mw->start) < 0 ||
            parse_clock(dash + 1, strlen(dash + 1), &mw->end) < 0 || mw->start == 24 * 60)
                return fail(ret_error, "\"%s\": hours \"%s\": expected HH:MM-HH:MM (00:00 to 24:00)", spec,
                            hours_s);
        if (mw->start == mw->end)
                return fail(ret_error,
                            "\"%s\": hours \"%s\": the window opens and closes at once (00:00-24:00 for the "
                            "whole day)",
                            spec, hours_s);
        if (mw->end < mw->start)
                mw->end += 24 * 60; /* crosses midnight: ends the next day */
        r = tzone_load(n == 3 ? zone_s : "UTC", tzdir, &mw->tz, ret_error);
        if (r < 0)
                return r;
        w->n++;
        return 0;
}

int mwindows_add(struct mwindows **w, const char *spec, const char *tzdir, char **ret_error) {
        _cleanup_free_ char *copy = NULL;
        char *p, *save = NULL;
        bool any = false;
        int r;

        if (!*w && !(*w = calloc(1, sizeof(**w))))
                return -ENOMEM;
        copy = strdup(spec);
        if (!copy)
                return -ENOMEM;
        for (p = strtok_r(copy, ";", &save); p; p = strtok_r(NULL, ";", &save)) {
                if (!p[strspn(p, " \t")])
                        continue;
                r = add_one(*w, p, tzdir, ret_error);
                if (r < 0)
                        return r;
                any = true;
        }
        if (!any)
                return fail(ret_error, "empty maintenance window: expected DAYS HH:MM-HH:MM [ZONE]");
        return 0;
}

void mwindows_free(struct mwindows *w) {
        if (!w)
                return;
        for (size_t i = 0; i < w->n; i++)
                tzone_free(w->w[i].tz);
        free(w);
}

size_t mwindows_count(const struct mwindows *w) {
        return w ? w->n : 0;
}

static bool window_open(const struct mwindow *mw, int64_t t) {
        time_t lt = (time_t)(t + tzone_offset(mw->tz, t));
        struct tm tm;
        int min, yday;

        if (!gmtime_r(&lt, &tm))
                return false;
        min = tm.tm_hour * 60 + tm.tm_min;
        yday = (tm.tm_wday + 6) % 7;
        if ((mw->days & (1u << tm.tm_wday)) && min >= mw->start && min < mw->end)
                return true;
        /* the part after midnight of a window that opened yesterday */
        return mw->end > 24 * 60 && (mw->days & (1u << yday)) && min < mw->end - 24 * 60;
}

bool mwindows_open(const struct mwindows *w, int64_t t_usec) {
        int64_t t = t_usec / 1000000;

        for (size_t i = 0; w && i < w->n; i++)
                if (window_open(&w->w[i], t))
                        return true;
        return false;
}

bool mwindows_next_change(const struct mwindows *w, int64_t t_usec, int64_t *ret_next_usec) {
        bool open = mwindows_open(w, t_usec);
        int64_t t = t_usec / 1000000;

        /* Minute by minute (every window starts and ends on a local minute): at most
         * 11,520 steps, once per change of the state, not per node. */
        t = (t / 60 + 1) * 60;
        for (int i = 0; i < SCAN_MINUTES; i++, t += 60)
                if (mwindows_open(w, t * 1000000) != open) {
                        *ret_next_usec = t * 1000000;
                        return open;
                }
        *ret_next_usec = t_usec + (int64_t)SCAN_MINUTES * 60 * 1000000;
        return open;
}
