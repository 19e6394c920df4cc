/* Time source: monotonic and wall clocks plus one-shot timers. The real one
 * runs on libuv; tests use a fake (tests/unit/fakes/fake-clock.c) whose time
 * moves only when the test advances it. Nothing else reads clocks directly. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define USEC_PER_MSEC UINT64_C(1000)
#define USEC_PER_SEC  UINT64_C(1000000)

struct timesrc;
struct dtimer;

typedef void (*dtimer_fn)(struct dtimer *t);

/* A one-shot timer embedded in its owner; use container_of in the callback. */
struct dtimer {
        struct timesrc *src; /* borrowed */
        dtimer_fn cb;
        void *impl;   /* owned by the time source */
        uint64_t due; /* monotonic µs, valid while armed */
        bool armed;
};

struct timesrc_ops {
        uint64_t (*now)(struct timesrc *s);     /* monotonic µs */
        int64_t (*realtime)(struct timesrc *s); /* µs since the Unix epoch */
        int (*timer_init)(struct timesrc *s, struct dtimer *t);
        void (*timer_arm)(struct timesrc *s, struct dtimer *t); /* t->due is set */
        void (*timer_disarm)(struct timesrc *s, struct dtimer *t);
        void (*timer_done)(struct timesrc *s, struct dtimer *t); /* release impl; may defer */
};

struct timesrc {
        const struct timesrc_ops *ops;
};

static inline uint64_t timesrc_now(struct timesrc *s) {
        return s->ops->now(s);
}

static inline int64_t timesrc_realtime(struct timesrc *s) {
        return s->ops->realtime(s);
}

int dtimer_init(struct dtimer *t, struct timesrc *src, dtimer_fn cb);
/* (Re)arms the timer to fire once after the given delay. */
void dtimer_start(struct dtimer *t, uint64_t after_usec);
void dtimer_stop(struct dtimer *t);
/* Stops the timer and releases what the time source holds for it. The
 * struct dtimer itself may be freed right after this returns. */
void dtimer_done(struct dtimer *t);

struct uv_loop_s;
/* The real time source over a libuv loop. Its timers own uv handles that are
 * closed asynchronously: run the loop after dtimer_done() before uv_loop_close(). */
int timesrc_uv_new(struct uv_loop_s *loop, struct timesrc **ret);
void timesrc_uv_free(struct timesrc *s);

/* kubectl-style durations: a sequence of numbers, each with a unit (h, m, s, ms,
 * us) or none (seconds): "90", "90s", "1.5m", "1h30m", "0". Only decimal digits
 * and one '.' make a number: "inf", "nan", "1e30h", "0x10", "+5" and " 5" are
 * -EINVAL; anything longer than Go's time.Duration holds (about 292 years)
 * -ERANGE. */
int timesrc_parse_duration(const char *s, uint64_t *ret_usec);

/* RFC 3339 helpers (UTC, second precision for output). */
int timesrc_format_rfc3339(int64_t usec, char *buf, size_t size);
int timesrc_parse_rfc3339(const char *s, int64_t *ret_usec);
/* A MicroTime as the API server wants it: "2026-11-29T15:00:00.123456Z". */
int timesrc_format_micro(int64_t usec, char *buf, size_t size);
