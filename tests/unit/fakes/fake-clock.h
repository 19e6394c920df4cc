/* A fake time source for unit tests: time stands still until the test calls
 * fake_clock_advance(), which fires the timers that fall due in order of due
 * time (ties in arming order), each with now() equal to its due time, including
 * timers armed by those callbacks within the advanced window. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "drainer/base/timesrc.h"

struct fake_clock;

/* mono_start: the first now() in µs; real_start: the wall clock at that moment (µs
 * since the epoch). Returns NULL on out of memory. */
struct fake_clock *fake_clock_new(uint64_t mono_start, int64_t real_start);
/* Timers still initialized (not dtimer_done()) are a test bug: asserted. NULL ok. */
void fake_clock_free(struct fake_clock *c);
struct timesrc *fake_clock_timesrc(struct fake_clock *c);
struct fake_clock *fake_clock_from_timesrc(struct timesrc *s);

uint64_t fake_clock_now(const struct fake_clock *c);
/* Moves time forward by usec, firing due timers on the way. usec 0 fires what is
 * due now. Aborts the test (assert) after FAKE_CLOCK_MAX_FIRES in one call: a timer
 * that keeps re-arming itself at 0 delay is a busy loop. */
#define FAKE_CLOCK_MAX_FIRES 100000u
void fake_clock_advance(struct fake_clock *c, uint64_t usec);
/* Advances to the next armed timer's due time (if any, and not beyond limit_usec
 * from now) and fires it and whatever falls due with it. Returns 1 if a timer
 * fired, 0 if nothing was due within the limit (time then moved by limit_usec). */
int fake_clock_step(struct fake_clock *c, uint64_t limit_usec);

/* Introspection. */
size_t fake_clock_timers(const struct fake_clock *c);  /* initialized */
size_t fake_clock_armed(const struct fake_clock *c);   /* armed now */
uint64_t fake_clock_fired(const struct fake_clock *c); /* callbacks run so far */
/* Due time of the earliest armed timer; UINT64_MAX if none. */
uint64_t fake_clock_next_due(const struct fake_clock *c);
