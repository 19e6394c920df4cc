/* Maintenance windows (serve --maintenance-window): days and wall-clock hours in a
 * time zone, as kured's --reboot-days/--start-time/--end-time/--time-zone, e.g.
 * "mon-fri 22:00-06:00 Europe/Berlin". Time zones are read from the tz database's
 * TZif files (and their POSIX TZ footer) by this module: no setenv("TZ"), no
 * tzset(), no localtime_r() in a running daemon (TZ is process-wide state). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/base/macro.h"

#define MWINDOW_MAX 16 /* windows in one set */

struct tzone;
struct mwindows;

/* A time zone: "UTC", a tz database name read from dir (NULL: $TZDIR, else
 * /usr/share/zoneinfo), e.g. "Europe/Berlin", or a POSIX TZ string such as
 * "CET-1CEST,M3.5.0,M10.5.0/3" (for images without tzdata). -EINVAL with *ret_error
 * (malloc'd) saying why. */
int tzone_load(const char *name, const char *dir, struct tzone **ret, char **ret_error);
void tzone_free(struct tzone *z);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct tzone *, tzone_free);
/* The offset from UTC (seconds east) at t (seconds since the epoch). */
int32_t tzone_offset(const struct tzone *z, int64_t t);

/* Adds the windows of spec: one or more "DAYS HH:MM-HH:MM [ZONE]" separated by ';'.
 * DAYS: mon..sun (or full names), ranges (mon-fri, fri-mon) and lists (mon,wed,sat-sun),
 * or "*" / "daily". END may be 24:00; END before START crosses midnight, and the hours
 * after midnight belong to the day the window opened (fri 22:00-06:00 is open on
 * Saturday at 05:00, not on Friday at 05:00). ZONE defaults to UTC. Wall-clock hours: on
 * the day a DST change skips an hour, that hour is in no window; on the day it repeats
 * one, both are. *w is created on the first call. -EINVAL with *ret_error (malloc'd). */
int mwindows_add(struct mwindows **w, const char *spec, const char *tzdir, char **ret_error);
void mwindows_free(struct mwindows *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct mwindows *, mwindows_free);
size_t mwindows_count(const struct mwindows *w);
/* Whether one of the windows is open at t (µs since the epoch). */
bool mwindows_open(const struct mwindows *w, int64_t t_usec);
/* Whether they are open at t, and the next instant (µs, whole minutes) that changes it:
 * the next opening when closed, the next closing when open; t + 8 days when nothing
 * changes within 8 days (ask again then). */
bool mwindows_next_change(const struct mwindows *w, int64_t t_usec, int64_t *ret_next_usec);
