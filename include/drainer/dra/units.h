/* systemd unit control as the systemd:UNIT driver-stop strategy sees it: start,
 * stop and read the state of a unit, asynchronously. cmd/ injects it into the
 * engine (sysbus.h implements it over D-Bus: sysbus_units()); unit tests fake it.
 * The engine names no bus. */
#pragma once

/* result: the job's result ("done", "failed", "canceled", "timeout", "dependency",
 * "skipped"), or NULL when error < 0 (the call failed; message may say why). Runs
 * exactly once, never from inside the call that started it. */
typedef void (*unit_job_fn)(int error, const char *result, const char *message, void *userdata);
/* ActiveState of the unit ("active", "inactive", "failed", "activating", ...). */
typedef void (*unit_state_fn)(int error, const char *active_state, void *userdata);

struct unit_ops {
        /* Each returns 0 and calls done later exactly once, or < 0 having started nothing. */
        int (*stop)(void *ctx, const char *unit, unit_job_fn done, void *userdata);
        int (*start)(void *ctx, const char *unit, unit_job_fn done, void *userdata);
        int (*active_state)(void *ctx, const char *unit, unit_state_fn done, void *userdata);
};

/* ops NULL: no unit control here (no system bus). */
struct units {
        const struct unit_ops *ops;
        void *ctx; /* borrowed */
};
